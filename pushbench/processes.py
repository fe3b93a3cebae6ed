"""Stopping a child process group: the one place for the SIGTERM, grace, SIGKILL sequence.

Callers start children with ``start_new_session=True`` so the child leads its own process
group; :func:`stop_group` then reaches everything the child started (a CLI agent's node
workers, Aider's shell) and not only the child itself.
"""

from __future__ import annotations

import os
import signal
import subprocess


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
