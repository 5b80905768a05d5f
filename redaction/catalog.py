"""Breadth from the public scanner catalogs (issue 34).

Three parts, each written from the catalogs' published format facts:

* ``HASH_RULES``: password hashes (crypt(3) families, bcrypt, yescrypt,
  argon2, phpass, Django, LDAP ``{SSHA}``, Kerberos AS-REP / TGS-REP,
  NetNTLMv1/v2 responses), after Nosey Parker's ``hashes.yml`` and the
  hashcat example hashes; and prefixed vendor formats not covered elsewhere
  (Microsoft Teams / Office incoming webhooks, Dependency-Track, PubNub,
  Teamwork). Appended to the token rules by ``vendor_rules``.
* ``find_cued_values``: gitleaks' semi-generic rules. Where a vendor's token
  has no prefix, the vendor's name must label it: an identifier naming the
  vendor, an operator (every one gitleaks' generator writes samples with:
  ``=``, ``:``, ``:=``, ``::=``, ``?=``, ``+=``, ``.=``, ``??=``, ``=>``,
  ``||``, ``,``, a call ``(``, a YAML block ``: |`` / ``: >`` with the value
  on the next line) or the prose "is"/"was", then a value of that vendor's
  exact shape (length and alphabet).
* ``find_connection_uris``: ``scheme://user:password@host`` where the
  password holds characters a URL parser stops at (``@``, ``#``, ``?``,
  ``&``): the host is the last ``@…`` that reads as a host and a port or path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .entropy import is_placeholder, shannon
from .gating import trie_pattern as _trie

Candidate = tuple[str, int, int, int]

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
CRYPT = r"[./A-Za-z0-9]"
CE = r"(?![./A-Za-z0-9])"

# (rule id, pattern, extra TokenRule keyword arguments). Patterns are literal-led
# (dispatched on token runs) unless they name run_gates or gates.

# crypt(3)-style hashes, one alternation: a hash starts with "$", so glued
# to a field separator ("root:$6$…") it is no token-run start; it is searched
# inside runs holding a "$" (one gate, one literal-led scan per such run).
_CRYPT_HASH = (
    r"\$(?<![A-Za-z0-9$]\$)(?:"
    r"1\$" + CRYPT + r"{0,8}\$" + CRYPT + r"{22}"                                    # md5crypt
    r"|apr1\$" + CRYPT + r"{0,8}\$" + CRYPT + r"{22}"                                # Apache MD5
    r"|2[abxy]?\$[0-9]{2}\$" + CRYPT + r"{53}"                                       # bcrypt
    r"|5\$(?:rounds=[0-9]{1,9}\$)?" + CRYPT + r"{1,16}\$" + CRYPT + r"{43}"         # sha256crypt
    r"|6\$(?:rounds=[0-9]{1,9}\$)?" + CRYPT + r"{1,16}\$" + CRYPT + r"{86}"         # sha512crypt
    r"|[89]\$" + CRYPT + r"{8,16}\$" + CRYPT + r"{43}"                               # Cisco type 8/9
    r"|7\$" + CRYPT + r"{11,64}\$" + CRYPT + r"{43}"                                 # scrypt
    r"|g?y\$" + CRYPT + r"{1,32}\$" + CRYPT + r"{1,86}\$" + CRYPT + r"{43}"         # yescrypt
    r"|[PH]\$" + CRYPT + r"{31}"                                                      # phpass
    r"|S\$" + CRYPT + r"{52}"                                                         # Drupal 7
    r")" + CE
)

HASH_FORMATS: tuple[tuple[str, str, dict], ...] = (
    ("password-hash", _CRYPT_HASH, {"run_gates": ("$",), "left": None}),
    ("argon2-hash", r"(?<![A-Za-z0-9$])\$argon2(?:id|i|d)\$(?:v=[0-9]{1,3}\$)?m=[0-9]{1,9},t=[0-9]{1,6},p=[0-9]{1,4}"
                    r"\$[A-Za-z0-9+/]{8,128}\$[A-Za-z0-9+/]{16,256}", {"gates": ("$argon2",)}),
    ("django-pbkdf2-hash", r"pbkdf2_sha(?:1|256|512)\$[0-9]{3,8}\$[A-Za-z0-9./+]{4,64}\$[A-Za-z0-9+/]{27,88}={0,2}",
     {}),
    # Kerberos roasting output (hashcat 18200, 13100, 19600-19800, 7500): the whole blob up to the next space.
    ("kerberos-hash", r"(?<![A-Za-z0-9$])\$krb5(?:asrep|tgs|pa)\$[^\s'\"`]{40,16384}",
     {"gates": ("$krb5asrep$", "$krb5tgs$", "$krb5pa$")}),
    # NetNTLMv2 user::domain:challenge(16):NTProofStr(32):blob; NetNTLMv1 user::domain:lm(48):nt(48):challenge(16)
    ("netntlm-response",
     r"(?<![A-Za-z0-9_.$@-])[A-Za-z0-9_.$@-]{1,64}::[A-Za-z0-9_.-]{0,64}:(?:[a-fA-F0-9]{16}:[a-fA-F0-9]{32}"
     r":[a-fA-F0-9]{32,8192}|[a-fA-F0-9]{48}:[a-fA-F0-9]{48}:[a-fA-F0-9]{16})(?![A-Za-z0-9])", {"run_gates": ("::",)}),
    ("ldap-password-hash",
     r"(?<![A-Za-z0-9])\{(?:SSHA|SSHA256|SSHA512|SHA|SHA256|SHA512|SMD5|MD5|CRYPT|PBKDF2(?:-SHA(?:1|256|512))?"
     r"|ARGON2)\}(?P<s>[A-Za-z0-9+/=$.,:-]{16,512})", {"gates": ("{ssha", "{sha", "{smd5", "{md5", "{crypt",
                                                                   "{pbkdf2", "{argon2")}),
)

VENDOR_FORMATS: tuple[tuple[str, str, dict], ...] = (
    # Microsoft Teams / Office 365 incoming webhooks (gitleaks, Nosey Parker):
    # the path after /webhook/ or /webhookb2/ is the credential; the host stays.
    ("microsoft-teams-webhook",
     r"webhook(?:b2)?/(?P<s>" + UUID + r"(?:@|%40|%2540)" + UUID + r"/(?:IncomingWebhook|[A-Za-z]{3,32})/[a-f0-9]{32}/"
     + UUID + r"(?:/[A-Za-z0-9_-]{20,80})?)(?![A-Za-z0-9_-])",
     {"run_gates": ("webhook",), "left": None}),
    # Power Automate / Logic Apps workflow webhooks ("Workflows" replacing Teams connectors).
    ("microsoft-workflow-webhook",
     r"logic\.azure\.com(?::443)?/workflows/(?P<s>[a-f0-9]{32})/triggers/", {"run_gates": ("logic.azure.com",),
                                                                             "left": None}),
    ("dependency-track-api-key", r"odt_(?:[A-Za-z0-9]{8}_)?[A-Za-z0-9]{32,255}(?![A-Za-z0-9])", {"keep": 4}),
    ("pubnub-secret-key", r"sec-c-[A-Za-z0-9]{40,60}(?![A-Za-z0-9])", {}),
    ("pubnub-publish-key", r"pub-c-" + UUID + r"(?![A-Za-z0-9])", {}),
    ("teamwork-api-token", r"tkn\.v1_[A-Za-z0-9+/=_-]{40,400}(?![A-Za-z0-9+/=_-])", {}),
)


# --------------------------------------------------------------------------
# gitleaks' semi-generic rules: vendor keyword, operator, exact value shape
# --------------------------------------------------------------------------

U = UUID
# (rule id, keywords (lowercase, any one in the identifier or phrase), value regex, case-sensitive value)
CUED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("adafruit-api-key", ("adafruit",), r"[a-z0-9_-]{32}"),
    ("adobe-client-id", ("adobe",), r"[a-f0-9]{32}"),
    ("airtable-api-key", ("airtable",), r"[a-z0-9]{17}"),
    ("algolia-api-key", ("algolia",), r"[a-z0-9]{32}"),
    ("alibaba-secret-key", ("alibaba", "aliyun"), r"[a-z0-9]{30}"),
    ("asana-client-id", ("asana",), r"[0-9]{16}"),
    ("asana-client-secret", ("asana",), r"[a-z0-9]{32}"),
    ("atlassian-api-token", ("atlassian", "confluence", "jira"), r"[a-z0-9]{20}[a-f0-9]{4}"),
    ("bitbucket-client-id", ("bitbucket",), r"[a-z0-9]{32}"),
    ("bitbucket-client-secret", ("bitbucket",), r"[a-z0-9=_-]{64}"),
    ("bittrex-access-key", ("bittrex",), r"[a-z0-9]{32}"),
    ("cisco-meraki-api-key", ("meraki",), r"[0-9a-f]{40}"),
    ("cloudflare-api-key", ("cloudflare",), r"[a-z0-9_-]{40}"),
    ("cloudflare-global-api-key", ("cloudflare",), r"[a-f0-9]{37}"),
    ("codecov-access-token", ("codecov",), r"[a-z0-9]{32}"),
    ("codeclimate-reporter-id", ("codeclimate", "code_climate", "cc_test_reporter"), r"[a-f0-9]{64}"),
    ("cohere-api-token", ("cohere", "co_api_key"), r"[a-zA-Z0-9]{40}"),
    ("coinbase-access-token", ("coinbase",), r"[a-z0-9_-]{64}"),
    ("confluent-access-token", ("confluent",), r"[a-z0-9]{16}"),
    ("confluent-secret-key", ("confluent",), r"[a-z0-9]{64}"),
    ("contentful-delivery-api-token", ("contentful",), r"[a-z0-9=_-]{43}"),
    ("datadog-access-token", ("datadog",), r"[a-z0-9]{40}"),
    ("datadog-api-key", ("datadog", "dd_api_key", "dd_app_key"), r"[a-f0-9]{32}"),
    ("discord-api-token", ("discord",), r"[a-f0-9]{64}"),
    ("discord-client-id", ("discord",), r"[0-9]{18}"),
    ("discord-client-secret", ("discord",), r"[a-z0-9=_-]{32}"),
    ("droneci-access-token", ("droneci", "drone_token"), r"[a-z0-9]{32}"),
    ("dropbox-api-token", ("dropbox",), r"[a-z0-9]{15}"),
    ("dropbox-long-lived-api-token", ("dropbox",), r"[a-z0-9]{11}AAAAAAAAAA[a-z0-9_=-]{43}"),
    ("etsy-access-token", ("etsy",), r"[a-z0-9]{24}"),
    ("facebook-secret", ("facebook",), r"[a-f0-9]{32}"),
    ("fastly-api-token", ("fastly",), r"[a-z0-9=_-]{32}"),
    ("finicity-api-token", ("finicity",), r"[a-f0-9]{32}"),
    ("finicity-client-secret", ("finicity",), r"[a-z0-9]{20}"),
    ("finnhub-access-token", ("finnhub",), r"[a-z0-9]{20}"),
    ("flickr-access-token", ("flickr",), r"[a-z0-9]{32}"),
    ("freshbooks-access-token", ("freshbooks",), r"[a-z0-9]{64}"),
    ("gitea-access-token", ("gitea", "forgejo", "codeberg"), r"[a-f0-9]{40}"),
    ("gitter-access-token", ("gitter",), r"[a-z0-9_-]{40}"),
    ("heroku-api-key", ("heroku",), U),
    ("hubspot-api-key", ("hubspot",), U),
    ("intercom-api-key", ("intercom",), r"[a-z0-9=_-]{60}"),
    ("jfrog-api-key", ("jfrog", "artifactory", "bintray", "xray"), r"[a-z0-9]{73}"),
    ("jfrog-identity-token", ("jfrog", "artifactory", "bintray", "xray"), r"[a-z0-9]{64}"),
    ("kraken-access-token", ("kraken",), r"[a-z0-9/=_+-]{80,90}"),
    ("kucoin-access-token", ("kucoin",), r"[a-f0-9]{24}"),
    ("kucoin-secret-key", ("kucoin",), U),
    ("launchdarkly-access-token", ("launchdarkly",), r"[a-z0-9=_-]{40}"),
    ("linear-client-secret", ("linear",), r"[a-f0-9]{32}"),
    ("linkedin-client-id", ("linkedin", "linked_in", "linked-in"), r"[a-z0-9]{14}"),
    ("linkedin-client-secret", ("linkedin", "linked_in", "linked-in"), r"[a-z0-9]{16}"),
    ("mailgun-signing-key", ("mailgun",), r"[a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8}"),
    ("mailgun-pub-key", ("mailgun",), r"pubkey-[a-f0-9]{32}"),
    ("mapbox-api-token", ("mapbox",), r"pk\.[a-z0-9]{60}\.[a-z0-9]{22}"),
    ("mattermost-access-token", ("mattermost",), r"[a-z0-9]{26}"),
    ("messagebird-api-token", ("messagebird", "message_bird", "message-bird"), r"[a-z0-9]{25}"),
    ("messagebird-client-id", ("messagebird", "message_bird", "message-bird"), U),
    ("netlify-access-token", ("netlify",), r"[a-z0-9=_-]{40,46}"),
    ("new-relic-user-api-id", ("new-relic", "newrelic", "new_relic"), r"[a-z0-9]{64}"),
    ("nytimes-access-token", ("nytimes", "new-york-times", "newyorktimes"), r"[a-z0-9=_-]{32}"),
    ("okta-access-token", ("okta",), r"00[A-Za-z0-9_=-]{40}"),
    ("plaid-client-id", ("plaid",), r"[a-z0-9]{24}"),
    ("plaid-secret-key", ("plaid",), r"[a-z0-9]{30}"),
    ("privateai-api-token", ("privateai", "private_ai", "private-ai"), r"[a-z0-9]{32}"),
    ("rapidapi-access-token", ("rapidapi",), r"[a-z0-9_-]{50}"),
    ("sendbird-access-id", ("sendbird",), U),
    ("sendbird-access-token", ("sendbird",), r"[a-f0-9]{40}"),
    ("sentry-access-token", ("sentry",), r"[a-f0-9]{64}"),
    ("snyk-api-token", ("snyk",), U),
    ("sonar-api-token", ("sonar",), r"[a-z0-9=_-]{40}"),
    ("squarespace-access-token", ("squarespace",), U),
    ("sumologic-access-id", ("sumo",), r"su[a-zA-Z0-9]{12}"),
    ("sumologic-access-token", ("sumo",), r"[a-z0-9]{64}"),
    ("telegram-bot-api-token", ("telegr",), r"[0-9]{5,16}:A[a-zA-Z0-9_-]{34}"),
    ("travisci-access-token", ("travis",), r"[a-z0-9]{22}"),
    ("twitch-api-token", ("twitch",), r"[a-z0-9]{30}"),
    ("twitter-access-secret", ("twitter",), r"[a-z0-9]{45}"),
    ("twitter-access-token", ("twitter",), r"[0-9]{15,25}-[a-zA-Z0-9]{20,40}"),
    ("twitter-api-key", ("twitter",), r"[a-z0-9]{25}"),
    ("twitter-api-secret", ("twitter",), r"[a-z0-9]{50}"),
    ("zendesk-secret-key", ("zendesk",), r"[a-z0-9]{40}"),
)

_KEYWORDS: dict[str, list[int]] = {}
for _i, (_rid, _kws, _v) in enumerate(CUED):
    for _k in _kws:
        _KEYWORDS.setdefault(_k, []).append(_i)

_KEYWORD_RE = re.compile(_trie(_KEYWORDS))

# After the keyword: the rest of the name/phrase (gitleaks: [\w \t.-]{0,20}),
# closing quotes, an operator, opening quotes. "is"/"was" for prose.
_OP = (r"(?::[ \t]*[|>][-+]?[ \t]*\r?\n[ \t]*"
       r"|[ \t]*(?:\?\?=|\.=|\+=|[<>?]?=|:{1,3}=|=>|\|\||:|>|,|\()"
       r"|[ \t]+(?:is|was)[ \t])")
_TAIL_RE = re.compile(r"[\w \t.-]{0,24}?[\\]{0,2}['\"]{0,3}" + _OP + r"[`'\"\s=]{0,5}")
# gitleaks matches most values case-insensitively; a class naming A-Z is exact.
_VALUE_RES = [re.compile(v, 0 if "A-Z" in v else re.I) for _r, _k, v in CUED]
_VALUE_END = re.compile(r"""(?:[`'"\s;,)<\\]|$)""")


def _value_ok(v: str) -> bool:
    if is_placeholder(v):
        return False
    body = v.replace("-", "").replace("_", "")
    if body.isalpha() and (body.islower() or body.isupper()):
        return False  # a word or a name, not a generated value
    return shannon(v) >= 2.8 or len(set(v)) >= 10


def find_cued_values(text: str, low: str) -> Iterator[Candidate]:
    for m in _KEYWORD_RE.finditer(low):
        yield from _cued_at(text, m.group(), m.end())


def _cued_at(text: str, kw: str, end: int) -> Iterator[Candidate]:
    t = _TAIL_RE.match(text, end)
    if t is not None and t.end() < len(text):
        vs = t.end()
        for i in _KEYWORDS[kw]:
            v = _VALUE_RES[i].match(text, vs)
            if v is None or not _VALUE_END.match(text, v.end()):
                continue
            if _value_ok(v.group()):
                yield (CUED[i][0], vs, v.end(), 0)
                return


# --------------------------------------------------------------------------
# connection URIs with a password a URL parser would cut short
# --------------------------------------------------------------------------

CONN_URI_RE = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,24}://(?P<user>[^\s:/@'\"`<>]{1,128}):(?P<pw>[^\s'\"`<>/]{1,256}?)"
    r"@(?P<host>[A-Za-z0-9_-][A-Za-z0-9_.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?"
    r"(?=[/?#,;\s'\"`)>]|$)"
)
_URI_PW_PLACEHOLDERS = frozenset({"password", "pass", "passwd", "pwd", "pw", "secret", "token", "changeme", "x"})


def find_connection_uris(text: str, low: str) -> Iterator[Candidate]:
    for m in CONN_URI_RE.finditer(text):
        pw = m.group("pw")
        if pw.lower() in _URI_PW_PLACEHOLDERS or is_placeholder(pw) or not pw.strip("*"):
            continue
        if pw.isdigit() and len(pw) <= 5:
            continue
        yield ("connection-uri-password", m.start("pw"), m.end("pw"), 0)


CUED_PATTERNS = (_KEYWORD_RE.pattern, _TAIL_RE.pattern, _VALUE_END.pattern) + tuple(v for _r, _k, v in CUED)
URI_PATTERNS = (CONN_URI_RE.pattern,)
