"""pushbench.processes.reap_orphans: processes found by their exact command line get a grace
period to exit by themselves, then SIGTERM, then SIGKILL; other processes are not touched."""

from __future__ import annotations

import subprocess
import sys
import uuid

from pushbench.processes import reap_orphans, running_with_argv


def _start(code: str) -> tuple[subprocess.Popen, list[str]]:
    argv = [sys.executable, "-c", code, f"pushbench-test-{uuid.uuid4().hex}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # running its code
    return proc, argv


READY = "print('ready', flush=True); "


def test_a_process_that_exits_within_the_grace_is_left_to_exit():
    proc, argv = _start(READY + "import time; time.sleep(0.5)")
    try:
        (entry,) = reap_orphans([argv], grace=60)
        assert entry == {"pid": proc.pid, "argv": argv, "stopped_by": None}
        assert proc.wait(timeout=10) == 0  # it ended its own way, not by a signal
    finally:
        proc.kill()
        proc.wait()


def test_a_process_still_running_after_the_grace_gets_sigterm_then_sigkill():
    hangs, hangs_argv = _start(READY + "import time; time.sleep(300)")
    deaf, deaf_argv = _start(  # "ready" once SIGTERM is ignored, not before
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        + READY
        + "time.sleep(300)"
    )
    other, other_argv = _start(READY + "import time; time.sleep(300)")
    try:
        got = reap_orphans([hangs_argv, deaf_argv], grace=0.2, term_grace=0.5)
        assert {e["pid"]: e["stopped_by"] for e in got} == {
            hangs.pid: "SIGTERM",
            deaf.pid: "SIGKILL",
        }
        assert hangs.wait(timeout=10) == -15 and deaf.wait(timeout=10) == -9
        assert other.poll() is None  # a command line not asked for is not touched
        assert list(running_with_argv([other_argv])) == [other.pid]
    finally:
        for p in (hangs, deaf, other):
            p.kill()
            p.wait()


def test_nothing_found_returns_at_once():
    assert reap_orphans([[sys.executable, "-c", f"never-{uuid.uuid4().hex}"]], grace=600) == []
    assert reap_orphans([], grace=600) == []
