"""The ruleset, as data.

Two kinds of rules:

* ``TokenRule``: a credential with a recognisable format (``ghp_…``,
  ``AKIA…``, JWTs). Every token is a run of 16+ token characters, so the
  engine finds such runs in one scan (they are rare in prose) and, at each
  place inside a run where a token could start, dispatches on the first two
  characters to the rules with that literal prefix. Rules without a literal
  prefix name ``run_gates`` (a substring of the token itself, e.g. ``Q~``);
  the few whose match spans several runs use whole-text ``gates``.
* ``Detector``: a context rule written as a function (assignments, headers,
  URLs with credentials, private-key blocks, Kubernetes Secrets), behind
  gate words; ``()`` means "always run" and is reserved for cheap scans.

Rule ids follow gitleaks' ids where one exists, so findings can be compared.
Breadth follows gitleaks' default ruleset (config/gitleaks.toml) plus
formats it lacks (GCP OAuth, Groq, xAI, Docker Hub, Supabase, ...).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from . import assignments, catalog, detectors, phrases, stated, stated_cli, stated_more, stated_near, structures
from .entropy import shannon
from .gating import DIGIT, Feature
from .gating import defined_in as _home
from .gating import low_words as _low_words
from .gating import search_feature as _search

__all__ = ["REDACTION_VERSION", "TokenRule", "Detector", "TOKEN_RULES", "DETECTORS",
           "MIN_TOKEN_LENGTH", "TOKEN_RUN_CHARS", "GLUED_PREFIXES"]

# Bump on any change that alters output for some input; the index stores it
# and reindexes when it changes (and only then: a refactor that masks the same
# rebuilds nothing). tests/test_redaction_golden.py catches a forgotten bump: it
# fails when the output for a fixed corpus changes while this version does not.
# The indexer's cross-document masking (indexer/sync/recurring.py,
# secret_spread.py) is outside that corpus: a change there that masks
# differently needs a bump here too. 1.3.0: values found in one turn masked in the session's others.
# 1.4.0: folded scan (Unicode spaces, invisible characters, full-width letters,
# ANSI codes), markers and *** in the input shield nothing, glued vendor
# prefixes, values on the next line, stated credentials, Heroku/Notion formats.
# 1.4.1: a token glued to a non-ASCII letter, escaped quotes in values, OSC text scanned, stated
# credentials must read as generated. 1.4.2: one-case hex stated as a credential is one unless a short
# lowercase id (an abbreviated commit) or 0x…. 1.4.3: more scans read Unicode dashes as "-" and prose
# dashes as spaces (a token written with Unicode hyphens); a vendor prefix joined to a word by "-" or
# "_"; uppercase 0x… stated as a key; overlapping occurrences of found values masked as one run; a
# text that makes the search for repeats too slow is refused (RedactionTooCostly: a bad row).
# 1.5.0 (issue 34): credentials stated in language (stated.py: cues in several languages before or
# after a value judged on its shape, an answer in the next message of a turn) and in commands and
# code (stated_cli.py); structures (structures.py: tables, code lists, TOTP seeds, grouped, split and
# encoded values); scanner-catalog breadth (catalog.py: hashes, vendor cues, connection URIs); public
# values left alone (public.py: GPG ids, CI cache keys, certificates, Secret names).
# 1.6.0 (issue 34): detectors judge structure and shape, not templates (groups.py, codes.py, tables.py, cues.py).
# 1.7.0 (issue 34): word passphrases, keypad codes, secrets after secret/token words, parts (stated_more.py).
# 1.7.1: a secret stated after a "…key" word (signing_key, api key) is found even without "secret"/"token".
# 1.8.0 (issue 34): values on the line next to their cue, far from it, quoted phrases (stated_near.py).
REDACTION_VERSION = "1.8.0"

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# Characters a token (or a URL/assignment around it) is made of, and the
# shortest token any run-dispatched rule can match.
TOKEN_RUN_CHARS = r"A-Za-z0-9_.~+/=:|%$@-"
MIN_TOKEN_LENGTH = 16

# Prefixes unmistakable enough to need no left word boundary: a token glued
# to the word or digit before it ("tokenisghp_…", "1AKIA…") is still found.
# Each is long or carries a separator no identifier or hash puts there;
# rules whose literal prefix starts with one of them are matched glued.
GLUED_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-proj-", "sk-svcacct-",
                  "sk-admin-", "sk-ant-", "AKIA", "ASIA", "xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxe-", "xoxs-",
                  "xoxo-", "xoxc-", "xoxd-", "xapp-", "HRKU-", "ntn_")

# Right boundaries: the token must not run on into more token characters,
# otherwise a prefix of an unrelated longer string would match.
E = r"(?![A-Za-z0-9])"
E_ = r"(?![A-Za-z0-9_-])"
E64 = r"(?![A-Za-z0-9+/=])"


@dataclass(frozen=True, slots=True)
class TokenRule:
    id: str
    pattern: str
    """Regex. A group named ``s`` marks the secret; otherwise the whole match."""
    keep: int = 0
    """Characters of the secret kept in the mask: a literal prefix naming the kind."""
    entropy: float = 0.0
    """Minimum Shannon entropy of the secret (rejects ``AAAA…``-style fillers)."""
    gates: tuple[str, ...] = ()
    """Lowercase words, one of which must occur somewhere in the text. For a
    rule without a literal prefix or run gate this is a prefilter for a scan
    of the whole text; otherwise a context requirement checked on a match."""
    run_gates: tuple[str, ...] = ()
    """Case-sensitive substrings of the token itself: the pattern is searched
    only inside token-like runs that contain one (runs are short and few)."""
    left: str | None = ALNUM + "."
    """Characters that must not directly precede the match (word boundary)."""
    check: Callable[[str], bool] | None = None
    """Extra structural validation of the secret."""
    allow: str | None = None
    """Regex: a secret matching it is a published example, not a credential."""
    fillers: bool = True
    """Reject secrets containing obvious fillers (xxxxx, ***, ..., <...>)."""


@dataclass(frozen=True, slots=True)
class Detector:
    id: str
    find: Callable[[str, str], Iterable[tuple[str, int, int, int]]]
    """(text, ascii-lowercased text) -> (rule id, start, end, keep) candidates."""
    gates: tuple[str, ...] = ()
    patterns: tuple[str, ...] = field(default=())
    """Regex sources used by ``find``; part of the fingerprint."""
    needs_run: bool = False
    """Only run when the text has a token-like run (16+ TOKEN_RUN_CHARS): the
    values it looks for are such runs, and most prose has none."""
    requires: tuple[tuple[str | Feature, ...], ...] = ()
    """Further clauses, all of which must hold for ``find`` to find anything: one of each
    clause's words occurs in the lowercased text, or one of its features holds (gating.py
    checks every detector's gates and clauses in one pass per text)."""
    cued: bool = False
    """``find`` also takes ``cues=``: the words of ``gates`` that occur in the text, found by
    that pass, so it does not look for each of them again."""


def _mixed(s: str) -> bool:
    """Has upper and lower case letters, or letters and digits."""
    up = any(c.isupper() for c in s)
    lo = any(c.islower() for c in s)
    dg = any(c.isdigit() for c in s)
    return (up and lo) or ((up or lo) and dg)


def _has_digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def _sk_generic(s: str) -> bool:
    # ``sk-`` is shared by many providers (OpenAI legacy, DeepSeek, Moonshot,
    # OpenRouter...). The body must look random, so CSS classes such as
    # ``sk-spinner-wave-bounce`` stay untouched.
    body = s[3:]
    return _has_digit(body) and _mixed(body) and shannon(body) >= 3.0


def _sas_signature(s: str) -> bool:
    return shannon(s) > 3.5


def _vault_legacy(s: str) -> bool:
    return _has_digit(s) and _mixed(s)


def _slack_legacy_workspace(s: str) -> bool:
    return _has_digit(s[5:])


T = TokenRule

TOKEN_RULES: tuple[TokenRule, ...] = (
    # ---- cloud: AWS ------------------------------------------------------
    T("aws-access-key-id", r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}" + E, keep=4, entropy=3.0, allow=r".*EXAMPLE$"),
    # Only literal characters may be kept: the 4th character here is random.
    T("aws-access-key-id", r"A3T[A-Z0-9]{17}" + E, entropy=3.0, allow=r".*EXAMPLE$"),
    # A secret key printed right after its key id (credentials CSV, CLI output).
    T("aws-secret-access-key", r"A(?:KIA|SIA)[A-Z0-9]{16}[\s,;:|\"']{1,6}(?P<s>[A-Za-z0-9/+]{40})" + E64,
      entropy=4.0, check=_mixed),
    T("aws-bedrock-key", r"ABSK[A-Za-z0-9+/]{109,269}={0,2}" + E64, entropy=3.0),
    T("aws-bedrock-token", r"bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%-]{0,4096}"),
    T("aws-session-signature", r"X-Amz-(?:Security-Token|Signature)=(?P<s>[A-Za-z0-9%+/=_-]{32,4096})"),
    # ---- cloud: Google ----------------------------------------------------
    T("gcp-api-key", r"AIza[0-9A-Za-z_-]{35}" + E_, keep=4, entropy=3.0),
    T("gcp-oauth-access-token", r"ya29\.[0-9A-Za-z_-]{30,4096}" + E_, keep=4, entropy=3.0),
    T("gcp-oauth-refresh-token", r"1//0[0-9A-Za-z_-]{30,4096}" + E_, entropy=3.0),
    T("gcp-oauth-client-secret", r"GOCSPX-[0-9A-Za-z_-]{28}" + E_, keep=4),
    T("gcp-signed-url-signature", r"X-Goog-Signature=(?P<s>[0-9a-f]{64,4096})"),
    T("firebase-cloud-messaging-key", r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,4096}"),
    # ---- cloud: Azure -----------------------------------------------------
    T("azure-storage-account-key", r"AccountKey=(?P<s>[A-Za-z0-9+/]{86,88}={0,2})" + E64),
    T("azure-shared-access-key", r"SharedAccessKey=(?P<s>[A-Za-z0-9+/]{40,88}={0,2})" + E64),
    T("azure-sas-token", r"sig=(?P<s>[A-Za-z0-9%+/]{30,4096}(?:=|%3[Dd]){0,2})(?![A-Za-z0-9%+/=])", left=None,
      check=_sas_signature),
    T("azure-ad-client-secret",
      r"(?<![^\\'\"`\s>=:(,)])(?P<s>[a-zA-Z0-9_~.]{3}[0-9]Q~[a-zA-Z0-9_~.-]{31,34})(?![^\\'\"`\s<),])",
      run_gates=("Q~",), left=None, entropy=3.0),
    # ---- cloud: others ----------------------------------------------------
    T("alibaba-access-key-id", r"LTAI[A-Za-z0-9]{20}" + E, keep=4, entropy=3.0),
    T("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}" + E, entropy=3.0),
    T("cloudflare-origin-ca-key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}" + E),
    T("heroku-api-key-v2", r"HRKU-AA[0-9A-Za-z_-]{58}" + E_, entropy=3.0),
    # The published shape is HRKU-AA + 58 (gitleaks, TruffleHog); "AA" reads as
    # a version, and HRKU- is unmistakable: any random body of 40-100 characters
    # counts (a digit required). Heroku also prefixes its UUID-shaped keys
    # (SonarSource S7006).
    T("heroku-api-key-v2", r"HRKU-[0-9A-Za-z_-]{40,100}" + E_, entropy=3.0, check=_has_digit),
    T("heroku-api-key-v2", r"HRKU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}" + E_,
      entropy=3.0),
    T("flyio-access-token", r"f(?:o1_[A-Za-z0-9_-]{43}|m[12][ar]?_[A-Za-z0-9+/]{100,4096}={0,3})" + E64, keep=4,
      entropy=4.0),
    T("scalingo-api-token", r"tk-us-[A-Za-z0-9_-]{48}" + E_),
    T("supabase-access-token", r"sbp_[a-f0-9]{40}" + E, keep=4),
    T("supabase-secret-key", r"sb_secret_[A-Za-z0-9_-]{20,4096}" + E_),
    T("netlify-access-token", r"nfp_[A-Za-z0-9]{36}" + E, keep=4),
    T("vercel-access-token", r"vcp_[A-Za-z0-9]{40,4096}" + E, keep=4),
    T("planetscale-token", r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,64}" + E_, entropy=3.0),
    T("pulumi-api-token", r"pul-[a-f0-9]{40}" + E, keep=4),
    T("hashicorp-tf-api-token", r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}" + E_,
      run_gates=(".atlasv1.",), left=None, entropy=3.5),
    T("vault-service-token", r"hv[sbr]\.[A-Za-z0-9_-]{90,300}" + E_, keep=4, entropy=3.5),
    T("vault-token-legacy", r"s\.[A-Za-z0-9]{24}" + E, check=_vault_legacy,
      gates=("vault",)),  # "s." alone is too common a prefix: require context
    T("doppler-api-token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44}" + E,
      keep=3, entropy=2.0),
    T("1password-service-account-token", r"ops_eyJ[A-Za-z0-9+/]{250,4096}={0,3}" + E64, keep=4, entropy=4.0),
    T("1password-secret-key",
      r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}" + E,
      entropy=3.0),
    T("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}" + E, keep=4),
    T("databricks-api-token", r"dapi[a-f0-9]{32}(?:-[0-9])?" + E, keep=4, entropy=3.0),
    T("clickhouse-cloud-api-secret-key", r"4b1d[A-Za-z0-9]{38}" + E, entropy=3.0),
    T("dynatrace-api-token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}" + E, entropy=3.5),
    T("grafana-cloud-api-token", r"glc_[A-Za-z0-9+/]{32,400}={0,3}" + E64, entropy=3.0),
    T("grafana-service-account-token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + E, entropy=3.0),
    T("grafana-api-key", r"eyJrIjoi[A-Za-z0-9]{70,400}={0,3}" + E64, keep=3, entropy=3.0),
    T("sentry-org-token", r"sntrys_eyJ[A-Za-z0-9+/=_]{60,4096}" + E64, entropy=4.0),
    T("sentry-user-token", r"sntryu_[a-f0-9]{64}" + E),
    T("new-relic-key", r"NR(?:AK|II|JS)-[A-Za-z0-9-]{19,32}" + E, entropy=3.0),
    T("postman-api-token", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}" + E),
    T("infracost-api-token", r"ico-[A-Za-z0-9]{32}" + E, keep=4, entropy=3.0),
    T("octopus-deploy-api-key", r"API-[A-Z0-9]{26}" + E, keep=4, entropy=3.0),
    T("sourcegraph-access-token", r"sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}" + E, keep=4, entropy=3.0),
    T("openshift-user-token", r"sha256~[A-Za-z0-9_-]{43}" + E_, entropy=3.5),
    T("harness-api-key", r"pat\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}" + E, keep=4),
    T("harness-api-key", r"sat\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}" + E, keep=4),
    T("intra42-client-secret", r"s-s4t2(?:ud|af)-[a-f0-9]{64}" + E),
    T("maxmind-license-key", r"(?<![A-Za-z0-9])[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk" + E, run_gates=("_mmk",), left=None,
      entropy=3.5),
    T("prefect-api-token", r"pnu_[A-Za-z0-9]{36}" + E, keep=4, entropy=2.0),
    T("readme-api-token", r"rdme_[a-z0-9]{70}" + E, entropy=2.0),
    T("rubygems-api-token", r"rubygems_[a-f0-9]{48}" + E),
    T("clojars-api-token", r"CLOJARS_[A-Za-z0-9]{60}" + E),
    T("npm-access-token", r"npm_[A-Za-z0-9]{36}" + E, keep=4, entropy=2.0),
    T("pypi-upload-token", r"pypi-AgE[A-Za-z0-9_-]{50,4096}" + E_, keep=4),
    T("dockerhub-access-token", r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,4096}" + E_),
    T("artifactory-api-key", r"AKCp[A-Za-z0-9]{69}" + E, keep=4, entropy=4.0),
    T("artifactory-reference-token", r"cmVmdGtu[A-Za-z0-9]{56}" + E, entropy=4.0),
    T("easypost-api-token", r"EZ[AT]K[A-Za-z0-9]{54}" + E),
    T("duffel-api-token", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}" + E_),
    T("flutterwave-key", r"FLW(?:SECK|PUBK)_TEST-[a-hA-H0-9]{12,32}(?:-X)?" + E),
    T("frameio-api-token", r"fio-u-[A-Za-z0-9_=-]{64}" + E_),
    T("settlemint-token", r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}" + E),
    T("shippo-api-token", r"shippo_(?:live|test)_[a-fA-F0-9]{40}" + E),
    T("typeform-api-token", r"tfp_[A-Za-z0-9_=.-]{59}" + E_, keep=4),
    T("adobe-client-secret", r"p8e-[A-Za-z0-9]{32}" + E, keep=4, entropy=2.0),
    T("yandex-api-key", r"AQVN[A-Za-z0-9_-]{35,38}" + E_),
    T("figma-token", r"figd_[A-Za-z0-9_-]{40}" + E_),
    T("airtable-personal-access-token", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + E),
    T("mapbox-secret-token", r"sk\.eyJ[A-Za-z0-9_-]{40,4096}\.[A-Za-z0-9_-]{20,4096}" + E_),
    T("sidekiq-secret",
      r"(?i:bundle_(?:enterprise|gems)__contribsys__com)[A-Za-z0-9_.-]{0,20}[\"']?[ \t]*[:=]{1,2}[ \t]*[\"']?"
      r"(?P<s>[a-fA-F0-9]{8}:[a-fA-F0-9]{8})" + E, gates=("contribsys",), left=None),
    # ---- source hosting ----------------------------------------------------
    T("github-pat", r"ghp_[0-9A-Za-z]{36}" + E, keep=4, entropy=3.0),
    T("github-oauth", r"gho_[0-9A-Za-z]{36}" + E, keep=4, entropy=3.0),
    T("github-app-token", r"gh[us]_[0-9A-Za-z]{36}" + E, keep=4, entropy=3.0),
    T("github-refresh-token", r"ghr_[0-9A-Za-z]{36,76}" + E, keep=4, entropy=3.0),
    T("github-fine-grained-pat", r"github_pat_[0-9A-Za-z_]{60,255}" + E, entropy=3.0),
    T("gitlab-token",
      r"gl(?:pat|oas|dt|rt|cbt|ptt|ft|imt|agent|soat|ffct|wt)-[0-9A-Za-z_.-]{20,300}" + E_, entropy=3.0),
    T("gitlab-runner-registration-token", r"GR1348941[A-Za-z0-9_-]{20}" + E_, entropy=3.0),
    T("gitlab-session-cookie", r"_gitlab_session=(?P<s>[0-9a-z]{32})" + E, left=None),
    T("bitbucket-app-password", r"ATBB[A-Za-z0-9_=.-]{28,4096}" + E_, entropy=3.0),
    T("atlassian-api-token", r"AT(?:ATT|CTT)3[A-Za-z0-9_=-]{100,300}" + E_, entropy=3.5),
    # ---- AI providers ------------------------------------------------------
    T("anthropic-admin-api-key", r"sk-ant-admin01-[A-Za-z0-9_-]{80,120}" + E_),
    T("anthropic-api-key", r"sk-ant-api03-[A-Za-z0-9_-]{80,120}" + E_, keep=3),
    T("claude-code-oauth-token", r"sk-ant-o(?:at|rt)01-[A-Za-z0-9_-]{80,120}" + E_),
    T("openrouter-api-key", r"sk-or-v1-[a-f0-9]{64}" + E),
    T("openai-api-key", r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{40,4096}" + E_, keep=3, left=ALNUM + "_-"),
    T("openai-api-key", r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}" + E, keep=3, left=ALNUM + "_-"),
    # Any other ``sk-`` key: legacy OpenAI, DeepSeek, Moonshot, Anthropic of an
    # unknown version... Placed after the specific ones: first valid wins.
    T("sk-api-key", r"sk-[A-Za-z0-9_-]{20,4096}" + E_, keep=3, left=ALNUM + "_-", check=_sk_generic),
    T("huggingface-access-token", r"hf_[A-Za-z0-9]{34}" + E, keep=3, entropy=3.0, check=_mixed),
    T("huggingface-organization-api-token", r"api_org_[A-Za-z0-9]{34}" + E, entropy=3.0, check=_mixed),
    T("groq-api-key", r"gsk_[A-Za-z0-9]{52}" + E, keep=4, entropy=3.0),
    T("perplexity-api-key", r"pplx-[A-Za-z0-9]{48}" + E, keep=4, entropy=3.5),
    T("xai-api-key", r"xai-[A-Za-z0-9]{70,90}" + E, entropy=3.5),
    T("replicate-api-token", r"r8_[A-Za-z0-9]{37}" + E, keep=3, entropy=3.0),
    T("langsmith-api-key", r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}" + E),
    T("pinecone-api-key", r"pcsk_[A-Za-z0-9_]{40,4096}" + E, entropy=3.5),
    T("tavily-api-key", r"tvly-[A-Za-z0-9-]{30,4096}" + E, entropy=3.5),
    T("cerebras-api-key", r"csk-[A-Za-z0-9]{40,4096}" + E, entropy=3.5),
    T("elevenlabs-api-key", r"sk_[a-f0-9]{48}" + E, keep=3),
    # ---- chat, messaging, SaaS --------------------------------------------
    T("slack-bot-token", r"xoxb-[0-9]{8,14}-[0-9A-Za-z-]{12,4096}" + E_, keep=4, entropy=2.0, check=_mixed),
    T("slack-user-token", r"xox[pe]-[0-9]{8,14}-[0-9A-Za-z-]{20,4096}" + E_, keep=4, entropy=2.0, check=_mixed),
    T("slack-legacy-workspace-token", r"xox[ar]-(?:[0-9]-)?[0-9A-Za-z-]{11,4096}" + E_, keep=4, entropy=2.0,
      check=_slack_legacy_workspace),
    T("slack-legacy-token", r"xox[os]-[0-9]{4,20}-[0-9]{4,20}-[0-9]{4,20}-[a-fA-F0-9]{8,64}" + E, keep=4),
    T("slack-config-token", r"xoxe(?:\.xox[bp])?-[0-9]-[A-Za-z0-9]{140,4096}" + E, keep=4),
    T("slack-app-token", r"xapp-[0-9]-[A-Za-z0-9]{4,32}-[0-9]{4,20}-[A-Za-z0-9]{8,128}" + E, keep=4),
    T("slack-webhook-url", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/_-]{40,60})",
      left=None),
    T("discord-webhook-url", r"discord(?:app)?\.com/api/webhooks/[0-9]{6,4096}/(?P<s>[A-Za-z0-9_-]{60,70})" + E_,
      left=None),
    # The first segment is the base64 of a numeric user id, so it starts with
    # MT, Mj, Mz, ND, NT, Nj, Nz, OD or OT.
    T("discord-bot-token", r"M[Tjz][A-Za-z0-9_-]{22,24}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}" + E_,
      gates=("discord", "bot", "token"), left=ALNUM + "_-", entropy=3.5, check=_mixed),
    T("discord-bot-token", r"N[DTjz][A-Za-z0-9_-]{22,24}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}" + E_,
      gates=("discord", "bot", "token"), left=ALNUM + "_-", entropy=3.5, check=_mixed),
    T("discord-bot-token", r"O[DT][A-Za-z0-9_-]{22,24}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}" + E_,
      gates=("discord", "bot", "token"), left=ALNUM + "_-", entropy=3.5, check=_mixed),
    T("telegram-bot-api-token", r"(?:(?<=bot)|(?<![A-Za-z0-9]))[0-9]{5,16}:AA[A-Za-z0-9_-]{30,40}" + E_,
      run_gates=(":AA",), left=None, entropy=3.0),
    T("twilio-api-key", r"SK[0-9a-fA-F]{32}" + E, keep=2, entropy=3.0),
    T("sendgrid-api-token", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + E_, keep=3),
    T("sendinblue-api-token", r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}" + E),
    T("mailgun-private-api-token", r"key-[a-f0-9]{32}" + E, entropy=3.0),
    T("mailchimp-api-key", r"(?<![A-Za-z0-9])[a-f0-9]{32}-us[0-9]{1,2}" + E, run_gates=("-us",), left=None,
      entropy=3.0),
    T("stripe-access-token", r"sk_(?:test|live|prod)_[A-Za-z0-9]{10,99}" + E, keep=3, entropy=2.0),
    T("stripe-access-token", r"rk_(?:test|live|prod)_[A-Za-z0-9]{10,99}" + E, keep=3, entropy=2.0),
    T("stripe-webhook-secret", r"whsec_[A-Za-z0-9]{32,4096}" + E),
    T("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + E),
    T("square-access-token", r"sq0(?:atp-[0-9A-Za-z_-]{22}|csp-[0-9A-Za-z_-]{43})" + E_, entropy=2.0),
    T("square-access-token", r"EAAA[0-9A-Za-z_-]{60}" + E_, entropy=2.0),
    T("facebook-page-access-token", r"EAA[MC][A-Za-z0-9]{100,4096}" + E, keep=3, entropy=4.0),
    T("facebook-access-token", r"(?<![0-9])[0-9]{15,16}(?:\||%7[Cc])[0-9A-Za-z_-]{27,40}" + E_,
      run_gates=("|", "%7C", "%7c"), left=None, entropy=3.0),
    T("paypal-braintree-access-token", r"access_token\$production\$[a-z0-9]{16}\$[a-f0-9]{32}" + E, keep=0),
    T("notion-api-token", r"ntn_[0-9]{11}[A-Za-z0-9]{30,40}" + E, keep=4, entropy=3.5),
    # Published as ntn_ + 11 digits + 35 alphanumerics; ntn_ is unmistakable,
    # so a random body of that length without the leading digits counts too.
    T("notion-api-token", r"ntn_[A-Za-z0-9]{40,50}" + E, keep=4, entropy=3.5, check=_mixed),
    T("notion-integration-secret", r"secret_[A-Za-z0-9]{43}" + E, keep=4, entropy=3.5, check=_has_digit),
    T("linear-api-key", r"lin_(?:api_[A-Za-z0-9]{40}|oauth_[a-f0-9]{64})" + E, entropy=2.0),
    # ---- generic structured tokens -----------------------------------------
    T("jwt", r"eyJ[A-Za-z0-9_-]{10,4096}={0,2}\.ey[A-Za-z0-9_-]{10,16384}={0,2}\.(?:[A-Za-z0-9_+/-]{8,4096}={0,2})?"
             r"(?:\.[A-Za-z0-9_-]{0,4096}\.[A-Za-z0-9_-]{8,4096})?" + E_, keep=3, entropy=3.0),
    T("jwt-base64", r"ZXlK[A-Za-z0-9+/]{60,4096}={0,2}" + E64, keep=0, entropy=3.0),
    # Each repetition starts at a newline, so the repeat is unambiguous (no backtracking blow-up).
    T("putty-private-key",
      r"(?i:private-lines): ?[0-9]{1,4}\r?\n(?P<s>[A-Za-z0-9+/=]{4,80}(?:\r?\n[A-Za-z0-9+/=]{4,80}){0,200})",
      left=None, gates=("private-lines",)),
)



def _vendor_token_rules() -> tuple[TokenRule, ...]:
    """TokenRules for the table in ``vendor_formats``: prefix, body, optional tail.

    Every body must look generated (entropy floor, and digits or mixed case
    where its alphabet allows), so an identifier that happens to start with a
    prefix never matches. URL-shaped prefixes may follow any character.
    """
    from .vendor_formats import HEX, VENDOR_FORMATS

    out = []
    for f in VENDOR_FORMATS:
        pattern = re.escape(f.prefix) + f"[{f.body}]{{{f.min_len},{f.max_len}}}" + f.suffix + E_
        hexy = f.body in (HEX, r"a-f0-9\-")
        out.append(TokenRule(
            f.id, pattern, keep=f.keep, entropy=3.0 if f.min_len >= 16 else 2.5,
            left="" if "/" in f.prefix else ALNUM + ".",
            check=_has_digit if hexy or f.body.startswith("0-9") else _vendor_body_check(len(f.prefix)),
        ))
    return tuple(out)


def _vendor_body_check(prefix_len: int):
    def check(secret: str) -> bool:
        body = secret[prefix_len:]
        return _has_digit(body) and _mixed(body) and (prefix_len >= 4 or shannon(body) >= 3.5)

    check.__qualname__ = f"_vendor_body_check.<{prefix_len}>"  # stable in the fingerprint
    return check


TOKEN_RULES = TOKEN_RULES + _vendor_token_rules()


# Gates of the detectors defined in stated.py and stated_cli.py, by id: read off each one's
# first scans.
_MORE_GATES: dict[str, dict] = {
    # A cue stem (the pass hands it the stems it found: no 70-group scan of its own).
    "stated-password": {"gates": tuple(_home(stated._cue_hits)._CUES), "cued": True},
    "aws-prose-secret": {"gates": _low_words(re.compile("AKIA"), re.compile("ASIA"))},  # its first test
    # _USER_PW_RE: a user, ":", then 6+ characters none of them a space, ":" or "/".
    "user-colon-password": {"requires": ((_search("colon-value", r":[^\s:/]{6}"),),)},
    # _PGPASS_RE: host:port:db:user:password, the port digits or "*".
    "pgpass": {"requires": ((_search("pgpass-port", r":(?:\d{1,5}|\*):"),),)},
}


def _gated(dets: Iterable[Detector]) -> tuple[Detector, ...]:
    return tuple(dataclasses.replace(d, **_MORE_GATES[d.id]) if d.id in _MORE_GATES else d for d in dets)


DETECTORS: tuple[Detector, ...] = (
    # Gates are the words (of the lowercased text) the detector's first scans start with:
    # without one it finds nothing, and gating.py skips it (one pass per text finds them all).
    Detector("private-key", detectors.find_private_keys, gates=_low_words(detectors.PEM_BEGIN_RE),
             patterns=(detectors.PEM_BEGIN_RE.pattern, detectors.PEM_END_RE.pattern)),
    Detector("kubernetes-secret", detectors.find_k8s_secrets, gates=("secret",),
             patterns=(detectors.K8S_KIND_RE.pattern,)),
    Detector("url-credentials", detectors.find_url_credentials, gates=_low_words(detectors.URL_USERINFO_RE),
             requires=(("@",),), patterns=(detectors.URL_USERINFO_RE.pattern,)),
    Detector("authorization-header", detectors.find_auth_headers,
             gates=_low_words(detectors.AUTH_HEADER_RE, detectors.BEARER_RE),
             patterns=(detectors.AUTH_HEADER_RE.pattern, detectors.BEARER_RE.pattern)),
    Detector("cookie", detectors.find_cookies, gates=_low_words(detectors.COOKIE_RE),
             patterns=(detectors.COOKIE_RE.pattern,)),
    # curl -u, the password tools (behind " -p" / " -a" in find_cli_credentials), --flags.
    Detector("cli-credentials", detectors.find_cli_credentials,
             gates=_low_words(detectors.CURL_USER_RE, detectors.CLI_FLAG_RE) + (" -p", " -a"),
             patterns=detectors.CLI_PATTERNS),
    Detector("password-in-prose", detectors.find_prose_passwords,
             gates=_low_words(detectors.NETRC_RE, detectors.PROSE_PASSWORD_RE),
             patterns=(detectors.PROSE_PASSWORD_RE.pattern, detectors.NETRC_RE.pattern)),
    # Assignments are the catch-all; their scan is anchored on a few words.
    # An assignment needs an operator: prose without one skips the anchor scans.
    Detector("assignment", assignments.find_assignments, gates=(":", "=", "</", "<-"),
             requires=(assignments.SECRET_ANCHORS,), patterns=assignments.ASSIGNMENT_PATTERNS),
    # An operator, then a value with a digit (_VALUE_AHEAD): one of its two trigger scans matches.
    Detector("vendor-assignment", assignments.find_vendor_assignments,
             gates=_low_words(*assignments._VENDOR_TRIGGER_RES),
             requires=((DIGIT,), tuple(_search("vendor-trigger", rx) for rx in assignments._VENDOR_TRIGGER_RES)),
             patterns=assignments.VENDOR_PATTERNS),
    Detector("credential-phrase", phrases.find_credential_phrases,
             gates=("token", "key", "secret", "password", "passphrase", "credential", "pat"),
             patterns=phrases.PHRASE_PATTERNS, needs_run=True),
    Detector("stated-credential", phrases.find_stated_credentials,
             gates=("key", "token", "secret", "credential", "passphrase", "pat"), patterns=phrases.STATED_PATTERNS),
    Detector("yaml-secret-list", phrases.find_yaml_secret_lists, gates=("- ",)),
    # Credentials stated in language (issue 34): redaction/stated.py.
    *_gated(stated.detectors(Detector)),
    *_gated(stated_cli.detectors(Detector)),
    *stated_more.detectors(Detector),
    *stated_near.detectors(Detector),
    Detector("credential-header", phrases.find_credential_headers,
             gates=("token", "key", "secret", "auth", "session", "signature", "password"),
             patterns=phrases.HEADER_PATTERNS),
    # Breadth from the scanner catalogs (catalog.py): vendor-cued values, connection URIs.
    Detector("vendor-cue", catalog.find_cued_values, gates=tuple(catalog._KEYWORDS), patterns=catalog.CUED_PATTERNS),
    Detector("connection-uri", catalog.find_connection_uris, gates=("://",), requires=(("@",),),
             patterns=catalog.URI_PATTERNS),
    # Structures and split secrets (structures.py): tables and listings naming a secret column or
    # key, recovery-code lists, TOTP seeds and values read out in groups, values split over two
    # lines, encoded values (base64 piped to a decoder, URL-encoded parameters, a token as a URL's user).
    Detector("table-secret", structures.find_tables, gates=structures._TABLE_WORDS,
             requires=(_home(structures.find_tables)._CELL_SEPARATORS,), patterns=structures.TABLE_PATTERNS),
    Detector("recovery-codes", structures.find_code_lists, gates=structures.CODE_CUES, requires=((DIGIT,),),
             patterns=structures.CODE_LIST_PATTERNS),
    # An otpauth: URI, or a seed after a 2FA cue (_2FA_CUE_RE, searched on the lowercased text).
    Detector("totp-secret", structures.find_totp,
             gates=_low_words(_home(structures.find_totp)._2FA_CUE_RE) + ("otpauth:",),
             patterns=structures.GROUP_PATTERNS[:3], needs_run=True),
    Detector("grouped-secret", structures.find_groups, gates=structures.GROUP_CUES, requires=((DIGIT,),),
             patterns=structures.GROUP_PATTERNS[3:]),
    Detector("split-secret", structures.find_split_values, gates=("\n",), patterns=structures.SPLIT_PATTERNS),
    Detector("encoded-secret", structures.find_encoded_values, gates=("base64", "%3d", "%253d", "%3a", "%253a", "@"),
             patterns=structures.ENCODED_PATTERNS),
)


def _literal_prefix(pattern: str) -> str:
    """Longest literal prefix of a regex: the text every match starts with."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in ".-/~_$":
            lit, nxt = pattern[i + 1], i + 2
        elif c.isalnum() or c in "_-~:=/":
            lit, nxt = c, i + 1
        else:
            break
        if pattern[nxt:nxt + 1] in ("?", "*", "{", "+"):
            break
        out.append(lit)
        i = nxt
    return "".join(out)


# More vendor formats as TokenRules (vendor_rules.py imports names defined above).
from .vendor_rules import VENDOR_TOKEN_RULES  # noqa: E402

TOKEN_RULES = TOKEN_RULES + VENDOR_TOKEN_RULES
# (tokens.py checks every rule once at import: keep, width, a literal prefix or gates)
