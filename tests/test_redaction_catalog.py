"""Issue 34: breadth from the scanner catalogs (redaction/catalog.py) and the
public values that must stay (redaction/public.py). Values here are made up
in each format's published shape; near misses are what must not change."""

from __future__ import annotations

import pytest

from redaction import redact

UUID1 = "9da5da9c-4218-4c22-aed6-b5c8baebfff5"
UUID2 = "2f2b54b7-0141-4ba7-8fcd-ab7d17a60547"

CAUGHT = [
    # password hashes (Nosey Parker hashes.yml, hashcat example hashes)
    ("$1$OKgLCmVl$d02jECa4DXn/oXX0R.MoQ/", "$1$OKgLCmVl$d02jECa4DXn/oXX0R.MoQ/"),
    ("hash: $2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",
     "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW"),
    ("$5$rounds=5000$GX7BopJZJxPc/KEK$le16UF8I2Anb.rOrn22AUPWvzUETDGefUmAV8AZkGcD",
     "$5$rounds=5000$GX7BopJZJxPc/KEK$le16UF8I2Anb.rOrn22AUPWvzUETDGefUmAV8AZkGcD"),
    ("root:$6$qoE2letU$wWPRl.PVczjzeMVgjiA8LLy2nOyZbf7Amj3qLIL978o18gbMySdKZ7uepq9tmMQXxyTIrS12Pln.2Q/6Xscao0:19700:0:::",
     "$6$qoE2letU$wWPRl.PVczjzeMVgjiA8LLy2nOyZbf7Amj3qLIL978o18gbMySdKZ7uepq9tmMQXxyTIrS12Pln.2Q/6Xscao0"),
    ("admin:$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7:",
     "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7"),
    ("$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHRzYWx0$RdescudvJCsgt3ub+b+dWRWJTmaaJObG",
     "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHRzYWx0$RdescudvJCsgt3ub+b+dWRWJTmaaJObG"),
    ("wp hash $P$984478476IagS59wHZvyQMArzfx58u.", "$P$984478476IagS59wHZvyQMArzfx58u."),
    ("$krb5asrep$23$svc_sql@CORP.LOCAL:3e156ada591263b8aab0965f5aebd837$007497cb51b6c8116d6407a782ea0e1c5402b17d",
     "$krb5asrep$23$svc_sql@CORP.LOCAL:3e156ada591263b8aab0965f5aebd837$007497cb51b6c8116d6407a782ea0e1c5402b17d"),
    ("$krb5tgs$23$*svc$CORP.LOCAL$http/web*$3e156ada591263b8aab0965f5aebd837$007497cb51b6c8116d6407a7",
     "$krb5tgs$23$*svc$CORP.LOCAL$http/web*$3e156ada591263b8aab0965f5aebd837$007497cb51b6c8116d6407a7"),
    ("bob::CORP:af36ac288df64066:145d73a0391b5a8ee279d44591776b2b:0e382aa555e7a83340fbff43608023bf3735f01b5adcc746",
     "bob::CORP:af36ac288df64066:145d73a0391b5a8ee279d44591776b2b:0e382aa555e7a83340fbff43608023bf3735f01b5adcc746"),
    ("userPassword: {SSHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "W6ph5Mm5Pz8GgiULbPgzG37mj9g="),
    # prefixed vendor formats
    (f"url = 'https://outlook.office.com/webhook/{UUID1}@{UUID2}/IncomingWebhook/1bf66ccbb8e745e791fa6e6de0cf465b/{UUID1}'",
     f"{UUID1}@{UUID2}/IncomingWebhook/1bf66ccbb8e745e791fa6e6de0cf465b/{UUID1}"),
    (f"https://acme.webhook.office.com/webhookb2/{UUID1}@{UUID2}/IncomingWebhook/4d2b3a16113d47b080b7a083b5a5e533/{UUID2}",
     f"{UUID1}@{UUID2}/IncomingWebhook/4d2b3a16113d47b080b7a083b5a5e533/{UUID2}"),
    ("DT_API_KEY odt_KTJlDq2AGGGlqG4riKdT7p980AW8RlU5", "odt_KTJlDq2AGGGlqG4riKdT7p980AW8RlU5"),
    ("sec-c-3lAIe7ZPgkKKvgEWAcXdWF5EhRKdV411LsnzphEWF8Elpxkp", "sec-c-3lAIe7ZPgkKKvgEWAcXdWF5EhRKdV411LsnzphEWF8Elpxkp"),
    ("I pasted tkn.v1_NjJmYWE1MGQtZDFkZC00NmU5LThjZWItM2U2Njg5MWU2ZDhj into chat",
     "tkn.v1_NjJmYWE1MGQtZDFkZC00NmU5LThjZWItM2U2Njg5MWU2ZDhj"),
    # vendor cue + exact shape, every operator of gitleaks' sample forms
    ('$linearToken .= "aa8ac56739e6c8988b1243d639c2e254"', "aa8ac56739e6c8988b1243d639c2e254"),
    ('telegram_TOKEN += "359053514:AkjHm7nOvNwYmFpQYVp26xgkBoxn_p9c5Oz"', "359053514:AkjHm7nOvNwYmFpQYVp26xgkBoxn_p9c5Oz"),
    ("sendbirdToken,12b9932f-867d-4965-beff-598a2a94d14d,", "12b9932f-867d-4965-beff-598a2a94d14d"),
    ("codecov_token: |\n  jk3nqf2xa1n8vmxmg2nwle22epmg2bem", "jk3nqf2xa1n8vmxmg2nwle22epmg2bem"),
    ("sonar_token: >\n  wg13z9xxpqaus6lr80pfanrayp1qo3dzhfju8hry", "wg13z9xxpqaus6lr80pfanrayp1qo3dzhfju8hry"),
    ("messagebird client id: 7a6f8c0f-fd21-40ce-b48c-80b355df932c", "7a6f8c0f-fd21-40ce-b48c-80b355df932c"),
    ("GITEA_TOKEN=3b6c2a7f9e1d4c8b0a5f6e7d8c9b0a1f2e3d4c5b", "3b6c2a7f9e1d4c8b0a5f6e7d8c9b0a1f2e3d4c5b"),
    ("the gitea access token is 3b6c2a7f9e1d4c8b0a5f6e7d8c9b0a1f2e3d4c5b", "3b6c2a7f9e1d4c8b0a5f6e7d8c9b0a1f2e3d4c5b"),
    ('$sumoToken .= "suzig14MawXEdD"', "suzig14MawXEdD"),
    # connection URIs whose password holds characters a URL parser stops at
    ("DATABASE_URL=mysql://grafana:+up&MJ8DY=qoEoX9Q#vQ@grafana.ops.lan:3306/shop", "+up&MJ8DY=qoEoX9Q#vQ"),
    ("connect with postgres://ci-bot:Waln@ut2007*@10.20.4.17:5432/app", "Waln@ut2007*"),
]


@pytest.mark.parametrize("text,secret", CAUGHT, ids=[c[1][:24] for c in CAUGHT])
def test_catalog_format_is_masked_everywhere_and_idempotent(text: str, secret: str) -> None:
    out = redact(text).text
    assert secret not in out, out
    assert redact(out).text == out
    if "webhookb2" not in text:  # an older rule masks that URL from its host on: the repeat is the host+path
        assert secret not in redact(text + "\nagain: " + secret).text


def test_connection_uri_keeps_host_and_path() -> None:
    out = redact("postgres://ci-bot:Waln@ut2007*@10.20.4.17:5432/app").text
    assert "@10.20.4.17:5432/app" in out and "ci-bot" in out


KEPT = [
    # near misses of the new formats
    "http://localhost:3000/@vite/client",
    "see https://example.com/a:b@c for details",
    "the linear model has 32 features",
    "price $5$ per unit and $6$ per pack",
    "std::vector<int>::iterator it;",
    "heroku run rails console",
    "sumo wrestling is popular",
    # public values after "key" (issue 34, precision)
    "gpg --keyserver hkps://keyserver.ubuntu.com --recv-keys 4F25E3B6A3D9C0B1E8F7A6B5C4D3E2F1A0B9C8D7",
    "sudo apt-key adv --keyserver keyserver.ubuntu.com --recv 7EA0A9C3F273FCD8",
    "    $ gpg --send-keys 17ACBA8DFA970E17\n    gpg: sending key 17ACBA8DFA970E17 to hkps://keys.openpgp.org",
    "the full fingerprint of the key, so nobody can forge a key = `3B9191625F3B1F1BF5DD3B47673A02042F6B6B7F`.",
    "      - uses: actions/cache@v3\n        with:\n          path: ~/.npm\n"
    "          key: Linux-node-8f3a9c2e1b7d4a6f0e5c3b2a1d9e8f7c6b5a4d3e",
    "  key: v1-deps-3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
    "2020-10-15T11:29:25.5783211Z   key: Linux-hub-cache-20201015112925559",
    "$ kubectl describe secret robot-token-66z81\nName:\t\trobot-token-66z81\nNamespace:\ttest",
    "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n"
    "  ca.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lVRXhhbXBsZTEyMzQ1Njc4OTBhYmNkZWYK",
    "admin password: **_actualpassword_**",
    "client: 3f2504e0-4f89-41d3-9a0c-0305e82c3301",
]


@pytest.mark.parametrize("text", KEPT, ids=[k[:30] for k in KEPT])
def test_public_values_and_near_misses_stay(text: str) -> None:
    r = redact(text)
    assert r.text == text, r.findings


def test_cache_key_cue_does_not_shield_a_token_named_key() -> None:
    text = "api_key: Zk3u9QpL2xVb7NwE4rTy8sHa"
    assert "Zk3u9QpL2xVb7NwE4rTy8sHa" not in redact(text).text


def test_gpg_cue_does_not_shield_other_secrets() -> None:
    text = "gpg --recv-keys 7EA0A9C3F273FCD8\nexport GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    out = redact(text).text
    assert "7EA0A9C3F273FCD8" in out and "ghp_16C7e42F292c6912E7710c838347Ae178B4a" not in out


def test_private_key_in_a_certificate_blob_is_not_public() -> None:
    import base64

    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n"
    blob = base64.b64encode(pem).decode()
    text = f"apiVersion: v1\nkind: Secret\ndata:\n  tls.crt: {blob}\n"
    assert blob not in redact(text).text
