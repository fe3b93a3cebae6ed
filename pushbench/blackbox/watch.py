"""Detect changes to an episode's live workspace that the environment did not make.

A black-box agent has its own file tools. For families whose verifier reads a live workspace
(DataOps-lite, SWE-lite), an agent that finds the workspace folder could edit it out of band,
without spending steps. The MCP server keeps a :class:`WorkspaceWatch` on that folder: after
each call it serves it takes a snapshot (:meth:`WorkspaceWatch.refresh`), and before the next
call it compares the folder with that snapshot (:meth:`WorkspaceWatch.changes`). Whatever
differs was changed by someone else between the two calls.

Cost: one ``os.scandir`` walk with ``lstat`` per check; a file is hashed (sha256) only when its
size, mtime, ctime or inode changed since the snapshot, so an unchanged workspace costs no reads.
A change that restores identical bytes is not reported. Changes made *while* the server is
running a call are attributed to that call (the server cannot tell them apart), which is why
docs/blackbox.md asks for a workspace the agent's user cannot reach at all.
"""

from __future__ import annotations

import hashlib
import os
import stat

# (size, mtime_ns, ctime_ns, inode, kind) -> content digest
_Stat = tuple[int, int, int, int, str]


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    return "file" if stat.S_ISREG(mode) else "other"


def _digest(path: str, kind: str) -> str:
    try:
        if kind == "link":
            return "link:" + os.readlink(path)
        if kind != "file":
            return kind
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return "unreadable"


class WorkspaceWatch:
    """Content snapshot of every non-directory entry under ``root`` (never follows links)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.fspath(root)
        self._stats: dict[str, _Stat] = {}
        self._digests: dict[str, str] = {}

    def _scan(self) -> dict[str, _Stat]:
        out: dict[str, _Stat] = {}
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                entries = list(os.scandir(os.path.join(self.root, rel) if rel else self.root))
            except OSError:
                continue  # removed meanwhile
            for e in entries:
                name = f"{rel}/{e.name}" if rel else e.name
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(name)
                else:
                    out[name] = (
                        st.st_size,
                        st.st_mtime_ns,
                        st.st_ctime_ns,
                        st.st_ino,
                        _kind(st.st_mode),
                    )
        return out

    def _diff(self, current: dict[str, _Stat]) -> tuple[list[tuple[str, str]], dict[str, str]]:
        changes: list[tuple[str, str]] = []
        digests: dict[str, str] = {}
        for rel, st in current.items():
            old = self._stats.get(rel)
            if old == st:
                digests[rel] = self._digests[rel]
                continue
            digests[rel] = _digest(os.path.join(self.root, rel), st[4])
            if old is None:
                changes.append((rel, "created"))
            elif digests[rel] != self._digests[rel]:
                changes.append((rel, "modified"))
        changes += [(rel, "deleted") for rel in self._stats if rel not in current]
        return sorted(changes), digests

    def refresh(self) -> None:
        """Take the snapshot the next :meth:`changes` compares with (after the server's call)."""
        current = self._scan()
        _, self._digests = self._diff(current)
        self._stats = current

    def changes(self) -> list[tuple[str, str]]:
        """``(relative path, "created" | "modified" | "deleted")`` since the last snapshot.

        The snapshot moves on, so each change is reported once.
        """
        current = self._scan()
        changes, self._digests = self._diff(current)
        self._stats = current
        return changes
