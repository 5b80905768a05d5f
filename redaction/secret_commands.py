"""Secret-setting commands (issue 34), beside :mod:`redaction.stated_cli`.

A command that stores a secret (``gh secret set``, ``gcloud secrets versions add``, ``aws
secretsmanager update-secret``, ``az keyvault secret set``, ``kubectl create secret generic
--from-literal``, ``heroku config:set``, ``fly secrets set``, ``vercel env add``, ``doppler secrets
set``, ``circleci context store-secret``, ``pulumi config set --secret``, ``conjur variable set``,
``rclone config create``…): recognised by its shape — a *store* word (secret, variable, env, config,
kv, parameter, setting, credential, context) followed within one word by a *set* verb (set, put,
create, add, edit, update, import, store, write, insert), or a ``verb-secret`` / ``config:set`` form —
rather than by a list of tools. On its line, the literal it stores: a flag value (``--value``,
``--body``, ``--secret-string``, ``-v``…), ``NAME=value`` or ``NAME value`` where NAME names a secret,
piped in by ``echo``/``printf`` (also from a process substitution) or given as a here-string.

Same conventions as :mod:`redaction.detectors`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .assignments import classify_name
from .detectors import _masked
from .entropy import is_placeholder, looks_like_token
from .phrases import word_hits
from .value_shape import _id_shaped, shape

Candidate = tuple[str, int, int, int]

__all__ = ["find_secret_commands", "SECRET_CMD_PREGATES", "SECRET_CMD_PATTERNS"]

_QV = r"(?P<v>\"[^\"\n]{1,512}\"|'[^'\n]{1,512}'|[^\s\"'`]{1,512})"
_STORE = r"(?:secrets?|variables?|vars?|env|config|kv|parameters?|settings|appsettings|credentials?|context)"
_VERB = r"(?:set|put|create|add|edit|update|import|store|write|insert)"
_SECRET_CMD_RE = re.compile(
    r"\b(?:" + _STORE + r"(?:[ \t]+[a-z][a-z0-9-]{1,20})?[ \t]+" + _VERB
    + r"|" + _VERB + r"-(?:secret|parameter|env|variable)s?(?:-value)?|store-secret|config:(?:set|add)|env:set"
    r"|set-env|setenv|create[ \t]+secret|secret[ \t]+generic|(?:vault|chamber)[ \t]+write)\b", re.IGNORECASE)
_SECRET_CMD_LOW_RE = re.compile(_SECRET_CMD_RE.pattern)  # its literals are lowercase: for ``low``
# "NAME VALUE" on such a line, NAME naming a secret: netlify env:set API_KEY X, npm config set
# //registry/:_authToken X, pulumi config set --secret dbPassword X
_PAIR_TOKEN_RE = re.compile(r"\"[^\"\n]{1,512}\"|'[^'\n]{1,512}'|[^\s\"'`]{1,512}")
_SECRET_FLAG_RE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:--body|-b|--value|-v|--data|--secret-string|--secret-value|--literal|--text|--string"
    r"|--from-literal=[A-Za-z0-9_.-]{1,64}=|--from-literal[ \t]+[A-Za-z0-9_.-]{1,64}=)(?:[ \t]+|=)?" + _QV)
_ECHO_RE = re.compile(r"\b(?:echo|printf)(?:[ \t]+-[neE]{1,3})*(?:[ \t]+(?:\"%s\"|'%s'|%s))?[ \t]+" + _QV
                      + r"[ \t]*(?:\||\))")
_HERE_RE = re.compile(r"<<<[ \t]*" + _QV)
_ENV_PAIR_RE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z][A-Za-z0-9_.-]{1,63}=" + _QV)
# What the engine tests first (a text with none of these holds no secret command).
SECRET_CMD_PREGATES = ("secret", "env", "config", "kv", "variable", "vars", "parameter", "setting", "credential",
                       "context", "vault write", "chamber write")
SECRET_CMD_PATTERNS = (_SECRET_CMD_RE.pattern, _PAIR_TOKEN_RE.pattern, _SECRET_FLAG_RE.pattern, _ECHO_RE.pattern,
                       _HERE_RE.pattern, _ENV_PAIR_RE.pattern)


def _unquote(text: str, s: int, e: int) -> tuple[int, int, bool]:
    if e - s >= 2 and text[s] in "\"'" and text[e - 1] == text[s]:
        return s + 1, e - 1, True
    return s, e, False


def _line_of(text: str, pos: int, reach: int = 2000) -> tuple[int, int]:
    lo, hi = max(0, pos - reach), min(len(text), pos + reach)
    ls = text.rfind("\n", lo, pos) + 1 or lo
    le = text.find("\n", pos, hi)
    return ls, hi if le < 0 else le


def _secret_value(v: str, quoted: bool) -> bool:
    if not v or _masked(v) or is_placeholder(v) or v.startswith(("-", "<(", "@", "./", "/", "~", "file:")):
        return False
    if quoted:
        return len(v) >= 4 and not _id_shaped(v) and v.upper() != v or any(c.isdigit() for c in v)
    return shape(v) is not None or looks_like_token(v, min_len=12, need_digit=True)


# Every form of _SECRET_CMD_RE holds one of these: the command is looked for only around them.
_ANCHORS = ("secret", "variable", "vars", "env", "config", "kv", "parameter", "setting", "credential", "context",
            "vault write", "chamber write")


def _commands(text: str, low: str) -> Iterator[re.Match[str]]:
    """The secret-setting commands of the text, looked for in a small window around each anchor
    word (a regex over the whole text would try its alternatives at every word)."""
    end = -1
    # ASCII text: the case-sensitive pattern on the lowercased copy finds the same spans, ~2x faster
    # (IGNORECASE also folds the Kelvin sign and long s into k and s: other text keeps the original).
    rx, scanned = (_SECRET_CMD_LOW_RE, low) if text.isascii() else (_SECRET_CMD_RE, text)
    for a, _ae in word_hits(low, _ANCHORS):  # every occurrence of each, in order (one scan)
        if a < end:
            continue
        m = rx.search(scanned, max(0, a - 24, end), min(len(text), a + 48))
        if m is not None:
            end = m.end()
            yield m


_NAME_TAIL_SPLIT_RE = re.compile(r"[:/.]")


def find_secret_commands(text: str, low: str) -> Iterator[Candidate]:
    covered = 0  # commands on one line share its scan
    for c in _commands(text, low):
        if c.start() < covered:
            continue
        ls, le = _line_of(text, c.start())
        ls = max(ls, covered)
        covered = le
        toks = [m.span() for m in _PAIR_TOKEN_RE.finditer(text, c.end(), le)]
        for (ns, ne), (vs, ve) in zip(toks, toks[1:]):
            name = text[ns:ne].strip("\"'")
            if name.startswith("-") or "=" in name:
                continue
            last = _NAME_TAIL_SPLIT_RE.split(name)[-1] or name
            if classify_name(last) is None:
                continue
            s, e, quoted = _unquote(text, vs, ve)
            v = text[s:e]
            if _secret_value(v, quoted) and (quoted or shape(v) is not None or looks_like_token(v, min_len=12)):
                yield ("secret-command", s, e, 0)
        for rx in (_SECRET_FLAG_RE, _ECHO_RE, _HERE_RE, _ENV_PAIR_RE):
            for m in rx.finditer(text, ls, le):
                s, e, quoted = _unquote(text, *m.span("v"))
                v = text[s:e]
                if rx is _ENV_PAIR_RE:
                    name = m.group()[:m.group().index("=")]
                    if not (quoted or shape(v) is not None) or (not name.isupper() and classify_name(name) is None):
                        continue  # "region=eu-west-1": a setting; API_TOKEN=… or password=… stores a secret
                if _secret_value(v, quoted):
                    yield ("secret-command", s, e, 0)
