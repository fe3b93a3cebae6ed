"""Who else could have written a run dir: the owner and mode checks of ``mcp`` and ``evaluate``.

A run dir is only evidence if no other OS user could have replaced or edited it. The rule,
checked on the run dir's path as given (made absolute) and on its resolved path:

* **Every folder above the run dir** (its parent up to ``/``) is owned by you or by root, and
  is not writable by group or others -- except a *sticky* folder (mode ``+t``, like ``/tmp``,
  1777): there others may create entries but cannot rename or delete yours, so it is accepted
  when the next folder down the path is owned by you or root. A group- or world-writable
  folder without the sticky bit lets any member rename the run dir away and put another in
  its place, so it is refused.
* **The run dir itself**, when it exists, is a real folder owned by you and not writable by
  group or others; for ``evaluate`` the same holds for ``run.json``, ``episode.json`` and
  ``trace.jsonl``.

``pushbench mcp`` refuses to serve a run dir that breaks the rule (one line saying which folder
and how to fix it); ``pushbench evaluate`` flags such runs ``tampered`` with the reason
(``unsafe run dir: ...``), so they count for nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_WRITABLE = 0o022  # group or other write
_TRUSTED = (0,)  # root may always write anything; it is trusted


def _mine(uid: int) -> bool:
    return uid == os.getuid() or uid in _TRUSTED


def _chain(path: Path) -> str | None:
    """The first folder above ``path`` that breaks the rule, as a reason with its fix."""
    parts = path.parts
    for depth in range(len(parts) - 1, 0, -1):
        folder = Path(*parts[:depth])
        child = Path(*parts[: depth + 1])
        try:
            st = os.stat(folder)
        except FileNotFoundError:
            continue  # to be created (by mkdir, as 0700)
        except OSError as e:
            return f"cannot inspect {folder} ({e.strerror})"
        mode = stat.S_IMODE(st.st_mode)
        if not _mine(st.st_uid):
            return (
                f"{folder} (above the run dir) belongs to another user (uid {st.st_uid}), "
                "who could replace the run; put the run dir under a folder of yours"
            )
        if mode & _WRITABLE:
            if not mode & stat.S_ISVTX:
                return (
                    f"{folder} (above the run dir) is writable by other users (mode "
                    f"{mode:04o}), who could replace the run; fix: chmod go-w {folder}, "
                    "or put the run dir under a folder only you can write"
                )
            try:
                cst = os.lstat(child)
            except FileNotFoundError:
                continue  # made by us right away, then checked again on use
            if not _mine(cst.st_uid):
                return (
                    f"{child} lies in the shared folder {folder} but belongs to another "
                    f"user (uid {cst.st_uid}); put the run dir under a folder of yours"
                )
    return None


def _own_entry(path: Path, what: str, folder: bool) -> str | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    kind_ok = stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        return f"{what} {path} is not a plain {'folder' if folder else 'file'}"
    if st.st_uid != os.getuid():
        return f"{what} {path} belongs to another user (uid {st.st_uid})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & _WRITABLE:
        return f"{what} {path} is writable by other users (mode {mode:04o}); chmod go-w {path}"
    return None


def mcp_problem(run_dir: str | os.PathLike) -> str | None:
    """Why ``pushbench mcp`` must not serve ``run_dir`` (one line with the fix), or ``None``."""
    given = Path(os.path.abspath(Path(run_dir).expanduser()))
    for path in dict.fromkeys((given, given.resolve())):
        problem = _chain(path) or _own_entry(path, "the run dir", folder=True)
        if problem:
            return problem
    return None


def evaluate_problems(
    run_dir: str | os.PathLike, files: tuple[str, ...] = ("run.json", "episode.json", "trace.jsonl")
) -> list[str]:
    """Why another user could have written ``run_dir`` (``evaluate``'s check); empty if safe."""
    problem = mcp_problem(run_dir)
    if problem:
        return [problem]
    real = Path(run_dir).expanduser().resolve()
    return [p for p in (_own_entry(real / name, name, folder=False) for name in files) if p]
