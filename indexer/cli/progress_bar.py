"""One progress bar for a CLI ``sync`` or ``reindex``, in documents.

The engine plans every persona before it works on the first
(:mod:`indexer.sync.progress`), so the bar has its total from then on and
tqdm's rate and ETA are measured from there. On a terminal it is a tqdm bar on
stderr, drawn the moment the bar is made (before the config, the lock and the
model are loaded: a count without a total until the plan gives it one), as wide
as the terminal — 80x24 when its size is unknown (a pseudo-terminal of 0x0,
no ``COLUMNS``), where tqdm itself would draw nothing. Elsewhere (a pipe,
a journal) the same counts are logged as a ``sync.progress`` event at most
every ``log_every_s`` seconds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import TextIO

from indexer.sync.progress import PersonaProgress, ProgressTotals

#: The bar's size when the terminal does not say its own (tqdm draws nothing in 0 columns or 0 rows).
FALLBACK_SHAPE = (80, 24)


def terminal_shape(file: TextIO) -> tuple[int, int] | None:
    """(columns, rows) of the terminal ``file`` writes to; None when unknown: no size (a fresh
    pseudo-terminal is 0x0), not a terminal, and no ``COLUMNS``/``LINES`` to say it."""
    try:
        size = os.get_terminal_size(file.fileno())
        columns, rows = size.columns, size.lines
    except (AttributeError, ValueError, OSError):  # no fileno (a StringIO), not a terminal
        columns = rows = 0
    columns = _positive(os.environ.get("COLUMNS")) or columns
    rows = _positive(os.environ.get("LINES")) or rows
    return (columns, rows) if columns > 0 and rows > 0 else None


def _positive(value: str | None) -> int:
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 0


class ProgressBar(ProgressTotals):
    """A :class:`~indexer.sync.progress.Progress` that draws what it counts.

    ``file``/``tty``: where and whether to draw (default: stderr, drawn when it is a terminal).
    Call :meth:`close` when the pass is over.
    """

    def __init__(self, desc: str, *, file: TextIO | None = None, tty: bool | None = None,
                 log_every_s: float = 10.0):
        super().__init__(on_change=self.show)
        self.desc = desc
        self.file = file if file is not None else sys.stderr
        self.tty = self.file.isatty() if tty is None else tty
        self.log_every_s = log_every_s
        self._bar = None
        self._started = time.monotonic()
        self._last_log = self._started
        if self.tty:
            self._open(total=None)  # at once: "sync: 0 doc [00:00, ? doc/s]" until the total is counted

    def _open(self, total: int | None):
        from tqdm import tqdm

        shape = terminal_shape(self.file)
        columns, rows = shape or FALLBACK_SHAPE
        # a known size follows the terminal's resizes; an unknown one is fixed (tqdm would read 0x0 again)
        self._bar = tqdm(total=total, desc=self.desc, unit="doc", file=self.file, mininterval=0.2,
                         dynamic_ncols=shape is not None, ncols=columns, nrows=rows)
        return self._bar

    def show(self, state: Mapping[str, PersonaProgress]) -> None:
        """Draw (or log) ``state``: this pass's own counts, or a job's polled from the daemon."""
        done, total = sum(p.done for p in state.values()), sum(p.total for p in state.values())
        if self.tty:
            bar = self._bar if self._bar is not None else self._open(total)
            if bar.total != total and total > 0:
                bar.total = total
            if done != bar.n:
                bar.update(done - bar.n)  # update(), not n =: tqdm's rate comes from its updates
            else:
                bar.refresh()
            return
        now = time.monotonic()
        if now - self._last_log >= self.log_every_s:
            self._last_log = now
            elapsed = now - self._started
            rate = done / elapsed if elapsed > 0 else 0.0
            import structlog  # here: a bar on a terminal is drawn before the logging stack is imported

            structlog.get_logger("indexer.cli").info(
                "sync.progress", desc=self.desc, documents_done=done, documents_total=total,
                per_second=round(rate, 1), eta_seconds=round((total - done) / rate) if rate else None)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
