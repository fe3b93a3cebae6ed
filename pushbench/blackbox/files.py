"""The black-box server's setup error and its atomic JSON writes (used by the session and by
re-attach, which must not import each other both ways)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import paths


class SetupError(RuntimeError):
    """The server cannot start as asked (the message says what to do)."""


# ----- small file helpers -----------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(
    path: Path, obj: Any, sync_dir: bool = True, seal: Callable[[bytes], bytes] | None = None
) -> None:
    """Write ``obj`` as JSON to ``path`` via a temporary file, ``fsync`` and ``os.replace``.

    Readers (and a killed process) always see a whole file. ``sync_dir`` also makes the rename
    itself survive a power cut; per-call rewrites skip it (the fsync'd trace covers that case).
    ``seal`` turns the JSON bytes into the bytes written (the run signature, :mod:`.signing`).
    """
    data = json.dumps(obj, ensure_ascii=True, indent=1, default=repr).encode()
    if seal is not None:
        data = seal(data)
    paths.write_private(path, data, fsync=True)  # 0600: the agent must not read the record
    if sync_dir:
        _fsync_dir(path.parent)
