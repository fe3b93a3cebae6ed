"""Stopping child processes: the one place for the SIGTERM, grace, SIGKILL sequence.

Callers start children with ``start_new_session=True`` so the child leads its own process
group; :func:`stop_group` then reaches everything the child started (a CLI agent's node
workers, Aider's shell) and not only the child itself. What a child started in a session of
its own (the MCP SDK starts stdio servers so) is out of that group's reach:
:func:`reap_orphans` finds such processes by their exact command line and stops them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def stop_group(proc: subprocess.Popen, grace: float) -> int:
    """SIGTERM ``proc``'s process group, wait up to ``grace`` seconds, then SIGKILL it; return
    the exit code. A group that is already gone is not an error."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()


def running_with_argv(argvs: list[list[str]]) -> dict[int, list[str]]:
    """This user's live processes whose command line equals one of ``argvs`` exactly, by pid.

    Read from ``/proc`` (Linux); elsewhere nothing is found. An exact command line (it names
    the episode's own run folder) is what identifies a process another program started for
    us: its pid alone could be reused, and it may sit in a session we cannot reach."""
    wanted = {tuple(a) for a in argvs}
    found: dict[int, list[str]] = {}
    proc = Path("/proc")
    if not wanted or not proc.is_dir():
        return found
    uid = os.getuid()
    for d in proc.iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if d.stat().st_uid != uid:
                continue
            raw = (d / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        argv = [a.decode(errors="surrogateescape") for a in raw.split(b"\0")[:-1]]
        if tuple(argv) in wanted:
            found[int(d.name)] = argv
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or the pid is another user's now
        return False
    try:  # a zombie of ours is dead for this purpose
        return (Path("/proc") / str(pid) / "stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def reap_orphans(
    argvs: list[list[str]], grace: float, term_grace: float = 5.0, poll: float = 0.1
) -> list[dict]:
    """Stop the processes running one of ``argvs`` (see :func:`running_with_argv`) that the
    program which started them left behind.

    They get ``grace`` seconds to exit by themselves (a stdio server exits when its client's
    end of the pipe closes, after any setup it was in), then SIGTERM and ``term_grace``
    seconds, then SIGKILL. Returns one entry per process found: ``pid``, the ``argv`` and
    ``stopped_by`` (``None`` when it exited by itself, else the signal's name)."""
    found = running_with_argv(argvs)
    stopped: dict[int, str | None] = dict.fromkeys(found)
    deadline = time.monotonic() + grace
    for sig, until in (
        (None, deadline),
        (signal.SIGTERM, deadline + term_grace),
        (signal.SIGKILL, deadline + term_grace + 5.0),
    ):
        left = [p for p in found if _alive(p)]
        if not left:
            break
        for pid in left:
            if sig is not None:
                try:
                    os.kill(pid, sig)
                    stopped[pid] = sig.name
                except ProcessLookupError:
                    pass
        while left and time.monotonic() < until:
            time.sleep(poll)
            left = [p for p in left if _alive(p)]
    return [{"pid": p, "argv": found[p], "stopped_by": stopped[p]} for p in found]
