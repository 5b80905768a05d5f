"""Hypothesis properties: idempotence, robustness, planted secrets masked."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redaction import Redacted, redact
from tests.redaction_corpus import GENERATORS, leaked

KINDS = sorted(GENERATORS)

# One realistic-format secret (fragment, secret, rule), reproducible from a seed.
planted = st.builds(lambda kind, seed: GENERATORS[kind](random.Random(seed)),
                    st.sampled_from(KINDS), st.integers(0, 2**32 - 1))

# Text that looks like the material the redactor meets: words, operators,
# quotes, URL and key punctuation, plus arbitrary unicode.
_alphabet = st.sampled_from(list("abcXYZ0189 _-.:=/@\"'`\n\t{}[]()<>|%$~+*#&;,!?\\") + ["é", "ß", "İ", "中", "🙂"])
texty = st.one_of(st.text(max_size=60), st.text(_alphabet, max_size=60))
snippets = st.sampled_from([
    "password=", "api_key: ", "Authorization: Bearer ", "token=", "-----BEGIN RSA PRIVATE KEY-----\n",
    "-----END RSA PRIVATE KEY-----", "postgres://u:", "@host/db", "curl -u ", "--token ", "kind: Secret\ndata:\n  ",
    "Cookie: a=", "sk-", "ghp_", "AKIA", "eyJ", "[REDACTED:github-pat]", "***", "\\n", "\"", "'", " ",
])
mixed = st.lists(st.one_of(texty, snippets, planted.map(lambda p: p[0])), max_size=8).map("".join)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(mixed)
def test_idempotent(text: str) -> None:
    once = redact(text).text
    assert redact(once).text == once


@FAST
@given(st.text(max_size=400))
def test_never_crashes_and_spans_are_sane(text: str) -> None:
    r = redact(text)
    assert isinstance(r, Redacted)
    last = 0
    for f in r.findings:
        assert last <= f.start < f.end <= len(text)
        last = f.end
    if not r.findings:
        assert r.text == text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texty, planted, texty, st.sampled_from([" ", "\n", "\t", ": ", " (", "\n\n"]))
def test_planted_secret_is_masked(before: str, secret: tuple[str, str, str], after: str, sep: str) -> None:
    fragment, value, _rule = secret
    text = before + sep + fragment + sep.replace("(", ")") + after
    out = redact(text).text
    assert not leaked(value, out), out


# Context-only secrets (no vendor format) in the issue-9 families, each planted
# twice: once where its context names it, once bare somewhere later.
_CONTEXTS = st.sampled_from([
    "Authorization: Api-Token {v}", "X-Auth-Token: {v}", "curl -u 'ci:{v}' https://h", "password := \"{v}\"",
    "<secret>{v}</secret>", "token for acmecloud: {v}", "api_keys:\n  - {v}\n", "client_secret    = '{v}'",
])
_VALUES = st.text(st.sampled_from("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"),
                  min_size=20, max_size=40).filter(lambda v: sum(c.isdigit() for c in v) >= 3
                                                   and len(set(v)) >= 12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_CONTEXTS, _VALUES, texty, texty)
def test_context_secret_and_its_repeat_are_masked_idempotently(ctx: str, value: str, mid: str, tail: str) -> None:
    text = ctx.format(v=value) + "\n" + mid + " " + value + " " + tail
    out = redact(text).text
    assert not any(value[i:i + 12] in out for i in range(len(value) - 11)), out
    assert redact(out).text == out


def test_a_random_token_with_xxxx_in_it_is_still_masked_and_a_template_is_not():
    """Found by the property above: "xxxx" marks a template only in a value that does not look random."""
    out = redact("Authorization: Api-Token 22222223456789ABXXXx\n 22222223456789ABXXXx").text
    assert "23456789ABXXXx" not in out
    assert redact('api_key = "sk-xxxxxxxxxxxxxxxx"').text == 'api_key = "sk-xxxxxxxxxxxxxxxx"'
