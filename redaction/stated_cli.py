"""Credentials stated in commands and code (issue 34), beside :mod:`redaction.stated`.

* password flags of any tool: a flag whose name ends in a password word (``-srcstorepass``,
  ``-password``, ``--passwd``, ``-pw``, ``--pass=``), and the short ones (``-p``, ``-P``, ``-w``,
  ``/p:``) when the value is credential-shaped on its own or the command names a user;
  the password after a user in ``-u user,pass``, ``/user:DOMAIN\\user pass``,
  ``add_user name pass``;
* ``-U user%password`` (smbclient, rpcclient), ``domain/user:password@host`` (impacket);
* secret-setting commands: :mod:`redaction.secret_commands`;
* a setter call whose first argument names a secret and whose second is a literal
  (``define('DB_PASSWORD', '…')``, ``config.set("api_key", "…")``);
* ``.pgpass`` lines (``host:port:database:user:password``);
* byte-string keys in code (``SECRET_KEY = b'\\x..'``, ``bytes.fromhex('…')`` next to a key word).

Same conventions as :mod:`redaction.detectors`: ``find_*(text, low)`` yields
``(rule_id, start, end, keep)``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from . import secret_commands
from .assignments import classify_name
from .cues import camel_passphrase, word_passphrase
from .detectors import _masked, overlapping
from .entropy import is_placeholder, looks_like_password, looks_like_token, shannon
from .value_shape import _id_shaped, shape

Candidate = tuple[str, int, int, int]

__all__ = ["detectors"]

_QV = r"(?P<v>\"[^\"\n]{1,512}\"|'[^'\n]{1,512}'|[^\s\"'`]{1,512})"


def _unquote(text: str, s: int, e: int) -> tuple[int, int, bool]:
    if e - s >= 2 and text[s] in "\"'" and text[e - 1] == text[s]:
        return s + 1, e - 1, True
    return s, e, False


def _password_value(v: str, quoted: bool, strict: bool = False) -> bool:
    """A password given to a flag or command: not a placeholder, a reference or an id."""
    if not v or _masked(v) or v.startswith("-") or is_placeholder(v):
        return False
    sh = shape(v)
    if strict:
        return sh == "medium" or word_passphrase(v) or camel_passphrase(v)
    if sh is not None or word_passphrase(v):
        return True
    return quoted and looks_like_password(v, quoted=True) and not _id_shaped(v) and \
        (any(c.isdigit() for c in v) or any(not c.isalnum() for c in v))


# --------------------------------------------------------------------------
# Password flags
# --------------------------------------------------------------------------

# A flag whose name ends in a password word: -srcstorepass, -keypass, --db-password, -pw,
# /password:, --passwd=. Anchored on the word (a literal scan), the flag around it checked after.
# Found from the password word (a literal scan), the flag start looked up behind it.
_PW_WORDS = ("pass", "pw")
_PW_TAIL_RE = re.compile(r"(?:word|wd|phrase|in|out)?(?:[ \t]+|=|:)" + _QV, re.IGNORECASE)
_FLAG_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
_PW_FLAG_RE = _PW_TAIL_RE  # fingerprinted pattern
_NOT_PW_FLAGS = ("bypass", "compass", "surpass", "overpass", "trespass", "encompass", "nopass", "no-pass",
                 "ask-pass", "askpass", "-pass")  # "-pass" alone is OpenSSL's "pass:…" source, judged below
# Short flags whose value is a password when the command names a user (or the value reads as one).
_SHORT_FLAG_RE = re.compile(r"(?<![A-Za-z0-9_\-/])(?P<flag>-p|-P|-w|/p:|/P:)(?:[ \t]+|(?<=:))" + _QV)
_USER_FLAG_RE = re.compile(r"(?<![A-Za-z0-9_-])(?:-u|-U|--user(?:name)?|-username|-user|-D|/u:|/user:|-l)(?=[ \t=:])")
# The password right after a user: "-u user,pass" (lftp), "/user:DOMAIN\user pass" (net use),
# "add_user name pass" (rabbitmqctl and the like).
_USER_COMMA_RE = re.compile(r"(?<![A-Za-z0-9_-])(?:-u|--user)[ \t]+(?P<u>[A-Za-z0-9._\\@-]{1,64}),(?P<v>[^\s,\"'`]{3,256})")
_USER_THEN_PW_RE = re.compile(
    r"(?:(?<![A-Za-z0-9_-])/user:[^\s]{1,128}|\b(?:add_?user|add-user|create_?user|create-user|useradd|adduser"
    r"|change_password|change-password|set_password|set-password|set_user_password)[ \t]+[A-Za-z0-9._@\\-]{1,64}"
    r"|\bnet[ \t]+user[ \t]+[A-Za-z0-9._@\\-]{1,64}"
    r"|\bhtpasswd(?:[ \t]+-[A-Za-z]{1,4})*[ \t]+[^\s\"'`]{1,256}[ \t]+[A-Za-z0-9._@-]{1,64})"
    r"[ \t]+" + _QV)
# smbclient / rpcclient / winexe: -U user%password, --user=DOMAIN\user%password
_USER_PCT_RE = re.compile(r"(?<![A-Za-z0-9_-])(?:-U|-u|--user(?:name)?)(?:[ \t]+|=)[\"']?[^\s%\"'`]{1,128}%"
                          r"(?P<v>[^\s\"'`]{1,256})")
# impacket and the like: domain/user:password@host
_DOMAIN_USER_PW_RE = re.compile(r"[\"'`(]?[A-Za-z0-9._-]{1,64}/[A-Za-z0-9._$-]{1,64}:"
                                r"(?P<v>[^\s/@\"'`]{3,128})@[A-Za-z0-9][A-Za-z0-9.-]{0,253}(?![A-Za-z0-9@])")
# -pVALUE glued (7z, unrar, mysqladmin): only a value credential-shaped on its own.
_GLUED_P_RE = re.compile(r"(?<![A-Za-z0-9_\-/])-p(?P<v>[^\s\"'`]{6,256})")
# user/password@database (Oracle sqlplus, expdp, imp)
_ORACLE_RE = re.compile(r"/(?P<v>[^\s/@:\"'`]{4,128})@[A-Za-z0-9]")
_ORACLE_USER_RE = re.compile(r"[A-Za-z][\w.$#-]{0,30}")
# a password fed to a command on stdin: echo 'X' | sudo -S, kinit <<< 'X', --password-stdin
_STDIN_PW_RE = re.compile(r"(?:\b(?:echo|printf)(?:[ \t]+-[neE]{1,3})*[ \t]+" + _QV + r"[ \t]*\|[^\n|]{0,80}?"
                          r"(?:-S\b|--stdin|password-stdin|passwd|chpasswd|kinit|passphrase)"
                          r"|(?:kinit|passwd|chpasswd|sudo|su|openssl|gpg)\b[^\n<]{0,80}<<<[ \t]*" + _QV.replace("?P<v>", "?P<h>") + ")")
_SECURESTRING_RE = re.compile(r"(?i)convertto-securestring[ \t]+(?:-string[ \t]+)?" + _QV)
CLI_PATTERNS = (_USER_PCT_RE.pattern, _DOMAIN_USER_PW_RE.pattern, _GLUED_P_RE.pattern, _ORACLE_RE.pattern, _STDIN_PW_RE.pattern, _SECURESTRING_RE.pattern,_PW_FLAG_RE.pattern, _SHORT_FLAG_RE.pattern, _USER_FLAG_RE.pattern, _USER_COMMA_RE.pattern,
                _USER_THEN_PW_RE.pattern)


def _line_of(text: str, pos: int, reach: int = 2000) -> tuple[int, int]:
    """The line around ``pos``, at most ``reach`` characters each way (a long line is not
    rescanned end to end for every match on it)."""
    lo, hi = max(0, pos - reach), min(len(text), pos + reach)
    ls = text.rfind("\n", lo, pos) + 1 or lo
    le = text.find("\n", pos, hi)
    return ls, hi if le < 0 else le


def _pw_flags(text: str, low: str) -> Iterator[tuple[int, int, re.Match[str]]]:
    """(flag start, word end, tail match) of each flag named after a password: the word found by a
    literal scan, the flag start (``-``, ``--`` or ``/`` after a space or quote) looked up behind it."""
    for w in _PW_WORDS:
        i = low.find(w)
        while i >= 0:
            a = i
            while a > 0 and i - a < 40 and low[a - 1] in _FLAG_NAME_CHARS:
                a -= 1
            if a < i and low[a] == "-":
                start = a  # -srcstorepass, --db-password, -pw
            elif a == i and a > 0 and low[a - 1] == "/":
                start = a - 1  # /password:
            else:
                start = -1
            if start >= 0 and (start == 0 or low[start - 1] in " \t\"'`(="):
                m = _PW_TAIL_RE.match(text, i + len(w))
                if m is not None:
                    yield start, i + len(w), m
            i = low.find(w, i + 1)


def find_cli_password_flags(text: str, low: str) -> Iterator[Candidate]:
    for ws, _we, m in _pw_flags(text, low):
        if True:
            flag = low[ws:m.start("v")].rstrip(" \t=:").lstrip("-/")
            s, e, quoted = _unquote(text, *m.span("v"))
            v = text[s:e]
            if flag.endswith(_NOT_PW_FLAGS) or flag == "p" or (flag == "pass" and not v.lower().startswith("pass:")):
                continue
            if v.lower().startswith("pass:"):
                s += 5  # openssl -passin pass:secret
                v = v[5:]
            if _password_value(v, quoted):
                yield ("cli-password", s, e, 0)
    if " -p" in text or " -P" in text or " -w" in text or "/p:" in low:
        users: list[int] | None = None
        for m in overlapping(_SHORT_FLAG_RE, text):
            s, e, quoted = _unquote(text, *m.span("v"))
            v = text[s:e]
            if not _password_value(v, quoted):
                continue  # not even a password stated as one: no need to read the line
            if users is None:
                users = [u.start() for u in _USER_FLAG_RE.finditer(text)]
            ls, le = _line_of(text, m.start())
            k = bisect.bisect_left(users, ls)
            user = k < len(users) and users[k] < le
            if m.group("flag") == "-w" and not ("-D" in text[ls:le] or "ldap" in low[ls:le]):
                continue  # grep -w, curl -w, wc -w: only an LDAP bind's -w is a password
            if user or _password_value(v, quoted, strict=True):
                yield ("cli-password", s, e, 0)
    if " -p" in text:
        for m in _GLUED_P_RE.finditer(text):
            s, e = m.span("v")
            v = text[s:e]
            if shape(v) == "medium" or word_passphrase(v) or camel_passphrase(v):
                yield ("cli-password", s, e, 0)
    if "@" in text and "/" in text:
        for m in _ORACLE_RE.finditer(text):
            a = m.start()
            while a > 0 and m.start() - a <= 31 and (text[a - 1].isalnum() or text[a - 1] in "_.$#-"):
                a -= 1
            if not _ORACLE_USER_RE.fullmatch(text, a, m.start()) or (a > 0 and text[a - 1] in "/.-"):
                continue
            s, e = m.span("v")
            if shape(text[s:e]) == "medium":
                yield ("cli-password", s, e, 0)
    if "echo" in low or "printf" in low or "<<<" in text:
        for m in _STDIN_PW_RE.finditer(text):
            g = "v" if m.group("v") is not None else "h"
            s, e, quoted = _unquote(text, *m.span(g))
            if _password_value(text[s:e], quoted):
                yield ("cli-password", s, e, 0)
    if "securestring" in low:
        for m in _SECURESTRING_RE.finditer(text):
            s, e, quoted = _unquote(text, *m.span("v"))
            if _password_value(text[s:e], quoted):
                yield ("cli-password", s, e, 0)
    if "%" in text:
        for m in _USER_PCT_RE.finditer(text):
            s, e = m.span("v")
            if _password_value(text[s:e], False):
                yield ("cli-password", s, e, 0)
    if "@" in text and "/" in text:
        at = text.find("@")
        while at >= 0:  # anchored on each "@": the pattern ends there
            ws = max(text.rfind(" ", 0, at), text.rfind("\n", 0, at), text.rfind("\t", 0, at), at - 260)
            dm = _DOMAIN_USER_PW_RE.match(text, max(0, ws + 1) if ws >= 0 else 0)
            if dm is not None and dm.end("v") == at:
                s, e = dm.span("v")
                if shape(text[s:e]) is not None:
                    yield ("cli-password", s, e, 0)
            at = text.find("@", at + 1)
    if "-u " in text or "--user " in text:
        for m in _USER_COMMA_RE.finditer(text):
            s, e = m.span("v")
            if _password_value(text[s:e], False):
                yield ("cli-password", s, e, 0)
    if "user" in low or "htpasswd" in low:
        for m in _USER_THEN_PW_RE.finditer(text):
            s, e, quoted = _unquote(text, *m.span("v"))
            v = text[s:e]
            if not v.startswith("/") and _password_value(v, quoted):
                yield ("cli-password", s, e, 0)


# --------------------------------------------------------------------------
# Setter calls: define('DB_PASSWORD', '…')
# --------------------------------------------------------------------------

_SETTER_RE = re.compile(
    r"\([ \t]*(?P<q1>[\"'])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{1,64})(?P=q1)[ \t]*,[ \t]*"
    r"(?P<q2>[\"'])(?P<v>(?:\\.|(?!(?P=q2))[^\\\n]){1,512})(?P=q2)[ \t]*[,)]")
_SALT_NAME_RE = re.compile(r"(?i).*(?:salt|key|nonce|secret)$")
SETTER_PATTERNS = (_SETTER_RE.pattern,)


def find_setter_calls(text: str, low: str) -> Iterator[Candidate]:
    for m in _SETTER_RE.finditer(text):
        name, v = m.group("name"), m.group("v")
        s, e = m.span("v")
        if _SALT_NAME_RE.fullmatch(name) and len(v) >= 32 and shannon(v) >= 4.5 and not _masked(v):
            yield ("secret-assignment", s, e, 0)  # WordPress AUTH_KEY / SECURE_AUTH_SALT: long random strings
            continue
        if _masked(v) or is_placeholder(v) or any(c.isspace() for c in v.strip()) and len(v) < 32:
            continue
        cls = classify_name(name)
        ok = False
        if cls is not None:
            strength = cls[0]
            if strength == "password":
                ok = looks_like_password(v, quoted=True) and (shape(v) is not None or word_passphrase(v))
            elif strength == "strong":
                ok = looks_like_token(v, min_len=8) or shape(v) == "medium"
            elif strength == "weak":
                ok = looks_like_token(v, min_len=16, min_entropy=3.5, need_digit=True)
        if ok:
            yield ("secret-assignment", s, e, 0)


# --------------------------------------------------------------------------
# .pgpass lines
# --------------------------------------------------------------------------

_PGPASS_RE = re.compile(
    r":(?P<port>\d{1,5}|\*)"
    r":(?P<db>[^:\s\"'`]{1,128}):(?P<user>[^:\s\"'`]{1,128}):(?P<v>[^:\s\"'`]{1,256})(?=[\"'`\s]|$)")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.*_-")
PGPASS_PATTERNS = (_PGPASS_RE.pattern,)


def find_pgpass(text: str, low: str) -> Iterator[Candidate]:
    for m in _PGPASS_RE.finditer(text):
        a = m.start()
        while a > 0 and m.start() - a < 253 and text[a - 1] in _HOST_CHARS:
            a -= 1
        if a == m.start() or (a > 0 and text[a - 1] in ":/@"):
            continue
        host = text[a:m.start()]
        if not (any(c.isalpha() for c in host) or host == "*" or host.count(".") == 3) \
                or re.fullmatch(r"[0-9a-fA-F]{1,4}", host) or re.fullmatch(r"[0-9a-fA-F]{1,4}", m.group("user")):
            continue  # hex dumps, MAC and IPv6 addresses
        s, e = m.span("v")
        v = text[s:e]
        if v != "*" and not _masked(v) and not is_placeholder(v) and len(v) >= 4:
            yield ("pgpass-password", s, e, 0)


# --------------------------------------------------------------------------
# Byte-string keys in code
# --------------------------------------------------------------------------

_BYTES_RE = re.compile(r"(?<![A-Za-z0-9_])[bB][rR]?(?P<q>[\"'])(?P<v>(?:\\.|(?!(?P=q))[^\\\n]){16,2048})(?P=q)")
_FROMHEX_RE = re.compile(
    r"(?:fromhex|unhexlify|a2b_hex|b64decode|urlsafe_b64decode|decodebytes|DecodeString|FromBase64String"
    r"|FromHexString|hex::decode|base64::decode|decode|atob|parseHexBinary|decodeHex)\([ \t]*[bB]?(?P<q>[\"'])"
    r"(?P<v>[A-Za-z0-9+/=_\-]{16,2048})(?P=q)")
# []byte("…"), Buffer.from("…"), Encoding.UTF8.GetBytes("…"), "…".getBytes(), "…".encode()
_BYTES_CALL_RE = re.compile(
    r"(?:\[\]byte|Buffer\.from|GetBytes|bytes|bytearray|TextEncoder\(\)\.encode)\([ \t]*(?P<q>[\"'`])"
    r"(?P<v>[^\"'`\n\\]{12,1024})(?P=q)"
    r"|(?P<q2>[\"'])(?P<v2>[^\"'\n\\]{12,1024})(?P=q2)\.(?:getBytes|encode)\(")
# bytes([0x8f, 0x12, …]), new byte[] { 0x8f, … }, &[0x8f, …]
_BYTE_LIST_RE = re.compile(r"[\[{(]\s*(?P<v>(?:\(byte\)[ \t]*)?0x[0-9a-fA-F]{1,2}"
                           r"(?:\s*,\s*(?:\(byte\)[ \t]*)?0x[0-9a-fA-F]{1,2}){11,255})")
# decimal bytes in a byte container: bytes([143, 58, …]), new Uint8Array([…]), let k: [u8; 16] = […]
_DEC_LIST_RE = re.compile(r"(?:bytes|bytearray|Uint8Array|u8|byte\[\]|\[\]byte)[^\n\[{]{0,40}[\[{]\s*"
                          r"(?P<v>[0-9]{1,3}(?:\s*,\s*[0-9]{1,3}){11,255})")
# a C string of hex escapes: const char key[] = "\x8f\x3a…"
_ESC_STRING_RE = re.compile(r"(?P<q>[\"'])(?P<v>(?:\\x[0-9a-fA-F]{2}){8,512})(?P=q)")
_KEY_WORDS_RE = re.compile(r"(?i)key|secret|token|salt|hmac|fernet|aes|cipher|sign|passw|pepper|jwt|nacl")
_HEX_ESC_RE = re.compile(r"\\x[0-9a-fA-F]{2}")
BYTES_PATTERNS = (_DEC_LIST_RE.pattern, _ESC_STRING_RE.pattern, _BYTES_CALL_RE.pattern, _BYTE_LIST_RE.pattern, _BYTES_RE.pattern, _FROMHEX_RE.pattern, _KEY_WORDS_RE.pattern)


def find_bytes_keys(text: str, low: str) -> Iterator[Candidate]:
    yield from _bytes_keys(text)
    for rx in (_BYTES_CALL_RE, _BYTE_LIST_RE, _DEC_LIST_RE, _ESC_STRING_RE):
        if rx is _ESC_STRING_RE and "\\x" not in text:
            continue
        for m in rx.finditer(text):
            ls, _le = _line_of(text, m.start())
            if not _KEY_WORDS_RE.search(text, ls, m.start()):
                continue
            g = "v" if m.group("v") is not None else "v2"
            s, e = m.span(g)
            v = text[s:e]
            if rx is _BYTE_LIST_RE:
                ok = len(set(re.findall(r"0x([0-9a-fA-F]{1,2})", v))) >= 8
            elif rx is _DEC_LIST_RE:
                nums = [int(x) for x in re.findall(r"[0-9]+", v)]
                ok = max(nums) <= 255 and len(set(nums)) >= 10 and nums != sorted(nums) and max(nums) >= 128
            elif rx is _ESC_STRING_RE:
                ok = len(set(_HEX_ESC_RE.findall(v))) >= 6
            else:
                ok = not _masked(v) and not is_placeholder(v) and (
                    shape(v) == "medium" or looks_like_token(v, min_len=16, min_entropy=3.5)
                    or (len(v) >= 32 and re.fullmatch(r"[0-9a-fA-F]+", v) is not None))
            if ok:
                yield ("bytes-key", s, e, 0)


def _bytes_keys(text: str) -> Iterator[Candidate]:
    for rx in (_BYTES_RE, _FROMHEX_RE):
        for m in rx.finditer(text):
            ls, _le = _line_of(text, m.start())
            if not _KEY_WORDS_RE.search(text, ls, m.start()):
                continue
            s, e = m.span("v")
            v = m.group("v")
            if _masked(v) or is_placeholder(v):
                continue
            if rx is _BYTES_RE:
                esc = len(_HEX_ESC_RE.findall(v))
                ok = esc >= 8 or (esc == 0 and looks_like_token(v, min_len=16, min_entropy=3.5))
                if esc >= 8:
                    ok = len(set(_HEX_ESC_RE.findall(v))) >= 6  # not b'\x00\x00…'
            else:
                ok = shannon(v) >= 3.0 and len(set(v)) >= 8
            if ok:
                yield ("bytes-key", s, e, 0)


def detectors(Detector):  # noqa: N803 - the class from rules.py (which imports this module)
    """The detector entries of this module, for ``rules.DETECTORS``."""
    return (
        Detector("cli-password-flag", find_cli_password_flags, gates=("pass", "pw", " -p", " -P", " -w", "/p:",
                                                                      "-u ", "user", "@", "<<<", "securestring", "echo", "printf"),
                 patterns=CLI_PATTERNS),
        Detector("secret-command", secret_commands.find_secret_commands, gates=secret_commands.SECRET_CMD_PREGATES,
                 patterns=secret_commands.SECRET_CMD_PATTERNS),
        Detector("setter-call", find_setter_calls, gates=("('", '("', "( '", '( "'), patterns=SETTER_PATTERNS),
        Detector("pgpass", find_pgpass, gates=(":",), patterns=PGPASS_PATTERNS),
        Detector("bytes-key", find_bytes_keys, gates=("b'", 'b"', "fromhex", "unhexlify", "b64decode", "a2b_hex",
                                                      "decodebytes", "byte", "buffer.from", "0x", "decode", "frombase64",
                                                      "fromhex", "\\x", "u8", "uint8", "atob"),
                 patterns=BYTES_PATTERNS),
    )
