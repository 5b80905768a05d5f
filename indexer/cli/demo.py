"""``ledger-indexer demo --dir DIR``: a realistic demo ledger and a config for it.

Several personas, sessions with forks and compactions, tool calls, system
prompts, thinking, a pending turn, a private-looking DM label, and a couple of
pasted secrets (which must never reach the index).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from ledger.writer import LedgerWriter, ToolUse

# Fake but realistic-format credentials: the redactor must mask them.
DEMO_SECRETS = (
    "AKIAIOSFODNN7EXAMPLZ",
    "ghp_R4nd0mT0k3nV4lu3F0rD3m0Purp0s3s12",
    "postgres://billing:S3cr3tPassw0rd!@db.internal:5432/billing",
)

_CONVERSATIONS = {
    "atlas": {
        "main": [
            ("We need to decide on JWT expiry for the mobile app. Access tokens at 15 minutes?",
             "Yes: 15-minute access tokens with 30-day rotating refresh tokens. Revoke the refresh token family "
             "on reuse detection. We agreed to revisit after the beta."),
            ("Where do we keep the signing keys?",
             "In the KMS, rotated every 90 days; the API only sees key ids. Never commit keys to the repo."),
            (f"Deploy failed, here's my env: AWS_ACCESS_KEY_ID={DEMO_SECRETS[0]} and GITHUB_TOKEN={DEMO_SECRETS[1]}",
             "Don't paste credentials in chat: rotate both now. The failure is the missing IAM permission "
             "ecr:GetAuthorizationToken on the deploy role."),
            ("Which Postgres version do we run in production?",
             "Postgres 16.4 on the primary, with two streaming replicas. Upgrade window is the first Sunday."),
            (f"The billing job can't connect: {DEMO_SECRETS[2]}",
             "The pool is exhausted: raise max_connections to 200 and put PgBouncer in transaction mode."),
        ],
        "worker/auth #2": [
            ("Write the refresh-token rotation handler.",
             "Done: rotate on every use, store the family id, and reject a reused token by revoking the family."),
            ("Add a test for reuse detection.", "Added test_refresh_reuse_revokes_family; it passes."),
        ],
        "dm:+1 555/123": [
            ("Remind me what we said about the Kafka retention?",
             "Seven days on the events topic, compacted forever on the accounts topic."),
        ],
    },
    "nova": {
        "research": [
            ("Summarise the trade-offs of HNSW versus IVF-PQ for 1M vectors.",
             "HNSW: best recall and latency, slow to build, more memory. IVF-PQ: fast build, small, lower recall "
             "unless you refine. Under 300k rows a flat scan is fine."),
            ("And for BM25 in SQLite?", "FTS5 with porter stemming; bm25() ranks ascending, so negate it."),
        ],
        "cooking": [
            ("Best ratio for a vinaigrette?", "Three parts oil to one part vinegar, a pinch of salt, some mustard."),
        ],
    },
    "sage": {
        "ops-oncall": [
            ("The canary alert fired at 03:10: p99 latency 2.4 s on checkout.",
             "Roll back the canary; the new Redis client disabled pipelining. Follow up with a load test."),
            ("Postmortem owner?", "Priya owns it; due Friday. Action item: alert on Redis pipeline depth."),
        ],
    },
}


def write_demo_ledger(path: Path, *, seed: int = 42) -> dict[str, str]:
    """Write the demo ledger; returns a few turn ids by name for callers that need them."""
    ids: dict[str, str] = {}
    with LedgerWriter(path, start_ms=1_763_000_000_000, seed=seed) as w:
        for persona, sessions in _CONVERSATIONS.items():
            for label, turns in sessions.items():
                for i, (user, assistant) in enumerate(turns):
                    tools = None
                    if "Deploy failed" in user:
                        tools = [ToolUse("bash", {"cmd": "aws ecr get-login-password"}, "AccessDenied: ecr:GetAuth")]
                    tid = w.turn(label, persona=persona, user=user, assistant=assistant, tools=tools,
                                 system="You are a helpful engineering agent." if i == 0 else None,
                                 thinking="(private reasoning the index must never see)")
                    ids[f"{persona}:{label}:{i}"] = tid
        # A fork: an experiment branched off the JWT decision.
        w.fork("main/experiment-paseto", ids["atlas:main:0"], persona="atlas")
        w.turn("main/experiment-paseto", persona="atlas", user="What if we used PASETO instead of JWT?",
               assistant="PASETO v4.local avoids alg confusion; we would still keep 15-minute expiry.")
        # A compaction of the main session.
        w.compaction("main", "Decisions so far: JWT access tokens expire after 15 minutes, refresh tokens rotate "
                     "for 30 days; signing keys live in KMS; Postgres 16.4 in production; PgBouncer for billing.",
                     persona="atlas")
        w.turn("main", persona="atlas", user="Let's schedule the Postgres upgrade.",
               assistant="Booked for the first Sunday of next month, 02:00 UTC, with a tested rollback.")
        # A turn still streaming when the demo stops: indexed once it completes.
        ids["pending"] = w.turn("research", persona="nova", user="Draft the retrieval eval plan.", status="streaming")
    return ids


def write_demo(dir_: Path) -> tuple[Path, list[str]]:
    """Create DIR/agents.db, memory files, an admin token and DIR/ledger-indexer.toml. A file that
    exists already is kept as it is (an edited config, a ledger grown since): returns the config
    and the names of the files kept."""
    dir_ = dir_.resolve()
    dir_.mkdir(parents=True, exist_ok=True)
    kept: list[str] = []

    def fresh(path: Path) -> bool:
        if path.exists():
            kept.append(str(path.relative_to(dir_)))
            return False
        return True

    ledger = dir_ / "agents.db"
    if fresh(ledger):
        write_demo_ledger(ledger)
    workspace = dir_ / "workspace" / "atlas"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    if fresh(workspace / "MEMORY.md"):
        (workspace / "MEMORY.md").write_text(
            "# Atlas memory\n\n- The team prefers short-lived tokens and KMS-held keys.\n"
            "- Deploys go through the canary first.\n")
    if fresh(workspace / "memory" / "2026-11-14.md"):
        (workspace / "memory" / "2026-11-14.md").write_text(
            "# 2026-11-14\n\nDecided: 15-minute JWT access tokens; revisit after beta.\n")
    token = dir_ / "admin.token"
    if fresh(token):
        token.write_text(secrets.token_urlsafe(32) + "\n")
        token.chmod(0o600)
    config = dir_ / "ledger-indexer.toml"
    if not fresh(config):
        return config, kept
    config.write_text("""# Demo configuration written by `ledger-indexer demo`.
[ledger]
path = "agents.db"
personas = []

[index]
dir = "index"
sinks = ["lancedb", "qmd"]

[qmd]
export_dir = "index/qmd"
update_command = []

[embedding]
model = "sentence-transformers/all-MiniLM-L6-v2"
model_path = ""
batch_size = 32

[memory]
atlas = ["workspace/atlas/MEMORY.md", "workspace/atlas/memory"]

[redaction]
known_secrets_file = ""

[api]
host = "127.0.0.1"
port = 8765
admin_token_file = "admin.token"

[sync]
interval_seconds = 30
debounce_ms = 200
""")
    return config, kept
