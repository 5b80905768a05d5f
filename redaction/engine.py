"""Matching, overlap resolution and masking.

Pipeline for one text:

0. Folding (``fold.py``): text with non-ASCII or control characters is
   scanned as a folded copy (Unicode spaces as spaces, invisible and
   control characters removed, full-width letters as ASCII); spans map back
   to the original and are masked there. Plain ASCII text is scanned as is.
1. ``low``: ASCII-lowercased copy (same offsets) for case-insensitive scans.
   Markers already in the text (``[REDACTED:rule]``) are blanked to
   separators in the scanned copy: they never act as context, and they
   never shield the text next to them (input may carry fake markers).
2. Token rules (``tokens.py``): credentials with a recognisable format,
   found inside runs of 16+ token characters (a cheap byte probe first,
   since most prose has none).
3. Detectors (context rules): only those whose gates hold, all gates
   checked in one pass over the text (``gating.py``).
4. Known secrets: literal occurrences.
5. Overlapping candidates merge into one span (the union, so nothing is
   left half-masked); the most specific rule names it.
6. Masking: ``***`` for short spans, else an optional kind prefix plus
   ``[REDACTED:<rule>]``. Candidates lying inside an existing marker (with
   the kind prefix kept before it) are dropped, so redacting twice changes
   nothing.

Costs: every full-text scan is either a literal-led regex or a substring
test (CPython runs those near memchr speed); the only character-class scan
is the run finder, and it is skipped when the byte probe finds no run.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .detectors import BLANK
from .fold import Folded, dash_readings, fold
from .gating import GateScan
from .known import KnownSecrets
from .public import drop_public, public_spans
from .rules import DETECTORS

# _valid and _scan_tokens: imported from here by the corpus tools and structures.py
from .tokens import COMPILED, _scan_tokens, _valid, scan_tokens  # noqa: F401

__all__ = ["Finding", "Redacted", "Redactor", "Recurring", "found_values", "redact", "SHORT_SECRET", "MARKER_RE"]

SHORT_SECRET = 12
"""Spans shorter than this become ``***``: a marker would be longer than the
secret and a kept prefix would be a large share of it."""

MARKER_RE = re.compile(r"\[REDACTED:([a-z0-9-]{1,64})\]")

# Which rule names a merged span: the most specific wins; a span found in an
# earlier pass keeps its name.
_PRIO_KEPT, _PRIO_KNOWN, _PRIO_STRUCT, _PRIO_CONTEXT = 50, 30, 20, 10  # token rules: PRIO_TOKEN (40)
_MAX_EXTRA_PASSES = 3
_DETECTOR_PRIO = {"private-key": _PRIO_STRUCT, "kubernetes-secret": _PRIO_STRUCT, "url-credentials": _PRIO_STRUCT,
                  "authorization-header": _PRIO_STRUCT, "cookie": _PRIO_STRUCT, "cli-credentials": _PRIO_STRUCT}
_GATES = GateScan([(det, (det, _DETECTOR_PRIO.get(det.id, _PRIO_CONTEXT))) for det in DETECTORS])


@dataclass(frozen=True, slots=True)
class Finding:
    """A redacted span of the *original* text, named by the rule that found it."""

    rule: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    findings: tuple[Finding, ...]

    @property
    def changed(self) -> bool:
        return bool(self.findings)


_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def _ascii_lower(text: str) -> str:
    low = text.lower()
    # Some non-ASCII characters lowercase to two code points; offsets must match.
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


class Redactor:
    """Redacts text with the built-in ruleset plus optional known secrets.

    Stateless apart from its configuration, so one instance can be shared
    across threads.
    """

    __slots__ = ("_known",)

    def __init__(self, known: KnownSecrets | Iterable[str] | None = None) -> None:
        if known is not None and not isinstance(known, KnownSecrets):
            known = KnownSecrets(known)
        self._known = known if known else None

    @property
    def known(self) -> KnownSecrets | None:
        return self._known

    def find(self, text: str) -> tuple[Finding, ...]:
        """The spans ``redact`` masks, in original-text offsets."""
        return self.redact(text).findings

    def redact(self, text: str, *, recurring: Recurring | None = None) -> Redacted:
        """``text`` with every secret masked. ``recurring``: values found in other texts
        of the same conversation, masked here too wherever they occur (named by the rule
        that found them), as a value found in this text is."""
        recurring = recurring if recurring else None
        folded = fold(text)
        scanned = text if folded is None else folded.text
        # Unicode dashes stay dashes in the folded copy (an em dash before a token must not glue it
        # to the word before); more scans read them as "-" (a token with Unicode hyphens), and prose
        # dashes as spaces (both at once: "is—sk‑proj‑…"); the spans of all are masked. Texts without
        # such a dash are scanned once.
        readings = dash_readings(scanned)
        if readings:
            segments = _union(*(self._settle(t, recurring) for t in (scanned, *readings)))
            return _unfold(folded or Folded(text, text), segments)
        if folded is None:
            segments = self._settle(text, recurring)
            out, _pieces = _mask(text, segments)
            return Redacted(out, tuple(Finding(rule, s, e) for s, e, rule, _keep in segments))
        return _unfold(folded, self._settle(folded.text, recurring))

    def _settle(self, text: str, recurring: Recurring | None) -> list[tuple[int, int, str, int]]:
        """The spans to mask in ``text`` (already folded, or plain)."""
        segments = self._segments(text, recurring)
        if not segments:
            return []
        searches: dict[frozenset[str], KnownSecrets] = {}  # one search (a trie, past 2,000 values) a value set
        segments = _with_repeats(text, segments, searches)
        out, pieces = _mask(text, segments)
        # Idempotence by construction: masking can change the context a rule
        # sees (a value no longer glued to a word, a new boundary after a
        # mask). Re-scan the output; map anything new back onto the
        # original text and mask again, until nothing new appears.
        for _ in range(_MAX_EXTRA_PASSES):
            again = self._segments(out, recurring)
            if not again:
                break
            cands = [(s, e, rule, keep, _PRIO_KEPT, 0) for s, e, rule, keep in segments]
            for s, e, rule, _keep in again:
                os_, oe = _map_back(pieces, s, e)
                cands.append((os_, oe, rule, 0, _PRIO_CONTEXT, 0))
            segments = _with_repeats(text, _merge(cands), searches)
            out, pieces = _mask(text, segments)
        return segments

    def _segments(self, text: str, recurring: Recurring | None = None) -> list[tuple[int, int, str, int]]:
        if not text:
            return []
        units = _marker_units(text) if "[REDACTED:" in text else []
        if units:
            # Rule ids inside markers contain words detectors look for
            # ("curl-basic-auth", "cookie", "bearer-token"): blank the markers
            # out. A blank separates like whitespace, so a fake marker glued
            # to a secret ("ghp_…[REDACTED:x]") shields nothing.
            text = _blank_markers(text, units)
        low = _ascii_lower(text)
        memo: dict[str, bool] = {}

        def gate(word: str) -> bool:
            # Each substring test scans the text; many rules share words.
            hit = memo.get(word)
            if hit is None:
                hit = memo[word] = word in low
            return hit

        cands: list[tuple[int, int, str, int, int, int]] = []
        has_run = scan_tokens(text, low, cands, gate)
        # The detectors this text can need: one pass finds every detector's gate words (gating.py).
        for (det, prio), cues in _GATES.enabled(text, low, has_run):
            for rule, s, e, keep in (det.find(text, low) if cues is None else det.find(text, low, cues=cues)):
                cands.append((s, e, rule, keep, prio, 0))
        if cands:  # GPG key ids, CI cache keys, certificates...: public by what they are (public.py)
            cands = drop_public(cands, list(public_spans(text, low)), frozenset())
        if self._known is not None:
            for s, e in self._known.spans(text):
                cands.append((s, e, "known-secret", 0, _PRIO_KNOWN, 0))
        if recurring is not None:
            for s, e in recurring.spans(text):
                cands.append((s, e, recurring.rule(text[s:e]), 0, _PRIO_KNOWN, 0))
        if units:
            cands = _drop_inside(cands, units)
        return _merge(cands)


MIN_REPEAT_LENGTH = 6
"""A found secret at least this long is also masked wherever else it occurs
in the same text, context or not (``token = 'X'`` … ``X``). Shorter values
(``***`` passwords like ``hunter``) are only masked where a rule saw them:
matching four letters literally would shred ordinary words."""


def _repeat_values(text: str, segments: list[tuple[int, int, str, int]]) -> dict[str, str]:
    values: dict[str, str] = {}
    for s, e, rule, _keep in segments:
        value = text[s:e]
        # Multi-line spans are key blocks: their BEGIN/END lines are kept
        # apart on purpose and their body never recurs bare.
        if "\n" in value or "\\n" in value:
            continue
        # A span can end in sentence punctuation its rule allowed ("… Yc0.");
        # the bare repeat is the value without it.
        for v in (value, value.rstrip(".,:;!?)]}>'\"`")):
            if len(v) >= MIN_REPEAT_LENGTH:
                values.setdefault(v, rule)
    return values


def found_values(text: str, findings: Iterable[Finding]) -> dict[str, str]:
    """The secret values ``findings`` (of ``redact(text)``) masked, each with the rule that
    found it: what another text of the same conversation should mask where it recurs
    (:class:`Recurring`). Only values eligible for bare masking: single-line, at least
    MIN_REPEAT_LENGTH characters."""
    return _repeat_values(text, [(f.start, f.end, f.rule, 0) for f in findings])


class Recurring:
    """Secret values found elsewhere in a conversation (another turn, a summary of it),
    to mask wherever they recur in a text, also JSON-escaped or URL-encoded.

    Holds raw secrets: keep it in memory only; its repr never shows them."""

    __slots__ = ("_rules", "_known", "_forms")

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        """``values``: value → id of the rule that found it (:func:`found_values`)."""
        kept = {v: r for v, r in (values or {}).items() if len(v) >= MIN_REPEAT_LENGTH and "\n" not in v}
        self._rules = kept
        self._known = KnownSecrets(kept, min_length=MIN_REPEAT_LENGTH) if kept else None
        self._forms = {form: v for v in kept for form in KnownSecrets([v], min_length=1).needles}

    def values_in(self, text: str) -> dict[str, str]:
        """The values (with their rules) that occur in ``text``, in any form."""
        return {v: self._rules[v] for form, v in self._forms.items() if form in text}

    def rule(self, found: str) -> str:
        """The rule that found ``found`` (a value, or an encoded form of one)."""
        return self._rules.get(self._forms.get(found, found), "repeated-secret")

    def spans(self, text: str) -> list[tuple[int, int]]:
        return self._known.spans(text) if self._known is not None else []

    def __len__(self) -> int:
        return len(self._rules)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def __repr__(self) -> str:  # never print the secrets themselves
        return f"Recurring({len(self._rules)} values)"


def _with_repeats(text: str, segments: list[tuple[int, int, str, int]],
                  searches: dict[frozenset[str], KnownSecrets]) -> list[tuple[int, int, str, int]]:
    """Segments plus every other occurrence of each found secret value.

    A found value becomes a literal mask for the whole text, like a known
    secret (also in its JSON-escaped and URL-encoded forms), so a secret
    recognised once by its context is masked where it appears again bare.
    ``searches``: the searches of earlier calls for the same text, by value set (the re-scans of
    one ``redact`` usually find the same values: its trie is built once).
    """
    values = _repeat_values(text, segments)
    if not values:
        return segments
    key = frozenset(values)
    known = searches.get(key)
    if known is None:
        known = searches[key] = KnownSecrets(values, min_length=MIN_REPEAT_LENGTH)
    cands = [(s, e, rule, keep, _PRIO_KEPT, 0) for s, e, rule, keep in segments]
    extra = False
    starts = [cs for cs, _ce, _r, _k in segments]  # sorted, not overlapping: one lookup an occurrence
    for s, e in known.spans(text):
        k = bisect.bisect_right(starts, s) - 1
        if not (k >= 0 and e <= segments[k][1]):
            rule = values.get(text[s:e], "repeated-secret")
            cands.append((s, e, rule, 0, _PRIO_KNOWN, 0))
            extra = True
    return _merge(cands) if extra else segments


Piece = tuple[int, int, int, int, bool]  # original start/end, output start/end, masked?


def _mask(text: str, segments: list[tuple[int, int, str, int]]) -> tuple[str, list[Piece]]:
    """Apply the masks; also return how output offsets map to the original."""
    out: list[str] = []
    pieces: list[Piece] = []
    last = n = 0
    for s, e, rule, keep in segments:
        if s > last:
            out.append(text[last:s])
            pieces.append((last, s, n, n + s - last, False))
            n += s - last
        mask = _mask_text(text[s:e], rule, keep)
        out.append(mask)
        pieces.append((s, e, n, n + len(mask), True))
        n += len(mask)
        last = e
    if last < len(text):
        out.append(text[last:])
        pieces.append((last, len(text), n, n + len(text) - last, False))
    return "".join(out), pieces


def _mask_text(secret: str, rule: str, keep: int) -> str:
    return "***" if len(secret) < SHORT_SECRET else f"{secret[:keep]}[REDACTED:{rule}]"


def _unfold(folded: Folded, segments: list[tuple[int, int, str, int]]) -> Redacted:
    """Mask the original text where spans of its folded copy were found.

    Each mask is the one the folded copy gets (same length rule, the folded
    kind prefix), so the output folds to the masked copy and a second pass
    finds nothing new; characters removed by folding inside a span, or right
    before it, go with it.
    """
    if not segments:
        return Redacted(folded.original, ())
    original = folded.original
    out: list[str] = []
    findings: list[Finding] = []
    last = 0
    for s, e, rule, keep in segments:
        # Characters removed right before the span go with it too: an ESC left
        # in front of "[REDACTED:" would read as an ANSI sequence next time.
        os_, oe = folded.end(s), folded.end(e)
        out.append(original[last:os_])
        out.append(_mask_text(folded.text[s:e], rule, keep))
        findings.append(Finding(rule, os_, oe))
        last = oe
    out.append(original[last:])
    return Redacted("".join(out), tuple(findings))


def _map_back(pieces: list[Piece], s: int, e: int) -> tuple[int, int]:
    """Original span of output span [s, e); a touched mask is covered whole."""
    starts = [p[2] for p in pieces]
    i = max(0, bisect.bisect_right(starts, s) - 1)
    os_, oe, ns, _ne, masked = pieces[i]
    start = os_ if masked else os_ + (s - ns)
    j = max(0, bisect.bisect_right(starts, e - 1) - 1)
    os_, oe, ns, _ne, masked = pieces[j]
    end = oe if masked else os_ + (e - ns)
    return start, end


Unit = tuple[int, int, int]  # start (kind prefix included), marker start, marker end


def _marker_units(text: str) -> list[Unit]:
    """Markers in ``text``, each with the kind prefix a mask keeps before it
    (``ghp_`` of ``ghp_[REDACTED:github-pat]``) when it is the right one."""
    units: list[Unit] = []
    for m in MARKER_RE.finditer(text):
        ms, me = m.span()
        start = ms
        for lit, keep in COMPILED.keeps.get(m.group(1), ()):
            p = ms - keep
            if p >= 0 and text.startswith(lit, p) and not any(c.isspace() for c in text[p:ms]):
                start = p
                break
        units.append((start, ms, me))
    return units


def _blank_markers(text: str, units: list[Unit]) -> str:
    parts: list[str] = []
    last = 0
    for _us, ms, me in units:
        parts.append(text[last:ms])
        parts.append(BLANK * (me - ms))
        last = me
    parts.append(text[last:])
    return "".join(parts)


def _drop_inside(cands: list, units: list[Unit]) -> list:
    """Skip candidates lying inside an existing marker and its kind prefix.

    Keeps redaction idempotent: ``AIza[REDACTED:gcp-api-key]`` after
    ``password=`` must not be re-read as a short password ``AIza``. A
    candidate reaching past the marker is kept: the marker shields only itself.
    """
    starts = [u[0] for u in units]
    out = []
    for c in cands:
        i = bisect.bisect_right(starts, c[0]) - 1
        if i >= 0 and c[1] <= units[i][2]:
            continue
        out.append(c)
    return out


def _merge(cands: list) -> list[tuple[int, int, str, int]]:
    """Union of overlapping candidates; the best-ranked one names the span."""
    if not cands:
        return []
    cands.sort(key=lambda c: (c[0], -c[1]))
    out: list[tuple[int, int, str, int]] = []
    cur_s, cur_e = cands[0][0], cands[0][1]
    best = cands[0]
    for c in cands[1:]:
        if c[0] < cur_e:
            cur_e = max(cur_e, c[1])
            if (c[4], c[5], c[1] - c[0]) > (best[4], best[5], best[1] - best[0]):
                best = c
        else:
            out.append((cur_s, cur_e, best[2], best[3] if best[0] == cur_s else 0))
            cur_s, cur_e, best = c[0], c[1], c
    out.append((cur_s, cur_e, best[2], best[3] if best[0] == cur_s else 0))
    return out


def _union(*lists: list[tuple[int, int, str, int]]) -> list[tuple[int, int, str, int]]:
    """The spans of several scans of one text (same offsets) as one list: overlapping spans
    become one; the prefix a mask keeps visible never reaches into another span."""
    cands = [(s, e, rule, keep, _PRIO_KEPT, 0) for spans in lists for s, e, rule, keep in spans]
    starts = sorted({c[0] for c in cands})
    out = []
    for s, e, rule, keep in _merge(cands):
        if keep:
            i = bisect.bisect_right(starts, s)
            if i < len(starts) and starts[i] < s + keep:
                keep = starts[i] - s
        out.append((s, e, rule, keep))
    return out


_DEFAULT = Redactor()


def redact(text: str, known: KnownSecrets | Iterable[str] | None = None) -> Redacted:
    """Redact ``text`` with the built-in rules (and ``known`` secrets, if given)."""
    return (_DEFAULT if known is None else Redactor(known)).redact(text)
