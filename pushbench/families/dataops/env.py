"""QGP-DataOps-lite: get N distinct work units accepted by their checkers.

Description
    A backlog of data-operations work units (CSV field checks, metadata repairs against a
    RepoScan snapshot's PKG-INFO, consistency questions over two related files, and JSON/YAML
    artifacts to fix against a schema) is generated into a fresh temporary workspace. Each unit
    needs a short loop: ``inspect`` it, read its files, ``answer`` it or edit its files,
    ``run_verifier``, ``submit``. A unit is accepted only if its checker passes at the moment of
    submission. Success: at least ``target`` accepted units. The backlog holds at least 1.5 N
    units (``backlog_size``), so choosing and finishing units matters.

Action Space
    :class:`~pushbench.envs.spaces.ToolCallSpace`: one JSON tool call as text (or a dict):

    * ``list_units(page=1)``: 10 units per page: ``id``, ``kind``, ``title`` (no status).
    * ``inspect(unit_id)``: the task text, the files it concerns, its rules as data, ``mode``
      (``answer`` with ``answer_type`` ``list`` (comma-separated row numbers, ids or names;
      order and spaces do not matter; ``none`` for an empty list) or ``text``, or ``edit``).
    * ``read_file(path, offset=0, limit=200)``: lines ``offset .. offset+limit-1`` (0-based,
      ``limit`` <= 400; fewer when the lines are long) with ``lines_returned``,
      ``total_lines`` and ``has_more``.
    * ``edit_file(path, old, new)``: replace the one exact occurrence of ``old`` (error when it
      is missing or ambiguous, with the count). ``write_file(path, content)``: replace/create.
    * ``answer(unit_id, value)``: record the answer (str, int, or for a list answer a JSON
      array of str and int, recorded as its items comma-separated) of an answer unit; replaces
      the previous one. A value of the wrong shape gets ``error_type`` ``answer_shape``, whose
      message quotes the expected form with an example (:mod:`.answers`), and records nothing.
      Edit units refuse answers.
    * ``run_verifier(unit_id)``: run the checker now: ``passed`` and, on failure,
      ``failed_rule`` and a ``reason`` naming the rule, never the expected answer.
    * ``submit(unit_id)``: ``verdicts: [{"id", "verdict"}]``: ``accepted`` (checker passes now),
      ``rejected`` (fails now, or an unknown unit), ``duplicate`` (the unit was already
      accepted) or ``malformed`` (not a unit id of the form ``u<digits>``). A unit that was
      rejected may be fixed and submitted again: that resubmission is a fresh submission, not a
      duplicate, so the DataOps duplicate rate measures resubmissions of accepted units.
    * ``status``: the base counts plus ``units`` (per-status counts, see below);
      ``final(reported_count, message)``, ``ask_user(message)``: see :mod:`pushbench.envs.base`.

    Paths are relative to the workspace; the files of unit ``uNN`` live under ``uNN/``. The
    sandbox (:mod:`.sandbox`) refuses absolute paths, ``..``, symlinks, non-regular files,
    hard links and files over 256 KiB, with ``error_type`` ``outside_workspace``,
    ``not_allowed``, ``too_large``, ``not_found``, ``is_directory`` or ``bad_path``.

Observation Space
    ``Text`` over printable ASCII: the JSON observation. The reset observation's ``result``
    holds ``objective``, ``backlog``, ``units_total``, ``page_size``, ``target``, ``budget``,
    ``family`` and ``tools``. ``info["qgp"]`` adds ``units``: counts of units ``untouched``,
    ``worked`` (answered or edited since the last verifier run), ``verified_failing``,
    ``verified_passing`` (last run passed, not yet accepted) and ``accepted``.

Rewards
    The number of units newly accepted in the step (0 or 1).

Episode End
    Terminated by ``final`` or ``ask_user``; truncated when ``budget`` steps are used. The
    workspace is deleted on ``close()`` and on the next ``reset()``.

Arguments
    ``task_id`` (``DataOps-b<i>-N<k>`` or the suite ``DataOps-N<k>``), ``render_mode``
    (``"ansi"`` or None), ``budget`` (override the calibrated budget).
    ``reset(seed=s, options={"backlog": "b3"})`` picks a suite's backlog (else from the seed).
    The ledger entry of every ``run_verifier`` and checked ``submit`` carries
    ``check: {"unit", "passed"}`` (read by ``metrics.verifier_recoveries``).

Version History
    v0: initial release (4 unit kinds, 6 backlogs x N in {3, 5, 10, 20}); answer units ask
    which rows / accounts / files (list answers), so no answer can be guessed cheaply.
    Family version 2 (issue 27): an answer of the wrong shape gets ``answer_shape`` with the
    expected form and an example; a list answer may be a JSON array (same verdicts).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field, WithJsonSchema

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
from ...envs.sandbox import MAX_FILE_BYTES, SandboxError, Workspace
from ...tasks import instance_config
from . import units as U
from .answers import MAX_ANSWER_CHARS, AnswerShapeError, read_answer  # noqa: F401 (re-export)

# The JSON schema agents read; the value itself is checked by ``read_answer`` so that any value
# of the wrong shape gets the ``answer_shape`` error with the expected form (not a type error).
_VALUE_SCHEMA = {
    "anyOf": [
        {"type": "string"},
        {"type": "integer"},
        {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
    ]
}


class WriteArgs(ToolArgs):
    path: str = Field(max_length=400, description="file path relative to the workspace")
    content: str = Field(max_length=MAX_FILE_BYTES, description="the whole new file content")


class AnswerArgs(ToolArgs):
    unit_id: str = Field(max_length=64, description="a unit id such as u07")
    value: Annotated[Any, WithJsonSchema(_VALUE_SCHEMA)] = Field(
        description="the answer: text, or for answer_type list the items comma-separated (see "
        "the unit's task) or a JSON array of them"
    )


class DataOpsEnv(UnitBacklogEnv):
    __doc__ = __doc__
    family: ClassVar[str] = "dataops"
    _instance_option: ClassVar[str] = "backlog"
    TOOLS = {
        "list_units": (
            ListUnitsArgs,
            "List the backlog's work units, 10 per page (id, kind, title).",
        ),
        "inspect": (UnitArgs, "Show a unit's task, the files it concerns and its rules."),
        "read_file": (ReadArgs, "Read lines of a workspace file (offset/limit in lines)."),
        "edit_file": (
            EditArgs,
            "Replace the single exact occurrence of `old` with `new` in a file.",
        ),
        "write_file": (WriteArgs, "Replace (or create) a workspace file with `content`."),
        "answer": (AnswerArgs, "Record the answer of an answer-mode unit."),
        "run_verifier": (UnitArgs, "Run a unit's checker now: pass, or which rule fails."),
        "submit": (UnitArgs, "Submit a unit: accepted only if its checker passes now."),
        **QGPEnv.TOOLS,
    }

    STRING_ARGS = ("path", "unit_id", "old", "new", "content", "value")

    # What a DataOps family says (the public-data family, :mod:`.public.env`, overrides them):
    # the unit kinds named in the objective, the backlog generator and the unit checker.
    _KINDS_TEXT: ClassVar[str] = (
        "CSV field checks, metadata repairs, consistency questions, artifact fixes"
    )
    _generate = staticmethod(U.generate)
    _check_unit = staticmethod(U.check)

    # ----- lifecycle --------------------------------------------------------------------
    def _setup_episode(self, instance: str, options: dict) -> dict:
        self._drop_workspace()
        self._adopt_workspace(Workspace.create(), Workspace.remove)
        cfg = instance_config(self.family, instance)
        order = self._generate(cfg, self.task.target, self._live_ws)
        self._units = {u.id: u for u in order}
        self._answers: dict[str, str | int] = {}
        self._version = {uid: 0 for uid in self._units}  # bumped by answers and edits
        self._verified: dict[str, tuple[int, bool]] = {}  # uid -> (version, passed)
        self._accepted: set[str] = set()
        n = len(order)
        objective = (
            f"Backlog {instance} holds {n} data-operations work units ({self._KINDS_TEXT}). "
            "Get at least "
            f"{self.task.target} distinct units accepted by their checkers. For each unit: "
            "inspect it, read its files (paths relative to the workspace; unit uNN's files are "
            "under uNN/), then answer it (answer mode) or edit its files (edit mode), "
            "run_verifier, and submit. A unit is accepted only if its checker passes when you "
            "submit it. Use status for verified progress and final when done."
        )
        return {
            "objective": objective,
            "backlog": instance,
            "units_total": n,
            "page_size": PAGE_SIZE,
        }

    def _unit_status(self, uid: str) -> str:
        if uid in self._accepted:
            return "accepted"
        ver = self._verified.get(uid)
        if ver is not None and ver[0] == self._version[uid]:
            return "verified_passing" if ver[1] else "verified_failing"
        return "worked" if self._version[uid] else "untouched"

    # ----- helpers ----------------------------------------------------------------------
    def _unit(self, tool: str, uid: str) -> U.Unit:
        return self._units[self._unit_id(tool, uid)]

    def _unit_row(self, uid: str, unit: U.Unit) -> dict:
        return {"id": unit.id, "kind": unit.kind, "title": unit.title}

    def _touch(self, path: str) -> None:
        owner = path.strip().lstrip("./").split("/", 1)[0]
        if owner in self._version:
            self._version[owner] += 1

    def _check(self, unit: U.Unit) -> U.CheckResult:
        return self._check_unit(unit, self._live_ws, self._answers.get(unit.id))

    # ----- tools ------------------------------------------------------------------------
    def _tool_inspect(self, args: UnitArgs) -> dict:
        return self._unit("inspect", args.unit_id).public()

    def _tool_write_file(self, args: WriteArgs) -> dict:
        try:
            size = self._live_ws.write_text(args.path, args.content)
        except SandboxError as e:
            raise sandbox_error("write_file", e) from None
        self._touch(args.path)
        return {"path": args.path, "bytes": size}

    def _tool_answer(self, args: AnswerArgs) -> dict:
        unit = self._unit("answer", args.unit_id)
        if unit.answer_type is None:
            raise ActionError(
                "edit_unit",
                f"answer: {unit.id} is an edit-mode unit; change its "
                "files instead (inspect shows them)",
                "answer",
            )
        try:
            value = read_answer(args.value, unit.answer_type)
        except AnswerShapeError as e:
            raise ActionError(
                "answer_shape", f"answer: {unit.id} was not recorded: {e}", "answer"
            ) from None
        self._answers[unit.id] = value
        self._version[unit.id] += 1
        return {"unit_id": unit.id, "recorded": value, "note": "run_verifier to check it"}

    def _tool_run_verifier(self, args: UnitArgs) -> dict:
        unit = self._unit("run_verifier", args.unit_id)
        res = self._check(unit)
        self._verified[unit.id] = (self._version[unit.id], res.passed)
        out = {
            "unit_id": unit.id,
            "passed": res.passed,
            LEDGER_EXTRA: {"check": {"unit": unit.id, "passed": res.passed}},
        }
        if not res.passed:
            out.update(failed_rule=res.rule, reason=res.reason)
        return out

    def _submit_check(self, uid: str) -> tuple[bool, str | None, int]:
        """Run the unit's checker now: ``(passed, reason to show or None, workspace version)``."""
        res = self._check(self._units[uid])
        return res.passed, None, self._version[uid]

    def _sample_action(self, rng) -> dict:
        ids = list(self._units) or ["u01"]
        uid = ids[int(rng.integers(len(ids)))] if rng.random() < 0.9 else "u999"
        files = [f for u in self._units.values() for f in u.files] or ["u01/data.csv"]
        path = files[int(rng.integers(len(files)))] if rng.random() < 0.9 else "../outside.txt"
        tool = [
            "list_units",
            "inspect",
            "read_file",
            "edit_file",
            "write_file",
            "answer",
            "run_verifier",
            "submit",
            "status",
            "final",
            "ask_user",
        ][int(rng.integers(11))]
        if tool == "list_units":
            return {"tool": tool, "page": int(rng.integers(1, 4))}
        if tool in ("inspect", "run_verifier", "submit"):
            return {"tool": tool, "unit_id": uid}
        if tool == "read_file":
            return {
                "tool": tool,
                "path": path,
                "offset": int(rng.integers(0, 20)),
                "limit": int(rng.integers(1, 50)),
            }
        if tool == "edit_file":
            return {"tool": tool, "path": path, "old": "a", "new": "b"}
        if tool == "write_file":
            return {"tool": tool, "path": path, "content": "x,y\n1,2\n"}
        if tool == "answer":
            return {"tool": tool, "unit_id": uid, "value": int(rng.integers(0, 10))}
        return self._sample_common(tool, rng)
