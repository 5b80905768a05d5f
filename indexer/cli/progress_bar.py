"""One progress bar for a CLI ``sync`` or ``reindex``, in documents.

The engine plans every persona before it works on the first
(:mod:`indexer.sync.progress`), so the bar has its total from its first frame
and tqdm's rate and ETA are measured from there. On a terminal it is a tqdm
bar on stderr; elsewhere (a pipe, a journal) the same counts are logged as a
``sync.progress`` event at most every ``log_every_s`` seconds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import TextIO

import structlog

from indexer.sync.progress import PersonaProgress, ProgressTotals

log = structlog.get_logger("indexer.cli")


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

    def show(self, state: Mapping[str, PersonaProgress]) -> None:
        """Draw (or log) ``state``: this pass's own counts, or a job's polled from the daemon."""
        done, total = sum(p.done for p in state.values()), sum(p.total for p in state.values())
        if self.tty:
            if self._bar is None:
                from tqdm import tqdm

                self._bar = tqdm(total=total, initial=done, desc=self.desc, unit="doc", file=self.file,
                                 dynamic_ncols=True)
            bar = self._bar
            if bar.total != total:
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
            log.info("sync.progress", desc=self.desc, documents_done=done, documents_total=total,
                     per_second=round(rate, 1), eta_seconds=round((total - done) / rate) if rate else None)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
