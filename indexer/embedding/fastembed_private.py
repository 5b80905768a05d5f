"""The one place that reaches into fastembed's model object (fastembed is pinned in pyproject.toml).

- :func:`load_session` builds the ONNX Runtime session through fastembed's own loader, adding
  the session options fastembed does not expose (threads that do not spin): fastembed hands the
  ``SessionOptions`` it built to the model's ``add_extra_session_options`` just before creating
  the session, and that hook is wrapped for the one call. Where the installed fastembed has no
  such hook, the session is loaded as fastembed loads it (spinning threads: more CPU while
  idle between batches, the same vectors) and one ``embedding.private_api_missing`` event says so.
- :func:`shrink_arena_after_runs` passes run options (the arena's shrinkage) to every
  ``session.run`` fastembed makes.
- :func:`model_folder` names the folder a cached fastembed model was loaded from, through
  fastembed's public ``download_model`` offline (it resolves the cached snapshot, never downloads).
  fastembed keeps the same path in the private ``_model_dir``; reading it saved nothing
  measurable (issue 37), so it is not read.

:data:`USE_PRIVATE` False loads every session the plain way (the tests' switch).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger("indexer.embedding")

#: False: never wrap fastembed's session hook (the tests' switch).
USE_PRIVATE = True

_missing: set[str] = set()
_lock = threading.Lock()


def _fell_back(what: str, why: str, action: str) -> None:
    with _lock:
        if what in _missing:
            return
        _missing.add(what)
    log.warning("embedding.private_api_missing", attribute=what, reason=why, action=action)


def load_session(inner: Any, configure: Callable[[Any], None]) -> Any | None:
    """Load ``inner``'s ONNX session (``inner.load_onnx_model()``) with ``configure(options)``
    applied to the ``onnxruntime.SessionOptions`` fastembed builds. Returns those options, or
    None when they could not be reached (the session is loaded all the same)."""
    base = getattr(inner, "add_extra_session_options", None) if USE_PRIVATE else None
    if base is None:
        if USE_PRIVATE:
            _fell_back("add_extra_session_options", f"{type(inner).__name__} has no session-options hook",
                       "the ONNX session is built with fastembed's options only (its threads spin)")
        inner.load_onnx_model()
        return None
    seen: list[Any] = []

    def add_extra_session_options(options, extra):
        base(options, extra)
        configure(options)
        seen.append(options)

    inner.add_extra_session_options = add_extra_session_options
    try:
        inner.load_onnx_model()
    finally:
        del inner.add_extra_session_options  # back to the class's method
    if not seen:
        _fell_back("add_extra_session_options", "fastembed did not call its session-options hook",
                   "the ONNX session was built with fastembed's options only (its threads spin)")
        return None
    return seen[0]


def session(inner: Any) -> Any:
    """The ``onnxruntime.InferenceSession`` fastembed runs (one for documents and queries)."""
    return inner.model


def shrink_arena_after_runs(inner: Any, run_options: Any) -> None:
    """Pass ``run_options`` to every run of ``inner``'s session (fastembed calls
    ``session.run(output_names, input_feed)`` and exposes no run options)."""
    sess = session(inner)
    run = sess.run

    def run_with_options(output_names, input_feed, options=None):
        return run(output_names, input_feed, options or run_options)

    sess.run = run_with_options


def model_folder(inner: Any) -> Path:
    """The folder fastembed loaded ``inner``'s files from (fastembed's cache, offline)."""
    return Path(inner.download_model(inner.model_description, inner.cache_dir, local_files_only=True))


__all__ = ["USE_PRIVATE", "load_session", "model_folder", "session", "shrink_arena_after_runs"]
