"""Debian's Chromium, headless, for tests that look at a page as a person's browser renders it.

``dump_dom(url)`` loads the page in a fresh profile, lets its scripts run for a budget of virtual
time and returns the DOM they left. Every host name but the loopback address resolves to nothing,
so a page that needs anything from the internet (a CDN) fails to render in the test as it would on
an offline machine. The package: ``apt-get install -y chromium`` (.ci/run installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")
# Root needs --no-sandbox; the rest keeps a headless run quiet, fast and off the network.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")


def chromium() -> str | None:
    """The Chromium command on PATH, or None."""
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def require_chromium() -> str:
    """The Chromium command; skips the calling test when there is none, except under CI (env CI set):
    it fails there, as a missing browser must not pass for a rendered page."""
    found = chromium()
    if found is not None:
        return found
    reason = "Chromium is not installed: `apt-get install -y chromium` (Debian's package)"
    if os.environ.get("CI"):
        pytest.fail(f"Chromium is required in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def dump_dom(url: str, *, budget_ms: int = 15_000, timeout_s: float = 90.0) -> str:
    """The DOM of ``url`` once its scripts have had ``budget_ms`` of virtual time (a new empty profile)."""
    command = require_chromium()
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        proc = subprocess.run([command, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                               "--dump-dom", url], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout_s, env={**os.environ, "HOME": profile})
    if proc.returncode != 0 or not proc.stdout.strip():
        raise AssertionError(f"chromium --dump-dom {url} exited {proc.returncode} with no page:\n{proc.stderr[-3000:]}")
    return proc.stdout
