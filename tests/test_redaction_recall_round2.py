"""Credentials stated in chat, round 2 of issue 34 (ruleset 1.7.0): word passphrases, keypad codes
and PINs, code lists, secrets after secret/token words, Wi-Fi QR payloads, hex keys, groups of four.

Each family has cases that must be masked and near misses that must stay. The phrasings were
written for these tests, not copied from tests/data/redaction_eval; values are random strings made
up here, none is a real credential.
"""

from __future__ import annotations

import pytest

from redaction import redact

MASKED = {
    "word passphrase after a cue": [
        ("the vpn password is mango-trellis-otter", ["mango-trellis-otter"]),
        ("Log in as carol, password: quill.ember.sparrow.dune", ["quill.ember.sparrow.dune"]),
        ("for the printer admin the passphrase is now basil_comet_harbor", ["basil_comet_harbor"]),
        ("cobalt_lemon_fjord was the password we picked for the NAS", ["cobalt_lemon_fjord"]),
        ("User: what's the router password again?\n\nAssistant: It's tundra-pickle-heron.",
         ["tundra-pickle-heron"]),
        ("[09:12] ana: what was the jenkins password?\n[09:13] ben: walnut.osprey.meadow",
         ["walnut.osprey.meadow"]),
        ("when sudo asks for the password, type OrchidFalconRiver42", ["OrchidFalconRiver42"]),
    ],
    "passphrase in a command or assignment": [
        ("7z x archive.7z -pgoblin_maple_anvil_71", ["goblin_maple_anvil_71"]),
        ("unrar x -pHeronBasilCopper88 dump.rar", ["HeronBasilCopper88"]),
        ("docker run -e MYSQL_ROOT_PASSWORD=lagoon.thistle.parsnip mysql:8", ["lagoon.thistle.parsnip"]),
        ("the ops account (svc-backup:pepper_walrus_canyon_912) can only read", ["pepper_walrus_canyon_912"]),
        ("echo b3R0ZXJfbWFwbGVfcXVhcnR6 | base64 -d", ["b3R0ZXJfbWFwbGVfcXVhcnR6"]),
    ],
    "keypad codes and PINs": [
        ("gate code for the parking lot is 48213", ["48213"]),
        ("the safe code: 7302, don't tell anyone", ["7302"]),
        ("my SIM is locked, PUK 90817263", ["90817263"]),
        ("her phone pin 5821 in case the laptop asks for approval", ["5821"]),
        ("gpg --card-edit then passwd; or ykman piv access change-pin --pin 246810 --new-pin 918273",
         ["918273"]),
        ("keypad code at the back entrance: 604917", ["604917"]),
    ],
    "code lists": [
        ("Bob wrote:\n> my backup codes:\n> - 7f3a2-c91d0\n> - 0b5e8-44a7f\n> - d2c61-9e0b3\n> - 51af7-3c8d2",
         ["7f3a2-c91d0", "0b5e8-44a7f", "d2c61-9e0b3", "51af7-3c8d2"]),
        ("recovery codes: 61830274 | 95027316 | 38472019 | 70291845 | 24680913",
         ["61830274", "95027316", "38472019", "70291845", "24680913"]),
    ],
    "secret or token stated in prose": [
        ("our GitLab webhook secret token is 5f0c2a9e7d14b3866ea0f3d5c2b71948",
         ["5f0c2a9e7d14b3866ea0f3d5c2b71948"]),
        ("X-Signature-Secret should be 0a8f3c91e2b74d56a7c0e9f13b5d2486, otherwise 403",
         ["0a8f3c91e2b74d56a7c0e9f13b5d2486"]),
        ("I pasted the client secret from the portal: Wq8#vLm2Rt9zKp4x", ["Wq8#vLm2Rt9zKp4x"]),
        ("The Flask SECRET_KEY is z!8Qm#2Lp@9Xv$4Rt%7Kw^1Nb&6Yc*3Hd(5Js)0Gf", ["z!8Qm#2Lp@9Xv$4Rt%7Kw^1Nb&6Yc*3Hd(5Js)0Gf"]),
        ("stripe says: your webhook signing secret is whsec_Rk2+/Lq9Vx7mT3pZa8Wc5Ny1Hb4Jd6Fs (^C to quit)",
         ["whsec_Rk2+/Lq9Vx7mT3pZa8Wc5Ny1Hb4Jd6Fs"]),
        ("I set the Gitea webhook secret to falcon_pebble_lantern_204", ["falcon_pebble_lantern_204"]),
        ("new Opsgenie token, paste it into the integration: k_QwErTy77uiOPzxCV09", ["k_QwErTy77uiOPzxCV09"]),
    ],
    "wifi": [
        ("WIFI:S:Guest Lab;T:WPA;P:meadow+1187;H:false;;", ["meadow+1187"]),
        ("le code wifi c'est Brise#Marine77 pour le bureau", ["Brise#Marine77"]),
        ("guest wifi password: kettle-ribbon-sonnet", ["kettle-ribbon-sonnet"]),
        ("WiFi: network Casa-Ruiz, key Lmq7!zP2xW", ["Lmq7!zP2xW"]),
        ('wpa_passphrase HomeNet "maple_river_quartz_7"', ["maple_river_quartz_7"]),
    ],
    "hex key in a decoding call": [
        ("HMAC_KEY = bytes.fromhex('9c1e5a7b3d2f40861a0e9b7c5d3f2e18a4b6c8d0e2f4a6b8')",
         ["9c1e5a7b3d2f40861a0e9b7c5d3f2e18a4b6c8d0e2f4a6b8"]),
        ("secret = ['3e7a9c1b5d2f4e6a8c0b1d3f5a7c9e2b'].pack('H*')", ["3e7a9c1b5d2f4e6a8c0b1d3f5a7c9e2b"]),
    ],
    "groups of four": [
        ("reading the key off the label: k2m7 q9x4 p3r8 z6w1 n5t0 h8c3", ["k2m7", "q9x4", "p3r8", "z6w1", "n5t0", "h8c3"]),
        ("it shows B7KQ 4MZP X2RW 9TNV H3YC L8DF on the screen", ["B7KQ", "4MZP", "X2RW", "9TNV", "H3YC", "L8DF"]),
    ],
}

STAYS = {
    "wifi": [
        "the wifi keeps dropping, key rotation on the AP is weekly",
        "WPA2 passphrase length must be 8 to 63 characters",
        "ssid and key are in the vault under infra/wifi",
        "wifi settings: the key type is WPA2-PSK-CCMP",
    ],
    "word passphrase after a cue": [
        "set the password via read_secret_file in config",
        "the password is stored in the vault under deploy.prod.creds",
        "password reset goes through the self_service_portal",
        "see correct-horse-battery for the xkcd joke",
        "the token is ctrl+shift+p2.",
    ],
    "keypad codes and PINs": [
        "pin the version to 3000",
        "alarm code 404 means the sensor is offline",
        "the door code changed in 2019",
        "pip install --pin-deps requirements.txt",
    ],
    "secret or token stated in prose": [
        "the commit sha of the secret rotation is 3b9f0c2a7d14e5866ea0f3d5c2b71948aa01c3de",
        "Cache restored from key: node-cache-Linux-x64-npm-5a0f2c9e7d14b3866ea0f3d5c2b71948aa01c3de",
        "the token is required for every call",
        "rotate the secret key: see docs/security.md",
        "request id of the failed token refresh: 5f0c2a9e-7d14-4b38-8ea0-f3d5c2b71948",
        "the token format is JWT-RS256-with-kid-v2",
        "the secret name in the cluster is db-credentials-prod-v2",
        "the refresh token endpoint is /oauth2/v1/token?grant_type=refresh_token",
        "access token TTL, as set in Keycloak: accessTokenLifespan=300",
    ],
    "base64 and hex": [
        "Event body (base64): eyJzdGF0dXMiOiJkb25lIiwiY291bnQiOjd9",
        "digest = bytes.fromhex('9c1e5a7b3d2f40861a0e9b7c5d3f2e18a4b6c8d0e2f4a6b8') # sha256 of the file",
    ],
    "groups of four": [
        "GPG fingerprint: 3A1F 9C2B 7D4E 0F81 6B5A C3D2 E9F0 1A7B 8C6D 2E4F",
        "IBAN DE44 5001 0517 5407 3249 31 for the invoice",
        "card 4111 1111 1111 1111 expired",
        "the words were: this that what from with have",
    ],
}


@pytest.mark.parametrize(("family", "text", "secrets"),
                         [(f, t, s) for f, cases in MASKED.items() for t, s in cases])
def test_stated_credentials_are_masked(family: str, text: str, secrets: list[str]) -> None:
    out = redact(text).text
    assert not [s for s in secrets if s in out], (family, out)
    assert redact(out).text == out  # idempotent


@pytest.mark.parametrize(("family", "text"), [(f, t) for f, cases in STAYS.items() for t in cases])
def test_near_misses_stay(family: str, text: str) -> None:
    assert redact(text).text == text, family


def test_every_occurrence_of_a_stated_passphrase_is_masked() -> None:
    text = "the wifi password is lemon-harbor-quartz; again: lemon-harbor-quartz"
    assert "lemon-harbor-quartz" not in redact(text).text


ANSWERS = [
    ("User: do you remember the staging db password?\n\nAssistant: Yes, you told me earlier it was heron-maple-flint.",
     "heron-maple-flint"),
    ("User: which password did we put on the NAS?\n\nAssistant: We set it to `Bq4!lantern` on Monday.", "Bq4!lantern"),
    ("User: remind me of the vpn password\n\nAssistant: From your notes: sorrel_gannet_quince (rotate it).",
     "sorrel_gannet_quince"),
    ("[10:01] sam: anyone have the grafana password?\n[10:02] lee: try pumice_walrus_ivy\n[10:02] sam: thanks",
     "pumice_walrus_ivy"),
    ("use ember_walrus_tide, that's the new vault password", "ember_walrus_tide"),
    ("orchid_lumen_basalt: that's the password for staging", "orchid_lumen_basalt"),
]
ANSWERS_STAY = [
    "User: what's the password?\n\nAssistant: I don't have it, check 1Password.",
    "User: what's the password policy?\n\nAssistant: At least 12 characters, see docs/security.md.",
    "User: where is the db password?\n\nAssistant: It is in the vault at secret/data/db, use `vault kv get`.",
    "User: how do I pass the password?\n\nAssistant: with $env:DB_PASSWORD in PowerShell.",
    "the password must be $env:DB_PASSWORD at runtime",
]


@pytest.mark.parametrize(("text", "secret"), ANSWERS)
def test_a_password_given_in_the_answer_or_pointed_back_at_is_masked(text: str, secret: str) -> None:
    assert secret not in redact(text).text


@pytest.mark.parametrize("text", ANSWERS_STAY)
def test_answers_without_a_password_and_env_references_stay(text: str) -> None:
    assert redact(text).text == text


SPLIT = [
    ("the token is too long for one message, first half: ghp_8fK2mQ9xLw3Rt7Vb\nsecond half: Zp4Nc6Hy1Jd5Ks0Ga2Eu",
     ["ghp_8fK2mQ9xLw3Rt7Vb", "Zp4Nc6Hy1Jd5Ks0Ga2Eu"]),
    ("```\nAuthorization: Bearer tk.live.Qm8\nZx2Lw9Rt7Vb3Np5Yc8Hd1Fj4Gs6K\n```\n(wrapped)", ["tk.live.Qm8", "Zx2Lw9Rt7Vb3Np5Yc8Hd1Fj4Gs6K"]),
    ("the api key starts with ak-Qm8Zx2Lw and ends with 9Rt7Vb3Np5Yc", ["ak-Qm8Zx2Lw", "9Rt7Vb3Np5Yc"]),
]
SPLIT_STAY = [
    "the api key docs: part 1 covers setup, part 2 covers rotation",
    "rotate the token weekly; the rest is in docs/rotation-v2.md",
    "the key file starts with -----BEGIN and ends with -----END",
    "token refresh: first half of the week on v1.2.3, second half on v1.3.0",
    "password field\nsrc/components/PasswordField2.tsx",
]


@pytest.mark.parametrize(("text", "secrets"), SPLIT)
def test_a_secret_given_in_parts_is_masked_in_every_part(text: str, secrets: list[str]) -> None:
    out = redact(text).text
    assert not [s for s in secrets if s in out], out


@pytest.mark.parametrize("text", SPLIT_STAY)
def test_parts_that_are_no_secret_stay(text: str) -> None:
    assert redact(text).text == text


CODE_LISTS = [
    ("Here are the Discord backup codes\n```\nk7x2m9q4  p3w8z1n6\nb5c9v2t7  h4j8r1y3\n```",
     ["k7x2m9q4", "p3w8z1n6", "b5c9v2t7", "h4j8r1y3"]),
    ("if you get locked out use any of: 71820394 85301276 40958127 63019482",
     ["71820394", "85301276", "40958127", "63019482"]),
]


@pytest.mark.parametrize(("text", "codes"), CODE_LISTS)
def test_codes_in_columns_or_after_a_lockout_cue_are_masked(text: str, codes: list[str]) -> None:
    out = redact(text).text
    assert not [c for c in codes if c in out], out


def test_a_table_of_build_ids_after_a_backup_word_stays() -> None:
    text = "backup jobs last night:\nbuild-1042  ok\nbuild-1043  ok\nbuild-1044  failed"
    assert redact(text).text == text


@pytest.mark.parametrize(("text", "secret"), [
    ("account: jenkins / Tr0mbone.Velvet", "Tr0mbone.Velvet"),
    ("creds: svc-backup / pepper_walrus_canyon", "pepper_walrus_canyon"),
])
def test_a_login_pair_after_an_account_or_creds_cue_is_masked(text: str, secret: str) -> None:
    assert secret not in redact(text).text


@pytest.mark.parametrize("text", [
    "my account is locked after 3 attempts",
    "account: 123456789012 / us-east-1",
    "service account: ci-bot@project-42.iam.gserviceaccount.com",
    'User: arn:aws:sts::"my account number":assumed-role/Monkey/i-e6 is not authorized to perform: sts:AssumeRole',
])
def test_account_words_without_a_pair_stay(text: str) -> None:
    assert redact(text).text == text


@pytest.mark.parametrize(("text", "secret"), [
    ("nadia: what's the synology admin password?\nlukas: Fj7#kQ2vLm9\nnadia: thx", "Fj7#kQ2vLm9"),
    ("Q: what was the wifi password at the offsite?\nA: Brise#Marine77", "Brise#Marine77"),
    ("Priya: anyone know the grafana password?\nOmar: pumice-walrus-ivy", "pumice-walrus-ivy"),
])
def test_the_answer_in_a_pasted_chat_log_is_masked(text: str, secret: str) -> None:
    assert secret not in redact(text).text


@pytest.mark.parametrize("text", [
    "Username: admin\nPassword policy: 12 chars minimum\nVersion: 3.2.1",
    "Note: the password is rotated monthly\nStatus: done",
    "Host: db.internal\nPort: 5432\nPassword: see vault",
])
def test_labelled_fields_are_no_chat_messages(text: str) -> None:
    assert redact(text).text == text


def test_a_mysql_account_in_an_error_is_no_password_but_the_password_for_it_is() -> None:
    err = "ERROR 1045 (28000): Access denied for user 'root'@'172.18.0.3' (using password: YES)"
    assert redact(err).text == err
    assert "Quartz#Lamp19" not in redact("the password for 'root'@'localhost' is Quartz#Lamp19").text
