"""End to end: secrets planted in a ledger never reach any byte on disk of the
index dir or the QMD export, through both sinks and the real redactor."""

from __future__ import annotations

from pathlib import Path

from indexer.embedding.factory import make_embedder
from indexer.runtime.config import load_config
from indexer.search.searcher import Searcher, SearchRequest
from indexer.sync.context import Indexer, build_sinks
from indexer.sync.engine import sync_once
from ledger.writer import LedgerWriter, ToolUse

PEM_BODY = ("MIIEowIBAAKCAQEA0Zp2kqg7bJ3kU5t3eWmX1b7YxC8d0p5Qh0v6cX9u2T3n8r1s\n"
            "Y4oV7mK2pL9qR6wS3tU8vX1yZ0aB2cD4eF6gH8iJ0kL1mN3oP5qR7sT9uV1wX3yZ\n"
            "5aB7cD9eF1gH3iJ5kL7mN9oP1qR3sT5uV7wX9yZ1aB3cD5eF7gH9iJ1kL3mN5oP7q")
SECRETS = {
    "aws": "AKIAZ7QW3ERT5YU8IOPL",
    "github": "ghp_9aF3kLm2Qx7Rt5Vb1Nz8Wc4Yd6Hj0PsUeGiO",
    "openai": "sk-proj-Xy7Gh3Kd9Lm2Np5Qr8St1Uv4Wx6Za0Bc3De5Fg7Hj9Kl",
    "slack": "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "pgpass": "Tr0ub4dor&3xyzzy",
    "pem": PEM_BODY.split("\n")[1],
    "stripe": "sk_live_51HxQ2aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
    "known": "correct-horse-battery-staple-42",
    # context-only (no vendor format): found by their surroundings alone
    "header": "Qm7tR2vX9pL4kW8nZ3sD6fH1jB5cY0gT",
    "xml": "Pw4!rd-Xml-9kQ2zL",
    "curl": "Cu7lTk3nQ9vW2xR8pL5mZ1sD4fG6hJ0b",
    "walrus": "Wa1rus-Op3rator-Pass!9",
    # repeated: named once by context, then pasted bare elsewhere in the turn
    "repeated": "Rp6eAt9dVx2Lm4Qw8Zk3Nt7Hs1Gb5Yc0",
}


def test_no_secret_reaches_the_index_or_the_export(tmp_path: Path):
    ledger = tmp_path / "agents.db"
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
    with LedgerWriter(ledger, seed=4) as w:
        w.turn("main", user=f"my key is {SECRETS['aws']} and token {SECRETS['github']}",
               assistant=f"Please rotate {SECRETS['github']} now.")
        w.turn("main", user=f"export OPENAI_API_KEY={SECRETS['openai']}",
               assistant=f"Use postgres://app:{SECRETS['pgpass']}@db.internal:5432/app instead of pasting it.")
        w.turn("main", user=f"here is the deploy key\n{pem}", assistant="Never paste private keys.",
               tools=[ToolUse("env", {"token": SECRETS["slack"]}, f"SLACK_BOT_TOKEN={SECRETS['slack']}")])
        w.turn("side", user=f"stripe {SECRETS['stripe']}", assistant=f"the passphrase was {SECRETS['known']}")
        w.turn("ctx", user=f"curl -H 'X-Auth-Token: {SECRETS['header']}' https://api.internal/v1 and "
                           f"curl -u '{SECRETS['curl']}:' https://billing.internal",
               assistant=f"In the XML config use <password>{SECRETS['xml']}</password>; in Go, "
                         f"password := \"{SECRETS['walrus']}\"")
        w.turn("ctx", user=f"Authorization: Api-Token {SECRETS['repeated']}",
               assistant=f"Noted. I'll remember {SECRETS['repeated']} for later.")
        w.turn("ctx", user=f"the header was X-Auth-Token: {SECRETS['header']}",
               assistant=f"Rotate {SECRETS['header']} today; {SECRETS['header']} is in the CI logs.")
        w.compaction("ctx", f"Agreed to rotate the key {SECRETS['repeated']}: it was sent as "
                            f"Authorization: Api-Token {SECRETS['repeated']}.")
        w.compaction("main", f"User shared AWS key {SECRETS['aws']} and Slack token {SECRETS['slack']}; "
                             f"told to rotate.")
    known = tmp_path / "known_secrets.txt"
    known.write_text(SECRETS["known"] + "\n")
    config = load_config(None, env={}, overrides={
        "ledger": {"path": str(ledger)},
        "index": {"dir": str(tmp_path / "index"), "sinks": ["lancedb", "qmd"]},
        "qmd": {"export_dir": str(tmp_path / "export")},
        "redaction": {"known_secrets_file": str(known)}})
    embedder = make_embedder(config)
    ix = Indexer(config, sinks=build_sinks(config, embedder=embedder))
    summary = sync_once(ix)
    assert summary.documents_written == 9  # 7 turns + 2 compactions
    searcher = Searcher(config, embedder=embedder, state=ix.state)
    hits = searcher.search(SearchRequest(query="rotate the key token", persona="atlas", max_results=20)).results
    searcher.close()
    ix.close()
    assert hits and any("[REDACTED" in h.snippet or "***" in h.snippet for h in hits)
    blobs = [p.read_bytes() for root in (tmp_path / "index", tmp_path / "export") for p in root.rglob("*")
             if p.is_file()]
    assert len(blobs) > 10
    for name, secret in SECRETS.items():
        needle = secret.encode()
        for piece in {needle, needle[:12], needle[-12:]}:
            assert not any(piece in blob for blob in blobs), f"{name} secret found on disk"
