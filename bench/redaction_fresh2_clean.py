"""Fresh2 clean lines: near misses that look credential-shaped but must stay unchanged (issue 34).

Same `⟦kind⟧` syntax as the chat templates, with the non-secret generators below. Treated as clean:
commit and digest hashes, UUID request/trace/client ids, GPG ids and fingerprints, CI cache keys,
public keys and certificates, secret *references* (`${{ secrets.X }}`, `$VAR`, vault paths), talk about
passwords and tokens without a value, and obvious placeholders (`<your-token>`, `YOUR_API_KEY_HERE`,
`***`, `[REDACTED]`). Deliberately in neither set: literal default passwords such as `changeme` (a real
credential on any system that kept it) and full-length fakes such as `ghp_` followed by 36 `x`.
"""

from __future__ import annotations

import base64
import random
import re

from bench.redaction_fresh2_values import HEX, rs

UPPER_HEX = "0123456789ABCDEF"


def _semver(r: random.Random) -> str:
    v = f"{r.randrange(0, 9)}.{r.randrange(0, 30)}.{r.randrange(0, 20)}"
    return v + r.choice(("", "", f"-rc.{r.randrange(1, 5)}", f"+build.{r.randrange(100, 9999)}", f"-beta{r.randrange(1, 4)}"))


def _uuid(r: random.Random) -> str:
    h = rs(r, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{r.choice('89ab')}{h[17:20]}-{h[20:]}"


def _pod(r: random.Random) -> str:
    name = r.choice(("api", "worker", "ingest", "web-frontend", "billing-sync", "redis-master"))
    return f"{name}-{rs(r, 'bcdfghjklmnpqrstvwxz2456789', 10)}-{rs(r, 'bcdfghjklmnpqrstvwxz2456789', 5)}"


def _gpgfp(r: random.Random) -> str:
    h = rs(r, UPPER_HEX, 40)
    return " ".join(h[i:i + 4] for i in range(0, 40, 4)) if r.random() < 0.5 else h


def _sshpub(r: random.Random) -> str:
    return "AAAAC3NzaC1lZDI1NTE5AAAAI" + base64.b64encode(r.randbytes(33)).decode().rstrip("=")


def _cert(r: random.Random) -> str:
    body = base64.b64encode(b"\x30\x82\x03" + r.randbytes(300)).decode()
    return "\n".join(body[i:i + 64] for i in range(0, len(body), 64))


def _png(r: random.Random) -> str:
    return "iVBORw0KGgoAAAANSUhEUgAA" + base64.b64encode(r.randbytes(90)).decode()


def _pem_b64(r: random.Random) -> str:
    """A public CA certificate, PEM base64-encoded again as Kubernetes stores it under data.ca.crt."""
    pem = f"-----BEGIN CERTIFICATE-----\n{_cert(r)}\n-----END CERTIFICATE-----\n"
    return base64.b64encode(pem.encode()).decode()


CLEAN_GEN = {
    "sha40": lambda r: rs(r, HEX, 40), "sha7": lambda r: rs(r, HEX, 7), "sha64": lambda r: rs(r, HEX, 64),
    "md5": lambda r: rs(r, HEX, 32), "uuid": _uuid, "semver": _semver, "pod": _pod, "gpgfp": _gpgfp,
    "gpgid": lambda r: rs(r, UPPER_HEX, 16), "sshpub": _sshpub, "cert": _cert, "png": _png, "pemb64": _pem_b64,
    "n": lambda r: str(r.randrange(2, 99)), "big": lambda r: str(r.choice((2048, 4096, 8192, 32000, 128000))),
    "colour": lambda r: "#" + rs(r, HEX, 6), "port": lambda r: str(r.choice((22, 443, 5432, 6379, 8080, 9090, 3000))),
    "date": lambda r: f"20{r.randrange(20, 27)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}",
    "time": lambda r: f"{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}",
    "ip": lambda r: f"10.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}",
    "jira": lambda r: f"{r.choice(('OPS', 'PLAT', 'SEC', 'INFRA', 'BILL'))}-{r.randrange(10, 9999)}",
    "issue": lambda r: str(r.randrange(100, 40000)),
    "user": lambda r: r.choice(("anna", "ben", "deploy", "ci-bot", "marek")),
    "env": lambda r: r.choice(("PROD", "STAGING", "DEV", "QA", "CI")),
    "word": lambda r: r.choice(("orders", "billing", "search", "auth", "payments")),
    "ts": lambda r: str(r.randrange(1_700_000_000, 1_800_000_000)),
    "runid": lambda r: str(r.randrange(10**9, 10**10)),
    "b64short": lambda r: base64.b64encode(r.randbytes(6)).decode(),
}
SLOT = re.compile(r"⟦(\w+)(?:\.(\d+))?⟧")


def render(template: str, r: random.Random) -> str:
    values: dict[tuple[str, str], str] = {}

    def sub(m: re.Match[str]) -> str:
        key = (m.group(1), m.group(2) or "1")
        if key not in values:
            values[key] = CLEAN_GEN[key[0]](r)
        return values[key]
    return SLOT.sub(sub, template)


FAMILIES: dict[str, list[str]] = {
    "commit_sha": [
        "fixed in ⟦sha40⟧, can you cherry-pick it onto release?",
        "git revert ⟦sha7⟧ broke the build again",
        "bisect says the first bad commit is ⟦sha40⟧",
        "HEAD is now at ⟦sha7⟧ Merge pull request #⟦issue⟧ from acme/fix-login",
        "compare: https://github.com/acme/app/compare/⟦sha7⟧...⟦sha7.2⟧",
    ],
    "uuid_ids": [
        "request id ⟦uuid⟧ returned 500 at ⟦time⟧",
        "trace_id=⟦uuid⟧ span_id=⟦md5⟧",
        "OAuth client: ⟦uuid⟧ (public client, no secret)",
        "tenant ⟦uuid⟧, subscription ⟦uuid.2⟧",
        "correlation-id: ⟦uuid⟧",
    ],
    "gpg_keys": [
        "gpg --recv-keys ⟦gpgid⟧",
        "Primary key fingerprint: ⟦gpgfp⟧",
        "signed with key ⟦gpgid⟧, fingerprint ⟦gpgfp⟧",
        "https://keys.openpgp.org/vks/v1/by-fingerprint/⟦gpgfp⟧",
        "git config user.signingkey ⟦gpgid⟧",
    ],
    "image_digests": [
        "image: ghcr.io/acme/api@sha256:⟦sha64⟧",
        "Digest: sha256:⟦sha64⟧",
        "pulled node:20-alpine (sha256:⟦sha64⟧)",
        "\"digest\": \"sha256:⟦sha64⟧\", \"size\": ⟦big⟧",
        "FROM python:3.12-slim@sha256:⟦sha64⟧",
    ],
    "versions": [
        "upgraded from ⟦semver⟧ to ⟦semver.2⟧ and the bug is gone",
        "requests==⟦semver⟧",
        "\"typescript\": \"^⟦semver⟧\"",
        "Chrome/1⟦n⟧.0.6⟦n.2⟧.1⟦n⟧ Safari/537.36",
        "build ⟦runid⟧ (v⟦semver⟧) passed",
    ],
    "file_paths": [
        "see src/auth/password_reset.py line ⟦n⟧",
        "the secrets live in /etc/⟦word⟧/secrets/ but the file is empty",
        "config at ~/.config/gh/hosts.yml, token is read from the keyring since v⟦semver⟧",
        "C:\\Users\\⟦user⟧\\AppData\\Roaming\\npm\\node_modules",
        "moved tokens.ts to packages/api/src/tokens/⟦word⟧.ts",
    ],
    "ci_cache_keys": [
        "key: ${{ runner.os }}-⟦word⟧-${{ hashFiles('**/package-lock.json') }}",
        "Cache restored from key: Linux-pip-⟦sha64⟧",
        "cache key linux-cargo-⟦md5⟧ not found, building from scratch",
        "restore-keys: |\n  ${{ runner.os }}-gradle-⟦word⟧-",
        "Received ⟦big⟧ of ⟦big⟧ (100.0%), key: node-cache-Linux-x64-npm-⟦sha64⟧",
    ],
    "public_keys_certs": [
        "ssh-ed25519 ⟦sshpub⟧ ⟦user⟧@laptop",
        "-----BEGIN CERTIFICATE-----\n⟦cert⟧\n-----END CERTIFICATE-----",
        "add this to authorized_keys: ssh-ed25519 ⟦sshpub⟧",
        "ca.crt: |\n  -----BEGIN CERTIFICATE-----\n  MIIC⟦b64short⟧\n  -----END CERTIFICATE-----",
        "the host key fingerprint is SHA256:⟦b64short⟧⟦b64short.2⟧⟦b64short.3⟧",
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata:\n  name: ⟦word⟧-ca\ndata:\n  ca.crt: ⟦pemb64⟧",
    ],
    "secret_refs": [
        "password: ${{ secrets.⟦env⟧_DB_PASSWORD }}",
        "export PGPASSWORD=$⟦env⟧_PASSWORD  # set by the runner",
        "token = os.environ[\"⟦env⟧_GITHUB_TOKEN\"]",
        "password: {{ .Values.⟦word⟧.auth.password }}",
        "vault read secret/data/⟦word⟧/db  # password comes from here",
        "api_key: !vault secret/⟦word⟧#api_key",
    ],
    "policy_talk": [
        "password must be at least ⟦n⟧ characters and contain a symbol",
        "rotate the API token every ⟦n⟧ days per the policy",
        "password: required, string, minLength ⟦n⟧",
        "the password field in ⟦word⟧ is hashed with argon2id before storing",
        "we should enforce 2FA for all ⟦word⟧ admins by ⟦date⟧",
    ],
    "token_counts": [
        "token limit is ⟦big⟧ for this model",
        "max_tokens=⟦big⟧, temperature=0.2",
        "prompt used ⟦big⟧ tokens, completion ⟦n⟧ tokens",
        "tokenizer splits that into ⟦n⟧ tokens",
        "context window: ⟦big⟧ tokens",
    ],
    "colours_numbers": [
        "primary colour ⟦colour⟧, hover ⟦colour.2⟧",
        "background: ⟦colour⟧; border: 1px solid ⟦colour.2⟧;",
        "order #⟦runid⟧ shipped",
        "timestamp ⟦ts⟧ is in seconds, not ms",
        "invoice total 1⟦n⟧⟦n.2⟧.50 EUR",
    ],
    "base64_media": [
        "<img src=\"data:image/png;base64,⟦png⟧\">",
        "background-image: url(data:image/png;base64,⟦png⟧);",
        "the favicon is inlined as data:image/png;base64,⟦png⟧",
        "![chart](data:image/png;base64,⟦png⟧)",
        "\"thumbnail\": \"data:image/png;base64,⟦png⟧\"",
    ],
    "ports_dates_ips": [
        "listening on 0.0.0.0:⟦port⟧",
        "scheduled for ⟦date⟧T⟦time⟧Z",
        "connect to ⟦ip⟧ on port ⟦port⟧",
        "cert expires ⟦date⟧, renew a week before",
        "ssh -p 2222 ⟦user⟧@⟦ip⟧",
    ],
    "tracker_ids": [
        "tracked in ⟦jira⟧, blocked by ⟦jira.2⟧",
        "see #⟦issue⟧ and PR #⟦issue.2⟧",
        "Sentry issue ⟦md5⟧ is the same crash",
        "closes ⟦jira⟧",
        "incident INC⟦runid⟧ resolved",
    ],
    "k8s_names": [
        "pod ⟦pod⟧ is CrashLoopBackOff",
        "kubectl logs ⟦pod⟧ -c app --previous",
        "replicaset ⟦pod⟧ scaled to 0",
        "the secret db-creds is mounted in ⟦pod⟧ but not read",
        "kubectl delete pod ⟦pod⟧ ⟦pod.2⟧",
    ],
    "placeholders": [
        "curl -H \"Authorization: Bearer <your-token>\" https://api.acme.io/v1/⟦word⟧",
        "⟦env⟧_API_KEY=YOUR_API_KEY_HERE",
        "password: ******** (hidden in the ⟦word⟧ UI)",
        "⟦word⟧ token: [REDACTED]",
        "mysql -u root -p<password> ⟦word⟧",
        "set OPENAI_API_KEY=sk-... in your shell, see ⟦jira⟧",
    ],
    "checksums": [
        "sha256sum: ⟦sha64⟧  release-⟦semver⟧.tar.gz",
        "md5 ⟦md5⟧ matches the upstream tarball",
        "ETag: \"⟦md5⟧\"",
        "integrity sha512 mismatch for ⟦word⟧, expected ⟦sha64⟧",
        "checksum ⟦sha64⟧ verified",
    ],
    "password_words": [
        "I reset my password on ⟦date⟧ and the token still works, weird",
        "the password manager autofilled the wrong account for ⟦user⟧",
        "forgot-password flow sends the email twice (⟦jira⟧)",
        "⟦user⟧ said the password was in the usual place",
        "passwordless login via magic link is live on ⟦date⟧",
    ],
}
