"""Structures: grouped values, recovery codes, tables, split values, byte keys (issue 34, 1.6.0).

Recall on phrasings nobody listed, and the near misses that must stay. Each detector is written for
the shape of a structure, not a template, so these cases were written independently of
tests/data/redaction_eval. Values are random strings made for these tests; none is a real credential.
"""

from __future__ import annotations

import pytest

from redaction import redact

CAUGHT_GROUPS = [
    ("Here's the licence key: K7QX2-M9PLD-4RT8W-ZN3VB-Y6HJC",
     ['K7QX2-M9PLD-4RT8W-ZN3VB-Y6HJC']),
    ("i'll paste the api token in pieces so slack doesn't eat it: xKq3 9TzP mW2v Lr8N yB4c",
     ['xKq3 9TzP mW2v Lr8N yB4c']),
    ('Der Schlüssel lautet 7fGh2 Kp9Qx Lm3Zt Wq8Rv',
     ['7fGh2 Kp9Qx Lm3Zt Wq8Rv']),
    ('la clé API : aB3dE fG7hJ kL9mN pQ2rS',
     ['aB3dE fG7hJ kL9mN pQ2rS']),
    ("User: what's the bot token again?\n\nAssistant: it's xoxb 2211 8734 5521 Qw3rTy8UiOp",
     ['xoxb 2211 8734 5521 Qw3rTy8UiOp']),
    ('Reading it off the card: Tz8Kq Wm3Px 9vLrB c2NdF Hj7Ys',
     ['Tz8Kq Wm3Px 9vLrB c2NdF Hj7Ys']),
    ('authenticator seed: JBSW Y3DP EHPK 3PXP',
     ['JBSW Y3DP EHPK 3PXP']),
    ('key = 9f86d0 81884c 7d659a 2feaa0 c55ad0 15a3bf',
     ['9f86d0 81884c 7d659a 2feaa0 c55ad0 15a3bf']),
]

KEPT_GROUPS = [
    'GPG key fingerprint: 3AA5 C343 7141 7D2F 3C2A  BC1E 8E6F 5EDD 1C46 E5BF',
    'Key fingerprint = 9DC8 58F4 9A47 9A80 3E23  C0D2 E3D7 0B4D 3F09 7C3A',
    'We test on py38 py39 py310 py311 py312 in CI.',
    'Supported ciphers: AES256 GCM SHA384 X25519 P256',
    'Call me at +1 415 555 0100 or 0044 20 7946 0958',
    'reverted 3f94dc2 99ee35a ade02b1 7071e0c on main',
    'Built for i386 amd64 arm64 ppc64le s390x',
    'The key is to run make test before make lint, see step 2 of 3',
    'We use H264 VP9 AV1 HEVC for video',
    'the secret sauce was 3 eggs and 2 cups of flour',
    'token counts: 1024 2048 4096 8192',
    'Use the key k8s-prod-cluster-01 for the context',
    'cache key: linux-node-18-abc123-deps',
    'key ids: 4AEE18F83AFDEB23 and 1234ABCD',
    'node16 node18 node20 node22 are the runtimes',
    'Request id 7f3c-41aa-9e21-08bd ... failed',
    'My IBAN is DE89 3704 0044 0532 0130 00',
    'Press Ctrl Alt F2 to get to tty2 then F7',
    'See RFC 6238 and RFC 4226 section 5.3 for TOTP',
    'checksums: sha256 9f86d0 81884c 7d659a 2feaa0',
    'steps: build1 test2 deploy3 verify4',
]

CAUGHT_CODES = [
    ('Backup codes\nk3j9-x8p2\nm4n7-q2w8\nz9x8-c7v6\nb5n4-m3q2\nt7y6-u5i4\nUse each once.',
     ['k3j9-x8p2', 'm4n7-q2w8', 'z9x8-c7v6', 'b5n4-m3q2', 't7y6-u5i4']),
    ('my github recovery codes are k3j9-x8p2 m4n7-q2w8 z9x8-c7v6 b5n4-m3q2 t7y6-u5i4',
     ['k3j9-x8p2', 'm4n7-q2w8', 'z9x8-c7v6', 'b5n4-m3q2', 't7y6-u5i4']),
    ('Voici mes codes de secours :\n84729163\n20481937\n59302817\n11847362\n90817263\n37281946',
     ['84729163', '20481937', '59302817', '11847362', '90817263', '37281946']),
    ('User: can you send me the 2fa backup codes?\n\nAssistant: sure\nk3j9-x8p2\nm4n7-q2w8\nz9x8-c7v6\nb5n4-m3q2\nt7y6-u5i4',
     ['k3j9-x8p2', 'm4n7-q2w8', 'z9x8-c7v6', 'b5n4-m3q2', 't7y6-u5i4']),
    ('Códigos de recuperación: 84729163, 20481937, 59302817, 11847362, 90817263, 37281946',
     ['84729163', '20481937', '59302817', '11847362', '90817263', '37281946']),
    ('Here are your one-time codes:\n\n| # | code |\n|---|---|\n| 0 | k3j9-x8p2 |\n| 1 | m4n7-q2w8 |\n| 2 | z9x8-c7v6 |\n| 3 | b5n4-m3q2 |\n| 4 | t7y6-u5i4 |',
     ['k3j9-x8p2', 'm4n7-q2w8', 'z9x8-c7v6', 'b5n4-m3q2', 't7y6-u5i4']),
    ('Wiederherstellungscodes:\n* k3j9-x8p2\n* m4n7-q2w8\n* z9x8-c7v6\n* b5n4-m3q2\n* t7y6-u5i4',
     ['k3j9-x8p2', 'm4n7-q2w8', 'z9x8-c7v6', 'b5n4-m3q2', 't7y6-u5i4']),
    ('recovery codes (keep offline):\n```\nk3j9-x8p2\nm4n7-q2w8\nz9x8-c7v6\nb5n4-m3q2\nt7y6-u5i4\n```',
     ['k3j9-x8p2', 'm4n7-q2w8', 'z9x8-c7v6', 'b5n4-m3q2', 't7y6-u5i4']),
]

KEPT_CODES = [
    'Recovery steps:\n1. reboot\n2. run fsck\n3. restore backup\n4. verify',
    'backup jobs: 20240101 20240102 20240103 20240104',
    'error codes:\nE1001\nE1002\nE1003\nE1004',
    'Backup commits:\n3f94dc2\n99ee35a\nade02b1\n7071e0c',
    'Status codes: 200, 201, 204, 301, 404, 500',
    'The recovery phrase feature ships in v2.3.1, v2.3.2 and v2.4.0',
    'backup ports 8080, 8081, 8082, 8083',
    'Recovery codes are generated when you enable 2FA; store them in your password manager.',
]

CAUGHT_TABLES = [
    ('host;user;password\ndb1;admin;Xk9#mQ2vL8\nweb2;ops;Tr4$nB7cZ1',
     ['Xk9#mQ2vL8', 'Tr4$nB7cZ1']),
    ('host\tuser\tpassword\ndb1\tadmin\tXk9#mQ2vL8\nweb2\tops\tTr4$nB7cZ1',
     ['Xk9#mQ2vL8', 'Tr4$nB7cZ1']),
    ('| Server | Benutzer | Passwort |\n|---|---|---|\n| db1 | admin | Xk9#mQ2vL8 |',
     ['Xk9#mQ2vL8']),
    ('| serveur | utilisateur | mot de passe |\n|---|---|---|\n| db1 | admin | Xk9#mQ2vL8 |',
     ['Xk9#mQ2vL8']),
    ('| servidor | usuario | contraseña |\n| --- | --- | --- |\n| db1 | admin | Xk9#mQ2vL8 |',
     ['Xk9#mQ2vL8']),
    ('HOST        USER     PASSWORD\ndb1         admin    Xk9#mQ2vL8\nweb2        ops      Tr4$nB7cZ1',
     ['Xk9#mQ2vL8', 'Tr4$nB7cZ1']),
    ('service | login | pw\nvpn | jdoe | Xk9#mQ2vL8\nwifi | guest | Tr4$nB7cZ1',
     ['Xk9#mQ2vL8', 'Tr4$nB7cZ1']),
    ('name,secret\nstripe,Gq7Vx2Lm9Rt4Kp8ZWn3B\nslack,Wn3Bc6Hy1Jd5Fs0Aqq7',
     ['Gq7Vx2Lm9Rt4Kp8ZWn3B', 'Wn3Bc6Hy1Jd5Fs0Aqq7']),
    ('Field      Value\n-----      -----\nusername   deploy\npassword   Xk9#mQ2vL8',
     ['Xk9#mQ2vL8']),
    ('| Key | Value |\n|---|---|\n| SMTP_PASSWORD | Xk9#mQ2vL8 |\n| API_TOKEN | Gq7Vx2Lm9Rt4Kp8ZWn3B |',
     ['Xk9#mQ2vL8', 'Gq7Vx2Lm9Rt4Kp8ZWn3B']),
    ('account,pin\nchecking,482913\nsavings,775120',
     ['482913', '775120']),
]

KEPT_TABLES = [
    '| setting | default |\n|---|---|\n| password_min_length | 12 |\n| token_ttl | 3600 |',
    '| column | type |\n|---|---|\n| password_hash | varchar(255) |\n| api_key_id | uuid |',
    'name;type;required\npassword;string;yes\ntoken;string;no',
    '| env | password |\n|---|---|\n| dev | $DEV_PASSWORD |\n| prod | <from vault> |',
    '| user | password |\n|---|---|\n| alice | ******** |\n| bob | [hidden] |',
    'KEY          VALUE\ncache_key    linux-node-18-abc123\nsort_key     created_at',
    '| name | token |\n|---|---|\n| build | ${{ secrets.GITHUB_TOKEN }} |',
    'host;port;database\ndb1;5432;app\ndb2;5433;reports',
]

CAUGHT_SPLIT = [
    ('db:\n  password: |\n    Xk9mQ2vL8pR4tZ7w\n    Nc3bY6hJ1sD5fG0a\n',
     ['Xk9mQ2vL8pR4tZ7w', 'Nc3bY6hJ1sD5fG0a']),
    ('API_KEY = """\nq8Wm2Zx7Lp4Kd9Rt\nV3nB6yH1cF5sJ0gT\n"""',
     ['q8Wm2Zx7Lp4Kd9Rt', 'V3nB6yH1cF5sJ0gT']),
    ('const secret = "aZ8kQ2mX" +\n  "pL4vN7wR" +\n  "tY3bH6cJ9s";',
     ['aZ8kQ2mX', 'pL4vN7wR', 'tY3bH6cJ9s']),
    ('here is the api key, it wrapped:\n```\nAbC9dEf2GhI4jKl6\nMnO8pQr1StU3vWx5\nYz7aBc0\n```',
     ['AbC9dEf2GhI4jKl6', 'MnO8pQr1StU3vWx5']),
    ('client_secret: >\n  Gq7Vx2Lm9Rt4Kp8Z\n  Wn3Bc6Hy1Jd5Fs0A\n',
     ['Gq7Vx2Lm9Rt4Kp8Z', 'Wn3Bc6Hy1Jd5Fs0A']),
]

KEPT_SPLIT = [
    'description: |\n  This service handles the login flow\n  and stores sessions.\n',
    'key_points: >-\n  Use caching\n  Avoid N+1 queries\n',
    '```\n3f94dc2a1b\n99ee35a7c0\nade02b1f33\n```',
    'commits:\n```\n9f86d081884c7d659a2feaa0c55ad015a3bf4f1b\n2c26b46b68ffc68ff99b453c1d30413413422d70\n```',
    'msg = ("Hello, " +\n  "world")',
    'script: |\n  make build\n  make test\n',
    'password_policy: |\n  minimum12chars\n  requireDigits\n',
]

CAUGHT_BYTES = [
    ('static const uint8_t kKey[32] = {\n  0x8f, 0x3a, 0x9c, 0x1b, 0x7e, 0x2d, 0x4f, 0x60, 0xa5, 0xb9, 0xc3, 0xd1, 0xe7, 0xf2, 0x0a, 0x4b,\n  0x8f, 0x3a, 0x9c, 0x1b, 0x7e, 0x2d, 0x4f\n};',
     ['0x8f, 0x3a, 0x9c', '0xa5, 0xb9']),
    ('let key: [u8; 16] = [143, 58, 156, 27, 126, 45, 79, 96, 165, 185, 195, 209, 231, 242, 10, 75];',
     ['143, 58, 156', '231, 242, 10']),
    ('const key = new Uint8Array([143, 58, 156, 27, 126, 45, 79, 96, 165, 185, 195, 209, 231, 242, 10, 75]);',
     ['143, 58, 156']),
    ('key, _ := hex.DecodeString("8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b")',
     ['8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b']),
    ('var secret = Convert.FromBase64String("jP3kQ9vL2mX8nR4tZ7wB1cY6hF0sD5gA");',
     ['jP3kQ9vL2mX8nR4tZ7wB1cY6hF0sD5gA']),
    ('let key = hex::decode("8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b").unwrap();',
     ['8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b']),
    ('byte[] key = Base64.getDecoder().decode("jP3kQ9vL2mX8nR4tZ7wB1cY6hF0sD5gA");',
     ['jP3kQ9vL2mX8nR4tZ7wB1cY6hF0sD5gA']),
    ('const char hmac_key[] = "\\x8f\\x3a\\x9c\\x1b\\x7e\\x2d\\x4f\\x60\\xa5\\xb9";',
     ['\\x8f\\x3a\\x9c\\x1b']),
    ('AES_KEY = bytes([143, 58, 156, 27, 126, 45, 79, 96, 165, 185, 195, 209, 231, 242, 10, 75])',
     ['143, 58, 156']),
    ("signing_key = bytearray.fromhex('8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b')",
     ['8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b']),
    ('key := []byte{0x8f, 0x3a, 0x9c, 0x1b, 0x7e, 0x2d, 0x4f, 0x60, 0xa5, 0xb9, 0xc3, 0xd1, 0xe7, 0xf2, 0x0a, 0x4b}',
     ['0x8f, 0x3a, 0x9c']),
    ("const secret = Buffer.from('8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b', 'hex');",
     ['8f3a9c1b7e2d4f60a5b9c3d1e7f20a4b']),
    ("key = base64.b64decode('jP3kQ9vL2mX8nR4tZ7wB1cY6hF0sD5gA=')",
     ['jP3kQ9vL2mX8nR4tZ7wB1cY6hF0sD5gA=']),
]

KEPT_BYTES = [
    "magic = b'\\x89PNG\\r\\n\\x1a\\n'",
    'header = bytes([0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4])',
    'primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53]',
    'keys = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]',
    'crc_table = [0x00, 0x07, 0x0e, 0x09, 0x1c, 0x1b, 0x12, 0x15, 0x38, 0x3f, 0x36, 0x31, 0x24, 0x23, 0x2a, 0x2d]',
    'key = os.urandom(32)',
    "key = bytes.fromhex(os.environ['KEY_HEX'])",
    "sha = hashlib.sha256(b'hello world').hexdigest()",
    "digest = bytes.fromhex('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')",
    'const rgb = new Uint8Array([255, 255, 255, 0, 0, 0, 128, 128, 128, 64, 64, 64, 32, 32, 32, 16]);',
]

CAUGHT = [*CAUGHT_GROUPS, *CAUGHT_CODES, *CAUGHT_TABLES, *CAUGHT_SPLIT, *CAUGHT_BYTES]
KEPT = [*KEPT_GROUPS, *KEPT_CODES, *KEPT_TABLES, *KEPT_SPLIT, *KEPT_BYTES]


@pytest.mark.parametrize("text,secrets", CAUGHT, ids=[f"caught{i}" for i in range(len(CAUGHT))])
def test_masked_wherever_it_occurs(text: str, secrets: list[str]) -> None:
    out = redact(text).text
    for s in secrets:
        assert s not in out, (s, out)
    assert redact(out).text == out  # idempotent
    twice = redact(text + "\n\n" + text).text  # every occurrence, not only the first
    for s in secrets:
        assert s not in twice, (s, twice)


@pytest.mark.parametrize("text", KEPT, ids=[f"kept{i}" for i in range(len(KEPT))])
def test_near_misses_kept(text: str) -> None:
    assert redact(text).text == text
