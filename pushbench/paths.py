"""Where PushBench finds its shipped data and keeps its cache.

Data folders (``tasks/``, ``snapshots/``, ``controllers/``) live at the repository top level and
are force-included into the wheel as ``pushbench/_data/<name>``; :func:`data_dir` finds either.
The cache (built snapshots, indexes) lives outside the repository: ``$PUSHBENCH_HOME`` or the
user's cache directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the folder holding shipped data ``name`` (installed wheel first, then checkout)."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"PushBench data folder {name!r} not found (looked in {_PKG / '_data'} and {_PKG.parent}); "
        "the installation is incomplete: reinstall the package."
    )


def home() -> Path:
    """Root of the on-disk cache: ``$PUSHBENCH_HOME`` or the platform's user cache dir."""
    env = os.environ.get("PUSHBENCH_HOME")
    root = Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("pushbench"))
    root.mkdir(parents=True, exist_ok=True)
    return root
