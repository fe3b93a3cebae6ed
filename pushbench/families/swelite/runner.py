"""Run a snapshot's own tests with pytest in a confined subprocess of its test venv.

Every run gets a fresh temporary folder (``HOME``, ``TMPDIR`` and pytest's ``--basetemp`` live
there, so nothing is written into the workspace and parallel runs never share state), a wall
clock timeout (the whole process group is killed), an address-space limit and a CPU-time
backstop set with :func:`resource.setrlimit` in ``preexec_fn``, no core dumps and a cap on the
size of files it writes. Bytecode writing is off, so the workspace never grows ``__pycache__``.
Outcomes come per test from a tiny plugin (``probe/pushbench_probe.py``) that appends one JSON
line per report, so a run killed by its timeout still tells which tests finished.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PROBE_DIR = Path(__file__).resolve().parent / "probe"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MEMORY_MB = 2048
TAIL_LINES = 30
TAIL_CHARS = 3000
ROOT = "<root>"  # stands for the run's root folder inside test ids (in args and outcomes)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class RunResult:
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> passed/failed/error/...
    messages: dict[str, str] = field(default_factory=dict)  # nodeid -> first failure message
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    tail: str = ""

    def passed(self, nodeids) -> bool:
        """True when every test in ``nodeids`` ran and passed (and the run was not killed)."""
        return not self.timed_out and all(self.outcomes.get(n) == "passed" for n in nodeids)

    def not_passed(self, nodeids) -> list[str]:
        return [n for n in nodeids if self.outcomes.get(n) != "passed"]


def _limits(memory_mb: int, cpu_seconds: int):
    def apply() -> None:
        mem = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024 * 1024, 256 * 1024 * 1024))

    return apply


def _fold(lines: list[str], root: str) -> tuple[dict[str, str], dict[str, str]]:
    out: dict[str, str] = {}
    messages: dict[str, str] = {}
    for raw in lines:
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            continue  # a line cut by the kill
        # Some parametrized ids embed a path (e.g. __file__): make them root-independent.
        nid, when, outcome = rec["id"].replace(root, ROOT), rec["when"], rec["outcome"]
        if rec.get("message"):
            messages.setdefault(nid, rec["message"])
        prev = out.get(nid)
        if when == "collect" or outcome == "failed":
            out[nid] = "failed" if when == "call" else "error"
        elif prev in ("failed", "error"):
            continue
        elif outcome in ("skipped", "xfailed"):
            out[nid] = outcome
        elif when == "call":
            out[nid] = "passed"
        elif prev is None:
            out[nid] = "incomplete"  # setup passed; call not reported (yet)
    return out, messages


def run_pytest(
    python: str | os.PathLike,
    root: str | os.PathLike,
    source_dirs,
    args: list[str],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> RunResult:
    """Run ``pytest args`` in ``root`` with ``root/<source_dirs>`` first on the import path.

    ``<root>`` in ``args`` and in the reported test ids stands for ``root`` (some parametrized
    ids embed a path), so ids recorded in one copy of a snapshot are valid in every other."""
    root = Path(root)
    venv_bin = Path(python).parent
    tmp = Path(tempfile.mkdtemp(prefix="pushbench-verify-"))
    try:
        probe_out, log = tmp / "probe.jsonl", tmp / "output.txt"
        (tmp / "home").mkdir()
        env = {
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(tmp / "home"),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "COLUMNS": "80",
            "NO_COLOR": "1",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUTF8": "1",
            "PYTHONPATH": os.pathsep.join([*(str(root / d) for d in source_dirs), str(PROBE_DIR)]),
            "PUSHBENCH_PROBE_OUT": str(probe_out),
        }
        cmd = [
            str(python),
            "-m",
            "pytest",
            "-p",
            "pushbench_probe",
            "-p",
            "no:cacheprovider",
            "-q",
            "--tb=short",
            "--color=no",
            "-o",
            "console_output_style=classic",
            "--rootdir",
            str(root),
            "--basetemp",
            str(tmp / "basetemp"),
            *(a.replace(ROOT, str(root)) for a in args),
        ]
        start = time.monotonic()
        timed_out = False
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                cmd,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_limits(memory_mb, int(timeout) + 10),
            )
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out, rc = True, None
            finally:
                try:  # the whole group: pytester and test servers may have spawned children
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
        seconds = time.monotonic() - start
        lines = probe_out.read_text("utf-8", "replace").splitlines() if probe_out.exists() else []
        tail = _tail(log.read_bytes().decode("utf-8", "replace"), root, venv_bin.parent, tmp)
        if timed_out:
            tail += f"\n[pushbench] timeout: the test run was killed after {timeout:g} s"
        outcomes, messages = _fold(lines, str(root))
        return RunResult(
            outcomes=outcomes,
            messages=messages,
            returncode=rc,
            timed_out=timed_out,
            seconds=seconds,
            tail=tail,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_DURATION = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?")


def _tail(text: str, root: Path, venv: Path, tmp: Path) -> str:
    text = _ANSI.sub("", text)
    for path, name in (
        (str(root) + "/", ""),
        (str(root), "."),
        (str(venv), "<venv>"),
        (str(tmp), "<tmp>"),
    ):
        text = text.replace(path, name)
    # pytest's summary and --durations lines carry wall-clock time; observations must not.
    text = _DURATION.sub(" in <t>", text)
    lines = text.rstrip().splitlines()[-TAIL_LINES:]
    out = "\n".join(ln if len(ln) <= 300 else ln[:300] + "..." for ln in lines)
    return out[-TAIL_CHARS:]
