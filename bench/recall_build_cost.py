"""What the context line costs a sync: building LoCoMo's turn documents with and without it (issue 36).

The real redactor, LoCoMo's 5,882 lines as one-message turns, each session's turns in order; for
each round, the documents built without the previous turn (the doc-v2 build) and with it (doc-v3:
that turn is redacted again whole, then the line and the turn together), alternated in one process
so that the machine's load falls on both alike. CPU seconds (``time.process_time``), medians of
``--rounds``. Embedding, the larger part of a sync, is not in these figures: the context line is
not embedded (``chunking.embedding_text``), so a turn that fits one chunk embeds the same text.

    python -m bench.recall_build_cost [--rounds 3] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from bench.common import LOCOMO_PATH, git_commit, loadavg, md_table, median, write_outputs

NAME = "recall_build_cost"


def main(argv: Sequence[str] | None = None) -> int:
    from bench.locomo import lines_of, turn_text
    from indexer.core.documents import turn_document
    from ledger.rows import MessageRow, TurnRow
    from redaction import Redactor

    ap = argparse.ArgumentParser(prog="python -m bench.recall_build_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="at most this many lines")
    args = ap.parse_args(argv)
    data = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
    lines = [ln for s in data for ln in lines_of(s)][: args.limit]
    redactor = Redactor()

    def redact(text: str) -> str:
        return redactor.redact(text).text

    turns = []
    for i, ln in enumerate(lines):
        text = turn_text(ln)
        msg = [MessageRow(f"m{i}", f"t{i}", "user", text, len(text.encode()), 0)]
        same = i > 0 and (lines[i - 1].sample_id, lines[i - 1].session) == (ln.sample_id, ln.session)
        turns.append((TurnRow(f"t{i}", None, "normal", "completed", ln.ts_ms, ln.ts_ms, "m", "p"), msg, same))

    def build(with_context: bool) -> float:
        started = time.process_time()
        for i, (turn, msg, same) in enumerate(turns):
            previous = turns[i - 1][1] if with_context and same else None
            turn_document("p", "s", turn, msg, redact=redact, max_message_bytes=1 << 20, previous=previous)
        return time.process_time() - started

    load0 = loadavg()
    runs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for ctx in (False, True):
            runs[ctx].append(build(ctx))
    plain, ctx = median(runs[False]), median(runs[True])
    rows = [["without the context line (doc-v2)", f"{plain:.2f}", f"{1000 * plain / len(turns):.3f}", "1.00"],
            ["with it (doc-v3)", f"{ctx:.2f}", f"{1000 * ctx / len(turns):.3f}", f"{ctx / plain:.2f}"]]
    md = "\n".join([
        "# Building turn documents with and without the context line (issue 36)\n",
        f"`python -m bench.recall_build_cost --rounds {args.rounds}` at commit {git_commit()}; {len(turns)} LoCoMo "
        f"turns, the real redactor; load average {load0} → {loadavg()}; CPU seconds, median of {args.rounds} "
        "alternated rounds.\n",
        md_table(["documents", "CPU s", "CPU ms per turn", "ratio"], rows),
    ])
    write_outputs(NAME, md, {"plain": runs[False], "context": runs[True], "turns": len(turns)})
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
