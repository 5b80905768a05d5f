"""Context families of issue 9: each secret shape the redactor must see by its
surroundings, positives and near-miss negatives, plus repeats.

Values are random-looking strings made here; every case asserts that no run
of 12 characters of the secret survives anywhere in the output.
"""

from __future__ import annotations

import pytest

from redaction import redact

S = "Zq8vLm3Nx7Rt2Wk9Pj4Hs6Df1Gb5Yc0"   # 31 chars, no vendor prefix
P = "Tr0ub4dor&3xyzzy"                   # a human password


def leaked(secret: str, out: str) -> bool:
    n = min(12, len(secret))
    return any(secret[i:i + n] in out for i in range(len(secret) - n + 1))


def assert_masked(text: str, secret: str) -> str:
    assert secret in text  # the case really plants the secret
    out = redact(text).text
    assert not leaked(secret, out), out
    assert redact(out).text == out  # idempotent
    return out


AUTHORIZATION = [f"Authorization: {scheme} {S}" for scheme in
                 ("Bearer", "Basic", "Api-Token", "Token", "Key", "SSWS", "Digest", "MyVendor-Auth", "token")]
AUTHORIZATION += [f"authorization: {S}", f'{{"Authorization": "Token {S}"}}',
                  f"Proxy-Authorization: Api-Key {S}"]

HEADERS = [f"Token: {S}", f"X-Api-Key: {S}", f"X-Auth-Token: {S}", f"X-Custom-Token: {S}", f"Foo-Key: {S}",
           f"X-Client-Secret: {S}", f"curl -H 'X-Api-Key: {S}' https://api.example.com",
           f'curl --header "X-Auth-Token: {S}" https://api.example.com',
           f'{{"headers": {{"X-Api-Key": "{S}", "Accept": "json"}}}}',
           f"GET /v1/items HTTP/1.1\nHost: api.example.com\nX-Session-Token: {S}\n"]

CURL_USER = [f'curl -u "admin:{P}" https://x.example', f"curl -u 'admin:{P}' https://x.example",
             f"curl -u admin:{P} https://x.example", f"curl --user admin:{P} https://x.example",
             f"curl --user=admin:{P} https://x.example", f'curl -u "{{user}}":"{P}" https://x.example',
             f"curl -u 'deploy':'{P}' https://x.example",
             f"curl https://api.stripe.com/v1/charges -u {S}:", f'curl -u "{S}:" https://api.example.com']

ASSIGNMENTS = [f'password       = "{P}"', f'password := "{P}"', f"password ::= {P}", f"password :::= {P}",
               f"DB_PASSWORD ?= {P}", f'password <- "{P}"', f"'password' => '{P}'", f"password: {P}",
               f"secrets:\n  - {S}\n", f"api_keys:\n  - {S}\n  - other\n", f"<password>{P}</password>",
               f"<secret>{S}</secret>", f"<apiKey>{S}</apiKey>", f"<token>{S}</token>",
               f'<add key="Password" value="{P}"/>', f"client_secret\t=\t{S}"]

PHRASES = [f"beamer token {S}", f"token for launchdarkly: {S}", f"the launchdarkly api key is {S}",
           f"my sendgrid key {S}", f"here's the mixpanel secret: {S}", f"use the acme api token {S} for now"]

SLACK_WORKFLOWS = ["https://hooks.slack.com/workflows/T01ABCDEF/A02BCDEFG/345678901234567890/"
                   "Ab3dEf5gHi7jKl9mNo1pQr3s",
                   "https://hooks.slack.com/triggers/T01ABCDEF/3456789012345/0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d"]


@pytest.mark.parametrize("text", AUTHORIZATION)
def test_authorization_with_any_scheme(text):
    assert_masked(text, S)


@pytest.mark.parametrize("text", HEADERS)
def test_credential_named_headers(text):
    assert_masked(text, S)


@pytest.mark.parametrize("text", CURL_USER)
def test_curl_user_in_every_quoting(text):
    assert_masked(text, P if P in text else S)


def test_curl_user_keeps_the_user_name():
    out = assert_masked(f'curl -u "deploy:{P}" https://x.example', P)
    assert "deploy" in out


@pytest.mark.parametrize("text", ASSIGNMENTS)
def test_assignment_operators_spacing_lists_and_xml(text):
    assert_masked(text, P if P in text else S)


@pytest.mark.parametrize("text", PHRASES)
def test_credential_word_next_to_a_product(text):
    assert_masked(text, S)


@pytest.mark.parametrize("url", SLACK_WORKFLOWS)
def test_slack_workflow_and_trigger_webhooks(url):
    secret_path = url.split("hooks.slack.com/", 1)[1].split("/", 1)[1]
    out = assert_masked(f"post to {url} when done", secret_path)
    assert url.rsplit("/", 1)[1][-7:] not in out  # no short tail survives


NEAR_MISSES = [
    "Authorization: Bearer <token>", "Authorization: Bearer ${TOKEN}", "Authorization: see the docs",
    "X-Api-Key: <your-api-key>", "X-Request-Id: 5f0c3a2e-8d1b-4a7c-9e2f-1b3c5d7e9f0a",
    "curl -u $USER:$PASS https://x.example", 'curl -u "{user}":"{password}" https://x.example',
    "password = os.environ['DB_PASSWORD']", "password := getPassword()", "api_keys:\n  - ${API_KEY}\n",
    "<password></password>", "<token>{{ token }}</token>", "the public key is in the repo",
    "commit key 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed it",
    "the ssh key AAAAC3NzaC1lZDI1NTE5AAAAIGb7q",
    "a token for example is required", "the sort key user_id_created_at",
    "school token 04c95fdfd8caec8c48e63bbd36aafdea6661875b in the log",  # a commit SHA, not a credential
    "build key 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matches",  # a sha256 digest
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_alone(text):
    assert redact(text).text == text


# -- repeats: a secret recognised once is masked in every occurrence ------------

REPEATS = [
    f"token = '{S}' | '{S}'",
    f"my key is {S}. Later, in the config:\n  client: {S}\n",
    f'password: "{P}"\nthen I typed {P} again',
    f"X-Api-Key: {S}\n... the same value {S} appears in the log as {S}",
    f'{{"api_key": "{S}"}} and url-encoded: key%3D{S}',
]


@pytest.mark.parametrize("text", REPEATS)
def test_every_occurrence_of_a_found_secret_is_masked(text):
    secret = P if P in text else S
    assert text.count(secret) >= 2
    assert_masked(text, secret)


def test_a_repeat_inside_a_json_escaped_string_is_masked():
    text = f'password="{P}" and the log line {{"msg": "login with \\"{P}\\""}}'
    assert_masked(text, P)


def test_short_found_values_do_not_shred_other_words():
    # "***" passwords under the repeat minimum only mask where a rule saw them.
    out = redact("pw=abc12 and abc12 elsewhere").text
    assert out == "pw=*** and abc12 elsewhere"
