"""Episode workspaces: a copy of a snapshot with a backlog's mutations and no trace of the original.

The copy leaves out the snapshot's git history (which holds the clean code), PushBench's build
marker, bytecode caches, tool caches, packaging leftovers and backup/patch files, then rewrites
each mutated function in place. Every file and folder gets the same fixed timestamp, so neither
history, a stale ``.pyc``, a ``.orig`` file nor an mtime points at the edited code.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ...envs.sandbox import Workspace

FIXED_MTIME = 946684800  # 2000-01-01T00:00:00Z
IGNORED = (
    ".git",
    ".pushbench-snapshot.json",
    "__pycache__",
    "*.pyc",
    "*.pyo",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    "*.egg-info",
    "*.orig",
    "*.rej",
    "*.bak",
    "*~",
    "*.swp",
    ".coverage",
)


def copy_clean(src: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Copy the snapshot tree ``src`` to ``dest`` (which must not exist) without the ignored
    parts."""
    shutil.copytree(
        src,
        dest,
        ignore=shutil.ignore_patterns(*IGNORED),
        copy_function=shutil.copyfile,
        symlinks=True,
    )
    return Path(dest)


def apply_units(root: str | os.PathLike, units) -> None:
    """Rewrite each unit's function (``original_func`` -> ``mutated_func``) under ``root``."""
    root = Path(root)
    for u in units:
        path = root / u["file"]
        text = path.read_text(encoding="utf-8")
        if text.count(u["original_func"]) != 1:
            raise RuntimeError(
                f"unit {u['key']}: its function is not found exactly once in "
                f"{u['file']} (overlapping units?)"
            )
        path.write_text(text.replace(u["original_func"], u["mutated_func"], 1), encoding="utf-8")


def freeze_times(root: str | os.PathLike[str]) -> None:
    for dirpath, dirs, files in os.walk(root, topdown=False):
        for name in files + dirs:
            os.utime(os.path.join(dirpath, name), (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
    os.utime(root, (FIXED_MTIME, FIXED_MTIME))


def create(
    snapshot_root: str | os.PathLike, units, prefix: str = "pushbench-swelite-"
) -> Workspace:
    """A fresh temporary workspace holding the mutated snapshot (caller removes it)."""
    parent = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        root = copy_clean(snapshot_root, parent / "repo")
        apply_units(root, units)
        freeze_times(root)
    except BaseException:
        shutil.rmtree(parent, ignore_errors=True)
        raise
    return Workspace(str(root))


def remove(ws: Workspace) -> None:
    """Delete the workspace and the temporary folder holding it."""
    shutil.rmtree(os.path.dirname(ws.root), ignore_errors=True)
