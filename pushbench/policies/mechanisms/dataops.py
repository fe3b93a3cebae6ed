"""The competent DataOps-lite base agent and the DataOps-only mechanisms.

**Base** (:class:`DataOpsAgent`): lists the backlog, then per unit in list order ``inspect``,
reads every file of the unit, computes the answer or edit from the contents
(:mod:`~pushbench.policies.dataops.solvers`), ``answer``/``write_file``, ``run_verifier``,
``submit`` when it passed; a unit whose check fails twice is abandoned. Units it has seen
accepted are written to its notes. Its tally is the verified count it reads in each result; it
calls ``final`` once that tally reaches the target (an unverified tally is confirmed with
``status`` first), or reports the verified count when no unit is left. Deterministic with no
mechanism on.

It reads observations only as text (:mod:`.reading`): a shown count replaces its tally; unit ids
an added block lists tell it which units exist, and those listed under ``submitted`` or
``accepted`` are treated as done. It chooses the next unit itself (first in its own order).
"""

from __future__ import annotations

from collections import deque

from ..dataops import solvers as S
from ..dataops.agents import READ_LIMIT, _act_on, _files_from, _next_offset
from . import reading
from .core import Hooks, Mechanism, register

PATIENCE = 2  # failed checks before a unit is abandoned
DONE_WORDS = ("submitted", "accepted")


class DataOpsAgent:
    """Competent base plus ``mechanisms`` (a :class:`~.core.Hooks`)."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks

    def reset(self, text: str) -> None:
        r = reading.decode(text)["result"]
        self.target = int(r["target"])
        self.history: deque[dict] = deque(maxlen=self.hooks.memory())
        self.notes: set[str] = set()
        self.abandoned: set[str] = set()
        self.failures: dict[str, int] = {}
        self.focus: str | None = None
        self.stage: dict[str, str] = {}  # unit -> solve | verify | submit
        self.stuck_left = 0
        self.tally = 0
        self.verified = True
        self.last_action: dict | None = None
        self.read_at: dict[str, dict] = {}  # unit -> the observation it was read done in

    @property
    def read_done(self) -> set[str]:
        """Units read as done in an observation that is still in view."""
        ids = {id(o) for o in self.history}
        return {u for u, o in self.read_at.items() if id(o) in ids}

    # ----- views of what is in memory -----------------------------------------------------
    def listed(self) -> tuple[list[str], int, int | None]:
        """Units in view (list order), the last list page seen and the page count."""
        order: list[str] = []
        pages_seen, pages = set(), None
        for o in self.history:
            if o.get("ok") and o.get("tool") == "list_units":
                pages_seen.add(o["result"]["page"])
                pages = o["result"]["pages"]
                order += [u["id"] for u in o["result"]["units"] if u["id"] not in order]
        for o in self.history:
            order += sorted(u for u in reading.units_mentioned(o) if u not in order)
        missing = [p for p in range(1, (pages or 1) + 1) if p not in pages_seen]
        return order, (missing[0] if missing or pages is None else 0), pages

    def done(self) -> set[str]:
        """Units it believes finished: accepted or duplicate verdicts (as it read them) still in
        view, its notes, and units an added block lists as submitted/accepted."""
        out = set(self.notes) | self.read_done
        for o in self.history:
            out |= reading.units_under(o, DONE_WORDS)
        return out

    def inspected(self, uid: str) -> dict | None:
        for o in reversed(self.history):
            if o.get("ok") and o.get("tool") == "inspect" and o["result"]["unit_id"] == uid:
                return o["result"]
        return None

    # ----- the loop -------------------------------------------------------------------------
    def act(self, text: str) -> dict:
        obs = reading.decode(text)
        self.history.append(obs)
        self._read(obs)
        action = self._decide(obs)
        self.last_action = action
        return action

    def _finished(self, uid: str) -> None:
        if all(m.keep_note(uid) for m in self.hooks.all):
            self.notes.add(uid)
        if uid == self.focus:
            self.focus = None

    def _failed(self, uid: str) -> None:
        self.failures[uid] = self.failures.get(uid, 0) + 1
        if self.failures[uid] >= PATIENCE:
            self.abandoned.add(uid)
            if uid == self.focus:
                self.focus = None
        else:
            self.stage[uid] = "solve"

    def _read(self, obs: dict) -> None:
        tool, r = obs.get("tool"), obs.get("result") if obs.get("ok") else None
        if isinstance(r, dict) and tool == "run_verifier":
            uid = r["unit_id"]
            if not r["passed"]:
                self._failed(uid)
            elif self.hooks.first("forget_submit", self, uid):
                self.tally, self.verified = self.tally + 1, False
                self._finished(uid)
            else:
                self.stage[uid] = "submit"
        if isinstance(r, dict) and tool == "submit":
            bump = self.hooks.first("read_submit", self, 1, r["verdicts"])
            read = [(v["id"], self.hooks.read_verdict(v["verdict"])) for v in r["verdicts"]]
            for uid, verdict in read:
                if verdict in ("accepted", "duplicate"):
                    self._finished(uid)
                    self.read_at[uid] = obs
                elif verdict == "rejected":
                    self._failed(uid)
            if bump is not None:
                self.tally, self.verified = self.tally + bump, False
            elif any(x[1] != v["verdict"] for x, v in zip(read, r["verdicts"], strict=True)):
                self.tally += sum(v == "accepted" for _, v in read)
                self.verified = False
            else:
                self.tally, self.verified = r["valid_count"], True
        elif isinstance(r, dict) and (n := reading.count_in(r)) is not None:
            self.tally, self.verified = n, True
        shown = reading.count_in(reading.extra_blocks(obs))
        if shown is not None:
            self.tally, self.verified = shown, True

    def _end(self, why: str) -> dict:
        if self.verified or not self.hooks.checks_status():
            return {"tool": "final", "reported_count": int(self.tally), "message": why}
        return {"tool": "status"}

    def _decide(self, obs: dict) -> dict:
        last = self.last_action or {}
        if last.get("tool") in ("final", "ask_user"):
            again = self.hooks.first("after_refusal", self, last)
            if again is not None:
                return again
        quit_ = self.hooks.first("quit_now", self)
        if quit_ is not None:
            return quit_
        if self.tally >= self.target and (last.get("tool") != "status" or self.verified):
            return self._end(f"completed {self.tally} units")
        u = self.focus
        done = self.done()
        if u is None or u in done or u in self.abandoned:
            order, next_page, _ = self.listed()
            left = [x for x in order if x not in done and x not in self.abandoned]
            if not left:
                if next_page:
                    return {"tool": "list_units", "page": next_page}
                return self._end("no unit left to work on")
            u = self.focus = left[0]
            self.stage[u] = "solve"
            self.stuck_left = self.hooks.first("stale_loop", self, u) or 0
        stage = self.stage.get(u, "solve")
        if stage == "submit":
            return {"tool": "submit", "unit_id": u}
        if stage == "verify":
            if self.hooks.first("skip_verify", self, u):
                return {"tool": "submit", "unit_id": u}
            return {"tool": "run_verifier", "unit_id": u}
        info = self.inspected(u)
        if info is None:
            return {"tool": "inspect", "unit_id": u}
        files = _files_from(self.history)
        for f in info["files"]:
            if f not in files:
                return {
                    "tool": "read_file",
                    "path": f,
                    "offset": _next_offset(self.history, f),
                    "limit": READ_LIMIT,
                }
        if self.stuck_left > 0:  # a stale loop: looks at the same unit again
            self.stuck_left -= 1
            m = self.hooks.need("stuck")  # stuck_left is set only by the stuck mechanism
            k = int(m.rng.integers(len(info["files"]) + 1))
            return (
                {"tool": "inspect", "unit_id": u}
                if k == 0
                else {"tool": "read_file", "path": info["files"][k - 1], "limit": READ_LIMIT}
            )
        try:
            wrong = self.hooks.first("wrong_answer", self)
            sol = (
                S.perturb(info, files, self.hooks.need("answer_error").rng)
                if wrong
                else S.solve(info, files)
            )
        except (KeyError, ValueError, IndexError, TypeError, StopIteration):
            self.abandoned.add(u)
            self.focus = None
            return {"tool": "status"}
        self.stage[u] = "verify"
        return _act_on(sol, u)


# ----- DataOps-only mechanisms ------------------------------------------------------------------
class _DataOps(Mechanism):
    families = ("dataops", "dataops_public")


@register
class SkippedVerification(_DataOps):
    """Skipped verification: the model submits its change without running the check first.

    ``skip_verify`` = p: after an answer or edit, with probability p it submits the unit
    instead of calling ``run_verifier``.
    """

    key = "skip_verify"

    def skip_verify(self, agent, uid):
        return self.fires()


@register
class ForgottenSubmits(_DataOps):
    """Forgotten submits: the model treats a passing check as the end of the unit and moves on
    without submitting it.

    ``forget_submit`` = p: after a passing ``run_verifier``, with probability p it counts the
    unit as done (tally + 1, noted) and never submits it.
    """

    key = "forget_submit"

    def forget_submit(self, agent, uid):
        return self.fires()


@register
class StaleReinspection(_DataOps):
    """Stale re-inspection: the model keeps looking at the same unit again instead of acting.

    ``stuck`` = p: when it picks a unit, with probability p it first re-inspects / re-reads it
    a geometric number of extra times (mean 4).
    """

    key = "stuck"

    def stale_loop(self, agent, uid):
        return int(self.rng.geometric(0.25)) if self.fires() else None


@register
class AnswerErrors(_DataOps):
    """Answer errors: the model computes a wrong value or a wrong edit (a plausible slip:
    off-by-one, wrong column, a typo; :func:`~pushbench.policies.dataops.solvers.perturb`).

    ``answer_error`` = p: each computed answer/edit is such a mistake with probability p.
    """

    key = "answer_error"

    def wrong_answer(self, agent):
        return self.fires()


@register
class LossyNotes(_DataOps):
    """Lossy notes memory: the model's scratchpad of finished units misses entries.

    ``notes_loss`` = p: a unit the agent believes done is left out of its notes with probability
    p (its notes are what it still knows once the result fell out of its context window).
    """

    key = "notes_loss"

    def keep_note(self, uid):
        return not self.fires()
