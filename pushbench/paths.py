"""Where PushBench finds its shipped data and keeps its cache, and how it keeps them private.

Data folders (``tasks/``, ``snapshots/``, ``controllers/``) live at the repository top level and
are force-included into the wheel as ``pushbench/_data/<name>``; :func:`data_dir` finds either.
The cache (built snapshots, indexes, SWE-lite test environments and unit sets) lives outside the
repository: ``$PUSHBENCH_HOME`` or the user's cache directory.

Privacy contract. The cache and every run folder belong to the user running PushBench and to no
one else: folders are created ``0700`` and files ``0600`` (``0700`` for files that are
executable, e.g. a venv's scripts). The cache holds SWE-lite reference code (the original
snapshots) and run folders hold records an agent must neither read nor edit.

* New files and folders get their mode at creation (:func:`private_dir`, :func:`open_private`,
  :func:`write_private`), so there is never a window in which they are readable by others.
* Trees made by other tools (tar extraction, git, venv/pip) are built inside a private folder
  and tightened with :func:`tighten_tree` before they are renamed into place.
* The process umask is **never changed**: it is process-wide (every thread of a library user
  would be affected while it was set), so explicit modes are used instead.
* A cache built by an older version with group/other bits is tightened on first use in a
  process (:func:`home`, once per cache, marked by ``.private-v1``), and the change is reported
  on stderr. Only entries owned by the current user are touched; anything else stays as it is
  and ``pushbench mcp`` refuses to serve from such a cache (:func:`exposure`).
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

_PKG = Path(__file__).resolve().parent
DIR_MODE, FILE_MODE = 0o700, 0o600
_OTHERS = 0o077  # any group/other permission bit
_READABLE = 0o055  # group/other read or execute: enough to look inside
_MARKER = ".private-v1"  # the whole cache was tightened once
_CHECKED: set[str] = set()


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
    """Root of the on-disk cache: ``$PUSHBENCH_HOME`` or the platform's user cache dir.

    Created ``0700``; an existing cache with group/other bits is tightened once per process
    (see the module docstring).
    """
    env = os.environ.get("PUSHBENCH_HOME")
    root = Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("pushbench"))
    key = str(root)
    if key not in _CHECKED or not root.is_dir():
        root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        _tighten_cache(root)
        _CHECKED.add(key)
    return root


def _tighten_cache(root: Path) -> None:
    changed = 0
    if not (root / _MARKER).is_file():
        changed = tighten_tree(root)
        try:
            write_private(root / _MARKER, b"the cache was made private (0700/0600) once\n")
        except OSError:
            pass  # a read-only or foreign cache: exposure() reports it where it matters
    elif _tighten(root):
        changed = 1
    if changed:
        print(
            f"[pushbench] made the cache {root} private to its user ({changed} entries had "
            "group/other permissions)",
            file=sys.stderr,
            flush=True,
        )


def _tighten(path: str | os.PathLike, st: os.stat_result | None = None) -> bool:
    """Drop group/other bits of one entry we own (never follows symlinks); True if changed."""
    try:
        st = st or os.lstat(path)
        if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid() or not st.st_mode & _OTHERS:
            return False
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~_OTHERS)
        return True
    except (FileNotFoundError, PermissionError):
        return False  # removed meanwhile (temporary build folders) or not ours to change


def tighten_tree(root: str | os.PathLike[str]) -> int:
    """Remove group/other bits from ``root`` and everything under it; return how many changed.

    Owner bits are kept (an executable stays executable, so git sees no mode change); symlinks
    are never followed and entries of other users are left alone.
    """
    changed = int(_tighten(root))
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            changed += _tighten(os.path.join(dirpath, name))
    return changed


def private_dir(path: str | os.PathLike, tighten: bool = True) -> Path:
    """Create folder ``path`` (and missing parents) with mode 0700; return it.

    An existing folder is tightened to drop group/other bits when ``tighten`` (folders PushBench
    owns, such as the cache's); pass ``tighten=False`` for folders a user named, which
    :func:`exposure` then checks instead.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if tighten:
        _tighten(path)
    return path


def open_private(
    path: str | os.PathLike, flags: int = os.O_WRONLY | os.O_CREAT | os.O_APPEND
) -> int:
    """``os.open`` a file created 0600; an existing file of ours loses group/other bits."""
    fd = os.open(path, flags | os.O_CLOEXEC, FILE_MODE)
    try:
        st = os.fstat(fd)
        if st.st_mode & _OTHERS and st.st_uid == os.getuid():
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_OTHERS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(path: str | os.PathLike, data: bytes, fsync: bool = False) -> None:
    """Replace ``path`` atomically with ``data`` (temporary file 0600, then ``os.replace``)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def exposure(path: str | os.PathLike) -> str | None:
    """Why other users can look into ``path`` (group/other read or execute bits), or None.

    A missing path is not exposed (it will be created private).
    """
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None
    if mode & _READABLE:
        return f"{path} is readable by other users (mode {mode:04o})"
    return None


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold the cache-wide lock ``name`` (an flock under ``$PUSHBENCH_HOME/locks``): builders
    of one cache entry (snapshots, SWE-lite venvs and unit sets, user files) run one at a time."""
    lock_dir = private_dir(home() / "locks")
    fd = open_private(lock_dir / f"{name}.lock", os.O_WRONLY | os.O_CREAT)
    with os.fdopen(fd, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
