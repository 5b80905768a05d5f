"""Credential templates of the fresh corpus, part B: encodings, code, config files and commands.

Same conventions as :mod:`bench.redaction_fresh_tpl_a`.
"""

from __future__ import annotations

import base64
import string
from urllib.parse import quote

from bench.redaction_fresh_values import ALNUM, URLSAFE, Ctx, b64, pw_random, rs


def _b64pipe(pattern: str, what: str = "tok"):
    """A secret (token or user:password) base64-encoded; the encoded text is what must vanish."""
    def make(c: Ctx) -> str:
        if what == "basic":
            raw = f"{c['user']}:{c.fresh('pw')}"
        elif what == "pw":
            raw = c.fresh("pw")
        else:
            raw = c.fresh("tok")["tok"]
        c["enc"] = c.secret(base64.b64encode(raw.encode()).decode())
        return pattern.format_map(c)
    return make


BASE64_PIPE = [
    _b64pipe("echo '{enc}' | base64 -d"),
    _b64pipe("```\n$ echo -n \"{enc}\" | base64 --decode > ~/.config/gh/hosts-token\n```"),
    _b64pipe("base64 -d <<< {enc}", "pw"),
    _b64pipe("printf %s '{enc}' | base64 -D | pbcopy   # macOS has -D"),
    _b64pipe("the password in the k8s secret is `{enc}` — run `echo {enc} | base64 -d` to see it", "pw"),
    _b64pipe("kubectl get secret db-creds -o jsonpath='{{.data.password}}' printed {enc}, and "
             "`echo {enc} | base64 -d` gives the real one", "pw"),
    _b64pipe("The proxy wants `Proxy-Authorization: Basic {enc}` — decode it with base64 -d if you want to "
             "check the user", "basic"),
    _b64pipe("~/.docker/config.json has \"auth\": \"{enc}\"; piping it through base64 -d shows user:token", "basic"),
    _b64pipe("python3 -c \"import base64; print(base64.b64decode('{enc}').decode())\""),
    _b64pipe("Der Wert ist base64: {enc} (mit `base64 -d` dekodieren)", "pw"),
]


def _redirect(pattern: str, what: str):
    """A secret inside an encoded redirect URL; the secret is listed as it appears (encoded)."""
    def make(c: Ctx) -> str:
        if what == "tok":
            value = quote(quote(c.fresh("tok")["tok"], safe=""), safe="")
        elif what == "pw2x":
            value = quote(quote(pw_random(c.r), safe=""), safe="")
        elif what == "sig":
            value = quote(quote(b64(c.r, 32), safe=""), safe="")
        else:
            value = rs(c.r, "0123456789abcdef", 40)
        c["enc"] = c.secret(value)
        c["state"] = rs(c.r, string.ascii_lowercase, 8)
        return pattern.format_map(c)
    return make


URLENCODED_REDIRECT = [
    _redirect("https://login.{company}.com/authorize?redirect_uri=https%3A%2F%2Fapp.{company}.com%2Fcallback"
              "%3Faccess_token%3D{enc}%26state%3D{state}", "tok"),
    _redirect("is it ok that this ends up in the access log? "
              "GET /sso?next=https%3A%2F%2F{host}%2Fapi%3Fapi_key%3D{enc} HTTP/1.1", "hex"),
    _redirect("the login link they emailed: https://portal.{company}.com/go?u=%2Flogin%3Fuser%3D{user}"
              "%26password%3D{enc}", "pw2x"),
    _redirect("https://files.{company}.com/dl?returnTo=https%3A%2F%2F{company}.blob.core.windows.net%2Fexports"
              "%2Fq3.csv%3Fsv%3D2022-11-02%26se%3D2026-12-31%26sig%3D{enc}", "sig"),
    _redirect("```\n< HTTP/2 302\n< location: https://app.{company}.com/continue?continue=https%3A%2F%2F"
              "api.{company}.com%2Fv1%2Fexport%3Fkey%3D{enc}\n```", "hex"),
    _redirect("SAML bounce goes to https://idp.{company}.com/sso?RelayState=https%3A%2F%2Fwiki.{company}.com"
              "%2F%3Ftoken%3D{enc}", "tok"),
    _redirect("Why does the redirect double-encode? https://{host}/auth?redirect=%2Fsetup%3Fpassword%3D{enc}"
              "%26step%3D2", "pw2x"),
    _redirect("[{time}] {name}: clicking this logs you straight in, handy: https://app.{company}.com/r?to="
              "https%3A%2F%2Fdash.{company}.com%2F%3Fauth_token%3D{enc}", "tok"),
]


def _wp_salt(r) -> str:
    return rs(r, ALNUM + "!#$%&()*+,-.:;<=>?@[]^_`{|}~", 64)


def _php_salts(c: Ctx) -> str:
    a, b = c.secret(_wp_salt(c.r)), c.secret(_wp_salt(c.r))
    return f"```php\ndefine('LOGGED_IN_SALT', '{a}');\ndefine('NONCE_KEY',      '{b}');\n```"


PHP_DEFINE = [
    "define('DB_PASSWORD', '{pw}');",
    lambda c: f"define( 'AUTH_KEY', '{c.secret(_wp_salt(c.r))}' );",
    "define(\"SMTP_PASS\", \"{pws}\");",
    "```php\n<?php\n// wp-config.php on the old box\ndefine('DB_NAME', '{db}');\ndefine('DB_USER', '{user}');\n"
    "define('DB_PASSWORD', '{pw}');\ndefine('DB_HOST', 'localhost');\n```",
    "define('API_TOKEN', '{tok}');  // TODO: move to .env",
    "```php\nclass Config {{\n    const DB_PASS = '{pw}';\n}}\n```",
    "```php\n'mysql' => [\n    'username' => '{user}',\n    'password' => '{pw}',\n],\n```",
    "$password = '{pw}'; // TODO move to env",
    "putenv('DB_PASSWORD={pw}');",
    _php_salts,
]

PGPASS_NETRC = [
    "```\n# ~/.pgpass\n{host}:{port}:{db}:{user}:{pw}\n```",
    "echo '{host}:5432:*:{user}:{pw}' >> ~/.pgpass && chmod 600 ~/.pgpass",
    "my .pgpass has `*:*:*:{user}:{pw}` and psql still prompts, why?",
    "```\n$ cat ~/.pgpass\nlocalhost:5432:{db}:{user}:{pw}\n{host}:6432:{db}:{user}:{pw2}\n```",
    "machine {host} login {user} password {pw}",
    "~/.netrc:\n```\nmachine api.{company}.com\n  login {email}\n  password {ptok}\n```",
    "```ini\n# ~/.my.cnf\n[client]\nuser={user}\npassword={pw}\n```",
    "~/.git-credentials contains https://{user}:{tok}@github.com — is that why it never asks?",
    "PGPASSFILE points at a file with this line: {host}:{port}:{db}:{user}:{pw}",
]

CLI_FLAGS = [
    "mysqladmin -u root -p'{pw}' status",
    "sshpass -p '{pw}' ssh {user}@{host}",
    "redis-cli -h {host} -a '{pw}' --no-auth-warning info replication",
    "mongosh \"mongodb://{host}:27017\" --username {user} --password '{pw}'",
    "smbclient //{host}/share -U {user}%{pws}",
    "rabbitmqctl add_user {user} '{pw}' && rabbitmqctl set_user_tags {user} administrator",
    "htpasswd -b -c /etc/nginx/.htpasswd {user} '{pw}'",
    "openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout pass:{pws}",
    "7z a -p{pws} -mhe=on backup.7z ./dump",
    "zip -P {pws} -r logs.zip logs/",
    "sqlcmd -S {host} -U sa -P '{pw}' -Q \"SELECT @@VERSION\"",
    "ldapsearch -x -H ldap://{host} -D 'cn=admin,dc={company},dc=com' -w '{pw}' -b 'dc={company},dc=com'",
    "keytool -importkeystore -srckeystore old.jks -srcstorepass '{pw}' -destkeystore new.p12 -deststorepass '{pw2}'",
    "ipmitool -I lanplus -H {host} -U ADMIN -P '{pw}' power status",
    "xfreerdp /v:{host} /u:{user} /p:'{pw}' /cert:ignore",
    "mc alias set minio http://{host}:9000 {user} '{pw}'",
]

SECRET_SET_CLI = [
    "gh secret set {tokenv} --body '{tok}'",
    "fly secrets set DATABASE_URL=postgres://{user}:{pwu}@{host}:5432/{db} SESSION_SECRET={hex64}",
    "heroku config:set {tokenv}={tok} -a {company}-api",
    "kubectl create secret generic db-creds --from-literal=username={user} --from-literal=password='{pw}'",
    "doppler secrets set {tokenv}='{tok}'",
    "echo -n '{tok}' | vercel env add {tokenv} production",
    "netlify env:set {penv} {ptok}",
    "railway variables --set \"{penv}={ptok}\"",
    "supabase secrets set {penv}={ptok}",
    "echo '{ptok}' | npx wrangler secret put {penv}",
    "aws ssm put-parameter --name /prod/{db}/password --type SecureString --value '{pw}' --overwrite",
    "az keyvault secret set --vault-name kv-{company}-prod --name db-password --value '{pw}'",
    "printf '%s' '{pw}' | docker secret create pg_password -",
    "echo -n '{pw}' | gcloud secrets versions add {db}-password --data-file=-",
    "dokku config:set api SECRET_KEY_BASE={hex64}",
]


def _bk(r) -> str:
    return rs(r, ALNUM + "!#$%&*+-.=?@^_~", r.randint(20, 40))


def _code(lang: str, line: str, intro: str = ""):
    def make(c: Ctx) -> str:
        c["bk"] = c.secret(_bk(c.r))
        c["fernet"] = c.secret(b64(c.r, 32, urlsafe=True))
        c["aes16"] = c.secret(rs(c.r, ALNUM, 16))
        body = line.replace("FERNET", "{fernet}").replace("AES16", "{aes16}").replace("BK", "{bk}")
        # only the secrets the line names count
        c.secrets = [s for s in c.secrets if s in body.format_map(c)]
        return f"{intro}```{lang}\n{body}\n```".format_map(c)
    return make


BYTES_KEY = [
    _code("python", "SECRET_KEY = b'BK'", "is it fine to keep this in settings.py for now?\n"),
    _code("python", "sig = hmac.new(b\"BK\", body, hashlib.sha256).hexdigest()"),
    _code("python", "f = Fernet(b'FERNET')\ntoken = f.encrypt(payload)", "decrypt fails with InvalidToken:\n"),
    _code("python", "cipher = AES.new(b'AES16', AES.MODE_GCM, nonce=nonce)"),
    _code("python", "token = jwt.encode(payload, b\"BK\", algorithm=\"HS256\")"),
    _code("rust", "const HMAC_KEY: &[u8] = b\"BK\";", "the webhook verifier:\n"),
    _code("go", "var signingKey = []byte(\"BK\")"),
    "```js\nconst key = Buffer.from('{hex64}', 'hex');\n```",
    _code("java", "byte[] key = \"BK\".getBytes(StandardCharsets.UTF_8);"),
    "```python\nKEY = bytes.fromhex('{hex64}')\n```",
    "```ruby\nKEY = ['{hex64}'].pack('H*')\n```",
]

API_KEY_PROSE = [
    "my {vendor} key is {tok}",
    "here's the token: {tok}",
    "Can you test the integration with this key? {tok}",
    "I rotated the {vendor} token, the new one is {tok} — please update CI.",
    "Use {tok} as the bearer token for now.",
    "key for {vendor}: `{tok}`",
    "curl https://api.{company}.com/v1/items -H \"Authorization: Bearer {tok}\"",
    "User: Set up the {vendor} client.\n\nAssistant: I'll need an API key for that.\n\nUser: {tok}",
    "Meu token do {vendor} é {tok}",
    "{tokenv} is {tok} on my machine and it works there",
    "Mi clave de {vendor}: {tok}",
]

PREFIXLESS_TOKEN = [
    "the {pvendor} is {ptok}",
    "here's the secret: {hex64}",
    "```\n# .env.local\n{penv}={ptok}\n```",
    "API key (no prefix, it's just hex): {hex32}",
    _b64pipe("```\nGET /api/v1/reports HTTP/1.1\nHost: {host}\nAuthorization: Basic {enc}\n```", "basic"),
    "```yaml\noauth:\n  client_id: {company}-portal\n  client_secret: {b64u}\n```",
    "Got the {pvendor} from the dashboard: `{ptok}`",
    "The shared secret for the HMAC is {b64}.",
    "curl -H 'x-api-key: {alnum}' https://api.{company}.com/v2/orders",
    "https://hooks.{company}.com/ingest?token={hex40}",
]

DB_CONN_STRING = [
    "the prod DB is at postgres://{user}:{pwu}@{host}:5432/{db}",
    "DATABASE_URL=postgresql://{user}:{pwe}@{host}:{port}/{db}?sslmode=require",
    "why does this fail with access denied? mysql://{user}:{pwu}@{host}:3306/{db}",
    "mongodb+srv://{user}:{pwe}@cluster0.ab1cd.mongodb.net/{db}?retryWrites=true&w=majority",
    "REDIS_URL=redis://default:{pwu}@{host}:6379/0",
    "broker_url = \"amqps://{user}:{pwu}@{host}:5671/jobs\"",
    "\"ConnectionStrings\": {{ \"Default\": \"Server={host};Database={db};User Id=sa;Password={pw};"
    "TrustServerCertificate=True;\" }}",
    "jdbc:postgresql://{host}:5432/{db}?user={user}&password={pwu}",
    "psql \"host={host} port=5432 dbname={db} user={user} password={pw} sslmode=require\"",
    "```python\nengine = create_engine(\"mysql+pymysql://{user}:{pwe}@{host}/{db}\")\n```",
    "DRIVER={{ODBC Driver 18 for SQL Server}};SERVER={host};UID={user};PWD={pw}",
]


def _slack_hook(c: Ctx) -> str:
    t = c.secret(rs(c.r, ALNUM, 24))
    return (f"Slack incoming webhook for #alerts: https://hooks.slack.com/services/T{rs(c.r, ALNUM.upper(), 9)}"
            f"/B{rs(c.r, ALNUM.upper(), 10)}/{t}")


def _discord_hook(c: Ctx) -> str:
    t = c.secret(rs(c.r, URLSAFE, 68))
    return f"discord webhook → https://discord.com/api/webhooks/{c.r.randint(10**17, 10**18)}/{t}"


WEBHOOK_SECRET = [
    "```\n$ stripe listen --forward-to localhost:8000/webhooks\n> Ready! You are using Stripe API Version "
    "[2024-06-20]. Your webhook signing secret is {whsec} (^C to quit)\n```",
    "STRIPE_WEBHOOK_SECRET={whsec}",
    "I set the GitHub webhook secret to {pw}, so the X-Hub-Signature-256 check should pass now.",
    "Slack signing secret: {hex32}",
    _slack_hook,
    _discord_hook,
    "The Shopify webhook shared secret is {hex64}.",
    "```yaml\nwebhook: {{ url: https://ci.{company}.com/hook, secret: {alnum} }}\n```",
    "X-Webhook-Token must be {hex40}, otherwise the endpoint returns 401.",
    "Le secret du webhook GitLab : {alnum}",
]

SSH_SUDO = [
    "sudo password on {host} is {pw}",
    "ssh {user}@{host} (pw {pw})",
    "echo '{pw}' | sudo -S systemctl restart nginx",
    "root pw for the VM: {pw}",
    "it asks `[sudo] password for {user}:` — type {pw}",
    "```ini\n[web]\n{host} ansible_user={user} ansible_ssh_pass={pw} ansible_become_pass={pw2}\n```",
    "The Pi still has the default user but I changed its password to {pw}.",
    "Para entrar por SSH: usuario {user}, contraseña {pw}",
    "If it prompts for the sudo password just type {pw}",
    "```yaml\n# group_vars/prod.yml\nansible_become_password: \"{pw}\"\n```",
]

WIFI = [
    "wifi password is {wifi}",
    "Guest Wi-Fi: {ssid} / {wifi}",
    "WIFI:T:WPA;S:{ssid};P:{wifi};;",
    "nmcli dev wifi connect {ssid} password '{wifi}'",
    "```\nnetwork={{\n    ssid=\"{ssid}\"\n    psk=\"{wifi}\"\n}}\n```",
    "La clave del wifi es {wifi}",
    "le code wifi c'est {wifi} (réseau {ssid})",
    "WLAN: {ssid}, Passwort {wifi}",
    "```\n# /etc/hostapd/hostapd.conf\nssid={ssid}\nwpa=2\nwpa_passphrase={wifi}\n```",
    "User: what's the office wifi?\n\nAssistant: It's {ssid}, and the key is {wifi}.",
    "A senha do Wi-Fi é {wifi}",
]

PIN = [
    "SIM PIN is {pin}, PUK {puk}",
    "the YubiKey PIN is {pin}",
    "door code for the server room: {pin}",
    "PIN for the HSM partition: {pin}",
    "ykman piv access change-pin --pin 123456 --new-pin {pin}",
    "Die PIN für das Diensthandy lautet {pin}.",
    "phone unlock pin {pin} if you need to approve the push",
    "Le code PIN de la carte est {pin}",
    "the alarm code is {pin}, then press #",
    "Token PIN: {pin}",
]

SHELL_ENV = [
    "```\n$ export {tokenv}={tok}\n$ python agent.py\n```",
    "```\n# .env\n{tokenv}={tok}\nDEBUG=false\n```",
    "docker run -e POSTGRES_PASSWORD={pws} -p 5432:5432 postgres:16",
    "```\n+ curl -sf -H 'Authorization: Bearer {tok}' https://api.{company}.com/v1/me\n```",
    "$env:{tokenv} = \"{tok}\"",
    "set DB_PASSWORD={pws}",
    "```yaml\nenvironment:\n  - POSTGRES_PASSWORD={pws}\n  - {penv}={ptok}\n```",
    "set -gx {tokenv} {tok}",
    "{tokenv}={tok} npm run deploy",
    "```\n$ printenv | grep -i key\n{tokenv}={tok}\n```",
]
