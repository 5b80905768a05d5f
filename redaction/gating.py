"""Which detectors a text can need: one shared pass per text (issue 34).

Each detector declares at registration (``rules.py``) what a text must hold for it to find
anything: its ``gates`` (one of these words occurs in the lowercased text), optional further
``requires`` clauses (each: one of its words occurs, or one of its :class:`Feature` holds), and
``needs_run`` (a token-like run). These are necessary conditions read off the detector's own
first scans, so skipping a detector whose gate fails changes no output
(tests/test_redaction_gating.py checks gated against ungated detection).

The words of every detector are looked for once per text: one Aho–Corasick scan (the
``ahocorasick-rs`` automaton, in Rust) for every word of two or more characters, and a
substring test (memchr speed) for each one-character word (``:``, ``=``, digits: in the
automaton every occurrence would be a match handed to Python). Before, each of ~30 detectors
tested its own words or ran its own first scan; then a prefix-trie regex did, ~3× slower.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ahocorasick_rs import AhoCorasick, Implementation

_MAX_PLANS = 4096  # distinct word sets kept (a few hundred on the eval corpora)

__all__ = ["Feature", "GateScan", "DIGIT", "prefixes", "trie_pattern", "low_words", "search_feature", "defined_in"]


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: a per-text memo key, hashed often
class Feature:
    """A property of a text (not a word) a detector needs, tested at most once per text and only
    when the detector's word clauses already hold. ``test(text, low)``."""

    name: str
    test: Callable[[str, str], bool]


_DIGIT_RE = re.compile(r"\d")


def _has_digit(text: str, _low: str) -> bool:
    # ASCII text: ten memchr-speed substring tests (sre's \d scan costs ~10 ns a character)
    if text.isascii():
        return any(d in text for d in "0123456789")
    return _DIGIT_RE.search(text) is not None


DIGIT = Feature("digit", _has_digit)
"""Any decimal digit (Unicode ``\\d``, so it covers ``[0-9]`` and ``\\d`` patterns alike)."""


def search_feature(name: str, pattern: str | re.Pattern[str]) -> Feature:
    """A feature: ``pattern`` (literal-led, so the scan runs at memchr speed) occurs in the text."""
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    return Feature(name, lambda text, _low: rx.search(text) is not None)


def defined_in(find: Callable) -> Any:
    """The module defining a detector function: its private constants stay where they are
    defined when a module is split (structures.py re-exports only the public names)."""
    return sys.modules[find.__module__]


def low_words(*patterns: re.Pattern[str]) -> tuple[str, ...]:
    """Words of the lowercased text one of which any match of ``patterns`` (case-sensitive,
    scanned on the text or on its lowercased copy) starts with: the gate they imply."""
    out: list[str] = []
    for p in patterns:
        found = prefixes(p)
        if not found:
            raise ValueError(f"no literal prefix to gate on: {p.pattern[:60]!r}")
        for w in found:
            # A non-ASCII capital may or may not be lowered in ``low`` (engine._ascii_lower):
            # the word is cut before it; an empty word would gate nothing.
            cut = next((i for i, c in enumerate(w) if not c.isascii() and c.lower() != c), len(w))
            if not cut:
                raise ValueError(f"no literal prefix to gate on: {p.pattern[:60]!r}")
            out.append(w[:cut].lower())
    return tuple(dict.fromkeys(out))


def trie_pattern(words: Iterable[str]) -> str:
    """An alternation factored by common prefixes, longest word first at each position."""
    root: dict = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(c) + emit(node[c]) for c in sorted(k for k in node if k)]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return "(?:" + body + ")?" if "" in node else body

    return emit(root)


class GateScan:
    """The gates of a detector list, compiled for one pass per text.

    ``entries``: (detector, payload) pairs in run order; ``enabled`` returns the payloads of
    the detectors a text can need, in that order.
    """

    __slots__ = ("_entries", "_matcher", "_multi", "_found", "_single", "_bits", "_always", "_words", "_dets", "_plans")

    def __init__(self, entries: Sequence[tuple[Any, Any]]) -> None:
        words: set[str] = set()
        for det, _payload in entries:
            for clause in _clauses(det):
                words.update(w for w in clause if isinstance(w, str))
        self._bits = {w: 1 << i for i, w in enumerate(sorted(words))}
        self._words = tuple(sorted(words))
        # Detectors as bits too: a word maps to the detectors whose first clause names it, so a
        # text's candidates are the union over the few words it holds (~4 on chat), not a loop
        # over every detector. Detectors without word clauses are always candidates.
        dets: dict[str, int] = {}
        self._always = 0
        entries_ = []
        for i, (det, payload) in enumerate(entries):
            clauses = _clauses(det)
            first = [w for w in clauses[0] if isinstance(w, str)] if clauses else []
            if not clauses or len(first) < len(clauses[0]):
                self._always |= 1 << i  # no clause, or a feature in the first one
                rest = clauses
            else:
                for w in first:
                    dets[w] = dets.get(w, 0) | 1 << i
                rest = clauses[1:]
            cued = _or(self._bits[w] for w in first) if getattr(det, "cued", False) else 0
            entries_.append((payload, bool(det.needs_run),
                             tuple((_or(self._bits[w] for w in c if isinstance(w, str)),
                                    tuple(f for f in c if isinstance(f, Feature))) for c in rest), cued))
        self._entries = tuple(entries_)
        self._dets = dets
        self._plans: dict[tuple[int, bool], tuple[list, tuple]] = {}  # (fixed list, or features + outcomes)
        # Overlapping matches: every word that occurs is reported, also inside or across another.
        multi = [w for w in self._words if len(w) > 1]
        self._matcher = AhoCorasick(multi, implementation=Implementation.DFA) if multi else None
        self._multi = tuple(multi)
        self._found = tuple((self._bits[w], dets.get(w, 0)) for w in multi)  # by pattern index
        self._single = tuple((w, self._bits[w], dets.get(w, 0)) for w in self._words if len(w) == 1)

    def present(self, low: str) -> tuple[int, int]:
        """(words, candidate detectors) of ``low``, as bit sets: the gate words that occur in
        it, and the detectors whose first clause one of them satisfies (or that have none)."""
        found = 0
        cand = self._always
        if self._matcher is not None:
            table = self._found
            try:
                hit = {m[0] for m in self._matcher.find_matches_as_indexes(low, overlapping=True)}
            except UnicodeEncodeError:  # a lone surrogate: the automaton takes UTF-8 only
                hit = {i for i, w in enumerate(self._multi) if w in low}
            for i in hit:
                bits, dets = table[i]
                found |= bits
                cand |= dets
        for w, bits, dets in self._single:
            if w in low:
                found |= bits
                cand |= dets
        return found, cand

    def words(self, found: int) -> frozenset[str]:
        """The words of a bit set (for tests and diagnostics)."""
        return frozenset(w for w, bit in self._bits.items() if found & bit)

    def enabled(self, text: str, low: str, has_run: bool) -> list[tuple[Any, tuple[str, ...] | None]]:
        """(payload, cues) of each detector whose gates hold for this text, in registration
        order. ``cues``: for a detector registered ``cued``, the words of its first clause that
        occur in the text (so it need not look for them again); None for the others."""
        found, cand = self.present(low)
        key = (found, has_run)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            plan = self._plans[key] = self._plan(found, cand, has_run)
        fixed, featured = plan
        if not featured:
            return fixed
        # The features the plan still depends on, all tested (each a quick search): the detectors
        # that run follow from which hold, so that list is kept per outcome too.
        feats, outcomes, steps = featured
        held = 0
        for k, f in enumerate(feats):
            if f.test(text, low):
                held |= 1 << k
        out = outcomes.get(held)
        if out is None:
            # a clause holds when one of its features does; a step runs when all its clauses hold
            out = outcomes[held] = [step for step, masks in steps if all(held & m for m in masks)]
        return out

    def _plan(self, found: int, cand: int, has_run: bool) -> tuple[list, tuple]:
        """What ``enabled`` does for texts holding exactly the words ``found``: the detectors
        that run (with their cues), or, when some detector still depends on a feature of the
        text, every candidate with the feature clauses left to test. Texts repeat word sets
        (most chat holds none or a few of the same words), so plans are kept. ``cand``: the
        candidate detectors ``present`` found with ``found`` (diverse text makes new word sets
        often: recomputing them from the ~430 word bits cost ~40 us a plan)."""
        steps = []
        for i, (payload, needs_run, clauses, cued) in enumerate(self._entries):
            if not cand >> i & 1 or (needs_run and not has_run):
                continue
            left = []
            for mask, feats in clauses:
                if found & mask:
                    continue
                if not feats:
                    break
                left.append(feats)
            else:
                steps.append(((payload, self._cues(found & cued) if cued else None), tuple(left)))
        if all(not left for _step, left in steps):
            return [step for step, _left in steps], ()
        feats = tuple(dict.fromkeys(f for _step, left in steps for clause in left for f in clause))
        index = {f: 1 << k for k, f in enumerate(feats)}
        masked = tuple((step, tuple(_or(index[f] for f in clause) for clause in left)) for step, left in steps)
        return [], (feats, {}, masked)

    def _cues(self, bits: int) -> tuple[str, ...]:
        words = self._words
        out = []
        while bits:
            bit = bits & -bits
            bits ^= bit
            out.append(words[bit.bit_length() - 1])
        return tuple(out)


def _clauses(det: Any) -> tuple[tuple[str | Feature, ...], ...]:
    return ((det.gates,) if det.gates else ()) + tuple(det.requires)


def _or(bits: Iterable[int]) -> int:
    out = 0
    for b in bits:
        out |= b
    return out


def prefixes(pattern: re.Pattern[str], limit: int = 64) -> tuple[str, ...]:
    """Literal strings, one of which every match of ``pattern`` starts with (after any
    zero-width assertions), read from its parse tree; ``()`` when there is no such set (some
    match may start with anything, or there would be more than ``limit``).

    Only for case-sensitive patterns: under IGNORECASE a letter also matches characters that
    do not lowercase to it (the Kelvin sign for ``k``), so no word of ``low`` is necessary.
    """
    if pattern.flags & re.IGNORECASE:
        return ()
    import re._parser as sre_parse  # stdlib

    out, _complete = _seq(list(sre_parse.parse(pattern.pattern, pattern.flags)), [""], limit)
    return () if out is None or any(not p for p in out) else tuple(sorted(set(out)))


def _seq(items: list, acc: list[str], limit: int) -> tuple[list[str] | None, bool]:
    """Extend the prefixes ``acc`` over a parsed sequence: (prefixes, whether the sequence was
    read to its end). None: too many."""
    from re._constants import ASSERT, ASSERT_NOT, AT, BRANCH, IN, LITERAL, NEGATE, SUBPATTERN

    for op, av in items:
        if op is LITERAL:
            acc = [a + chr(av) for a in acc]
        elif op in (AT, ASSERT, ASSERT_NOT):
            continue  # zero-width: the next literal starts at the same place
        elif op is IN and all(o is LITERAL for o, _v in av) and len(av) <= 4 and not any(o is NEGATE for o, _v in av):
            acc = [a + chr(v) for a in acc for _o, v in av]
        elif op is SUBPATTERN and not av[1] and not av[2]:
            sub, complete = _seq(list(av[3]), acc, limit)
            if sub is None or not complete:
                return sub, False
            acc = sub
        elif op is BRANCH:
            new: list[str] = []
            whole = True
            for alt in av[1]:
                sub, complete = _seq(list(alt), [""], limit)
                if sub is None:
                    return None, False
                whole = whole and complete
                new.extend(a + s for a in acc for s in sub)
            if len(new) > limit:
                return None, False
            acc = new
            if not whole:
                return acc, False
        else:
            return acc, False
        if len(acc) > limit:
            return None, False
    return acc, True
