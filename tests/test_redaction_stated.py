"""Credentials stated in language (issue 34): redaction/stated.py and stated_cli.py.

Per family: phrasings that must be masked (values made here, not taken from the
evaluation corpus), and near misses that must stay untouched. Every masked case
also checks that the output is idempotent.
"""

from __future__ import annotations

import pytest

from redaction import redact
from redaction.value_shape import shape

P = "Kx7#qLm2Wv9z"        # a generated password with a symbol
R = "hT4kWq9ZmB2xLp"      # random letters and digits, mixed case
H = "Saffron1987!"        # a human password: a word, a year, a symbol
PP = "copper-Lantern-41-meadow"  # a generated word passphrase


def masked(text: str, secret: str) -> str:
    assert secret in text
    out = redact(text).text
    assert secret not in out, out
    assert redact(out).text == out  # idempotent
    return out


def kept(text: str) -> None:
    assert redact(text).text == text, redact(text).text


# ---- a password in a sentence (pw_sentence, pw_temp) --------------------------------------

SENTENCES = [
    f"You can sign into the router as admin with password {P}.",
    f"The staging box login is deploy and its pw is {H}",
    f"For the reporting DB the creds are svc_report and {R}.",
    f"ssh into bastion-3 as ops, pass {P}",
    f"I gave the intern a temporary password ({H}) for the wiki.",
    f"Her account now has the one-time password {R}, she must change it on first login.",
    f"Set alice to a throwaway passcode of {P} until SSO works.",
    f"I changed the kiosk account's password to {PP} for the demo.",
]


@pytest.mark.parametrize("text", SENTENCES)
def test_password_in_a_sentence(text: str) -> None:
    secret = next(s for s in (P, R, H, PP) if s in text)
    masked(text, secret)


# ---- the cue after the value (pw_cue_after) -------------------------------------------------

CUE_AFTER = [
    f"{R} is the password of the backup NAS.",
    f"`{PP}`: that's the new admin password for Jenkins.",
    f"Use {P}, I believe that's what the cron job uses as its password.",
    f"Type {R} into the password box and press enter.",
    f"bob / {P} are the login and password for the FTP server.",
]


@pytest.mark.parametrize("text", CUE_AFTER)
def test_cue_after_the_value(text: str) -> None:
    secret = next(s for s in (P, R, H, PP) if s in text)
    masked(text, secret)


# ---- other languages (pw_i18n) -------------------------------------------------------------

I18N = [
    f"Das Kennwort für den Server lautet {R}.",
    f"Benutzer: admin, Passwort: {P}",
    f"Le mot de passe du wifi est {H}",
    f"mdp : {R}",
    f"La contraseña de la base de datos es {P}.",
    f"usuario root, clave {R}",
    f"A senha do servidor é {PP}.",
    f"La password del router è {R}.",
    f"Het wachtwoord is {P}",
    f"Hasło do serwera to {R}.",
    f"Пароль от сервера: {P}",
    f"数据库的密码是 {R}",
]


@pytest.mark.parametrize("text", I18N)
def test_other_languages(text: str) -> None:
    secret = next(s for s in (P, R, H, PP) if s in text)
    masked(text, secret)


# ---- an answer that gives what the question asked for (pw_answer) -------------------------

ANSWERS = [
    f"User: what's the root password on the db host?\n\nAssistant: It is {R}",
    f"Assistant: Which password should I use for the archive?\n\nUser: {H}",
    f"User: {R}\n\nAssistant: Thanks, I'm logged in now.",
]


@pytest.mark.parametrize("text", ANSWERS)
def test_answer_in_the_next_message(text: str) -> None:
    secret = next(s for s in (P, R, H, PP) if s in text)
    masked(text, secret)


# ---- user:password in running text, odd case, passphrase after a key, AWS prose ----------

OTHERS = [
    (f"We log into the admin UI with ops:{R} for now.", R),
    (f"basic auth on the preview site is demo:{H}", H),
    (f"PaSsWoRd: {P}", P),
    (f"the PASSWORD IS {R}", R),
    ("ToKeN iS 5c1e0f3a9d2b7c4e8f6a1b3d5e7f9a0c2d4e6f8a", "5c1e0f3a9d2b7c4e8f6a1b3d5e7f9a0c2d4e6f8a"),
    (f"aPi_KeY = {R}{R}", R + R),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
     "-----END OPENSSH PRIVATE KEY-----\nThe passphrase is walnut ember quiver 2291", "walnut ember quiver 2291"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq7BFUpkGp3+LQmlQ\n-----END RSA PRIVATE KEY-----\n"
     f"Unlock it with {PP} when asked.", PP),
    ("The deploy user's access key is AKIAQ3EGRTYUIOPASDF2 and the secret part of it is "
     "Jq2/8xLmN0pQrS4tUvW6yZ1aBcDeFgHiJkLmNoPq.", "Jq2/8xLmN0pQrS4tUvW6yZ1aBcDeFgHiJkLmNoPq"),
]


@pytest.mark.parametrize("text,secret", OTHERS)
def test_other_stated_forms(text: str, secret: str) -> None:
    masked(text, secret)


# ---- commands and code (cli_pw_flags, secret_set_cli, php_define, pgpass, bytes_key) ------

COMMANDS = [
    f"plink -ssh admin@10.0.0.5 -pw {P}",
    f"keytool -list -keystore app.jks -storepass {R}",
    f"sqlcmd -S db01 -U sa -P {H}",
    f"mongosh mongodb://db01:27017 -u admin -p '{P}'",
    f"ldapwhoami -H ldap://dc1 -D cn=admin,dc=corp -w {R}",
    f"xfreerdp /v:host /u:bob /p:{PP}",
    f"zip -P {P} backup.zip dump.sql",
    f"7z a -p{P} archive.7z folder",
    f"lftp -u bob,{R} sftp://files.example.org",
    f"rabbitmqctl add_user carol {H}",
    f"sqlplus scott/{P}@orcl",
    f"gh secret set NPM_TOKEN --body '{R}'",
    f"printf '%s' '{R}' | wrangler secret put API_TOKEN",
    f"kubectl create secret generic db --from-literal=password={P}",
    f"fly secrets set DATABASE_PASSWORD={P}",
    f"docker secret create db_pw - <<< '{H}'",
    f"define('DB_PASSWORD', '{P}');",
    f"$config->set('smtp_password', '{H}');",
    f"db.example.com:5432:app:app_user:{R}",
    "SECRET_KEY = b'\\x8f\\x12\\xa4\\x9c\\x03\\xd1\\x7e\\x55\\xbb\\x20\\x6a\\xf4\\x19\\xc8\\x2d\\x91'",
    "key = bytes.fromhex('9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08')",
]


@pytest.mark.parametrize("text", COMMANDS)
def test_commands_and_code(text: str) -> None:
    secrets = [s for s in (P, R, H, PP) if s in text]
    if secrets:
        masked(text, secrets[0])
    else:
        out = redact(text).text
        assert out != text and redact(out).text == out


# ---- near misses: must stay ---------------------------------------------------------------

NEAR_MISSES = [
    "the password policy requires 12 characters and a digit",
    "reset your password at https://accounts.example.com/reset?step=2",
    "password: <your-password>",
    "password: ${DB_PASSWORD}",
    "Password: required",
    "pass the token to the function as its first argument",
    "the tests pass on Python 3.12.1 and 3.11.9",
    "I forgot my password. Thanks!",
    "the password for release v2.14.0-rc1 builds is in the vault",
    "log in with your GitHub account, request 3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b failed",
    "the login page at /home/deploy/app/login.html is cached",
    "the password hash is computed with bcrypt (cost 12), see commit 4e1f9a2",
    "docker run -p 8080:80 -u 1000 nginx:1.25.3-alpine",
    "mkdir -p /var/lib/app && rsync -P src/ dst/",
    "mvn -P release-profile deploy",
    'docker run --rm -v "$PWD:/src" -w /src aquasec/trivy@sha256:'
    'bcc376de8d77cfe086a917230e818dc9f8528e3c852f7b1aff648949b6258d1c fs .',
    "verifying github.com/x/y@v1.0.0/go.mod: checksum mismatch\n\tdownloaded: h1:Xk2pQ9mLw8ZrT4vB/yHs1nC6eJ0aUfDg7iO5KlPqRs=",
    "Modulus:\n    00:b5:71:d0:ba:67:48:6c:78:83:56:a7:5f:f8:b6:\n    7f:66:03:dd:9a:1e",
    "GITHUB_SHA:6eb2bac6e2f959c983d965013e23b997ba7f9170 GITHUB_TOKEN: INPUT_TOKEN:*** ImageOS:ubuntu20",
    "__('Password', 'woocommerce')",
    "the user is admin and the host is db01.internal.example.com:5432",
    "Connect with ssh deploy@10.0.3.12 -p 2222 and enter your password when prompted.",
    "passwordless login via ssh keys is enabled on web-01",
    "the creds live in ~/.aws/credentials under [default]",
    "User: what's the password policy?\n\nAssistant: At least 12 characters.",
    "collation:utf8mb4_unicode_ci engine:InnoDB",
    "see nginx:1.25.3 and postgres:16-alpine",
    "login via GitHub OAuth2App works",
    "Sign in with your YubiKey5 NFC",
    "pass --gcflags=-N to the build",
    "password managers like KeePassXC or Bitwarden",
    "password hashing uses Argon2id with m=65536,t=3,p=4",
    "the password is stored with PBKDF2-SHA256 (600000 iterations)",
    "The login endpoint returns HTTP401 on wrong creds",
    "auth token expired at 2024-01-02T10:00:00Z",
    "That's the wifi password, the network is GuestNet.",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_stay(text: str) -> None:
    kept(text)


@pytest.mark.parametrize("value,expected", [
    ("Sparrow1979&", "medium"), ("hT4kWq9ZmB2xLp", "medium"), ("copper-Lantern-41-meadow", "medium"),
    ("Saffron2014", "weak"), ("lotus-meadow-copper-7064", "weak"),
    ("required", None), ("Thanks!", None), ("v2.14.0-rc1", None), ("3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b", None),
    ("db01.internal.example.com", None), ("/home/deploy/app", None), ("staging-db-02", None),
    ("utf8mb4_unicode_ci", None), ("4e1f9a2", None), ("10.0.3.12", None),
    ("user@example.com", None), ("${DB_PASSWORD}", None),
])
def test_value_shape(value: str, expected: str | None) -> None:
    assert shape(value) == expected


@pytest.mark.parametrize("value", ["SHA256withRSA", "Base64Encoder", "IPv4Address", "x86_64", "arm64v8"])
def test_identifiers_are_not_credential_shaped(value: str) -> None:
    assert shape(value) != "medium"  # never masked on their own near a cue
