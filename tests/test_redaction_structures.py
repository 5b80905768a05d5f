"""Structures and split secrets (issue 34, redaction/structures.py): caught, and near misses kept.

Values are random strings made for these tests; none is a real credential.
"""

from __future__ import annotations

import base64

import pytest

from redaction import redact


def _gone(text: str, *secrets: str) -> str:
    out = redact(text).text
    for s in secrets:
        assert s not in out, (s, out)
    assert redact(out).text == out  # idempotent
    return out


CAUGHT = [
    # table_kv: a secret column, a NAME | VALUE row, CSV, a --fields header, vault kv get
    ("| host | login | pwd |\n|---|---|---|\n| db1.lan | ops | Qr7!vbn_Tz |\n| db2.lan | app | Mw3#kd_Lp9x |",
     ["Qr7!vbn_Tz", "Mw3#kd_Lp9x"]),
    ("Assistant: | stage | Secret key |\n| :-- | :-- |\n| dev | Zk4Lw9Qp2Xc7Vb1N |", ["Zk4Lw9Qp2Xc7Vb1N"]),
    ("│ KEY           │ VALUE         │\n├───────────────┼───────────────┤\n│ ADMIN_PASSWD  │ Pl4nk#Rover22 │",
     ["Pl4nk#Rover22"]),
    ("site,user,passphrase\nmail.lan,bo,Hx9-qpL2-mm7\n", ["Hx9-qpL2-mm7"]),
    ("$ tool export --cols host,user,access_token\nweb1,deploy,Tq8Kz2Lm4Np6Rs0Vw\n", ["Tq8Kz2Lm4Np6Rs0Vw"]),
    ("Key          Value\n---          -----\napi_secret   Jd83kLq0Zm2Pw7Xv\nuser         bob", ["Jd83kLq0Zm2Pw7Xv"]),
    # recovery_codes: one a line, numbered, comma-separated, after a cue
    ("Backup codes for the mail account:\n* 7hq2k9xw4p\n* m3z8r1v6yt\n* 2pw9q4kd7s\n* x8c3n6b1m5",
     ["7hq2k9xw4p", "m3z8r1v6yt", "2pw9q4kd7s", "x8c3n6b1m5"]),
    ("your one-time codes: 4821-9930, 1177-0462, 8305-6619, 5540-2897", ["4821-9930", "8305-6619"]),
    # totp, totp_spaced, grouped_token
    ("Scan failed, so type the MFA seed KZXW6YTBOI3DEMTE into the app", ["KZXW6YTBOI3DEMTE"]),
    ("otpauth://totp/Acme:bo?secret=JBSWY3DPEHPK3PXP&issuer=Acme", ["JBSWY3DPEHPK3PXP"]),
    ("the authenticator wants this setup key: qz4m 7rwk ab2t yy6n", ["qz4m 7rwk ab2t yy6n"]),
    ("token, in groups of five: ghp_q Z8k2L m4Np6 R7sT0 vW1xY 3aB5c dE7fG 9hJ2k", ["m4Np6 R7sT0"]),
    # split_code: literal concatenation, shell continuation, a wrapped line in a fence
    ('```py\napi_secret = ("Vq7Lm2Xz9Kp4Rt"\n    "Wn6Yb3Hs8Jd1")\n```', ["Vq7Lm2Xz9Kp4Rt", "Wn6Yb3Hs8Jd1"]),
    ("```sh\nexport AUTH_TOKEN=9fa3c1e07b6d4e2a\\\n58c0d7f1b3a94e6c\n```", ["58c0d7f1b3a94e6c"]),
    ("the key wrapped:\n```\nsk-Hn4Kq8Lz2Wm6Xp\n0Rt3Yv7Bc1Nd5Fg9Js2\n```", ["sk-Hn4Kq8Lz2Wm6Xp", "0Rt3Yv7Bc1Nd5Fg9Js2"]),
    # b64_pipe
    ("printf '%s' " + base64.b64encode(b"glpat-Rk8Qm2Vx7Lp4Zt9Nc3Wd").decode() + " | base64 --decode",
     [base64.b64encode(b"glpat-Rk8Qm2Vx7Lp4Zt9Nc3Wd").decode()]),
    ("TOKEN=$(base64 -d <<< " + base64.b64encode(b"Zq8pX2mN4vTk7Lw3Rs").decode() + ")",
     [base64.b64encode(b"Zq8pX2mN4vTk7Lw3Rs").decode()]),
    # urlenc_redirect: one and two layers of encoding
    ("https://sso.example.net/login?next=https%3A%2F%2Fapp.example.net%2Fcb%3Faccess_token%3DLw9Qp2Xc7Vb1NzK4%26x%3D1",
     ["Lw9Qp2Xc7Vb1NzK4"]),
    ("/r?u=https%253A%252F%252Fh.example%252F%253Fpasswd%253DTr0ut%2525Lake9%2526a%253Db", ["Tr0ut%2525Lake9"]),
]


@pytest.mark.parametrize("text,secrets", CAUGHT, ids=[f"caught{i}" for i in range(len(CAUGHT))])
def test_structures_caught(text: str, secrets: list[str]) -> None:
    _gone(text, *secrets)


def test_url_token_user_keeps_host_and_path() -> None:
    tok = "7c1f0a9be34d58e2c6b1a0f9e8d7c6b5a4f3e2d1"
    for text in (f"git clone https://{tok}@git.example.org/team/app.git",
                 f"url = https://{tok}:x-oauth-basic@github.com/acme/tools.git"):
        out = _gone(text, tok)
        assert "git.example.org/team/app.git" in out or "github.com/acme/tools.git" in out


KEPT = [
    # tables without a secret column, a key column of ids, versions, ports
    "| package | version | port |\n|---|---|---|\n| nginx | 1.25.3 | 8080 |\n| redis | 7.2.4-alpine | 6379 |",
    "| key | fingerprint |\n|---|---|\n| release | 4AEE18F83AFDEB23 |\n| backup | 9DC858229FC7DD38 |",
    "| option | type | default |\n|---|---|---|\n| password | string | none |\n| token_ttl | int | 3600 |",
    "id,name,created\n3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f,alpha,2024-01-05\n",
    "host,port,password_hint\nweb1,443,ask-ops\n",
    "Key                 Value\n---                 -----\ncreated_time        2024-03-01T10:00:00Z\nversion             3",
    # a GPG fingerprint in groups after "key"; a short-hash list after "code"
    "Key fingerprint = 9DC8 5822 9FC7 DD38 854A  E2D8 8D81 803C 0EBF CD88",
    "the code changes landed in a1b2c3d, e4f5a6b, 0c9d8e7 and f1e2d3c",
    "error codes: 404, 409, 500, 503",
    # base64 of non-secrets next to "base64"
    "echo " + base64.b64encode(b"hello world, this is a config note").decode() + " | base64 -d",
    "img: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    # URL-encoded query strings without credentials
    "https://example.com/login?next=https%3A%2F%2Fexample.com%2Fdocs%3Fpage%3D2%26lang%3Den",
    "https://example.com/r?u=https%3A%2F%2Fapi.example.com%2Fv1%3Fkey_id%3D42%26sort%3Dasc",
    # code blocks with hashes
    "```\n9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
    "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752\n```",
    'msg = ("The deploy finished"\n    "without errors")',
    # a URL user that is a name, not a token
    "git clone https://deploy-bot@git.example.org/team/app.git",
    # prose in groups after a cue
    "the key point is that we keep this flow in sync with the docs",
]


@pytest.mark.parametrize("text", KEPT, ids=[f"kept{i}" for i in range(len(KEPT))])
def test_structures_kept(text: str) -> None:
    assert redact(text).text == text
