"""Generate the redaction evaluation corpora (issue 34, "How to measure").

    .venv/bin/python -m bench.redaction_eval_gen            # rewrite the two generated files
    .venv/bin/python -m bench.redaction_eval_gen --check    # exit 1 if they differ from a fresh run

Writes, under tests/data/redaction_eval/:

- chat.jsonl: agent-chat turns that state a credential in ordinary language, from
  many phrasing templates per family, with random realistic values;
- catalog.jsonl: rule examples of maintained scanners' catalogs (gitleaks'
  config/gitleaks.toml and its sample-secret forms, TruffleHog detector test
  fixtures, Nosey Parker and Kingfisher rule examples, GitGuardian's generic
  detector docs) with random values of each documented format.

clean_dev.jsonl (real developer prose, no credential) is not generated: it is
copied from public issue threads and pages, one excerpt a line with its address.

Everything here is written from the public format facts and phrasings, never
from the redactor's rules (redaction/ is not read). One line:
{"text", "secrets": [exact substrings, every occurrence must be masked],
 "family", "template", "split": "tune"|"heldout", "source"} and, where a URL's
user part is a token, "keep": [substrings that must survive]. Catalog lines add
"vendor" and "catalog" (the catalog the format comes from).

Splits: chat holds out whole templates (every 4th of each family) and whole
families (HELDOUT_FAMILIES); catalog holds out whole vendors (a hash of the
vendor's name), so a format tuned on never scores in the held-out figures.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import re
import string
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "redaction_eval"
SEED = 20270334
SAMPLES_PER_TEMPLATE = 8
HELDOUT_FAMILIES = ("pgpass", "bytes_key", "grouped_token")

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
B32 = UPPER + "234567"


# ---------------------------------------------------------------------------
# value generators
# ---------------------------------------------------------------------------

class Gen:
    """Random realistic values from one seeded generator."""

    WORDS = ("maple", "orbit", "lantern", "fossil", "ember", "cobalt", "willow", "harbor", "quartz", "falcon",
             "meadow", "cinder", "velvet", "saffron", "glacier", "tundra", "pepper", "nimbus", "copper", "juniper",
             "marble", "thistle", "walnut", "zephyr", "sparrow", "granite", "lotus", "violet", "canyon", "ripple")
    NAMES = ("jsmith", "ana.garcia", "deploy", "admin", "svc_backup", "mkowalski", "lena", "ops", "root", "ci-bot",
             "j.doe", "priya", "tomas", "grafana", "postgres", "app_user", "reporting", "wei.chen", "nora", "build")
    HOSTS = ("db.internal.acme.io", "10.20.4.17", "staging-db-02", "vpn.northwind.example", "nas.home.lan",
             "mail.contoso.net", "jump01.prod.corp", "192.168.1.40", "pg-main.eu-west-1.rds.amazonaws.com",
             "router.local", "build.teamcity.example.org", "ftp.partner-portal.com", "10.0.3.12", "grafana.ops.lan")
    SERVICES = ("the staging database", "the VPN", "Grafana", "the NAS", "Jenkins", "the admin panel", "the router",
                "the SFTP box", "the prod Postgres", "the wifi", "the Kibana UI", "the test tenant", "RabbitMQ",
                "the Windows jump host", "pgAdmin", "the mail relay")
    SYMBOLS = "!@#$%^&*-_+=?."

    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def s(self, alphabet: str, n: int) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def mixed(self, alphabet: str, n: int) -> str:
        """n chars of alphabet with at least one upper, lower and digit when the alphabet has them."""
        while True:
            v = self.s(alphabet, n)
            if n < 8 or ((not any(c in alphabet for c in UPPER) or any(c in UPPER for c in v))
                         and (not any(c in alphabet for c in LOWER) or any(c in LOWER for c in v))
                         and (not any(c in alphabet for c in DIGITS) or any(c in DIGITS for c in v))):
                return v

    def hex(self, n: int) -> str:
        return self.s(HEX, n)

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{self.r.choice('89ab')}{h[17:20]}-{h[20:]}"

    def b64bytes(self, n: int, urlsafe: bool = False, pad: bool = True) -> str:
        raw = bytes(self.r.getrandbits(8) for _ in range(n))
        v = base64.urlsafe_b64encode(raw).decode() if urlsafe else base64.b64encode(raw).decode()
        return v if pad else v.rstrip("=")

    def password(self) -> str:
        """Passwords people pick or a manager generates (never a placeholder)."""
        kind = self.r.randrange(6)
        sym = self.r.choice(self.SYMBOLS)
        if kind == 0:   # word + year + symbol
            return f"{self.r.choice(self.WORDS).capitalize()}{self.r.randint(1970, 2029)}{sym}"
        if kind == 1:   # generated, long
            return self.mixed(ALNUM + "!@#%^&*-_+=", self.r.randint(14, 22))
        if kind == 2:   # passphrase-ish
            w = self.r.sample(self.WORDS, 3)
            return f"{w[0]}-{w[1].capitalize()}-{self.r.randint(2, 99)}-{w[2]}"
        if kind == 3:   # short mixed
            return self.mixed(ALNUM + "#$%!", self.r.randint(9, 12))
        if kind == 4:   # leet
            w = self.r.choice(self.WORDS).capitalize().replace("a", "@").replace("o", "0").replace("e", "3")
            return f"{w}{sym}{self.r.randint(10, 999)}"
        return self.mixed(ALNUM, self.r.randint(16, 24))

    def passphrase(self) -> str:
        w = self.r.sample(self.WORDS, 4)
        sep = self.r.choice([" ", "-", ".", "_"])
        return sep.join(w[:3]) + sep + str(self.r.randint(10, 9999))

    def user(self) -> str:
        return self.r.choice(self.NAMES)

    def host(self) -> str:
        return self.r.choice(self.HOSTS)

    def service(self) -> str:
        return self.r.choice(self.SERVICES)

    def token(self) -> str:
        """A credential-shaped token, with or without a vendor prefix."""
        kind = self.r.randrange(8)
        if kind == 0:
            return "ghp_" + self.mixed(ALNUM, 36)
        if kind == 1:
            return "sk-proj-" + self.s(B64URL, 74) + "T3BlbkFJ" + self.s(B64URL, 74)
        if kind == 2:
            return "xoxb-" + self.s(DIGITS, 12) + "-" + self.s(DIGITS, 13) + "-" + self.mixed(ALNUM, 24)
        if kind == 3:
            return "glpat-" + self.s(B64URL, 20)
        if kind == 4:
            return self.hex(40)
        if kind == 5:
            return self.mixed(ALNUM, 32)
        if kind == 6:
            return "sk_live_" + self.mixed(ALNUM, 24)
        return "dop_v1_" + self.hex(64)

    def totp_seed(self, n: int = 32) -> str:
        return self.s(B32, n)

    def fmt(self, spec: str) -> str:
        """Expand a format spec: literal text with {A36} (alnum), {a32} (lower alnum), {U20}
        (upper alnum), {h40} (hex), {H32} (upper hex), {d10} (digits), {b43} (base64 chars),
        {u43} (base64url chars), {B16} (base32), {l34} (letters), {w82} (word chars),
        {uuid}, {UUID}, {b64:N} (N random bytes, base64) and {rep:X:N} (X repeated N times)."""

        def one(m: re.Match) -> str:
            tag = m.group(1)
            if tag == "uuid":
                return self.uuid()
            if tag == "UUID":
                return self.uuid().upper()
            if tag.startswith("b64:"):
                return self.b64bytes(int(tag[4:]))
            if tag.startswith("rep:"):
                _, ch, n = tag.split(":")
                return ch * int(n)
            kind, n = tag[0], int(tag[1:])
            alphabet = {"A": ALNUM, "a": LOWER + DIGITS, "U": UPPER + DIGITS, "h": HEX, "H": HEX.upper(),
                        "d": DIGITS, "b": B64, "u": B64URL, "B": B32, "l": UPPER + LOWER,
                        "Q": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
                        "w": ALNUM + "_"}[kind]
            return self.mixed(alphabet, n) if kind in "AUaub" else self.s(alphabet, n)

        return re.sub(r"\{(uuid|UUID|b64:\d+|rep:.:\d+|[AaUhHdbuBlwQ]\d+)\}", one, spec)


def pairs(groups: list[str]) -> list[str]:
    """Secrets of a grouped read-out: consecutive pairs of groups, so that any two groups left
    in the output count as a leak."""
    out = [" ".join(groups[i:i + 2]) for i in range(0, len(groups) - 1, 2)]
    if len(groups) % 2:
        out[-1] = out[-1] + " " + groups[-1]
    return out


# ---------------------------------------------------------------------------
# chat families: (template id suffix, template) with {placeholders}
# ---------------------------------------------------------------------------

def fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


FILLER_USER = ("can you check why the deploy failed?", "the nightly job is red again", "ok, next step?",
               "thanks, that worked", "I'm on the release branch now", "what did you change in the config?")
FILLER_ASSISTANT = ("I'll look at the logs first.", "Done, the migration ran.", "Let me know if it fails again.",
                    "Noted.", "Restarting the service now.", "I updated the README accordingly.")


def chat_families(g: Gen) -> dict[str, dict]:
    """Each family: values(g) -> dict, secrets: keys of secret values, templates: list."""
    R = g.r
    F: dict[str, dict] = {}

    F["pw_sentence"] = dict(
        source="written for issue 34: a login given as user and password in a sentence",
        values=lambda: dict(user=g.user(), pw=g.password(), host=g.host(), svc=g.service()),
        secrets=("pw",),
        templates=[
            "You can log into {svc} as {user} with password {pw}.",
            "The account for {host} is {user} and the password is {pw}",
            "login {user} / pass {pw} on {host}",
            "Use user {user}, password {pw} for {svc}, it's only for this week.",
            "For {svc} the creds are {user} and {pw}.",
            "ssh to {host} with {user}, the pw is {pw}",
            "I created a user {user} on {host}; its password: {pw} (please change it after first login)",
            "Credentials for {svc}: username {user}, password {pw}.",
            "Sign in to {svc} with {user} and {pw} — MFA is off on that one.",
            "{user} is the login for {host}, and {pw} is what I set as its password.",
            "Connect with `psql -h {host} -U {user}` and enter {pw} when it prompts.",
            "The router admin is {user}, pass is {pw}, don't share it outside the team.",
        ])

    F["pw_cue_after"] = dict(
        source="written for issue 34: a password whose cue comes after the value",
        values=lambda: dict(user=g.user(), pw=g.password(), host=g.host(), svc=g.service()),
        secrets=("pw",),
        templates=[
            "{pw} is the password for {svc}.",
            "`{pw}` — that's the new root password on {host}.",
            "Try {pw}, I think that's what {user} uses as password there.",
            "{pw} should work as the {svc} password now.",
            "It's {pw}. That's the wifi password, the network is GuestNet.",
            "{pw} (password) for {user}@{host}",
            "I set it to {pw}, that's the admin password until Friday.",
            "\"{pw}\" was the old password for {svc}, it still works on {host}.",
            "Paste {pw} into the password field of {svc} and you're in.",
            "{user} / {pw} — those are the login and password for {svc}.",
        ])

    F["pw_temp"] = dict(
        source="written for issue 34: a temporary password mentioned in passing",
        values=lambda: dict(user=g.user(), pw=g.password(), host=g.host(), svc=g.service()),
        secrets=("pw",),
        templates=[
            "I reset {user}'s account, temp password {pw}, they'll be asked to change it.",
            "Gave the contractor a temporary password ({pw}) for {svc}.",
            "Reset done. Temporary pw: {pw}",
            "The one-time password for the new hire is {pw}; it expires in 24h.",
            "FYI the initial password for {svc} is {pw}, rotate it after setup.",
            "I'll set a throwaway password, {pw}, just so the installer can finish on {host}.",
            "Set {user} to a temp pass of {pw} while we debug the SSO issue.",
            "New laptop: local admin is {user} with {pw} as a temporary password.",
            "Before the demo I changed the shared login's password to {pw} for today only.",
            "Use the interim passcode {pw} until IT sends the real one.",
        ])

    F["user_colon_pw"] = dict(
        source="written for issue 34: user:password pairs in running text",
        values=lambda: dict(user=g.user(), pw=g.password().replace(":", "!"), host=g.host(), svc=g.service()),
        secrets=("pw",),
        templates=[
            "the basic auth for {svc} is {user}:{pw} btw",
            "Logged in with {user}:{pw} and the dashboard loads fine.",
            "creds {user}:{pw}",
            "Try `{user}:{pw}` against {host}, that pair worked yesterday.",
            "HTTP auth on the staging site: {user}:{pw}",
            "We still have {user}:{pw} hard-coded in the cron script on {host}.",
            "The proxy wants {user}:{pw} (yes, plain basic auth).",
            "I tested {user}:{pw} — 401, so the password must have been rotated.",
            "In the old wiki the FTP login was listed as {user}:{pw}.",
            "Default pair for that appliance is {user}:{pw}, we never changed it.",
        ])

    i18n = [
        ("de", "Das Passwort für {svc} ist {pw}."), ("de", "Benutzer {user}, Kennwort: {pw}"),
        ("de", "Ich habe {user} ein neues Passwort gegeben: {pw}"),
        ("fr", "Le mot de passe de {svc} est {pw}."), ("fr", "Identifiant {user}, mot de passe : {pw}"),
        ("fr", "Je t'envoie le mdp : {pw} (compte {user})"),
        ("es", "La contraseña de {svc} es {pw}."), ("es", "Usuario {user} y clave {pw} para entrar."),
        ("es", "Te paso la contraseña temporal: {pw}"),
        ("pt", "A senha do {svc} é {pw}."), ("pt", "Usuário {user}, senha: {pw}"),
        ("pt", "Coloquei a senha provisória {pw} para o {user}."),
        ("it", "La password di {svc} è {pw}."), ("it", "Utente {user}, parola d'ordine {pw}"),
        ("it", "Ti giro la password temporanea: {pw}"),
        ("nl", "Het wachtwoord voor {svc} is {pw}."), ("nl", "Gebruiker {user}, wachtwoord: {pw}"),
        ("nl", "Ik heb het tijdelijke wachtwoord op {pw} gezet."),
        ("pl", "Hasło do {svc} to {pw}."), ("sv", "Lösenordet till {svc} är {pw}."),
        ("tr", "{svc} şifresi {pw}"), ("ru", "Пароль от {svc}: {pw}"),
    ]
    F["pw_i18n"] = dict(
        source="written for issue 34: passwords stated in German, French, Spanish, Portuguese, Italian, Dutch and more",
        values=lambda: dict(user=g.user(), pw=g.password(), host=g.host(), svc=g.service()),
        secrets=("pw",),
        templates=[t for _, t in i18n],
        template_names=[f"{lang}{i}" for i, (lang, _) in enumerate(i18n)])

    F["pw_answer"] = dict(
        source="written for issue 34: an answer giving the password the previous message asked for (one turn)",
        values=lambda: dict(user=g.user(), pw=g.password(), host=g.host(), svc=g.service(), tok=g.token()),
        secrets=("pw",),
        templates=[
            "User: what's the password for {svc}?\n\nAssistant: It's {pw}",
            "User: {pw}\n\nAssistant: Thanks — I'm logged into {svc} now as {user}.",
            "User: remind me the {host} root password\n\nAssistant: {pw}",
            "User: what did you set the admin password to?\n\nAssistant: I set it to `{pw}` on {host}.",
            "Assistant: I need the password for {user} on {host} to continue.\n\nUser: {pw}",
            "Assistant: Which passphrase should I use for the backup archive?\n\nUser: use {pw}",
            "User: do you remember the db password?\n\nAssistant: Yes — `{pw}` (user {user}).",
            "Assistant: What's the wifi password here?\n\nUser: it's {pw}, network Office5G",
            "User: and the password?\n\nAssistant: {pw} — same as for {svc}.",
            "Assistant: Please give me the sudo password for {user}.\n\nUser: {pw} (don't store it)",
        ])

    def totp_values() -> dict[str, str]:
        seed = g.totp_seed(R.choice([16, 32]))
        groups = [seed[i:i + 4].lower() for i in range(0, len(seed), 4)]
        issuer = R.choice(["GitHub", "AWS", "Okta", "Google", "Proxmox", "Bitwarden", "GitLab", "Cloudflare"])
        return dict(seed=seed, spaced=" ".join(groups), issuer=issuer, user=g.user(),
                    uri=f"otpauth://totp/{issuer}:{g.user()}?secret={seed}&issuer={issuer}")
    F["totp"] = dict(
        source="written for issue 34: TOTP seeds and 2FA setup keys (RFC 6238 base32 secrets, otpauth URIs)",
        values=totp_values,
        secrets=("seed",),
        templates=[
            "The 2FA setup key for the shared {issuer} account is {seed}",
            "TOTP seed: {seed} (add it to your authenticator)",
            "If you can't scan the QR code, enter this key manually: {seed}",
            "Here's the MFA secret for {user}: {seed}",
            "I saved the authenticator secret ({seed}) in the team vault too.",
            "{issuer} 2FA backup: secret={seed}",
            "Setup key → {seed} — type it into Google Authenticator under {issuer}.",
            "the otp seed is {seed}, time-based, 6 digits, 30s",
            "Add this to 1Password as a one-time password: {uri}",
            "QR code didn't render, so here's the URI: {uri}",
        ],
        secret_override={8: ("seed",), 9: ("seed",)})

    def spaced_values() -> dict[str, str]:
        v = totp_values()
        v["pairs"] = pairs(v["spaced"].split(" "))
        return v
    F["totp_spaced"] = dict(
        source="written for issue 34: 2FA setup keys shown the way sites display them, in groups of four",
        values=spaced_values,
        secrets=("pairs",),
        templates=[
            "The setup key is {spaced}",
            "{issuer} shows this key for manual entry: {spaced}",
            "2FA secret (spaces don't matter): {spaced}",
            "Your two-factor key: {spaced} — keep it with the recovery codes.",
            "Authenticator key for {user}: {spaced}",
            "Can't scan? Enter {spaced} in your app.",
            "seed = \"{spaced}\"",
            "MFA key for the break-glass account: {spaced}",
        ])

    def codes_values() -> dict[str, str]:
        style = R.randrange(4)
        n = R.choice([6, 8, 10])
        if style == 0:
            codes = [g.hex(5) + "-" + g.hex(5) for _ in range(n)]
        elif style == 1:
            codes = [g.s(DIGITS, 4) + " " + g.s(DIGITS, 4) for _ in range(n)]
        elif style == 2:
            codes = [g.s(UPPER + DIGITS, 4) + "-" + g.s(UPPER + DIGITS, 4) + "-" + g.s(UPPER + DIGITS, 4)
                     for _ in range(n)]
        else:
            codes = [g.s(LOWER + DIGITS, 10) for _ in range(n)]
        return dict(codes=codes, svc=R.choice(["GitHub", "Google", "Discord", "Proton", "the AWS root account",
                                               "Bitwarden", "GitLab", "Microsoft"]),
                    list_nl="\n".join(codes), list_dash="\n".join("- " + c for c in codes),
                    list_inline=", ".join(codes), list_num="\n".join(f"{i + 1}. {c}" for i, c in enumerate(codes)),
                    first=codes[0])
    F["recovery_codes"] = dict(
        source="written for issue 34: recovery and backup code lists after a cue",
        values=codes_values,
        secrets=("codes",),
        templates=[
            "Recovery codes for {svc}:\n{list_nl}",
            "Here are the backup codes, store them somewhere safe:\n{list_dash}",
            "{svc} backup codes: {list_inline}",
            "I regenerated the 2FA recovery codes:\n\n```\n{list_nl}\n```",
            "Emergency codes (each works once):\n{list_num}",
            "User: where are the recovery codes?\n\nAssistant: Here they are:\n{list_dash}",
            "Saving these for {svc} in case the phone dies — {list_inline}",
            "Backup verification codes\n{list_nl}\nKeep these somewhere safe.",
            "codes: {list_inline}",
        ])

    def table_values() -> dict[str, str]:
        pw1, pw2, key = g.password().replace("|", "!").replace(",", "."), g.password().replace("|", "!").replace(",", "."), g.mixed(ALNUM, 32)
        return dict(pw1=pw1, pw2=pw2, key=key, u1=g.user(), u2=g.user(), h1=g.host(), h2=g.host(),
                    tok=g.token())
    F["table_kv"] = dict(
        source="written for issue 34: markdown tables, CSV and key/value listings with a password or key column",
        values=table_values,
        secrets=("pw1", "pw2"),
        templates=[
            "| host | user | password |\n|---|---|---|\n| {h1} | {u1} | {pw1} |\n| {h2} | {u2} | {pw2} |",
            "| Service | Login | Pass |\n| --- | --- | --- |\n| {h1} | {u1} | `{pw1}` |\n| {h2} | {u2} | `{pw2}` |",
            "name,url,username,password\n{h1},https://{h1}/login,{u1},{pw1}\n{h2},https://{h2}/,{u2},{pw2}",
            "host;user;pwd\n{h1};{u1};{pw1}\n{h2};{u2};{pw2}",
            "$ vault kv get secret/app/db\n====== Data ======\nKey         Value\n---         -----\npassword    {pw1}\nusername    {u1}\nreplica_pw  {pw2}",
            "$ op item get \"{h1}\" --fields username,password,backup_password\n{u1},{pw1},{pw2}",
            "┌──────────────┬──────────────────────┐\n│ NAME         │ VALUE                │\n├──────────────┼──────────────────────┤\n│ DB_PASSWORD  │ {pw1} │\n│ SMTP_PASS    │ {pw2} │\n└──────────────┴──────────────────────┘",
            "Key            Value\nadmin_user     {u1}\nadmin_pass     {pw1}\nbackup_pass    {pw2}",
            "$ aws secretsmanager get-secret-value --secret-id prod/db --query SecretString --output text\n{\"username\":\"{u1}\",\"password\":\"{pw1}\",\"ro_password\":\"{pw2}\"}",
            "| env | DB password | API key |\n|-----|-------------|---------|\n| staging | {pw1} | {key} |\n| prod | {pw2} | {tok} |",
        ],
        secret_override={9: ("pw1", "pw2", "key", "tok")})

    def split_values() -> dict[str, str]:
        tok = R.choice([g.mixed(ALNUM, 48), "ghp_" + g.mixed(ALNUM, 36), g.b64bytes(36), "sk-" + g.mixed(ALNUM, 48),
                        g.hex(64)])
        cut = len(tok) // 2 + R.randint(-3, 3)
        return dict(tok=tok, a=tok[:cut], b=tok[cut:], var=R.choice(["API_TOKEN", "token", "secretKey",
                                                                    "AUTH_SECRET", "signing_key"]))
    F["split_code"] = dict(
        source="written for issue 34: a secret continued on the next line of a code block",
        values=split_values,
        secrets=("a", "b"),
        templates=[
            "```python\n{var} = (\"{a}\"\n    \"{b}\")\n```",
            "```js\nconst {var} = \"{a}\" +\n  \"{b}\";\n```",
            "```bash\nexport {var}={a}\\\n{b}\n```",
            "```\n{var}: >-\n  {a}\n  {b}\n```",
            "```go\nvar {var} = \"{a}\" +\n\t\"{b}\"\n```",
            "```java\nString {var} = \"{a}\"\n    + \"{b}\";\n```",
            "The token wrapped in my terminal:\n```\n{a}\n{b}\n```",
            "```ini\n{var} = {a}\\\n    {b}\n```",
        ])

    def aws_values() -> dict[str, str]:
        return dict(kid=R.choice(["AKIA", "ASIA"]) + g.s(B32, 16), sec=g.mixed(ALNUM + "+/", 40),
                    user=R.choice(["ci-deployer", "terraform", "s3-backup", "jenkins", "lambda-ops"]))
    F["aws_prose"] = dict(
        source="written for issue 34: the AWS secret access key stated in prose after its key id",
        values=aws_values,
        secrets=("sec",),
        templates=[
            "The IAM user {user} has key id {kid} and the secret is {sec}",
            "AWS creds for {user}: {kid} / {sec}",
            "access key {kid}, secret {sec} — scoped to the backup bucket only",
            "Use {kid} with secret access key {sec}.",
            "key id: {kid}\nsecret: {sec}",
            "I rotated {user}'s keys; new pair is {kid} and {sec}.",
            "For the CLI profile: id {kid}, key {sec}, region eu-central-1.",
            "Here you go: {kid} {sec}",
            "The access key {kid} belongs to {user}; its secret part is {sec}.",
            "aws configure → AWS Access Key ID [{kid}], AWS Secret Access Key [{sec}]",
        ])

    def key_values() -> dict[str, str]:
        kind = R.choice(["OPENSSH PRIVATE KEY", "RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "EC PRIVATE KEY"])
        blob = g.b64bytes(R.randint(240, 420))
        width = 70 if kind.startswith("OPENSSH") else 64
        body = "\n".join(blob[i:i + width] for i in range(0, len(blob), width))
        return dict(key=f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----", body=body,
                    pp=g.passphrase(), user=g.user(), host=g.host())
    F["passphrase_after_key"] = dict(
        source="written for issue 34: a passphrase stated after a private key block",
        values=key_values,
        secrets=("body", "pp"),
        templates=[
            "{key}\n\nThe passphrase is {pp}",
            "Here's the deploy key:\n```\n{key}\n```\npassphrase: {pp}",
            "{key}\npass phrase = {pp}",
            "I generated a key for {user}@{host}:\n{key}\nIt's protected with \"{pp}\".",
            "```\n{key}\n```\nUnlock it with {pp} when ssh-agent asks.",
            "{key}\n\n(key passphrase → {pp})",
            "User: paste the key\n\nAssistant: {key}\n\nThe passphrase is `{pp}`.",
            "{key}\nPassphrase for the above: {pp}",
        ])

    F["odd_case"] = dict(
        source="written for issue 34: credential words in odd case",
        values=lambda: dict(pw=g.password(), tok=g.token(), user=g.user(), svc=g.service()),
        secrets=("pw",),
        templates=[
            "PaSsWoRd: {pw}",
            "PASSWORD IS {pw}",
            "the PassWord for {svc} = {pw}",
            "pAsS: {pw}",
            "Api_KeY={tok}",
            "TOKEN iS {tok}",
            "SeCrEt: {tok}",
            "DB_PassWord := \"{pw}\"",
            "The ADMIN PASS for {svc} Is {pw}",
            "pWd → {pw}",
        ],
        secret_override={4: ("tok",), 5: ("tok",), 6: ("tok",)})

    def grouped_values() -> dict[str, str]:
        raw = R.choice([g.mixed(ALNUM, 36), g.hex(40), g.mixed(UPPER + DIGITS, 30), g.mixed(ALNUM, 32)])
        size = R.choice([5, 6, 8])
        groups = [raw[i:i + size] for i in range(0, len(raw), size)]
        if len(groups[-1]) < 3:
            groups[-2] += groups.pop()
        prefix = R.choice(["", "ghp_", "sk-", ""])
        if prefix:
            groups[0] = prefix + groups[0]
        return dict(spaced=" ".join(groups), dashed="-".join(groups), pairs=pairs(groups),
                    dpairs=["-".join(groups[i:i + 2]) for i in range(0, len(groups) - 1, 2)],
                    svc=g.service())
    F["grouped_token"] = dict(
        source="written for issue 34: a token read out in groups with spaces",
        values=grouped_values,
        secrets=("pairs",),
        templates=[
            "I'll read the token out in chunks: {spaced}",
            "token (spaces added so it's readable): {spaced}",
            "The API key is {spaced} — remove the spaces.",
            "For {svc} the key is: {spaced}",
            "Copying it from the screen: {spaced}",
            "User: can you read me the key?\n\nAssistant: Sure: {spaced}",
            "licence/API key {dashed}",
            "secret, in blocks: {spaced}",
        ],
        secret_override={6: ("dpairs",)})

    def b64_values() -> dict[str, str]:
        tok = g.token()
        enc = base64.b64encode(tok.encode()).decode()
        return dict(tok=tok, enc=enc, var=R.choice(["TOKEN", "API_KEY", "GH_TOKEN", "SECRET"]))
    F["b64_pipe"] = dict(
        source="written for issue 34: a base64-encoded token piped to base64 -d",
        values=b64_values,
        secrets=("enc",),
        templates=[
            "echo {enc} | base64 -d",
            "export {var}=$(echo '{enc}' | base64 --decode)",
            "Decode it with `echo \"{enc}\" | base64 -d > token.txt`",
            "{var}=`echo {enc} | base64 -D`",
            "printf %s {enc} | base64 -d | gh auth login --with-token",
            "the value in the secret is base64: {enc} (pipe it through base64 -d)",
            "$ echo -n {enc} | base64 -di\n",
            "python -c \"import base64;print(base64.b64decode('{enc}').decode())\"",
        ])

    def url_values() -> dict[str, str]:
        tok = R.choice([g.mixed(ALNUM, 32), g.b64bytes(24), "ghp_" + g.mixed(ALNUM, 36), g.mixed(ALNUM + "/+", 40)])
        pw = g.password()
        inner = f"https://api.partner.example/v2/export?api_key={tok}&format=csv"
        inner_pw = f"https://files.example.org/dl?user={g.user()}&password={pw}"
        return dict(enc_tok=urllib.parse.quote(tok, safe=""), enc_pw=urllib.parse.quote(pw, safe=""),
                    redirect=urllib.parse.quote(inner, safe=""), redirect_pw=urllib.parse.quote(inner_pw, safe=""),
                    dbl=urllib.parse.quote(urllib.parse.quote(inner, safe=""), safe=""),
                    dbl_tok=urllib.parse.quote(urllib.parse.quote(tok, safe=""), safe=""))
    F["urlenc_redirect"] = dict(
        source="written for issue 34: URL-encoded secrets inside an encoded redirect URL",
        values=url_values,
        secrets=("enc_tok",),
        templates=[
            "https://login.example.com/sso?next={redirect}",
            "The callback was https://app.example.com/auth/cb?return_to={redirect}&state=af3e",
            "Redirecting to /oauth/continue?redirect_uri={redirect}",
            "302 Location: https://gw.example.net/r?u={redirect}",
            "https://l.example.com/click?url={redirect_pw}",
            "Clicked https://track.example.io/c?dest={dbl}",
            "GET /proxy?target={redirect} HTTP/1.1",
            "bookmark: https://portal.example.com/#/go?to={redirect}",
        ],
        secret_override={4: ("enc_pw",), 5: ("dbl_tok",)})

    def php_values() -> dict[str, str]:
        return dict(pw=g.password().replace("'", "!"), salt=g.s(ALNUM + "!@#%^&*()-_[]{}<>~+=,.;:/?|", 64),
                    key=g.mixed(ALNUM, 40), user=g.user(), host=g.host())
    F["php_define"] = dict(
        source="written for issue 34: credentials in PHP define() calls (wp-config.php style)",
        values=php_values,
        secrets=("pw",),
        templates=[
            "define('DB_PASSWORD', '{pw}');",
            "define( 'DB_PASSWORD', '{pw}' );\ndefine( 'DB_HOST', '{host}' );",
            "define(\"SMTP_PASS\", \"{pw}\");",
            "define('AUTH_KEY',         '{salt}');",
            "define('SECURE_AUTH_SALT', '{salt}');",
            "define('STRIPE_SECRET', '{key}');",
            "<?php\ndefine('DB_USER', '{user}');\ndefine('DB_PASS', '{pw}');",
            "In wp-config.php I have define('DB_PASSWORD', '{pw}'); is that why it fails?",
            "define('MAILGUN_API_KEY', '{key}');",
            "define ('ADMIN_PASSWORD','{pw}');",
        ],
        secret_override={3: ("salt",), 4: ("salt",), 5: ("key",), 8: ("key",)})

    def pgpass_values() -> dict[str, str]:
        return dict(pw=g.password().replace(":", "!").replace("\\", "/"), pw2=g.password().replace(":", "!"),
                    user=g.user(), host=g.host().split(".")[0] + ".db.internal", db=R.choice(["app", "analytics",
                                                                                              "*", "billing"]))
    F["pgpass"] = dict(
        source="written for issue 34: .pgpass lines (hostname:port:database:username:password)",
        values=pgpass_values,
        secrets=("pw",),
        templates=[
            "{host}:5432:{db}:{user}:{pw}",
            "~/.pgpass:\n{host}:5432:{db}:{user}:{pw}",
            "$ cat ~/.pgpass\nlocalhost:5432:*:postgres:{pw}\n{host}:6432:{db}:{user}:{pw2}",
            "echo '{host}:5432:{db}:{user}:{pw}' >> ~/.pgpass && chmod 600 ~/.pgpass",
            "The pgpass entry is `*:*:*:{user}:{pw}`",
            "# replica\n{host}:5433:replication:{user}:{pw}",
            "PGPASSFILE points to a file with {host}:5432:{db}:{user}:{pw}",
            "I added `{host}:*:*:{user}:{pw}` to .pgpass on the bastion.",
        ],
        secret_override={2: ("pw", "pw2")})

    def cli_values() -> dict[str, str]:
        return dict(pw=g.password().replace("'", "!").replace("\"", "!").replace(" ", "_"), user=g.user(),
                    host=g.host())
    F["cli_pw_flags"] = dict(
        source="written for issue 34: password flags of less common command-line tools",
        values=cli_values,
        secrets=("pw",),
        templates=[
            "sshpass -p '{pw}' ssh {user}@{host}",
            "redis-cli -h {host} -a {pw} --no-auth-warning",
            "mongosh \"mongodb://{host}:27017\" -u {user} -p '{pw}' --authenticationDatabase admin",
            "smbclient //{host}/share -U {user}%{pw}",
            "xfreerdp /v:{host} /u:{user} /p:{pw} /cert:ignore",
            "openssl pkcs12 -export -in cert.pem -inkey key.pem -out out.p12 -passout pass:{pw}",
            "zip -P {pw} backup.zip dump.sql",
            "7z a -p{pw} -mhe=on archive.7z ./secrets",
            "keytool -importkeystore -srckeystore a.jks -srcstorepass {pw} -destkeystore b.p12",
            "ldapsearch -x -H ldap://{host} -D \"cn={user},dc=corp,dc=lan\" -w {pw} -b dc=corp,dc=lan",
            "sqlcmd -S {host} -U {user} -P {pw} -Q \"SELECT 1\"",
            "ipmitool -I lanplus -H {host} -U {user} -P {pw} chassis status",
            "lftp -u {user},{pw} sftp://{host}",
            "net use \\\\{host}\\share /user:CORP\\{user} {pw}",
            "wget --user={user} --password={pw} https://{host}/backup.tar.gz",
            "htpasswd -b -c /etc/nginx/.htpasswd {user} {pw}",
            "rabbitmqctl add_user {user} {pw}",
            "influx -username {user} -password {pw} -host {host}",
        ])

    def setcli_values() -> dict[str, str]:
        return dict(tok=g.token(), pw=g.password().replace("'", "!").replace("\"", "!").replace(" ", "_"),
                    name=R.choice(["API_KEY", "STRIPE_SECRET", "DATABASE_PASSWORD", "NPM_TOKEN", "SENTRY_AUTH_TOKEN",
                                   "OPENAI_API_KEY", "SLACK_BOT_TOKEN"]))
    F["secret_set_cli"] = dict(
        source="written for issue 34: secret-setting CLI commands of hosting and CI tools",
        values=setcli_values,
        secrets=("tok",),
        templates=[
            "gh secret set {name} --body \"{tok}\"",
            "kubectl create secret generic app-secrets --from-literal=password='{pw}' --from-literal=user=app",
            "heroku config:set {name}={tok} -a my-app",
            "fly secrets set {name}={tok}",
            "echo -n '{tok}' | vercel env add {name} production",
            "aws ssm put-parameter --name /prod/{name} --type SecureString --value '{tok}'",
            "az keyvault secret set --vault-name kv-prod --name db-password --value '{pw}'",
            "printf '%s' '{tok}' | gcloud secrets versions add {name} --data-file=-",
            "doppler secrets set {name}=\"{tok}\"",
            "netlify env:set {name} {tok}",
            "echo '{tok}' | npx wrangler secret put {name}",
            "vault kv put secret/app password='{pw}' user=app",
            "supabase secrets set {name}={tok}",
            "railway variables --set \"{name}={tok}\"",
            "docker secret create db_password - <<< '{pw}'",
            "glab variable set {name} --value '{tok}' --masked",
        ],
        secret_override={1: ("pw",), 6: ("pw",), 11: ("pw",), 14: ("pw",)})

    def bytes_values() -> dict[str, str]:
        raw = bytes(R.getrandbits(8) for _ in range(R.choice([16, 24, 32])))
        return dict(esc="".join(f"\\x{b:02x}" for b in raw), hx=raw.hex(), b64=base64.b64encode(raw).decode(),
                    ascii=g.mixed(ALNUM + "!#%&*+-=?@^_", 32),
                    arr=", ".join(f"0x{b:02x}" for b in raw[:16]),
                    arr2=", ".join(f"0x{b:02x}" for b in raw[16:]) or "0x00")
    F["bytes_key"] = dict(
        source="written for issue 34: byte-string keys in code",
        values=bytes_values,
        secrets=("esc",),
        templates=[
            "SECRET_KEY = b'{esc}'",
            "key = bytes.fromhex('{hx}')",
            "const key = Buffer.from('{b64}', 'base64');",
            "var signingKey = []byte(\"{ascii}\")",
            "let key: &[u8] = b\"{ascii}\";",
            "byte[] key = \"{ascii}\".getBytes(StandardCharsets.UTF_8);",
            "app.secret_key = b\"{esc}\"",
            "static const uint8_t kKey[] = { {arr},\n    {arr2} };",
            "FERNET_KEY = base64.urlsafe_b64encode(bytes.fromhex(\"{hx}\"))",
        ],
        secret_override={1: ("hx",), 2: ("b64",), 3: ("ascii",), 4: ("ascii",), 5: ("ascii",), 7: ("arr", "arr2"),
                         8: ("hx",)})

    def urluser_values() -> dict[str, str]:
        tok = R.choice(["ghp_" + g.mixed(ALNUM, 36), "github_pat_" + g.mixed(ALNUM, 22) + "_" + g.mixed(ALNUM, 59),
                        "glpat-" + g.s(B64URL, 20), g.hex(40), "ghs_" + g.mixed(ALNUM, 36)])
        org, repo = R.choice(["acme", "northwind", "tailspin", "fabrikam"]), R.choice(["infra", "api", "web-app", "tools"])
        host = R.choice(["github.com", "gitlab.com", "git.example.com", "bitbucket.org"])
        return dict(tok=tok, host=host, path=f"/{org}/{repo}.git", org=org, repo=repo)
    F["url_token_user"] = dict(
        source="written for issue 34: a token used as a URL's user part (host and path must stay)",
        values=urluser_values,
        secrets=("tok",),
        keep=("host", "path"),
        templates=[
            "git clone https://{tok}@{host}{path}",
            "git remote set-url origin https://oauth2:{tok}@{host}{path}",
            "The CI clones from https://x-access-token:{tok}@{host}{path} and fails on submodules.",
            "pip install git+https://{tok}@{host}{path}@main",
            "remote: https://{tok}:x-oauth-basic@{host}{path}",
            "fatal: unable to access 'https://{tok}@{host}{path}/': The requested URL returned error: 403",
            "[remote \"origin\"]\n\turl = https://gitlab-ci-token:{tok}@{host}{path}",
            "I pushed with `git push https://{tok}@{host}{path} HEAD:main`.",
        ])
    return F


def build_chat(rng: random.Random) -> list[dict]:
    g = Gen(rng)
    fams = chat_families(g)
    rows: list[dict] = []
    for fam, spec in fams.items():
        names = spec.get("template_names") or [f"{i:02d}" for i in range(len(spec["templates"]))]
        for i, tmpl in enumerate(spec["templates"]):
            split = "heldout" if fam in HELDOUT_FAMILIES or i % 4 == 3 else "tune"
            keys = spec.get("secret_override", {}).get(i, spec["secrets"])
            for _ in range(SAMPLES_PER_TEMPLATE):
                vals = spec["values"]()
                flat = {k: v for k, v in vals.items() if isinstance(v, str)}
                text = fill(tmpl, flat)
                # about a third are wrapped as one turn of the indexer's documents (User/Assistant)
                if not text.startswith(("User:", "Assistant:")) and g.r.random() < 0.35:
                    if g.r.random() < 0.5:
                        text = f"User: {g.r.choice(FILLER_USER)}\n\nAssistant: {text}"
                    else:
                        text = f"User: {text}\n\nAssistant: {g.r.choice(FILLER_ASSISTANT)}"
                secrets: list[str] = []
                for k in keys:
                    v = vals[k]
                    secrets.extend(v if isinstance(v, list) else [v])
                row = {"text": text, "secrets": secrets, "family": fam, "template": f"{fam}.{names[i]}",
                       "split": split, "source": spec["source"]}
                if "keep" in spec:
                    row["keep"] = [vals[k] for k in spec["keep"]]
                rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# catalog: vendor formats of maintained scanners' catalogs
# ---------------------------------------------------------------------------

GITLEAKS = "gitleaks/gitleaks config/gitleaks.toml"
TRUFFLEHOG = "trufflesecurity/trufflehog pkg/detectors (detector regex and *_test.go fixture form)"
NOSEY = "praetorian-inc/noseyparker crates/noseyparker/data/default/builtin/rules"
KINGFISHER = "mongodb/kingfisher data/rules"
GITGUARDIAN = "docs.gitguardian.com secrets-detection detectors"
HASHCAT = "praetorian-inc/noseyparker rules/hashes.yml; hashcat example hashes"

# (vendor, kind, value format, cue: name used in a variable / next to the value, catalog, source)
# cue "" = the format has a unique prefix and needs no context.
VENDORS: list[tuple[str, str, str, str, str, str]] = [
    # --- prefixed formats -------------------------------------------------------------------
    ("1password", "secret key", "A3-{U6}-{U11}-{U5}-{U5}-{U5}", "", "gitleaks", GITLEAKS),
    ("1password", "service account token", "ops_eyJ{b64:200}", "", "gitleaks", GITLEAKS),
    ("adobe", "client secret", "p8e-{A32}", "", "gitleaks", GITLEAKS),
    ("age", "secret key", "AGE-SECRET-KEY-1{Q58}", "", "gitleaks", GITLEAKS),
    ("alibaba", "access key id", "LTAI{A20}", "", "gitleaks", GITLEAKS),
    ("anthropic", "api key", "sk-ant-api03-{u93}AA", "", "gitleaks", GITLEAKS),
    ("anthropic", "admin key", "sk-ant-admin01-{u93}AA", "", "gitleaks", GITLEAKS),
    ("artifactory", "api key", "AKCp{A69}", "", "gitleaks", GITLEAKS),
    ("atlassian", "api token", "ATATT3xFfGF0{u174}", "", "gitleaks", GITLEAKS),
    ("aws", "access key id", "AKIA{B16}", "", "gitleaks", GITLEAKS),
    ("azure-ad", "client secret", "{A3}8Q~{A34}", "", "gitleaks", GITLEAKS),
    ("clickhouse", "api secret", "4b1d{A38}", "", "gitleaks", GITLEAKS),
    ("clojars", "deploy token", "CLOJARS_{a60}", "", "gitleaks", GITLEAKS),
    ("cloudflare", "origin ca key", "v1.0-{h24}-{h146}", "", "gitleaks", GITLEAKS),
    ("databricks", "api token", "dapi{h32}", "", "gitleaks", GITLEAKS),
    ("digitalocean", "personal access token", "dop_v1_{h64}", "", "gitleaks", GITLEAKS),
    ("digitalocean", "oauth refresh token", "dor_v1_{h64}", "", "gitleaks", GITLEAKS),
    ("doppler", "personal token", "dp.pt.{A43}", "", "gitleaks", GITLEAKS),
    ("doppler", "service token", "dp.st.prd.{A40}", "", "trufflehog", TRUFFLEHOG),
    ("duffel", "api token", "duffel_live_{u43}", "", "gitleaks", GITLEAKS),
    ("dynatrace", "api token", "dt0c01.{U24}.{U64}", "", "gitleaks", GITLEAKS),
    ("easypost", "api key", "EZAK{A54}", "", "gitleaks", GITLEAKS),
    ("facebook", "page access token", "EAAC{A120}", "", "gitleaks", GITLEAKS),
    ("flutterwave", "secret key", "FLWSECK_TEST-{h32}-X", "", "gitleaks", GITLEAKS),
    ("fly.io", "access token", "fo1_{u43}", "", "gitleaks", GITLEAKS),
    ("frame.io", "api token", "fio-u-{u64}", "", "gitleaks", GITLEAKS),
    ("google-cloud", "api key", "AIza{u35}", "", "gitleaks", GITLEAKS),
    ("github", "personal access token", "ghp_{A36}", "", "gitleaks", GITLEAKS),
    ("github", "fine-grained token", "github_pat_{A22}_{A59}", "", "gitleaks", GITLEAKS),
    ("github", "app token", "ghs_{A36}", "", "gitleaks", GITLEAKS),
    ("github", "oauth token", "gho_{A36}", "", "gitleaks", GITLEAKS),
    ("gitlab", "personal access token", "glpat-{u20}", "", "gitleaks", GITLEAKS),
    ("gitlab", "runner token", "glrt-{u20}", "", "gitleaks", GITLEAKS),
    ("gitlab", "deploy token", "gldt-{u20}", "", "gitleaks", GITLEAKS),
    ("gitlab", "pipeline trigger token", "glptt-{h40}", "", "gitleaks", GITLEAKS),
    ("grafana", "service account token", "glsa_{A32}_{h8}", "", "gitleaks", GITLEAKS),
    ("grafana", "cloud api token", "glc_{b64:48}", "", "gitleaks", GITLEAKS),
    ("harness", "personal access token", "pat.{u22}.{A24}.{A20}", "", "gitleaks", GITLEAKS),
    ("terraform-cloud", "api token", "{a14}.atlasv1.{u67}", "", "gitleaks", GITLEAKS),
    ("heroku", "api key v2", "HRKU-AA{u58}", "", "gitleaks", GITLEAKS),
    ("huggingface", "access token", "hf_{l34}", "", "gitleaks", GITLEAKS),
    ("infracost", "api token", "ico-{A32}", "", "gitleaks", GITLEAKS),
    ("intra42", "client secret", "s-s4t2ud-{h64}", "", "gitleaks", GITLEAKS),
    ("linear", "api key", "lin_api_{A40}", "", "gitleaks", GITLEAKS),
    ("maxmind", "license key", "{A6}_{A29}_mmk", "", "gitleaks", GITLEAKS),
    ("notion", "integration token", "ntn_{d11}{A35}", "", "gitleaks", GITLEAKS),
    ("npm", "access token", "npm_{A36}", "", "gitleaks", GITLEAKS),
    ("octopus-deploy", "api key", "API-{U26}", "", "gitleaks", GITLEAKS),
    ("openai", "project key", "sk-proj-{u74}T3BlbkFJ{u74}", "", "gitleaks", GITLEAKS),
    ("openshift", "user token", "sha256~{u43}", "", "gitleaks", GITLEAKS),
    ("perplexity", "api key", "pplx-{A48}", "", "gitleaks", GITLEAKS),
    ("planetscale", "api token", "pscale_tkn_{u43}", "", "gitleaks", GITLEAKS),
    ("planetscale", "password", "pscale_pw_{u43}", "", "gitleaks", GITLEAKS),
    ("postman", "api key", "PMAK-{h24}-{h34}", "", "gitleaks", GITLEAKS),
    ("prefect", "api key", "pnu_{A36}", "", "gitleaks", GITLEAKS),
    ("pulumi", "access token", "pul-{h40}", "", "gitleaks", GITLEAKS),
    ("pypi", "upload token", "pypi-AgEIcHlwaS5vcmc{u120}", "", "gitleaks", GITLEAKS),
    ("readme", "api key", "rdme_{a70}", "", "gitleaks", GITLEAKS),
    ("rubygems", "api key", "rubygems_{h48}", "", "gitleaks", GITLEAKS),
    ("scalingo", "api token", "tk-us-{u48}", "", "gitleaks", GITLEAKS),
    ("sendgrid", "api key", "SG.{u22}.{u43}", "", "gitleaks", GITLEAKS),
    ("sendinblue", "api key", "xkeysib-{h64}-{A16}", "", "gitleaks", GITLEAKS),
    ("sentry", "user token", "sntryu_{h64}", "", "gitleaks", GITLEAKS),
    ("settlemint", "personal access token", "sm_pat_{A16}", "", "gitleaks", GITLEAKS),
    ("shippo", "api token", "shippo_live_{h40}", "", "gitleaks", GITLEAKS),
    ("shopify", "access token", "shpat_{h32}", "", "gitleaks", GITLEAKS),
    ("shopify", "shared secret", "shpss_{h32}", "", "gitleaks", GITLEAKS),
    ("slack", "bot token", "xoxb-{d12}-{d13}-{A24}", "", "gitleaks", GITLEAKS),
    ("slack", "user token", "xoxp-{d12}-{d12}-{d13}-{h32}", "", "gitleaks", GITLEAKS),
    ("slack", "app token", "xapp-1-{U11}-{d13}-{h64}", "", "gitleaks", GITLEAKS),
    ("slack", "incoming webhook", "https://hooks.slack.com/services/T{U8}/B{U10}/{A24}", "", "gitleaks", GITLEAKS),
    ("microsoft-teams", "incoming webhook",
     "https://acme.webhook.office.com/webhookb2/{uuid}@{uuid}/IncomingWebhook/{h32}/{uuid}", "", "gitleaks",
     GITLEAKS),
    ("square", "access token", "sq0atp-{u22}", "", "gitleaks", GITLEAKS),
    ("stripe", "secret key", "sk_live_{A99}", "", "gitleaks", GITLEAKS),
    ("stripe", "restricted key", "rk_live_{A24}", "", "gitleaks", GITLEAKS),
    ("twilio", "api key", "SK{h32}", "", "gitleaks", GITLEAKS),
    ("typeform", "personal token", "tfp_{u59}", "", "gitleaks", GITLEAKS),
    ("hashicorp-vault", "service token", "hvs.{u95}", "", "gitleaks", GITLEAKS),
    ("hashicorp-vault", "batch token", "hvb.{u140}", "", "gitleaks", GITLEAKS),
    ("sourcegraph", "access token", "sgp_{h16}_{h40}", "", "gitleaks", GITLEAKS),
    ("mailgun", "private api key", "key-{h32}", "mailgun", "gitleaks", GITLEAKS),
    ("new-relic", "user api key", "NRAK-{U27}", "", "gitleaks", GITLEAKS),
    ("new-relic", "insert key", "NRII-{a32}", "", "gitleaks", GITLEAKS),
    ("posthog", "personal api key", "phx_{A43}", "", "trufflehog", TRUFFLEHOG),
    ("teamwork", "api token", "tkn.v1_{teamwork}", "", "trufflehog", TRUFFLEHOG),
    ("dependency-track", "api key", "odt_{A32}", "", "noseyparker", NOSEY),
    ("tailscale", "auth key", "tskey-auth-k{A10}CNTRL-{A33}", "", "kingfisher", KINGFISHER),
    ("tailscale", "api key", "tskey-api-k{A10}CNTRL-{A33}", "", "kingfisher", KINGFISHER),
    ("buildkite", "api token", "bkua_{h40}", "", "kingfisher", KINGFISHER),
    ("nuget", "api key", "oy2{a43}", "", "kingfisher", KINGFISHER),
    ("docker-hub", "personal access token", "dckr_pat_{u27}", "", "noseyparker", NOSEY),
    ("groq", "api key", "gsk_{A52}", "", "noseyparker", NOSEY),
    ("replicate", "api token", "r8_{A37}", "", "trufflehog", TRUFFLEHOG),
    ("clickup", "personal token", "pk_{d8}_{U32}", "", "trufflehog", TRUFFLEHOG),
    ("hubspot", "private app token", "pat-na1-{uuid}", "", "trufflehog", TRUFFLEHOG),
    ("klaviyo", "private api key", "pk_{h34}", "klaviyo", "trufflehog", TRUFFLEHOG),
    ("razorpay", "key id", "rzp_live_{A14}", "", "trufflehog", TRUFFLEHOG),
    ("supabase", "access token", "sbp_{h40}", "", "kingfisher", KINGFISHER),
    ("pinecone", "api key", "pcsk_{A5}_{A58}", "", "kingfisher", KINGFISHER),
    ("xai", "api key", "xai-{A80}", "", "kingfisher", KINGFISHER),
    ("openrouter", "api key", "sk-or-v1-{h64}", "", "kingfisher", KINGFISHER),
    ("langsmith", "personal access token", "lsv2_pt_{h32}_{h10}", "", "kingfisher", KINGFISHER),
    ("cerebras", "api key", "csk-{a48}", "", "kingfisher", KINGFISHER),
    ("firecrawl", "api key", "fc-{h32}", "", "noseyparker", NOSEY),
    ("tavily", "api key", "tvly-dev-{A32}", "", "noseyparker", NOSEY),
    ("jina", "api key", "jina_{h32}{A28}", "", "noseyparker", NOSEY),
    ("elevenlabs", "api key", "sk_{h48}", "elevenlabs", "kingfisher", KINGFISHER),
    ("resend", "api key", "re_{A8}_{A24}", "", "kingfisher", KINGFISHER),
    ("figma", "personal access token", "figd_{u40}", "", "noseyparker", NOSEY),
    ("render", "api key", "rnd_{A32}", "", "kingfisher", KINGFISHER),
    ("deno-deploy", "access token", "ddp_{A36}", "", "kingfisher", KINGFISHER),
    ("netlify", "personal access token", "nfp_{A40}", "", "kingfisher", KINGFISHER),
    ("circleci", "personal api token", "CCIPAT_{A22}_{h40}", "", "kingfisher", KINGFISHER),
    ("bitbucket", "app password", "ATBB{A32}", "", "kingfisher", KINGFISHER),
    ("azure-devops", "personal access token", "{A52}JQQJ99{A18}AZDO{A4}", "", "kingfisher", KINGFISHER),
    ("google-oauth", "client secret", "GOCSPX-{u28}", "", "noseyparker", NOSEY),
    ("google-oauth", "access token", "ya29.a0{u150}", "", "noseyparker", NOSEY),
    ("google-oauth", "refresh token", "1//0{u98}", "google", "noseyparker", NOSEY),
    ("firebase", "cloud messaging server key", "AAAA{u7}:APA91b{u134}", "", "kingfisher", KINGFISHER),
    ("telnyx", "api key", "KEY{H32}_{A22}", "", "kingfisher", KINGFISHER),
    ("mandrill", "api key", "md-{u22}", "mandrill", "kingfisher", KINGFISHER),
    ("salesforce", "access token", "00D{A12}!{A96}", "", "noseyparker", NOSEY),
    ("zoho", "refresh token", "1000.{h32}.{h32}", "", "kingfisher", KINGFISHER),
    ("notion", "legacy integration token", "secret_{A43}", "notion", "kingfisher", KINGFISHER),
    ("airtable", "personal access token", "pat{A14}.{h64}", "", "kingfisher", KINGFISHER),
    ("trello", "api token", "ATTA{h64}{H8}", "", "kingfisher", KINGFISHER),
    ("tencent-cloud", "secret id", "AKID{A32}", "", "kingfisher", KINGFISHER),
    ("scaleway", "access key", "SCW{U17}", "", "kingfisher", KINGFISHER),
    ("akamai", "client token", "akab-{a16}-{a16}", "", "kingfisher", KINGFISHER),
    ("apify", "api token", "apify_api_{A36}", "", "kingfisher", KINGFISHER),
    ("mapbox", "secret token", "sk.eyJ1Ijoi{A20}In0.{u22}", "", "noseyparker", NOSEY),
    ("launchdarkly", "sdk key", "sdk-{uuid}", "launchdarkly", "kingfisher", KINGFISHER),
    ("flagsmith", "server key", "ser.{A22}", "flagsmith", "kingfisher", KINGFISHER),
    ("infisical", "service token", "st.{uuid}.{h32}.{h32}", "", "kingfisher", KINGFISHER),
    ("bitwarden", "machine access token", "0.{uuid}.{A30}:{A22}==", "bitwarden", "kingfisher", KINGFISHER),
    ("stytch", "secret", "secret-live-{u36}", "", "kingfisher", KINGFISHER),
    ("woocommerce", "consumer secret", "cs_{h40}", "woocommerce", "kingfisher", KINGFISHER),
    ("braintree", "access token", "access_token$production${a16}${h32}", "", "kingfisher", KINGFISHER),
    ("paystack", "secret key", "sk_live_{h40}", "paystack", "kingfisher", KINGFISHER),
    ("mollie", "api key", "live_{A30}", "mollie", "kingfisher", KINGFISHER),
    ("matrix", "access token", "syt_{a8}_{A20}_{A6}", "", "kingfisher", KINGFISHER),
    ("ably", "api key", "{A6}.{A6}:{u43}", "ably", "kingfisher", KINGFISHER),
    ("pubnub", "secret key", "sec-c-{A48}", "", "kingfisher", KINGFISHER),
    ("discord", "webhook", "https://discord.com/api/webhooks/{d18}/{u68}", "", "kingfisher", KINGFISHER),
    ("zapier", "webhook", "https://hooks.zapier.com/hooks/catch/{d7}/{a6}/", "", "kingfisher", KINGFISHER),
    ("teamcity", "access token", "eyJ0eXAiOiAiVENWMiJ9.{u36}.{u48}", "", "noseyparker", NOSEY),
    ("truenas", "api key", "{d1}-{A64}", "truenas", "noseyparker", NOSEY),
    ("crates.io", "api token", "cio{A32}", "", "noseyparker", NOSEY),
    ("codeclimate", "reporter id", "{h64}", "CC_TEST_REPORTER_ID", "noseyparker", NOSEY),
    ("sonarqube", "project token", "sqp_{h40}", "", "noseyparker", NOSEY),
    ("sonarqube", "user token", "squ_{h40}", "", "noseyparker", NOSEY),
    ("voyage", "api key", "pa-{u43}", "voyage", "kingfisher", KINGFISHER),
    ("wireguard", "private key", "{b64:32}", "PrivateKey", "noseyparker", NOSEY),
    ("azure-storage", "account key", "{b64:64}", "AccountKey", "noseyparker", NOSEY),
    ("azure-app-config", "connection secret", "{b64:32}", "azconfig", "noseyparker", NOSEY),
    # --- formats without a prefix: the catalogs require a cue ---------------------------------
    ("adafruit", "io key", "aio_{A28}", "adafruit", "kingfisher", KINGFISHER),
    ("airtable-legacy", "api key", "key{A14}", "airtable", "gitleaks", GITLEAKS),
    ("algolia", "admin api key", "{h32}", "algolia", "gitleaks", GITLEAKS),
    ("asana", "client secret", "{a32}", "asana", "gitleaks", GITLEAKS),
    ("assemblyai", "api key", "{h32}", "assemblyai", "trufflehog", TRUFFLEHOG),
    ("auth0", "client secret", "{u64}", "auth0", "kingfisher", KINGFISHER),
    ("binance", "api secret", "{A64}", "binance", "trufflehog", TRUFFLEHOG),
    ("bittrex", "secret key", "{a32}", "bittrex", "gitleaks", GITLEAKS),
    ("box", "client secret", "{A32}", "box", "kingfisher", KINGFISHER),
    ("browserstack", "access key", "{A20}", "browserstack", "trufflehog", TRUFFLEHOG),
    ("bugsnag", "api key", "{h32}", "bugsnag", "trufflehog", TRUFFLEHOG),
    ("censys", "api secret", "{A32}", "censys", "trufflehog", TRUFFLEHOG),
    ("cloudflare", "api token", "{u40}", "cloudflare", "gitleaks", GITLEAKS),
    ("cloudflare", "global api key", "{h37}", "cloudflare", "gitleaks", GITLEAKS),
    ("cloudsmith", "api key", "{h40}", "cloudsmith", "trufflehog", TRUFFLEHOG),
    ("codecov", "upload token", "{uuid}", "codecov", "gitleaks", GITLEAKS),
    ("cohere", "api key", "{A40}", "cohere", "gitleaks", GITLEAKS),
    ("coinbase", "api secret", "{u64}", "coinbase", "gitleaks", GITLEAKS),
    ("confluent", "api secret", "{A64}", "confluent", "gitleaks", GITLEAKS),
    ("contentful", "delivery token", "{u43}", "contentful", "gitleaks", GITLEAKS),
    ("coveralls", "repo token", "{A33}", "coveralls", "trufflehog", TRUFFLEHOG),
    ("datadog", "api key", "{h32}", "datadog", "gitleaks", GITLEAKS),
    ("datadog", "application key", "{h40}", "datadog", "gitleaks", GITLEAKS),
    ("deepgram", "api key", "{h40}", "deepgram", "trufflehog", TRUFFLEHOG),
    ("discord", "bot token", "M{A23}.{u6}.{u38}", "discord", "gitleaks", GITLEAKS),
    ("droneci", "access token", "{a32}", "droneci", "gitleaks", GITLEAKS),
    ("dropbox", "short-lived token", "sl.{u135}", "dropbox", "gitleaks", GITLEAKS),
    ("etsy", "access token", "{a24}", "etsy", "gitleaks", GITLEAKS),
    ("exa", "api key", "{uuid}", "exa", "kingfisher", KINGFISHER),
    ("fastly", "api token", "{u32}", "fastly", "gitleaks", GITLEAKS),
    ("finnhub", "access token", "{a20}", "finnhub", "gitleaks", GITLEAKS),
    ("flickr", "access token", "{a32}", "flickr", "gitleaks", GITLEAKS),
    ("freshdesk", "api key", "{A20}", "freshdesk", "trufflehog", TRUFFLEHOG),
    ("gitea", "access token", "{h40}", "gitea", "kingfisher", KINGFISHER),
    ("gitter", "access token", "{u40}", "gitter", "gitleaks", GITLEAKS),
    ("hetzner", "api token", "{A64}", "hetzner", "kingfisher", KINGFISHER),
    ("honeycomb", "api key", "{A22}", "honeycomb", "trufflehog", TRUFFLEHOG),
    ("ibm-cloud", "api key", "{u44}", "ibmcloud", "kingfisher", KINGFISHER),
    ("intercom", "access token", "dG9rOj{A54}=", "intercom", "gitleaks", GITLEAKS),
    ("iterable", "api key", "{h32}", "iterable", "trufflehog", TRUFFLEHOG),
    ("jenkins", "api token", "11{h32}", "jenkins", "noseyparker", NOSEY),
    ("jfrog", "identity token", "{a64}", "artifactory", "gitleaks", GITLEAKS),
    ("kraken", "private key", "{b64:64}", "kraken", "gitleaks", GITLEAKS),
    ("kucoin", "secret key", "{uuid}", "kucoin", "gitleaks", GITLEAKS),
    ("linode", "personal access token", "{h64}", "linode", "kingfisher", KINGFISHER),
    ("linkedin", "client secret", "{A16}", "linkedin", "gitleaks", GITLEAKS),
    ("mailchimp", "api key", "{h32}-us{d2}", "mailchimp", "gitleaks", GITLEAKS),
    ("mailjet", "secret key", "{h32}", "mailjet", "trufflehog", TRUFFLEHOG),
    ("mattermost", "access token", "{a26}", "mattermost", "gitleaks", GITLEAKS),
    ("messagebird", "api key", "{A25}", "messagebird", "gitleaks", GITLEAKS),
    ("messagebird", "client id", "{uuid}", "messagebird", "gitleaks", GITLEAKS),
    ("mistral", "api key", "{A32}", "mistral", "kingfisher", KINGFISHER),
    ("mixpanel", "api secret", "{h32}", "mixpanel", "trufflehog", TRUFFLEHOG),
    ("nasa", "api key", "{A40}", "nasa", "noseyparker", NOSEY),
    ("nytimes", "access token", "{u32}", "nytimes", "gitleaks", GITLEAKS),
    ("okta", "api token", "00{u40}", "okta", "gitleaks", GITLEAKS),
    ("openweather", "api key", "{h32}", "openweathermap", "trufflehog", TRUFFLEHOG),
    ("opsgenie", "api key", "{uuid}", "opsgenie", "trufflehog", TRUFFLEHOG),
    ("pagerduty", "api key", "u+{u18}", "pagerduty", "trufflehog", TRUFFLEHOG),
    ("paypal", "client secret", "E{u79}", "paypal", "kingfisher", KINGFISHER),
    ("pipedrive", "api token", "{h40}", "pipedrive", "trufflehog", TRUFFLEHOG),
    ("plaid", "secret", "{a30}", "plaid", "gitleaks", GITLEAKS),
    ("plivo", "auth token", "{A40}", "plivo", "trufflehog", TRUFFLEHOG),
    ("postmark", "server token", "{uuid}", "postmark", "noseyparker", NOSEY),
    ("pusher", "app secret", "{h20}", "pusher", "trufflehog", TRUFFLEHOG),
    ("railway", "api token", "{uuid}", "railway", "kingfisher", KINGFISHER),
    ("rapidapi", "api key", "{u50}", "rapidapi", "gitleaks", GITLEAKS),
    ("rollbar", "access token", "{h32}", "rollbar", "trufflehog", TRUFFLEHOG),
    ("saucelabs", "access key", "{uuid}", "saucelabs", "noseyparker", NOSEY),
    ("segment", "write key", "{A32}", "segment", "noseyparker", NOSEY),
    ("sendbird", "api token", "{h40}", "sendbird", "gitleaks", GITLEAKS),
    ("serpapi", "api key", "{h64}", "serpapi", "trufflehog", TRUFFLEHOG),
    ("shodan", "api key", "{A32}", "shodan", "trufflehog", TRUFFLEHOG),
    ("snyk", "api token", "{uuid}", "snyk_token", "gitleaks", GITLEAKS),
    ("sonarcloud", "token", "{h40}", "sonar.login", "gitleaks", GITLEAKS),
    ("sparkpost", "api key", "{h40}", "sparkpost", "trufflehog", TRUFFLEHOG),
    ("splunk", "hec token", "{uuid}", "splunk", "kingfisher", KINGFISHER),
    ("spotify", "client secret", "{h32}", "spotify", "trufflehog", TRUFFLEHOG),
    ("squarespace", "api key", "{uuid}", "squarespace", "gitleaks", GITLEAKS),
    ("sumologic", "access key", "{A64}", "sumologic", "gitleaks", GITLEAKS),
    ("telegram", "bot token", "{d10}:AA{u33}", "telegram", "gitleaks", GITLEAKS),
    ("todoist", "api token", "{h40}", "todoist", "trufflehog", TRUFFLEHOG),
    ("together", "api key", "{h64}", "together", "kingfisher", KINGFISHER),
    ("travis-ci", "access token", "{A22}", "travis", "gitleaks", GITLEAKS),
    ("twilio", "auth token", "{h32}", "twilio", "trufflehog", TRUFFLEHOG),
    ("twitch", "client secret", "{a30}", "twitch", "gitleaks", GITLEAKS),
    ("twitter", "bearer token", "AAAAAAAAAAAAAAAAAAAAAA{A80}", "twitter", "gitleaks", GITLEAKS),
    ("virustotal", "api key", "{h64}", "virustotal", "trufflehog", TRUFFLEHOG),
    ("vonage", "api secret", "{A16}", "vonage", "trufflehog", TRUFFLEHOG),
    ("vultr", "api key", "{U36}", "vultr", "kingfisher", KINGFISHER),
    ("wandb", "api key", "{h40}", "wandb", "kingfisher", KINGFISHER),
    ("yandex", "api key", "AQVN{u36}", "yandex", "gitleaks", GITLEAKS),
    ("zendesk", "api token", "{A40}", "zendesk", "gitleaks", GITLEAKS),
    ("zoom", "client secret", "{A32}", "zoom", "kingfisher", KINGFISHER),
    # --- password hashes and credential URIs ----------------------------------------------------
    ("sha512crypt", "password hash", "$6${A12}${hash86}", "", "hashes", HASHCAT),
    ("bcrypt", "password hash", "$2b$12${bcrypt53}", "", "hashes", HASHCAT),
    ("md5crypt", "password hash", "$1${A8}${hash22}", "", "hashes", HASHCAT),
    ("sha256crypt", "password hash", "$5$rounds=5000${A16}${hash43}", "", "hashes", HASHCAT),
    ("yescrypt", "password hash", "$y$j9T${hash22}${hash43}", "", "hashes", HASHCAT),
    ("kerberos", "as-rep hash", "$krb5asrep$23$svc_sql@CORP.LOCAL:{h32}${h200}", "", "hashes", HASHCAT),
    ("kerberos", "tgs-rep hash", "$krb5tgs$23$*svc_web$CORP.LOCAL$HTTP/web01*${h32}${h200}", "", "hashes", HASHCAT),
    ("ntlm", "net-ntlmv2 response", "administrator::CORP:{h16}:{h32}:{h120}", "", "hashes", HASHCAT),
]

# connection URIs: password is the secret (several contain '@' or other reserved characters)
URI_VENDORS = [
    ("postgres", "postgres://{user}:{pw}@{host}:5432/app", "noseyparker", NOSEY),
    ("mongodb", "mongodb+srv://{user}:{pw}@cluster0.{a5}.mongodb.net/prod?retryWrites=true", "noseyparker", NOSEY),
    ("mysql", "mysql://{user}:{pw}@{host}:3306/shop", "kingfisher", KINGFISHER),
    ("redis", "redis://default:{pw}@{host}:6379/0", "kingfisher", KINGFISHER),
    ("amqp", "amqps://{user}:{pw}@{host}/vhost", "kingfisher", KINGFISHER),
    ("ftp", "ftp://{user}:{pw}@{host}/outgoing/", "kingfisher", KINGFISHER),
    ("cloudinary", "cloudinary://{d15}:{u27}@acme-media", "kingfisher", KINGFISHER),
    ("sidekiq", "https://{h8}:{h8}@enterprise.contribsys.com/", "gitleaks", GITLEAKS),
    ("jdbc-sqlserver", "Server={host};Database=app;User Id={user};Password={pw};", "noseyparker", NOSEY),
]

# GitGuardian's generic detector forms (docs.gitguardian.com: generic_high_entropy_secret,
# generic_password, generic_cli_secret)
GITGUARDIAN_FORMS = [
    ("gitguardian-generic-high-entropy", "secret_id := {hi}"),
    ("gitguardian-generic-high-entropy", "service_credential <- \"{hi}\""),
    ("gitguardian-generic-high-entropy", "auth_blob => '{hi}'"),
    ("gitguardian-generic-password", "my_password = \"{pw}\""),
    ("gitguardian-generic-password", "db_passwd: {pw}"),
    ("gitguardian-generic-password", "PWD=\"{pw}\""),
    ("gitguardian-generic-cli", "./deploy --secret {cli}"),
    ("gitguardian-generic-cli", "myapp --api-key {cli} --region eu"),
    ("gitguardian-generic-cli", "tool login --credentials {cli}"),
]

# contexts a catalog value is shown in. {v}=value, {V}=VAR name, {c}=cue, {k}=kind
PREFIXED_CONTEXTS = [
    "{V}={v}",
    "export {V}=\"{v}\"",
    "{c_l}_{k_}: {v}",
    "\"{c_l}{K}\": \"{v}\",",
    "Authorization: Bearer {v}",
    "here's the {vendor} {kind}: {v}",
    "curl -H \"X-Api-Key: {v}\" https://api.example.com/v1/me",
    "token = '{v}'",
    "{v}",
    "I pasted {v} into the CI settings by mistake",
]
URL_CONTEXTS = [
    "{v}",
    "WEBHOOK_URL={v}",
    "curl -X POST -H 'Content-type: application/json' -d '{\"text\":\"deploy done\"}' {v}",
    "webhook: \"{v}\"",
    "the {vendor} webhook is {v}",
]
HASH_CONTEXTS = [
    "{v}",
    "root:{v}:19700:0:99999:7:::",
    "password_hash = '{v}'",
    "hash from the dump: {v}",
    "dumped: {v}",
]
CUE_CONTEXTS = [
    "{V}={v}",
    "{c_l}_{k_} = \"{v}\"",
    "\"{c_l}{K}\": \"{v}\"",
    "{c} {kind}: {v}",
    "the {c} {kind} is {v}",
    "{c} token = '{v}'",
    "{c_U}_SECRET: {v}",
    "config.{c_l}.{k_} = '{v}'",
]


def _teamwork(g: Gen) -> str:
    return base64.b64encode(f"{g.uuid()}-{g.s(DIGITS, 6)}.{g.s(DIGITS, 6)}.EU".encode()).decode()[:-1]


def _hashy(g: Gen, n: int) -> str:
    return g.s(ALNUM + "./", n)


def catalog_value(g: Gen, fmt: str) -> str:
    fmt = fmt.replace("{teamwork}", _teamwork(g))
    for tag, n in (("hash86", 86), ("hash43", 43), ("hash22", 22), ("bcrypt53", 53)):
        while "{" + tag + "}" in fmt:
            fmt = fmt.replace("{" + tag + "}", _hashy(g, n), 1)
    return g.fmt(fmt)


def split_of(vendor: str) -> str:
    return "heldout" if int(hashlib.sha256(vendor.encode()).hexdigest(), 16) % 10 < 4 else "tune"


def _names(vendor: str, kind: str, cue: str) -> dict[str, str]:
    c = cue or vendor
    c_l = re.sub(r"[^a-z0-9]+", "_", c.lower()).strip("_")
    k_ = re.sub(r"[^a-z0-9]+", "_", kind.lower()).strip("_")
    return dict(c=c, c_l=c_l, c_U=c_l.upper(), k_=k_, K="".join(w.capitalize() for w in k_.split("_")),
                V=f"{c_l.upper()}_{k_.upper()}", vendor=vendor, kind=kind)


# gitleaks' GenerateSampleSecrets forms (cmd/generate/config/utils/generate.go)
GITLEAKS_SAMPLES = [
    "{i}Token=\"{s}\"", "{i}Token = {s}", "{{\n    \"{i}_token\": \"{s}\"\n}}", "<{i}Token>{s}</{i}Token>",
    "{i}_token: '{s}'", "{i}_token: |\n  {s}", "string {i}Token = \"{s}\";", "{i}Token := \"{s}\"",
    "{i}Token := `{s}`", "String {i}Token = \"{s}\";", "var {i}Token = \"{s}\"", "${i}Token .= \"{s}\"",
    "{i}Token = '{s}'", "{i}Token,{s},", "  \"{i}Token\" => \"{s}\"", "{i}_TOKEN := \"{s}\"",
    "{i}_TOKEN ?= \"{s}\"", "{i}_TOKEN += \"{s}\"",
]

# gitleaks rules with the identifier its tests use and the value's format (from gitleaks.toml regexes)
GITLEAKS_RULES = [
    ("1password-secret-key", "1password", "", "A3-{U6}-{U11}-{U5}-{U5}-{U5}"),
    ("adafruit-api-key", "adafruit", "adafruit", "{u32}"),
    ("adobe-client-id", "adobe", "adobe", "{h32}"),
    ("adobe-client-secret", "adobe", "", "p8e-{A32}"),
    ("age-secret-key", "age", "", "AGE-SECRET-KEY-1{Q58}"),
    ("airtable-api-key", "airtable", "airtable", "{a17}"),
    ("algolia-api-key", "algolia", "algolia", "{a32}"),
    ("alibaba-access-key-id", "alibaba", "", "LTAI{A20}"),
    ("alibaba-secret-key", "alibaba", "alibaba", "{A30}"),
    ("anthropic-api-key", "anthropic", "", "sk-ant-api03-{u93}AA"),
    ("artifactory-reference-token", "artifactory", "", "cmVmd{A59}"),
    ("asana-client-id", "asana", "asana", "{d16}"),
    ("atlassian-api-token", "atlassian", "atlassian", "{a20}{h4}"),
    ("authress-service-client-access-key", "authress", "",
     "sc_{a10}.{a5}.acc_{a20}.{u60}"),
    ("aws-access-token", "aws", "", "AKIA{B16}"),
    ("beamer-api-token", "beamer", "beamer", "b_{u44}"),
    ("bitbucket-client-secret", "bitbucket", "bitbucket", "{u64}"),
    ("cisco-meraki-api-key", "meraki", "meraki", "{h40}"),
    ("codecov-access-token", "codecov", "codecov", "{a32}"),
    ("confluent-access-token", "confluent", "confluent", "{a16}"),
    ("curl-auth-user", "curl", "curl", "curl -u {user}:{pw} https://api.example.com/v1/jobs"),
    ("curl-auth-header", "curl", "curl", "curl -H \"Authorization: Bearer {u40}\" https://api.example.com/"),
    ("defined-networking-api-token", "dnkey", "dnkey", "dnkey-{u26}-{u52}"),
    ("digitalocean-access-token", "digitalocean", "", "doo_v1_{h64}"),
    ("discord-client-secret", "discord", "discord", "{u32}"),
    ("dropbox-long-lived-api-token", "dropbox", "dropbox", "{a11}AAAAAAAAAA{u43}"),
    ("easypost-test-api-token", "easypost", "", "EZTK{A54}"),
    ("facebook-secret", "facebook", "facebook", "{h32}"),
    ("finicity-client-secret", "finicity", "finicity", "{a20}"),
    ("flutterwave-encryption-key", "flutterwave", "", "FLWSECK_TEST-{h12}"),
    ("freshbooks-access-token", "freshbooks", "freshbooks", "{a64}"),
    ("github-refresh-token", "github", "", "ghr_{A36}"),
    ("gitlab-cicd-job-token", "gitlab", "", "glcbt-{A3}_{u20}"),
    ("gitlab-feature-flag-client-token", "gitlab", "", "glffct-{u20}"),
    ("gitlab-feed-token", "gitlab", "", "glft-{u20}"),
    ("gitlab-incoming-mail-token", "gitlab", "", "glimt-{u25}"),
    ("gitlab-kubernetes-agent-token", "gitlab", "", "glagent-{u50}"),
    ("gitlab-oauth-app-secret", "gitlab", "", "gloas-{u64}"),
    ("gitlab-rrt", "gitlab", "", "GR1348941{u20}"),
    ("gitlab-scim-token", "gitlab", "", "glsoat-{u20}"),
    ("gitlab-session-cookie", "gitlab", "", "_gitlab_session={h32}"),
    ("gocardless-api-token", "gocardless", "gocardless", "live_{u40}"),
    ("grafana-api-key", "grafana", "", "eyJrIjoi{A72}"),
    ("heroku-api-key", "heroku", "heroku", "{uuid}"),
    ("hubspot-api-key", "hubspot", "hubspot", "{UUID}"),
    ("huggingface-organization-api-token", "huggingface", "", "api_org_{l34}"),
    ("jfrog-api-key", "jfrog", "jfrog", "{a73}"),
    ("kucoin-access-token", "kucoin", "kucoin", "{h24}"),
    ("launchdarkly-access-token", "launchdarkly", "launchdarkly", "{u40}"),
    ("linear-client-secret", "linear", "linear", "{h32}"),
    ("linkedin-client-id", "linkedin", "linkedin", "{a14}"),
    ("lob-api-key", "lob", "lob", "live_{h35}"),
    ("mailgun-signing-key", "mailgun", "mailgun", "{h32}-{h8}-{h8}"),
    ("mapbox-api-token", "mapbox", "mapbox", "pk.{a60}.{a22}"),
    ("messagebird-client-id", "messagebird", "messagebird", "{uuid}"),
    ("netlify-access-token", "netlify", "netlify", "{u43}"),
    ("new-relic-browser-api-token", "new-relic", "new-relic", "NRJS-{h19}"),
    ("new-relic-user-api-id", "new-relic", "new-relic", "{a64}"),
    ("okta-access-token", "okta", "okta", "00{u40}"),
    ("openai-api-key", "openai", "", "sk-{A20}T3BlbkFJ{A20}"),
    ("plaid-api-token", "plaid", "plaid", "access-production-{uuid}"),
    ("plaid-client-id", "plaid", "plaid", "{a24}"),
    ("planetscale-oauth-token", "planetscale", "", "pscale_oauth_{u43}"),
    ("privateai-api-token", "privateai", "privateai", "{a32}"),
    ("sendbird-access-id", "sendbird", "sendbird", "{uuid}"),
    ("sentry-access-token", "sentry", "sentry", "{h64}"),
    ("settlemint-service-access-token", "settlemint", "", "sm_sat_{A16}"),
    ("shopify-custom-access-token", "shopify", "", "shpca_{h32}"),
    ("shopify-private-app-access-token", "shopify", "", "shppa_{h32}"),
    ("sidekiq-secret", "sidekiq", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM", "{h8}:{h8}"),
    ("slack-legacy-bot-token", "slack", "", "xoxb-{d10}-{A24}"),
    ("slack-legacy-workspace-token", "slack", "", "xoxa-2-{A30}"),
    ("snyk-api-token", "snyk", "snyk_token", "{uuid}"),
    ("sonar-api-token", "sonar", "sonar_token", "{a40}"),
    ("square-access-token", "square", "", "EAAA{u60}"),
    ("stripe-access-token", "stripe", "", "sk_test_{A32}"),
    ("sumologic-access-id", "sumologic", "sumo", "su{A12}"),
    ("telegram-bot-api-token", "telegram", "telegram", "{d9}:A{u34}"),
    ("travisci-access-token", "travis-ci", "travis", "{a22}"),
    ("twitch-api-token", "twitch", "twitch", "{a30}"),
    ("twitter-access-token", "twitter", "twitter", "{d19}-{A40}"),
    ("twitter-api-secret", "twitter", "twitter", "{a50}"),
    ("vault-service-token", "hashicorp-vault", "", "hvs.{u100}"),
    ("yandex-aws-access-token", "yandex", "yandex", "YC{u38}"),
    ("zendesk-secret-key", "zendesk", "zendesk", "{a40}"),
    ("github-pat", "github", "", "ghp_{A36}"),
    ("github-app-token", "github", "", "ghu_{A36}"),
    ("gitlab-pat", "gitlab", "", "glpat-{u20}"),
    ("slack-bot-token", "slack", "", "xoxb-{d13}-{d13}-{A24}"),
    ("sendgrid-api-token", "sendgrid", "", "SG.{u22}.{u43}"),
    ("npm-access-token", "npm", "", "npm_{A36}"),
    ("pypi-upload-token", "pypi", "", "pypi-AgEIcHlwaS5vcmc{u80}"),
    ("databricks-api-token", "databricks", "", "dapi{h32}"),
    ("doppler-api-token", "doppler", "", "dp.pt.{A43}"),
    ("dynatrace-api-token", "dynatrace", "", "dt0c01.{U24}.{U64}"),
    ("linear-api-key", "linear", "", "lin_api_{A40}"),
    ("postman-api-token", "postman", "", "PMAK-{h24}-{h34}"),
    ("pulumi-api-token", "pulumi", "", "pul-{h40}"),
    ("rubygems-api-token", "rubygems", "", "rubygems_{h48}"),
    ("shippo-api-token", "shippo", "", "shippo_test_{h40}"),
    ("maxmind-license-key", "maxmind", "", "{A6}_{A29}_mmk"),
    ("perplexity-api-key", "perplexity", "", "pplx-{A48}"),
    ("prefect-api-token", "prefect", "", "pnu_{A36}"),
    ("readme-api-token", "readme", "", "rdme_{a70}"),
    ("scalingo-api-token", "scalingo", "", "tk-us-{u48}"),
    ("sentry-user-token", "sentry", "", "sntryu_{h64}"),
    ("infracost-api-token", "infracost", "", "ico-{A32}"),
    ("frameio-api-token", "frame.io", "", "fio-u-{u64}"),
    ("clickhouse-cloud-api-secret-key", "clickhouse", "", "4b1d{A38}"),
    ("clojars-api-token", "clojars", "", "CLOJARS_{a60}"),
    ("heroku-api-key-v2", "heroku", "", "HRKU-AA{u58}"),
    ("notion-api-token", "notion", "", "ntn_{d11}{A35}"),
    ("openshift-user-token", "openshift", "", "sha256~{u43}"),
    ("harness-api-key", "harness", "", "sat.{u22}.{A24}.{A20}"),
    ("azure-ad-client-secret", "azure-ad", "", "{A3}8Q~{A34}"),
    ("microsoft-teams-webhook", "microsoft-teams", "",
     "https://acme.webhook.office.com/webhookb2/{uuid}@{uuid}/IncomingWebhook/{h32}/{uuid}"),
    ("slack-webhook-url", "slack", "", "https://hooks.slack.com/services/T{U8}/B{U10}/{A24}"),
]


def build_catalog(rng: random.Random) -> list[dict]:
    g = Gen(rng)
    rows: list[dict] = []

    def add(text: str, secrets: list[str], vendor: str, family: str, template: str, catalog: str, source: str):
        rows.append({"text": text, "secrets": secrets, "family": family, "template": template,
                     "split": split_of(vendor), "source": source, "vendor": vendor, "catalog": catalog})

    for vendor, kind, fmt, cue, catalog, source in VENDORS:
        catalog = "gitleaks-format" if catalog == "gitleaks" else catalog   # the subset "gitleaks" is below
        names = _names(vendor, kind, cue)
        contexts = CUE_CONTEXTS if cue else PREFIXED_CONTEXTS
        if fmt.startswith("https://"):
            contexts = URL_CONTEXTS
        elif fmt.startswith("$") or catalog == "hashes":
            contexts = HASH_CONTEXTS
        picks = g.r.sample(range(len(contexts)), 3 if not cue else 2)
        if catalog == "trufflehog":   # the detector tests' own fixture form first
            contexts = contexts + ["{c} token = '{v}'"]
            picks = [len(contexts) - 1] + picks[:2]
        for ci in picks:
            v = catalog_value(g, fmt)
            text = fill(contexts[ci], {**names, "v": v})
            add(text, [v], vendor, f"{vendor} {kind}", f"catalog.{'cue' if cue else 'prefixed'}.{ci:02d}",
                catalog, source)

    for vendor, fmt, catalog, source in URI_VENDORS:
        for ci in range(2):
            pw = g.password()
            if ci == 1:   # a password with reserved characters left unencoded, as people paste it
                pw = pw[:4] + "@" + pw[4:]
            vals = dict(user=g.user(), pw=pw, host=g.host())
            uri = fill(g.fmt(fmt), vals)
            secret = pw if "{pw}" in fmt else re.search(r"//([^@]+)@", uri).group(1)
            text = (f"DATABASE_URL={uri}" if ci == 0 else f"connect with {uri}")
            add(text, [secret], vendor, f"{vendor} connection uri", f"catalog.uri.{ci}", catalog, source)

    for vendor, form in GITGUARDIAN_FORMS:
        for _ in range(3):
            vals = dict(hi=g.mixed(ALNUM + "_./+-", g.r.randint(18, 40)), pw=g.password(),
                        cli=g.mixed(ALNUM + "_.-", g.r.randint(14, 30)))
            text = fill(form, vals)
            secret = next(v for k, v in vals.items() if "{" + k + "}" in form)
            add(text, [secret], vendor, vendor, f"catalog.gitguardian.{GITGUARDIAN_FORMS.index((vendor, form))}",
                "gitguardian", GITGUARDIAN)

    for rule, vendor, ident, fmt in GITLEAKS_RULES:
        for ci in g.r.sample(range(len(GITLEAKS_SAMPLES)), 2):
            if rule.startswith("curl-"):
                user, pw = g.user(), g.password().replace("'", "!").replace(" ", "_").replace(":", "!")
                v = catalog_value(g, fmt.replace("{user}", user).replace("{pw}", pw))
                secret = pw if rule == "curl-auth-user" else v.split("Bearer ")[1].split("\"")[0]
                text = v if ci % 2 == 0 else f"$ {v}"
                add(text, [secret], vendor, rule, "gitleaks.curl", "gitleaks", f"{GITLEAKS} [{rule}]")
                continue
            v = catalog_value(g, fmt)
            i = ident or vendor.replace(".", "").replace("-", "")
            text = fill(GITLEAKS_SAMPLES[ci].replace("{{", "\x01").replace("}}", "\x02"), {"i": i, "s": v})
            text = text.replace("\x01", "{").replace("\x02", "}")
            add(text, [v], vendor, rule, f"gitleaks.sample.{ci:02d}", "gitleaks", f"{GITLEAKS} [{rule}]")
    return rows


# ---------------------------------------------------------------------------

def render(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def generate() -> dict[str, str]:
    rng = random.Random(SEED)
    chat = build_chat(rng)
    catalog = build_catalog(rng)
    for rows in (chat, catalog):
        for r in rows:
            for s in r["secrets"]:
                assert s and s in r["text"], (r["template"], s)
            for k in r.get("keep", []):
                assert k in r["text"], (r["template"], k)
    return {"chat.jsonl": render(chat), "catalog.jsonl": render(catalog)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = ap.parse_args(argv)
    files = generate()
    stale = [name for name, text in files.items()
             if not (DATA / name).exists() or (DATA / name).read_text(encoding="utf-8") != text]
    if args.check:
        for name in stale:
            print(f"{name} differs from a fresh run of bench/redaction_eval_gen.py", file=sys.stderr)
        return 1 if stale else 0
    DATA.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (DATA / name).write_text(text, encoding="utf-8")
        print(f"wrote {DATA / name} ({text.count(chr(10))} lines, {len(text.encode()) / 1e3:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
