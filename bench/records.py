"""The recorded result of each benchmark (``bench/results/<name>.md``) and bench/RESULTS.md rendered from them.

A record is the latest run of one benchmark: a front matter (title, command, commit, date, load
average, an optional one-line note), one markdown table, and the rows it adds to the Summary
table. ``python -m bench.run_all`` writes a record from a run's ``bench/out/<name>.json`` and renders
RESULTS.md from every record; nothing else goes into RESULTS.md, so the file is reproducible from
the checked-in records (tests/test_bench_results.py). History and narratives: bench/JOURNAL.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "bench" / "results"
RESULTS_MD = REPO / "bench" / "RESULTS.md"

FRONT_KEYS = ("title", "command", "commit", "date", "load")  # required, in this order
OPTIONAL_KEYS = ("note",)
SUMMARY_HEADER = ("measure", "result", "target", "met", "run")
SUMMARY_MARK = "## summary"


class RecordError(ValueError):
    """A record file that does not follow the format; the message names the file and the fix."""


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    align: tuple[str, ...]  # "l" or "r" per column
    rows: tuple[tuple[str, ...], ...]

    def markdown(self) -> str:
        sep = [":---" if a == "l" else "---:" for a in self.align]
        lines = [_row(self.header), _row(sep)]
        lines += [_row(r) for r in self.rows]
        return "\n".join(lines)


@dataclass(frozen=True)
class Record:
    name: str
    title: str
    command: str
    commit: str
    date: str
    load: str
    table: Table
    summary: tuple[tuple[str, ...], ...] = ()  # rows of SUMMARY_HEADER
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        front = [f"{k}: {getattr(self, k)}" for k in FRONT_KEYS]
        if self.note:
            front.append(f"note: {self.note}")
        parts = ["---", *front, "---", "", self.table.markdown(), ""]
        if self.summary:
            summary = Table(SUMMARY_HEADER, ("l",) * len(SUMMARY_HEADER), self.summary)
            parts += [SUMMARY_MARK, "", summary.markdown(), ""]
        return "\n".join(parts)


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _cells(line: str) -> list[str]:
    """The cells of a markdown table line; ``\\|`` stays inside its cell."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


_SEP = re.compile(r"^:?-{3,}:?$")


def parse_tables(markdown: str) -> list[tuple[str, Table]]:
    """Every table of a markdown text with the heading above it (``""`` when none)."""
    found: list[tuple[str, Table]] = []
    heading = ""
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.lstrip().startswith("|") and i + 1 < len(lines) and lines[i + 1].lstrip().startswith("|"):
            sep = _cells(lines[i + 1])
            if sep and all(_SEP.match(c.replace(" ", "")) for c in sep):
                header = tuple(_cells(line))
                align = tuple("r" if c.strip().endswith(":") and not c.strip().startswith(":") else "l"
                              for c in sep)
                rows = []
                j = i + 2
                while j < len(lines) and lines[j].lstrip().startswith("|"):
                    cells = _cells(lines[j])
                    rows.append(tuple((cells + [""] * len(header))[:len(header)]))
                    j += 1
                found.append((heading, Table(header, align[:len(header)], tuple(rows))))
                i = j
                continue
        i += 1
    return found


def parse(path: Path) -> Record:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        raise RecordError(f"{path}: must begin with a front matter between two '---' lines")
    end = lines.index("---", 1)
    front: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in (*FRONT_KEYS, *OPTIONAL_KEYS):
            raise RecordError(f"{path}: front matter line {line!r}: expected one of "
                              f"{', '.join(FRONT_KEYS + OPTIONAL_KEYS)} as 'key: value'")
        front[key.strip()] = value.strip()
    missing = [k for k in FRONT_KEYS if not front.get(k)]
    if missing:
        raise RecordError(f"{path}: front matter lacks {', '.join(missing)}")
    body = "\n".join(lines[end + 1:])
    result_part, _, summary_part = body.partition("\n" + SUMMARY_MARK + "\n")
    tables = parse_tables(result_part)
    prose = [ln for ln in result_part.splitlines() if ln.strip() and not ln.lstrip().startswith("|")]
    if len(tables) != 1 or prose:
        raise RecordError(f"{path}: the result is exactly one markdown table, nothing else "
                          f"(found {len(tables)} tables, {len(prose)} other lines); narratives go in bench/JOURNAL.md")
    summary: tuple[tuple[str, ...], ...] = ()
    if summary_part.strip():
        st = parse_tables(summary_part)
        if len(st) != 1 or st[0][1].header != SUMMARY_HEADER:
            raise RecordError(f"{path}: after '{SUMMARY_MARK}' one table with the columns {' | '.join(SUMMARY_HEADER)}")
        summary = st[0][1].rows
    return Record(name=path.stem, table=tables[0][1], summary=summary, note=front.get("note", ""),
                  **{k: front[k] for k in FRONT_KEYS})


def load_all(folder: Path = RESULTS_DIR) -> dict[str, Record]:
    return {p.stem: parse(p) for p in sorted(folder.glob("*.md"))}


def write(record: Record, folder: Path = RESULTS_DIR) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record.name}.md"
    path.write_text(record.text(), encoding="utf-8")
    return path


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def render(records: dict[str, Record], order: Sequence[str]) -> str:
    """RESULTS.md: the Summary table, then one section per record (``order`` first, the others by name).
    The same records give the same bytes: nothing here reads the clock, the machine or bench/out."""
    names = [n for n in order if n in records] + sorted(n for n in records if n not in order)
    out = ["# ledger-indexer benchmark results", "",
           "<!-- Rendered by `python -m bench.run_all` (make bench; `--render-only` runs nothing) from "
           "bench/results/*.md. Do not edit: tests/test_bench_results.py compares this file with the render. -->",
           "",
           "The latest recorded run of every benchmark: its command, commit, date and load average, and one table. "
           "How a benchmark contributes its table: [bench/README.md](README.md). The history of these figures, "
           "the runs before and what was tried: [bench/JOURNAL.md](JOURNAL.md).",
           "", "## Summary", "",
           _row(("benchmark", *SUMMARY_HEADER)), _row((":---",) * (len(SUMMARY_HEADER) + 1))]
    for name in names:
        rec = records[name]
        for row in rec.summary:
            out.append(_row((f"[{name}](#{anchor(rec.title)})", *row)))
    for name in names:
        rec = records[name]
        out += ["", f"## {rec.title}", "",
                f"`{rec.command}` · commit `{rec.commit}` · {rec.date} · load average {rec.load}"]
        if rec.note:
            out += ["", rec.note]
        out += ["", rec.table.markdown()]
    return "\n".join(out) + "\n"
