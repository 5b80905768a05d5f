"""Context detectors: secrets recognised by where they sit, not by their format.

Each ``find_*`` takes ``(text, low)`` where ``low`` is ``text`` with ASCII
letters lowercased (same length, same offsets) and yields candidates
``(rule_id, start, end, keep)``. Case-insensitive scans run on ``low`` with
lowercase patterns, which keeps CPython's fast literal search; values are
then judged on the original ``text``.

No pattern here nests unbounded quantifiers: repeats are either bounded or
each iteration must start with a distinct delimiter, so worst-case time is
linear in the text for every scan.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from .entropy import (
    is_placeholder,
    looks_like_password,
    looks_like_token,
    shannon,
)

Candidate = tuple[str, int, int, int]

_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-$@")
BLANK = "\x0b"
"""What the engine writes over a marker already in the text before scanning
it (folding turns every input vertical tab into a space, so a blank is
always a marker): whitespace to every value pattern, never a value."""


def _masked(value: str) -> bool:
    """Already masked: only stars (a short mask) or a blanked marker.

    A value merely *containing* ``***`` or a marker is still judged: input
    text that looks masked (Markdown ``***bold***``, a fake marker) must not
    shield a secret next to it."""
    return not value.strip("*" + BLANK)


def overlapping(rx: re.Pattern[str], s: str, pos: int = 0, endpos: int | None = None) -> Iterator[re.Match[str]]:
    """Like ``finditer`` but resumes one character after each match start.

    A rejected match must not hide a later one it overlapped ("CURL x CURL -u
    a:b"): otherwise what is found would depend on text that redaction may
    change, and a second pass could mask more (not idempotent). Every scan
    here is literal-led, so resuming costs a fast search to the next literal.
    """
    end = len(s) if endpos is None else endpos
    while (m := rx.search(s, pos, end)) is not None:
        yield m
        pos = m.start() + 1


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


def char_before(text: str, pos: int) -> str:
    """The character before ``pos``; an escape sequence ending there (``\\n``,
    ``\\t``, ``\\u0027`` in JSON-escaped text) reads as the character it encodes."""
    if pos <= 0:
        return ""
    c = text[pos - 1]
    if pos >= 2 and text[pos - 2] == "\\" and c in _ESCAPES and (pos < 3 or text[pos - 3] != "\\"):
        return _ESCAPES[c]
    if pos >= 6 and text[pos - 6:pos - 4] == "\\u" and all(h in _HEX for h in text[pos - 4:pos]) \
            and (pos < 7 or text[pos - 7] != "\\"):
        return chr(int(text[pos - 4:pos], 16))
    return c


def word_before(text: str, pos: int, extra: str = "") -> bool:
    """Is the character before ``pos`` part of an ASCII word (or in ``extra``)? ASCII only: Chinese and
    Japanese put no space before a token (``我的令牌是ghp_…``), and tokens are ASCII."""
    c = char_before(text, pos)
    return bool(c) and ((c.isascii() and c.isalnum()) or c in extra)


# --------------------------------------------------------------------------
# Private-key blocks (PEM, OpenSSH, PGP). The BEGIN/END lines stay visible.
# --------------------------------------------------------------------------

PEM_BEGIN_RE = re.compile(r"-----BEGIN[ A-Z0-9_-]{0,60}PRIVATE KEY(?: BLOCK)?-----")
PEM_END_RE = re.compile(r"-----END[ A-Z0-9_-]{0,60}PRIVATE KEY(?: BLOCK)?-----")
_ESCAPED_BODY_RE = re.compile(r"(?:\\[nr]|[A-Za-z0-9+/=])+")
_PEM_HEADER_LINE_RE = re.compile(r"[ \t]*[A-Za-z][A-Za-z-]*:[^\n]*")
# Key material lines; chunks may be space-separated (newlines collapsed).
_PEM_DATA_LINE_RE = re.compile(r"[ \t]*[A-Za-z0-9+/=]{4,}(?:[ \t]+[A-Za-z0-9+/=]{4,})*[ \t]*\r?")
_MAX_KEY_BLOCK = 65536


def find_private_keys(text: str, low: str) -> Iterator[Candidate]:
    for m in PEM_BEGIN_RE.finditer(text):
        start = m.end()
        nxt = PEM_BEGIN_RE.search(text, start, start + _MAX_KEY_BLOCK)
        limit = nxt.start() if nxt else min(len(text), start + _MAX_KEY_BLOCK)
        end_m = PEM_END_RE.search(text, start, limit)
        if end_m:
            body_end = end_m.start()
        elif text.startswith("\\n", start):
            em = _ESCAPED_BODY_RE.match(text, start, limit)
            body_end = em.end() if em else start
        else:
            body_end = _key_lines_end(text, start, limit)
        s, e = _trim_body(text, start, body_end)
        body = text[s:e]
        if sum(c in _B64 for c in body) >= 32 and not _masked(body):
            yield ("private-key", s, e, 0)


def _key_lines_end(text: str, pos: int, limit: int) -> int:
    """End of a truncated key block: header lines, then base64 lines."""
    end = pos
    seen_data = False
    while pos < limit:
        nl = text.find("\n", pos, limit)
        line_end = limit if nl < 0 else nl
        line = text[pos:line_end]
        if _PEM_DATA_LINE_RE.fullmatch(line):
            seen_data = True
        elif seen_data or not (_PEM_HEADER_LINE_RE.fullmatch(line) or not line.strip()):
            break
        end = line_end
        if nl < 0:
            break
        pos = nl + 1
    return end


def _trim_body(text: str, s: int, e: int) -> tuple[int, int]:
    """Exclude the newlines (real or escaped) and indentation around the body."""
    while s < e:
        if text[s] in " \t\r\n":
            s += 1
        elif text.startswith("\\n", s) or text.startswith("\\r", s):
            s += 2
        else:
            break
    while e > s:
        if text[e - 1] in " \t\r\n":
            e -= 1
        elif e - 2 >= s and text[e - 2] == "\\" and text[e - 1] in "nr":
            e -= 2
        else:
            break
    return s, e


# --------------------------------------------------------------------------
# Kubernetes Secret manifests: every value under data:/stringData:.
# --------------------------------------------------------------------------

K8S_KIND_RE = re.compile(r"(?im)^[ \t]*[\"']?kind[\"']?[ \t]*:[ \t]*[\"']?secret[\"']?[ \t]*$")
_K8S_DATA_RE = re.compile(r"(?m)^([ \t]*)(?:data|stringData)[ \t]*:[ \t]*(?:#[^\n]*)?$")
_K8S_KV_RE = re.compile(r"([ \t]*)([A-Za-z0-9_.\-]+)[ \t]*:(?:[ \t]+(.*?))?[ \t]*\r?")
_DOC_SPLIT_RE = re.compile(r"(?m)^---[ \t]*$")
_BLOCK_INDICATORS = frozenset({"|", "|-", "|+", ">", ">-", ">+"})


def find_k8s_secrets(text: str, low: str) -> Iterator[Candidate]:
    if "kind" not in low:
        return
    bounds = [0] + [m.end() for m in _DOC_SPLIT_RE.finditer(text)] + [len(text)]
    for ds, de in itertools.pairwise(bounds):
        if not K8S_KIND_RE.search(text, ds, de):
            continue
        for dm in _K8S_DATA_RE.finditer(text, ds, de):
            yield from _k8s_data_block(text, dm.end() + 1, de, len(dm.group(1).expandtabs(1)))


def _k8s_data_block(text: str, pos: int, end: int, data_indent: int) -> Iterator[Candidate]:
    child_indent = None
    # [start, end, key_indent, key_start] of a block scalar value. A block value
    # is masked from its key on: "key: |" and the lines below read as one
    # finding (scanners report it that way, and a half-masked block helps nobody).
    block: list[int] | None = None
    while pos < end:
        nl = text.find("\n", pos, end)
        line_end = end if nl < 0 else nl
        line = text[pos:line_end]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" \t"))
        if stripped and indent <= data_indent:
            break
        if stripped:
            if block is not None and indent > block[2]:
                block[1] = pos + len(line.rstrip())
            else:
                if block is not None:
                    yield from _k8s_value(text, block[3], block[1], True, block[0])
                    block = None
                kv = _K8S_KV_RE.fullmatch(line)
                if kv and (child_indent is None or indent == child_indent):
                    child_indent = indent
                    value = kv.group(3) or ""
                    vstart = pos + kv.start(3) if kv.group(3) is not None else line_end
                    if value in _BLOCK_INDICATORS:
                        block = [line_end + 1, line_end + 1, indent, pos + indent]
                    elif value:
                        yield from _k8s_value(text, vstart, vstart + len(value), False)
        if nl < 0:
            break
        pos = nl + 1
    if block is not None:
        yield from _k8s_value(text, block[3], block[1], True, block[0])


def _k8s_value(text: str, s: int, e: int, block: bool, value_start: int = 0) -> Iterator[Candidate]:
    vs = s
    if block:
        vs = value_start
        while vs < e and text[vs] in " \t\r\n":
            vs += 1
    elif e - s >= 2 and text[s] in "\"'" and text[e - 1] == text[s]:
        s, e = s + 1, e - 1
        vs = s
    value = text[vs:e]
    if e > vs and not _masked(value) and not is_placeholder(value) and not value.startswith("{{"):
        yield ("kubernetes-secret", s, e, 0)


# --------------------------------------------------------------------------
# Credentials inside URLs: scheme://user:password@host
# --------------------------------------------------------------------------

URL_USERINFO_RE = re.compile(
    r"://(?P<user>[^\s:@/?#\"'<>`\\]{0,256})(?::(?P<pw>[^\s/?#\"'<>`\\]{1,256}))?@(?=[A-Za-z0-9\[_.-])"
)
_URL_PLACEHOLDERS = frozenset({"password", "pass", "passwd", "pwd", "pw", "secret", "p", "x", "user", "username",
                               "token", "pat"})


def find_url_credentials(text: str, low: str) -> Iterator[Candidate]:
    for m in overlapping(URL_USERINFO_RE, text):
        pw = m.group("pw")
        if pw is None:
            # No password: the user part may itself be a token (https://<token>@host).
            user = m.group("user")
            if looks_like_token(user, min_len=20, min_entropy=3.5) and not _masked(user):
                yield ("url-credentials", m.start("user"), m.end("user"), 0)
            continue
        if pw.lower() in _URL_PLACEHOLDERS or is_placeholder(pw) or _masked(pw):
            continue
        if pw.isdigit() and len(pw) <= 5:
            continue  # host:port, not user:password
        yield ("url-credentials", m.start("pw"), m.end("pw"), 0)


# --------------------------------------------------------------------------
# Authorization / Bearer headers
# --------------------------------------------------------------------------

AUTH_HEADER_RE = re.compile(
    r"authorization(?:\\?[\"'`])?[ \t]*[:=][ \t]*(?:\\?[\"'`])?[ \t]*"
    # Any scheme word (Bearer, Basic, Api-Token, SSWS, a vendor's own): the
    # value is what follows it. Without a scheme, the first word is the value.
    r"(?:(?P<scheme>[a-z][a-z0-9._-]{0,31})[ \t]+)?(?P<v>[^\s\"'`,;<>\\]{1,4096})"
)
BEARER_RE = re.compile(r"bearer[ \t]+(?P<v>[a-z0-9._~+/-]{12,4096}=*)")
_BASIC_RE = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}")


def find_auth_headers(text: str, low: str) -> Iterator[Candidate]:
    # Both scans are literal-led (fast); "proxy-authorization" is covered.
    # A rejected value may contain the next header, so scanning resumes at
    # the value rather than after it.
    pos = 0
    while (m := AUTH_HEADER_RE.search(low, pos)) is not None:
        s, e = m.span("v")
        v = text[s:e]
        ok = False
        if not _masked(v):
            if m.group("scheme") == "basic":
                ok = _BASIC_RE.fullmatch(v) is not None and not is_placeholder(v)
            else:
                ok = looks_like_token(v, min_len=8, min_entropy=2.5)
        if not ok and m.group("scheme"):
            # "Authorization: <token> <more words>": the "scheme" was the value.
            s, e = m.span("scheme")
            v = text[s:e]
            ok = not _masked(v) and looks_like_token(v, min_len=16, min_entropy=3.0, need_digit=True)
        if ok:
            yield ("authorization-header", s, e, 0)
        pos = e if ok else max(s, m.start() + 1)
    for m in overlapping(BEARER_RE, low):
        if word_before(text, m.start()):
            continue
        s, e = m.span("v")
        v = text[s:e]
        if not _masked(v) and looks_like_token(v, min_len=12):
            yield ("bearer-token", s, e, 0)


# --------------------------------------------------------------------------
# Cookies (Cookie:, Set-Cookie:, --cookie)
# --------------------------------------------------------------------------

COOKIE_RE = re.compile(r"cookie(?P<sep>(?:\\?[\"'])?[ \t]*[:=][ \t]*|[ \t]+)(?:\\?[\"'])?")
_COOKIE_PAIR_RE = re.compile(r"[ \t]*(?P<n>[^=;\s\"'\\]{1,128})=(?P<v>[^;\s\"'\\,]{0,4096})")
_COOKIE_ATTRS = frozenset({"path", "domain", "expires", "max-age", "samesite", "secure", "httponly",
                           "priority", "partitioned", "version", "comment"})
_SESSIONISH_RE = re.compile(r"(?i)sess|sid|token|auth|jwt|key|secret|login|remember|csrf|xsrf")


def find_cookies(text: str, low: str) -> Iterator[Candidate]:
    for m in overlapping(COOKIE_RE, low):
        st = m.start()
        sep = m.group("sep")
        if ":" not in sep and "=" not in sep and low[st - 2:st] != "--":
            continue  # "cookie <value>" only as a CLI flag: --cookie 'a=b'
        set_cookie = low[st - 4:st] == "set-"
        pos = m.end()
        first = True
        while True:
            p = _COOKIE_PAIR_RE.match(text, pos)
            if not p:
                break
            name, v = p.group("n"), p.group("v")
            # In Set-Cookie only the first pair is a cookie; the rest are attributes.
            is_cookie = not (set_cookie and not first) and name.lower() not in _COOKIE_ATTRS
            if (is_cookie and len(v) >= 8 and not is_placeholder(v) and not _masked(v)
                    and (looks_like_token(v, min_len=8) or (_SESSIONISH_RE.search(name) and shannon(v) >= 2.5))):
                yield ("cookie", p.start("v"), p.end("v"), 0)
            first = False
            pos = p.end()
            if not text.startswith(";", pos):
                break
            pos += 1


# --------------------------------------------------------------------------
# Command lines: curl -u, mysql -p, --token X, .netrc
# --------------------------------------------------------------------------

_QV = r"(?P<v>\"[^\"\n]{1,512}\"|'[^'\n]{1,512}'|[^\s\"'`]{1,512})"
# The user value may be built of adjacent quoted parts: -u "{user}":"{pass}".
_CURL_QV = r"(?P<v>(?:\"[^\"\n]{0,512}\"|'[^'\n]{0,512}'|[^\s\"'`]{1,512}){1,3})"
CURL_USER_RE = re.compile(
    r"curl\b(?:[^\n]{0,2000}?\\\r?\n){0,10}?[^\n]{0,2000}?[ \t](?:-u|--user)(?:[ \t]+|=)" + _CURL_QV
)
_MYSQL_RE = re.compile(r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]{0,2000}?[ \t]-p"
                       r"(?P<v>[^\s\"'`-][^\s\"'`]{0,511}"
                       r"|\"[^\"\n]{1,512}\"|'[^'\n]{1,512}')")
_SSHPASS_RE = re.compile(r"\bsshpass[ \t]+-p[ \t]*" + _QV)
_REDIS_RE = re.compile(r"\bredis-cli\b[^\n]{0,2000}?[ \t]-a[ \t]+" + _QV)
_DOCKER_LOGIN_RE = re.compile(r"\bdocker[ \t]+login\b[^\n]{0,2000}?[ \t](?:-p|--password)(?:[ \t]+|=)" + _QV)
CLI_FLAG_RE = re.compile(
    r"--(?:[a-z0-9]+-){0,4}(?P<head>token|api-?key|apikey|access-key|secret-key|secret|password"
    r"|passwd|pass|passphrase|auth-token|client-secret|private-key|license-key|master-key|encryption-key"
    r"|session-token|bearer|pat|credentials?|auth|key)(?:[ \t]+|=)" + _QV
)
NETRC_RE = re.compile(r"\bmachine[ \t]+\S{1,256}(?:\s+(?:login|account)[ \t]+\S{1,256}){0,3}\s+password[ \t]+"
                      r"(?P<v>\S{1,512})")
CLI_PATTERNS = tuple(r.pattern for r in (CURL_USER_RE, _MYSQL_RE, _SSHPASS_RE, _REDIS_RE, _DOCKER_LOGIN_RE,
                                          CLI_FLAG_RE, NETRC_RE))
_PASSWORD_FLAGS = frozenset({"password", "passwd", "pass", "passphrase"})
_PASSWORD_TOOLS = (
    (_MYSQL_RE, "mysql-password", ("mysql", "mariadb")),  # checked only if " -p" occurs
    (_SSHPASS_RE, "cli-password", ("sshpass",)),
    (_REDIS_RE, "cli-password", ("redis-cli",)),
    (_DOCKER_LOGIN_RE, "cli-password", ("docker login",)),
)


def _unquote_span(text: str, s: int, e: int) -> tuple[int, int]:
    if e - s >= 2 and text[s] in "\"'" and text[e - 1] == text[s]:
        return s + 1, e - 1
    return s, e


def _curl_user_secret(text: str, s: int, e: int) -> tuple[int, int] | None:
    """The secret part of a curl ``-u`` value, as a span of ``text``.

    Quotes are removed first, keeping each character's offset, so
    ``"user:pass"``, ``'user':'pass'`` and ``"{u}":"{p}"`` read alike. A
    value with no password is a token passed as the user (Stripe-style).
    """
    chars = [(i, text[i]) for i in range(s, e) if text[i] not in "\"'"]
    value = "".join(c for _i, c in chars)
    user, sep, pw = value.partition(":")
    if not sep or _masked(value):
        return None
    if pw:
        if is_placeholder(pw) or pw.lower() in _URL_PLACEHOLDERS:
            return None
        first = chars[len(user) + 1][0]
        return first, chars[-1][0] + 1
    if looks_like_token(user, min_len=16):
        return chars[0][0], chars[len(user) - 1][0] + 1
    return None


def find_cli_credentials(text: str, low: str) -> Iterator[Candidate]:
    # Scanned on ``low``: curl's -U (proxy user) is a credential too.
    for m in overlapping(CURL_USER_RE, low):
        if word_before(text, m.start()):
            continue
        found = _curl_user_secret(text, *m.span("v"))
        if found:
            yield ("curl-basic-auth", *found, 0)
    if " -p" in low or " -a" in low:
        for rx, rule, gates in _PASSWORD_TOOLS:
            if any(g in low for g in gates):
                for m in overlapping(rx, text):
                    s, e = _unquote_span(text, *m.span("v"))
                    v = text[s:e]
                    if not _masked(v) and not is_placeholder(v) and len(v) >= 3:
                        yield (rule, s, e, 0)
    for m in overlapping(CLI_FLAG_RE, low):
        if word_before(text, m.start(), "-"):
            continue
        s, e = _unquote_span(text, *m.span("v"))
        v = text[s:e]
        if _masked(v):
            continue
        quoted = e - s != m.end("v") - m.start("v")
        if m.group("head") in _PASSWORD_FLAGS:
            ok = looks_like_password(v, quoted=quoted)
        else:
            ok = looks_like_token(v, min_len=8)
        if ok:
            yield ("cli-secret-flag", s, e, 0)


# --------------------------------------------------------------------------
# "my password is hunter2"
# --------------------------------------------------------------------------

# A value alone on the next non-empty line, after a keyword form that ends
# its line: "Password:" then the value (a password-manager copy), or "my vpn
# password is" then the next message of the turn (the indexer joins a turn's
# messages as "User: …" / "Assistant: …" blocks and redacts them as one text).
NEXT_LINE = r"[ \t]*\r?\n(?:[ \t]*\r?\n){0,4}[ \t]*(?:(?i:user|assistant):[ \t]+)?"
LINE_END = r"[ \t]*(?=\r?\n|$)"

# The value on the same line (group v) or alone on the next one (group n).
PROSE_PASSWORD_RE = re.compile(
    r"pass(?:word|phrase|code| word)[ \t]+(?:is|was|is now)[ \t]*:?"
    r"(?:[ \t]*[\"'`]?(?P<v>[^\s\"'`]{4,128})"
    r"|" + NEXT_LINE + r"[\"'`]?(?P<n>[^\s\"'`]{4,128})[\"'`]?" + LINE_END + ")"
)


def find_prose_passwords(text: str, low: str) -> Iterator[Candidate]:
    if "machine" in low:
        for m in overlapping(NETRC_RE, text):
            v = m.group("v")
            if not _masked(v) and not is_placeholder(v):
                yield ("netrc-password", m.start("v"), m.end("v"), 0)
    for m in overlapping(PROSE_PASSWORD_RE, low):
        s, e = m.span("v" if m.group("v") is not None else "n")
        while e > s and text[e - 1] in ".,;:!?)]":
            e -= 1
        if _prose_password(text[s:e]):
            yield ("password-in-prose", s, e, 0)


def _prose_password(v: str) -> bool:
    """A word after "my password is" is a password only with a digit or symbol."""
    if _masked(v) or any(c in "()[]{}=<>" for c in v):
        return False  # masked already, or code
    return (any(c.isdigit() for c in v) or any(not c.isalnum() for c in v)) and \
        looks_like_password(v, quoted=False) and not v.isdigit()
