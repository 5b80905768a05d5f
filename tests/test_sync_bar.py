"""``sync`` on a terminal shows its bar within a second of starting (issue 35), before the config,
the lock and the model are loaded (a count without a total until the plan gives it), and on a
terminal of unknown size too: a fresh pseudo-terminal is 0x0 and ``COLUMNS`` is unset, where tqdm
alone drew nothing at all."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time

from indexer.cli.demo import write_demo
from indexer.cli.progress_bar import ProgressBar, terminal_shape
from tests.cli_runner import ROOT

FIRST_FRAME_S = 1.0


def _sync_on_a_pty(config) -> tuple[float | None, str, int]:
    """``sync`` in a real process on a 0x0 pseudo-terminal without COLUMNS/LINES: (seconds from
    spawn to the first bar frame, everything it printed, exit code)."""
    master, slave = pty.openpty()
    assert os.get_terminal_size(slave) == os.terminal_size((0, 0))  # the size is unknown
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES") and not k.startswith("LEDGER_INDEXER_")}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli", "--config", str(config), "sync"], cwd=ROOT,
                            env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out, first = b"", None
    deadline = started + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.02)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not data:
                break
            out += data
            if first is None and b"\rsync:" in out:
                first = time.monotonic() - started
        elif proc.poll() is not None:
            break
    os.close(master)
    return first, out.decode(errors="replace"), proc.wait(30)


def test_the_bar_appears_within_a_second_on_a_terminal_of_unknown_size(tmp_path):
    config, _ = write_demo(tmp_path / "demo")
    first, out, code = _sync_on_a_pty(config)
    assert code == 0, out
    assert first is not None and first < FIRST_FRAME_S, (first, out[:2000])
    frames = re.findall(r"\rsync:[^\r\n\x1b]*", out)  # up to a log line written after it
    assert re.match(r"\rsync: 0 ?doc \[", frames[0]), frames[:3]  # drawn before the total is counted
    assert any(re.search(r"(\d+)/\1 \[", f) for f in frames), frames  # and completed, with its total
    assert all(len(f) - 1 <= 80 for f in frames)  # 80 columns when the terminal does not say


def test_the_bar_is_drawn_when_made_and_given_its_total_when_planned():
    out = io.StringIO()
    bar = ProgressBar("sync", file=out, tty=True)
    assert re.search(r"sync: 0 ?doc \[", out.getvalue())  # nothing counted yet: drawn all the same
    bar.planned({"atlas": 4})
    bar.advanced("atlas", 4)
    bar.close()
    assert "4/4 [" in out.getvalue()


def test_the_terminal_size_is_unknown_at_0x0_and_known_from_columns_and_lines(monkeypatch):
    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "w") as tty:
            monkeypatch.delenv("COLUMNS", raising=False)
            monkeypatch.delenv("LINES", raising=False)
            assert terminal_shape(tty) is None
            monkeypatch.setenv("COLUMNS", "100")
            monkeypatch.setenv("LINES", "30")
            assert terminal_shape(tty) == (100, 30)
    finally:
        os.close(master)
        os.close(slave)
    assert terminal_shape(io.StringIO()) == (100, 30)  # no terminal, but the environment says it
