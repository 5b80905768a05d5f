"""Token rules: finding credentials with a recognisable format in one text.

Every token is a run of 16+ token characters: a cheap byte probe tells whether a text has
one at all (most prose has none), one scan finds the runs, and at each place inside a run
where a token may start the rules registered for its first two characters are tried, then
the run-gated rules, then the few whole-text rules behind their gate words. Each match is
validated: word boundary, fillers, entropy, structure (``_accept``).
"""

from __future__ import annotations

import itertools
import re

from ahocorasick_rs import AhoCorasick, Implementation

from .detectors import _HEX, char_before, overlapping, word_before
from .entropy import is_token_placeholder, shannon
from .gating import trie_pattern
from .rules import GLUED_PREFIXES, MIN_TOKEN_LENGTH, TOKEN_RULES, TOKEN_RUN_CHARS, TokenRule, _literal_prefix

__all__ = ["PRIO_TOKEN", "COMPILED", "has_run", "scan_tokens"]


def _validate() -> None:
    """Fail fast on malformed rules (import time, once)."""
    for r in TOKEN_RULES:
        compiled = re.compile(r.pattern)
        if not 0 <= r.keep <= 4:
            raise ValueError(f"{r.id}: keep must be 0..4 (a kind prefix, never the secret)")
        if r.run_gates or _literal_prefix(r.pattern):
            # Run-dispatched: only runs of MIN_TOKEN_LENGTH+ are examined.
            if _min_width(compiled) < MIN_TOKEN_LENGTH:
                raise ValueError(f"{r.id}: can match less than a token run ({MIN_TOKEN_LENGTH} chars)")
        elif not r.gates:
            raise ValueError(f"{r.id}: needs a literal prefix, run gates or gates")


def _min_width(compiled: re.Pattern[str]) -> int:
    import re._parser as sre_parse  # stdlib; only used for this sanity check

    return sre_parse.parse(compiled.pattern).getwidth()[0]


_validate()

PRIO_TOKEN = 40
"""Rank of a token rule's candidate when overlapping spans merge (engine.py)."""


class _Compiled:
    """The ruleset compiled once, indexed for dispatch."""

    def __init__(self, rules: tuple[TokenRule, ...]) -> None:
        self.by2: dict[str, list[tuple[int, TokenRule, re.Pattern[str]]]] = {}
        self.by1: dict[str, list[tuple[int, TokenRule, re.Pattern[str]]]] = {}
        self.run_rules: list[tuple[int, TokenRule, re.Pattern[str]]] = []
        self.text_rules: list[tuple[int, TokenRule, re.Pattern[str]]] = []
        for order, rule in enumerate(rules):
            entry = (order, rule, re.compile(rule.pattern))
            lit = _literal_prefix(rule.pattern)
            if rule.run_gates:
                self.run_rules.append(entry)
            elif len(lit) >= 2:
                self.by2.setdefault(lit[:2], []).append(entry)
            elif lit:
                self.by1.setdefault(lit, []).append(entry)
            else:
                self.text_rules.append(entry)
        self.allow = {r.allow: re.compile(r.allow) for r in rules if r.allow}
        # Rules that may match where an unmistakable prefix is glued to a
        # word ("tokenisghp_…", "1AKIA…"): their literal prefix and a glued
        # prefix agree ("gl" of the GitLab rule and "glpat-"); tried only at
        # the places one scan for the glued prefixes finds.
        self.glued = {order for order, rule in enumerate(rules)
                      if not rule.run_gates and _agrees(_literal_prefix(rule.pattern))}
        self.glued_re = re.compile("|".join(re.escape(p) for p in sorted(GLUED_PREFIXES, key=len, reverse=True)))
        # Kind prefixes a mask may keep before its marker, per rule id:
        # (literal part, length kept). "AKIA" is kept from the rule A(?:KIA|…).
        self.keeps: dict[str, set[tuple[str, int]]] = {}
        for rule in rules:
            if rule.keep:
                self.keeps.setdefault(rule.id, set()).add((_literal_prefix(rule.pattern)[:rule.keep], rule.keep))


def _agrees(lit: str) -> bool:
    return bool(lit) and any(g.startswith(lit) or lit.startswith(g) for g in GLUED_PREFIXES)


COMPILED = _Compiled(TOKEN_RULES)
_COMPILED = COMPILED

# A token-like run: 16+ characters that can make up a token. Prose rarely has
# one, so this single scan is what most text costs. The lookbehind keeps the
# scan from restarting inside a run (quadratic on long words otherwise).
_RUN_RE = re.compile(r"(?<![%s])[%s]{%d,}" % (TOKEN_RUN_CHARS, TOKEN_RUN_CHARS, MIN_TOKEN_LENGTH))
# Where a token may start inside a run: right after a non-alphanumeric
# character (the run's own start is handled separately). Charset-led, so
# sre skips alphanumerics in its fast loop; a leading lookbehind would not.
_START_RE = re.compile(r"[^A-Za-z0-9][A-Za-z0-9_]")
# The same places, only where some dispatched rule's whole literal prefix follows (a rule matches
# nowhere else): most places in a run (the words of a URL or path, "github.com") start none, and
# each costs a Python step. A "_" after the separator is always a match, as in _START_RE, which
# consumes it: the place after it is then not a start of its own ("-__x" starts at the first "_"
# only), and this keeps that.
_PREFIX_START_RE = re.compile(r"[^A-Za-z0-9](?:_|(?=%s)[A-Za-z0-9])" % trie_pattern(sorted(
    {_literal_prefix(rule.pattern) for entries in (*COMPILED.by2.values(), *COMPILED.by1.values())
     for _o, rule, _rx in entries})))
# Every gate word of the whole-text rules, in one search of the lowercased text: most texts hold
# none, and then no rule's words are tested one by one.
_TEXT_GATES_RE = re.compile("|".join(re.escape(g) for _o, rule, _rx in COMPILED.text_rules for g in rule.gates))
# Every run gate of the run-gated rules and every glued prefix, found in one Aho-Corasick scan per
# text (case-sensitive, like the rules): most texts hold none, and their runs then skip those rules
# and the glued-prefix scan.
_RUN_GATES = tuple(sorted({g for _o, rule, _rx in COMPILED.run_rules for g in rule.run_gates}))
_RUN_WORDS = _RUN_GATES + tuple(sorted(set(GLUED_PREFIXES) - set(_RUN_GATES)))
_RUN_WORDS_AC = AhoCorasick(list(_RUN_WORDS), implementation=Implementation.DFA)
# Exact prefilter for _RUN_RE: map token characters to "a" and everything
# else to a space; a run exists iff 16 "a"s are adjacent. Done on UTF-8
# bytes: ASCII keeps its values and every non-ASCII byte is >= 0x80 (a
# space), so the test is exact, and bytes.translate has no slow path for
# non-ASCII text (str.translate does).
_RUN_TABLE = bytes(ord("a") if i < 128 and re.fullmatch("[%s]" % TOKEN_RUN_CHARS, chr(i)) else ord(" ")
                   for i in range(256))
_RUN_PROBE = b"a" * MIN_TOKEN_LENGTH


def _has_run(text: str) -> bool:
    return _RUN_PROBE in text.encode("utf-8", "surrogatepass").translate(_RUN_TABLE)


def _valid(rule: TokenRule, secret: str) -> bool:
    if rule.fillers and is_token_placeholder(secret):
        return False
    if rule.entropy and shannon(secret) < rule.entropy:
        return False
    if rule.allow and _COMPILED.allow[rule.allow].fullmatch(secret):
        return False
    return rule.check is None or rule.check(secret)


def _accept(rule: TokenRule, m: re.Match[str], text: str, gate, left: bool = True) -> tuple[int, int] | None:
    """Validate one rule match; return the secret span or None. ``left``: check the word boundary."""
    p = m.start()
    if left and rule.left and p > 0 and (char_before(text, p) in rule.left or word_before(text, p)):
        return None
    s, e = m.span("s") if "s" in m.re.groupindex else m.span()
    if e <= s or not _valid(rule, text[s:e]):
        return None
    if rule.gates:
        for g in rule.gates:
            if gate(g):
                return s, e
        return None
    return s, e


def _scan_tokens(text: str, low: str, cands: list, gate, gate_is_low: bool = False) -> bool:
    """Append token-rule candidates; return whether the text has a token-like run.
    ``gate_is_low``: ``gate(w)`` is ``w in low`` (the engine's), so the whole-text rules' words can
    be looked for in one search."""
    by2, by1 = _COMPILED.by2, _COMPILED.by1
    has_run = _has_run(text)
    runs = _RUN_RE.finditer(text) if has_run else ()
    if has_run:
        # Per text, not per run: which run gates occur, and whether a glued prefix does.
        try:
            words = {_RUN_WORDS[i] for i, _s, _e in _RUN_WORDS_AC.find_matches_as_indexes(text, overlapping=True)}
        except UnicodeEncodeError:  # a lone surrogate: the automaton takes UTF-8 only
            words = {w for w in _RUN_WORDS if w in text}
        run_rules = [entry for entry in _COMPILED.run_rules if not words.isdisjoint(entry[1].run_gates)] \
            if words else ()
        glued = not words.isdisjoint(GLUED_PREFIXES)
    for run in runs:
        rs, re_ = run.span()
        skip = rs
        # A rule whose match failed validation is not retried inside that
        # match: keeps adversarial runs ("sk-sk-sk-...") linear.
        failed: dict[int, int] = {}
        starts = itertools.chain((rs,), _after_escape(text, rs, re_),
                                 (st.start() + 1 for st in _PREFIX_START_RE.finditer(text, rs, re_)))
        for p in starts:
            if p < skip:
                continue
            entries = by2.get(text[p:p + 2])
            one = by1.get(text[p])
            if one:
                entries = (entries or []) + one
            if not entries:
                continue
            prev = char_before(text, p)
            for order, rule, rx in entries:
                if (prev and rule.left and prev in rule.left) or failed.get(order, -1) > p:
                    continue
                m = rx.match(text, p)
                if m is not None:
                    span = _accept(rule, m, text, gate)
                    if span:
                        cands.append((span[0], span[1], rule.id, rule.keep, PRIO_TOKEN, -order))
                        skip = max(skip, span[1])
                    else:
                        failed[order] = m.end()
        if glued:
            _scan_glued(text, rs, re_, cands, gate)
        if not run_rules:
            continue
        chunk = text[rs:re_]
        for order, rule, rx in run_rules:
            for g in rule.run_gates:
                if g in chunk:
                    for m in overlapping(rx, text, rs, re_):
                        span = _accept(rule, m, text, gate)
                        if span:
                            cands.append((span[0], span[1], rule.id, rule.keep, PRIO_TOKEN, -order))
                    break
    if gate_is_low and _TEXT_GATES_RE.search(low) is None:
        return has_run
    for order, rule, rx in _COMPILED.text_rules:
        for g in rule.gates:
            if gate(g):
                for m in overlapping(rx, text):
                    span = _accept(rule, m, text, _always)
                    if span:
                        cands.append((span[0], span[1], rule.id, rule.keep, PRIO_TOKEN, -order))
                break
    return has_run


def _always(_word: str) -> bool:
    return True


def _after_escape(text: str, rs: int, re_: int) -> tuple[int, ...]:
    """A second start for a run that begins inside an escape: in ``\\nghp_…``
    (JSON-escaped text) the run starts at the ``n`` of ``\\n``, the token after it."""
    if rs == 0 or text[rs - 1] != "\\":
        return ()
    if text[rs] in "nrt":
        p = rs + 1
    elif text[rs] == "u" and rs + 5 <= re_ and all(c in _HEX for c in text[rs + 1:rs + 5]):
        p = rs + 5
    else:
        return ()
    return (p,) if p < re_ else ()


def _scan_glued(text: str, rs: int, re_: int, cands: list, gate) -> None:
    """Tokens with an unmistakable prefix glued to a word or digit before them
    (``tokenisghp_…``, ``1AKIA…``), or joined to one by ``-`` or ``_`` (``plan-sk-proj-…``: the
    main loop refuses those before a token): such a prefix needs no left boundary."""
    glued = _COMPILED.glued
    for g in _COMPILED.glued_re.finditer(text, rs, re_):
        p = g.start()
        if p == rs or not (text[p - 1].isalnum() or text[p - 1] in "-_"):
            continue  # a boundary start: the main loop tried it
        entries = (_COMPILED.by2.get(text[p:p + 2]) or []) + (_COMPILED.by1.get(text[p]) or [])
        for order, rule, rx in entries:
            if order not in glued:
                continue
            m = rx.match(text, p)
            span = _accept(rule, m, text, gate, left=False) if m is not None else None
            if span:
                cands.append((span[0], span[1], rule.id, rule.keep, PRIO_TOKEN, -order))


has_run = _has_run


def scan_tokens(text: str, low: str, cands: list, gate) -> bool:
    """The engine's scan: ``gate(w)`` must be ``w in low``."""
    return _scan_tokens(text, low, cands, gate, True)
