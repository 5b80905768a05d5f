"""Redaction evaluation on corpora independent of the redactor's rules (issue 34).

    .venv/bin/python -m bench.redaction_eval [--show 10] [--repeat 3]

Reads tests/data/redaction_eval/ (chat.jsonl and catalog.jsonl from
bench/redaction_eval_gen.py, clean_dev.jsonl copied from public developer
prose, chat_fresh_{tune,heldout}.jsonl and clean_chat_fresh_{tune,heldout}.jsonl
from bench/redaction_fresh_gen.py, and the same four files *_fresh2_* from the second independent
generator bench/redaction_fresh2_gen.py) and ../shared/redaction/clean_chat.jsonl, runs
`redaction.redact` over every line and reports, per split (tune / heldout) and
per family or vendor:

- recall: a line is a hit only if every occurrence of every secret in its
  `secrets` list is gone from the output (also reported: lines where a run of
  12 characters of a secret survives, a stricter partial-leak count);
- lines changed on clean_dev (any change counts) and on the shared clean_chat;
- `keep` violations (a URL's host or path lost with its masked user part);
- idempotence: redact(redact(x)) == redact(x);
- throughput over the chat corpus (MB/s, best of --repeat).

The fresh corpus was written independently of the redactor and is reported in
its own section: recall per family, clean lines changed per family, idempotence,
held-out (odd template numbers) as the headline and tune (even) beside it. Texts
of held-out rows are never printed or written to the outputs (`--show` names
only their family and template); fresh_tune misses and false positives are shown. The headline is the held-out figures, the fresh corpus
first. Writes bench/out/redaction_eval.md and .json. Exit status 0: this is a measurement, the targets are reported, not
enforced.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import SHARED, git_commit, machine, md_table, write_outputs  # noqa: E402

DATA = ROOT / "tests" / "data" / "redaction_eval"
CLEAN_CHAT = SHARED / "redaction" / "clean_chat.jsonl"
RUN = 12          # partial leak: this many consecutive characters of a secret survive
HELDOUT, TUNE = "fresh_heldout", "fresh_tune"
FRESH_CHAT = (DATA / "chat_fresh_heldout.jsonl", DATA / "chat_fresh_tune.jsonl")
FRESH_CLEAN = (DATA / "clean_chat_fresh_heldout.jsonl", DATA / "clean_chat_fresh_tune.jsonl")
# a second independent corpus (bench/redaction_fresh2_gen.py), reported in its own section the same way
HELDOUT2, TUNE2 = "fresh2_heldout", "fresh2_tune"
FRESH2_CHAT = (DATA / "chat_fresh2_heldout.jsonl", DATA / "chat_fresh2_tune.jsonl")
FRESH2_CLEAN = (DATA / "clean_chat_fresh2_heldout.jsonl", DATA / "clean_chat_fresh2_tune.jsonl")
TARGETS = {"chat": 0.97, "catalog": 0.97, "gitleaks": 0.98, "clean_dev_rate": 1 / 300, "fresh_chat": 0.97,
           "fresh_clean_changed": 0}


def load_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def partial_leak(secret: str, out: str, run: int = RUN) -> bool:
    n = min(run, len(secret))
    return any(secret[i:i + n] in out for i in range(len(secret) - n + 1))


def evaluate(rows: Iterable[dict], redact: Callable[[str], object]) -> list[dict]:
    results = []
    for row in rows:
        text = row["text"]
        out = redact(text).text
        again = redact(out).text
        secrets = row.get("secrets", [])
        results.append({
            "row": row,
            "out": out,
            "changed": out != text,
            "missed": [s for s in secrets if s in out],
            "partial": [s for s in secrets if partial_leak(s, out)],
            "keep_lost": [k for k in row.get("keep", []) if k not in out],
            "idempotent": again == out,
        })
    return results


def recall(results: list[dict]) -> dict:
    n = len(results)
    hits = sum(not r["missed"] for r in results)
    return {"lines": n, "hits": hits, "recall": hits / n if n else float("nan"),
            "partial_leaks": sum(bool(r["partial"]) for r in results)}


def pct(d: dict) -> str:
    if not d["lines"]:
        return "–"
    return f"{d['hits']}/{d['lines']} = {d['recall']:.1%}"


def by(results: list[dict], key: Callable[[dict], str]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        groups[key(r["row"])].append(r)
    return dict(sorted(groups.items()))


def split_figures(results: list[dict]) -> dict:
    out = {"all": recall(results)}
    for split, group in by(results, lambda row: row["split"]).items():
        out[split] = recall(group)
    out.setdefault("heldout", recall([]))
    out.setdefault("tune", recall([]))
    return out


def throughput(texts: list[str], redact: Callable[[str], object], repeat: int) -> float:
    size = sum(len(t.encode()) for t in texts)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for t in texts:
            redact(t)
        best = min(best, time.perf_counter() - t0)
    return size / 1e6 / best


def excerpt(text: str, n: int = 160) -> str:
    one = text.replace("\n", "⏎")
    return one if len(one) <= n else one[:n - 1] + "…"


def fresh_figures(r_chat: list[dict], r_clean: list[dict], show: int, heldout: str = HELDOUT, tune: str = TUNE,
                  stem: str = "fresh", gen: str = "redaction_fresh_gen") -> tuple[list[str], dict]:
    """A fresh corpus (`stem` names its files): held-out (odd templates) as the headline, tune (even) beside it.

    `show` prints redacted texts of fresh_tune misses and fresh_tune clean lines changed; of
    fresh_heldout rows it names the family and template id only, never a text."""
    def part(results: list[dict], split: str) -> list[dict]:
        return [r for r in results if r["row"]["split"] == split]

    chat = {s: part(r_chat, s) for s in (heldout, tune)}
    clean = {s: part(r_clean, s) for s in (heldout, tune)}
    fig = {s: recall(chat[s]) for s in chat}
    changed = {s: [r for r in clean[s] if r["changed"]] for s in clean}
    not_idem = [r for r in r_chat + r_clean if not r["idempotent"]]

    def n_changed(s: str) -> str:
        return f"{len(changed[s])}/{len(clean[s])}"

    lines = [
        f"### {stem.capitalize()} corpus (issue 34)",
        "",
        f"`chat_{stem}_*.jsonl` {len(r_chat)} lines ({len({r['row']['template'] for r in r_chat})} templates, "
        f"{len({r['row']['family'] for r in r_chat})} families), `clean_chat_{stem}_*.jsonl` {len(r_clean)} lines "
        f"({len({r['row']['family'] for r in r_clean})} families), from bench/{gen}.py: phrasings "
        "written without sight of the redactor's rules or tests. Held-out: odd template numbers (never read "
        "while tuning, texts never shown); tune: even template numbers.",
        "",
        md_table(["measure", "held-out", "tune", "target"], [
            ["recall, fresh chat credentials", f"**{pct(fig[heldout])}**", pct(fig[tune]),
             f"≥ {TARGETS['fresh_chat']:.0%} held-out"],
            [f"lines with a {RUN}-char run of a secret left", fig[heldout]["partial_leaks"],
             fig[tune]["partial_leaks"], "report"],
            ["fresh clean lines changed (any change)", f"**{n_changed(heldout)}**", n_changed(tune), "0"],
            ["not idempotent (fresh files)", "", f"{len(not_idem)}/{len(r_chat) + len(r_clean)}", "0"],
        ], align=["l", "r", "r", "l"]),
        "",
    ]
    fam_rows, fam_json = [], {}
    for fam, group in by(r_chat, lambda row: row["family"]).items():
        figs = {s: recall(part(group, s)) for s in (heldout, tune)}
        fam_json[fam] = {**figs, "templates": len({r["row"]["template"] for r in group})}
        fam_rows.append([fam, fam_json[fam]["templates"], pct(figs[heldout]), pct(figs[tune]),
                         f"{figs[heldout]['partial_leaks']} / {figs[tune]['partial_leaks']}"])
    lines += [md_table(["fresh family", "templates", "held-out", "tune", "partial leaks (held-out / tune)"],
                       fam_rows), ""]
    clean_rows, clean_json = [], {}
    for fam, group in by(r_clean, lambda row: row["family"]).items():
        counts = {s: {"lines": len(part(group, s)), "changed": sum(r["changed"] for r in part(group, s))}
                  for s in (heldout, tune)}
        clean_json[fam] = counts
        clean_rows.append([fam, f"{counts[heldout]['changed']}/{counts[heldout]['lines']}",
                           f"{counts[tune]['changed']}/{counts[tune]['lines']}"])
    lines += [md_table(["fresh clean family", "held-out changed", "tune changed"], clean_rows), ""]
    missed = {s: sorted({r["row"]["template"] for r in chat[s] if r["missed"]}) for s in chat}
    changed_t = {s: sorted({r["row"]["template"] for r in changed[s]}) for s in changed}
    if show:
        def count(results: list[dict]) -> str:
            n: dict[str, int] = defaultdict(int)
            for r in results:
                n[r["row"]["template"]] += 1
            return ", ".join(f"`{t}` ×{k}" for t, k in sorted(n.items())[:show * 5]) or "none"
        lines += ["Fresh held-out misses by template (ids only): " + count([r for r in chat[heldout] if r["missed"]]),
                  "", "Fresh held-out clean lines changed by template (ids only): " + count(changed[heldout]), "",
                  "Fresh tune misses (redacted output, one per template):", ""]
        seen: set[str] = set()
        for r in chat[tune]:
            if r["missed"] and r["row"]["template"] not in seen and len(seen) < show:
                seen.add(r["row"]["template"])
                lines.append(f"- `{r['row']['template']}` missed {r['missed']}: `{excerpt(r['out'], 400)}`")
        lines += ["", "Fresh tune clean lines changed (redacted output):", ""]
        for r in changed[tune][:show]:
            lines.append(f"- `{r['row']['template']}`: `{excerpt(r['out'], 400)}`")
        lines.append("")
    data = {"chat": fig, "chat_families": fam_json,
            "clean": {s: {"lines": len(clean[s]), "changed": len(changed[s])} for s in clean},
            "clean_families": clean_json, "not_idempotent": len(not_idem),
            "missed_templates": missed, "changed_templates": changed_t}
    return lines, data


def run(show: int, repeat: int) -> tuple[str, dict]:
    import redaction
    from redaction import REDACTION_VERSION, redact

    fingerprint = getattr(redaction, "ruleset_fingerprint", lambda: "none")()

    chat = load_jsonl(DATA / "chat.jsonl")
    catalog = load_jsonl(DATA / "catalog.jsonl")
    clean_dev = load_jsonl(DATA / "clean_dev.jsonl")
    clean_chat = load_jsonl(CLEAN_CHAT) if CLEAN_CHAT.exists() else []
    fresh_chat = [row for p in FRESH_CHAT if p.exists() for row in load_jsonl(p)]
    fresh_clean = [row for p in FRESH_CLEAN if p.exists() for row in load_jsonl(p)]
    fresh2_chat = [row for p in FRESH2_CHAT if p.exists() for row in load_jsonl(p)]
    fresh2_clean = [row for p in FRESH2_CLEAN if p.exists() for row in load_jsonl(p)]

    r_chat = evaluate(chat, redact)
    r_cat = evaluate(catalog, redact)
    r_dev = evaluate(clean_dev, redact)
    r_cc = evaluate(clean_chat, redact)
    r_fchat = evaluate(fresh_chat, redact)
    r_fclean = evaluate(fresh_clean, redact)
    fresh_lines, fresh_data = fresh_figures(r_fchat, r_fclean, show)
    r_f2chat = evaluate(fresh2_chat, redact)
    r_f2clean = evaluate(fresh2_clean, redact)
    fresh2_lines, fresh2_data = fresh_figures(r_f2chat, r_f2clean, show, HELDOUT2, TUNE2, "fresh2",
                                              "redaction_fresh2_gen")
    mb_s = throughput([row["text"] for row in chat], redact, repeat)
    mb_s_dev = throughput([row["text"] for row in clean_dev], redact, repeat)

    chat_fig = split_figures(r_chat)
    cat_fig = split_figures(r_cat)
    gl = [r for r in r_cat if r["row"].get("catalog") == "gitleaks"]
    th = [r for r in r_cat if r["row"].get("catalog") == "trufflehog"]
    gl_fig, th_fig = split_figures(gl), split_figures(th)

    dev_changed = {s: [r for r in r_dev if r["changed"] and (s == "all" or r["row"]["split"] == s)]
                   for s in ("heldout", "tune", "all")}
    dev_n = {s: sum(1 for r in r_dev if s == "all" or r["row"]["split"] == s) for s in ("heldout", "tune", "all")}
    cc_changed = [r for r in r_cc if r["changed"]]
    everything = r_chat + r_cat + r_dev + r_cc
    not_idem = [r for r in everything if not r["idempotent"]]
    keep_rows = [r for r in r_chat if r["row"].get("keep")]
    keep_lost = [r for r in keep_rows if r["keep_lost"]]

    def row3(label: str, fig: dict, target: str) -> list[str]:
        return [label, f"**{pct(fig['heldout'])}**", pct(fig["tune"]), pct(fig["all"]), target]

    def fresh_cell(s: str) -> str:
        return f"{fresh_data['clean'][s]['changed']}/{fresh_data['clean'][s]['lines']}"

    def fresh2_cell(s: str) -> str:
        return f"{fresh2_data['clean'][s]['changed']}/{fresh2_data['clean'][s]['lines']}"

    def dev_cell(s: str) -> str:
        return f"{len(dev_changed[s])}/{dev_n[s]}"

    lines = [
        "## Redaction evaluation (issue 34)",
        "",
        f"Ruleset `{REDACTION_VERSION}`, commit {git_commit()}. "
        f"Corpora: `tests/data/redaction_eval/` — chat {len(chat)} lines "
        f"({len({r['template'] for r in chat})} templates, {len({r['family'] for r in chat})} families), "
        f"catalog {len(catalog)} lines ({len({r['vendor'] for r in catalog})} vendors), clean_dev {len(clean_dev)} "
        f"real excerpts; shared clean_chat {len(clean_chat)} lines. A line is a hit only if every occurrence of "
        "every secret is gone. Headline: held-out (templates, families and vendors never used for tuning).",
        "",
        md_table(["measure", "held-out", "tune", "all", "target"], [
            ["recall, fresh chat corpus (independent; odd templates held out)",
             f"**{pct(fresh_data['chat'][HELDOUT])}**", pct(fresh_data["chat"][TUNE]),
             pct(recall(r_fchat)), f"≥ {TARGETS['fresh_chat']:.0%}"],
            ["fresh clean chat lines changed", f"**{fresh_cell(HELDOUT)}**", fresh_cell(TUNE),
             f"{sum(r['changed'] for r in r_fclean)}/{len(r_fclean)}", "0"],
            ["recall, fresh2 chat corpus (second independent set; odd templates held out)",
             f"**{pct(fresh2_data['chat'][HELDOUT2])}**", pct(fresh2_data["chat"][TUNE2]),
             pct(recall(r_f2chat)), f"≥ {TARGETS['fresh_chat']:.0%}"],
            ["fresh2 clean chat lines changed", f"**{fresh2_cell(HELDOUT2)}**", fresh2_cell(TUNE2),
             f"{sum(r['changed'] for r in r_f2clean)}/{len(r_f2clean)}", "0"],
            row3("recall, chat-style credentials", chat_fig, f"≥ {TARGETS['chat']:.0%}"),
            row3("recall, catalog examples (realistic values)", cat_fig, f"≥ {TARGETS['catalog']:.0%}"),
            row3("recall, gitleaks-derived subset", gl_fig, f"≥ {TARGETS['gitleaks']:.0%}"),
            row3("recall, TruffleHog-style fixtures", th_fig, "report"),
            ["clean_dev excerpts changed (any change)", f"**{dev_cell('heldout')}**", dev_cell("tune"),
             dev_cell("all"), "≤ 1 in 300"],
            ["shared clean_chat lines changed", "", "", f"{len(cc_changed)}/{len(r_cc)}", "0"],
            ["`keep` violations (URL host/path lost)", "", "", f"{len(keep_lost)}/{len(keep_rows)}", "0"],
            ["not idempotent (all files)", "", "", f"{len(not_idem)}/{len(everything)}", "0"],
            ["lines with a 12-char run of a secret left (chat / catalog)", "", "",
             f"{chat_fig['all']['partial_leaks']} / {cat_fig['all']['partial_leaks']}", "report"],
            ["throughput over the chat corpus, per line", "", "", f"{mb_s:.1f} MB/s", "within 1.5× of today"],
            ["throughput over clean_dev (real prose), per excerpt", "", "", f"{mb_s_dev:.1f} MB/s", "report"],
        ], align=["l", "r", "r", "r", "l"]),
        "",
        *fresh_lines,
        *fresh2_lines,
        "### Chat families",
        "",
    ]
    fam_rows = []
    fam_json = {}
    for fam, group in by(r_chat, lambda row: row["family"]).items():
        fig = split_figures(group)
        fam_json[fam] = fig
        fam_rows.append([fam, len({r["row"]["template"] for r in group}), pct(fig["heldout"]), pct(fig["tune"]),
                         f"{fig['all']['recall']:.0%}", fig["all"]["partial_leaks"]])
    lines += [md_table(["family", "templates", "held-out", "tune", "all", "partial leaks"], fam_rows), ""]

    lines += ["### Catalog by source", ""]
    src_rows = []
    src_json = {}
    for src, group in by(r_cat, lambda row: row["catalog"]).items():
        fig = split_figures(group)
        src_json[src] = fig
        src_rows.append([src, len({r["row"]["vendor"] for r in group}), pct(fig["heldout"]), pct(fig["tune"]),
                         f"{fig['all']['recall']:.0%}"])
    lines += [md_table(["catalog", "vendors", "held-out", "tune", "all"], src_rows), ""]

    vendor_json = {}
    missed_vendors = []
    for vendor, group in by(r_cat, lambda row: row["vendor"]).items():
        fig = recall(group)
        vendor_json[vendor] = {"split": group[0]["row"]["split"], **fig}
        if fig["hits"] < fig["lines"]:
            kinds = sorted({r["row"]["family"] for r in group if r["missed"]})
            missed_vendors.append((group[0]["row"]["split"], vendor, f"{fig['hits']}/{fig['lines']}",
                                   ", ".join(kinds)))
    missed_vendors.sort(key=lambda t: (t[0] != "heldout", t[1]))
    lines += [f"Vendors with a miss ({len(missed_vendors)} of {len(vendor_json)}; held-out first):", "",
              md_table(["split", "vendor", "hits", "missed kinds"], missed_vendors), ""]

    lines += ["### clean_dev (real developer prose) by category", ""]
    cat_rows = []
    for cat, group in by(r_dev, lambda row: row["family"]).items():
        cat_rows.append([cat, len(group), sum(r["changed"] for r in group)])
    lines += [md_table(["category", "excerpts", "changed"], cat_rows), ""]

    if show:
        lines += [f"### Examples (up to {show} per list)", ""]
        lines.append("Chat misses (held-out first), redacted output:")
        lines.append("")
        misses = sorted((r for r in r_chat if r["missed"]), key=lambda r: (r["row"]["split"] != "heldout",
                                                                         r["row"]["template"]))
        seen: set[str] = set()
        for r in misses:
            if r["row"]["family"] in seen:
                continue
            seen.add(r["row"]["family"])
            lines.append(f"- `{r['row']['template']}` ({r['row']['split']}): `{excerpt(r['out'])}`")
            if len(seen) >= show:
                break
        lines += ["", "Catalog misses (held-out first):", ""]
        cmiss = sorted((r for r in r_cat if r["missed"]), key=lambda r: (r["row"]["split"] != "heldout",
                                                                        r["row"]["vendor"]))
        for r in cmiss[:show]:
            lines.append(f"- {r['row']['vendor']} ({r['row']['catalog']}, {r['row']['split']}): "
                         f"`{excerpt(r['out'])}`")
        lines += ["", "clean_dev changed:", ""]
        for r in dev_changed["all"][:show]:
            lines.append(f"- {r['row']['family']} <{r['row']['source']}>: `{excerpt(r['out'])}`")
        if cc_changed:
            lines += ["", "clean_chat changed:", ""]
            for r in cc_changed[:show]:
                lines.append(f"- `{excerpt(r['out'])}`")
        if keep_lost:
            lines += ["", "`keep` violations:", ""]
            for r in keep_lost[:show]:
                lines.append(f"- `{excerpt(r['out'])}` lost {r['keep_lost']}")
        if not_idem:
            lines += ["", "Not idempotent:", ""]
            for r in not_idem[:show]:
                lines.append(f"- `{excerpt(r['row']['text'])}`")
        lines.append("")

    def miss_list(results: list[dict]) -> list[dict]:
        return [{"template": r["row"]["template"], "split": r["row"]["split"], "family": r["row"]["family"],
                 "vendor": r["row"].get("vendor"), "text": r["row"]["text"], "out": r["out"], "missed": r["missed"]}
                for r in results if r["missed"]]

    data = {
        "version": REDACTION_VERSION, "fingerprint": fingerprint, "commit": git_commit(),
        "machine": machine(),
        "sizes": {"chat": len(chat), "catalog": len(catalog), "clean_dev": len(clean_dev),
                  "clean_chat": len(clean_chat), "chat_fresh": len(fresh_chat), "clean_chat_fresh": len(fresh_clean),
                  "chat_fresh2": len(fresh2_chat), "clean_chat_fresh2": len(fresh2_clean)},
        "fresh": fresh_data, "fresh2": fresh2_data,
        "chat": chat_fig, "catalog": cat_fig, "gitleaks": gl_fig, "trufflehog": th_fig,
        "chat_families": fam_json, "catalog_sources": src_json, "catalog_vendors": vendor_json,
        "clean_dev": {s: {"changed": len(dev_changed[s]), "lines": dev_n[s]} for s in dev_changed},
        "clean_dev_changed": [{"source": r["row"]["source"], "family": r["row"]["family"], "text": r["row"]["text"],
                               "out": r["out"]} for r in dev_changed["all"]],
        "clean_chat": {"changed": len(cc_changed), "lines": len(r_cc),
                       "changed_texts": [r["row"]["text"] for r in cc_changed]},
        "keep": {"lines": len(keep_rows), "violations": len(keep_lost)},
        "not_idempotent": len(not_idem), "mb_s_chat": mb_s, "mb_s_clean_dev": mb_s_dev, "targets": TARGETS,
        "chat_misses": miss_list(r_chat), "catalog_misses": miss_list(r_cat),
    }
    return "\n".join(lines), data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--show", type=int, default=10, help="examples of misses and false positives to list (0: none)")
    ap.add_argument("--repeat", type=int, default=3, help="throughput: best of this many passes")
    args = ap.parse_args(argv)
    report, data = run(args.show, args.repeat)
    print(report)
    path = write_outputs("redaction_eval", report, data)
    print(f"\nwrote {path} and {path.with_suffix('.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
