"""The Summary rows a benchmark's run adds to bench/RESULTS.md, built from the JSON it leaves in
``bench/out`` (``python -m bench.run_all`` stores them in the benchmark's record, bench/results/)."""

from __future__ import annotations

from collections.abc import Callable

Row = tuple[str, str, str, str]  # measure, result, target, met


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def redaction_rows(d: dict) -> list[Row]:
    rows: list[Row] = []
    f = d.get("formats")
    if f:
        a = f["all"]
        rows.append((f"redaction recall, own corpus ({f['formats']} formats x 8 contexts, every occurrence)",
                     f"{a['cases'] - a['missed']}/{a['cases']} = {100 * a['recall']:.1f} %", "≥ 99 %",
                     _yes(a["recall"] >= 0.99)))
    rows += [
        ("redaction recall, secrets_dev", f"{d['secrets'] - d['missed']}/{d['secrets']} = {100 * d['recall']:.1f} %",
         "≥ 99 %", _yes(d["recall"] >= 0.99)),
        ("clean_chat lines changed", f"{d['chat_changed']}/{d['chat']}", "0", _yes(d["chat_changed"] == 0)),
        ("redaction throughput, ordinary chat", f"{d['mb_s_per_message']:.0f} MB/s", "≥ 10 MB/s",
         _yes(d["mb_s_per_message"] >= 10)),
        ("redaction share of a sync", f"{100 * d['sync_share']:.2f} %", "< 1 %", _yes(d["sync_share"] < 0.01)),
    ]
    return rows


def locomo_rows(d: dict) -> list[Row]:
    """Headline: recall@10 by leave-one-conversation-out cross-validation (the target is judged on it); the
    in-sample figures of the shipped weights beside it."""
    h, kw = d["aggs"]["hybrid"]["overall"], d["aggs"]["keyword"]["overall"]
    n = d.get("n_questions", "?")
    loco = (d.get("grid") or {}).get("loco_r10")
    partial = f" (partial: {d['limited']})" if d.get("limited") else ""
    in_sample = f"in-sample {h['10']:.1f} (R@5 {h['5']:.1f}, R@25 {h['25']:.1f})"
    if isinstance(loco, (int, float)):
        result, headline = f"{loco:.1f} leave-one-conversation-out; {in_sample}", loco
    else:
        result, headline = f"{in_sample}; not cross-validated in this run", h["10"]
    rows = [(f"LoCoMo hybrid recall@10 ({n} questions, cat. 1–4){partial}",
             f"{result}; keyword {kw['10']:.1f}; DRAGON 66.2", "≥ 70",
             _yes(headline >= 70.0 and not d.get("limited")))]
    c = d.get("calibration")
    if c:
        t3, t5 = c["thresholds"]["0.3"], c["thresholds"]["0.5"]
        rows.append(("LoCoMo calibrated scores: exact-words probes / unrelated probes (best result)",
                     f"median {c['exact']['q'][2]:.2f} (p10 {c['exact']['q'][0]:.2f}), "
                     f"{100 * c['exact']['share_ge_0_9']:.0f} % ≥ 0.9 / median "
                     f"{c['unrelated']['q'][2]:.2f}, {100 * c['unrelated']['share_lt_0_1']:.0f} % < 0.1; gold / "
                     f"non-gold top-10 medians {c['gold']['q'][2]:.2f} / {c['other']['q'][2]:.2f}; min_score 0.3 "
                     f"keeps {100 * t3['gold_kept']:.0f} % of gold, drops {100 * t3['other_dropped']:.0f} % of "
                     f"non-gold; 0.5: {100 * t5['gold_kept']:.0f} % / {100 * t5['other_dropped']:.0f} %",
                     "medians: exact ≥ 0.9, unrelated < 0.1", _yes(c["exact"]["q"][2] >= 0.9 and c["unrelated"]["q"][2] < 0.1)))
    return rows


def latency_rows(d: dict) -> list[Row]:
    rows: list[Row] = []
    s = d.get("sync") or {}
    if s:
        rows.append(("sync throughput / raw fastembed, same texts, same run",
                     f"{s['ratio']:.2f} ({s['sync_median']:.1f} vs {s['raw_median']:.1f} per s; "
                     f"{s['cpu_ratio']:.2f} by CPU time)", "≥ 0.85", _yes(s["ratio"] >= 0.85)))
    for size in ("10k", "100k"):
        q = (d.get("inproc") or {}).get(size)
        if q:
            rows.append((f"hybrid query, {size} chunks, in-process, session / project scope",
                         f"p50 {q['session']['p50']:.0f} / {q['project']['p50']:.0f} ms, "
                         f"p95 {q['session']['p95']:.0f} / {q['project']['p95']:.0f} ms", "report", "–"))
    return rows


def daemon_rows(d: dict) -> list[Row]:
    rows: list[Row] = []
    f = d.get("freshness") or {}
    appends = f.get("appends", [])
    if appends:  # a turn never found counts as infinitely late
        gaps = sorted(a["delay_s"] * 1000 if a.get("found") else float("inf") for a in appends)
        p50, p95 = gaps[len(gaps) // 2], gaps[min(len(gaps) - 1, int(0.95 * len(gaps)))]
        lost = sum(1 for a in appends if not a.get("found"))
        rows.append((f"freshness, commit → found, {len(gaps)} appends",
                     f"p50 {p50:.0f} ms, p95 {p95:.0f} ms" + (f", {lost} never found" if lost else ""),
                     "p50 ≤ 1 s", _yes(p50 <= 1000)))
    c = (d.get("load") or {}).get("concurrent")
    if c:
        rows.append((f"API at {d['load'].get('size', '?')} chunks, {c['clients']} clients",
                     f"p50 {c['p50']:.0f} / p95 {c['p95']:.0f} / p99 {c['p99']:.0f} ms, {c['rps']:.0f} req/s",
                     "report", "–"))
    idles = [x["idle"] for x in (f, d.get("load") or {}) if x.get("idle")]
    if idles:
        cpu = [i["cpu_pct"] for i in idles]
        rss = [i["rss_end_mb"] for i in idles]
        rows.append(("idle daemon, 60 s", f"{min(cpu):.1f}–{max(cpu):.1f} % of a core, RSS {min(rss):.0f}–"
                                          f"{max(rss):.0f} MB", "report", "–"))
    return rows


def kill_campaign_rows(d: dict) -> list[Row]:
    ok = d["lost"] == 0 and d["duplicated_chunks"] == 0 and d["stale"] == 0
    return [(f"kill -9 campaign, both sinks ({d['n_kills']} kills at random points of a backfill)",
             f"{d['lost']} lost, {d['duplicated_chunks']} duplicated, {d['stale']} stale of {d['expected']} documents",
             "≥ 20 kills, 0 lost, 0 duplicated", _yes(ok and d["n_kills"] >= 20))]


def cli_latency_rows(d: dict) -> list[Row]:
    cli, ratio = d["cli_daemon_ms"], d["ratio_cli_over_qmd"]
    return [("CLI `search` with the daemon running, whole process",
             f"p50 {cli['p50']:.0f} ms; vs `qmd search` in the same run {ratio['p50']:.2f}x",
             "≤ 1.0x qmd, ≤ 300 ms quiet", _yes(ratio["p50"] <= 1.0))]


def mcp_latency_rows(d: dict) -> list[Row]:
    rows: list[Row] = []
    for setting, label in (("daemon", "daemon running"), ("no daemon", "no daemon")):
        x = d["summary"].get(setting)
        if x:
            rows.append((f"MCP over stdio, first `memory_search` call ({label})",
                         f"{1000 * x['first_call_s']['median']:.0f} ms (spawn to first result "
                         f"{x['first_result_s']['median']:.1f} s)", "well under 1 s with a daemon" if
                         setting == "daemon" else "report",
                         _yes(x["first_call_s"]["median"] < 1.0) if setting == "daemon" else "–"))
    return rows


def recurring_cost_rows(d: dict) -> list[Row]:
    r = d["result"]
    med = r["medians"]

    def ratio(step: str) -> str:
        return f"{med[f'{step}|memory']['wall']:.0f} vs {med[f'{step}|plain']['wall']:.0f} ms"

    return [(f"recurring secrets ({r['planted']} passwords named by context, each repeated bare later): stored "
             "documents still holding one, with / without the session memory",
             f"{r['left']['memory']} / {r['left']['plain']}", "0", _yes(r["left"]["memory"] == 0)),
            (f"recurring secrets, cost: backfill of {r['turns']:,} turns / tail pass / first tail pass after a "
             f"restart ({r['long']:,}-turn session), with vs without", " / ".join(
                 ratio(step) for step in ("backfill", "tail, warm", "tail after a restart")), "report", "–")]


def redaction_eval_rows(d: dict) -> list[Row]:
    """Held-out figures (templates, families and vendors never used for tuning) are the headline."""
    t = d["targets"]
    held = {name: d[name]["heldout"] for name in ("chat", "catalog", "gitleaks")}
    dev = d["clean_dev"]["heldout"]
    met = {name: held[name]["recall"] >= t[name] for name in held}
    dev_ok = dev["changed"] / max(dev["lines"], 1) <= t["clean_dev_rate"]
    verdict = "yes" if all(met.values()) and dev_ok else "; ".join(
        f"{name}: {_yes(ok)}" for name, ok in (*met.items(), ("prose", dev_ok)))
    # Since 1.6.0 the whole first chat corpus is tuning data (its held-out split had been looked at);
    # the fresh corpus's held-out half (below) is the chat headline.
    return [(f"redaction on independent corpora, held-out ({d.get('version', '?')}): first chat corpus (tuned on "
             "since 1.6.0) / catalog / gitleaks / real prose changed",
             " / ".join(f"{100 * held[n]['recall']:.1f} %" for n in held) + f" / {dev['changed']} of {dev['lines']}",
             f"≥ {100 * t['chat']:.0f} / ≥ {100 * t['catalog']:.0f} / ≥ {100 * t['gitleaks']:.0f} % / "
             f"≤ 1 in {round(1 / t['clean_dev_rate'])}", verdict)] + _fresh_rows(d)


def _fresh_rows(d: dict) -> list[Row]:
    """The fresh corpora, written without sight of the rules: their held-out halves are the headline."""
    rows: list[Row] = []
    target = d["targets"].get("fresh_chat", 0.97)
    for key, what in (("fresh", "fresh independent corpus"), ("fresh2", "second fresh independent corpus")):
        fresh = d.get(key)
        if not fresh:
            continue
        chat, clean = fresh["chat"][f"{key}_heldout"], fresh["clean"][f"{key}_heldout"]
        rows.append((f"redaction, {what}, held-out half ({d.get('version', '?')}): chat-style "
                     "credentials / clean chat lines changed",
                     f"{100 * chat['recall']:.1f} % / {clean['changed']} of {clean['lines']}",
                     f"≥ {100 * target:.0f} % / 0", _yes(chat["recall"] >= target and clean["changed"] == 0)))
    return rows


def redaction_ab_rows(d: dict) -> list[Row]:
    sets = d["sets"]
    worst = max(sets[name]["slowdown"] for name in ("chat", "prose"))
    return [(f"redaction throughput {d['this']} / {d['baseline']}, side by side",
             f"{sets['chat']['slowdown']:.2f}× slower on ordinary chat, {sets['prose']['slowdown']:.2f}× on real "
             f"prose, {sets['secrets']['slowdown']:.2f}× on secret-dense chat", "≤ 1.5×", _yes(worst <= 1.5))]


SOURCES: dict[str, Callable[[dict], list[Row]]] = {
    "redaction": redaction_rows, "locomo": locomo_rows, "latency": latency_rows, "daemon": daemon_rows,
    "kill_campaign": kill_campaign_rows, "cli_latency": cli_latency_rows,
    "mcp_latency": mcp_latency_rows, "recurring_cost": recurring_cost_rows,
    "redaction_eval": redaction_eval_rows, "redaction_ab": redaction_ab_rows,
}


def rows_for(name: str, data: dict) -> list[Row] | None:
    """The Summary rows of benchmark ``name`` from its JSON; None when it has no builder here (its
    record keeps the rows it had). A JSON of an older shape gives one row that says so, never a guess."""
    build = SOURCES.get(name)
    if build is None:
        return None
    try:
        return build(data)
    except (KeyError, TypeError, ValueError) as exc:
        return [(name, f"result file not understood ({type(exc).__name__}: {exc}); rerun it", "", "")]
