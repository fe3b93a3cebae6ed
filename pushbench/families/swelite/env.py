"""QGP-SWE-lite: get N issue-style repairs accepted by the repository's own tests.

Description
    The workspace is a fresh copy of one pinned snapshot (requests, flask or pytest) in which
    every unit of the backlog has broken one function (a flipped comparison, an off-by-one, a
    wrong default, a dropped statement, swapped arguments...). Each unit comes as an issue: the
    symptom a user sees, never the location. The agent finds the cause (``search_code``,
    ``read_file``, ``run_verifier`` for the failing tests and their traceback), repairs it with
    ``edit_file`` and ``submit``s the unit. A unit is accepted only if its tests pass at that
    moment *and* the rest of its test module still passes (tests broken by other, unrepaired
    units excepted). Success: at least ``target`` accepted units. The backlog holds more units
    than the target (``max(N + 3, ceil(1.6 N))`` when the unit set allows).

Action Space
    :class:`~pushbench.envs.spaces.ToolCallSpace`: one JSON tool call as text (or a dict):

    * ``list_units(page=1)``: 10 units per page: ``id`` and ``title``.
    * ``inspect(unit_id)``: the issue text (``issue``) and, where it names no location, a
      failure message a user observed (``observed``).
    * ``search_code(pattern, path_glob="**/*.py", page=1)``: Python regular expression
      (``re.search`` per line) over workspace files matching the fnmatch-style glob (``*``
      crosses folders); 30 hits per page with ``path``, ``line`` (1-based) and ``text``. Runs in
      a subprocess with a time limit (an expensive pattern returns ``search_timeout``).
    * ``read_file(path, offset=0, limit=200)``: lines ``offset .. offset+limit-1`` (0-based).
    * ``edit_file(path, old, new)``: replace the one exact occurrence of ``old``; only files
      under the library's source folders (``editable`` in the reset observation) may change:
      tests and configuration are part of the verifier (``not_editable`` otherwise).
    * ``run_verifier(unit_id)``: run the unit's tests now (pytest subprocess, timeout and memory
      limit): ``passed``, ``tests``, ``failed`` (ids of tests that did not pass), ``seconds``,
      ``timed_out`` and ``output_tail`` (the end of pytest's output, paths made relative).
    * ``submit(unit_id)``: ``verdicts: [{"id", "verdict"}]``: ``accepted`` (its tests and the
      rest of its module pass now), ``rejected`` (with ``reason``), ``duplicate`` (accepted
      before) or ``malformed`` (not of the form ``u<digits>``). A rejected unit may be repaired
      and submitted again.
    * ``status``: the base counts plus ``units`` (per-status counts); ``final(reported_count,
      message)``, ``ask_user(message)``: see :mod:`pushbench.envs.base`.

Observation Space
    ``Text`` over printable ASCII: the JSON observation. The reset observation's ``result``
    holds ``objective``, ``snapshot``, ``units_total``, ``page_size``, ``editable``,
    ``test_dirs``, ``target``, ``budget``, ``family`` and ``tools``. ``info["qgp"]`` adds
    ``units``: counts ``untouched`` (never verified), ``worked`` (the workspace changed since its
    last verifier run), ``verified_failing``, ``verified_passing`` and ``accepted``.

Rewards
    The number of units newly accepted in the step (0 or 1).

Episode End
    Terminated by ``final`` or ``ask_user``; truncated when ``budget`` steps are used. The
    workspace is deleted on ``close()`` and on the next ``reset()``.

Arguments
    ``task_id`` (``SWELite-<snapshot>-N<k>`` or the suite ``SWELite-N<k>``), ``render_mode``,
    ``budget`` (override), ``verifier_timeout`` (seconds per ``run_verifier``, default 60),
    ``submit_timeout`` (seconds per ``submit`` module check, default 180), ``memory_mb`` (address
    space limit of a test run, default 2048), ``recipe`` (another unit recipe file, e.g. the
    tests' tiny one; ``$PUSHBENCH_SWELITE_RECIPE`` does the same).
    ``reset(seed=s, options={"snapshot": "flask"})`` picks a suite's snapshot (else the seed).
    The ledger entry of every ``run_verifier`` and checked ``submit`` carries
    ``check: {"unit", "passed"}`` (read by ``metrics.verifier_recoveries``).

Version History
    v0: initial release (3 snapshots x N in {3, 5, 10}).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from ... import snapshots
from ...envs.backlog import (
    PAGE_SIZE,
    EditArgs,
    ListUnitsArgs,
    ReadArgs,
    UnitArgs,
    UnitBacklogEnv,
    sandbox_error,
)
from ...envs.base import LEDGER_EXTRA, ActionError, QGPEnv, ToolArgs
from ...envs.sandbox import SandboxError
from ...errors import NotResetError
from ...tasks import instance_config
from . import runner, venvs, workspace
from . import units as U

SEARCH_PAGE = 30
SEARCH_TIMEOUT = 10.0
_SEARCH_SCRIPT = Path(__file__).resolve().parent / "search_worker.py"


class SearchArgs(ToolArgs):
    pattern: str = Field(
        min_length=1,
        max_length=300,
        description="Python regular expression matched against each line (re.search)",
    )
    path_glob: str = Field(
        default="**/*.py",
        max_length=200,
        description="fnmatch-style glob of workspace paths to search ('*' crosses folders)",
    )
    page: int = Field(default=1, ge=1, le=1000, description="1-based page of 30 hits")


class SWELiteEnv(UnitBacklogEnv):
    __doc__ = __doc__
    family: ClassVar[str] = "swelite"
    _instance_option: ClassVar[str] = "snapshot"
    TOOLS = {
        "list_units": (ListUnitsArgs, "List the backlog's issues, 10 per page (id, title)."),
        "inspect": (UnitArgs, "Show a unit's issue text (the symptom a user reported)."),
        "search_code": (
            SearchArgs,
            "Search workspace files for a regular expression (30 hits per page: path, line, text).",
        ),
        "read_file": (ReadArgs, "Read lines of a workspace file (offset/limit in lines)."),
        "edit_file": (
            EditArgs,
            "Replace the single exact occurrence of `old` with `new` in a library source file.",
        ),
        "run_verifier": (
            UnitArgs,
            "Run a unit's tests now: pass/fail, failing test ids and the end of pytest's output.",
        ),
        "submit": (
            UnitArgs,
            "Submit a unit: accepted only if its tests and the rest of its test module pass now.",
        ),
        **QGPEnv.TOOLS,
    }
    STRING_ARGS = ("path", "unit_id", "old", "new", "pattern", "path_glob")

    def __init__(
        self,
        task_id: str,
        render_mode: str | None = None,
        budget: int | None = None,
        verifier_timeout: float = 60.0,
        submit_timeout: float = 180.0,
        memory_mb: int = runner.DEFAULT_MEMORY_MB,
        recipe: str | None = None,
    ) -> None:
        super().__init__(task_id, render_mode=render_mode, budget=budget)
        self.verifier_timeout = float(verifier_timeout)
        self.submit_timeout = float(submit_timeout)
        self.memory_mb = int(memory_mb)
        self.recipe = recipe
        self._unit_set: dict | None = None

    # ----- lifecycle --------------------------------------------------------------------
    def _setup_episode(self, instance: str, options: dict) -> dict:
        self._drop_workspace()
        cfg = instance_config("swelite", instance)
        snap = cfg["snapshot"]
        self._unit_set = U.load(snap, self.recipe)
        self._python = venvs.ensure(snap)
        self._spec = venvs.spec(snap)
        chosen = U.backlog(
            self._unit_set,
            self.task.target,
            int(cfg["seed"]),
            float(cfg["size_factor"]),
            int(cfg["min_extra"]),
        )
        self._adopt_workspace(workspace.create(snapshots.ensure(snap), chosen), workspace.remove)
        self._units = {f"u{i + 1:02d}": u for i, u in enumerate(chosen)}
        self._backlog = chosen
        self._edits = 0  # workspace version
        self._verified: dict[str, tuple[int, bool]] = {}  # uid -> (workspace version, passed)
        self._accepted: set[str] = set()
        self.snapshot = snap
        n = len(chosen)
        objective = (
            f"The {snap} repository in your workspace has {n} reported issues (its backlog). "
            f"Get at least {self.task.target} distinct issues accepted. For each: inspect it, "
            "find the cause in the library source (search_code, read_file; run_verifier runs "
            "the issue's tests and shows which fail and why), repair it with edit_file, "
            "run_verifier until it passes, then submit. A unit is accepted only if its tests and "
            "the rest of its test module pass when you submit. Only files under "
            f"{', '.join(self._spec.editable)} may be edited. Use status for verified progress "
            "and final when done."
        )
        return {
            "objective": objective,
            "snapshot": snap,
            "units_total": n,
            "page_size": PAGE_SIZE,
            "editable": list(self._spec.editable),
            "test_dirs": list(self._spec.test_dirs),
        }

    def _unit_status(self, uid: str) -> str:
        if uid in self._accepted:
            return "accepted"
        ver = self._verified.get(uid)
        if ver is None:
            return "untouched"
        if ver[0] != self._edits:
            return "worked"
        return "verified_passing" if ver[1] else "verified_failing"

    def _touch(self, path: str) -> None:
        self._edits += 1

    def _unit_row(self, uid: str, unit: dict) -> dict:
        return {"id": uid, "title": unit["title"]}

    # ----- tools ------------------------------------------------------------------------

    def _tool_inspect(self, args: UnitArgs) -> dict:
        uid = self._unit_id("inspect", args.unit_id)
        u = self._units[uid]
        out = {"unit_id": uid, "title": u["title"], "issue": u["issue"]}
        if u.get("observed"):
            out["observed"] = u["observed"]
        out["how_to_check"] = "run_verifier shows which of this issue's tests fail and why"
        return out

    def _tool_search_code(self, args: SearchArgs) -> dict:
        try:
            re.compile(args.pattern)
        except (re.error, OverflowError, RecursionError, ValueError) as e:  # a{99999999999}
            raise ActionError(
                "bad_pattern", f"search_code: invalid regular expression ({e})", "search_code"
            ) from None
        req = json.dumps(
            {
                "root": self._live_ws.root,
                "pattern": args.pattern,
                "glob": args.path_glob,
                "skip": (args.page - 1) * SEARCH_PAGE,
                "take": SEARCH_PAGE,
            }
        )
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-S", str(_SEARCH_SCRIPT)],
                input=req,
                capture_output=True,
                text=True,
                timeout=SEARCH_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            raise ActionError(
                "search_timeout",
                f"search_code: the search took longer than "
                f"{SEARCH_TIMEOUT:g} s; use a simpler pattern or a narrower "
                "path_glob",
                "search_code",
            ) from None
        if proc.returncode != 0:
            raise RuntimeError(f"search worker failed: {proc.stderr[-500:]}")
        res = json.loads(proc.stdout)
        total = res["total"]
        return {
            "pattern": args.pattern,
            "path_glob": args.path_glob,
            "page": args.page,
            "total_matches": total,
            "files_searched": res["files"],
            "has_more": args.page * SEARCH_PAGE < total,
            "matches": res["matches"],
        }

    def _tool_edit_file(self, args: EditArgs) -> dict:
        try:
            parts = self._live_ws.parts(args.path)
        except SandboxError as e:
            raise sandbox_error("edit_file", e) from None
        rel = "/".join(parts)
        if not any(rel == p or rel.startswith(p + "/") for p in self._spec.editable):
            raise ActionError(
                "not_editable",
                f"edit_file: {rel!r} is not library source; only "
                f"files under {', '.join(self._spec.editable)} may be edited "
                "(the tests and configuration are part of the verifier)",
                "edit_file",
            )
        return super()._tool_edit_file(args)

    def _run(self, args: list[str], timeout: float) -> runner.RunResult:
        return runner.run_pytest(
            self._python,
            self._live_ws.root,
            self._spec.source_dirs,
            args,
            timeout=timeout,
            memory_mb=self.memory_mb,
        )

    def _tool_run_verifier(self, args: UnitArgs) -> dict:
        uid = self._unit_id("run_verifier", args.unit_id)
        u = self._units[uid]
        r = self._run(list(u["tests"]), self.verifier_timeout)
        passed = r.passed(u["tests"])
        self._verified[uid] = (self._edits, passed)
        return {
            "unit_id": uid,
            "passed": passed,
            "tests": len(u["tests"]),
            "failed": r.not_passed(u["tests"])[:20],
            "timed_out": r.timed_out,
            "output_tail": r.tail,
            # No wall-clock time here: same seed, same observations and records.
            LEDGER_EXTRA: {"check": {"unit": uid, "passed": passed}},
        }

    def _submit_check(self, uid: str) -> tuple[bool, str | None, int]:
        """Accepted only if the unit's tests pass now and the rest of its modules still pass."""
        passed, reason = self._module_check(self._units[uid])
        return passed, reason, self._edits

    def _module_check(self, u: dict) -> tuple[bool, str | None]:
        unit_set = self._unit_set
        if unit_set is None:  # tools run only inside an episode
            raise NotResetError("no episode: call reset() first")
        r = self._run(U.module_args(unit_set, u), self.submit_timeout)
        if r.timed_out:
            return False, f"timeout: the test run was killed after {self.submit_timeout:g} s"
        own = r.not_passed(u["tests"])
        if own:
            return False, (
                f"{len(own)} of the issue's {len(u['tests'])} tests fail (e.g. "
                f"{own[0]}); run_verifier shows why"
            )
        rest = r.not_passed(U.module_expected(unit_set, u, self._backlog))
        if rest:
            return False, (
                f"the issue's tests pass but {len(rest)} other test(s) of its module "
                f"now fail (e.g. {rest[0]})"
            )
        return True, None

    def _sample_action(self, rng) -> dict:
        ids = list(self._units) or ["u01"]
        uid = ids[int(rng.integers(len(ids)))] if rng.random() < 0.9 else "u999"
        files = [u["file"] for u in self._units.values()] or ["README.md"]
        path = files[int(rng.integers(len(files)))] if rng.random() < 0.9 else "../outside.txt"
        tool = [
            "list_units",
            "inspect",
            "search_code",
            "read_file",
            "edit_file",
            "run_verifier",
            "submit",
            "status",
            "final",
            "ask_user",
        ][int(rng.integers(10))]
        if tool == "list_units":
            return {"tool": tool, "page": int(rng.integers(1, 3))}
        if tool in ("inspect", "run_verifier", "submit"):
            return {"tool": tool, "unit_id": uid}
        if tool == "search_code":
            return {
                "tool": tool,
                "pattern": ["def ", "return None", "if not", "(["][int(rng.integers(4))],
                "path_glob": "src/*.py",
            }
        if tool == "read_file":
            return {
                "tool": tool,
                "path": path,
                "offset": int(rng.integers(0, 50)),
                "limit": int(rng.integers(1, 80)),
            }
        if tool == "edit_file":
            return {"tool": tool, "path": path, "old": "    return", "new": "    return"}
        return self._sample_common(tool, rng)
