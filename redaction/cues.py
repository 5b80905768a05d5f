"""The cue words of :mod:`redaction.stated` and how they are found in a text (issue 34).

A cue is a credential word (password and its forms in some forty languages, pass, pw, passphrase,
creds, login, PIN, seed phrase, Wi-Fi key; token/secret/key words only in odd case, or in another
language) found by a literal scan of the lowercased text and extended over the rest of its word
(``passwords``, ``Passworts``, ``паролем``). Also here: the words that link a cue to its value
(``is``, ``ist``, ``est``, ``lautet``…), compound nouns that make a cue a thing rather than a label
(``password manager``), and words an answer opens with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# --------------------------------------------------------------------------
# Cues
# --------------------------------------------------------------------------

# cue stem -> kind. "pw": a password word (a value right after it may be weak);
# "login": a login/credentials word (values must be medium on their own).
# Stems are matched at a word start; _cue_end extends them over the rest of the word.
_CUES: dict[str, str] = {
    # English
    "password": "pw", "passwd": "pw", "passcode": "pw", "passphrase": "pw", "pass phrase": "pw",
    "pass word": "pw", "pass": "pw", "pwd": "pw", "pw": "pw", "pword": "pw",
    "creds": "login", "credentials": "login", "credential": "login", "login": "login", "log in": "login",
    "log into": "login", "logged in": "login", "logged into": "login", "sign in": "login", "signin": "login", "sign-in": "login",
    "basic auth": "login", "auth": "login", "prompt": "login", "unlock": "login", "account": "login", "acct": "login",
    "pin": "pin", "pin code": "pin", "pincode": "pin", "geheimzahl": "pin", "code pin": "pin",
    # codes typed on a keypad: digits right after them are the code ("door code for the lab: 6415")
    **{f"{w} code": "code" for w in ("door", "alarm", "gate", "keypad", "lock", "unlock", "entry", "safe", "garage",
                                     "lockbox", "key box", "keybox", "building", "puk", "sim", "padlock")},
    "puk": "code", "puk1": "code", "puk2": "code",
    "seed phrase": "pw", "recovery phrase": "pw", "mnemonic": "pw",
    # token / secret: only "<cue> is|:|= <value>", the value a token on its own (any case: "TOKEN iS …")
    "token": "tok", "secret": "tok", "key": "tok", "api key": "tok", "apikey": "tok", "api_key": "tok",
    "api-key": "tok", "access key": "tok", "access_key": "tok", "secret key": "tok", "secret_key": "tok",
    "auth_token": "tok", "access_token": "tok", "auth token": "tok", "access token": "tok",
    # token / key words of other languages ("tix": like "tok", in any case: English prose is the
    # other rules' business, these are not)
    "chiave": "tix", "schlüssel": "tix", "schluessel": "tix", "api-schlüssel": "tix", "clé": "tix",
    "chave": "tix", "sleutel": "tix", "jeton": "tix", "jetón": "tix", "nøgle": "tix", "nyckel": "tix",
    "klucz": "tix", "ключ": "tix", "токен": "tix",
    # a Wi-Fi key is a password
    "wifi key": "pw", "wi-fi key": "pw", "wpa key": "pw", "wpa2 key": "pw", "wpa3 key": "pw", "network key": "pw",
    "wlan key": "pw", "psk": "pw", "wlan-schlüssel": "pw", "wifi code": "pw", "wi-fi code": "pw", "code wifi": "pw",
    "code wi-fi": "pw", "code du wifi": "pw", "clé wifi": "pw", "wifi pass": "pw", "wlan code": "pw",
    # German, Dutch, Scandinavian
    "passwort": "pw", "kennwort": "pw", "zugangsdaten": "login", "wachtwoord": "pw", "inloggegevens": "login",
    "lösenord": "pw", "losenord": "pw", "passord": "pw", "adgangskode": "pw", "salasana": "pw",
    # French, Spanish, Portuguese, Italian, Romanian
    "mot de passe": "pw", "mdp": "pw", "identifiants": "login", "contraseña": "pw", "contrasena": "pw",
    "clave": "pw", "senha": "pw", "parola d'ordine": "pw", "parola": "pw", "credenziali": "login",
    "credenciales": "login", "credenciais": "login", "parolă": "pw",
    # Central/Eastern European, Turkish, Greek
    "hasło": "pw", "haslo": "pw", "heslo": "pw", "jelszó": "pw", "jelszo": "pw", "lozinka": "pw",
    "geslo": "pw", "şifre": "pw", "Şifre": "pw", "şifresi": "pw", "sifre": "pw", "пароль": "pw", "Пароль": "pw",
    "ПАРОЛЬ": "pw", "пароля": "pw", "Пароля": "pw", "гасло": "pw", "Гасло": "pw", "лозинка": "pw", "Лозинка": "pw",
    "κωδικός": "pw", "Κωδικός": "pw", "κωδικό": "pw", "συνθηματικό": "pw",
    **{stem: "pw" for stem in ("парол", "Парол", "ПАРОЛ", "hasł", "hasl", "hesl", "jelsz", "lozink", "gesl",
                               "adgangskod", "salasan", "contraseñ", "contrasen", "senh", "κωδικ", "Κωδικ",
                               "συνθηματικ", "гасл", "Гасл", "лозинк", "Лозинк")},
    "palavra-passe": "pw", "palavra passe": "pw", "anmeldedaten": "login", "benutzerkennwort": "pw",
    "code d'accès": "pw", "codice di accesso": "pw", "kata laluan": "pw", "sandi": "pw",
    "पासवर्ड": "pw", "कूटशब्द": "pw", "كلمة المرور": "pw", "كلمة السر": "pw", "סיסמה": "pw", "סיסמא": "pw",
    "رمز عبور": "pw", "گذرواژه": "pw", "পাসওয়ার্ড": "pw", "密碼是": "pw", "パスワードは": "pw",
    # Asian languages (no spaces: the value is cut off the script around it)
    "密码": "pw", "密碼": "pw", "口令": "pw", "パスワード": "pw", "비밀번호": "pw", "암호": "pw",
    "mật khẩu": "pw", "kata sandi": "pw", "รหัสผ่าน": "pw",
}
# Stems of inflected languages: any ending of up to five letters (cases, articles, possessives).
_INFLECTED = frozenset({"парол", "hasł", "hasl", "hesl", "jelsz", "lozink", "gesl", "şifre", "Şifre", "sifre",
                        "lösenord", "losenord", "passord", "adgangskod", "salasan", "wachtwoord", "kennwort",
                        "passwort", "contraseñ", "contrasen", "senh", "κωδικ", "Κωδικ", "συνθηματικ", "гасл",
                        "Гасл", "лозинк", "Лозинк", "Парол", "ПАРОЛ"})
# "pass", "parola" and "clave" are ordinary words too: only as whole words.
_WHOLE_WORD = frozenset({"account", "acct", "puk", "psk", "auth", "pass", "pw", "pwd", "pword", "mdp", "clave", "parola", "prompt", "unlock", "login", "token", "pin",
                         "secret", "key"})
# What may follow a stem inside the same word ("passwords", "Passworts", "logins", "prompted").
_SUFFIXES = ("s", "es", "'s", "’s", "ed", "en", "er", "e", "a", "ue", "nya")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
STATED_CUE_PATTERNS = tuple(sorted(_CUES))
_CUE_GROUPS: dict[str, list[str]] = {}
for _stem in _CUES:
    _CUE_GROUPS.setdefault(_stem[:3], []).append(_stem)
_ALL_CUE_GROUPS = tuple((prefix, tuple(stems)) for prefix, stems in _CUE_GROUPS.items())
_ASCII_CUE_GROUPS = tuple(group for group in _ALL_CUE_GROUPS if group[0].isascii())

# Words linking a cue to its value: "password is X", "Passwort ist X", "mot de passe : X",
# "contraseña es X", "senha é X", "password è X", "wachtwoord op X", "hasło to X".
_LINKERS = frozenset("""
: = - -- — – -> → => is was are were ist war sind est était es era é è er är on op jest to je da
now set to of as be will would here here's it's its ist: is: are: : now: now, new temporary temp
lautet lauten heißt heisst c'est cest c’est vaut será sera fica resta rimane wordt blijft
literally simply just actually still currently always also
type enter paste use try must should
""".split())
# A reference to where a secret lives, not the secret: $env:X, env.X, @env.X, ${X}, %X%, getenv(…)
ENV_REF_RE = re.compile(r"^[@$#]?\{?(?:env|Env|ENV)[:.(\[]|^\$\{|^\$[A-Z_][A-Z0-9_]*$|^%[A-Za-z_][A-Za-z0-9_]*%$"
                        r"|getenv|environ|secrets\.|^vault:|^ref\+|^op://|^arn:aws:")
# A cue followed by one of these is a compound noun ("password manager", "token limit"): what follows
# is about the thing, not a value of the cue (a value credential-shaped on its own still counts).
_COMPOUNDS = frozenset("""
manager managers policy policies field fields reset resets hash hashes hashing prompt prompts length rotation
requirement requirements strength change changes expiry expiration history rule rules complexity file files store
vault generator list format column input box hint hints recovery protected protection authentication less based
salt storage attempts attempt error errors check validation validator limit limits count budget usage type version
""".split())
# Words an answer may open with before the value it gives ("Sure: X", "it's X").
_OPENERS = frozenset("sure sure, sure: yes yes, ok ok, okay here here: it's it’s its it is try use that's".split())
# A PIN cue names a PIN when written in capitals or after a determiner ("the PIN", "my pin"),
# not the verb ("pin the version to 3000").
_PIN_DETERMINERS = ("the ", "my ", "your ", "our ", "his ", "her ", "their ", "a ", "card ", "sim ", "door ", "bank ",
                    "unlock ", "phone ", "new ", "default ", "atm ", "debit ", "credit ", "lock ", "screen ",
                    "voicemail ", "login ", "app ", "piv ", "yubikey ", "admin ", "user ", "safe ", "its ")
_PIN_RE = re.compile(r"[0-9]{4,12}")
_USERISH_RE = re.compile(r"[A-Za-z][A-Za-z0-9._@-]{1,63}")
_LOWER_PW_RE = re.compile(r"[a-z]{3,}[0-9]{2,}[a-z0-9]*|[0-9]{2,}[a-z]{3,}[a-z0-9]*")
# A generated passphrase of words ("pixel_parrot_lantern", "raven.tango.viper", "otter-koala-jasper-7"):
# three or more words of 3-10 letters, one separator throughout, maybe a number at the end. Stated
# next to a password cue it is the password; code names of that shape are made of code words.
_WORD_PW_RE = re.compile(r"[a-z]{3,10}(?P<sep>[-_.+])[a-z]{3,10}(?:(?P=sep)[a-z]{3,10}){1,5}(?:(?P=sep)?[0-9]{1,4})?")
# words in capitals with a number: "SierraJuniperIndigo55", "GlacierKoalaTundra75"
_CAMEL_PW_RE = re.compile(r"(?:[A-Z][a-z]{2,9}){3,5}[0-9]{1,4}[!@#$%^&*+=?~]?")
_CODE_WORDS = frozenset("""
get set put read write load save dump file files env var vars config conf cfg user users name pass passwd password
secret secrets key keys token tokens url uri path dir data test tests tmp temp old new default value values init main
app api src lib bin dev prod staging local remote from with the and for not none null true false auth login hash salt
store vault field input form reset change update create delete list dict map int str len max min log logs cache
""".split())


# Compiled once (speed: an inline re call looks its pattern up in re's cache every time).
_PW_SPLIT_RE = re.compile(r"[-_.+0-9]+")
_CAP_WORD_RE = re.compile(r"[A-Z][a-z]+")
_NAME_SPLIT_RE = re.compile(r"[-_]")
_CAMEL_SEG_RE = re.compile(r"[a-z]*(?:[A-Z][a-z0-9]{2,})+|[A-Z]{2,}[a-z]{3,}")
_NEXT_SHORT_WORD_RE = re.compile(r"[ \t]+([A-Za-z]{2,3})\b")


def word_passphrase(v: str) -> bool:
    """``pixel_parrot_lantern``: words joined into a password, not a snake_case name of code."""
    m = _WORD_PW_RE.fullmatch(v)
    return m is not None and not any(w in _CODE_WORDS for w in _PW_SPLIT_RE.split(v) if w)


def camel_passphrase(v: str) -> bool:
    """``SierraJuniperIndigo55``: three or more capitalised words and a number, no code word."""
    return _CAMEL_PW_RE.fullmatch(v) is not None and not any(
        w.lower() in _CODE_WORDS for w in _CAP_WORD_RE.findall(v))


def _cue_hits(text: str, low: str, cues: Iterable[str] | None = None) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each cue, extended over the rest of its word. ``cues``: the stems
    known to occur in ``low`` (the engine's shared pass, gating.py), looked for alone."""
    out: list[tuple[int, int, str]] = []
    if cues is not None:
        for stem in cues:
            _stem_hits(text, low, stem, _CUES[stem], out)
        out.sort()
        return out
    # ASCII text cannot hold a non-ASCII cue: its groups are not even looked at. ``in`` rather
    # than ``find``: no method call per group, and most texts hold none of the ~70 prefixes.
    for prefix, stems in (_ASCII_CUE_GROUPS if low.isascii() else _ALL_CUE_GROUPS):
        if prefix in low:  # one search rules out every stem of the group
            for stem in stems:
                _stem_hits(text, low, stem, _CUES[stem], out)
    out.sort()
    return out


def _stem_hits(text: str, low: str, stem: str, kind: str, out: list) -> None:
    if True:
        i = low.find(stem)
        while i >= 0:
            j = i + len(stem)
            glued = i > 0 and low[i - 1] in _GLUE
            if glued and low[i - 1] in "_-":
                name_end = _odd_name_end(text, i, j)
                if name_end is not None:
                    out.append((i, name_end, kind))  # "Db_PaSsWoRd = …", "API_kEy: …"
                elif kind == "pw" and stem not in _WHOLE_WORD:
                    # a command or name holding a password word (wpa_passphrase, set-initial-password,
                    # DB_PASSWORD): what follows counts only if credential-shaped on its own
                    end = _name_end(text, j)
                    if end is not None:
                        out.append((i, end, "login"))
            elif i == 0 or not ((low[i - 1].isascii() and low[i - 1].isalnum()) or low[i - 1] in _GLUE
                                or low[i - 1] in "+=" or (low[i - 1].isalpha() and stem.isascii())):
                end = _cue_end(low, j, stem in _WHOLE_WORD, stem in _INFLECTED)
                if end is not None and (end >= len(low) or low[end] not in _GLUE
                                        or (low[end] in ".-" and (end + 1 == len(low) or low[end + 1].isspace()))):
                    if kind == "tix":
                        out.append((i, end, "tok"))
                    elif kind != "tok" or _odd_case(text[i:end]) or _odd_linker(text, end) \
                            or _foreign_linker(low, end):
                        out.append((i, end, kind))
            i = low.find(stem, i + 1)


# A cue glued to an identifier is a name, not a word of a sentence: $PWD, GITHUB_TOKEN,
# password_hash, --password (flags are judged by the CLI rules), ~/.pgpass.
_GLUE = frozenset("$_-./\\@#%")


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _odd_name_end(text: str, i: int, j: int) -> int | None:
    """The end of an identifier around a cue glued into it, if the identifier is written in
    odd case (``Db_PaSsWoRd``, ``x-API-kEy``): the assignment rules split such names into
    nonsense, so this rule reads them. Normal names (``GITHUB_TOKEN``, ``$PWD``) are not cues."""
    a = i
    while a > 0 and text[a - 1] in _NAME_CHARS and i - a < 64:
        a -= 1
    if a > 0 and text[a - 1] in "$%@./+=\\":
        return None
    b = j
    while b < len(text) and text[b] in _NAME_CHARS and b - j < 64:
        b += 1
    for seg in _NAME_SPLIT_RE.split(text[a:b]):
        if len(seg) >= 2 and _odd_case(seg) and not seg.isupper():
            if _CAMEL_SEG_RE.fullmatch(seg):
                continue  # camelCase is a normal name
            return b
    return None


def _name_end(text: str, j: int) -> int | None:
    a = j
    while a < len(text) and text[a] in _NAME_CHARS and a - j < 64:
        a += 1
    return a if a - j < 64 else None


def _odd_case(word: str) -> bool:
    """``TOKEN``, ``SeCrEt``, ``ToKeN``: how a shouted or mangled word looks (``token`` and ``Token``
    after "is"/":" are the other rules' business)."""
    return not (word.islower() or (word[0].isupper() and word[1:].islower()))


def _odd_linker(text: str, end: int) -> bool:
    """"token IS …", "secret iS …": the verb after a credential word in odd case."""
    m = _NEXT_SHORT_WORD_RE.match(text, end)
    return m is not None and m.group(1).lower() in ("is", "was") and any(c.isupper() for c in m.group(1)[1:] or "") \
        or (m is not None and m.group(1) in ("IS", "WAS"))


# "O token é X", "el token de acceso es X": an English credential word in a sentence of another
# language, known by its linker within the next three words (one anchored match per cue).
_FOREIGN_RE = re.compile(r"(?:[ \t]+[^\s]+){0,2}?[ \t]+(?:é|è|es|est|ist|är|er|jest|je|lautet|c'est|era|será|sind"
                         r"|wordt):?(?=\s|$)")


def _foreign_linker(low: str, end: int) -> bool:
    return _FOREIGN_RE.match(low, end, end + 48) is not None


def _cue_end(low: str, j: int, whole: bool, inflected: bool = False) -> int | None:
    if j < len(low) and low[j].isdigit():
        return None  # "pw00005qZ7", "pass123": a value that starts like a cue word
    if j >= len(low) or not low[j].isalpha():
        return j
    if inflected:  # "паролем", "hasła", "lösenordet", "şifresi": any short ending
        k = j
        while k < len(low) and low[k].isalpha() and k - j <= 5:
            k += 1
        return k if k - j <= 5 else None
    if not low[j].isascii():
        return j if not low[j].isalpha() or not low[j - 1].isascii() else None
    k = j
    while k < len(low) and low[k] in _LETTERS:
        k += 1
    suffix = low[j:k]
    if suffix in _SUFFIXES and not (whole and suffix not in ("s", "es", "ed", "'s")):
        return k
    return None
