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
    is_code_reference,
    is_placeholder,
    looks_like_password,
    looks_like_token,
    shannon,
)

Candidate = tuple[str, int, int, int]

_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-$@")
_MARKER = "[REDACTED:"


def _masked(value: str) -> bool:
    """Already redacted: re-redacting must not change anything (idempotence)."""
    return _MARKER in value or "***" in value


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


def word_before(text: str, pos: int, extra: str = "") -> bool:
    """Is the character before ``pos`` part of a word (or in ``extra``)?

    A marker or ``***`` stands in for the word characters it replaced, so it
    counts as a word character: a boundary that did not exist before
    redaction must not appear after it (idempotence).
    """
    if pos <= 0:
        return False
    c = text[pos - 1]
    if c.isalnum() or c in extra:
        return True
    if c == "]":
        i = text.rfind(_MARKER, max(0, pos - 90), pos)
        return i >= 0 and text.find("]", i) == pos - 1
    return c == "*" and text[pos - 3:pos] == "***"


def _in_marker(text: str, pos: int) -> bool:
    """True if ``pos`` lies inside a ``[REDACTED:rule]`` marker.

    Marker text must never act as context (``...-secret-access-key] = v``
    would otherwise read as a name on a second pass).
    """
    i = text.rfind(_MARKER, max(0, pos - 90), pos + 1)
    return i >= 0 and text.find("]", i) >= pos


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
        if not _masked(v) and not text.startswith(_MARKER, e):
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
        if not _masked(v) and not text.startswith(_MARKER, e) and looks_like_token(v, min_len=12):
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
    r"|session-token|bearer|pat|credentials?)(?:[ \t]+|=)" + _QV
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
                    if _in_marker(text, m.start()):
                        continue
                    s, e = _unquote_span(text, *m.span("v"))
                    v = text[s:e]
                    if not _masked(v) and not is_placeholder(v) and len(v) >= 3:
                        yield (rule, s, e, 0)
    for m in overlapping(CLI_FLAG_RE, low):
        if word_before(text, m.start(), "-"):
            continue
        s, e = _unquote_span(text, *m.span("v"))
        v = text[s:e]
        if _masked(v) or text.startswith(_MARKER, e):
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

PROSE_PASSWORD_RE = re.compile(
    r"pass(?:word|phrase|code| word)[ \t]+(?:is|was|is now)[ \t]*:?[ \t]*[\"'`]?"
    r"(?P<v>[^\s\"'`]{4,128})"
)


def find_prose_passwords(text: str, low: str) -> Iterator[Candidate]:
    if "machine" in low:
        for m in overlapping(NETRC_RE, text):
            v = m.group("v")
            if not _masked(v) and not is_placeholder(v):
                yield ("netrc-password", m.start("v"), m.end("v"), 0)
    for m in overlapping(PROSE_PASSWORD_RE, low):
        s, e = m.span("v")
        while e > s and text[e - 1] in ".,;:!?)]":
            e -= 1
        v = text[s:e]
        if _masked(v) or text.startswith(_MARKER, e):
            continue
        if any(c in "()[]{}=<>" for c in v):
            continue  # code, not a password
        if (any(c.isdigit() for c in v) or any(not c.isalnum() for c in v)) and \
                looks_like_password(v, quoted=False) and not v.isdigit():
            yield ("password-in-prose", s, e, 0)


# --------------------------------------------------------------------------
# Assignments: KEY=value, "apiKey": "...", password: ..., <password>..</password>
# --------------------------------------------------------------------------

# Anchor words: an assignment is only examined where its name contains one.
SECRET_ANCHORS = ("pass", "pw", "secret", "token", "key", "auth", "cred")
_ANCHOR_RES = tuple(re.compile(re.escape(w)) for w in SECRET_ANCHORS)
_ANCHOR_ALT_RE = re.compile("|".join(SECRET_ANCHORS))


def _anchor_hits(low: str) -> list[tuple[int, int]]:
    """Anchor word spans, in order. The words never overlap one another, so
    one alternation scan and seven literal scans find the same spans: the
    former has less call overhead on short texts, the latter scans long ones
    faster (literal search)."""
    if len(low) < 1024:
        return [m.span() for m in _ANCHOR_ALT_RE.finditer(low)]
    return sorted(m.span() for rx in _ANCHOR_RES for m in rx.finditer(low))

# After the name: an optional closing quote/bracket, an operator, a value.
_OPVAL_RE = re.compile(
    r"""(?:\\?["'`]\]?|\])?[ \t]*
        (?P<op>:::=|::=|:=|\?=|=>|<-|=(?![=~])|:(?![:/\\]))[ \t]*
        (?:"(?P<dq>[^"\n\\]{0,2000})"
          |'(?P<sq>[^'\n\\]{0,2000})'
          |`(?P<bq>[^`\n\\]{0,2000})`
          |\\"(?P<edq>[^"\n\\]{0,2000})\\"
          |\\'(?P<esq>[^'\n\\]{0,2000})\\'
          |(?P<uq>[^\s"'`,;)}\]\[<>\\(]{1,2000}))""",
    re.VERBOSE,
)
# <add key="Password" value="..."/> (NuGet, .NET appSettings)
_XML_ATTR_RE = re.compile(r"""\\?["'][ \t]+value[ \t]*=[ \t]*(?:"(?P<dq>[^"\n]{1,2000})"|'(?P<sq>[^'\n]{1,2000})')""")
# <password>...</password>
_XML_ELEM_RE = re.compile(r">(?P<v>[^<\n]{1,2000})</")
ASSIGNMENT_PATTERNS = (_OPVAL_RE.pattern, _XML_ATTR_RE.pattern, _XML_ELEM_RE.pattern) + SECRET_ANCHORS

_NAME_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

_PASSWORD_HEADS = frozenset({"password", "passwd", "passphrase", "pwd", "pw", "pass", "passcode", "pword"})
_SECRET_HEADS = frozenset({"secret", "token", "credential", "credentials", "creds", "auth", "apikey"})
# Glued lowercase names (``dbpassword``, ``apikey``): suffix -> head word.
_GLUED = (("password", "password"), ("passwd", "passwd"), ("passphrase", "passphrase"), ("secret", "secret"),
          ("token", "token"), ("apikey", "key"), ("accesskey", "key"), ("secretkey", "key"),
          ("privatekey", "key"), ("authkey", "key"), ("masterkey", "key"), ("signingkey", "key"),
          ("encryptionkey", "key"), ("licensekey", "key"), ("credentials", "credentials"), ("creds", "creds"))
_GLUED_EXCEPT = frozenset({"bypass", "compass", "overpass", "underpass", "trespass", "surpass", "encompass"})
# Head words that name something other than the secret itself.
_NOT_SECRET_HEADS = frozenset("""
    id ids name names type types url uri urls path paths file files dir length len size count env var vars field
    header prefix suffix format version arn ref refs endpoint expiry expires expiration ttl at enabled required
    policy mode label hint placeholder input prompt regex pattern store manager provider service method scope
    scopes location hash salt algorithm alg kind class pool limit timeout host port user username account region
    bucket table index column source sources description desc doc docs help message msg error errors text title
    rotation rotated created updated last set get list exists valid validation strength reset min max used usage
""".split())
_TRAILING_NOISE = frozenset({"value", "val", "str", "string", "hex", "b64", "base64", "base", "raw", "plain",
                             "prod", "production", "dev", "development", "staging", "stage", "test", "live",
                             "local", "old", "new", "current", "default", "override", "encoded"})
_PUBLIC_KEY_MODS = frozenset({"public", "pub", "publishable", "primary", "foreign", "sort", "partition", "cache",
                              "idempotency", "hot", "host", "unique", "composite", "range", "lookup", "map", "dict",
                              "index", "row", "item", "object", "node", "react", "registry", "translation", "i18n",
                              "message", "label", "field", "column", "group", "route", "router", "state", "ssh",
                              "gpg", "pgp", "known", "fingerprint", "sequence", "schema", "natural",
                              "bucket", "idx", "hash", "press", "pressed"})
_NOT_SECRET_TOKEN_MODS = frozenset({"page", "next", "continuation", "pagination", "cursor", "sync", "csrf", "xsrf",
                                    "max", "min", "num", "total", "count", "cancel", "cancellation", "prompt",
                                    "completion", "input", "output", "stop", "eos", "bos", "pad", "unk", "mask",
                                    "special", "sep", "cls", "start", "end", "ms", "expected",
                                    "authenticity"})  # Rails' authenticity_token is a CSRF token

# Vendor keywords: a name such as ``SOURCEGRAPH=...`` or ``sumologic_access_id``
# marks a vendor credential even without a secret word. Optional value regex
# (case-sensitive, full match) catches formats under id-like names.
VENDORS: dict[str, tuple[str, str | None]] = {
    "adafruit": ("adafruit-api-key", None), "adobe": ("adobe-client-secret", None),
    "airtable": ("airtable-api-key", None), "algolia": ("algolia-api-key", None),
    "alibaba": ("alibaba-secret-key", None), "asana": ("asana-client-secret", None),
    "atlassian": ("atlassian-api-token", None), "jira": ("atlassian-api-token", None),
    "confluence": ("atlassian-api-token", None), "beamer": ("beamer-api-token", None),
    "bitbucket": ("bitbucket-client-secret", None), "bittrex": ("bittrex-secret-key", None),
    "meraki": ("cisco-meraki-api-key", None), "cloudflare": ("cloudflare-api-key", None),
    "codecov": ("codecov-access-token", None), "cohere": ("cohere-api-token", None),
    "coinbase": ("coinbase-access-token", None), "confluent": ("confluent-secret-key", None),
    "contentful": ("contentful-delivery-api-token", None), "datadog": ("datadog-access-token", None),
    "discord": ("discord-client-secret", None), "droneci": ("droneci-access-token", None),
    "dropbox": ("dropbox-api-token", None), "etsy": ("etsy-access-token", None),
    "facebook": ("facebook-secret", None), "fastly": ("fastly-api-token", None),
    "finicity": ("finicity-client-secret", None), "finnhub": ("finnhub-access-token", None),
    "flickr": ("flickr-access-token", None), "freshbooks": ("freshbooks-access-token", None),
    "gitter": ("gitter-access-token", None), "gocardless": ("gocardless-api-token", None),
    "heroku": ("heroku-api-key", None), "hubspot": ("hubspot-api-key", None),
    "intercom": ("intercom-api-key", None), "jfrog": ("jfrog-api-key", None),
    "artifactory": ("jfrog-api-key", None), "bintray": ("jfrog-api-key", None),
    "kraken": ("kraken-access-token", None), "kucoin": ("kucoin-secret-key", None),
    "launchdarkly": ("launchdarkly-access-token", None), "linear": ("linear-client-secret", None),
    "linkedin": ("linkedin-client-secret", None), "mailchimp": ("mailchimp-api-key", None),
    "mailgun": ("mailgun-private-api-token", None), "mapbox": ("mapbox-api-token", None),
    "mattermost": ("mattermost-access-token", None), "messagebird": ("messagebird-api-token", None),
    "netlify": ("netlify-access-token", None), "newrelic": ("new-relic-user-api-key", None),
    "nytimes": ("nytimes-access-token", None), "okta": ("okta-access-token", None),
    "plaid": ("plaid-secret-key", None), "privateai": ("privateai-api-token", None),
    "rapidapi": ("rapidapi-access-token", None), "sendbird": ("sendbird-access-token", None),
    "sentry": ("sentry-access-token", None), "snyk": ("snyk-api-token", None), "sonar": ("sonar-api-token", None),
    "sourcegraph": ("sourcegraph-access-token", None), "squarespace": ("squarespace-access-token", None),
    "sumo": ("sumologic-access-token", r"su[A-Za-z0-9]{12}|[A-Za-z0-9]{64}"),
    "telegram": ("telegram-bot-api-token", None), "travis": ("travisci-access-token", None),
    "twilio": ("twilio-auth-token", None), "twitch": ("twitch-api-token", None),
    "twitter": ("twitter-api-secret", None), "typeform": ("typeform-api-token", None),
    "yandex": ("yandex-access-token", None), "zendesk": ("zendesk-secret-key", None),
    "mistral": ("mistral-api-key", None), "together": ("together-api-key", None),
    "wandb": ("wandb-api-key", None), "pagerduty": ("pagerduty-api-key", None),
    "circleci": ("circleci-token", None), "vercel": ("vercel-access-token", None),
    "replicate": ("replicate-api-token", None), "anthropic": ("anthropic-api-key", None),
    "openai": ("openai-api-key", None), "groq": ("groq-api-key", None),
    "perplexity": ("perplexity-api-key", None), "huggingface": ("huggingface-access-token", None),
    "gemini": ("gemini-api-key", None), "deepseek": ("deepseek-api-key", None),
    "fireworks": ("fireworks-api-key", None), "voyage": ("voyage-api-key", None),
    "elevenlabs": ("elevenlabs-api-key", None), "pinecone": ("pinecone-api-key", None),
    "stripe": ("stripe-access-token", None), "shopify": ("shopify-token", None),
    "doppler": ("doppler-api-token", None), "vault": ("vault-token", None),
    "onepassword": ("1password-token", None), "notion": ("notion-api-token", None),
}
_VENDOR_BY_PREFIX: dict[str, list[str]] = {}
for _v in VENDORS:
    _VENDOR_BY_PREFIX.setdefault(_v[:4], []).append(_v)
_VENDOR_VALUE_RES = {k: re.compile(v[1]) for k, v in VENDORS.items() if v[1]}


def _split_name(name: str) -> list[str]:
    return [w.lower() for w in _NAME_WORD_RE.findall(name)]


def _vendor_of(words: list[str]) -> str | None:
    for w in words:
        for v in _VENDOR_BY_PREFIX.get(w[:4], ()):
            if w.startswith(v):
                return v
    return None


def classify_name(name: str) -> tuple[str, str] | None:
    """Decide whether ``name`` labels a secret.

    Returns (strength, rule_id) with strength ``password`` (literal
    passwords, even plain words), ``strong`` (token-like value required) or
    ``weak`` (stricter value check), or None.
    """
    words = _split_name(name)
    if not words:
        return None
    vendor = _vendor_of(words)
    core = list(words)
    while len(core) > 1 and (core[-1] in _TRAILING_NOISE or core[-1].isdigit()):
        core.pop()
    head, mods = core[-1], core[:-1]
    if head not in _PASSWORD_HEADS and head not in _SECRET_HEADS and head != "key" and head not in _GLUED_EXCEPT:
        for suffix, base in _GLUED:
            if head.endswith(suffix) and len(head) > len(suffix):
                mods = mods + [head[: -len(suffix)]]
                head = base
                break
    flat = "".join(words)
    rule = "secret-assignment"
    if "aws" in words and "secret" in words:
        rule = "aws-secret-access-key"
    elif "aws" in words and "session" in words:
        rule = "aws-session-token"
    elif vendor is not None:
        rule = VENDORS[vendor][0]
    if head in _PASSWORD_HEADS:
        if set(mods) & {"min", "max", "reset", "forgot", "policy", "hash", "hashed"}:
            return None
        return ("password", "password-assignment" if rule == "secret-assignment" else rule)
    if head == "key":
        if set(mods) & _PUBLIC_KEY_MODS:
            return None
        return ("strong" if mods or vendor else "weak", rule)
    if head in _SECRET_HEADS:
        if head == "token" and set(mods) & _NOT_SECRET_TOKEN_MODS:
            return None
        if head == "auth" and set(mods) & {"basic", "oauth"} and len(flat) < 6:
            return None
        return ("strong", rule)
    if head in _NOT_SECRET_HEADS:
        if vendor is not None and VENDORS[vendor][1]:
            return ("vendor-format", rule)
        return None
    if any(w in _PASSWORD_HEADS or w in _SECRET_HEADS or w == "key" for w in mods):
        return ("weak", rule)
    if vendor is not None:
        return ("vendor", rule)
    return None


def _assignment_value(text: str, ns: int, ne: int):
    """Parse ``<op> <value>`` after a name ending at ``ne``.

    Returns (start, end, quoted, op, env_style) of the value, or None.
    """
    m = _XML_ATTR_RE.match(text, ne)
    if m:
        g = "dq" if m.group("dq") is not None else "sq"
        return m.start(g), m.end(g), True, "=", False
    m = _OPVAL_RE.match(text, ne)
    if m is None:
        if text.startswith(">", ne):
            x = _XML_ELEM_RE.match(text, ne)
            if x:
                return x.start("v"), x.end("v"), True, ">", False
        return None
    for g in ("dq", "sq", "bq", "edq", "esq"):
        if m.group(g) is not None:
            return m.start(g), m.end(g), True, m.group("op"), False
    s, e = m.span("uq")
    while e > s and text[e - 1] in ".,:!?":
        e -= 1  # sentence punctuation after an unquoted value is not part of it
    op = m.group("op")
    if ns > 0 and text[ns - 1] in "?&":
        amp = text.find("&", s, e)
        if amp >= 0:
            e = amp  # URL query: "&" separates parameters
    env_style = op == "=" and m.start("op") == ne and s == m.end("op")
    return s, e, False, op, env_style


def _judge(text: str, ns: int, ne: int, strength: str, rule: str,
           vendor_re: re.Pattern | None = None) -> tuple[Candidate | None, int]:
    """Parse and judge the value after a secret-looking name.

    Returns (candidate or None, end offset of the parsed value).
    """
    parsed = _assignment_value(text, ns, ne)
    if parsed is None:
        return None, ne
    s, e, quoted, _op, env_style = parsed
    v = text[s:e]
    if not v or _masked(v) or text.startswith(_MARKER, e):
        return None, e
    if not quoted:
        if e < len(text) and text[e] in "([":
            return None, e  # a call or subscript: code, not a literal
        if is_code_reference(v):
            return None, e
    if strength == "password":
        name = text[ns:ne]
        env_style = env_style and name.upper() == name
        ok = looks_like_password(v, quoted=quoted, env_style=env_style)
    elif strength == "strong":
        ok = looks_like_token(v, min_len=8)
    elif strength == "weak":
        ok = looks_like_token(v, min_len=16, min_entropy=3.5, need_digit=True)
    else:  # vendor / vendor-format
        ok = bool(vendor_re and vendor_re.fullmatch(v)) or (
            strength == "vendor" and looks_like_token(v, min_len=12, min_entropy=3.0, need_digit=True))
    return ((rule, s, e, 0) if ok else None), e


def _name_bounds(text: str, i: int, j: int) -> tuple[int, int]:
    """Expand [i, j) to the whole identifier around it (bounded: 64 chars each way)."""
    lo = max(0, i - 64)
    while i > lo and text[i - 1] in _NAME_CHARS:
        i -= 1
    hi = min(len(text), j + 64)
    while j < hi and text[j] in _NAME_CHARS:
        j += 1
    while i < j and text[i] in "-.$@":
        i += 1  # --password, $password, @password
    while j > i and text[j - 1] in ".-":
        j -= 1
    return i, j


# The rest of the name after an anchor, then an operator: one match call
# rejects the common prose case ("the API key is ...") cheaply.
_TAIL_OP_RE = re.compile(
    r"""[A-Za-z0-9_.$@-]{0,64}?(?P<end>)(?:\\?["'`]\]?|\])?[ \t]{0,32}(?:[:=?<>]|\\?["'][ \t]+value)""")


def find_assignments(text: str, low: str) -> Iterator[Candidate]:
    hits = _anchor_hits(low)
    marked = _MARKER in text
    seen: set[int] = set()
    covered = -1  # names ending inside an already-parsed value are part of that value
    for start, end in hits:
        if end in seen or (marked and _in_marker(text, start)):
            continue
        t = _TAIL_OP_RE.match(text, end)
        if t is None:
            continue
        ns, ne = _name_bounds(text, start, t.end("end"))
        if ne in seen or ne <= ns or ne < covered:
            continue
        seen.add(ne)
        seen.add(end)
        cls = classify_name(text[ns:ne])
        if cls is None:
            continue
        strength, rule = cls
        vendor = _vendor_of(_split_name(text[ns:ne])) if strength == "vendor-format" else None
        found, value_end = _judge(text, ns, ne, strength, rule, _VENDOR_VALUE_RES.get(vendor) if vendor else None)
        if found:
            covered = value_end
            yield found
        elif value_end - ne > 256:
            covered = value_end  # bound the work on pathological values


# Vendor-named assignments without a secret word (``sourcegraph: 6d2F…``).
# Triggered by an operator followed by a long value containing a digit, so
# prose and most code never reach the Python part.
# (?!//): "https://..." is a URL, not an assignment; links are everywhere in chat.
_VALUE_AHEAD = r"[ \t]{0,4}(?:\\?[\"'`])?(?!//)(?=[A-Za-z0-9_+/.~-]{12})(?=[A-Za-z_+/.~-]{0,24}[0-9])"
# Two literal-led scans: far faster in CPython than one scan for [=:].
_VENDOR_TRIGGER_RES = (re.compile("=>?" + _VALUE_AHEAD), re.compile(":=?" + _VALUE_AHEAD))
VENDOR_PATTERNS = tuple(r.pattern for r in _VENDOR_TRIGGER_RES) + tuple(v[1] or "" for v in VENDORS.values())


def find_vendor_assignments(text: str, low: str) -> Iterator[Candidate]:
    for trigger in _VENDOR_TRIGGER_RES:
        yield from _vendor_hits(text, trigger)


_NAME_CLOSERS = frozenset("\"'`]\\")


def _name_before(text: str, p: int) -> tuple[int, int]:
    """The identifier ending just before operator position ``p`` (bounded scan)."""
    j = p
    lo = max(0, p - 8)
    while j > lo and text[j - 1] in " \t":
        j -= 1
    k = j
    while k > lo and j - k < 3 and text[k - 1] in _NAME_CLOSERS:
        k -= 1
    ne = k
    ns = ne
    lo = max(0, ne - 64)
    while ns > lo and text[ns - 1] in _NAME_CHARS:
        ns -= 1
    return ns, ne


def _vendor_hits(text: str, trigger: re.Pattern[str]) -> Iterator[Candidate]:
    marked = _MARKER in text
    for m in trigger.finditer(text):
        ns, ne = _name_before(text, m.start())
        if ne - ns < 2 or (marked and _in_marker(text, ne - 1)):
            continue
        name = text[ns:ne]
        words = _split_name(name)
        vendor = _vendor_of(words)
        if vendor is None:
            continue
        cls = classify_name(name)
        if cls is None or cls[0] not in ("vendor", "vendor-format"):
            continue  # names with a secret word are handled by find_assignments
        found, _end = _judge(text, ns, ne, cls[0], cls[1], _VENDOR_VALUE_RES.get(vendor))
        if found:
            yield found
