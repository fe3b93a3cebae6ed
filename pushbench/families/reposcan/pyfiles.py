"""Reading a snapshot's ``.py`` files within bounds: which files the indexer skips, and why.

One rule for the search index and the predicate facts (:mod:`.indexer`), so both always skip the
same files: a file over :data:`MAX_PY_BYTES` is ``too large`` (never read past the cap); a file
whose parse hits the parser's recursion or stack limit (RecursionError, MemoryError, "too many
nested parentheses") is ``too deep``; other syntax errors are ``not parseable``; bytes that are
not UTF-8 are ``not UTF-8``; a file that cannot be opened is ``unreadable``.

A RecursionError depends on how deep the caller's stack already is, so it is retried on a new
thread (a fresh stack): a file is then kept or skipped the same way in the CLI, in a worker and
in a test.
"""

from __future__ import annotations

import ast
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

# The largest .py file indexed. Real files stay far below it (the largest .py of the built-in
# snapshots is under 200 KB); parsing costs ~100x a file's size in memory, so this bounds a
# file's parse to a few hundred MB. A constant, not an option: the index and the predicate
# facts (built later, in other processes) must skip exactly the same files.
MAX_PY_BYTES = 4 << 20


@dataclass(frozen=True)
class Skipped:
    """A ``.py`` file indexing left out, and why (one of :data:`SKIP_REASONS`)."""

    path: str
    reason: str


SKIP_REASONS = ("too large", "too deep", "not parseable", "not UTF-8", "unreadable")


def py_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*.py")
        if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(root).parts
    )


def read_bounded(path: Path) -> tuple[str | None, str | None]:
    """``(source, None)`` or ``(None, reason)``: at most :data:`MAX_PY_BYTES` are ever read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_PY_BYTES + 1)
    except OSError:
        return None, "unreadable"
    if len(data) > MAX_PY_BYTES:
        return None, "too large"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "not UTF-8"


def _parse_here(source: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(source)


def _parse_fresh_thread(source: str):
    """``ast.parse`` on a new thread (a fresh, shallow stack): the RecursionError threshold is
    then the same whoever asks, so a file is skipped or kept the same way everywhere."""
    box: list = []

    def run() -> None:
        try:
            box.append(_parse_here(source))
        except BaseException as e:  # noqa: BLE001 - carried back to the caller's thread
            box.append(e)

    t = threading.Thread(target=run, name="pushbench-parse")
    t.start()
    t.join()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def parse_checked(source: str) -> tuple[ast.Module | None, str | None]:
    """``(tree, None)``, or ``(None, reason)`` with reason ``too deep`` or ``not parseable``."""
    try:
        try:
            return _parse_here(source), None
        except RecursionError:
            return _parse_fresh_thread(source), None
    except (RecursionError, MemoryError):
        return None, "too deep"
    except (SyntaxError, ValueError) as e:
        return None, "too deep" if "too many nested" in str(e) else "not parseable"


def skipped_summary(skipped: list[Skipped]) -> str:
    """``"2 files (1 too large, 1 too deep)"``, or ``"none"``."""
    if not skipped:
        return "none"
    counts = {r: sum(s.reason == r for s in skipped) for r in SKIP_REASONS}
    detail = ", ".join(f"{n} {r}" for r, n in counts.items() if n)
    return f"{len(skipped)} file{'s' if len(skipped) != 1 else ''} ({detail})"
