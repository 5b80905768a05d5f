"""Credentials stated in language (issue 34): a cue word near a credential-shaped value.

People give passwords in sentences, not assignments: "log in as build with password
Sparrow1979&", "9RycyrVWSvodSl3efw is the password for the prod Postgres", "Das Passwort
für Jenkins ist …", "creds deploy:Sparrow1994$", an answer that gives the password the
question asked for. Rather than one pattern per phrasing, one rule:

* a **cue** (password and its forms in other languages, pass, pw, passphrase, creds, login,
  sign in, …) found by a literal scan of the lowercased text;
* **candidate values**: the whitespace-separated tokens in a short window around the cue
  (after it on its line, before it on its line, or the first line of the next message of
  the turn when the cue is in the message before);
* each candidate **judged on its own shape** (:func:`shape`): ``weak`` (could be a
  password if the sentence says so: a digit, a symbol or an inner capital, not an id),
  ``medium`` (credential-shaped on its own: random casing, password symbols, leetspeak,
  a generated passphrase) or nothing (a word, a URL, a path, a host, a version, a UUID, a
  hash, an identifier, code). A value right after the cue (or after a linker: ``:``,
  ``is``, ``ist``, ``est``, ``lautet``, ``→``…) may be ``weak``; before the cue it may be
  ``weak`` when a linking word joins them in the sentence ("X was the old password", "paste X
  into the password field"); anywhere else in the window it must be ``medium``. A login cue
  takes the second of a pair ("admin / X", "admin and X", "admin/X"); a PIN cue takes digits; a
  cue that is part of a compound noun ("password manager") takes only ``medium`` values.

The cue words and the word lists live in :mod:`redaction.cues`; more forms (``user:password``,
word passphrases, the passphrase after a key block, AWS prose) in :mod:`redaction.stated_forms`.

Pure functions over (text, ascii-lowercased text) like :mod:`redaction.detectors`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .cues import (
    _COMPOUNDS,
    _LINKERS,
    _LOWER_PW_RE,
    _OPENERS,
    _PIN_DETERMINERS,
    _PIN_RE,
    _USERISH_RE,
    ENV_REF_RE,
    STATED_CUE_PATTERNS,
    _cue_hits,
    word_passphrase,
)
from .value_shape import _PW_SYMBOLS, _UUID_RE, shape

Candidate = tuple[str, int, int, int]

__all__ = ["find_stated_passwords", "shape", "detectors"]


# Tokens in a window: runs of non-space characters.
_TOKEN_RE = re.compile(r"\S+")
_WINDOW_AFTER = 10       # tokens after a cue, on its line
_WINDOW_BEFORE = 12      # tokens before a cue, on its line
_SPAN_AFTER = 200        # characters scanned after / before a cue (bounds the work)
_SPAN_BEFORE = 160

_LEAD_TRIM = "\"'`([{<«“‘„"
_TRAIL_TRIM = "\"'`)]}>.,;:»”’"

# --------------------------------------------------------------------------
# Scanning
# --------------------------------------------------------------------------


def _line_bounds(text: str, s: int, e: int) -> tuple[int, int]:
    """The line around [s, e), looked for no further than the windows reach (long lines are
    not scanned end to end for every cue)."""
    lo = max(0, s - _SPAN_BEFORE - 64)
    hi = min(len(text), e + _SPAN_AFTER + 64)
    ls = text.rfind("\n", lo, s) + 1 or lo
    le = text.find("\n", e, hi)
    return ls, (hi if le < 0 else le)


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and (text[s] in _LEAD_TRIM or not text[s].isascii()):
        s += 1
    while e > s and (text[e - 1] in _TRAIL_TRIM or not text[e - 1].isascii()):
        e -= 1
    while e - s > 2 and text[s] == "*" and text[e - 1] == "*":
        s, e = s + 1, e - 1  # Markdown emphasis around the value
    while e > s and (text[e - 1] in _TRAIL_TRIM or not text[e - 1].isascii()):
        e -= 1
    # a closing bracket or quote the value opened stays ("Qy(7R…" keeps its own)
    return s, e


def _tokens(text: str, lo: int, hi: int, limit: int = 1 << 30) -> list[tuple[int, int]]:
    out = []
    for m in _TOKEN_RE.finditer(text, lo, hi):
        out.append(m.span())
        if len(out) >= limit:
            break
    return out


_HEX_TOKEN_RE = re.compile(r"[0-9a-fA-F]{32,128}")
_LONG_HEX_RE = re.compile(r"[0-9a-f]{16,128}|[0-9A-F]{16,128}")


def _token_after(text: str, ce: int, toks: list[tuple[int, int]], seen: set[int],
                 linked: bool = False, shape=shape) -> Iterator[Candidate]:
    """"TOKEN iS X", "SeCrEt: X": a linker right after the cue, then a value that is a token on its own."""
    qualifiers = 0
    for s, e in toks[:5]:
        raw = text[s:e]
        if _is_linker(raw):
            linked = True
            continue
        if not linked:
            qualifiers += 1  # "chiave API è X", "token de acceso es X", "clé d'API est X"
            if qualifiers > 2 or not _QUALIFIER_RE.fullmatch(raw):
                return
            continue
        ts, te = _trim(text, s, e)
        v = text[ts:te]
        if ts not in seen and len(v) >= 16 and (_HEX_TOKEN_RE.fullmatch(v) or shape(v) == "medium") \
                and not _UUID_RE.fullmatch(v):
            seen.add(ts)
            yield ("stated-credential", ts, te, 0)
        return


_QUALIFIER_RE = re.compile(r"(?:[A-Za-z]['’])?[A-Za-z]{1,8}")
_OP_RE = re.compile(r"[\"'`*]{0,3}[ \t]*(?:[:=]{1,3}>?|->|→)")
_PUNCT_LINK = frozenset(":=-—–>→/|,*")


def _is_linker(tok: str) -> bool:
    t = tok.lower().strip("\"'`")
    if t.count("*") >= 3 and not t.strip("*"):
        return False  # "***": a masked value, not Markdown around a label
    return t in _LINKERS or (t.endswith(":") and t[:-1] in _LINKERS) or (bool(t) and all(c in _PUNCT_LINK for c in t))


# a message of a turn, or of a chat log pasted with timestamps ("[16:48] nadia: …")
_MSG_RE = re.compile(r"(?m)^(?:User|Assistant|user|assistant|USER|ASSISTANT):[ \t]*"
                     r"|^\[\d{1,2}:\d{2}(?::\d{2})?(?:[ \t]*[APap][Mm])?\][ \t]*[^\s:\]]{1,24}(?: [^\s:\]]{1,24})?:[ \t]*"
                     r"|^(?:>[ \t]?)?(?:\*\*)?(?:Human|AI|Q|A|Me|Bot|Agent|Customer|Support|Claude|ChatGPT|Copilot"
                     r"|[A-Z][a-z]{2,11}|[a-z]{3,12})(?:\*\*)?:[ \t]+(?=\S)")


def _memo_shape(memo: dict[str, str | None], v: str) -> str | None:
    """shape(v), computed once per distinct value within one call (a text with thousands of
    cues repeats its tokens; the memo lives only as long as the call)."""
    sh = memo.get(v, _UNSEEN)
    if sh is _UNSEEN:
        sh = memo[v] = shape(v)
    return sh  # type: ignore[return-value]


_UNSEEN = object()
# what a value needs at least one of (every shape() that is not None has one)
_VALUEISH_RE = re.compile(r"[0-9!@#$%^&*+=?~|]|[A-Za-z][A-Z]")
# a word passphrase as a whole token ("pixel_parrot_lantern"): the other way a window holds a value
_WORD_PW_TOKEN_RE = re.compile(r"(?<![\w.+-])[a-z]{3,10}([-_.+])[a-z]{3,10}(?:\1[a-z]{3,10}){1,5}(?:\1?[0-9]{1,4})?"
                               r"(?![\w+-]|\.\w)")


def _valueish(text: str, lo: int, hi: int) -> bool:
    """Anything in text[lo:hi] a value could be: a digit, a symbol, an inner capital, a word passphrase."""
    if _VALUEISH_RE.search(text, lo, hi):
        return True
    return any(word_passphrase(m.group()) for m in _WORD_PW_TOKEN_RE.finditer(text, lo, hi))
# What any value this detector reports has somewhere in it: shape() is None without a digit, a
# password symbol or a capital after another character; the other way in is a long hex token.
_ANY_VALUE_RE = re.compile(r"[0-9!@#$%^&*+=?~|]|\S[A-Z]|[0-9a-fA-F]{32}|[a-z]{3}[-_.+][a-z]{3,10}[-_.+][a-z]{3}")


def find_stated_passwords(text: str, low: str, cues: Iterable[str] | None = None) -> Iterator[Candidate]:
    if not _ANY_VALUE_RE.search(text):
        return  # nothing in the text could be judged a value: the cue scan would be wasted
    hits = _cue_hits(text, low, cues)
    if not hits:
        return
    memo: dict[str, str | None] = {}
    shape = lambda v: _memo_shape(memo, v)  # noqa: E731 - shadows the module function in this call
    judged_to = 0
    cue_starts = {h[0] for h in hits}
    seen: set[int] = set()
    for cs, ce, kind in hits:
        ls, le = _line_bounds(text, cs, ce)
        op = _OP_RE.match(text, ce)
        if op is not None and op.end() > ce:
            ce = op.end()  # "PaSsWoRd=X", "pass:X": the operator is not part of the value
            if kind == "tok":
                yield from _token_after(text, ce, _tokens(text, ce, min(le, ce + _SPAN_AFTER))[:3], seen, True, shape)
                continue
        # ---- after the cue, on its line
        hi = min(le, ce + _SPAN_AFTER)
        # most prose around a cue has no digit, symbol or inner capital: nothing to judge there
        toks = _tokens(text, ce, hi, _WINDOW_AFTER) if _valueish(text, ce, hi) else []
        question = text.startswith("?", ce)
        if text.startswith((".", "!", "?"), ce) and (ce + 1 >= len(text) or text[ce + 1].isspace()):
            # "… reset your password." ends the sentence: nothing is stated after it; after a
            # question only its answer right after it ("My Gmail password? Sunshine99, …")
            toks = toks[1:2] if question else []
        if kind == "tok":
            yield from _token_after(text, ce, toks, seen, shape=shape)
            continue
        if kind in ("pin", "code"):
            if kind == "pin" and not (text[cs:ce].isupper() or low.endswith(_PIN_DETERMINERS, max(0, cs - 10), cs)):
                continue  # "pin the version to 3000": the verb
            kind = "pw"
            pin = True
        else:
            pin = False
        compound = bool(toks) and text[toks[0][0]:toks[0][1]].lower().strip(",.:;") in _COMPOUNDS
        adjacent = True   # only linkers so far between the cue and this token
        clause_ended = text.startswith((",", ";"), ce)
        after_link = True  # the previous token links to this one ("… ist X", "temporal: X")
        prev: list[str] = []  # the tokens judged so far (a login pair: "admin / X", "admin and X")
        for s, e in toks:
            if s in cue_starts:
                break  # the next cue judges what follows it
            raw = text[s:e]
            ts, te = _trim(text, s, e)
            if te <= ts:
                after_link = True
                prev.append(raw)
                continue
            v = text[ts:te]
            link = _is_linker(raw) or (raw.endswith(":") and len(raw) > 1)
            if adjacent and link:
                continue
            if pin:  # a PIN is digits: "PIN: 7391", "the PIN for the door is 7391"
                sh = "weak" if _PIN_RE.fullmatch(v) and len(set(v)) >= 2 and (adjacent or after_link) else None
            else:
                sh = shape(v)
            if sh is None and kind == "pw" and (adjacent or after_link) and not compound and not pin and (
                    _LONG_HEX_RE.fullmatch(v) or _LOWER_PW_RE.fullmatch(v) or word_passphrase(v)):
                sh = "weak"  # "password: 0f18a5d4…", "password is qwerty123", "… is raven.tango.viper"
            elif sh is None and kind == "login" and word_passphrase(v):
                sh = "weak"  # "creds: svc-backup / pepper_walrus_canyon" (a pair still needed)
            if sh is not None and (ENV_REF_RE.search(v) or _ACCOUNT_RE.fullmatch(raw.strip(",.;:()"))):
                sh = None  # "the password must be $env:DB_PASSWORD": where it lives, not the value
            if sh == "weak" and not adjacent and (clause_ended or not (
                    any(c.isdigit() or c in _PW_SYMBOLS for c in v) or word_passphrase(v))):
                sh = None  # "…password, the network is GuestNet": a name in another clause
            if sh == "weak" and compound:
                sh = None  # "my password manager is 1Password8"
            if "/" in v and not pin and (adjacent or after_link) and v.count("/") == 1:
                u, _sl, p = v.partition("/")
                if _USERISH_RE.fullmatch(u) and "/" not in p and shape(p) is not None and ts + len(u) + 1 not in seen:
                    seen.add(ts + len(u) + 1)  # "login admin/Sunshine99": the password after the user
                    yield ("stated-password", ts + len(u) + 1, te, 0)
            pair = kind == "login" and len(prev) >= 2 and prev[-1].lower() in ("/", "and", "&", "|") \
                and _USERISH_RE.fullmatch(prev[-2].strip("`'\""))
            if sh == "medium" or (sh == "weak" and (kind == "pw" and (adjacent or after_link) or pair)):
                if ts not in seen:
                    seen.add(ts)
                    yield ("stated-password", ts, te, 0)
            elif raw[-1] in ".!?" and (e >= len(text) or text[e].isspace()):
                break  # the sentence ended before a value
            adjacent = False
            after_link = link
            clause_ended = clause_ended or raw[-1] in ",;"
            prev.append(raw)
        # ---- before the cue, on its line (tokens an earlier cue's window judged are not judged again)
        lo = max(ls, cs - _SPAN_BEFORE, judged_to)
        before = _tokens(text, lo, cs)[-_WINDOW_BEFORE:] if _valueish(text, lo, cs) else []
        judged_to = max(judged_to, cs)
        for k, (s, e) in enumerate(before):
            ts, te = _trim(text, s, e)
            if te <= ts or ts in seen:
                continue
            sh = shape(text[ts:te]) or ("weak" if kind == "pw" and word_passphrase(text[ts:te]) else None)
            if sh is not None and _ACCOUNT_RE.fullmatch(text[s:e].strip(",.;:()")):
                continue  # 'root'@'172.18.0.3': a MySQL account in an error or GRANT, not a password
            if sh == "medium" or (sh == "weak" and kind in ("pw", "login") and _linked_before(text, before, k, kind)):
                seen.add(ts)
                yield ("stated-password", ts, te, 0)
    yield from _across_messages(text, low, hits, seen, shape)


# Words that tie a value before a cue to it: "X was the old password", "X is what I use as the
# wifi password", "paste X into the password field", "X (password)", "X should work as password".
_BEFORE_LINKS = frozenset("is was are were 's as into in for ( — – - : = should that's thats ist war est es é è"
                          " era sind is: was:".split())


# a MySQL account: 'user'@'host', user@'%'
_ACCOUNT_RE = re.compile(r"([\"'`])[\w.$-]{1,32}\1@([\"'`])[\w.%:-]{1,253}\2|[\w.$-]{1,32}@([\"'`])[\w.%:-]{1,253}\3")
_POINT_BACK = frozenset("that's thats that it's its this which".split())


def _linked_before(text: str, before: list[tuple[int, int]], k: int, kind: str) -> bool:
    """A weak value before a cue counts when a linking word joins it to the cue within the sentence
    (a password), or it is the second of a pair "user and|/ X" (a login)."""
    v = text[before[k][0]:before[k][1]]
    if not any(c.isdigit() or c in _PW_SYMBOLS for c in v) and not word_passphrase(v.strip("\"'`*:,;")):
        return False
    between = [text[s:e] for s, e in before[k + 1:]]
    if len(between) > 7:
        return False
    seq = [v] + between[:-1]
    breaks = [j for j, t in enumerate(seq) if t[-1] in ".!?;,"]
    # one clause break is fine when the next clause points back at the value ("X, that's the
    # password", "paste X when it prompts; it's the keystore password")
    if breaks and (len(breaks) > 1 or seq[breaks[0]][-1] not in ",;" or breaks[0] >= len(between)
                   or between[breaks[0]].lower().replace("’", "'") not in _POINT_BACK):
        return False
    if kind == "login":
        return k >= 2 and text[before[k - 1][0]:before[k - 1][1]].lower() in ("/", "and", "&") \
            and _USERISH_RE.fullmatch(text[before[k - 2][0]:before[k - 2][1]].strip("`'\"")) is not None
    return text[before[k][1]:before[k][1] + 2] in (" (", " —", " –") or any(
        t.lower().strip("\"'`") in _BEFORE_LINKS or t.lower().endswith("'s") for t in between)


def _across_messages(text: str, low: str, hits: list[tuple[int, int, str]], seen: set[int],
                     shape=shape) -> Iterator[Candidate]:
    """A turn "User: …\\n\\nAssistant: …": a cue in one message, the value in the next
    (the question and its answer), or a message that is only a value next to a message
    with a cue ("kesiP80…" then "Thanks, I'm logged in")."""
    starts = [m for m in _MSG_RE.finditer(text)]
    if len(starts) < 2:
        return
    spans = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        spans.append((m.end(), end))
    has_cue = [any(s <= cs < e for cs, _ce, _k in hits) for s, e in spans]
    for i, (s, e) in enumerate(spans):
        body_end = e
        while body_end > s and text[body_end - 1].isspace():
            body_end -= 1
        first_le = text.find("\n", s, body_end)
        first_le = body_end if first_le < 0 else first_le
        toks = _tokens(text, s, first_le)
        alone = len(toks) <= 3
        cue_before = i > 0 and has_cue[i - 1]
        cue_after = i + 1 < len(spans) and has_cue[i + 1] and len(_tokens(text, s, body_end)) <= 3
        if not (cue_before or cue_after):
            continue
        for k, (ts0, te0) in enumerate(toks[:16]):
            ts, te = _trim(text, ts0, te0)
            if te <= ts or ts in seen:
                continue
            v = text[ts:te]
            sh = shape(v) or ("weak" if word_passphrase(v) else None)
            if sh is None or ENV_REF_RE.search(v):
                continue
            before = text[toks[k - 1][0]:toks[k - 1][1]].lower() if k > 0 else ""
            opened = all(text[a:b].lower() in _OPENERS or _is_linker(text[a:b]) for a, b in toks[:k]) or (
                before in _OPENERS)  # "…, it's X"
            # the answer names it: "it was X", "we set it to X", "from your notes: X", "`X`", "try X"
            linked = cue_before and (_is_linker(before) or (before.endswith(":") and len(before) > 1)
                                     or text[ts0] in "`\"'" or before in ("try", "use", "it's", "it’s"))
            if sh == "medium" or (sh == "weak" and cue_before and (k == 0 or alone or opened or linked)):
                seen.add(ts)
                yield ("stated-password", ts, te, 0)


def detectors(Detector):  # noqa: N803 - the class from rules.py (which imports this module)
    """The detector entries of this module, for ``rules.DETECTORS``."""
    from . import stated_forms as f  # imports this module: loaded once this one is

    return (
        Detector("stated-password", find_stated_passwords, patterns=STATED_CUE_PATTERNS),
        Detector("user-colon-password", f.find_user_colon_passwords, gates=(":",), patterns=f.USER_PW_PATTERNS),
        Detector("word-passphrase", f.find_word_passphrases,
                 gates=("pass", "wort", "mot de", "contrase", "senha", "wachtw"), patterns=f.PASSPHRASE_PATTERNS),
        Detector("after-private-key", f.find_after_private_key, gates=("private key-----",),
                 patterns=f.KEY_AFTER_PATTERNS),
        Detector("aws-prose-secret", f.find_aws_prose_secrets, patterns=f.AWS_PATTERNS, needs_run=True),
    )
