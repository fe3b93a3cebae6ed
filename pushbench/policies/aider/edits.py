"""Aider's changes to its copy of the workspace, as the environment's own ``edit_file`` calls.

Aider edits files on disk. The harness keeps Aider's copy and the environment's workspace equal:
before a turn it takes :func:`tree` of the copy, after the turn it compares, and every changed
file becomes a sequence of ``edit_file(path, old, new)`` calls (:func:`edit_calls`) that turns
the old text into the new one when applied in order; each ``old`` occurs exactly once in the
text it is applied to (context lines are added until it does), so the environment accepts it.
Files Aider created or deleted cannot be expressed as ``edit_file`` calls: they are reported
(and the harness undoes them in the copy), never silently dropped.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

MAX_EDITS_PER_FILE = 200
IGNORED_PREFIXES = (".aider",)  # Aider's own history and cache files


def tree(root: str | os.PathLike) -> dict[str, bytes]:
    """Every regular file under ``root`` (relative ``/`` paths) with its bytes, Aider's own
    files left out."""
    root = Path(root)
    out: dict[str, bytes] = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(IGNORED_PREFIXES))
        for name in sorted(files):
            if name.startswith(IGNORED_PREFIXES):
                continue
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def changes(
    before: dict[str, bytes], after: dict[str, bytes]
) -> tuple[list[str], list[str], list[str]]:
    """``(changed, created, deleted)`` paths, sorted."""
    changed = sorted(p for p in before if p in after and before[p] != after[p])
    created = sorted(p for p in after if p not in before)
    deleted = sorted(p for p in before if p not in after)
    return changed, created, deleted


def _unique_span(lines: list[str], i1: int, i2: int) -> tuple[int, int]:
    """Grow ``lines[i1:i2]`` by context lines until its text is non-empty and starts nowhere
    else in the file, overlapping starts included (``edit_file`` checks ``count == 1`` and
    replaces the first occurrence: that must be this one)."""
    text = "".join(lines)
    while True:
        old = "".join(lines[i1:i2])
        start = len("".join(lines[:i1]))
        if old and text.find(old) == start and text.find(old, start + 1) == -1:
            return i1, i2
        if i1 == 0 and i2 == len(lines):
            return i1, i2  # the whole file: unique by definition (or empty)
        if i1 > 0:
            i1 -= 1
        if i2 < len(lines):
            i2 += 1


def edit_calls(path: str, old_text: str, new_text: str) -> list[dict]:
    """``edit_file`` calls that turn ``old_text`` into ``new_text`` applied one after another.

    One call per changed region (difflib's opcodes on lines, computed once), from the end of
    the file to its start, so the lines above a region are still the original ones when it is
    replaced; each ``old`` is grown by context lines until it occurs exactly once in the text
    as the previous calls left it. Raises ``ValueError`` for a file whose old text is empty
    (nothing to anchor a replacement on) or that needs more than :data:`MAX_EDITS_PER_FILE`
    calls.
    """
    if old_text == new_text:
        return []
    if not old_text:
        raise ValueError(f"{path}: the file was empty; edit_file cannot anchor a change")
    a, b = old_text.splitlines(keepends=True), new_text.splitlines(keepends=True)
    ops = [
        o
        for o in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if o[0] != "equal"
    ]
    if len(ops) > MAX_EDITS_PER_FILE:
        raise ValueError(f"{path}: more than {MAX_EDITS_PER_FILE} changed regions")
    calls: list[dict] = []
    cur = list(a)
    for _, i1, i2, j1, j2 in reversed(ops):
        s1, s2 = _unique_span(cur, i1, i2)
        old = "".join(cur[s1:s2])
        new = "".join(cur[s1:i1]) + "".join(b[j1:j2]) + "".join(cur[i2:s2])
        calls.append({"tool": "edit_file", "path": path, "old": old, "new": new})
        cur[i1:i2] = b[j1:j2]
    return calls


def apply_calls(text: str, calls: list[dict]) -> str:
    """What ``calls`` make of ``text`` (each ``old`` must occur exactly once): the contract
    :func:`edit_calls` keeps, as the environment's ``edit_file`` checks it."""
    for c in calls:
        if text.count(c["old"]) != 1:
            raise ValueError(f"{c['path']}: old text occurs {text.count(c['old'])} times")
        text = text.replace(c["old"], c["new"], 1)
    return text
