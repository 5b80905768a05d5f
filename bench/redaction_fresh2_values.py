"""Random values for the second fresh redaction corpus (issue 34), one seeded `random.Random` per line.

Written from how people paste credentials in chats, not from the redactor's rules. A generator
returns a str, or `Parts` when one value is several secret pieces (a recovery-code list, a token
read out in groups, a token split over two lines). Kinds in SECRET are credentials that must be
masked; the other kinds are context (users, hosts, ids) and may stay.
"""

from __future__ import annotations

import base64
import random
import string
import urllib.parse
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
UPPER_NUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
URLSAFE = ALNUM + "-_"
SYM = "!#$%&*+-=?@^_~"
SYM_SAFE = "!$%*-_.~+=^"          # no @ : / ? # , | quotes: safe in URLs, CSV and tables

WORDS = ("harbor maple orbit lantern copper violet falcon meadow thunder pebble cactus walrus velvet "
         "rocket saddle jungle marble tundra comet willow basalt ember quartz canyon otter pepper glacier "
         "nectar bramble cobalt dune falafel gravel hazel igloo jasper kettle lemur mango nimbus oyster "
         "plume quill raven sphinx tulip umber vortex wombat yonder zephyr anchor bison cinder dahlia "
         "eclipse fjord gecko hollow iris juniper koala lagoon mosaic nutmeg opal parsnip quokka ripple "
         "sequoia trellis").split()
NAMES = ("Maggie Oscar Bella Luna Charlie Milo Daisy Rocky Chloe Teddy Nala Simba Rosie Bruno Pippa "
         "Lola Max Coco Ziggy Hugo").split()
SEASONS = ("Summer Winter Autumn Spring Welcome Monday Friday Dragon Tiger Falcon Phoenix Sunshine "
           "Liverpool Arsenal Barcelona Yankees").split()
USERS = ("admin root deploy svc_backup jenkins ci-bot ops app_user postgres grafana elastic mlflow "
         "analytics etl_runner report_ro kafka-admin sftpuser build www-data minio").split()
FIRST = "anna ben carla dmitri elif fatima gus hiro ines jonas kemal lucia marek noor oskar priya".split()
HOSTS = ("db01.internal staging-db.acme.io 10.0.3.17 pg-prod.eu-west-1.rds.amazonaws.com "
         "mongo-2.svc.cluster.local redis.corp.lan sftp.partner-co.com build.example.net 192.168.1.40 "
         "nas.home.arpa vpn.example.org mq.ops.acme.io").split()
DBS = "orders billing app_prod analytics inventory users metrics crm".split()
SERVICES = "staging prod the billing db the grafana box the NAS the VPN jira the old jenkins".split(" ")


@dataclass(frozen=True)
class Parts:
    """A value made of several secret pieces joined by non-secret separators."""
    parts: tuple[str, ...]
    sep: str


def rs(r: random.Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def pw_human(r: random.Random) -> str:
    k = r.randrange(6)
    if k == 0:
        return f"{r.choice(SEASONS)}{r.randrange(1990, 2027)}{r.choice('!#$*?')}"
    if k == 1:
        return f"{r.choice(WORDS).capitalize()}{r.choice('#$%&*')}{r.choice(WORDS).capitalize()}{r.randrange(10, 99)}"
    if k == 2:
        return f"{r.choice(NAMES)}{r.randrange(1960, 2020)}{r.choice('!$&')}"
    if k == 3:
        w = r.choice(WORDS).replace("a", "@").replace("o", "0").replace("e", "3")
        return f"{w.capitalize()}{r.randrange(100, 999)}{r.choice('!%')}"
    if k == 4:
        return f"{r.choice(NAMES).lower()}{r.choice(['_', '.', '-'])}{r.choice(WORDS)}{r.randrange(1, 99)}!"
    return f"{rs(r, ALNUM, 3)}{r.choice(SYM_SAFE)}{rs(r, ALNUM, 4)}{r.choice('#!$')}{rs(r, ALNUM, 3)}"


def pw_rand(r: random.Random) -> str:
    n = r.randrange(12, 25)
    body = rs(r, ALNUM + SYM, n - 2)
    return rs(r, string.ascii_letters, 1) + body + rs(r, ALNUM, 1)


def pw_safe(r: random.Random) -> str:
    """A password with no URL, CSV or table metacharacters (for URIs, CSV rows, tables)."""
    return rs(r, string.ascii_letters, 1) + rs(r, ALNUM + SYM_SAFE, r.randrange(10, 20)) + rs(r, ALNUM, 1)


def pw_any(r: random.Random) -> str:
    return r.choice((pw_human, pw_rand, pw_safe))(r)


def passphrase(r: random.Random) -> str:
    ws = r.sample(WORDS, r.randrange(4, 6))
    sep = r.choice(["-", ".", "_", " ", ""])
    if sep == "":
        ws = [w.capitalize() for w in ws]
    out = sep.join(ws)
    return out + (str(r.randrange(10, 99)) if r.random() < 0.5 else "")


def pin(r: random.Random) -> str:
    return rs(r, string.digits, r.choice((4, 6, 6, 8)))


def totp(r: random.Random) -> str:
    return rs(r, B32, r.choice((16, 26, 32)))


def totp_grouped(r: random.Random) -> Parts:
    alphabet = B32.lower() if r.random() < 0.3 else B32
    return Parts(tuple(rs(r, alphabet, 4) for _ in range(r.choice((4, 8)))), " ")


def codes(r: random.Random) -> Parts:
    k = r.randrange(4)
    n = r.choice((8, 10, 12, 16))
    if k == 0:
        items = [f"{rs(r, string.digits, 4)} {rs(r, string.digits, 4)}" for _ in range(n)]
    elif k == 1:
        items = [f"{rs(r, HEX, 5)}-{rs(r, HEX, 5)}" for _ in range(n)]
    elif k == 2:
        items = [f"{rs(r, UPPER_NUM, 4)}-{rs(r, UPPER_NUM, 4)}-{rs(r, UPPER_NUM, 4)}" for _ in range(n)]
    else:
        items = [rs(r, string.ascii_lowercase + string.digits, 10) for _ in range(n)]
    return Parts(tuple(items), "\n")


def codes_inline(r: random.Random) -> Parts:
    c = codes(r)
    return Parts(c.parts[:r.choice((5, 6, 8))], r.choice((", ", " ", " · ", "; ")))


def ghp(r: random.Random) -> str:
    return r.choice(("ghp_", "gho_", "ghu_")) + rs(r, ALNUM, 36)


def gh_fine(r: random.Random) -> str:
    return "github_pat_11" + rs(r, UPPER_NUM, 22) + "_" + rs(r, ALNUM, 59)


def vendor_token(r: random.Random) -> str:
    k = r.randrange(30)
    table = [
        lambda: ghp(r), lambda: gh_fine(r), lambda: "glpat-" + rs(r, URLSAFE, 20),
        lambda: f"xoxb-{rs(r, string.digits, 12)}-{rs(r, string.digits, 13)}-{rs(r, ALNUM, 24)}",
        lambda: f"xoxp-{rs(r, string.digits, 11)}-{rs(r, string.digits, 12)}-{rs(r, string.digits, 13)}-{rs(r, HEX, 32)}",
        lambda: "sk-proj-" + rs(r, URLSAFE, r.randrange(64, 120)),
        lambda: "sk-ant-api03-" + rs(r, URLSAFE, 93) + "AA",
        lambda: "AIza" + rs(r, URLSAFE, 35),
        lambda: r.choice(("sk_live_", "rk_live_", "sk_test_")) + rs(r, ALNUM, r.choice((24, 99))),
        lambda: "SG." + rs(r, URLSAFE, 22) + "." + rs(r, URLSAFE, 43),
        lambda: "npm_" + rs(r, ALNUM, 36),
        lambda: "pypi-AgEIcHlwaS5vcmc" + rs(r, URLSAFE, r.randrange(60, 140)),
        lambda: "hf_" + rs(r, string.ascii_letters, 34),
        lambda: "dop_v1_" + rs(r, HEX, 64),
        lambda: "shpat_" + rs(r, HEX, 32),
        lambda: "glsa_" + rs(r, ALNUM, 32) + "_" + rs(r, HEX, 8),
        lambda: "dapi" + rs(r, HEX, 32),
        lambda: "key-" + rs(r, HEX, 32),
        lambda: f"{rs(r, string.digits, 10)}:AA{rs(r, URLSAFE, 33)}",
        lambda: "lin_api_" + rs(r, ALNUM, 40),
        lambda: "ntn_" + rs(r, ALNUM, 46),
        lambda: "PMAK-" + rs(r, HEX, 24) + "-" + rs(r, HEX, 34),
        lambda: "dp.st.prd." + rs(r, ALNUM, 43),
        lambda: "gsk_" + rs(r, ALNUM, 52),
        lambda: "r8_" + rs(r, ALNUM, 37),
        lambda: f"tskey-auth-{rs(r, ALNUM, 12)}-{rs(r, ALNUM, 33)}",
        lambda: "sbp_" + rs(r, HEX, 40),
        lambda: "NRAK-" + rs(r, UPPER_NUM, 27),
        lambda: "figd_" + rs(r, URLSAFE, 40),
        lambda: "glrt-" + rs(r, URLSAFE, 20),
    ]
    return table[k % len(table)]()


def jwt(r: random.Random) -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    body = base64.urlsafe_b64encode(
        f'{{"sub":"{r.randrange(10**6)}","name":"{r.choice(FIRST)}","iat":{r.randrange(1_700_000_000, 1_800_000_000)}}}'
        .encode()).decode().rstrip("=")
    return f"{head}.{body}.{rs(r, URLSAFE, 43)}"


def hex32(r: random.Random) -> str:
    return rs(r, HEX, 32)


def hex40(r: random.Random) -> str:
    return rs(r, HEX, 40)


def alnum40(r: random.Random) -> str:
    return rs(r, ALNUM, 40)


def b64key(r: random.Random) -> str:
    return base64.b64encode(r.randbytes(r.choice((32, 48, 64)))).decode()


def azure_secret(r: random.Random) -> str:
    return rs(r, ALNUM, 3) + "8Q~" + rs(r, ALNUM + "-_.~", 31)


def aws_secret(r: random.Random) -> str:
    return rs(r, ALNUM + "+/", 40)


def akid(r: random.Random) -> str:
    return r.choice(("AKIA", "ASIA")) + rs(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)


def slack_hook(r: random.Random) -> str:
    return rs(r, ALNUM, 24)


def b64pw(r: random.Random) -> str:
    return base64.b64encode(pw_any(r).encode()).decode()


def basic(r: random.Random) -> str:
    return base64.b64encode(f"{r.choice(USERS)}:{pw_safe(r)}".encode()).decode()


def pw_url(r: random.Random) -> str:
    """A password with @ : / or spaces, percent-encoded the way it sits in a URI."""
    raw = rs(r, ALNUM, 4) + r.choice("@:/#?% ") + rs(r, ALNUM, 5) + r.choice("@!$&") + rs(r, ALNUM, 3)
    return urllib.parse.quote(raw, safe="")


def bcrypt(r: random.Random) -> str:
    return f"$2b${r.choice(('10', '12'))}$" + rs(r, ALNUM + "./", 53)


def sha512crypt(r: random.Random) -> str:
    return f"$6${rs(r, ALNUM + './', 16)}$" + rs(r, ALNUM + "./", 86)


def django_key(r: random.Random) -> str:
    return "django-insecure-" + rs(r, string.ascii_lowercase + string.digits + "!@#%^&*(-_=+)", 50)


def pem_body(r: random.Random) -> Parts:
    body = "b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABA" + base64.b64encode(r.randbytes(300)).decode()
    return Parts(tuple(body[i:i + 70] for i in range(0, len(body), 70)), "\n")


def split_tok(r: random.Random) -> Parts:
    t = r.choice((ghp, gh_fine, lambda rr: "sk-proj-" + rs(rr, URLSAFE, 80), lambda rr: "glpat-" + rs(rr, URLSAFE, 20),
                  aws_secret, hex40))(r)
    cut = r.randrange(len(t) // 3, 2 * len(t) // 3)
    return Parts((t[:cut], t[cut:]), "")


def pw_split(r: random.Random) -> Parts:
    t = pw_rand(r) + rs(r, ALNUM, 8)
    cut = r.randrange(8, len(t) - 6)
    return Parts((t[:cut], t[cut:]), "")


def tok_grouped(r: random.Random) -> Parts:
    t = r.choice((hex40, alnum40, hex32))(r)
    g = r.choice((4, 5, 8) if len(t) == 40 else (4, 8))     # whole groups: no 2-char tail piece
    return Parts(tuple(t[i:i + g] for i in range(0, len(t), g)), " ")


def wifi(r: random.Random) -> str:
    return r.choice((pw_human, passphrase, lambda rr: rs(rr, string.ascii_lowercase + string.digits, 10)))(r)


# context kinds (not secrets)
def user(r: random.Random) -> str:
    return r.choice(USERS)


def person(r: random.Random) -> str:
    return r.choice(FIRST)


def email(r: random.Random) -> str:
    return f"{r.choice(FIRST)}.{r.choice(WORDS)}@{r.choice(('acme.io', 'example.com', 'corp.lan', 'gmail.com'))}"


def host(r: random.Random) -> str:
    return r.choice(HOSTS)


def db(r: random.Random) -> str:
    return r.choice(DBS)


def svc(r: random.Random) -> str:
    return r.choice(SERVICES)


def port(r: random.Random) -> str:
    return str(r.choice((5432, 3306, 27017, 6379, 5672, 1433, 8443, 2222, 9200)))


def uuid(r: random.Random) -> str:
    h = rs(r, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{r.choice('89ab')}{h[17:20]}-{h[20:]}"


def num(r: random.Random) -> str:
    return str(r.randrange(2, 60))


GENERATORS = {f.__name__: f for f in (
    pw_human, pw_rand, pw_safe, pw_any, passphrase, pin, totp, totp_grouped, codes, codes_inline, ghp, gh_fine,
    vendor_token, jwt, hex32, hex40, alnum40, b64key, azure_secret, aws_secret, akid, slack_hook, b64pw, basic,
    pw_url, bcrypt, sha512crypt, django_key, pem_body, split_tok, pw_split, tok_grouped, wifi,
    user, person, email, host, db, svc, port, uuid, num)}
CONTEXT = frozenset({"akid", "user", "person", "email", "host", "db", "svc", "port", "uuid", "num"})
SECRET = frozenset(GENERATORS) - CONTEXT
