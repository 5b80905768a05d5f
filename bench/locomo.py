"""LoCoMo retrieval benchmark through the real pipeline.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, read from ``../shared``, never
copied into the repo) → an Agents Ledger written with :class:`ledger.writer.LedgerWriter`:

- one persona (``locomo``), one ledger session per LoCoMo sample
  (label ``locomo-<sample_id>``), one ledger turn per dialogue line: the line
  is the turn's ``user`` message, ``"<speaker>: <text>"``, plus
  ``" [shares a photo: <blip_caption>]"`` for image turns (the caption the
  LoCoMo paper uses; the image search ``query`` field is *not* used);
- turn id ``<sample_id>-D<session>-<i>`` (e.g. ``conv-26-D1-3`` for dia_id
  ``D1:3``), unique across samples, so every result maps back to its dia_id;
- timestamps: the LoCoMo session's date plus 30 s per line.

Then the real pipeline: ``sync_once`` with the default redactor into LanceDB
(fastembed all-MiniLM-L6-v2 int8, offline) and the QMD exporter, and for every
question of categories 1–4 with at least one valid evidence id, one
``memory_search`` with ``scope="session"`` (the sample's session: the paper
retrieves within one conversation) and ``max_results=25``; recall@k = share of
the gold dia_ids among the top-k retrieved turns, averaged over questions.

The built ledger and index are cached in ``bench/out/locomo-index/<key>/``
(key: hash of the data file, the mapping version and the samples); vectors are
also cached by text in ``bench/out/locomo-index/embed_cache.sqlite``. A run
always calls ``sync_once`` (a no-op tail when nothing changed; a rebuild when
e.g. the redaction version changed).

    python -m bench.locomo [--quick] [--limit-samples N] [--limit-questions N] [--no-qmd] [--no-sweep]
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import math
import re
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import (LOCOMO_PATH, OUT, Timer, file_lock, fmt_s, log, md_table, median, percentile,
                          sha256_file, sha256_json, wait_for_redaction, write_outputs)

NAME = "locomo"
MAPPING_VERSION = "locomo-map-v1"  # bump when the ledger mapping below changes
PERSONA = "locomo"
LABEL_PREFIX = "locomo-"
LINE_STEP_MS = 30_000
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 25)
TOP_K = 25
# LoCoMo paper, Table 3, DRAGON retriever over dialogue turns (percent).
DRAGON = {5: 56.7, 10: 66.2, 25: 76.7}
MODES = ("keyword", "vector", "hybrid", "hybrid-rrf")
DEFAULT_WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
DEFAULT_BM25_KS = (4.0, 8.0)
# Fusion variants run through the real Searcher with indexer.search.fuse_linear / fuse_rrf swapped in-process.
MINMAX_WEIGHTS = (0.3, 0.4, 0.5)
RRF_KS = (10, 60)

_SESSION_KEY = re.compile(r"session_(\d+)")
_TURN_ID = re.compile(r"^(?P<sample>.+)-D(?P<s>\d+)-(?P<i>\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[;\s]+")


# -- the mapping (pure) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    sample_id: str
    session: int
    index: int  # 0-based position in the LoCoMo session
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    ts_ms: int


@dataclass(frozen=True)
class Question:
    sample_id: str
    number: int  # position in the sample's qa list
    question: str
    category: int
    gold: tuple[str, ...]


def parse_session_date(value: str) -> int:
    """``"1:56 pm on 8 May, 2023"`` → epoch ms (read as UTC)."""
    when = dt.datetime.strptime(" ".join(value.split()), "%I:%M %p on %d %B, %Y")
    return int(when.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def session_numbers(conversation: dict) -> list[int]:
    """The ``session_N`` keys that exist (one sample has more date keys than sessions)."""
    nums = []
    for key, value in conversation.items():
        m = _SESSION_KEY.fullmatch(key)
        if m and isinstance(value, list):
            nums.append(int(m.group(1)))
    return sorted(nums)


def lines_of(sample: dict) -> list[Line]:
    conv = sample["conversation"]
    out: list[Line] = []
    for n in session_numbers(conv):
        start = parse_session_date(conv[f"session_{n}_date_time"])
        for i, turn in enumerate(conv[f"session_{n}"]):
            out.append(Line(sample["sample_id"], n, i, turn["dia_id"], turn["speaker"], turn.get("text") or "",
                            turn.get("blip_caption"), start + i * LINE_STEP_MS))
    return out


def session_label(sample_id: str) -> str:
    return f"{LABEL_PREFIX}{sample_id}"


def turn_id_for(sample_id: str, dia_id: str) -> str:
    """``("conv-26", "D1:3")`` → ``"conv-26-D1-3"`` (a safe path segment, unique across samples)."""
    m = re.fullmatch(r"D(\d+):(\d+)", dia_id)
    if not m:
        raise ValueError(f"unexpected dia_id {dia_id!r}")
    return f"{sample_id}-D{int(m.group(1))}-{int(m.group(2))}"


def dia_of(turn_id: str | None) -> tuple[str, str] | None:
    """Inverse of :func:`turn_id_for`: ``"conv-26-D1-3"`` → ``("conv-26", "D1:3")``."""
    m = _TURN_ID.match(turn_id or "")
    if not m:
        return None
    return m.group("sample"), f"D{int(m.group('s'))}:{int(m.group('i'))}"


def turn_text(line: Line) -> str:
    text = f"{line.speaker}: {line.text.strip()}"
    if line.caption:
        text += f" [shares a photo: {line.caption.strip()}]"
    return text


def gold_ids(evidence: Iterable[str], valid: set[str]) -> tuple[str, ...]:
    """Evidence strings split on ';' and whitespace; ids that match no turn are dropped."""
    out: list[str] = []
    for item in evidence or []:
        for part in _EVIDENCE_SPLIT.split(str(item)):
            if part and part in valid and part not in out:
                out.append(part)
    return tuple(out)


def questions_of(sample: dict, valid: set[str]) -> tuple[list[Question], int]:
    """Questions of categories 1–4 with at least one valid gold id, and how many were dropped."""
    qs, dropped = [], 0
    for number, qa in enumerate(sample["qa"]):
        if qa.get("category") not in CATEGORIES:
            continue
        gold = gold_ids(qa.get("evidence", []), valid)
        if not gold:
            dropped += 1
            continue
        qs.append(Question(sample["sample_id"], number, str(qa["question"]), int(qa["category"]), gold))
    return qs, dropped


def limit_questions(per_sample: Sequence[list[Question]], limit: int | None) -> list[Question]:
    """At most ``limit`` questions in all, spread evenly over the samples (first ones of each)."""
    if limit is None:
        return [q for qs in per_sample for q in qs]
    each = math.ceil(limit / max(1, len(per_sample)))
    picked = [q for qs in per_sample for q in qs[:each]]
    return picked[:limit]


def recall_at(retrieved: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of ``gold`` found among the first ``k`` of ``retrieved``."""
    if not gold:
        raise ValueError("recall of a question without gold ids")
    top = set(retrieved[:k])
    return sum(1 for g in set(gold) if g in top) / len(set(gold))


def recalls(retrieved: Sequence[str], gold: Sequence[str], ks: Sequence[int] = KS) -> dict[int, float]:
    return {k: recall_at(retrieved, gold, k) for k in ks}


def aggregate(rows: Sequence[tuple[int, dict[int, float]]], ks: Sequence[int] = KS) -> dict:
    """``rows``: (category, {k: recall}) per question → mean recall (percent) overall and per category."""
    out: dict = {"overall": {"n": len(rows), **{k: _mean_pct(r[k] for _, r in rows) for k in ks}}}
    for cat in sorted(CATEGORIES):
        sel = [r for c, r in rows if c == cat]
        out[cat] = {"n": len(sel), **{k: _mean_pct(r[k] for r in sel) for k in ks}}
    return out


def _mean_pct(values: Iterable[float]) -> float:
    vals = list(values)
    return 100.0 * sum(vals) / len(vals) if vals else float("nan")


# -- ledger ------------------------------------------------------------------------------------------


def write_ledger(samples: Sequence[dict], db_path: Path) -> int:
    from ledger.writer import LedgerWriter

    n = 0
    with LedgerWriter(db_path, seed=4) as w:
        for sample in samples:
            label = session_label(sample["sample_id"])
            for line in lines_of(sample):
                w.turn(label, persona=PERSONA, user=turn_text(line), turn_id=turn_id_for(line.sample_id, line.dia_id),
                       ts=line.ts_ms, model="locomo-dialogue", provider="locomo")
                n += 1
    return n


# -- index (cached) ----------------------------------------------------------------------------------


@dataclass
class Built:
    root: Path
    config: object
    embedder: object
    turns: int
    sync_seconds: float
    sync_mode: str
    docs_written: int
    embedded_now: int
    build_info: dict
    ledger_seconds: float | None = None


class QueryMemo:
    """Wraps an embedder; memoises query vectors (the same question is asked once per mode)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name, self.dim, self.fingerprint, self.max_tokens = inner.name, inner.dim, inner.fingerprint, inner.max_tokens
        self._memo: dict[str, object] = {}

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed(self, texts):
        return self.inner.embed(texts)

    def embed_query(self, text: str):
        v = self._memo.get(text)
        if v is None:
            v = self._memo[text] = self.inner.embed_query(text)
        return v


def index_key(samples: Sequence[dict]) -> str:
    return sha256_json({"data": sha256_file(LOCOMO_PATH), "mapping": MAPPING_VERSION,
                        "samples": [s["sample_id"] for s in samples]})[:16]


def build_index(samples: Sequence[dict], *, allow_no_redaction: bool, rebuild: bool = False) -> Built:
    """Write (once) and sync the ledger of ``samples``; one run at a time per cached index."""
    with file_lock(OUT / "locomo-index" / f".lock-{index_key(samples)}"):
        return _build_index(samples, allow_no_redaction=allow_no_redaction, rebuild=rebuild)


def _build_index(samples: Sequence[dict], *, allow_no_redaction: bool, rebuild: bool) -> Built:
    from indexer.config import load_config
    from indexer.context import Indexer, build_sinks, make_embedder
    from indexer.embeddings import CachedEmbedder
    from indexer.sync import sync_once

    key = index_key(samples)
    base = OUT / "locomo-index"
    root = base / key
    ledger, done = root / "ledger.db", root / "ledger.done"
    if rebuild and root.exists():
        shutil.rmtree(root)
    ledger_seconds = None
    if not done.exists():
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        log(f"writing the LoCoMo ledger ({len(samples)} samples) to {ledger}")
        with Timer() as t:
            turns = write_ledger(samples, ledger)
        ledger_seconds = t.seconds
        done.write_text(json.dumps({"turns": turns, "seconds": round(t.seconds, 1)}))
        log(f"ledger: {turns} turns in {fmt_s(t.seconds)}")
    turns = json.loads(done.read_text())["turns"]

    config = load_config(None, env={}, overrides={
        "ledger": {"path": str(ledger), "personas": [PERSONA]},
        "index": {"dir": str(root / "index"), "sinks": ["lancedb", "qmd"]},
    })
    config.index.dir.mkdir(parents=True, exist_ok=True)
    real = make_embedder(config)  # FastEmbedder(packaged MiniLM) in a CachedEmbedder
    embedder = CachedEmbedder(real.inner, base / "embed_cache.sqlite")  # shared across keys
    kwargs = {}
    if allow_no_redaction:
        from bench.common import redaction_available

        if redaction_available() is not None:
            log("WARNING: redaction package unavailable, indexing WITHOUT redaction (development run)")
            kwargs = {"redact": lambda text: text, "redaction_version": "none-dev"}
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder), **kwargs)
    last = [0.0]

    def progress(persona: str, done_n: int, total: int) -> None:
        if done_n >= 0 and time.monotonic() - last[0] > 20:
            last[0] = time.monotonic()
            log(f"sync {persona}: {done_n}/{total} sessions")

    misses_before = embedder.misses
    texts_before = real.inner.texts_embedded
    log("sync_once (LanceDB + QMD export) ...")
    try:
        with Timer() as t:
            summary = sync_once(ix, progress=progress)
        redaction_version = ix.redaction_version
        if summary.documents_written:
            # the daemon's scheduled maintenance (optimize: every row in the FTS index), so that an
            # incremental build and a rebuild are searched in the same state
            with Timer() as tm:
                for sink in ix.sinks:
                    if hasattr(sink, "maintain"):
                        sink.maintain(force=True)
            log(f"maintain: {fmt_s(tm.seconds)}")
    finally:
        ix.close()
    ps = summary.personas.get(PERSONA)
    embedded_now = real.inner.texts_embedded - texts_before
    info_path = root / "build.json"
    if summary.documents_written:
        info = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "mode": ps.mode if ps else "?",
                "seconds": round(t.seconds, 1), "documents": summary.documents_written,
                "texts_embedded": embedded_now, "cache_misses": embedder.misses - misses_before,
                "redaction": redaction_version,
                "docs_per_s": round(summary.documents_written / t.seconds, 1) if t.seconds else None}
        if embedded_now == 0 and info_path.exists():  # keep the timing of the last real embedding run
            info["first_embedding_build"] = json.loads(info_path.read_text()).get("first_embedding_build") or \
                json.loads(info_path.read_text())
        elif embedded_now:
            info["first_embedding_build"] = {k: info[k] for k in ("when", "seconds", "documents", "texts_embedded",
                                                                  "docs_per_s")}
        info_path.write_text(json.dumps(info, indent=1))
    build_info = json.loads(info_path.read_text()) if info_path.exists() else {}
    build_info["redaction"] = redaction_version
    log(f"sync: mode {ps.mode if ps else '?'}, {summary.documents_written} written, "
        f"{embedded_now} texts embedded, {fmt_s(t.seconds)}")
    return Built(root, config, embedder, turns, t.seconds, ps.mode if ps else "?", summary.documents_written,
                 embedded_now, build_info, ledger_seconds)


# -- searching ---------------------------------------------------------------------------------------


@dataclass
class RunResult:
    name: str
    per_question: list[list[str]] = field(default_factory=list)  # retrieved dia_ids per question
    took_ms: list[float] = field(default_factory=list)
    empty: int = 0
    foreign: int = 0  # results outside the question's sample (must stay 0: scope)
    seconds: float = 0.0


def run_searcher(searcher, qs: Sequence[Question], mode: str, name: str) -> RunResult:
    from indexer.search import SearchRequest

    res = RunResult(name)
    started = time.perf_counter()
    for q in qs:
        req = SearchRequest(query=q.question, persona=PERSONA, session=session_label(q.sample_id), scope="session",
                            sources=["sessions"], max_results=TOP_K, mode=mode)
        resp = searcher.search(req)
        dias = []
        for r in resp.results:
            d = dia_of(r.turn_id)
            if d is None or d[0] != q.sample_id or r.session != session_label(q.sample_id):
                res.foreign += 1
                continue
            dias.append(d[1])
        res.empty += not dias
        res.per_question.append(dias)
        res.took_ms.append(resp.took_ms)
    res.seconds = time.perf_counter() - started
    return res


def weight_constant_is_live() -> bool:
    """Does setting ``indexer.search.VECTOR_WEIGHT`` change ``fuse_linear``? (False: the weight is
    bound as a default argument at import time, so the module constant is not a live knob.)"""
    import indexer.search as S

    saved = S.VECTOR_WEIGHT
    try:
        S.VECTOR_WEIGHT = 0.123
        return abs(S.fuse_linear({"a": 1.0}, {}).get("a", 0.0) - 0.123) < 1e-9
    finally:
        S.VECTOR_WEIGHT = saved


def sweep(searcher, qs: Sequence[Question], weights: Sequence[float], bm25_ks: Sequence[float]) -> list[dict]:
    """Hybrid (linear) recall for each (VECTOR_WEIGHT, BM25_K), set in-process on indexer.search."""
    import indexer.search as S

    orig_fuse, orig_w, orig_k = S.fuse_linear, S.VECTOR_WEIGHT, S.BM25_K
    out = []
    try:
        for k in bm25_ks:
            for w in weights:
                S.VECTOR_WEIGHT, S.BM25_K = w, k
                # The module constant alone may not reach fuse_linear (default argument bound at import):
                # pass the weight explicitly too.
                S.fuse_linear = functools.partial(orig_fuse, weight=w)
                r = run_searcher(searcher, qs, "hybrid", f"w={w} K={k}")
                agg = aggregate([(q.category, recalls(d, q.gold)) for q, d in zip(qs, r.per_question)])
                out.append({"weight": w, "bm25_k": k, "agg": agg, "seconds": r.seconds})
                log(f"sweep w={w} K={k}: R@5 {agg['overall'][5]:.1f} R@10 {agg['overall'][10]:.1f} "
                    f"R@25 {agg['overall'][25]:.1f}")
    finally:
        S.fuse_linear, S.VECTOR_WEIGHT, S.BM25_K = orig_fuse, orig_w, orig_k
    return out


def minmax_fuse(weight: float):
    """A candidate library fusion: min-max normalise each list per query (raw BM25, recovered from
    ``keyword_score``), then ``weight * vector + (1 - weight) * keyword``. Scores stay in 0..1 but become
    relative to the query (``min_score`` would lose its absolute meaning)."""
    import indexer.search as S

    def norm(d: dict[str, float]) -> dict[str, float]:
        if not d:
            return {}
        lo, hi = min(d.values()), max(d.values())
        return {key: (v - lo) / (hi - lo) if hi > lo else 1.0 for key, v in d.items()}

    def fuse(vec: dict[str, float], kw: dict[str, float], weight_: float | None = None) -> dict[str, float]:
        k = S.BM25_K
        raw = {key: (k * x / (1.0 - x) if x < 1.0 else 1e9) for key, x in kw.items()}
        nv, nk = norm(vec), norm(raw)
        return {key: weight * nv.get(key, 0.0) + (1 - weight) * nk.get(key, 0.0) for key in nv.keys() | nk.keys()}

    return fuse


def fusion_variants(linear_searcher, rrf_searcher, qs: Sequence[Question]) -> list[dict]:
    """Hybrid recall with other fusion functions swapped into indexer.search (same candidates, same code path)."""
    import indexer.search as S

    orig_lin, orig_rrf = S.fuse_linear, S.fuse_rrf
    out = []
    try:
        for w in MINMAX_WEIGHTS:
            S.fuse_linear = minmax_fuse(w)
            r = run_searcher(linear_searcher, qs, "hybrid", f"minmax w={w}")
            agg = aggregate([(q.category, recalls(d, q.gold)) for q, d in zip(qs, r.per_question)])
            out.append({"name": f"min-max normalised linear, vector weight {w}", "agg": agg, "seconds": r.seconds})
            log(f"variant minmax w={w}: R@10 {agg['overall'][10]:.1f}")
        S.fuse_linear = orig_lin
        for k in RRF_KS:
            S.fuse_rrf = functools.partial(orig_rrf, k=k)
            r = run_searcher(rrf_searcher, qs, "hybrid", f"rrf k={k}")
            agg = aggregate([(q.category, recalls(d, q.gold)) for q, d in zip(qs, r.per_question)])
            out.append({"name": f"RRF, k={k}", "agg": agg, "seconds": r.seconds})
            log(f"variant rrf k={k}: R@10 {agg['overall'][10]:.1f}")
    finally:
        S.fuse_linear, S.fuse_rrf = orig_lin, orig_rrf
    return out


# -- QMD ---------------------------------------------------------------------------------------------


def qmd_missing() -> str | None:
    try:
        from tests.qmd_tool import missing_reason
    except Exception as exc:  # pragma: no cover
        return f"tests.qmd_tool not importable: {exc}"
    return missing_reason()


def qmd_clis(built: Built, sample_ids: Sequence[str]) -> dict[str, object]:
    """One isolated QMD home (its own index) per sample, one collection over that sample's session folder:
    BM25 statistics and results stay within one conversation, like the scoped search."""
    with file_lock(built.root / ".lock-qmd"):
        return _qmd_clis(built, sample_ids)


def _qmd_clis(built: Built, sample_ids: Sequence[str]) -> dict[str, object]:
    from indexer.safe_names import safe_segment
    from tests.qmd_tool import QmdCli

    sessions = built.config.qmd_export_dir / safe_segment(PERSONA) / "sessions"
    clis = {}
    for sid in sample_ids:
        home = built.root / "qmd-homes" / sid
        marker = home / ".added"
        cli = QmdCli(home)
        folder = sessions / safe_segment(session_label(sid))
        if not folder.is_dir():
            raise SystemExit(f"QMD export folder missing: {folder}")
        if marker.exists():
            cli.update()
        else:
            cli.collection_add(folder, "s")
            marker.write_text("ok")
        clis[sid] = cli
    return clis


def _qmd_dias(hits: list[dict], sample_id: str) -> list[str]:
    out = []
    for hit in hits:
        stem = str(hit.get("file", "")).split("?")[0].rsplit("/", 1)[-1].removesuffix(".md")
        d = dia_of(stem)
        if d and d[0] == sample_id and d[1] not in out:
            out.append(d[1])
    return out


def run_qmd(clis: dict, qs: Sequence[Question], variant: str, workers: int = 2) -> RunResult:
    from indexer.search import query_terms

    def one(q: Question) -> tuple[list[str], float]:
        cli = clis[q.sample_id]
        t0 = time.perf_counter()
        terms = query_terms(q.question)
        if variant == "qmd-search":
            hits = cli.search_json(q.question, TOP_K)
        elif variant == "qmd-search-terms":
            hits = cli.search_json(" ".join(terms), TOP_K) if terms else []
        elif variant == "qmd-lex-or":
            if not terms:
                hits = []
            else:
                p = cli.run("query", "\n".join(f"lex: {t}" for t in terms), "--json", "-n", str(TOP_K), "--no-rerank")
                out = p.stdout.strip()
                hits = json.loads(out) if out else []
        else:
            raise ValueError(variant)
        return _qmd_dias(hits, q.sample_id), (time.perf_counter() - t0) * 1000

    res = RunResult(variant)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for dias, ms in pool.map(one, qs):
            res.per_question.append(dias)
            res.took_ms.append(ms)
            res.empty += not dias
    res.seconds = time.perf_counter() - started
    return res


# -- report ------------------------------------------------------------------------------------------

LABELS = {
    "keyword": "ledger-indexer keyword (LanceDB BM25)",
    "vector": "ledger-indexer vector (MiniLM-L6 int8)",
    "hybrid": "ledger-indexer **hybrid, linear** (default)",
    "hybrid-rrf": "ledger-indexer hybrid, RRF (k=60)",
    "qmd-search": "QMD `search` (BM25, AND of prefix terms), question as is",
    "qmd-search-terms": "QMD `search`, question's content words only (still AND)",
    "qmd-lex-or": "QMD `query` with one `lex:` line per content word, `--no-rerank` (RRF of per-word BM25 = OR)",
}


def _f(x: float) -> str:
    return "–" if x != x else f"{x:.1f}"


def report(ctx: dict) -> str:
    aggs: dict[str, dict] = ctx["aggs"]
    runs: dict[str, RunResult] = ctx["runs"]
    nq = ctx["n_questions"]
    lines = ["## LoCoMo retrieval (issue 4)", ""]
    lines.append(
        f"Data: LoCoMo10 (`../shared/benchmarks/locomo10.json`, CC BY-NC: evaluation only). "
        f"{ctx['n_samples']} samples → one ledger session each, {ctx['turns']:,} dialogue lines → one ledger "
        f"turn each (the line as the turn's `user` text, `\"<speaker>: <text>\"` plus "
        f"`[shares a photo: <blip_caption>]` on image turns; turn id `<sample>-D<s>-<i>` keeps the dia_id). "
        f"Indexed by the real pipeline: `sync_once`, default redactor (`{ctx['redaction']}`), "
        f"fastembed all-MiniLM-L6-v2 int8 (offline), LanceDB + QMD export. "
        f"Questions: categories 1–4 with ≥ 1 valid evidence id: **{nq:,}** "
        f"({ctx['dropped']} of the category 1–4 questions had no evidence id matching a turn and are excluded). "
        f"Each question: one `memory_search` with `scope=\"session\"` (its own conversation), "
        f"`sources=[\"sessions\"]`, `max_results=25`; recall@k = share of gold dia_ids among the top k "
        f"turns, averaged over questions (percent).")
    if ctx.get("limited"):
        lines += ["", f"**Partial run** ({ctx['limited']}): not comparable with the full numbers."]
    lines += ["", "### Overall", ""]
    rows = []
    for name in list(MODES) + [m for m in ("qmd-search", "qmd-search-terms", "qmd-lex-or") if m in aggs]:
        a = aggs[name]["overall"]
        r = runs[name]
        rows.append([LABELS[name], _f(a[5]), _f(a[10]), _f(a[25]), f"{100 * r.empty / max(1, len(r.per_question)):.1f}%",
                     f"{median(r.took_ms):.0f}"])
    rows.append(["DRAGON (LoCoMo paper, Table 3; reference)", _f(DRAGON[5]), _f(DRAGON[10]), _f(DRAGON[25]), "", ""])
    lines.append(md_table(["retriever", "R@5", "R@10", "R@25", "no result", "ms/query (p50)"], rows))
    lines += ["", "ms/query: in-process `Searcher.search` (query embedding + LanceDB) for ledger-indexer; "
                  "a whole `qmd` CLI process (Node start-up included, 2 in parallel) for QMD."]
    if "qmd-search" in runs:
        def empty(name: str) -> str:
            r = runs[name]
            return f"{100 * r.empty / max(1, len(r.per_question)):.0f}%"

        lines += ["", f"QMD: the export of the same ledger (QMD exporter, same sync), one isolated QMD index per "
                      f"sample with one collection over that sample's session folder, `--json -n 25`. QMD's `search` "
                      f"ANDs every term as a prefix match, stop words included, so {empty('qmd-search')} of the "
                      f"questions return nothing; with the content words only it is still an AND "
                      f"({empty('qmd-search-terms')} empty). The typed `query $'lex: w1\\nlex: w2…' --no-rerank` "
                      f"runs offline without a model and RRF-fuses one BM25 list per word (OR-like): it always "
                      f"answers, but per-word RRF loses BM25's term weighting."]
    lines.append("")

    lines += ["### Per category (recall@5 / @10 / @25)", ""]
    rows = []
    for cat in sorted(CATEGORIES):
        for name in list(MODES) + [m for m in ("qmd-search", "qmd-lex-or") if m in aggs]:
            a = aggs[name][cat]
            rows.append([f"{cat} {CATEGORIES[cat]} (n={a['n']})", name, _f(a[5]), _f(a[10]), _f(a[25])])
    lines.append(md_table(["category", "mode", "R@5", "R@10", "R@25"], rows, ["l", "l", "r", "r", "r"]))

    if ctx.get("sweep"):
        lines += ["", "### Linear blend sweep (hybrid, in-process `indexer.search.VECTOR_WEIGHT` / `BM25_K`)", ""]
        rows = []
        best = max(ctx["sweep"], key=lambda s: (s["agg"]["overall"][10], s["agg"]["overall"][5]))
        pick = choose_weight(ctx["sweep"], ctx["default_k"])
        for s in ctx["sweep"]:
            a = s["agg"]["overall"]
            mark = (" ←best R@10" if s is best else "") + (" ←recommended" if s is pick else "")
            if abs(s["weight"] - ctx["default_w"]) < 1e-9 and s["bm25_k"] == ctx["default_k"]:
                mark += " (shipped default)"
            rows.append([f"{s['weight']:.1f}", f"{s['bm25_k']:g}", _f(a[5]), _f(a[10]), _f(a[25]),
                         " / ".join(_f(s["agg"][c][10]) for c in sorted(CATEGORIES)) + mark])
        lines.append(md_table(["VECTOR_WEIGHT", "BM25_K", "R@5", "R@10", "R@25", "R@10 per category 1/2/3/4"], rows))
        if not ctx.get("weight_live"):
            lines += ["", "Note: setting `indexer.search.VECTOR_WEIGHT` alone has no effect: `fuse_linear(..., "
                          "weight=VECTOR_WEIGHT)` binds the default at import time. The sweep also passes the "
                          "weight explicitly (see the library issue in the report)."]
    if ctx.get("variants"):
        lines += ["", "### Other fusions (same candidate lists; the fusion function swapped in `indexer.search` "
                      "in-process, not shipped code)", ""]
        rows = []
        ref = [(f"shipped: linear, VECTOR_WEIGHT {ctx['default_w']}, BM25_K {ctx['default_k']:g}", aggs["hybrid"]),
               (f"shipped: RRF k={ctx['rrf_k']}", aggs["hybrid-rrf"]), ("keyword only", aggs["keyword"])]
        for name, agg in ref + [(v["name"], v["agg"]) for v in ctx["variants"]]:
            a = agg["overall"]
            rows.append([name, _f(a[5]), _f(a[10]), _f(a[25]),
                         " / ".join(_f(agg[c][10]) for c in sorted(CATEGORIES))])
        lines.append(md_table(["fusion", "R@5", "R@10", "R@25", "R@10 per category 1/2/3/4"], rows))
    if ctx.get("recommendation"):
        lines += ["", "**Recommendation:** " + ctx["recommendation"]]

    t = ctx["timing"]
    lines += ["", "### Time", ""]
    bi = ctx["build_info"]
    first = bi.get("first_embedding_build") or {}
    build_line = (f"first index build with embedding: {first.get('documents', '?')} documents "
                  f"({first.get('texts_embedded', '?')} texts embedded, the rest from the vector cache) in "
                  f"{first.get('seconds', '?')} s ({first.get('docs_per_s', '?')} docs/s, {first.get('when', '?')})"
                  if first else "index build time not recorded")
    rows = [
        ["ledger write (LedgerWriter)", fmt_s(t["ledger"]) if t.get("ledger") is not None else "cached"],
        ["sync_once this run", f"{fmt_s(t['sync'])} (mode {ctx['sync_mode']}, {ctx['docs_written']} documents "
                               f"written, {ctx['embedded_now']} texts embedded)"],
        ["index build (cached)", build_line],
    ]
    for name in list(MODES) + [m for m in ("qmd-search", "qmd-search-terms", "qmd-lex-or") if m in runs]:
        rows.append([f"queries: {name}", f"{fmt_s(runs[name].seconds)} for {len(runs[name].per_question)}"])
    if ctx.get("sweep"):
        rows.append(["weight sweep", fmt_s(sum(s["seconds"] for s in ctx["sweep"]))])
    if ctx.get("variants"):
        rows.append(["fusion variants", fmt_s(sum(v["seconds"] for v in ctx["variants"]))])
    rows.append(["total", fmt_s(t["total"])])
    lines.append(md_table(["step", "time"], rows))
    leaks = sum(r.foreign for r in runs.values())
    lines += ["", f"Scope check: {leaks} results outside the question's own session (must be 0)."]
    return "\n".join(lines)


CHOICE_TOLERANCE = 0.5  # R@10 points: differences this small are noise on one dataset


def choose_weight(sweep_rows: Sequence[dict], default_k: float) -> dict:
    """The sweep point to recommend: among points within CHOICE_TOLERANCE R@10 of the best, the largest
    vector weight (keeps the semantic side for paraphrases LoCoMo rarely has), then the current BM25_K."""
    top = max(s["agg"]["overall"][10] for s in sweep_rows)
    near = [s for s in sweep_rows if s["agg"]["overall"][10] >= top - CHOICE_TOLERANCE]
    return max(near, key=lambda s: (s["weight"], s["bm25_k"] == default_k, s["agg"]["overall"][10]))


def recommend(aggs: dict, sweep_rows: list[dict], default_w: float, default_k: float,
              variants: Sequence[dict] = ()) -> str:
    lin, rrf, kw = aggs["hybrid"]["overall"], aggs["hybrid-rrf"]["overall"], aggs["keyword"]["overall"]
    parts = []
    fusion = "linear" if lin[10] >= rrf[10] else "rrf"
    parts.append(f"fusion **{fusion}** (shipped defaults: R@10 linear {lin[10]:.1f} vs RRF k=60 {rrf[10]:.1f}; "
                 f"R@5 {lin[5]:.1f} vs {rrf[5]:.1f}; R@25 {lin[25]:.1f} vs {rrf[25]:.1f})")
    best_r10 = lin[10]
    if sweep_rows:
        pick = choose_weight(sweep_rows, default_k)
        top = max(s["agg"]["overall"][10] for s in sweep_rows)
        cur = next((s for s in sweep_rows if abs(s["weight"] - default_w) < 1e-9 and s["bm25_k"] == default_k), None)
        b = pick["agg"]["overall"]
        best_r10 = max(best_r10, top)
        if cur is not None:
            c = cur["agg"]["overall"]
            if b[10] - c[10] < 1.0:
                parts.append(f"keep VECTOR_WEIGHT={default_w}, BM25_K={default_k:g} (no sweep point is 1 R@10 better)")
            else:
                parts.append(f"set **VECTOR_WEIGHT={pick['weight']}**, BM25_K={pick['bm25_k']:g} "
                             f"(R@10 {c[10]:.1f} → {b[10]:.1f}, R@5 {c[5]:.1f} → {b[5]:.1f}, "
                             f"R@25 {c[25]:.1f} → {b[25]:.1f}; the largest vector weight within "
                             f"{CHOICE_TOLERANCE} R@10 of the best sweep point, {top:.1f}; keyword alone: R@10 {kw[10]:.1f})")
    if variants:
        bv = max(variants, key=lambda v: (v["agg"]["overall"][10], v["agg"]["overall"][5]))
        a = bv["agg"]["overall"]
        if a[10] - best_r10 >= 1.0:
            parts.append(f"a library follow-up worth making: {bv['name']} reaches R@10 {a[10]:.1f} "
                         f"(R@5 {a[5]:.1f}, R@25 {a[25]:.1f}) against {best_r10:.1f} for the best linear setting")
        best_r10 = max(best_r10, a[10])
    verdict = "met" if best_r10 >= 70.0 else "not met"
    parts.append(f"the R@10 ≥ 70 target is **{verdict}** (best setting measured: {best_r10:.1f}; DRAGON "
                 f"{DRAGON[10]}); the vector side (MiniLM-L6 int8, R@10 {aggs['vector']['overall'][10]:.1f}) is "
                 f"the limit, keyword alone gives {kw[10]:.1f}")
    return "; ".join(parts) + "."


# -- main --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.locomo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 samples, 120 questions, small sweep")
    ap.add_argument("--limit-samples", type=int, default=None, help="only the first N LoCoMo samples")
    ap.add_argument("--limit-questions", type=int, default=None,
                    help="at most N questions in all, spread evenly over the samples")
    ap.add_argument("--no-qmd", action="store_true", help="skip the QMD comparison")
    ap.add_argument("--no-sweep", action="store_true", help="skip the VECTOR_WEIGHT / BM25_K sweep")
    ap.add_argument("--no-variants", action="store_true", help="skip the fusion variants (min-max, RRF k)")
    ap.add_argument("--weights", default=",".join(map(str, DEFAULT_WEIGHTS)))
    ap.add_argument("--bm25-k", default=",".join(f"{k:g}" for k in DEFAULT_BM25_KS))
    ap.add_argument("--rebuild", action="store_true", help="drop the cached ledger and index first")
    ap.add_argument("--allow-no-redaction", action="store_true",
                    help="development only: index without redaction if the package is not importable")
    ap.add_argument("--wait-redaction", type=float, default=0.0, help="seconds to wait for the redaction package")
    args = ap.parse_args(argv)
    if args.quick:
        args.limit_samples = args.limit_samples or 2
        args.limit_questions = args.limit_questions or 120
        if args.weights == ",".join(map(str, DEFAULT_WEIGHTS)):
            args.weights = "0.6,0.7,0.8"
        if args.bm25_k == ",".join(f"{k:g}" for k in DEFAULT_BM25_KS):
            args.bm25_k = "4"
    if not args.allow_no_redaction:
        wait_for_redaction(args.wait_redaction, log=log)
    started = time.perf_counter()

    import indexer.search as S
    from indexer.search import Searcher

    data = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
    samples = data[: args.limit_samples] if args.limit_samples else data
    built = build_index(samples, allow_no_redaction=args.allow_no_redaction, rebuild=args.rebuild)

    per_sample, dropped = [], 0
    for s in samples:
        valid = {ln.dia_id for ln in lines_of(s)}
        qs, d = questions_of(s, valid)
        per_sample.append(qs)
        dropped += d
    qs = limit_questions(per_sample, args.limit_questions)
    log(f"{len(qs)} questions ({dropped} dropped: no valid evidence id)")

    default_w, default_k = S.VECTOR_WEIGHT, S.BM25_K
    emb = QueryMemo(built.embedder)
    runs: dict[str, RunResult] = {}
    linear = Searcher(built.config, embedder=emb, fusion="linear")
    rrf = Searcher(built.config, embedder=emb, fusion="rrf")
    try:
        for mode in MODES:
            searcher = rrf if mode == "hybrid-rrf" else linear
            runs[mode] = run_searcher(searcher, qs, "hybrid" if mode == "hybrid-rrf" else mode, mode)
            log(f"{mode}: {fmt_s(runs[mode].seconds)}")
        sweep_rows = []
        if not args.no_sweep:
            weights = [float(x) for x in args.weights.split(",") if x.strip()]
            ks = [float(x) for x in args.bm25_k.split(",") if x.strip()]
            sweep_rows = sweep(linear, qs, weights, ks)
        variants = [] if args.no_variants else fusion_variants(linear, rrf, qs)
    finally:
        linear.close()
        rrf.close()
    weight_live = weight_constant_is_live()

    qmd_note = None
    if not args.no_qmd:
        reason = qmd_missing()
        if reason:
            qmd_note = f"QMD skipped: {reason}"
            log(qmd_note)
        else:
            clis = qmd_clis(built, [s["sample_id"] for s in samples])
            for variant in ("qmd-search", "qmd-search-terms", "qmd-lex-or"):
                runs[variant] = run_qmd(clis, qs, variant)
                log(f"{variant}: {fmt_s(runs[variant].seconds)}, {runs[variant].empty} empty")

    aggs = {name: aggregate([(q.category, recalls(d, q.gold)) for q, d in zip(qs, r.per_question)])
            for name, r in runs.items()}
    for name in runs:
        a = aggs[name]["overall"]
        log(f"{name:18s} R@5 {a[5]:5.1f}  R@10 {a[10]:5.1f}  R@25 {a[25]:5.1f}")
    limited = []
    if args.limit_samples:
        limited.append(f"--limit-samples {args.limit_samples}")
    if args.limit_questions:
        limited.append(f"--limit-questions {args.limit_questions}")
    ctx = {
        "aggs": aggs, "runs": runs, "n_questions": len(qs), "n_samples": len(samples), "turns": built.turns,
        "dropped": dropped, "redaction": built.build_info.get("redaction", "?"), "limited": ", ".join(limited),
        "sweep": sweep_rows, "weight_live": weight_live, "variants": variants, "default_w": default_w,
        "default_k": default_k, "rrf_k": S.RRF_K,
        "recommendation": recommend(aggs, sweep_rows, default_w, default_k, variants),
        "build_info": built.build_info, "sync_mode": built.sync_mode, "docs_written": built.docs_written,
        "embedded_now": built.embedded_now,
        "timing": {"ledger": built.ledger_seconds, "sync": built.sync_seconds,
                   "total": time.perf_counter() - started},
    }
    md = report(ctx)
    if qmd_note:
        md += f"\n\n{qmd_note}"
    raw = {
        "aggs": {n: {str(k): v for k, v in a.items()} for n, a in aggs.items()},
        "sweep": sweep_rows, "variants": variants, "weight_live": weight_live, "n_questions": len(qs), "dropped": dropped,
        "limited": ctx["limited"], "build_info": built.build_info, "timing": ctx["timing"],
        "empty": {n: r.empty for n, r in runs.items()},
        "took_ms_p50": {n: median(r.took_ms) for n, r in runs.items()},
        "took_ms_p95": {n: percentile(r.took_ms, 95) for n, r in runs.items()},
        "foreign_results": {n: r.foreign for n, r in runs.items()},
        "recommendation": ctx["recommendation"],
    }
    path = write_outputs(NAME, md, raw)
    log(f"wrote {path} ({fmt_s(ctx['timing']['total'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
