"""Assignment detectors: a secret-looking name, an operator, a value.

``KEY=value``, ``"apiKey": "..."``, ``password: ...``, ``<password>..</password>``,
``DB_PASSWORD ?= ...``, and vendor-named keys without a secret word
(``sourcegraph: 6d2F...``). Same conventions as :mod:`redaction.detectors`:
``find_*(text, low)`` yields ``(rule_id, start, end, keep)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .cues import word_passphrase
from .detectors import _NAME_CHARS, LINE_END, NEXT_LINE, Candidate, _masked
from .entropy import is_code_reference, looks_like_password, looks_like_token

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
        (?:"(?P<dq>(?:[^"\n\\]|\\[^\n]){0,2000})"
          |'(?P<sq>(?:[^'\n\\]|\\[^\n]){0,2000})'
          |`(?P<bq>(?:[^`\n\\]|\\[^\n]){0,2000})`
          |\\"(?P<edq>(?:[^"\n\\]|\\[^"\n]){0,2000})\\"
          |\\'(?P<esq>(?:[^'\n\\]|\\[^'\n]){0,2000})\\'
          |(?P<uq>[^\s"'`,;)}\]\[<>\\(]{1,2000}))""",
    re.VERBOSE,
)
# "Password:" ending its line, the value alone on the next non-empty line.
# Only ":" (a label): "DB_PASSWORD=" on its own line is an empty env value,
# and the next line is another statement. The value is one item, never a
# nested "key: value" or list line (those hold spaces).
_NEXT_VALUE_RE = re.compile(
    r"""(?:\\?["'`]\]?|\])?[ \t]*(?P<op>:)(?P<stars>\*{0,3})""" + NEXT_LINE
    + r"""(?:"(?P<dq>[^"\n\\]{1,512})"|'(?P<sq>[^'\n\\]{1,512})'|(?P<uq>[^\s"'`,;)}\]\[<>\\(]{1,512}))"""
    + LINE_END
)
# <add key="Password" value="..."/> (NuGet, .NET appSettings)
_XML_ATTR_RE = re.compile(r"""\\?["'][ \t]+value[ \t]*=[ \t]*(?:"(?P<dq>[^"\n]{1,2000})"|'(?P<sq>[^'\n]{1,2000})')""")
# <password>...</password>
_XML_ELEM_RE = re.compile(r">(?P<v>[^<\n]{1,2000})</")
ASSIGNMENT_PATTERNS = (_OPVAL_RE.pattern, _NEXT_VALUE_RE.pattern, _XML_ATTR_RE.pattern,
                       _XML_ELEM_RE.pattern) + SECRET_ANCHORS

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
    if m is None or _only_stars(m.group("uq")):  # "**Password:**": Markdown bold around the label
        nxt = _NEXT_VALUE_RE.match(text, ne)
        if nxt is not None:
            return _next_line_value(text, ns, nxt)
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


def _only_stars(value: str | None) -> bool:
    return value is not None and not value.strip("*")


def _next_line_value(text: str, ns: int, m: re.Match[str]):
    """(start, end, quoted, op, env_style) of a value on the line after its label, or None."""
    stars = m.group("stars")
    if stars and not text.endswith(stars, 0, ns):
        return None  # "password:***" is a masked value, not a bold label's closing stars
    for g in ("dq", "sq"):
        if m.group(g) is not None:
            return m.start(g), m.end(g), True, ":", False
    if m.group("uq").endswith(":"):
        return None  # another label ("Password:" then "Username:"), not a value
    return m.start("uq"), m.end("uq"), False, ":", False


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
    if not v or _masked(v):
        return None, e
    if not quoted:
        if e < len(text) and text[e] in "([":
            return None, e  # a call or subscript: code, not a literal
        if is_code_reference(v) and not (env_style and strength == "password" and word_passphrase(v)):
            return None, e  # (DB_PASSWORD=thunder.pepper.granite in a shell line: words, not a path)
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
    seen: set[int] = set()
    covered = -1  # names ending inside an already-parsed value are part of that value
    for start, end in hits:
        if end in seen:
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
        if cls is None or (cls[0] == "weak" and _public_word_before(low, ns)):
            continue
        strength, rule = cls
        vendor = _vendor_of(_split_name(text[ns:ne])) if strength == "vendor-format" else None
        found, value_end = _judge(text, ns, ne, strength, rule, _VENDOR_VALUE_RES.get(vendor) if vendor else None)
        if found:
            covered = value_end
            yield found
        elif value_end - ne > 256:
            covered = value_end  # bound the work on pathological values


_CACHE_PROGRESS_RE = re.compile(r"received \d+ of \d+ \(\d+(?:\.\d+)?%\), $")


def _public_word_before(low: str, ns: int) -> bool:
    """"cache key: …", "sort key: …": a bare ``key`` label whose word before names a non-secret key."""
    if ns < 2 or low[ns - 1] != " ":
        return False
    if "cache" in low[max(low.rfind("\n", max(0, ns - 40), ns) + 1, ns - 40):ns] \
            or _CACHE_PROGRESS_RE.search(low, max(0, ns - 60), ns):
        return True  # "Cache restored from key: node-cache-…", "Received 8192 of 8192 (100.0%), key: …"
    a = ns - 1
    while a > 0 and low[a - 1].isalpha() and ns - a < 20:
        a -= 1
    return low[a:ns - 1] in _PUBLIC_KEY_MODS


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
    for m in trigger.finditer(text):
        ns, ne = _name_before(text, m.start())
        if ne - ns < 2:
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
