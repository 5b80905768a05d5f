"""Logging: JSON lines for journald/pipes, console on a TTY, rate-limited errors."""

from __future__ import annotations

import io
import json
import logging
import os
from datetime import datetime

import pytest
import structlog

from indexer.runtime.logs import RateLimitedLogger, RateLimiter, configure_logging, parse_level, should_log, use_json


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_with_timestamp_level_event_logger():
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    log = structlog.get_logger("indexer.daemon")
    log.info("sync done", documents=3, label="dm:+1 555/ü")
    log.debug("hidden at info")
    logging.getLogger("uvicorn.error").warning("stdlib %s", "record", extra={"color_message": "\x1b[1mx"})
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("sync failed")
    lines = _lines(out)
    assert len(lines) == 3
    first = lines[0]
    assert list(first)[:4] == ["timestamp", "level", "logger", "event"]
    assert first["event"] == "sync done" and first["level"] == "info" and first["logger"] == "indexer.daemon"
    assert first["documents"] == 3 and first["label"] == "dm:+1 555/ü"
    ts = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00"))
    assert ts.utcoffset() is not None and ts.utcoffset().total_seconds() == 0
    assert lines[1] == {**lines[1], "level": "warning", "logger": "uvicorn.error", "event": "stdlib record"}
    assert "color_message" not in lines[1]
    assert lines[2]["level"] == "error" and "ZeroDivisionError" in lines[2]["exception"]


def test_non_tty_defaults_to_json_tty_to_console():
    assert use_json(io.StringIO()) is True
    assert use_json(FakeTTY()) is False
    assert use_json(FakeTTY(), json=True) is True
    assert use_json(io.StringIO(), json=False) is False

    tty = FakeTTY()
    configure_logging(stream=tty, colors=False)
    structlog.get_logger("indexer.cli").info("hello", n=1)
    text = tty.getvalue()
    assert "hello" in text and "n=1" in text and not text.lstrip().startswith("{")
    assert "\x1b[" not in text


def test_console_colors_on_a_tty_unless_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = FakeTTY()
    configure_logging(stream=tty)
    structlog.get_logger("x").info("colored")
    assert "\x1b[" in tty.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    tty = FakeTTY()
    configure_logging(stream=tty)
    structlog.get_logger("x").info("plain")
    assert "\x1b[" not in tty.getvalue()


def test_journal_stream_gets_json_with_priority_prefix(tmp_path, monkeypatch):
    path = tmp_path / "journal"
    with open(path, "w") as f:
        st = os.fstat(f.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        configure_logging(stream=f)
        log = structlog.get_logger("indexer.daemon")
        log.info("ok")
        log.warning("careful")
        log.error("bad")
    lines = path.read_text().splitlines()
    assert [line[:3] for line in lines] == ["<6>", "<4>", "<3>"]
    assert json.loads(lines[1][3:])["event"] == "careful"
    # Another stream (a pipe, not the journal) gets no prefix.
    other = io.StringIO()
    configure_logging(stream=other)
    structlog.get_logger("x").info("plain")
    assert other.getvalue().startswith("{")


def test_reconfigure_replaces_the_handler_and_level():
    a, b = io.StringIO(), io.StringIO()
    log = structlog.get_logger("indexer.sync")  # made before configure: still follows it
    configure_logging(json=True, stream=a)
    configure_logging(json=True, stream=b, level="warning")
    log.info("dropped")
    log.warning("kept")
    assert a.getvalue() == ""
    assert [line["event"] for line in _lines(b)] == ["kept"]
    ours = [h for h in logging.getLogger().handlers if type(h).__name__ == "_OurHandler"]
    assert len(ours) == 1


def test_noisy_libraries_quieted_at_info_not_at_debug():
    out = io.StringIO()
    configure_logging(json=True, stream=out, level="info")
    logging.getLogger("apscheduler.executors.default").info("Running job")
    assert out.getvalue() == ""
    configure_logging(json=True, stream=out, level="debug")
    logging.getLogger("apscheduler.executors.default").info("Running job")
    assert _lines(out)[0]["event"] == "Running job"


def test_parse_level():
    assert parse_level("INFO") == logging.INFO
    assert parse_level("warning") == logging.WARNING
    assert parse_level(10) == 10
    with pytest.raises(ValueError, match="invalid log level 'loud'"):
        parse_level("loud")
    with pytest.raises(ValueError):
        configure_logging(level="loud", stream=io.StringIO())


def test_rate_limiter():
    now = [0.0]
    rl = RateLimiter(every_s=10, clock=lambda: now[0])
    assert rl.should_log("a") is True
    assert rl.should_log("a") is False
    assert rl.should_log("b") is True  # keys are independent
    now[0] = 9.9
    assert rl.should_log("a") is False
    now[0] = 10.0
    assert rl.should_log("a") is True
    assert rl.should_log("a", every_s=0) is True
    rl.reset("a")
    assert rl.should_log("a") is True


def test_module_should_log():
    key = f"test-{os.getpid()}-{id(object())}"
    assert should_log(key, every_s=3600) is True
    assert should_log(key, every_s=3600) is False


def test_rate_limited_logger_counts_and_recovers():
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    now = [1000.0]
    errors = RateLimitedLogger(structlog.get_logger("indexer.daemon"), every_s=60, clock=lambda: now[0])

    assert errors.success("sync") is False  # healthy: nothing to say
    assert errors.failure("sync", "sync failed", error="database is locked") is True
    for _ in range(5):
        now[0] += 10
        assert errors.failure("sync", "sync failed", error="database is locked") is False
    assert errors.consecutive("sync") == 6
    now[0] += 10  # 60 s after the first line
    assert errors.failure("sync", "sync failed", error="disk full") is True
    assert errors.failure("qmd", "qmd update failed", level="warning") is True  # other key
    now[0] += 5
    assert errors.success("sync") is True
    assert errors.consecutive("sync") == 0
    assert errors.success("sync") is False

    lines = _lines(out)
    assert [(line["event"], line["level"]) for line in lines] == [
        ("sync failed", "error"),
        ("sync failed", "error"),
        ("qmd update failed", "warning"),
        ("sync recovered", "info"),
    ]
    assert lines[0]["consecutive_errors"] == 1 and "suppressed" not in lines[0]
    assert lines[1]["consecutive_errors"] == 7 and lines[1]["suppressed"] == 5
    assert lines[1]["error"] == "disk full"
    rec = lines[3]
    assert rec["consecutive_errors"] == 7 and rec["failing_for_s"] == 65.0 and rec["last_error"] == "disk full"

    # A new streak logs its first error at once.
    assert errors.failure("sync", "sync failed") is True
    assert _lines(out)[-1]["consecutive_errors"] == 1
