"""Offline DataOps-lite agents that the family-generic policies delegate to.

API (what :mod:`pushbench.policies.offline` wires in; every agent has ``reset(first_observation)`` and
``act(observation) -> dict``, observations being the env's JSON text or a decoded dict):

* :func:`for_family(first_observation) -> bool`: the reset observation is a DataOps one.
* :class:`DataOpsDiligent(rng=None)`: competent scripted agent (below).
* :class:`DataOpsSimulated(rng=None, preset="mid", **overrides)`: LLM-like simulated agent.
* :class:`DataOpsRandom(rng=None)`: uniform random tool calls over what it has seen.
* factories with the signatures of :data:`pushbench.policies.offline.AGENTS`: :func:`diligent(rng, **params)`,
  :func:`simulated(rng, preset, **params)` (``preset``: ``"weak"``/``"mid"``/``"strong"``, or
  the RepoScan preset dict, recognised by its values, or a dict with a ``"preset"`` key) and
  :func:`random(rng, **params)`. All randomness comes from the one ``numpy`` Generator passed in.

**Diligent** lists units page by page, then for each unit in list order: ``inspect``, reads every
file (all pages of it), computes the answer or the edit from the contents
(:mod:`.dataops_solvers`), ``answer``/``write_file``, ``run_verifier``, ``submit`` if it passed
(drops the unit if it failed). Its books come from verdicts only; it calls ``final`` with the
verifier's count once that count reaches the target (or when no unit is left).

**Simulated** (numbers labelled simulated): failures come from mechanisms, not rules.
``window`` W: only the last W observations are visible; the unit list, inspect results, file
contents and accepted verdicts are re-derived from them, so an early unit list falls out of view
and units get redone (duplicate submits), except those written to a lossy ``notes`` scratchpad
(each accepted unit noted with probability ``notes``). ``accuracy``: each computed answer/edit
is right with this probability, else a plausible mistake (:func:`~.dataops_solvers.perturb`).
``skip_verify``: submits without running the verifier. ``forget_submit``: after a passing verifier
run it counts the unit as done and moves on without submitting. ``drift``: a rejected or duplicate
verdict is misread as progress. ``stuck``: chance per unit of a stale loop re-inspecting /
re-reading it (geometric length, mean 4). ``patience``: verifier failures before abandoning a
unit. ``give_up``: per-step chance to ``ask_user``. ``check_status``: chance to call ``status``
before ``final``. It stops with ``final(belief)`` once its belief reaches the target; a
``status`` result or a controller ``progress`` block resets the belief to the verified count,
and the block's pending list replaces its own (window-limited) choice of the next unit.

Size: about 440 lines, three agents sharing the observation readers at the top (the simulated
agents are to be rebuilt around shared mechanisms, which will split this module).
"""

from __future__ import annotations

import json
from collections import deque

from typing import Annotated

import numpy as np
from pydantic import Field, ValidationError

from . import solvers as S
from ..base import FamilyAgent, NoParams, PolicyParamsError, describe_validation

PRESETS: dict[str, dict[str, float]] = {
    "weak": dict(window=8, accuracy=0.7, skip_verify=0.4, forget_submit=0.3, drift=0.5,
                 stuck=0.35, patience=1, give_up=0.01, notes=0.2, check_status=0.0),
    "mid": dict(window=12, accuracy=0.8, skip_verify=0.25, forget_submit=0.2, drift=0.35,
                stuck=0.25, patience=2, give_up=0.006, notes=0.45, check_status=0.2),
    "strong": dict(window=20, accuracy=0.9, skip_verify=0.1, forget_submit=0.1, drift=0.2,
                   stuck=0.15, patience=3, give_up=0.003, notes=0.75, check_status=0.5),
}
READ_LIMIT = 400
_Rate = Annotated[float, Field(ge=0.0, le=1.0)]


class SimulatedParams(NoParams):
    """Overrides of the DataOps simulated presets (unset keys keep the preset's value)."""

    window: int = Field(12, ge=1, le=10_000, description="observations in view")
    accuracy: _Rate = 0.8
    skip_verify: _Rate = 0.25
    forget_submit: _Rate = 0.2
    drift: _Rate = 0.35
    stuck: _Rate = 0.25
    patience: int = Field(2, ge=0, le=1000, description="verifier failures before abandoning")
    give_up: _Rate = 0.006
    notes: _Rate = 0.45
    check_status: _Rate = 0.2


def _decode(observation) -> dict:
    return observation if isinstance(observation, dict) else json.loads(observation)


def for_family(first_observation) -> bool:
    """True when ``first_observation`` (reset) belongs to the DataOps-lite family."""
    return (_decode(first_observation).get("result") or {}).get("family") == "dataops"


def _owner(path: str) -> str:
    return path.lstrip("./").split("/", 1)[0]


def _files_from(observations) -> dict[str, str]:
    """Complete file texts assembled from ``read_file`` results (later writes invalidate)."""
    chunks: dict[str, dict[int, list[str]]] = {}
    total: dict[str, int] = {}
    for obs in observations:
        if not obs.get("ok"):
            continue
        r = obs.get("result") or {}
        if obs.get("tool") in ("write_file", "edit_file"):
            chunks.pop(r.get("path"), None)
        elif obs.get("tool") == "read_file":
            lines = r["content"].split("\n") if r["lines_returned"] else []
            chunks.setdefault(r["path"], {})[r["offset"]] = lines
            total[r["path"]] = r["total_lines"]
    out = {}
    for path, parts in chunks.items():
        got: list[str] = []
        for off in sorted(parts):
            if off == len(got):
                got += parts[off]
        if len(got) >= total[path]:
            out[path] = "\n".join(got[: total[path]]) + "\n"
    return out


def _next_offset(observations, path: str) -> int:
    """First line not yet read contiguously from the start (a later write restarts at 0)."""
    got = 0
    for obs in observations:
        r = obs.get("result") or {}
        if not obs.get("ok") or r.get("path") != path:
            continue
        if obs.get("tool") in ("write_file", "edit_file"):
            got = 0
        elif obs.get("tool") == "read_file" and r["offset"] <= got:
            got = max(got, r["offset"] + r["lines_returned"])
    return got


def _act_on(solution: dict, uid: str) -> dict:
    if "answer" in solution:
        return {"tool": "answer", "unit_id": uid, "value": solution["answer"]}
    path, content = solution["write"]
    return {"tool": "write_file", "path": path, "content": content}


class DataOpsDiligent(FamilyAgent):
    """Competent scripted agent with perfect books (see the module docstring)."""

    name = "dataops-diligent"

    def reset(self, first_observation) -> None:
        r = _decode(first_observation)["result"]
        self.target = int(r["target"])
        self.order: list[str] = []
        self.pages: int | None = None
        self.pages_seen: set[int] = set()
        self.seen: list[dict] = []  # every observation (perfect memory)
        self.info: dict[str, dict] = {}
        self.stage: dict[str, str] = {}
        self.accepted: set[str] = set()
        self.dropped: set[str] = set()
        self.focus: str | None = None

    def act(self, observation) -> dict:
        obs = _decode(observation)
        self._read(obs)
        return self._next()

    def _read(self, obs: dict) -> None:
        self.seen.append(obs)
        tool, r = obs.get("tool"), obs.get("result") or {}
        if not obs.get("ok"):
            if self.focus and tool in ("answer", "write_file", "read_file", "inspect"):
                self.dropped.add(self.focus)  # something is off with this unit: move on
                self.focus = None
            return
        if tool == "list_units":
            self.pages = r["pages"]
            self.pages_seen.add(r["page"])
            self.order += [u["id"] for u in r["units"] if u["id"] not in self.order]
        elif tool == "inspect":
            self.info[r["unit_id"]] = r
        elif tool == "answer":
            self.stage[r["unit_id"]] = "solved"
        elif tool in ("write_file", "edit_file"):
            self.stage[_owner(r["path"])] = "solved"
        elif tool == "run_verifier":
            self.stage[r["unit_id"]] = "passed" if r["passed"] else "failed"
        for v in r.get("verdicts") or ():
            if v["verdict"] in ("accepted", "duplicate"):
                self.accepted.add(v["id"])
            elif v["verdict"] == "rejected":
                self.stage[v["id"]] = "failed"

    def _next(self) -> dict:
        if len(self.accepted) >= self.target:
            return {"tool": "final", "reported_count": len(self.accepted),
                    "message": f"the verifier accepted {len(self.accepted)} units"}
        u = self.focus
        if u is None or u in self.accepted or u in self.dropped:
            u = next((x for x in self.order if x not in self.accepted and x not in self.dropped),
                     None)
            if u is None:
                missing = [p for p in range(1, (self.pages or 1) + 1) if p not in self.pages_seen]
                if self.pages is None or missing:
                    return {"tool": "list_units", "page": missing[0] if missing else 1}
                return {"tool": "final", "reported_count": len(self.accepted),
                        "message": "no unit left to work on"}
            self.focus = u
        if u not in self.info:
            return {"tool": "inspect", "unit_id": u}
        st = self.stage.get(u)
        if st is None:
            files = _files_from(self.seen)
            for f in self.info[u]["files"]:
                if f not in files:
                    return {"tool": "read_file", "path": f, "limit": READ_LIMIT,
                            "offset": _next_offset(self.seen, f)}
            try:
                return _act_on(S.solve(self.info[u], files), u)
            except (KeyError, ValueError, IndexError, TypeError, StopIteration):
                self.dropped.add(u)
                return self._next()
        if st == "solved":
            return {"tool": "run_verifier", "unit_id": u}
        if st == "passed":
            return {"tool": "submit", "unit_id": u}
        self.dropped.add(u)  # failed: a deterministic solver would only repeat itself
        return self._next()


class DataOpsSimulated:
    """LLM-like simulated agent (mechanisms in the module docstring)."""

    simulated = True

    Params = SimulatedParams

    def __init__(self, rng: np.random.Generator | None = None, preset: str = "mid",
                 **overrides) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()
        self.preset = preset
        try:  # every override must be a DataOps parameter: the record lists them as in effect
            given = SimulatedParams.model_validate(overrides).model_dump(exclude_unset=True)
        except ValidationError as e:
            raise PolicyParamsError(describe_validation(f"simulated-{preset}", e,
                                                        "on dataops tasks")) from None
        self.params = {**PRESETS[preset], **given}
        for k, v in self.params.items():
            setattr(self, k, v)
        self.window = int(self.window)

    def reset(self, first_observation) -> None:
        r = _decode(first_observation)["result"]
        self.target = int(r["target"])
        self.memory: deque[dict] = deque(maxlen=self.window)
        self.belief = 0
        self.noted: set[str] = set()       # lossy scratchpad of units it believes done
        self.abandoned: set[str] = set()
        self.focus: str | None = None
        self.stage: dict[str, str] = {}
        self.attempts: dict[str, int] = {}
        self.stuck_left = 0
        self.to_submit: str | None = None
        self.last_tool: str | None = None

    # ----- reading observations ---------------------------------------------------------
    def act(self, observation) -> dict:
        obs = _decode(observation)
        self.memory.append(obs)
        self._absorb(obs)
        action = self._decide(obs)
        self.last_tool = action["tool"]
        return action

    def _done(self, uid: str) -> None:
        if self.rng.random() < self.notes:
            self.noted.add(uid)
        if uid == self.focus:
            self.focus = None

    def _failed(self, uid: str) -> None:
        self.attempts[uid] = self.attempts.get(uid, 0) + 1
        if self.attempts[uid] >= self.patience:
            self.abandoned.add(uid)
            self.focus = None if uid == self.focus else self.focus
        else:
            self.stage[uid] = "solve"

    def _absorb(self, obs: dict) -> None:
        tool, r = obs.get("tool"), obs.get("result") or {}
        if obs.get("ok") and tool == "inspect" and r["unit_id"] != self.focus:
            self.focus, self.stuck_left = r["unit_id"], 0  # follows what it now sees
        if obs.get("ok") and tool == "run_verifier":
            uid = r["unit_id"]
            if r["passed"]:
                if self.rng.random() < self.forget_submit:
                    self.belief += 1  # counts it as done without submitting
                    self._done(uid)
                else:
                    self.to_submit = uid
            else:
                self._failed(uid)
        for v in r.get("verdicts") or ():
            uid = v["id"]
            if v["verdict"] == "accepted":
                self.belief += 1
                self._done(uid)
            elif self.rng.random() < self.drift:  # misreads a rejection/duplicate as progress
                self.belief += 1
                self._done(uid)
            elif v["verdict"] == "duplicate":
                self._done(uid)
            elif v["verdict"] == "rejected":
                self._failed(uid)
            if self.to_submit == uid:
                self.to_submit = None
        if obs.get("ok") and tool == "status":
            self.belief = r["valid_count"]
        if obs.get("progress"):
            self.belief = obs["progress"].get("valid_count", self.belief)

    # ----- views of the window ----------------------------------------------------------
    def _listed(self):
        pages: dict[int, list[str]] = {}
        more = True
        for obs in self.memory:
            if obs.get("ok") and obs.get("tool") == "list_units":
                pages[obs["result"]["page"]] = [u["id"] for u in obs["result"]["units"]]
                more = obs["result"]["has_more"]
        return [u for p in sorted(pages) for u in pages[p]], (max(pages) if pages else 0), more

    def _inspected(self, uid: str) -> dict | None:
        for obs in reversed(self.memory):
            if obs.get("ok") and obs.get("tool") == "inspect" and obs["result"]["unit_id"] == uid:
                return obs["result"]
        return None

    def _choose(self, obs: dict):
        book = (obs.get("progress") or {}).get("units")
        if book:
            pending = [u for u in book.get("pending", []) if u not in self.abandoned]
            if pending:
                return pending[0]
            if book.get("next_page"):
                return {"tool": "list_units", "page": book["next_page"]}
        listed, last_page, more = self._listed()
        done = self.noted | self.abandoned | {
            v["id"] for o in self.memory for v in (o.get("result") or {}).get("verdicts") or ()
            if v["verdict"] in ("accepted", "duplicate")}
        cands = [u for u in listed if u not in done]
        if not listed:
            return {"tool": "list_units", "page": 1}
        if not cands:
            if more:
                return {"tool": "list_units", "page": last_page + 1}
            return {"tool": "final", "reported_count": int(self.belief),
                    "message": "every unit I know of is done"}
        return cands[0] if self.rng.random() > 0.15 else cands[int(self.rng.integers(len(cands)))]

    # ----- deciding ---------------------------------------------------------------------
    def _decide(self, obs: dict) -> dict:
        if self.rng.random() < self.give_up:
            return {"tool": "ask_user", "message": "This is taking long; should I continue?"}
        if self.belief >= self.target:
            if self.last_tool != "status" and self.rng.random() < self.check_status:
                return {"tool": "status"}
            return {"tool": "final", "reported_count": int(self.belief),
                    "message": f"completed {self.belief} units"}
        if self.to_submit:
            return {"tool": "submit", "unit_id": self.to_submit}
        u = self.focus
        if u is None or u in self.abandoned:
            choice = self._choose(obs)
            if isinstance(choice, dict):
                return choice
            u = self.focus = choice
            self.stage[u] = "solve"
            self.stuck_left = int(self.rng.geometric(0.25)) if self.rng.random() < self.stuck else 0
        if self.stage.get(u, "solve") != "solve":
            if self.rng.random() < self.skip_verify:
                return {"tool": "submit", "unit_id": u}
            return {"tool": "run_verifier", "unit_id": u}
        info = self._inspected(u)
        if info is None:
            return {"tool": "inspect", "unit_id": u}
        files = _files_from(self.memory)
        for f in info["files"]:
            if f not in files:
                return {"tool": "read_file", "path": f, "offset": _next_offset(self.memory, f),
                        "limit": READ_LIMIT}
        if self.stuck_left > 0:  # a stale loop: looks at the same unit again
            self.stuck_left -= 1
            k = int(self.rng.integers(len(info["files"]) + 1))
            return ({"tool": "inspect", "unit_id": u} if k == 0 else
                    {"tool": "read_file", "path": info["files"][k - 1], "limit": READ_LIMIT})
        try:
            sol = (S.solve(info, files) if self.rng.random() < self.accuracy
                   else S.perturb(info, files, self.rng))
        except (KeyError, ValueError, IndexError, TypeError, StopIteration):
            self.abandoned.add(u)
            self.focus = None
            return {"tool": "status"}
        self.stage[u] = "verify"
        return _act_on(sol, u)


class DataOpsRandom(FamilyAgent):
    """Uniformly random tool calls over the units and files it has seen (a floor baseline)."""

    name = "dataops-random"

    def reset(self, first_observation) -> None:
        self.target = int(_decode(first_observation)["result"]["target"])
        self.units, self.files = ["u01"], []

    def act(self, observation) -> dict:
        obs = _decode(observation)
        r = obs.get("result") or {}
        if obs.get("tool") == "list_units":  # status also has "units": a dict of counts
            self.units += [u["id"] for u in r.get("units", ()) if u["id"] not in self.units]
        self.files += [f for f in r.get("files", ()) if f not in self.files]
        uid = self.units[int(self.rng.integers(len(self.units)))]
        k = int(self.rng.integers(8))
        if k == 0:
            return {"tool": "list_units", "page": int(self.rng.integers(1, 4))}
        if k == 1 and self.files:
            return {"tool": "read_file",
                    "path": self.files[int(self.rng.integers(len(self.files)))]}
        if k == 2:
            return {"tool": "answer", "unit_id": uid, "value": int(self.rng.integers(0, 10))}
        if k == 7 and self.rng.random() < 0.1:
            return {"tool": "final", "reported_count": int(self.rng.integers(self.target + 1))}
        return {"tool": ["inspect", "run_verifier", "submit", "submit", "inspect"][k % 5],
                "unit_id": uid}


def diligent(rng, **params) -> DataOpsDiligent:
    return DataOpsDiligent(rng=rng, **params)


def simulated(rng, preset="mid", **params) -> DataOpsSimulated:
    if preset not in PRESETS:
        raise KeyError(f"unknown DataOps simulated preset {preset!r}; known: {', '.join(PRESETS)}")
    return DataOpsSimulated(rng=rng, preset=preset, **params)


def random(rng, **params) -> DataOpsRandom:
    return DataOpsRandom(rng=rng, **params)
