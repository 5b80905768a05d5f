"""Credential templates of the fresh corpus, part A: passwords in prose and its relatives.

Each family maps to a list of templates. A template is a ``str.format`` pattern over a
:class:`~bench.redaction_fresh_values.Ctx` (secret fields such as ``{pw}`` are recorded as the
secrets that must vanish) or a function of the Ctx that returns the text and records any further
secret parts with ``c.secret``. Written for issue 34 without looking at the redactor's rules.
"""

from __future__ import annotations

from bench.redaction_fresh_values import HEX, Ctx, rs

PW_SENTENCE = [
    "You can sign in to {svc} as {user} with the password {pw} — it's only staging data.",
    "Log in as `{user}` using password `{pw}`, then go to Settings → Backups.",
    "For {host} the username is {user} and the password is {pw}.",
    "I created an account for you on {svc}: username {email}, password {pw}. Please change it after the first login.",
    "Login for {svc} is {user}, pass {pw}",
    "ok so the creds for {host} are user {user} and password {pw} if you need to poke at the cron jobs",
    "Use {user} with password {pw} to get into {svc}; don't share it outside the team.",
    "Can you check why the nightly export fails? Credentials: user={user}, password={pw}. The box is {host}.",
    "Username: {user}\nPassword: {pw}\nHost: {host}",
    "hey, the login for {svc} is {email} and the pw is {pw} — lmk if it doesn't work",
]

PW_CUE_AFTER = [
    "{pw} is the password for {svc}, by the way.",
    "`{pw}` — that's the root password on {host}.",
    "try {pw} (that's the admin password, not mine)",
    "{pw} <- new password for the {user} account",
    "Just paste {pw} when it prompts; it's the keystore password.",
    "{pw}\n\n^ db password for {db}, rotate it after the demo",
    "I think {pw} was the password we set for {svc} last sprint.",
    "\"{pw}\" is what I set as the {user} password on {host}.",
    "{pw} should work as the password for {user}@{host}",
]

PW_TEMPORARY = [
    "I reset your account on {svc}; the temporary password is {pw} and it'll ask you to change it.",
    "IT gave me {pw} as a temp password until the SSO migration is done, so I've been using that.",
    "btw the one-time password for the new hire's laptop is {pw}",
    "Temporary password: {pw} (expires in 24h)",
    "Set {user} up with a temp pass of {pw} for now — we'll move them to LDAP on Monday.",
    "While you fix SSO, just use the interim password {pw} for {svc}.",
    "The vendor sent an initial password ({pw}) in the welcome email, has anyone changed it?",
    "Reset done. {user}'s temporary password: `{pw}` — must be changed at next logon.",
    "it's a throwaway password anyway: {pw}",
]

PW_USERPASS_PAIR = [
    "use {user}:{pw} for the router admin page",
    "creds are {user}/{pw}",
    "log in with `{user}:{pw}` and check the queue depth",
    "{user} / {pw} gets you into {svc}",
    "The basic auth on the preview env is {user}:{pw}, in case the browser asks.",
    "tried {user}:{pw} on {host} but got a 403, any idea?",
    "The scanner account ({user}:{pw}) has read-only access to the registry.",
    "curl -u {user}:{pws} https://{host}/api/health   # works from the VPN",
    "ssh tunnel is up; db user/pass = {user}/{pw}",
]

PW_ANSWER = [
    "User: What's the password for {svc}?\n\nAssistant: According to the runbook you shared, it's {pw}.",
    "User: do you remember the root password on {host}?\nAssistant: Yes — you gave it earlier: `{pw}`.",
    "[{time}] {name}: anyone know the admin password for {svc}?\n[{time}] {name2}: {pw}\n[{time}] {name}: ty!",
    "Q: what did we set the {db} db password to?\nA: {pw}",
    "User: I forgot what password I gave the {user} account, can you check the notes?\n\n"
    "Assistant: The notes say the {user} password is {pw}.",
    "> what pw did you use for the keystore?\n\n{pw}, same as the dev one",
    "User: Which password should I put in the connection dialog?\nAssistant: Use {pw} — that's the one in your .env.",
    "{name}: what's the pass for the shared support inbox?\n{name2}: it's {pw} but don't tell marketing",
    "User: remind me the sudo password\n\nAssistant: You told me it's `{pw}`. You might want to rotate it "
    "since it is now in this chat.",
]

PW_I18N = [
    "Das Passwort für {host} ist {pw}, Benutzer {user}.",
    "Zugangsdaten für {host}: Benutzername {user}, Kennwort {pw}",
    "Hier das vorläufige Passwort: {pw} – bitte beim ersten Login ändern.",
    "Le mot de passe de la base {db} est {pw} (utilisateur : {user}).",
    "Salut, tu peux te connecter avec {user} et le mdp {pw}",
    "Identifiant : {email}\nMot de passe : {pw}",
    "La contraseña del servidor {host} es {pw}, el usuario es {user}.",
    "Te paso las credenciales: usuario {user}, clave {pw}",
    "A senha do banco {db} é {pw}, usuário {user}.",
    "Segue o acesso: login {email} / senha {pw}",
    "La password dell'utente {user} è {pw}.",
    "Het wachtwoord voor {host} is {pw}.",
    "Hasło do {host} to {pw}, login {user}.",
    "Lösenordet till {host} är {pw}",
    "{host} için şifre: {pw} (kullanıcı adı {user})",
    "Пароль от {host}: {pw}, логин {user}",
    "{host} のパスワードは {pw} です。ユーザー名は {user}。",
    "服务器 {host} 的密码是 {pw}，用户名 {user}。",
]


def _seed_grouped(c: Ctx, intro: str) -> str:
    seed = c.fresh("seed")
    lower = c.r.random() < 0.5
    groups = [seed[i:i + 4].lower() if lower else seed[i:i + 4] for i in range(0, len(seed), 4)]
    for g in groups:
        c.secret(g)
    return intro + " ".join(groups)


TOTP_SEED = [
    "2FA setup key for the shared {company} AWS root account: {seed}",
    "Here's the QR payload if you want to add it by hand: otpauth://totp/{company}:{user}?secret={seed}"
    "&issuer={company}&digits=6",
    "The TOTP secret is {seed} — add it to the team vault so on-call can generate codes.",
    lambda c: _seed_grouped(c, "Can't scan the QR? Enter this key instead: "),
    "MFA seed (base32): `{seed}`",
    "```\n$ oathtool --totp -b {seed}\n```\ngives me a code that the VPN rejects, is the clock off?",
    "```python\nimport pyotp\ntotp = pyotp.TOTP(\"{seed}\")\nprint(totp.now())\n```",
    "Einrichtungsschlüssel für die Zwei-Faktor-Authentifizierung: {seed}",
    "authenticator key for {email}: {seed} (from the Workspace admin console)",
    lambda c: _seed_grouped(c, "Clé de configuration 2FA : "),
]


def _codes(c: Ctx, style: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        if style == "gh":
            code = rs(c.r, HEX, 5) + "-" + rs(c.r, HEX, 5)
        elif style == "google":
            code = f"{c.r.randint(1000, 9999)} {c.r.randint(1000, 9999)}"
        elif style == "alnum":
            code = rs(c.r, "abcdefghjkmnpqrstuvwxyz23456789", 10)
        elif style == "dash":
            code = "-".join(rs(c.r, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789", 4) for _ in range(3))
        else:
            code = str(c.r.randint(10 ** 7, 10 ** 8 - 1))
        out.append(code)
        for part in code.split(" "):
            c.secret(part)
    return out


def _rc(intro: str, style: str, layout: str, outro: str = ""):
    def make(c: Ctx) -> str:
        codes = _codes(c, style, c.r.randint(5, 10))
        if layout == "bullets":
            body = "\n".join(f"- {x}" for x in codes)
        elif layout == "numbered":
            body = "\n".join(f"{i}. {x}" for i, x in enumerate(codes, 1))
        elif layout == "fence":
            body = "```\n" + "\n".join(codes) + "\n```"
        elif layout == "grid":
            pairs = [codes[i:i + 2] for i in range(0, len(codes), 2)]
            body = "```\n" + "\n".join("    ".join(p) for p in pairs) + "\n```"
        elif layout == "comma":
            body = ", ".join(codes)
        else:
            body = " / ".join(codes)
        return intro.format_map(c) + body + outro
    return make


RECOVERY_CODES = [
    _rc("Here are my GitHub recovery codes, keep them somewhere safe:\n", "gh", "bullets"),
    _rc("backup codes for the {company} admin Google account:\n", "google", "grid"),
    _rc("Recovery codes: ", "alnum", "comma", " — I already used the first one."),
    _rc("$ cat ~/Downloads/{company}-recovery-codes.txt\n", "dash", "fence"),
    _rc("User: where did I put the Okta backup codes?\n\nAssistant: In your notes from March:\n", "digits", "numbered"),
    _rc("Wiederherstellungscodes für das Admin-Konto:\n", "alnum", "bullets"),
    _rc("If I lose my phone, use one of these: ", "digits", "slash"),
    _rc("Códigos de respaldo de la cuenta de {company}:\n", "gh", "numbered"),
    _rc("Pasting the 2FA backup codes for the shared Twitter account so they're not only on my laptop:\n",
        "dash", "bullets"),
    _rc("codes de secours Google (compte {email}) :\n", "google", "grid"),
]


def _table(c: Ctx) -> str:
    rows = "\n".join(f"| {c.fresh('host')} | {c.fresh('user')} | {c.secret(c.fresh('pw'))} |" for _ in range(3))
    return "Here's what I found in the old wiki page:\n\n| host | user | password |\n|---|---|---|\n" + rows


def _csv(c: Ctx) -> str:
    lines = [f"{h},https://{h}/login,{c.fresh('email')},{c.secret(c.fresh('pw'))}"
             for h in (c.fresh("host") for _ in range(c.r.randint(2, 4)))]
    return "exported from the browser, can you import these into the vault?\n```csv\nname,url,username,password\n" \
        + "\n".join(lines) + "\n```"


TABLE_KV = [
    _table,
    "| key | value |\n|---|---|\n| DB_HOST | {host} |\n| DB_USER | {user} |\n| DB_PASSWORD | {pw} |",
    _csv,
    "```\n$ vault kv get secret/{db}/prod\n====== Data ======\nKey         Value\n---         -----\n"
    "password    {pw}\nusername    {user}\n```",
    "vault says:\n```json\n{{\n  \"data\": {{\n    \"data\": {{\n      \"api_key\": \"{ptok}\",\n"
    "      \"username\": \"{user}\"\n    }}\n  }}\n}}\n```",
    "```\n$ aws secretsmanager get-secret-value --secret-id prod/{db}\n{{\n    \"Name\": \"prod/{db}\",\n"
    "    \"SecretString\": \"{{\\\"username\\\":\\\"{user}\\\",\\\"password\\\":\\\"{pw}\\\"}}\",\n"
    "    \"VersionStages\": [\"AWSCURRENT\"]\n}}\n```",
    "```\n┌────────────────────┬──────────────────────────────────────────┐\n│ NAME               │ VALUE"
    "                                    │\n├────────────────────┼──────────────────────────────────────────┤\n"
    "│ {tokenv} │ {tok} │\n│ LOG_LEVEL          │ info                                     │\n"
    "└────────────────────┴──────────────────────────────────────────┘\n```",
    "```\n$ op item get \"{db} prod\"\nFields:\n  username:    {user}\n  password:    {pw}\n```",
    "=== {company}-api Config Vars\nLOG_LEVEL:      info\nSESSION_SECRET: {hex64}\nWEB_CONCURRENCY: 2",
    "env,key,value\nstaging,{penv},{ptok}\nstaging,LOG_LEVEL,debug",
]


def _split(tok: str, c: Ctx) -> tuple[str, str]:
    k = c.r.randint(8, len(tok) - 8)
    a, b = tok[:k], tok[k:]
    c.secret(a)
    c.secret(b)
    return a, b


def _split_tpl(pattern: str, source: str = "tok"):
    def make(c: Ctx) -> str:
        value = c.fresh(source)
        env = {"ptok": "DEPLOY_KEY", "b64": "SA_SECRET", "alnum": "EXPORT_PASSWORD"}.get(source, "API_TOKEN")
        if isinstance(value, dict):
            env, value = value.get("tokenv", env), value[source]
        c["a"], c["b"] = _split(value, c)
        c["tokenv"] = env
        return pattern.format_map(c)
    return make


SPLIT_SECRET = [
    _split_tpl("```bash\nexport {tokenv}=\"{a}\\\n{b}\"\n```\nit still says unauthorized"),
    _split_tpl("```python\nAPI_KEY = (\n    \"{a}\"\n    \"{b}\"\n)\n```"),
    _split_tpl("```js\nconst token = \"{a}\" +\n  \"{b}\";\n```"),
    _split_tpl("User: the token is {a}\n\nUser: {b}\n\nUser: sorry, it got split when I pasted it"),
    _split_tpl("```\nAuthorization: Bearer {a}\n{b}\n```\n(the terminal wrapped it)"),
    _split_tpl("```go\nconst apiKey = \"{a}\" +\n\t\"{b}\"\n```"),
    _split_tpl("```java\nString secret = \"{a}\"\n    + \"{b}\";\n```"),
    _split_tpl("[{time}] {name}: new deploy key: {a}\n[{time}] {name}: {b}\n[{time}] {name}: slack broke the line",
               "ptok"),
    _split_tpl("service account secret:\n```\n{a}\n{b}\n```", "b64"),
    _split_tpl("User: password for the export job, first half `{a}`\nUser: second half `{b}` (splitting it "
               "so the DLP bot doesn't eat it)", "alnum"),
]

AWS_PROSE = [
    "The access key id is {akid} and the secret is {aws_sk}.",
    "{akid} / {aws_sk} — that's the ci-deployer IAM user, it only has S3 access.",
    "AWS creds for the sandbox account: key id {akid}, secret access key {aws_sk}",
    "```\n$ aws configure --profile sandbox\nAWS Access Key ID [None]: {akid}\nAWS Secret Access Key [None]: "
    "{aws_sk}\nDefault region name [None]: eu-west-1\nDefault output format [None]: json\n```",
    "~/.aws/credentials:\n```ini\n[prod]\naws_access_key_id = {akid}\naws_secret_access_key = {aws_sk}\n```",
    "use {akid} with secret {aws_sk} for the backup bucket",
    "Die Access Key ID ist {akid}, der geheime Schlüssel lautet {aws_sk}.",
    "key: {akid}\nsecret: {aws_sk}",
    "Created the access key for {user}: ID {akid}. Secret (shown only once): {aws_sk}",
    "AWS_ACCESS_KEY_ID={akid} AWS_SECRET_ACCESS_KEY={aws_sk} aws s3 ls s3://{company}-backups",
]

PASSPHRASE_AFTER_KEY = [
    "-----BEGIN OPENSSH PRIVATE KEY-----\n[redacted]\n-----END OPENSSH PRIVATE KEY-----\n\n"
    "and the passphrase for it is {pw}",
    "I cut the key body out of the paste (-----BEGIN RSA PRIVATE KEY----- … -----END RSA PRIVATE KEY-----), "
    "the passphrase is \"{phrase}\"",
    "Key is in ~/.ssh/deploy_ed25519 (not pasting it here), passphrase: {pw}",
    "```\n-----BEGIN ENCRYPTED PRIVATE KEY-----\n****\n-----END ENCRYPTED PRIVATE KEY-----\n```\npass phrase → {pw}",
    "it keeps saying bad passphrase when I type {pw} at the 'Enter passphrase for key' prompt, but that's "
    "definitely the one for the key above (I masked it)",
    "The .p12 cert is attached (masked above); its export password is {pw}.",
    "PuTTY key: [removed]\nKey passphrase: \"{phrase}\"",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n<snip>\n-----END PGP PRIVATE KEY BLOCK-----\n"
    "Passphrase is {pw}, it's the release signing key",
    "Das ist der Deploy-Key (Inhalt entfernt), die Passphrase lautet {pw}.",
    "key: ***masked***  passphrase: {pw}",
]

ODD_CASE = [
    "PASSWORD={pw}",
    "PassWord: {pw}",
    "the pAsSwOrD is {pw} lol, caps lock was on when I set it",
    "PASSWD -> {pw}",
    "Api_Key: {ptok}",
    "SECRET : {hex64}",
    "db_PASS = '{pw}'",
    "ToKeN={tok}",
    "Pwd: {pw}",
    "API-KEY {ptok}",
]


def _grouped(intro: str, alphabet: str, size: int, count: int, outro: str = ""):
    def make(c: Ctx) -> str:
        groups = [rs(c.r, alphabet, size) for _ in range(count)]
        for g in groups:
            c.secret(g)
        return intro.format_map(c) + " ".join(groups) + outro
    return make


UPPER_ALNUM = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
GROUPED_TOKEN = [
    _grouped("ok reading it off the screen: ", HEX, 4, 8),
    _grouped("The activation key for the {company} license server is ", UPPER_ALNUM, 5, 5, "."),
    _grouped("Token, in groups so I can read it out on the call: ", HEX + "ABCDEF", 4, 10),
    _grouped("recovery key: ", "0123456789", 6, 8, " (the BitLocker one for the build laptop)"),
    _grouped("The API key is printed in groups on the onboarding sheet: ", UPPER_ALNUM.lower(), 4, 8),
    _grouped("setup key: ", "abcdefghijklmnopqrstuvwxyz234567", 4, 8),
    _grouped("my phone shows the access token as ", UPPER_ALNUM, 4, 6, ", no dashes"),
    _grouped("Der Schlüssel lautet: ", HEX.upper(), 4, 8),
    _grouped("```\nsecret: ", HEX, 4, 12, "\n```"),
    _grouped("la clé d'API (je la lis à voix haute) : ", UPPER_ALNUM, 4, 6),
]
