"""Generate the fresh, held-out redaction corpus of issue 34 (deterministic, fixed seed).

    .venv/bin/python -m bench.redaction_fresh_gen          # (re)write the four files
    .venv/bin/python -m bench.redaction_fresh_gen --check  # exit 1 if they differ from a fresh run

Writes tests/data/redaction_eval/chat_fresh_*.jsonl (agent-chat turns that state a credential; every
listed secret must vanish) and clean_chat_fresh_*.jsonl (chat about credentials that gives none, or
carries credential-shaped non-secrets; every line must come out unchanged). The phrasings were
written for this corpus independently of the redactor and of bench/redaction_eval_gen.py.

The rows are split by template so tuning can use part of them: a row whose template number (the NN
of ``family.NN``) is even goes to the ``*_fresh_tune`` files (split "fresh_tune"), an odd one to
the ``*_fresh_heldout`` files (split "fresh_heldout"). The held-out files are the headline: nobody
tuning the redactor should read them (or the odd-numbered templates that produce them).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import redaction_fresh_tpl_a as A  # noqa: E402
from bench import redaction_fresh_tpl_b as B  # noqa: E402
from bench.redaction_fresh_clean import CLEAN_FAMILIES, CLEAN_GEN  # noqa: E402
from bench.redaction_fresh_values import Ctx  # noqa: E402

SEED = 34_2026_1128
DATA = ROOT / "tests" / "data" / "redaction_eval"
TUNE, HELDOUT = "fresh_tune", "fresh_heldout"
CHAT_TUNE, CHAT_HELDOUT = "chat_fresh_tune.jsonl", "chat_fresh_heldout.jsonl"
CLEAN_TUNE, CLEAN_HELDOUT = "clean_chat_fresh_tune.jsonl", "clean_chat_fresh_heldout.jsonl"
SOURCE = "fresh corpus, issue 34"
ROWS_PER_TEMPLATE = 5
CLEAN_ROWS_PER_TEMPLATE = 3
MIN_SECRET = 4

Template = str | Callable[[Ctx], str]

FAMILIES: dict[str, list[Template]] = {
    "pw_sentence": A.PW_SENTENCE, "pw_cue_after": A.PW_CUE_AFTER, "pw_temporary": A.PW_TEMPORARY,
    "pw_userpass_pair": A.PW_USERPASS_PAIR, "pw_answer": A.PW_ANSWER, "pw_i18n": A.PW_I18N,
    "totp_seed": A.TOTP_SEED, "recovery_codes": A.RECOVERY_CODES, "table_kv": A.TABLE_KV,
    "split_secret": A.SPLIT_SECRET, "aws_prose": A.AWS_PROSE, "passphrase_after_key": A.PASSPHRASE_AFTER_KEY,
    "odd_case": A.ODD_CASE, "grouped_token": A.GROUPED_TOKEN, "base64_pipe": B.BASE64_PIPE,
    "urlencoded_redirect": B.URLENCODED_REDIRECT, "php_define": B.PHP_DEFINE, "pgpass_netrc": B.PGPASS_NETRC,
    "cli_flags": B.CLI_FLAGS, "secret_set_cli": B.SECRET_SET_CLI, "bytes_key": B.BYTES_KEY,
    "api_key_prose": B.API_KEY_PROSE, "prefixless_token": B.PREFIXLESS_TOKEN, "db_conn_string": B.DB_CONN_STRING,
    "webhook_secret": B.WEBHOOK_SECRET, "ssh_sudo": B.SSH_SUDO, "wifi": B.WIFI, "pin": B.PIN,
    "shell_env": B.SHELL_ENV,
}


def _plain(text: str, c: Ctx) -> str:
    return text


def _turn(text: str, c: Ctx) -> str:
    return f"User: {text}\n\nAssistant: {c['reply']}"


def _slack(text: str, c: Ctx) -> str:
    return f"[{c['time']}] {c['name'].lower()}: {text}"


def _ticket(text: str, c: Ctx) -> str:
    title = c.r.choice(("access for the new contractor", "staging deploy broken", "migrate the nightly export",
                         "onboarding checklist", "cannot reach the metrics db"))
    return f"**{c['ticket']}** — {title}\n\n{text}"


def _quote(text: str, c: Ctx) -> str:
    quoted = "\n".join("> " + line if line else ">" for line in text.split("\n"))
    return f"{c['name']} wrote:\n{quoted}\n\nI'll take it from here."


def _agent(text: str, c: Ctx) -> str:
    return f"User: can you look at this?\n\n{text}\n\nAssistant: Sure — reading it now."


WRAPPERS = [(_plain, 40), (_turn, 20), (_slack, 15), (_ticket, 8), (_quote, 9), (_agent, 8)]


def wrap(text: str, c: Ctx) -> str:
    if "User:" in text or "Assistant:" in text or text.startswith("["):
        return text
    fns, weights = zip(*WRAPPERS)
    return c.r.choices(fns, weights)[0](text, c)


def render(tpl: Template, c: Ctx) -> str:
    return tpl.format_map(c) if isinstance(tpl, str) else tpl(c)


def well_formed(text: str, secrets: list[str]) -> bool:
    """Every secret is there, long enough, and nothing else in the text repeats one."""
    if not secrets or any(len(s) < MIN_SECRET or s not in text for s in secrets):
        return False
    probe = text
    for s in sorted(secrets, key=len, reverse=True):
        probe = probe.replace(s, "\0")
    return not any(s in probe for s in secrets)


def credential_rows(r: random.Random) -> list[dict]:
    rows = []
    for family, templates in FAMILIES.items():
        for i, tpl in enumerate(templates):
            for _ in range(ROWS_PER_TEMPLATE):
                for _attempt in range(50):
                    c = Ctx(r)
                    text = wrap(render(tpl, c), c)
                    if well_formed(text, c.secrets):
                        break
                else:
                    raise RuntimeError(f"{family}.{i:02d}: could not make a well-formed row")
                rows.append({"family": family, "template": f"{family}.{i:02d}", "split": "fresh",
                             "secrets": c.secrets, "text": text, "source": SOURCE})
    return rows


def clean_rows(r: random.Random) -> list[dict]:
    rows, seen = [], set()
    for family, templates in CLEAN_FAMILIES.items():
        for i, tpl in enumerate(templates):
            for _ in range(CLEAN_ROWS_PER_TEMPLATE):
                for _attempt in range(10):
                    c = Ctx(r, CLEAN_GEN)
                    text = wrap(render(tpl, c), c)
                    if c.secrets:
                        raise RuntimeError(f"clean template {family}.{i:02d} uses a secret field")
                    if text not in seen:
                        break
                else:
                    continue
                seen.add(text)
                rows.append({"family": family, "template": f"{family}.{i:02d}", "split": "fresh",
                             "text": text, "source": SOURCE})
    return rows


def split_of(template: str) -> str:
    """Even template numbers are for tuning, odd ones stay held out (decided on the id alone)."""
    return TUNE if int(template.rsplit(".", 1)[1]) % 2 == 0 else HELDOUT


def split(rows: list[dict]) -> dict[str, list[dict]]:
    """Split name -> its rows, each row's "split" set; the order within a split is kept."""
    out: dict[str, list[dict]] = {TUNE: [], HELDOUT: []}
    for row in rows:
        part = split_of(row["template"])
        out[part].append({**row, "split": part})
    return out


def dumps(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def generate(seed: int = SEED) -> dict[str, str]:
    """File name -> file text; the same seed gives the same bytes."""
    r = random.Random(seed)
    chat, clean = split(credential_rows(r)), split(clean_rows(r))
    return {CHAT_TUNE: dumps(chat[TUNE]), CHAT_HELDOUT: dumps(chat[HELDOUT]),
            CLEAN_TUNE: dumps(clean[TUNE]), CLEAN_HELDOUT: dumps(clean[HELDOUT])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    args = ap.parse_args(argv)
    files = generate()
    if args.check:
        stale = [n for n, t in files.items() if not (DATA / n).is_file() or (DATA / n).read_text("utf-8") != t]
        print("stale: " + ", ".join(stale) if stale else "up to date")
        return 1 if stale else 0
    for name, text in files.items():
        (DATA / name).write_text(text, encoding="utf-8")
        print(f"wrote {DATA / name} ({text.count(chr(10))} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
