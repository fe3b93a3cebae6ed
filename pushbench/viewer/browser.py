"""Headless Chromium for the viewer's browser test and benchmark (the ``viewer`` extra).

Drives the system's Chromium (Debian's ``chromium`` package) with Playwright's Python API, never
a browser Playwright downloads: :func:`chromium_path` finds the executable (``$PUSHBENCH_CHROMIUM``
or ``chromium`` / ``chromium-browser`` on ``PATH``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator

CANDIDATES = ("chromium", "chromium-browser")


def chromium_path() -> str | None:
    """The Chromium executable to drive, or ``None`` when none is installed."""
    env = os.environ.get("PUSHBENCH_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@contextlib.contextmanager
def headless_chromium() -> Iterator[object]:
    """A Playwright ``Browser`` on the system Chromium; ``RuntimeError`` saying what is missing."""
    path = chromium_path()
    if path is None:
        raise RuntimeError(
            "no Chromium executable: install Debian's `chromium` package "
            "(apt-get install -y chromium) or set PUSHBENCH_CHROMIUM"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise RuntimeError(f"Playwright is missing ({e}): pip install 'pushbench[viewer]'") from e
    # Chromium refuses to start as root with its sandbox on (CI containers run as root).
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True, args=args)
        try:
            yield browser
        finally:
            browser.close()
