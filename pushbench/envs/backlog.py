"""The backlog base: a workspace of files plus a backlog of work units, each verified alone.

:class:`UnitBacklogEnv` is what the work-unit families (DataOps, SWE-lite) share: the workspace
lifecycle (a private temporary folder, removed on close or garbage collection), the backlog
(``list_units``, unit lookup), file tools (``read_file``, ``edit_file``), ``submit`` with its
per-unit verdicts (accepted only if the family's check passes now; a rejected unit may be
resubmitted after a fix; an accepted one again is a duplicate), the backlog book in ``status``
and the QGP block, and argument screening. A family adds its own tools and says:

* :meth:`_setup_episode` - build the workspace (``self._ws``, a :class:`~.sandbox.Workspace`)
  and the backlog (``self._units``: unit id -> unit, in list order);
* :meth:`_unit_row` - what ``list_units`` shows of a unit;
* :meth:`_unit_status` - untouched / worked / verified_failing / verified_passing / accepted;
* :meth:`_touch` - what an edit of ``path`` invalidates;
* :meth:`_submit_check` - the acceptance check run at submission;
* :attr:`STRING_ARGS` - string arguments screened for control characters.

Verified progress is ``len(self._accepted)``: the verifier's state, never the agent's claim.
"""

from __future__ import annotations

import json
import re
import weakref
from typing import Any, ClassVar

from pydantic import Field

from ..errors import NotResetError
from .actions import _CONTROL
from .base import LEDGER_EXTRA, ActionError, QGPEnv, ToolArgs
from .sandbox import MAX_FILE_BYTES, SandboxError, Workspace

PAGE_SIZE = 10
MAX_LINES = 400
MAX_LINE_CHARS = 2000
MAX_READ_CHARS = 120_000  # escaped characters of content per read_file result
UNIT_ID = re.compile(r"u\d{1,4}")
_LEDGER_CLIP = 200
UNIT_STATUSES = ("untouched", "worked", "verified_failing", "verified_passing", "accepted")


class ListUnitsArgs(ToolArgs):
    page: int = Field(default=1, ge=1, le=1000, description="1-based page of 10 units")


class UnitArgs(ToolArgs):
    unit_id: str = Field(max_length=64, description="a unit id such as u07")


class ReadArgs(ToolArgs):
    path: str = Field(max_length=400, description="file path relative to the workspace")
    offset: int = Field(default=0, ge=0, le=10**6, description="first line (0-based)")
    limit: int = Field(default=200, ge=1, le=MAX_LINES, description="number of lines")


class EditArgs(ToolArgs):
    path: str = Field(max_length=400, description="file path relative to the workspace")
    old: str = Field(
        min_length=1,
        max_length=MAX_FILE_BYTES,
        description="exact text to replace (must occur exactly once)",
    )
    new: str = Field(max_length=MAX_FILE_BYTES, description="replacement text")


def sandbox_error(tool: str, e: SandboxError) -> ActionError:
    """The :class:`ActionError` the agent sees for a refused workspace access."""
    return ActionError(e.code, f"{tool}: {e.message}", tool)


class UnitBacklogEnv(QGPEnv):
    """Base of the work-unit families (see the module docstring for what a family adds)."""

    STRING_ARGS: ClassVar[tuple[str, ...]] = ("path", "unit_id", "old", "new")

    def __init__(
        self, task_id: str, render_mode: str | None = None, budget: int | None = None
    ) -> None:
        super().__init__(task_id, render_mode=render_mode, budget=budget)
        self._ws: Workspace | None = None
        self._finalizer: weakref.finalize | None = None
        self._units: dict[str, Any] = {}
        self._verified: dict[str, tuple[int, bool]] = {}  # uid -> (version, passed)
        self._accepted: set[str] = set()

    # ----- lifecycle --------------------------------------------------------------------
    def _adopt_workspace(self, ws: Workspace, remove) -> None:
        """Own ``ws`` for this episode: ``remove(ws)`` runs on close or garbage collection."""
        self._ws = ws
        self._finalizer = weakref.finalize(self, remove, ws)

    @property
    def _live_ws(self) -> Workspace:
        """This episode's workspace; the tools and unit checks run only inside an episode."""
        if self._ws is None:
            raise NotResetError("no episode workspace: call reset() first")
        return self._ws

    def _drop_workspace(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # removes the folder once; safe to call again
        self._ws, self._finalizer = None, None

    def close(self) -> None:
        self._drop_workspace()
        super().close()

    # ----- the family's part --------------------------------------------------------------
    def _unit_row(self, uid: str, unit: Any) -> dict:
        raise NotImplementedError

    def _unit_status(self, uid: str) -> str:
        raise NotImplementedError

    def _touch(self, path: str) -> None:
        raise NotImplementedError

    def _submit_check(self, uid: str) -> tuple[bool, str | None, int]:
        """``(passed, reason to show or None, version checked)`` of unit ``uid`` now."""
        raise NotImplementedError

    # ----- progress -----------------------------------------------------------------------
    def _valid_count(self) -> int:
        return len(self._accepted)

    def _extra_qgp(self) -> dict:
        counts = dict.fromkeys(UNIT_STATUSES, 0)
        for uid in self._units:
            counts[self._unit_status(uid)] += 1
        return {"units": {"total": len(self._units), **counts}}

    def _tool_status(self, args) -> dict:
        out = super()._tool_status(args)
        out["units"] = self._extra_qgp()["units"]
        return out

    # ----- backlog tools ------------------------------------------------------------------
    def _unit_id(self, tool: str, raw: str) -> str:
        """The id of an existing unit (``raw`` stripped), else an ``unknown_unit`` error."""
        uid = raw.strip()
        if uid not in self._units:
            ids = list(self._units)
            raise ActionError(
                "unknown_unit",
                f"{tool}: no unit {raw[:64]!r} in this backlog "
                f"(ids {ids[0]}..{ids[-1]}; list_units shows them)",
                tool,
            )
        return uid

    def _tool_list_units(self, args: ListUnitsArgs) -> dict:
        order = list(self._units.items())
        pages = max(1, -(-len(order) // PAGE_SIZE))
        chunk = order[(args.page - 1) * PAGE_SIZE : args.page * PAGE_SIZE]
        return {
            "page": args.page,
            "pages": pages,
            "total": len(order),
            "has_more": args.page < pages,
            "units": [self._unit_row(uid, u) for uid, u in chunk],
        }

    def _submission_ids(self, call: dict) -> list[str]:
        uid = call.get("unit_id")
        uid = uid.strip() if isinstance(uid, str) else ""
        return [uid] if UNIT_ID.fullmatch(uid) else []

    def _tool_submit(self, args: UnitArgs) -> dict:
        """Verdict for one unit id; the family's :meth:`_submit_check` decides acceptance.

        ``duplicate``: the unit was accepted before. A rejected unit may be resubmitted after a
        fix (a fresh submission). Unknown ids are ``rejected``; ids not of the form ``u<n>``
        are ``malformed``.
        """
        uid = args.unit_id.strip()
        extra, reason = None, None
        if not UNIT_ID.fullmatch(uid):
            verdict = "malformed"
            self.counts["malformed"] += 1
        else:
            self.counts["submitted"] += 1
            if uid in self._accepted:
                verdict = "duplicate"
                self.counts["duplicates"] += 1
            elif uid not in self._units:
                verdict, reason = "rejected", "no such unit in this backlog"
                self.counts["rejected"] += 1
            else:
                passed, reason, version = self._submit_check(uid)
                self._verified[uid] = (version, passed)
                extra = {"check": {"unit": uid, "passed": passed}}
                verdict = "accepted" if passed else "rejected"
                if passed:
                    self._accepted.add(uid)
                else:
                    self.counts["rejected"] += 1
        out = {
            "verdicts": [{"id": uid[:64], "verdict": verdict}],
            "accepted_now": int(verdict == "accepted"),
            "valid_count": len(self._accepted),
            "target": self.task.target,
        }
        if reason:
            out["reason"] = reason
        if extra:
            out[LEDGER_EXTRA] = extra
        return out

    # ----- file tools ---------------------------------------------------------------------
    def _tool_read_file(self, args: ReadArgs) -> dict:
        try:
            text = self._live_ws.read_text(args.path)
        except SandboxError as e:
            raise sandbox_error("read_file", e) from None
        lines = text.splitlines()
        chunk: list[str] = []
        size = 0
        for ln in lines[args.offset : args.offset + args.limit]:
            ln = ln if len(ln) <= MAX_LINE_CHARS else ln[:MAX_LINE_CHARS] + "..."
            size += len(json.dumps(ln, ensure_ascii=True))
            if chunk and size > MAX_READ_CHARS:  # keep the observation well inside its space
                break
            chunk.append(ln)
        return {
            "path": args.path,
            "offset": args.offset,
            "lines_returned": len(chunk),
            "total_lines": len(lines),
            "has_more": args.offset + len(chunk) < len(lines),
            "content": "\n".join(chunk),
        }

    def _tool_edit_file(self, args: EditArgs) -> dict:
        try:
            text = self._live_ws.read_text(args.path)
            n = text.count(args.old)
            if n != 1:
                raise ActionError(
                    "no_match" if n == 0 else "ambiguous",
                    f"edit_file: `old` occurs {n} times in {args.path}; it must "
                    "occur exactly once (copy it exactly, with more context if "
                    "needed)",
                    "edit_file",
                )
            size = self._live_ws.write_text(args.path, text.replace(args.old, args.new, 1))
        except SandboxError as e:
            raise sandbox_error("edit_file", e) from None
        self._touch(args.path)
        return {"path": args.path, "replaced": 1, "bytes": size}

    # ----- parsing and ledger -------------------------------------------------------------
    def _check_strings(self, tool: str, args: ToolArgs) -> None:
        super()._check_strings(tool, args)
        for name in self.STRING_ARGS:
            v = getattr(args, name, None)
            if isinstance(v, str) and _CONTROL.search(v):  # tabs and newlines are allowed
                raise ActionError(
                    "control_chars", f"{tool}: argument {name!r} contains control characters", tool
                )

    def _ledger_args(self, tool: str, args: ToolArgs) -> dict:
        out = args.model_dump()
        for k, v in out.items():
            if isinstance(v, str) and len(v) > _LEDGER_CLIP:
                out[k] = v[:_LEDGER_CLIP] + f"...[{len(v)} chars]"
        return out

    def _ledger_unclipped(self, tool: str, args: ToolArgs) -> dict | None:
        # The clipped arguments in full: replay (pushbench/runner/replay.py) re-executes the
        # call, so the record must hold what the file tools wrote (bounded by the tools' own
        # limits). Only present when something was clipped.
        full = {
            k: v
            for k, v in args.model_dump().items()
            if isinstance(v, str) and len(v) > _LEDGER_CLIP
        }
        return full or None
