"""Offline SWE-lite agents: the oracle that proves solvability, an honest triage agent, random.

* :class:`SWELiteOracle` (the agent of policy ``diligent-oracle``, :mod:`..offline`) is
  **not an agent row**: it
  reads the locally built unit set (:mod:`pushbench.families.swelite.units`), so it knows every
  unit's reference fix. It exists only to prove that the units are solvable within the budget
  (and to exercise controllers end to end). Its ``describe()`` says ``oracle: True`` and
  ``simulated: True``, so reports never mistake it for an agent. Per unit it calls ``inspect``
  (matching the issue text to a unit of the set), ``read_file`` (the start of the file, as a
  real agent would look before editing), ``edit_file`` (mutated function -> original),
  ``run_verifier`` and ``submit``; it ends with ``final`` once the verifier's count reaches the
  target (``solve_all=True``: once every unit was tried). It never reads the workspace or the
  verifier directly. On other families it simply behaves as ``diligent``.
* :class:`SWELiteTriage` (what ``diligent`` delegates to here) has no repair capability and no
  oracle: it lists and inspects the units, runs each verifier once, and ends honestly with
  ``final`` reporting the verified count (0 unless a unit already passes). A floor, not a solver.
* :class:`SWELiteRandom` (``random``): uniformly random calls over the SWE-lite tools.

There is no simulated SWE-lite agent; ``simulated-*`` policies raise ``UnsupportedFamily``.
"""

from __future__ import annotations

import json

import numpy as np

from ..base import FamilyAgent


def _decode(observation) -> dict:
    return observation if isinstance(observation, dict) else json.loads(observation)


def for_family(first_observation) -> bool:
    return (_decode(first_observation).get("result") or {}).get("family") == "swelite"


class _Lister(FamilyAgent):
    """Shared book of listed units (all pages) for the scripted agents."""

    def _reset_list(self, first_observation) -> dict:
        r = _decode(first_observation)["result"]
        self.target = int(r["target"])
        self.snapshot = r.get("snapshot")
        self.order: list[str] = []
        self.pages: int | None = None
        self.pages_seen: set[int] = set()
        self.accepted: set[str] = set()
        self.dropped: set[str] = set()
        return r

    def _read_list(self, obs: dict) -> None:
        r = obs.get("result") or {}
        if obs.get("ok") and obs.get("tool") == "list_units":
            self.pages = r["pages"]
            self.pages_seen.add(r["page"])
            self.order += [u["id"] for u in r["units"] if u["id"] not in self.order]
        for v in r.get("verdicts") or ():
            if v["verdict"] in ("accepted", "duplicate"):
                self.accepted.add(v["id"])

    def _next_unit_or_list(self):
        u = next((x for x in self.order if x not in self.accepted and x not in self.dropped), None)
        if u is not None:
            return u
        missing = [p for p in range(1, (self.pages or 1) + 1) if p not in self.pages_seen]
        if self.pages is None or missing:
            return {"tool": "list_units", "page": missing[0] if missing else 1}
        return {
            "tool": "final",
            "reported_count": len(self.accepted),
            "message": "no unit left to work on",
        }


class SWELiteOracle(_Lister):
    """Knows the reference fixes (see the module docstring); used only to prove solvability."""

    name = "swelite-oracle"

    def __init__(
        self,
        rng: np.random.Generator | None = None,
        recipe: str | None = None,
        solve_all: bool = False,
    ) -> None:
        super().__init__(rng)  # recipe and solve_all are validated by diligent-oracle's Params
        self.recipe = recipe
        self.solve_all = solve_all  # work through the whole backlog (solvability checks)

    def reset(self, first_observation) -> None:
        from ...families.swelite import units as U

        self._reset_list(first_observation)
        data = U.load(self.snapshot, self.recipe)
        self.by_issue = {u["issue"]: u for u in data["kept"]}
        self.known: dict[str, dict] = {}  # env unit id -> unit of the set
        self.stage: dict[str, str] = {}
        self.focus: str | None = None

    def act(self, observation) -> dict:
        obs = _decode(observation)
        self._read_list(obs)
        tool, r = obs.get("tool"), obs.get("result") or {}
        if obs.get("ok"):
            if tool == "inspect":
                unit = self.by_issue.get(r.get("issue"))
                if unit is None:
                    self.dropped.add(r["unit_id"])
                else:
                    self.known[r["unit_id"]] = unit
                    self.stage[r["unit_id"]] = "inspected"
            elif tool == "read_file" and self.focus:
                self.stage[self.focus] = "read"
            elif tool == "edit_file" and self.focus:
                self.stage[self.focus] = "edited"
            elif tool == "run_verifier":
                self.stage[r["unit_id"]] = "passed" if r["passed"] else "failed"
            for v in r.get("verdicts") or ():
                if v["verdict"] == "rejected":
                    self.dropped.add(v["id"])
        elif self.focus and tool in ("edit_file", "read_file", "inspect"):
            self.dropped.add(self.focus)
        return self._next()

    def _next(self) -> dict:
        if len(self.accepted) >= self.target and not self.solve_all:
            return {
                "tool": "final",
                "reported_count": len(self.accepted),
                "message": f"the verifier accepted {len(self.accepted)} units",
            }
        u = self.focus
        if u is None or u in self.accepted or u in self.dropped:
            nxt = self._next_unit_or_list()
            if isinstance(nxt, dict):
                return nxt
            u = self.focus = nxt
        st = self.stage.get(u)
        if st is None:
            return {"tool": "inspect", "unit_id": u}
        unit = self.known[u]
        if st == "inspected":
            return {
                "tool": "read_file",
                "path": unit["file"],
                "offset": unit["span"][0],
                "limit": min(400, max(1, unit["span"][1] - unit["span"][0])),
            }
        if st == "read":
            return {
                "tool": "edit_file",
                "path": unit["file"],
                "old": unit["mutated_func"],
                "new": unit["original_func"],
            }
        if st == "edited":
            return {"tool": "run_verifier", "unit_id": u}
        if st == "passed":
            return {"tool": "submit", "unit_id": u}
        self.dropped.add(u)
        return self._next()


class SWELiteTriage(_Lister):
    """Honest scripted floor without repairs (see the module docstring)."""

    name = "swelite-triage"

    def reset(self, first_observation) -> None:
        self._reset_list(first_observation)
        self.done: dict[str, set] = {}

    def act(self, observation) -> dict:
        obs = _decode(observation)
        self._read_list(obs)
        r = obs.get("result") or {}
        if obs.get("ok") and obs.get("tool") in ("inspect", "run_verifier"):
            self.done.setdefault(r["unit_id"], set()).add(obs["tool"])
            if obs["tool"] == "run_verifier":
                if r["passed"]:
                    return {"tool": "submit", "unit_id": r["unit_id"]}
                self.dropped.add(r["unit_id"])
        if len(self.accepted) >= self.target:
            return {
                "tool": "final",
                "reported_count": len(self.accepted),
                "message": f"the verifier accepted {len(self.accepted)} units",
            }
        nxt = self._next_unit_or_list()
        if isinstance(nxt, dict):
            return nxt
        if "inspect" not in self.done.get(nxt, ()):
            return {"tool": "inspect", "unit_id": nxt}
        return {"tool": "run_verifier", "unit_id": nxt}


class SWELiteRandom(FamilyAgent):
    """Uniformly random calls over the SWE-lite tools and the ids it has seen (a floor)."""

    name = "swelite-random"

    def reset(self, first_observation) -> None:
        r = _decode(first_observation)["result"]
        self.target = int(r["target"])
        self.units = ["u01"]
        self.paths = [p + "/__init__.py" for p in r.get("editable", ())] or ["README.md"]

    def act(self, observation) -> dict:
        obs = _decode(observation)
        r = obs.get("result") or {}
        if obs.get("tool") == "list_units":
            self.units += [u["id"] for u in r.get("units", ()) if u["id"] not in self.units]
        uid = self.units[int(self.rng.integers(len(self.units)))]
        k = int(self.rng.integers(8))
        if k == 0:
            return {"tool": "list_units", "page": int(self.rng.integers(1, 3))}
        if k == 1:
            return {
                "tool": "read_file",
                "path": self.paths[int(self.rng.integers(len(self.paths)))],
            }
        if k == 2:
            return {"tool": "search_code", "pattern": "def "}
        if k == 7 and self.rng.random() < 0.1:
            return {"tool": "final", "reported_count": int(self.rng.integers(self.target + 1))}
        return (
            {
                "tool": ["inspect", "run_verifier", "submit", "status", "inspect"][k % 5],
                "unit_id": uid,
            }
            if k % 5 != 3
            else {"tool": "status"}
        )


def diligent(rng, **params) -> SWELiteTriage:
    return SWELiteTriage(rng=rng, **params)


def random(rng, **params) -> SWELiteRandom:
    return SWELiteRandom(rng=rng, **params)
