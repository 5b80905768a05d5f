"""Credentials stated near a cue, not right after it (issue 34, ruleset 1.8.0): the value on the
line after or before the line naming it, far from its cue on the same line, linked back to a cue
after it, a passphrase of plain words, a masked value continued on the next line, a device or
network login "label: name / value", a code list above its cue.

Each family has cases that must be masked and near misses that must stay. The phrasings were
written for these tests, not copied from tests/data/redaction_eval; values are random strings made
up here, none is a real credential.
"""

from __future__ import annotations

import pytest

from redaction import redact

MASKED = {
    "value on the next line": [
        ("The password is:\n\nQx8#mW2zLp", ["Qx8#mW2zLp"]),
        ("Password for the NAS:\n```\nVt7!kQ2mWz\n```", ["Vt7!kQ2mWz"]),
        ("User: root password?\n\nAssistant: Here it is:\n\n    Lm9$qW2zKp", ["Lm9$qW2zKp"]),
        ("new admin password below\nHq3#zW8mTv", ["Hq3#zW8mTv"]),
        ("passphrase\n> raven-tulip-canyon-55", ["raven-tulip-canyon-55"]),
        ("User: what's the db password?\n\nAssistant: Can you paste it?\n\nUser: Fenwick%Otter52", ["Fenwick%Otter52"]),
        ("[11:02] mo: what's the guest wifi pw\n[11:03] kai: t4rq9mzx2w", ["t4rq9mzx2w"]),
        ("Assistant: Which passphrase did you pick?\n\nUser: lantern mosaic puffin glacier", ["lantern mosaic puffin glacier"]),
    ],
    "answers in more chat formats": [
        ("**User:** what's the password for the NAS?\n\n**Assistant:** Qm4$zW8rTv", ["Qm4$zW8rTv"]),
        ("<ravi> what's the admin pw for grafana\n<ops> Qm4$zW8rTv", ["Qm4$zW8rTv"]),
        ("ravi  10:42 AM\nwhat's the staging db password?\nops  10:43 AM\nQm4$zW8rTv", ["Qm4$zW8rTv"]),
        ("On Mon, Ravi wrote:\n> what's the password for the shared mailbox?\n\nIt's Qm4$zW8rTv — please don't forward this.",
         ["Qm4$zW8rTv"]),
        ("User: what's the passphrase for the backup key?\n\nAssistant: It's maple cactus violin harbor.",
         ["maple cactus violin harbor"]),
    ],
    "value on the line before": [
        ("```\nBx7#qW2zLm\n```\n^ that's the password for the replica", ["Bx7#qW2zLm"]),
        ("Gw3$kL8mQz\nthat one is the vault password, keep it safe", ["Gw3$kL8mQz"]),
        ("User: rook_harbor31!\nthat's the password, user is etl", ["rook_harbor31!"]),
    ],
    "value far from its cue or linked back to it": [
        ("Zr8#kQ2mWx — I set it last Tuesday after the audit found the old one in a log, it's the new root password",
         ["Zr8#kQ2mWx"]),
        ("I'm pasting Tq7!wL2mKz here so I don't forget; the on-call doc says it's the break-glass password.",
         ["Tq7!wL2mKz"]),
        ("orchid_324 — password for the kiosk", ["orchid_324"]),
        ("try tundra407 (that's the admin password, not mine)", ["tundra407"]),
        ("Use HarborFjordYak88 when it prompts; it's the keystore password.", ["HarborFjordYak88"]),
        ("it reset me to QmB=ra^!7x2K and now I can't log in at all", ["QmB=ra^!7x2K"]),
        ("kata sandinya Hq8!zP2m@Lw ya", ["Hq8!zP2m@Lw"]),
        ("guest wifi pass is 0k7rwq2mzt btw", ["0k7rwq2mzt"]),
        ("Use postgres with password heron_772 for the old admin", ["heron_772"]),
    ],
    "passphrase of plain words": [
        ("the passphrase is \"quartz tundra mango violet\"", ["quartz tundra mango violet"]),
        ("'falcon opal basil' is the wifi password", ["falcon opal basil"]),
        ("the LUKS passphrase on the spare disk is walnut tiger pepper comet", ["walnut tiger pepper comet"]),
        ("a senha do wifi é pebble lagoon cactus tulip12", ["pebble lagoon cactus tulip12"]),
    ],
    "masked value continued on the next line": [
        ("```\nAPI_SECRET=8f2ka9Qm4Wz7Lp3X\n5vT1nR6hB2cY9jD4\n```", ["5vT1nR6hB2cY9jD4"]),
        ("```go\nconst key = \"AKx9mQ2wLz4pT8vR\" +\n\t\"7nB3cY5hJ1fD6sK2\"\n```", ["7nB3cY5hJ1fD6sK2"]),
        ("```bash\nTOKEN=glpat-Xq8mW2zLp4xT3vR\nTOKEN+=Lp4xT3vR7nB5\n```", ["Lp4xT3vR7nB5"]),
        ("token=Zk29vQmx7Lp\nRKXm_xBkf7OZ4TrB", ["RKXm_xBkf7OZ4TrB"]),
    ],
    "device or network login": [
        ("wifi: CafeLumen / harbor nutmeg kiwi opal", ["harbor nutmeg kiwi opal"]),
        ("wifi: CafeLumen / x7kq2m9wzt", ["x7kq2m9wzt"]),
        ("IPMI: ADMIN / Tq8^zL2m=Wx", ["Tq8^zL2m=Wx"]),
        ("router login: admin // Ut6!mQ2wRz", ["Ut6!mQ2wRz"]),
    ],
    "login pair on a line naming a login": [
        ("u: grafana p: Zt7#mW2qRx", ["Zt7#mW2qRx"]),
        ("it's `monitor` / `Gh7!kL2pQz` for the dashboard", ["Gh7!kL2pQz"]),
        ("creds: admin // Ut6!mQ2wRz", ["Ut6!mQ2wRz"]),
        ("log in as `deploy` with `Orchid_1987`", ["Orchid_1987"]),
        ("admin:orchid_324@nas.home.lan", ["orchid_324"]),
    ],
    "value split over lines or joined on one": [
        ("password was split over two lines in the sticky note:\nVx7!kQ2m\nWz9#pL4t", ["Vx7!kQ2m", "Wz9#pL4t"]),
        ("```bash\nexport GITHUB_TOKEN=\"ghp_4kQ9mW2zLp8xT3vR\"\"7nB5cY1hJ6fD0sA2Lk\"\n```", ["7nB5cY1hJ6fD0sA2Lk"]),
    ],
    "Wi-Fi keys": [
        ("WPA2 key for the office network is MarbleHeronTulipCanyon", ["MarbleHeronTulipCanyon"]),
        ("config wifi-iface\n    option ssid 'Lab'\n    option key 'Rm8!qL2zWt'", ["Rm8!qL2zWt"]),
    ],
    "token read out in groups of five": [
        ("reading it off the screen: 7f3e9 3a26e 101bd 8d812 379cb 3f0c1 4b7cf a2533",
         ["7f3e9", "3a26e", "101bd", "a2533"]),
    ],
    "code list above its cue": [
        ("```\n3a7f1-9c2e4\nb81d0-4f7a2\n6e2c9-d1b38\n90f4a-7c3e1\n```\n^ those are the recovery codes from the Google account",
         ["3a7f1-9c2e4", "b81d0-4f7a2", "6e2c9-d1b38", "90f4a-7c3e1"]),
    ],
    "code lists in more forms": [
        ("my 2FA recovery codes are 7kq2m-9zw4p, 3tx8r-5vn1q and 6hb4w-2mz9k",
         ["7kq2m-9zw4p", "3tx8r-5vn1q", "6hb4w-2mz9k"]),
        ('these are my 2fa recovery codes: ["7kq2m-9zw4p", "3tx8r-5vn1q", "6hb4w-2mz9k", "9pl3x-7xq2b"]',
         ["7kq2m-9zw4p", "9pl3x-7xq2b"]),
        ("Recovery codes — 7kq2m-9zw4p · 3tx8r-5vn1q · 6hb4w-2mz9k · 9pl3x-7xq2b", ["7kq2m-9zw4p", "9pl3x-7xq2b"]),
        ("kody zapasowe:\n1. 48213957\n2. 90817263\n3. 37462819\n4. 65029384\n5. 12983746", ["48213957", "12983746"]),
        ("резервные коды: 4821-3957, 9081-7263, 3746-2819, 6502-9384", ["4821-3957", "6502-9384"]),
        ("here are the 2FA backup codes for the Slack admin: 839201, 402918, 591037, 284610, 730195",
         ["839201", "730195"]),
        ("códigos de respaldo: 9281-7364, 5019-2837, 6620-1948", ["9281-7364", "6620-1948"]),
        ("I used 7kq2m-9zw4p already; the remaining recovery codes are 3tx8r-5vn1q, 6hb4w-2mz9k, 9pl3x-7xq2b",
         ["3tx8r-5vn1q", "9pl3x-7xq2b"]),
    ],
    "URL-encoded values": [
        ("https://p.acme.io/go?u=%2Flogin%3Fuser%3Dops%26password%3Dq%2526z%253FK%2540-%2526Wm4rT8v",
         ["q%2526z%253FK%2540-%2526Wm4rT8v"]),
        ("location: https://a.io/next?continue=https%3A%2F%2Fapi.a.io%2Fexport%3Fkey%3D"
         "9c1e7b2d4f6a0c5e8b1d9f3a7c2e3f8a1c9e7b2d", ["9c1e7b2d4f6a0c5e8b1d9f3a7c2e3f8a1c9e7b2d"]),
        ("state=%7B%22password%22%3A%22Rv7%21qM3xLz%22%7D", ["Rv7%21qM3xLz"]),
    ],
    "passwords holding %…% or =": [
        ("PASSWORD=Q%MN%KD%~6.wB$#=*@3c", ["Q%MN%KD%~6.wB$#=*@3c"]),
        ("User: remind me the sudo password\n\nAssistant: You told me it's `Wva=cyb=6G~.d-uXH`.", ["Wva=cyb=6G~.d-uXH"]),
    ],
    "key named by what it is": [
        ("aws configure set aws_secret_access_key Qm4Wz7Lp3X/a8f2k5vT1nR6hB2cY9jD4sK8mW2zQ", ["Qm4Wz7Lp3X/a8f2k5vT1nR6hB2cY9jD4sK8mW2zQ"]),
        ("secret access key for the archive bucket = Hx8mQ2wLz4pT9vR7nB3cY5hJ1fD6sK2q+Lp4xT3v",
         ["Hx8mQ2wLz4pT9vR7nB3cY5hJ1fD6sK2q+Lp4xT3v"]),
        ("unseal key 2: 7Hq2Kp9WLm3XZt8RVb6NQs4J/a8f2k5vT1nR6hB2cY9j+D4sK8mW2zQm4Wz7", ["7Hq2Kp9WLm3XZt8RVb6NQs4J/a8f2k5vT1nR6hB2cY9j+D4sK8mW2zQm4Wz7"]),
    ],
    "2FA key in German": [
        ("Zwei-Faktor-Schlüssel: JBSWY3DPEHPK3PXPQ7RT4WZA", ["JBSWY3DPEHPK3PXPQ7RT4WZA"]),
    ],
}

KEPT = [
    "The password is:\n\nnot something I'll paste here, ask Ana.",
    "Password for the NAS:\n```\n<in 1Password>\n```",
    "passphrase\n> see the vault entry ops/gpg",
    "```\nmake build\n```\n^ that's the command that asks for the password",
    "the password field\nlabel: Password\ntype: password",
    "User: what's the password policy?\n\nAssistant: Here it is:\n\n    min length 12, rotate every 90 days",
    "By default, MarkLogic admin username will be set to `admin` and the password will be set to a random value.",
    "```yaml\n- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db-creds\n      key: password\n```",
    "the password is saved somewhere safe now",
    "the password is stored in the team vault",
    "my password manager is 1Password8 and it syncs fine",
    "python3 is the interpreter; the password prompt comes from sudo",
    "Received 8192 of 8192 (100.0%), key: Linux-node-8f3a2c91e4b7d5a6",
    "path: src / lib",
    "wifi: GuestNet / open network, no password",
    "version: 1.2.3 / 1.3.0",
    "password=***\nsee the docs",
    "Order numbers: 48213, 90817, 77431 and 55210",
    "```\nabc1234\ndef5678\n```\n^ those are the commits that touched the recovery codes",
    "User: what's the wifi password?\n\nAssistant: I don't know it, ask the front desk.",
    "log in with your SSO account / Okta2 profile",
    "console | Chrome120 | Windows11",
    "the api key header is X-Api-Key, see docs/auth.md#keys",
    "(base) $ echo -n 'username' | base64\ndXNlcm5hbWU=",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII3MQOmh5/Zk8qW2xLp4Tv7nR3cB5hY1J9kD6sF0aG ci-bot@laptop",
    "type=LOGIN_ERROR, realmId=master, clientId=nexus, userId=3f8a1c9e, ipAddress=127.0.0.1",
    "openssl req -x509 -new -key ca.key -out ca.crt -subj \"/CN=ROOT-CA/O=Acme2.net\"",
    "commits: 3f9a2c1 8e7d6c5 b4a3928 1706f5e 4d3c2b1 a0b1c2d",
    "GPG fingerprint: 4A2B 9C3D 7E1F 0A5B 8C6D 2E4F 1A3B 5C7D 9E0F 2A4B",
    "error codes: 4821, 9081, 3746 and 6502",
    "backup job ids: 48213957 48213958 48213959 48213960",
    "recovery took 4821 ms, 9081 ms, 3746 ms, 6502 ms",
    "Backup codes:\n- printed, in the safe\n- a copy in 1Password",
    "commits in the backup branch:\n3f9a2c1\n8e7d6c5\nb4a3928\n1706f5e",
    "backup sizes: 120391, 120455, 120502, 120611, 120733 bytes",
    "https://x.io/cb?state=%7B%22user%22%3A%22bob%22%2C%22next%22%3A%22%2Fhome%22%7D",
    "https://x.io/r?u=%2Fsearch%3Fkey%3Dpython%26page%3D2",
    "set PATH=%APPDATA%\\npm;%PATH% before running it; the password prompt comes later",
    "sslmode=require is set in the password-less connection string",
    "see the unseal key docs at /usr/share/doc/vault/UnsealKeyRotationGuide2024Edition",
    "recovery key saved to docs/vault/recovery/KeysBackup2024Final.txt",
    "unseal key shares: 5, threshold: 3",
    "User: what's the password for the NAS?\n\nAssistant: It's in 1Password, under NAS.",
    "<ravi> what's the admin pw for grafana\n<ops> Monday2, ask Nadia",
    "<ravi> which password manager do we use\n<ops> Bitwarden2024 for the team",
]


@pytest.mark.parametrize(("text", "secrets"), [c for cases in MASKED.values() for c in cases],
                         ids=[f"{fam}-{i}" for fam, cases in MASKED.items() for i in range(len(cases))])
def test_masked(text: str, secrets: list[str]) -> None:
    out = redact(text).text
    for s in secrets:
        assert s not in out, out
    assert redact(out).text == out


@pytest.mark.parametrize("text", KEPT)
def test_kept(text: str) -> None:
    assert redact(text).text == text
