"""Generated, realistic-format secrets for redaction tests and the bench.

Every generator takes a ``random.Random`` and returns ``(fragment, secret,
rule)``: text to plant, the part of it that must not survive (no 12-char
run), and the rule expected to name it. Values are random, never real.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
B32 = string.ascii_uppercase + "234567"


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        # Real tokens never contain filler runs; rule validators reject them.
        if "xxxx" not in s.lower() and not any(c * 5 in s for c in alphabet[:0] or "*#"):
            return s


def _jwt(rng: random.Random) -> str:
    def seg(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    header = seg({"alg": "HS256", "typ": "JWT"})
    payload = seg({"sub": _r(rng, ALNUM, 12), "iat": rng.randint(1_600_000_000, 1_800_000_000),
                   "role": rng.choice(["admin", "user", "service"])})
    return f"{header}.{payload}.{_r(rng, B64URL, 43)}"


def _pem(rng: random.Random, kind: str = "RSA PRIVATE KEY") -> tuple[str, str]:
    body = "\n".join(_r(rng, B64, 64) for _ in range(6)) + "\n" + _r(rng, B64, 20) + "=="
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----", body


def _password(rng: random.Random, n: int = 16) -> str:
    return _r(rng, ALNUM + "!@#%^&*-_+=", n - 2) + rng.choice(string.digits) + rng.choice("!#%")


Gen = Callable[[random.Random], tuple[str, str, str]]

GENERATORS: dict[str, Gen] = {
    "aws-access-key-id": lambda r: (lambda k: (k, k, "aws-access-key-id"))("AKIA" + _r(r, B32, 16)),
    "aws-secret-access-key": lambda r: (lambda k: (f"aws_secret_access_key = {k}", k, "aws-secret-access-key"))(
        _r(r, B64, 40)),
    "github-pat": lambda r: (lambda k: (k, k, "github-pat"))("ghp_" + _r(r, ALNUM, 36)),
    "github-fine-grained-pat": lambda r: (lambda k: (k, k, "github-fine-grained-pat"))(
        "github_pat_" + _r(r, ALNUM, 22) + "_" + _r(r, ALNUM, 59)),
    "gitlab-token": lambda r: (lambda k: (k, k, "gitlab-token"))("glpat-" + _r(r, ALNUM + "-_", 20)),
    "openai-api-key": lambda r: (lambda k: (k, k, "openai-api-key"))(
        "sk-proj-" + _r(r, B64URL, 58) + "T3BlbkFJ" + _r(r, B64URL, 58)),
    "anthropic-api-key": lambda r: (lambda k: (k, k, "anthropic-api-key"))("sk-ant-api03-" + _r(r, B64URL, 93) + "AA"),
    "slack-bot-token": lambda r: (lambda k: (k, k, "slack-bot-token"))(
        f"xoxb-{r.randint(10**11, 10**12 - 1)}-{r.randint(10**12, 10**13 - 1)}-{_r(r, ALNUM, 24)}"),
    "slack-webhook-url": lambda r: (lambda p: (f"https://hooks.slack.com/services/{p}", p, "slack-webhook-url"))(
        f"T{_r(r, B32, 8)}/B{_r(r, B32, 10)}/{_r(r, ALNUM, 24)}"),
    "jwt": lambda r: (lambda k: (k, k, "jwt"))(_jwt(r)),
    "private-key": lambda r: (lambda pb: (pb[0], pb[1], "private-key"))(_pem(r)),
    "private-key-openssh": lambda r: (lambda pb: (pb[0], pb[1], "private-key"))(_pem(r, "OPENSSH PRIVATE KEY")),
    "gcp-service-account": lambda r: (lambda pb: (
        '{"type": "service_account", "private_key": ' + json.dumps(pb[0] + "\n") + "}",
        pb[1].replace("\n", "\\n"), "private-key"))(_pem(r, "PRIVATE KEY")),
    "postgres-url": lambda r: (lambda pw: (f"postgres://app_user:{pw}@db.internal:5432/app", pw, "url-credentials"))(
        _r(r, ALNUM, 18)),
    "mongodb-url": lambda r: (lambda pw: (f"mongodb+srv://admin:{pw}@cluster0.abcde.mongodb.net/test", pw,
                                          "url-credentials"))(_r(r, ALNUM, 20)),
    "huggingface-access-token": lambda r: (lambda k: (k, k, "huggingface-access-token"))(
        "hf_" + _r(r, string.ascii_letters, 34)),
    "gcp-api-key": lambda r: (lambda k: (k, k, "gcp-api-key"))("AIza" + _r(r, B64URL, 35)),
    "stripe-access-token": lambda r: (lambda k: (k, k, "stripe-access-token"))("sk_live_" + _r(r, ALNUM, 24)),
    "npm-access-token": lambda r: (lambda k: (k, k, "npm-access-token"))("npm_" + _r(r, ALNUM, 36)),
    "groq-api-key": lambda r: (lambda k: (k, k, "groq-api-key"))("gsk_" + _r(r, ALNUM, 52)),
    "perplexity-api-key": lambda r: (lambda k: (k, k, "perplexity-api-key"))("pplx-" + _r(r, ALNUM, 48)),
    "telegram-bot-api-token": lambda r: (lambda k: (k, k, "telegram-bot-api-token"))(
        f"{r.randint(10**8, 10**9 - 1)}:AA{_r(r, B64URL, 33)}"),
    "sendgrid-api-token": lambda r: (lambda k: (k, k, "sendgrid-api-token"))(
        f"SG.{_r(r, B64URL, 22)}.{_r(r, B64URL, 43)}"),
    "twilio-api-key": lambda r: (lambda k: (k, k, "twilio-api-key"))("SK" + _r(r, HEX, 32)),
    "gcp-oauth-access-token": lambda r: (lambda k: (k, k, "gcp-oauth-access-token"))("ya29." + _r(r, B64URL, 80)),
    "dockerhub-access-token": lambda r: (lambda k: (k, k, "dockerhub-access-token"))("dckr_pat_" + _r(r, B64URL, 27)),
    "doppler-api-token": lambda r: (lambda k: (k, k, "doppler-api-token"))("dp.pt." + _r(r, ALNUM, 43)),
    "vault-service-token": lambda r: (lambda k: (k, k, "vault-service-token"))("hvs." + _r(r, B64URL, 95)),
    "pypi-upload-token": lambda r: (lambda k: (k, k, "pypi-upload-token"))("pypi-AgEIcHlwaS5vcmc" + _r(r, B64URL, 80)),
    "shopify-token": lambda r: (lambda k: (k, k, "shopify-token"))("shpat_" + _r(r, HEX, 32)),
    "azure-storage-account-key": lambda r: (lambda k: (
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={k};EndpointSuffix=core.windows.net", k,
        "azure-storage-account-key"))(_r(r, B64, 86) + "=="),
    "password-assignment": lambda r: (lambda pw: (f'DB_PASSWORD="{pw}"', pw, "password-assignment"))(_password(r)),
    "api-key-json": lambda r: (lambda k: (f'{{"apiKey": "{k}"}}', k, "secret-assignment"))(_r(r, ALNUM, 32)),
    "authorization-bearer": lambda r: (lambda k: (f"Authorization: Bearer {k}", k, "authorization-header"))(
        _r(r, ALNUM, 40)),
    "curl-basic-auth": lambda r: (lambda pw: (f"curl -u deploy:{pw} https://api.example.com/v1", pw,
                                              "curl-basic-auth"))(_r(r, ALNUM, 16)),
    "cli-secret-flag": lambda r: (lambda k: (f"mytool deploy --api-key {k}", k, "cli-secret-flag"))(_r(r, ALNUM, 32)),
}


def planted_secrets(rng: random.Random) -> tuple[str, str, str]:
    """One random (fragment, secret, rule) from any generator."""
    return GENERATORS[rng.choice(sorted(GENERATORS))](rng)


def leaked(secret: str, output: str, run: int = 12) -> bool:
    """True if any ``run``-char piece of ``secret`` (per line) survives in ``output``."""
    for line in secret.replace("\\n", "\n").split("\n"):
        if line.startswith("-----"):
            continue
        for i in range(0, max(0, len(line) - run + 1)):
            if line[i:i + run] in output:
                return True
    return False
