"""Random but realistic values for the fresh redaction corpus (issue 34).

A :class:`Ctx` is a dict that makes a value the first time a template names it
(``{pw}``, ``{tok2}``, ``{user}`` ...). Keys whose stem (the name without a
trailing digit) is in :data:`SECRET` are recorded as secrets, in the order they
were first used; a template function may add further secrets with
:meth:`Ctx.secret`. Everything draws from the one ``random.Random`` it is given,
so a fixed seed gives the same corpus.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable
from urllib.parse import quote

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
URLSAFE = ALNUM + "-_"
#: symbols a password may carry anywhere in prose, quotes, tables, CSV and pgpass lines
PW_SYMBOLS = "!@#$%^&*_-+=.?~"
PW_END = ALNUM + "!#$%&*@"
SHELL_SYMBOLS = "-_.+=%^,@"

WORDS = (
    "marigold tundra falcon copper lantern harbor quartz juniper nebula cobalt walnut meadow saffron "
    "glacier pepper velvet orchid thunder maple cinder basil comet ember fjord granite hazel indigo "
    "jasper kestrel lagoon mango nutmeg opal pebble quill raven sable tulip umber violet willow zephyr "
    "badger cactus dingo otter puffin walrus biscuit pretzel noodle waffle rocket banjo kiwi tango "
    "monsoon sierra atlas orbit pixel vortex canyon dynamo ferret gecko heron igloo jackal koala "
    "lobster magpie narwhal oyster parrot quokka robin salmon toucan urchin viper wombat yak zebra"
).split()
FIRST = ("priya jonas mateo chloe noah aiko lukas sofia omar ines tomasz yuki fatima diego hannah "
         "arjun lea marco olga kofi sven nadia ravi elena samir").split()
LAST = ("garcia schmidt okafor dubois tanaka kowalski silva nguyen berg rossi haddad novak lindqvist "
        "moreau patel yilmaz costa fischer ivanova murphy").split()
USERS = ("deploy admin svc_backup ci-runner jenkins grafana ubuntu ec2-user pi postgres app_rw "
         "reporting etl_loader root operator sa webadmin nas-admin build svc-monitor mqadmin").split()
HOSTS = ("db-prod-02.internal bastion.corp.example-co.net staging-api.acmeworks.io 10.20.4.17 "
         "jump01.eu-west.lab ci.ferrotec.dev nas.home.lan pg-replica-1.svc.cluster.local "
         "mq.orbitpay.com 192.168.1.40 build-07.tallyhq.net vpn.northwind.app").split()
DBS = "orders billing analytics app_production inventory ledger crm metrics".split()
SERVICES = ("the staging Jenkins|the Grafana box|the office NAS|the prod Postgres|the RabbitMQ console|"
            "the old Magento admin|the Synology|the router|the shared Jira admin|the Airflow UI|"
            "the MinIO console|the pfSense firewall|the Proxmox host|the Kibana instance").split("|")
SSIDS = ("Casa-Ruiz Fritz!Box-7590-QX ACME-Guest Office5G Livebox-A3F2 Vodafone-8C21 TP-Link_Lab NETGEAR47 "
         "BT-Hub-K9").split()
COMPANIES = "acme northwind tallyhq orbitpay ferrotec brightlane quillsoft".split()
REPLIES = ("Thanks, connecting now.", "Got it — I'll use that for the migration.", "On it.",
           "OK, running the deploy with those.", "Logged in, looking at the logs now.",
           "Done, the job is green.", "Understood, I'll update the config.", "Trying it now.")


def rs(r: random.Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def pw_wordsym(r: random.Random) -> str:
    w = r.choice(WORDS)
    w = w.capitalize() if r.random() < 0.7 else w
    digits = str(r.randint(1961, 2025)) if r.random() < 0.5 else str(r.randint(10, 999))
    sym = r.choice("!#$%&*@_-+")
    shape = r.randrange(4)
    if shape == 0:
        return f"{w}{digits}{r.choice('!#$%&*@')}"
    if shape == 1:
        return f"{w}{sym}{digits}"
    if shape == 2:
        return f"{w}{r.choice(WORDS).capitalize()}{digits}"
    return f"{w}{r.choice('.-_')}{digits}{r.choice('!$#')}"


def pw_random(r: random.Random, lo: int = 10, hi: int = 24, symbols: str = PW_SYMBOLS) -> str:
    while True:
        n = r.randint(lo, hi)
        body = rs(r, ALNUM + symbols * 2, n - 2)
        s = r.choice(ALNUM) + body + r.choice(ALNUM + "".join(c for c in symbols if c in PW_END))
        if (any(c.isdigit() for c in s) and any(c.isupper() for c in s) and any(c.islower() for c in s)):
            return s


def pw_leet(r: random.Random) -> str:
    table = {"a": "@", "e": "3", "o": "0", "i": "1", "s": "$", "t": "7"}
    w = r.choice(WORDS) + r.choice(WORDS)
    out = "".join(table[c] if c in table and r.random() < 0.6 else c for c in w)
    out = out[0].upper() + out[1:] if out[0].isalpha() else "P" + out
    return out + str(r.randint(1, 99)) + r.choice("!#*")


def pw_phrase_joined(r: random.Random) -> str:
    words = r.sample(WORDS, r.choice((3, 3, 4)))
    sep = r.choice("-._+")
    if r.random() < 0.3:
        return "".join(w.capitalize() for w in words) + str(r.randint(1, 99))
    tail = sep + str(r.randint(1, 999)) if r.random() < 0.5 else ""
    return sep.join(words) + tail


def password(r: random.Random) -> str:
    x = r.random()
    if x < 0.35:
        return pw_wordsym(r)
    if x < 0.72:
        return pw_random(r)
    if x < 0.83:
        return pw_leet(r)
    return pw_phrase_joined(r)


def pw_shell(r: random.Random) -> str:
    return pw_random(r, 10, 20, SHELL_SYMBOLS) if r.random() < 0.7 else pw_phrase_joined(r).replace("+", "-")


def pw_url(r: random.Random) -> str:
    return pw_random(r, 10, 22, "-_.~") if r.random() < 0.7 else pw_wordsym(r).strip("!#$%&*@+") + r.choice("-_~")


def phrase_spaced(r: random.Random) -> str:
    return " ".join(r.sample(WORDS, r.choice((3, 4, 4))))


def b64(r: random.Random, nbytes: int, urlsafe: bool = False, pad: bool = True) -> str:
    raw = bytes(r.getrandbits(8) for _ in range(nbytes))
    s = (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()
    return s if pad else s.rstrip("=")


def jwt(r: random.Random, role: str = "service_role") -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    ref = rs(r, string.ascii_lowercase, 20)
    body = f'{{"iss":"supabase","ref":"{ref}","role":"{role}","iat":{r.randint(1690000000, 1760000000)}}}'
    return f"{head}.{base64.urlsafe_b64encode(body.encode()).decode().rstrip('=')}.{b64(r, 32, True, False)}"


# vendor -> (label used in prose, env var, token maker)
VENDORS: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "openai": ("OpenAI", "OPENAI_API_KEY", lambda r: "sk-proj-" + rs(r, URLSAFE, r.randint(90, 130))),
    "openai_legacy": ("OpenAI", "OPENAI_API_KEY", lambda r: "sk-" + rs(r, ALNUM, 20) + "T3BlbkFJ" + rs(r, ALNUM, 20)),
    "anthropic": ("Anthropic", "ANTHROPIC_API_KEY", lambda r: "sk-ant-api03-" + rs(r, URLSAFE, 93) + "AA"),
    "github": ("GitHub", "GITHUB_TOKEN", lambda r: "ghp_" + rs(r, ALNUM, 36)),
    "github_fg": ("GitHub", "GH_TOKEN", lambda r: "github_pat_" + rs(r, ALNUM, 22) + "_" + rs(r, ALNUM, 59)),
    "gitlab": ("GitLab", "GITLAB_TOKEN", lambda r: "glpat-" + rs(r, URLSAFE, 20)),
    "slack": ("Slack bot", "SLACK_BOT_TOKEN",
              lambda r: f"xoxb-{rs(r, string.digits, 12)}-{rs(r, string.digits, 13)}-{rs(r, ALNUM, 24)}"),
    "stripe": ("Stripe", "STRIPE_SECRET_KEY", lambda r: "sk_live_" + rs(r, ALNUM, r.choice((24, 99)))),
    "google": ("Google Maps", "GOOGLE_API_KEY", lambda r: "AIza" + rs(r, URLSAFE, 35)),
    "hf": ("Hugging Face", "HF_TOKEN", lambda r: "hf_" + rs(r, string.ascii_letters, 34)),
    "npm": ("npm", "NPM_TOKEN", lambda r: "npm_" + rs(r, ALNUM, 36)),
    "pypi": ("PyPI", "TWINE_PASSWORD", lambda r: "pypi-AgEIcHlwaS5vcmc" + rs(r, URLSAFE, r.randint(60, 120))),
    "sendgrid": ("SendGrid", "SENDGRID_API_KEY", lambda r: f"SG.{rs(r, URLSAFE, 22)}.{rs(r, URLSAFE, 43)}"),
    "digitalocean": ("DigitalOcean", "DIGITALOCEAN_TOKEN", lambda r: "dop_v1_" + rs(r, HEX, 64)),
    "telegram": ("Telegram bot", "TELEGRAM_BOT_TOKEN", lambda r: f"{r.randint(10**8, 10**10)}:AA{rs(r, URLSAFE, 33)}"),
    "shopify": ("Shopify admin", "SHOPIFY_ACCESS_TOKEN", lambda r: "shpat_" + rs(r, HEX, 32)),
    "linear": ("Linear", "LINEAR_API_KEY", lambda r: "lin_api_" + rs(r, ALNUM, 40)),
    "notion": ("Notion", "NOTION_TOKEN", lambda r: "secret_" + rs(r, ALNUM, 43)),
    "databricks": ("Databricks", "DATABRICKS_TOKEN", lambda r: "dapi" + rs(r, HEX, 32)),
    "postman": ("Postman", "POSTMAN_API_KEY", lambda r: f"PMAK-{rs(r, HEX, 24)}-{rs(r, HEX, 34)}"),
    "grafana": ("Grafana service account", "GRAFANA_TOKEN", lambda r: f"glsa_{rs(r, ALNUM, 32)}_{rs(r, HEX, 8)}"),
    "mailgun": ("Mailgun", "MAILGUN_API_KEY", lambda r: "key-" + rs(r, HEX, 32)),
    "groq": ("Groq", "GROQ_API_KEY", lambda r: "gsk_" + rs(r, ALNUM, 52)),
    "replicate": ("Replicate", "REPLICATE_API_TOKEN", lambda r: "r8_" + rs(r, ALNUM, 37)),
    "supabase": ("Supabase service role", "SUPABASE_SERVICE_ROLE_KEY", jwt),
    "doppler": ("Doppler service", "DOPPLER_TOKEN", lambda r: "dp.st.prd." + rs(r, ALNUM, 43)),
    "atlassian": ("Atlassian", "JIRA_API_TOKEN",
                  lambda r: "ATATT3xFfGF0" + rs(r, URLSAFE, 170) + "=" + rs(r, HEX.upper(), 8)),
}
# vendors whose tokens have no telling prefix: only the cue makes them secrets
PLAIN: dict[str, tuple[str, str, Callable[[random.Random], str]]] = {
    "datadog": ("Datadog API key", "DD_API_KEY", lambda r: rs(r, HEX, 32)),
    "twilio": ("Twilio auth token", "TWILIO_AUTH_TOKEN", lambda r: rs(r, HEX, 32)),
    "cloudflare": ("Cloudflare API token", "CLOUDFLARE_API_TOKEN", lambda r: rs(r, URLSAFE, 40)),
    "mistral": ("Mistral key", "MISTRAL_API_KEY", lambda r: rs(r, ALNUM, 32)),
    "algolia": ("Algolia admin key", "ALGOLIA_ADMIN_KEY", lambda r: rs(r, HEX, 32)),
    "vercel": ("Vercel token", "VERCEL_TOKEN", lambda r: rs(r, ALNUM, 24)),
    "azure_openai": ("Azure OpenAI key", "AZURE_OPENAI_API_KEY", lambda r: rs(r, HEX, 32)),
    "client_secret": ("OAuth client secret", "CLIENT_SECRET", lambda r: rs(r, URLSAFE, 40)),
    "django": ("Django SECRET_KEY", "DJANGO_SECRET_KEY", lambda r: rs(r, ALNUM + "!@#%^*(-_=+)", 50)),
    "jwt_secret": ("JWT signing secret", "JWT_SECRET", lambda r: b64(r, 48)),
    "signing": ("signing key", "SIGNING_KEY", lambda r: rs(r, HEX, 64)),
}


def _vendor(table: dict) -> Callable[[random.Random], dict]:
    def make(r: random.Random) -> dict:
        name = r.choice(sorted(table))
        label, env, fn = table[name]
        return {"tok": fn(r), "vendor": label, "tokenv": env}
    return make


def _aws(r: random.Random) -> dict:
    return {"akid": "AKIA" + rs(r, B32[:26] + "234567", 16), "aws_sk": rs(r, ALNUM + "/+", 40)}


def _slack_time(r: random.Random) -> str:
    return f"{r.randint(8, 19)}:{r.randint(0, 59):02d}"


#: generator for each key stem; a dict result sets several keys at once
GEN: dict[str, Callable[[random.Random], object]] = {
    "pw": password, "pws": pw_shell, "pwu": pw_url, "phrase": phrase_spaced,
    "pwe": lambda r: quote(password(r), safe=""),
    "tok": _vendor(VENDORS), "ptok": lambda r: {"ptok": (v := _vendor(PLAIN)(r))["tok"],
                                                  "pvendor": v["vendor"], "penv": v["tokenv"]},
    "hex32": lambda r: rs(r, HEX, 32), "hex40": lambda r: rs(r, HEX, 40), "hex64": lambda r: rs(r, HEX, 64),
    "b64": lambda r: b64(r, r.choice((24, 32, 33))), "b64u": lambda r: b64(r, 32, True, False),
    "alnum": lambda r: rs(r, ALNUM, r.randint(28, 44)),
    "seed": lambda r: rs(r, B32, r.choice((16, 32, 32))),
    "pin": lambda r: str(r.randint(10 ** 3, 10 ** 4 - 1)) if r.random() < 0.5 else str(r.randint(10 ** 5, 10 ** 6 - 1)),
    "puk": lambda r: str(r.randint(10 ** 7, 10 ** 8 - 1)),
    "wifi": lambda r: (pw_phrase_joined(r) if r.random() < 0.3 else pw_random(r, 10, 20) if r.random() < 0.5
                       else pw_wordsym(r)),
    "whsec": lambda r: "whsec_" + b64(r, 24),
    "aws": _aws,
    "user": lambda r: r.choice(USERS),
    "email": lambda r: f"{r.choice(FIRST)}.{r.choice(LAST)}@{r.choice(COMPANIES)}.com",
    "host": lambda r: r.choice(HOSTS), "db": lambda r: r.choice(DBS), "svc": lambda r: r.choice(SERVICES),
    "port": lambda r: str(r.choice((5432, 3306, 6379, 5672, 27017, 1433, 6432, 15432))),
    "ssid": lambda r: r.choice(SSIDS), "name": lambda r: r.choice(FIRST).capitalize(),
    "time": _slack_time, "reply": lambda r: r.choice(REPLIES),
    "ticket": lambda r: f"{r.choice(('OPS', 'INFRA', 'SUP', 'PLAT', 'SEC'))}-{r.randint(100, 9999)}",
    "company": lambda r: r.choice(COMPANIES),
    "sha": lambda r: rs(r, HEX, 40), "short": lambda r: rs(r, HEX, r.choice((7, 8, 10, 12))),
}
ALIASES = {"vendor": "tok", "tokenv": "tok", "pvendor": "ptok", "penv": "ptok", "akid": "aws", "aws_sk": "aws"}
SECRET = {"pw", "pws", "pwu", "pwe", "phrase", "tok", "ptok", "hex32", "hex40", "hex64", "b64", "b64u", "alnum",
          "seed", "pin", "puk", "wifi", "whsec", "aws_sk"}


def stem(key: str, known: dict) -> tuple[str, str]:
    """``pw2`` -> (``pw``, ``2``); names that end in digits themselves (``hex64``) stay whole."""
    if key in known or key in ALIASES:
        return key, ""
    base = key.rstrip(string.digits)
    return base, key[len(base):]


class Ctx(dict):
    """Lazily made template values; records which secret values were used."""

    def __init__(self, r: random.Random, extra: dict | None = None) -> None:
        super().__init__()
        self.r = r
        self.gen = {**GEN, **(extra or {})}
        self.secrets: list[str] = []

    def __missing__(self, key: str) -> str:
        base, suffix = stem(key, self.gen)
        gen_key = ALIASES.get(base, base)
        if gen_key not in self.gen:
            raise KeyError(key)
        value = self.gen[gen_key](self.r)
        if isinstance(value, dict):
            for k, v in value.items():
                self[k + suffix] = v
                if k in SECRET:
                    self.secret(v)
        else:
            self[gen_key + suffix] = value
            if gen_key in SECRET:
                self.secret(value)
        return self[key]

    def secret(self, value: str) -> str:
        if value not in self.secrets:
            self.secrets.append(value)
        return value

    def fresh(self, key: str) -> str:
        """A value of ``key``'s kind that is not kept in the dict (for lists of codes and the like)."""
        base, _ = stem(key, self.gen)
        return self.gen[ALIASES.get(base, base)](self.r)
