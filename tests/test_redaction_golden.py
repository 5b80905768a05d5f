"""The ruleset's identity is its explicit version; a golden-output check over a fixed corpus fails
when masking changes without a version bump (tests/redaction_golden.py)."""

from __future__ import annotations

import re

import pytest

import tests.redaction_golden as golden
from redaction import REDACTION_VERSION, redact
from redaction.engine import Redacted


def test_the_golden_outputs_hold_for_this_ruleset_version():
    result = golden.check()
    assert result.problem() is None, result.problem()
    assert len(golden.load()[1]) >= 4000


def _masks_more(text: str) -> Redacted:
    """A ruleset that masks one more thing than this one: every 'deploy' word."""
    out = redact(text)
    return Redacted(out.text.replace("deploy", "[REDACTED:test]"), out.findings)


def test_a_masking_change_without_a_version_bump_is_named():
    texts = golden.inputs()
    result = golden.check(texts, _masks_more)
    touched = sum("deploy" in redact(t).text for t in texts)
    assert touched > 0 and len(result.changed) == touched and result.new == []
    assert re.fullmatch(rf"masking changed for {touched} golden input\(s\) \(first: [0-9a-f]{{16}}\) but "
                        rf"REDACTION_VERSION is still {re.escape(REDACTION_VERSION)}: bump it in redaction/rules.py "
                        r"\(every index rebuilds once with the new masking\), then run `python -m "
                        r"tests.redaction_golden --update`", result.problem())


def test_update_records_new_inputs_but_refuses_a_change_without_a_bump(tmp_path, monkeypatch):
    path = tmp_path / "golden.json"
    assert golden.update(["a plain line", "token ghp_" + "a1B2" * 9], golden=path).startswith("recorded 2 ")
    assert golden.check(["a plain line", "a new line"], golden=path).new == [golden._digest("a new line")]
    assert golden.update(["a plain line", "a new line"], golden=path).startswith("recorded 2 ")
    with pytest.raises(SystemExit, match="masking changed for 1 golden input"):
        golden.update(["a plain line to deploy"], golden=path) and golden.update(
            ["a plain line to deploy"], redactor=_masks_more, golden=path)
    monkeypatch.setattr(golden, "REDACTION_VERSION", "99.0.0")  # bumped: every output recorded anew
    assert golden.update(["a plain line to deploy"], redactor=_masks_more, golden=path).startswith("recorded 1 ")
    assert golden.load(path)[0] == "99.0.0"
