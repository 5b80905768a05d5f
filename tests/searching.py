"""Searching in a thread while a block runs: the tests that a rebuild never leaves search empty."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def searching_throughout(searcher, request) -> Iterator[list[int]]:
    """Runs ``request`` on ``searcher`` over and over in a thread for as long as the block runs;
    yields the list of result counts it got (filled as it goes, complete after the block)."""
    answers: list[int] = []
    done = threading.Event()

    def keep_searching() -> None:
        while not done.is_set():
            answers.append(len(searcher.search(request).results))

    thread = threading.Thread(target=keep_searching)
    thread.start()
    try:
        yield answers
    finally:
        done.set()
        thread.join()
