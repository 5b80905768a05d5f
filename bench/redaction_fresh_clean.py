"""Counter-corpus of the fresh evaluation (issue 34): developer chat that talks about credentials
without giving one, or carries credential-shaped values that are not secrets. Every line must come
out of the redactor unchanged. Same template conventions as the credential families, over the
extra non-secret fields in :data:`CLEAN_GEN` (no secret field may be used here).
"""

from __future__ import annotations

import base64
import random
import string
import uuid

from bench.redaction_fresh_values import ALNUM, HEX, b64, rs

LOG_TEXTS = ("hello world", '{"event":"push","ref":"main"}', "order 4411 shipped", "#cloud-config\npackages: [htop]",
             '{"status":"ok","items":3}', "user signed up via invite", "ping", "retry after 30s",
             '{"type":"deploy","env":"staging"}', "GET /healthz 200")


def _fpr(r: random.Random) -> str:
    h = rs(r, HEX.upper(), 40)
    groups = [h[i:i + 4] for i in range(0, 40, 4)]
    return " ".join(groups[:5]) + "  " + " ".join(groups[5:])


CLEAN_GEN = {
    "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)),
    "dig": lambda r: rs(r, HEX, 64), "trace": lambda r: rs(r, HEX, 32), "span": lambda r: rs(r, HEX, 16),
    "semver": lambda r: f"{r.randint(0, 5)}.{r.randint(0, 30)}.{r.randint(0, 15)}",
    "fpr": _fpr, "fpr40": lambda r: rs(r, HEX.upper(), 40), "fpr16": lambda r: rs(r, HEX.upper(), 16),
    "color": lambda r: "#" + rs(r, HEX, 6), "n": lambda r: str(r.randint(100, 9999)),
    "b64log": lambda r: base64.b64encode(r.choice(LOG_TEXTS).encode()).decode(),
    "md5b64": lambda r: b64(r, 16), "sshfp": lambda r: b64(r, 32, pad=False),
    "age": lambda r: "age1" + rs(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58),
    "sshpub": lambda r: "AAAAC3NzaC1lZDI1NTE5AAAAI" + rs(r, ALNUM + "+/", 43),
    "sri": lambda r: b64(r, 64), "evt": lambda r: "evt_" + rs(r, ALNUM, 24),
    "colonfp": lambda r: ":".join(rs(r, HEX.upper(), 2) for _ in range(32)),
    "word": lambda r: rs(r, string.ascii_lowercase, 6),
}

PW_MENTION = [
    "I reset my password yesterday and now the VPN client won't connect.",
    "Forgot my password for {svc} again, who can reset it?",
    "The password reset email never arrived — checked spam too.",
    "Did you change the password for the {user} account? My script started failing.",
    "{name} rotated the database password this morning, so restart the workers.",
    "Can you ask {name} for the password? I don't have access to the vault.",
    "We should really stop sharing passwords over Slack.",
    "The API token expired last night, so the sync job is red.",
    "I'll DM you the password.",
    "Password changed successfully. You can now sign in.",
]
PW_POLICY = [
    "The password must be at least 12 characters and include a number.",
    "Passwords expire every 90 days per the new policy.",
    "Access tokens are valid for 24 hours; refresh tokens for 30 days.",
    "minimum password length is 14, max 128",
    "Password requirements: 1 uppercase, 1 digit, 1 symbol, no reuse of the last 5.",
    "API keys are rotated quarterly by the platform team.",
    "Le mot de passe doit contenir au moins 12 caractères.",
    "Das Passwort muss mindestens 10 Zeichen lang sein.",
    "bcrypt cost factor is 12; new hashes use argon2id.",
]
ENV_REF = [
    "use `$DB_PASSWORD` instead of hardcoding it",
    "```yaml\nenvironment:\n  POSTGRES_PASSWORD: ${{POSTGRES_PASSWORD}}\n```",
    "export PGPASSWORD=\"$(cat /run/secrets/pg_password)\"",
    "```python\ntoken = os.environ[\"GITHUB_TOKEN\"]\n```",
    "const key = process.env.STRIPE_SECRET_KEY;",
    "set the header to `Authorization: Bearer $TOKEN`",
    "%DB_PASSWORD% is empty in the Windows runner",
    "password: \"{{{{ .Values.postgresql.auth.password }}}}\"",
    "api_key = ENV.fetch('OPENAI_API_KEY')",
    "echo \"$CR_PAT\" | docker login ghcr.io -u {user} --password-stdin",
]
CI_SECRET_REF = [
    "```yaml\n- run: npm publish\n  env:\n    NODE_AUTH_TOKEN: ${{{{ secrets.NPM_TOKEN }}}}\n```",
    "AWS_SECRET_ACCESS_KEY: ${{{{ secrets.AWS_SECRET_ACCESS_KEY }}}}",
    "docker login -u $CI_REGISTRY_USER -p $CI_REGISTRY_PASSWORD $CI_REGISTRY",
    "withCredentials([string(credentialsId: 'slack-token', variable: 'SLACK_TOKEN')]) {{ sh './notify.sh' }}",
    "```yaml\n- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db-creds\n      key: password\n```",
    "password: \"{{{{ lookup('community.hashi_vault.hashi_vault', 'secret=secret/data/db:password') }}}}\"",
    "api_key = var.datadog_api_key  # from TF_VAR_datadog_api_key",
    "the reusable workflow needs `secrets: inherit` or the token is empty",
    "RUN --mount=type=secret,id=npm_token NPM_TOKEN=$(cat /run/secrets/npm_token) npm ci",
]
PLACEHOLDER = [
    "export OPENAI_API_KEY=<your-token-here>",
    "password: ****",
    "api_key: YOUR_API_KEY",
    "token = \"...\"  # fill in",
    "Authorization: Bearer <token>",
    "mysql -u root -p'<password>' -e 'show databases'",
    "the key starts with sk- but I'm not pasting it here",
    "password: [REDACTED]",
    "replace `{{{{API_KEY}}}}` with your own key",
    "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
]
VAULT_POINTER = [
    "password: (see 1Password)",
    "creds are in the team vault under 'Prod DB'",
    "ask {name} for the creds, they're not in the repo",
    "it's stored in AWS Secrets Manager at prod/{company}/main",
    "the token lives in `~/.config/gh/hosts.yml`, don't commit it",
    "Password: in Bitwarden → Infra → {db}",
    "the key is in the CI variables (masked), not in the .env",
    "Kennwort: siehe KeePass-Datei im Teamlaufwerk",
    "pass: ask in #infra-access",
    "login {user}, password is the usual one",
]
GIT_SHA = [
    "fixed in {sha}, can you cherry-pick it onto release/2.3?",
    "git revert {short}",
    "bisect says the first bad commit is {sha}",
    "HEAD is now at {short} Merge pull request #{n} from {company}/fix-retry",
    "`git show {short}:config/settings.py`",
    "pinned the action to actions/checkout@{sha}",
    "the image is tagged with the commit, e.g. api:{short}",
    "https://github.com/{company}/api/compare/{short}...{short2}",
]
UUID_IDS = [
    "request id {uuid} returned 500",
    "X-Request-Id: {uuid}",
    "trace_id={trace} span_id={span}",
    "the job {uuid} has been stuck in pending since 3am",
    "Stripe event {evt} failed delivery three times",
    "tenant_id: {uuid}",
    "ERROR [{uuid}] upstream timed out after 30000ms",
    "{{\"level\":\"warn\",\"correlationId\":\"{uuid}\",\"msg\":\"retrying\"}}",
]
DOCKER_DIGEST = [
    "FROM python:3.12-slim@sha256:{dig}",
    "image: ghcr.io/{company}/api@sha256:{dig}",
    "Digest: sha256:{dig}\nStatus: Downloaded newer image for nginx:1.27",
    "the manifest list digest changed to sha256:{dig} overnight",
    "docker pull redis@sha256:{dig}",
    "{span}: Pull complete",
    "cosign verify says the signature matches sha256:{dig}",
]
VERSIONS = [
    "bump fastapi to {semver} and pydantic to {semver2}",
    "works on node v{semver}, fails on {semver2}",
    "Python 3.12.7 (main, Oct  1 2024, 08:52:12) [GCC 12.2.0] on linux",
    "released v{semver} with the fix",
    "kubectl version: Client v1.31.2, Server v1.29.9-eks-a737599",
    "glibc 2.36, openssl 3.0.15",
    "requires libpq >= 16.4",
    "chart version {semver}, app version {semver2}",
]
GPG_SSH_FPR = [
    "Key fingerprint = {fpr}",
    "gpg --recv-keys {fpr40}",
    "signed with key {fpr16} (long id)",
    "The release signing key fingerprint is {fpr}. Verify it before installing.",
    "ED25519 key fingerprint is SHA256:{sshfp}.",
    "```\npub   ed25519 2024-03-11 [SC]\n      {fpr40}\nuid           [ultimate] {name} <{email}>\n```",
    "TLS cert SHA-256 fingerprint: {colonfp}",
    "encrypt the backup to our age recipient {age}",
    "add this to authorized_keys: ssh-ed25519 {sshpub} {email}",
]
CI_CACHE_KEY = [
    "cache key: Linux-pip-{dig}",
    "key: ${{{{ runner.os }}}}-node-${{{{ hashFiles('**/package-lock.json') }}}}",
    "Cache restored from key: node-cache-Linux-x64-npm-{dig}",
    "Cache not found for input keys: setup-uv-1-x86_64-unknown-linux-gnu-3.12-{dig}",
    "Saved cache: bazel-disk-cache-{sha}",
    "\"integrity\": \"sha512-{sri}\"",
    "{dig}  ledger-indexer-{semver}.tar.gz",
    "turbo: cache hit, replaying logs {span}",
]
FILE_PATHS = [
    "~/.ssh/id_ed25519 has the wrong permissions (0644)",
    "/etc/ssl/private/{word}.key is missing after the restore",
    "config/credentials.yml.enc conflicts on every merge",
    "added secrets/*.env to .gitignore",
    "mounted at /var/run/secrets/kubernetes.io/serviceaccount/token",
    "C:\\Users\\{name}\\AppData\\Roaming\\gcloud\\credentials.db is locked",
    "see src/auth/password_reset.py line {n}",
    "kubeconfig is at ~/.kube/config-prod",
    "/run/secrets/db_password is read at startup",
]
FUNC_NAMES = [
    "get_password_hash() uses bcrypt under the hood",
    "`verify_token(token: str) -> Claims` raises on expiry",
    "the bug is in PasswordResetForm.clean_new_password2",
    "check_password(raw_password, encoded) returns False for the migrated users",
    "rename `api_key_header` to `api_key_query`",
    "def rotate_secret(secret_id: str) -> None:",
    "TokenBucket(capacity=100, refill_rate=10)",
    "useAuthToken() returns null on first render",
    "class PasswordField(forms.CharField):",
]
ERROR_MESSAGES = [
    "FATAL:  password authentication failed for user \"{user}\"",
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES)",
    "{user}@{host}: Permission denied (publickey,password).",
    "401 Unauthorized: {{\"error\":\"invalid_token\",\"error_description\":\"The access token expired\"}}",
    "botocore.exceptions.ClientError: An error occurred (InvalidClientTokenId) when calling the "
    "GetCallerIdentity operation: The security token included in the request is invalid.",
    "remote: Invalid username or password.\nfatal: Authentication failed for 'https://github.com/{company}/api.git/'",
    "openai.AuthenticationError: Error code: 401 - Incorrect API key provided",
    "WRONGPASS invalid username-password pair or user is disabled.",
    "sudo: 3 incorrect password attempts",
    "jwt.exceptions.InvalidSignatureError: Signature verification failed",
]
TOKEN_LIMITS = [
    "token limit 4096",
    "max_tokens=1024, temperature=0.2",
    "the context window is 200k tokens, we hit about 150k",
    "prompt_tokens: 1832, completion_tokens: 412, total_tokens: 2244",
    "the tokenizer splits 'password' into 2 tokens",
    "rate limit: 30,000 tokens per minute",
    "token count for the doc is 15,322",
    "enc = tiktoken.encoding_for_model(\"gpt-4o\")",
    "truncate to 8192 tokens before embedding",
]
BASE64_LOGS = [
    "payload={b64log}",
    "decoded the Pub/Sub message data: {b64log}",
    "`echo {b64log} | base64 -d` just prints the event, nothing sensitive",
    "Content-MD5: {md5b64}",
    "Event body (base64): {b64log}",
    "cloud-init user-data is base64: {b64log}",
    "the queue message is `{{\"body\": \"{b64log}\", \"attempt\": 2}}`",
]
HEX_COLORS = [
    "primary is {color}, hover {color2}",
    "background: {color}; color: {color2};",
    "change the badge to {color}",
    "--accent: {color};",
    "the chart uses rgba(31, 111, 235, 0.4) for the area fill",
    "tailwind class bg-[{color}] doesn't get purged?",
    "the brand palette: {color}, {color2}, {color3}",
]
MASKED_VALUES = [
    "token: ghp_****************************",
    "the key ends in ...{word}",
    "password: ••••••••",
    "OPENAI_API_KEY=sk-***redacted***",
    "access key AKIA**************** was deactivated",
    "Authorization: Bearer [REDACTED]",
    "postgres://app:***@db:5432/app",
    "password=<hidden>",
    "secret: '*****'",
]
CUE_WORDS_BENIGN = [
    "can you pin numpy to 1.26.4 until the ABI fix lands?",
    "the primary key is (tenant_id, order_id)",
    "Press any key to continue",
    "pin this message so people find the runbook",
    "the secret sauce is the retry logic, honestly",
    "the token bucket refills 10 tokens per second",
    "the passphrase prompt hangs under tmux",
    "session key rotation happens in the background every hour",
    "Keyboard shortcut: Ctrl+Shift+P, then 'Reload Window'",
    "our PIN pad vendor is Ingenico",
]
NUMERIC_IDS = [
    "ticket #{n} is a dupe of #{n2}",
    "order id 8823{n} never got a webhook",
    "the proxy listens on port 8443 and forwards to 5432",
    "build 20241127.{n} is the last green one",
    "PID {n} was OOM-killed (exit code 137)",
    "timestamp 1732712345 is 2024-11-27 12:59 UTC",
    "PR #{n}: fix password reset redirect",
]

CLEAN_FAMILIES = {
    "pw_mention": PW_MENTION, "pw_policy": PW_POLICY, "env_ref": ENV_REF, "ci_secret_ref": CI_SECRET_REF,
    "placeholder": PLACEHOLDER, "vault_pointer": VAULT_POINTER, "git_sha": GIT_SHA, "uuid_ids": UUID_IDS,
    "docker_digest": DOCKER_DIGEST, "versions": VERSIONS, "gpg_ssh_fingerprint": GPG_SSH_FPR,
    "ci_cache_key": CI_CACHE_KEY, "file_paths": FILE_PATHS, "func_names": FUNC_NAMES,
    "error_messages": ERROR_MESSAGES, "token_limits": TOKEN_LIMITS, "base64_logs": BASE64_LOGS,
    "hex_colors": HEX_COLORS, "masked_values": MASKED_VALUES, "cue_words_benign": CUE_WORDS_BENIGN,
    "numeric_ids": NUMERIC_IDS,
}
