"""Credentials stated near a cue rather than right after it (issue 34, round 3).

The rules of :mod:`redaction.stated` read a value in a window of tokens on the cue's own line.
People also put the value on a line of its own, next to a line that names it, and write the cue
far from a value that is credential-shaped on its own. One rule per *position*, the value judged
on its shape (:func:`pw_like`), never on the words around it:

* **next line**: a line that names a password and ends without giving one ("The password is:",
  "Password for the NAS:", "new admin password below") followed, within three lines (blank
  lines, code fences, quote marks and message labels skipped), by a line holding one value;
* **previous line**: a line holding one value followed by a line that points back at it and names
  a password ("^ that's the password for the replica", "that one is the vault password");
* **same line, far**: a value credential-shaped on its own (``medium``) anywhere on the line of a
  password cue that is not a compound noun ("password manager");
* **before, linked**: a password-like value before its cue, joined to it by a linking word or a
  clause that points back ("try tundra407 (that's the admin password)", "orchid_324 — password
  for the kiosk", "use X when it prompts; it's the keystore password");
* **quoted phrase**: a passphrase of three to five plain words in quotes next to a password cue
  ("the passphrase is \\"quartz tundra mango violet\\"").

Same conventions as :mod:`redaction.detectors`: pure functions over (text, lowercased text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .cues import _COMPOUNDS, _CUES, ENV_REF_RE, _cue_hits, camel_passphrase, word_passphrase
from .detectors import Candidate
from .stated import _ACCOUNT_RE
from .value_shape import _PW_SYMBOLS, _id_shaped, shape

__all__ = ["find_near_values", "pw_like", "NEAR_PATTERNS", "NEAR_GATES", "detectors"]

_MAX_GAP_LINES = 4       # lines between a cue line and a value line (blank, fence, label)
_SPAN = 240              # characters of a line judged around a cue (bounds the work)

_LEAD = "\"'`*([{<“‘„«"
_TRAIL = "\"'`*)]}>.,;:”’»"
# a line's prefix that is no part of its content: a message label, quote marks, a bullet, indentation
_LINE_PREFIX_RE = re.compile(r"[ \t]*(?:(?:User|Assistant|Human|AI|Q|A|[A-Z]?[a-z]{2,12})[ \t]*:[ \t]+"
                             r"|\*\*[^*\n]{1,24}:\*\*[ \t]*|<[^>\s]{1,24}>[ \t]+|[—–][ \t]+"
                             r"|\[\d{1,2}:\d{2}(?::\d{2})?\][ \t]*[^\s:]{1,24}:[ \t]*)?(?:>[ \t]?)*(?:[-*•][ \t]+)?[ \t]*")
_FENCE_RE = re.compile(r"[ \t]*(?:```|~~~)[A-Za-z0-9_+-]*[ \t]*\r?")
_LABEL_ONLY_RE = re.compile(r"[ \t]*(?:(?:User|Assistant|Human|AI|Q|A)[ \t]*:|\*\*[^*\n]{1,24}:\*\*"
                            r"|[A-Za-z][\w.-]{1,24}[ \t]{2,}\d{1,2}:\d{2}(?:[ \t]?[APap][Mm])?)[ \t]*\r?")
_ASK_RE = re.compile(r"(?i)\b(?:what'?s|whats|what|which|where|remind me|anyone know|do you (?:have|know))\b")
# an answer that opens with a word or two before its value: "It's X", "Sure: X", "Here it is: X"
_OPENER_RE = re.compile(r"(?i)(?:it'?s|it’s|it is|that'?s|sure[,!:.]?|here(?: it is| you go)?[:,]?|try|use|yes[,:]?)"
                        r"[ \t]+")
# a word plus a number (and a symbol): "tundra407", "orchid_324", "Urchin_1964", "Zebra_2008!"
_WORD_NUM_RE = re.compile(r"(?:[A-Za-z]{3,12}[-_.+]){0,3}[A-Za-z]{3,12}[-_.+!#$%&*@]?[0-9]{2,4}[-_~!#$%&*@]?")
# letters and digits in one case, a digit before a letter somewhere: "gqtd9vdl3g", "0l9upowdvu"
_LOWER_RANDOM_RE = re.compile(r"(?=[a-z0-9]*[0-9][a-z])(?=(?:[a-z0-9]*[a-z]){3})[a-z0-9]{8,40}")
# the words of passwords people quote as examples ("password123 is the most common password")
_FAMOUS_RE = re.compile(r"(?i)(?:pass(?:word|wd|w0rd)?|admin|qwerty|letmein|welcome|changeme|secret|test|example|hunter"
                        r"|iloveyou|monkey|dragon|abc|user|login|default|guest|demo|sample)[-_.!]?[0-9]{0,6}[!#$%&*@]?$")
# a passphrase of plain words in quotes: "quartz tundra mango violet"
_SPACED_RE = re.compile(r"([\"'“‘`])((?:[a-z]{3,10} ){2,4}[a-z]{3,10})([\"'”’`])")
# an unquoted passphrase of plain words after a linker, ending its clause: "… is gecko marble eclipse fjord"
_BARE_PHRASE_RE = re.compile(r"(?:\b(?:is|was|are|ist|est|es|är|er|jest|lautet)|[:=/é→è]|->)[ \t]+"
                             r"((?:[a-z]{3,10} ){2,5}[a-z]{3,10}[0-9]{0,4})(?=[ \t]*(?:$|\r?\n|[.,;!?)]|[ \t]+[(—–-]))",
                             re.MULTILINE)
_STOP = frozenset("""
the and for not but you your our their this that with from into have has had was were are is its it's
what when where which who why how all any can will would should could may might must just only also
very more most some such than then them they there these those here about after before over under
again once out off too yes no nor own same each few both other being been does did doing done
password passwords pass passphrase login user username account reset change forgot field prompt
now still never always already just really quite too also even well back down away there wrong right
correct incorrect invalid valid long short weak strong same different new old first last next other
empty blank missing unknown secret private public hidden visible encrypted hashed stored saved set
sent shared written kept changed required needed optional working broken fine good bad great
somewhere anywhere everywhere nothing something anything everything none every much many
time times day days week weeks month months year years hour hours minute minutes second seconds
file files vault manager chat email slack message page site wiki docs doc note notes link
get got give gave take took make made use using used see saw know knew think thought say said tell told
let put keep try ask need want like work works type typed enter run runs go goes come comes
one two three four five six seven eight nine ten
""".split())
_BARE_WORDS_RE = re.compile(r"(?:[a-z]{3,10} ){2,5}[a-z]{3,10}[0-9]{0,4}")
_STOP_ENDS = ("ed", "ing", "ly", "tion", "ness", "ment", "able", "ible", "ous", "ful", "less")
# words that tie a value to a cue after it on the line ("X is the …", "X (that's the …", "X — …")
_LINKS_BEFORE = frozenset("is was are were as for into in at on = : - — – -> → ( <- ← works work goes went"
                          " should would will be being set typed type enter entered use used paste pasted".split())
_POINTERS = ("that's", "thats", "that is", "that one", "this is", "this one", "it's", "its", "it is",
             "which is", "^", "↑", "☝", "above", "(that's", "(this is", "(it's")
# a line ending that says the value follows on the next line
_OPEN_TAIL_RE = re.compile(r"(?:[:=]|->|→|\b(?:is|are|was|below|follows|following|here|attached|ist|est|es|é|è|lautet))"
                           r"[ \t]*[\"'`*]*[ \t]*\r?$", re.IGNORECASE)
NEAR_PATTERNS = (_LINE_PREFIX_RE.pattern, _FENCE_RE.pattern, _WORD_NUM_RE.pattern, _SPACED_RE.pattern,
                 _OPEN_TAIL_RE.pattern)
#: the cue stems find_near_values acts on (kinds "pw" and "login" of cues.py); the gate pass hands it
#: the ones a text holds
NEAR_GATES = tuple(stem for stem, kind in _CUES.items() if kind in ("pw", "login"))


def pw_like(v: str) -> str | None:
    """``"medium"``/``"weak"`` as :func:`redaction.value_shape.shape`, and ``"weak"`` too for the
    generated shapes it leaves out: word passphrases, capitalised words with a number, a word
    with a number (``tundra407``, ``orchid_324``). None for words, ids, code, references."""
    if len(v) < 4 or len(v) > 128 or ENV_REF_RE.search(v):
        return None
    sh = shape(v)
    if sh is not None:
        return sh
    if word_passphrase(v) or camel_passphrase(v):
        return "weak"
    if (_WORD_NUM_RE.fullmatch(v) or _LOWER_RANDOM_RE.fullmatch(v)) and not _id_shaped(v) and not v[:-1].isdigit() \
            and not _FAMOUS_RE.match(v):
        return "weak"
    return None


def _strong(v: str) -> bool:
    """A value that reads as a password without its context deciding: credential-shaped, or
    holding a digit or a password symbol, or a generated passphrase (not ``MarkLogic``, ``valueFrom``)."""
    sh = pw_like(v)
    return sh == "medium" or (sh is not None and (any(c.isdigit() or c in _PW_SYMBOLS for c in v)
                                                  or word_passphrase(v) or camel_passphrase(v)))


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s] in _LEAD:
        s += 1
    while e > s and text[e - 1] in _TRAIL:
        e -= 1
    return s, e


def _line(text: str, p: int) -> tuple[int, int]:
    ls = text.rfind("\n", 0, p) + 1
    le = text.find("\n", p)
    return ls, (len(text) if le < 0 else le)


def _lone_value(text: str, ls: int, le: int) -> tuple[int, int] | None:
    """The value of a line that holds nothing else (after its label, quote marks, bullet), if any."""
    m = _LINE_PREFIX_RE.match(text, ls, le)
    s = m.end() if m else ls
    e = le
    while e > s and text[e - 1] in " \t\r":
        e -= 1
    if e <= s:
        return None
    spaced = _SPACED_RE.fullmatch(text, s, e)
    if spaced is not None and _phrase_ok(spaced.group(2)):
        return spaced.span(2)
    if _BARE_WORDS_RE.fullmatch(text, s, e) and _phrase_ok(text[s:e]):
        return s, e
    if any(c in " \t" for c in text[s:e]):
        o = _OPENER_RE.match(text, s, e)
        if o is None:
            return None
        q = text.find(" ", o.end(), e)
        q = e if q < 0 else q
        b = _BARE_WORDS_RE.match(text, o.end(), e)
        if b is not None and _phrase_ok(b.group()) and (b.end() == e or text[b.end()] in ".,;!"):
            return b.span()  # "It's maple cactus violin harbor."
        ts, te = _trim(text, o.end(), q)
        return (ts, te) if te > ts and (q == e or text[q - 1] in ",;—" or text[q:e].lstrip()[:1] in "(—–-")\
            else None
    ts, te = _trim(text, s, e)
    if any(c in ",|;" for c in text[ts:te]):
        return None  # a row of a table or CSV ("nas,admin,X"): the table rules judge its cells
    return (ts, te) if te > ts else None


def _phrase_ok(words: str) -> bool:
    """Plain words of a generated passphrase: no function word, no common verb, adjective or
    adverb ("saved somewhere safe now" is a sentence, "gecko marble eclipse fjord" is not)."""
    ws = words.split()
    return 3 <= len(ws) <= 6 and not any(w.rstrip("0123456789") in _STOP for w in ws) \
        and sum(w.rstrip("0123456789").endswith(_STOP_ENDS) for w in ws) == 0


def _content(text: str, ls: int, le: int) -> bool:
    """A line that is not blank, a fence or a bare message label."""
    return bool(text[ls:le].strip()) and not _FENCE_RE.fullmatch(text, ls, le) and not _LABEL_ONLY_RE.fullmatch(
        text, ls, le)


def _next_value(text: str, le: int) -> tuple[int, int] | None:
    """The lone value of the first content line after ``le`` (within a few lines)."""
    p = le
    for _ in range(_MAX_GAP_LINES + 1):
        if p >= len(text):
            return None
        ls, nle = _line(text, p + 1)
        if _content(text, ls, nle):
            if _LINE_PREFIX_RE.match(text, ls, nle) is not None:
                v = _lone_value(text, ls, nle)
                if v is None and text[ls:nle].rstrip().endswith("?"):
                    p = nle  # "can you paste it?": the value may come in the message after
                    continue
                if v is None:
                    # "Assistant: Here it is:" — a line that again opens a value: look past it
                    if _OPEN_TAIL_RE.search(text, ls, nle) and len(text[ls:nle].split()) <= 6:
                        p = nle
                        continue
                return v
            return None
        p = nle
    return None


def _more_lines(text: str, p: int, seen: set[int]) -> Iterator[Candidate]:
    """The lines right after a value given on a line of its own, each one token of the same kind:
    a value split over lines ("Vx7!kQ2m" / "Wz9#pL4t"); a blank line or a fence ends it."""
    for _ in range(3):
        le = text.find("\n", p)
        if le < 0:
            return
        ls, nle = _line(text, le + 1)
        v = _lone_value(text, ls, nle) if text[ls:nle].strip() and not _FENCE_RE.fullmatch(text, ls, nle) else None
        if v is None or " " in text[v[0]:v[1]] or v[0] in seen or not _strong(text[v[0]:v[1]]):
            return
        seen.add(v[0])
        yield ("stated-password", v[0], v[1], 0)
        p = v[1]


def _prev_value(text: str, ls: int) -> tuple[int, int] | None:
    p = ls - 1
    for _ in range(_MAX_GAP_LINES + 1):
        if p < 0:
            return None
        pls, ple = _line(text, p)
        if _content(text, pls, ple):
            return _lone_value(text, pls, ple)
        p = pls - 1
    return None


def _ok(text: str, s: int, e: int) -> bool:
    v = text[s:e]
    if _SPACED_RE.fullmatch(text, max(0, s - 1), min(len(text), e + 1)) or (" " in v and _phrase_ok(v)):
        return " " in v
    return not v.endswith(":") and _strong(v)


def find_near_values(text: str, low: str, cues: Iterable[str] | None = None) -> Iterator[Candidate]:
    hits = [h for h in _cue_hits(text, low, cues) if h[2] in ("pw", "login")]
    if not hits:
        return
    seen: set[int] = set()
    done_lines: set[int] = set()
    for cs, ce, kind in hits:
        if cs > 0 and text[cs - 1] in "_-$./@#%\\":
            continue  # a name holding a cue word (DB_PASSWORD, wpa_passphrase): the other rules' business
        ls, le = _line(text, cs)
        tail = text[ce:min(le, ce + _SPAN)]
        words = tail.split()
        compound = bool(words) and words[0].lower().strip(",.:;") in _COMPOUNDS
        # ---- next line: the cue line gives no value and opens one
        if not any(pw_like(text[a:b]) for a, b in (_trim(text, m.start() + ce, m.end() + ce)
                                                    for m in re.finditer(r"\S+", tail))) \
                and not compound and (len(words) <= 8 or (len(words) <= 14 and tail.rstrip().endswith(":"))) and not tail.rstrip().endswith((".", "!")) \
                and "**" not in tail and "\x0b" not in tail:  # "password: ***": a value given (masked) here
            if _OPEN_TAIL_RE.search(text, ce, le) or not tail.strip() or tail.strip().endswith("?") \
                    or _ASK_RE.search(text, ls, cs):  # "<ravi> what's the admin pw for grafana" (no "?")
                v = _next_value(text, le)
                if v is not None and v[0] not in seen and _ok(text, *v):
                    seen.add(v[0])
                    yield ("stated-password", v[0], v[1], 0)
                    yield from _more_lines(text, v[1], seen)
        # ---- previous line: this line points back at a lone value above it
        head = low[ls:cs]
        if head.strip().startswith(_POINTERS) and len(head.split()) <= 5:
            v = _prev_value(text, ls)
            if v is not None and v[0] not in seen and _ok(text, *v):
                seen.add(v[0])
                yield ("stated-password", v[0], v[1], 0)
        if kind != "pw" or compound or ls in done_lines:
            continue
        done_lines.add(ls)
        yield from _same_line(text, low, ls, le, cs, ce, seen)


def _same_line(text: str, low: str, ls: int, le: int, cs: int, ce: int, seen: set[int]) -> Iterator[Candidate]:
    lo, hi = max(ls, cs - _SPAN), min(le, ce + _SPAN)
    for m in _SPACED_RE.finditer(text, lo, hi):
        if _phrase_ok(m.group(2)) and m.start(2) not in seen and (m.end() <= cs + 2 or m.start() >= ce - 1):
            seen.add(m.start(2))
            yield ("stated-password", *m.span(2), 0)
    for m in _BARE_PHRASE_RE.finditer(text, ce, hi):
        if _phrase_ok(m.group(1)) and m.start(1) not in seen and m.start() - ce <= 60:
            seen.add(m.start(1))
            yield ("stated-password", *m.span(1), 0)
            break
    toks = [(m.start(), m.end()) for m in re.finditer(r"\S+", text[lo:hi])]
    for s0, e0 in toks:
        s, e = _trim(text, lo + s0, lo + e0)
        if e <= s or s in seen or (s < ce and e > cs) or _ACCOUNT_RE.fullmatch(text[lo + s0:lo + e0].strip(",.;:()")):
            continue  # the cue's own token; a MySQL account 'root'@'host'
        v = text[s:e]
        sh = pw_like(v)
        if sh is None:
            continue
        if sh == "medium" or (e <= cs and _strong(v) and _linked(text, low, e, cs)) or (
                s >= ce and _strong(v) and _right_after(low, ce, s)):
            seen.add(s)
            yield ("stated-password", s, e, 0)


_AFTER_LINKS = frozenset("is was are were ist est es é è er är jest to je lautet : = - — – -> → now: be".split())


def _right_after(low: str, ce: int, s: int) -> bool:
    """Only linkers between the cue and the value ("pass is X", "Passwort: X", "pw → X")."""
    between = low[ce:s].split()
    return len(between) <= 2 and all(t.strip("\"'`*") in _AFTER_LINKS or not t.strip("\"'`*:=") for t in between)


def _linked(text: str, low: str, e: int, cs: int) -> bool:
    """A value before its cue, joined to it: a link word and no other value between them, the
    sentence not ended, a clause break only when the next clause points back at the value."""
    between = low[e:cs]
    if len(between) > 90 or len(between.split()) > 7 or any(pw_like(t.strip(_LEAD + _TRAIL)) for t in text[e:cs].split()):
        return False
    if re.search(r"[.!?](?:\s|$)", between):
        return False
    parts = re.split(r"[;,]", between)
    if len(parts) > 2:
        return False
    if len(parts) == 2 and not parts[1].strip().startswith(_POINTERS):
        return False
    toks = between.replace("(", " ( ").split()
    return between.startswith((" (", " —", " –", " -", " =", ":")) or any(t in _LINKS_BEFORE for t in toks) \
        or any(t.startswith(_POINTERS) for t in toks)


def detectors(Detector):  # noqa: N803 - the class from rules.py (which imports this module)
    """The detector entries of this module, for ``rules.DETECTORS``."""
    from . import stated_pairs as sp  # imports this module: loaded once this one is

    return (Detector("stated-near", find_near_values, gates=NEAR_GATES, patterns=NEAR_PATTERNS, cued=True),
            Detector("continued-secret", sp.find_continued, gates=("\x0b", "***"),
                     patterns=(sp._CONTINUED_RE.pattern, sp._JOINED_RE.pattern)),
            Detector("label-pair", sp.find_label_pairs, gates=(" / ", " // "), patterns=(sp._LABEL_PAIR_RE.pattern,)),
            Detector("login-pair", sp.find_login_pairs, gates=("/", "|", ",", ":", "=", " with ", " and ", " mit ", " et ", " y ",
                                                            " e ", " con ", " avec "),
                     patterns=(sp._PAIR_CUE_RE.pattern, sp._PAIR_RE.pattern, sp._UP_RE.pattern, sp._HOST_TAIL_RE.pattern,
                               sp._PW_WORD_RE.pattern)),
            Detector("named-key", sp.find_named_keys, gates=sp.NAMED_KEY_GATES,
                     patterns=(sp._NAMED_KEY_RE.pattern, sp._B64_RUN_RE.pattern)))
