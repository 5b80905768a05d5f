"""CLI helper: plain and JSON-lines modes, malformed input handling."""

from __future__ import annotations

import io
import json

from redaction import KnownSecrets
from redaction.cli import run_redact

TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


def _run(data: str, *, jsonl: bool, known=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_redact(io.StringIO(data), out, jsonl=jsonl, known=known, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_plain_mode_redacts_all_input_verbatim_otherwise() -> None:
    code, out, err = _run(f"line one\ntoken={TOKEN}\n\nno newline at end", jsonl=False)
    assert code == 0 and err == ""
    assert out == "line one\ntoken=ghp_[REDACTED:github-pat]\n\nno newline at end"


def test_jsonl_mode_spans_refer_to_original() -> None:
    text = f"é token={TOKEN}"
    code, out, err = _run(json.dumps({"text": text, "id": 7}) + "\n" + json.dumps({"text": "clean"}) + "\n",
                          jsonl=True)
    assert code == 0 and err == ""
    first, second = [json.loads(line) for line in out.splitlines()]
    assert first["text"] == "é token=ghp_[REDACTED:github-pat]"
    assert first["findings"] == [{"rule": "github-pat", "start": 8, "end": 48}]
    f = first["findings"][0]
    assert text[f["start"]:f["end"]] == TOKEN
    assert set(first) == {"text", "findings"}  # other fields were not redacted, so they are dropped
    assert second == {"text": "clean", "findings": []}


def test_jsonl_malformed_lines_reported_and_rest_processed() -> None:
    data = "\n".join([
        json.dumps({"text": f"a {TOKEN}"}),
        "{not json " + TOKEN,
        "[1, 2]",
        json.dumps({"txt": "x"}),
        json.dumps({"text": None}),
        json.dumps({"text": 5}),
        "",
        json.dumps({"text": "last"}),
    ]) + "\n"
    code, out, err = _run(data, jsonl=True)
    assert code == 2
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["a ghp_[REDACTED:github-pat]", "last"]
    lines = err.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["line 2", "line 3", "line 4", "line 5", "line 6"]
    assert "invalid JSON" in lines[0] and "JSON object" in lines[1] and "'text'" in lines[2]
    assert TOKEN not in err  # errors never echo input, which may hold secrets


def test_known_secrets_applied() -> None:
    known = KnownSecrets(["correct-horse-battery"])
    code, out, _ = _run("pw correct-horse-battery", jsonl=False, known=known)
    assert code == 0 and out == "pw [REDACTED:known-secret]"
    code, out, _ = _run(json.dumps({"text": "pw correct-horse-battery"}) + "\n", jsonl=True, known=known)
    assert json.loads(out)["findings"] == [{"rule": "known-secret", "start": 3, "end": 24}]
