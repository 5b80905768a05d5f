"""MCP over stdio (issue 13): an agent's first ``memory_search``, with and without a running daemon.

What an agent runtime sees when it starts ``ledger-indexer mcp --persona atlas
--session main`` and asks its first question: the SDK's real ``stdio_client``
(in this process) spawns ``python -m indexer.cli --config CFG mcp …``,
``initialize``s, and calls ``memory_search`` once (hybrid, the demo's JWT
question), then once more (a warm call). Timed from the spawn:

- *spawn → initialized*: interpreter start, imports (the MCP SDK alone is
  about a second of CPU), the handshake;
- *first call*: ``initialized`` → the first result;
- *spawn → first result*: the sum, what the issue asks to compare;
- *second call*: a warm call, for scale.

Two indexes of the same demo ledger (``ledger-indexer demo``, lancedb sink):
one served by a running daemon (``ledger-indexer run``, ready and caught up:
the stdio server forwards to its HTTP API and loads nothing), one with no
daemon (the stdio server opens the index and loads the model itself; it starts
doing so in the background at spawn). The two take turns, ABBA…, so the
shared machine's noise falls on both; medians of ``--runs`` runs each. Each
run's door is checked from the server's own log (``mcp.call`` ``door``).

    python -m bench.mcp_latency [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, fmt_s, loadavg, log, md_table, median, write_outputs
from bench.daemon_bench import Daemon, free_port

NAME = "mcp_latency"
QUERY = "what did we decide about JWT expiry for the mobile app?"
RUNS = 9
QUICK_RUNS = 3


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_INDEXER_", "NOTIFY_SOCKET",
                                                                     "WATCHDOG_"))}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("LANCEDB_LOG", "error")
    return env


def demo(root: Path, port: int) -> Path:
    from indexer.cli.demo import write_demo

    config, _ = write_demo(root)
    text = config.read_text().replace('sinks = ["lancedb", "qmd"]', 'sinks = ["lancedb"]')
    config.write_text(text.replace("port = 8765", f"port = {port}"))
    return config


def one_run(config: Path) -> dict:
    """Spawn, initialize, two searches; times in seconds and the door the server used."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, env=child_env(), cwd=str(REPO),
                                   args=["-m", "indexer.cli", "--config", str(config), "mcp", "--persona", "atlas",
                                         "--session", "main"])
    marks: dict[str, float] = {}
    answers: dict[str, dict] = {}

    async def main() -> None:
        marks["spawn"] = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()  # as every agent runtime does before its model can call a tool
                marks["initialized"] = time.perf_counter()
                first = await session.call_tool("memory_search", {"query": QUERY})
                marks["first"] = time.perf_counter()
                second = await session.call_tool("memory_search", {"query": "Postgres version in production"})
                marks["second"] = time.perf_counter()
                answers["first"] = first.structured_content
                for result in (first, second):
                    if result.is_error or not result.structured_content["results"]:
                        raise SystemExit(f"memory_search failed: {result.content[0].text[:300]}")

    with tempfile.TemporaryFile("w+") as errlog:
        anyio.run(main)
        errlog.seek(0)
        events = [json.loads(line) for line in errlog.read().splitlines() if line.startswith("{")]
    calls = [e for e in events if e.get("event") == "mcp.call"]
    doors = sorted({e["door"] for e in calls})
    return {"init_s": marks["initialized"] - marks["spawn"], "first_call_s": marks["first"] - marks["initialized"],
            "first_result_s": marks["first"] - marks["spawn"], "second_call_s": marks["second"] - marks["first"],
            "doors": doors, "index_opened": any(e.get("event") == "mcp.index_opened" for e in events),
            # inside the server: the tool call (forwarding or searching) ...
            "first_call_server_s": calls[0]["ms"] / 1000 if calls else float("nan"),
            # ... and inside Searcher.search (the daemon's or this process's)
            "first_took_s": answers["first"]["took_ms"] / 1000}


def summarize(runs: list[dict]) -> dict:
    out = {key: {"median": median(r[key] for r in runs), "min": min(r[key] for r in runs),
                 "max": max(r[key] for r in runs)}
           for key in ("init_s", "first_call_s", "first_result_s", "second_call_s", "first_call_server_s",
                       "first_took_s")}
    out["n"] = len(runs)
    out["doors"] = sorted({d for r in runs for d in r["doors"]})
    out["index_opened_in_stdio"] = sum(r["index_opened"] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mcp_latency", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} runs each")
    ap.add_argument("--runs", type=int, default=None, help=f"runs per setting (default {RUNS})")
    args = ap.parse_args(argv)
    runs_each = args.runs or (QUICK_RUNS if args.quick or os.environ.get("BENCH_QUICK") == "1" else RUNS)
    started = time.perf_counter()
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        root = Path(tmp)
        with_daemon = demo(root / "with-daemon", free_port())
        without = demo(root / "without-daemon", free_port())
        log("indexing the demo without a daemon (ledger-indexer sync)")
        subprocess.run([sys.executable, "-m", "indexer.cli", "--config", str(without), "sync"], cwd=REPO,
                       env=child_env(), check=True, capture_output=True)
        port = int(next(ln for ln in with_daemon.read_text().splitlines() if ln.startswith("port")).split("=")[1])
        daemon = Daemon(with_daemon, port)
        try:
            ready_s = daemon.wait_ready()
            daemon.wait_caught_up(["atlas"])
            log(f"daemon ready in {ready_s:.1f} s; {runs_each} runs each, ABBA order")
            results: dict[str, list[dict]] = {"daemon": [], "no daemon": []}
            order = ["daemon", "no daemon"]
            for i in range(runs_each):
                for setting in (order if i % 2 == 0 else order[::-1]):
                    r = one_run(with_daemon if setting == "daemon" else without)
                    results[setting].append(r)
                    log(f"{setting:9s} run {i + 1}: spawn→ready {r['init_s']:.2f} s, first call "
                        f"{r['first_call_s'] * 1000:.0f} ms, spawn→first result {r['first_result_s']:.2f} s "
                        f"(door {','.join(r['doors'])})")
        finally:
            daemon.stop()
    load_after = loadavg()
    summary = {k: summarize(v) for k, v in results.items()}
    for setting, want in (("daemon", ["daemon"]), ("no daemon", ["local"])):
        if summary[setting]["doors"] != want:
            raise SystemExit(f"{setting}: the calls went through {summary[setting]['doors']}, not {want}")

    def ms(x: float) -> str:
        return f"{x * 1000:.0f}"

    rows = []
    for setting, label in (("daemon", "daemon running (forwarded to its HTTP API)"),
                           ("no daemon", "no daemon (index and model opened by the stdio server)")):
        s = summary[setting]
        rows.append([label, s["n"], f"{s['init_s']['median']:.2f}", ms(s["first_call_s"]["median"]),
                     ms(s["first_call_server_s"]["median"]), ms(s["first_took_s"]["median"]),
                     f"{s['first_result_s']['median']:.2f} ({s['first_result_s']['min']:.2f}–"
                     f"{s['first_result_s']['max']:.2f})", ms(s["second_call_s"]["median"])])
    d, n = summary["daemon"], summary["no daemon"]
    table = md_table(["setting", "runs", "spawn → ready s", "first call ms", "of it in the server's tool ms",
                      "of it in `Searcher.search` ms", "spawn → first result s (min–max)", "second call ms"], rows)
    markdown = f"""## MCP over stdio: first-call latency (issue 13)

An agent runtime starts `ledger-indexer mcp --persona atlas --session main` and asks its first question: the MCP SDK's real `stdio_client` (mcp 2.3.0, in the benchmark process) spawns the server, `initialize`s and lists the tools (*ready*: what every runtime does before its model can call one), calls `memory_search` (hybrid, "{QUERY}"), then once more (warm). Two indexes of the same demo ledger (lancedb sink): one served by a running daemon (`ledger-indexer run`, ready and caught up), one with none. The settings take turns (ABBA…) on the shared 2-core VM; medians of {runs_each} runs each (min–max for the total). The door every call took is checked from the server's log (`mcp.call` `door`: `daemon` / `local`); the server's own time for the call is that event's `ms`, the search's is the answer's `took_ms`.

{table}

**First call with a daemon: {ms(d['first_call_s']['median'])} ms (spawn → first result {d['first_result_s']['median']:.2f} s); without one: {n['first_call_s']['median']:.2f} s (spawn → first result {n['first_result_s']['median']:.2f} s).** With a daemon the stdio process loads neither the model nor LanceDB (`mcp.index_opened` in {d['index_opened_in_stdio']} of {d['n']} runs' logs): *spawn → ready* is the interpreter, the imports (the MCP SDK is about 1 s of CPU of it) and the handshake, and the call is one HTTP round trip to the daemon, which has the model loaded; the rest of the client-observed first call is the client's own first-call work (the SDK client compiles the tool's output schema and validates the answer against it) and the pipes. Without a daemon the server starts opening the index and loading the model in the background at spawn, and the first call waits for what remains of it. An agent runtime normally starts its MCP servers with the agent, long before the first question, so the first call is what the agent waits for. Daemon ready {ready_s:.1f} s after its start. Load average {load_before} before, {load_after} after (the machine is shared: absolute times vary with it, the two settings ran interleaved). Total time {fmt_s(time.perf_counter() - started)}.
"""
    data = {"runs_each": runs_each, "query": QUERY, "summary": summary, "runs": results, "daemon_ready_s": ready_s,
            "loadavg_before": load_before, "loadavg_after": load_after}
    path = write_outputs(NAME, markdown, data)
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
