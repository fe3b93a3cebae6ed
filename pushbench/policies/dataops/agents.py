"""Offline DataOps-lite agents that the family-generic policies delegate to.

API (what :mod:`pushbench.policies.offline` wires in; every agent has ``reset(first_observation)``
and
``act(observation) -> dict``, observations being the env's JSON text or a decoded dict):

* :func:`for_family(first_observation) -> bool`: the reset observation is a DataOps one.
* :class:`DataOpsDiligent(rng=None)`: competent scripted agent (below).
* :class:`DataOpsRandom(rng=None)`: uniform random tool calls over what it has seen.
* factories with the signatures of :data:`pushbench.policies.offline.AGENTS`:
  :func:`diligent(rng, **params)` and :func:`random(rng, **params)`. All randomness comes from
  the one ``numpy`` Generator passed in.

The simulated DataOps agents live in :mod:`pushbench.policies.mechanisms.dataops`; they reuse
the observation readers here (``READ_LIMIT``, ``_files_from``, ``_next_offset``, ``_act_on``).

**Diligent** lists units page by page, then for each unit in list order: ``inspect``, reads every
file (all pages of it), computes the answer or the edit from the contents
(:mod:`.dataops_solvers`), ``answer``/``write_file``, ``run_verifier``, ``submit`` if it passed
(drops the unit if it failed). Its books come from verdicts only; it calls ``final`` with the
verifier's count once that count reaches the target (or when no unit is left).
"""

from __future__ import annotations

import json

from ..base import FamilyAgent
from . import solvers as S

READ_LIMIT = 400


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
            chunks.pop(r.get("path", ""), None)
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
            return {
                "tool": "final",
                "reported_count": len(self.accepted),
                "message": f"the verifier accepted {len(self.accepted)} units",
            }
        u = self.focus
        if u is None or u in self.accepted or u in self.dropped:
            u = next(
                (x for x in self.order if x not in self.accepted and x not in self.dropped), None
            )
            if u is None:
                missing = [p for p in range(1, (self.pages or 1) + 1) if p not in self.pages_seen]
                if self.pages is None or missing:
                    return {"tool": "list_units", "page": missing[0] if missing else 1}
                return {
                    "tool": "final",
                    "reported_count": len(self.accepted),
                    "message": "no unit left to work on",
                }
            self.focus = u
        if u not in self.info:
            return {"tool": "inspect", "unit_id": u}
        st = self.stage.get(u)
        if st is None:
            files = _files_from(self.seen)
            for f in self.info[u]["files"]:
                if f not in files:
                    return {
                        "tool": "read_file",
                        "path": f,
                        "limit": READ_LIMIT,
                        "offset": _next_offset(self.seen, f),
                    }
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


class DataOpsRandom(FamilyAgent):
    """Uniformly random tool calls over the units and files it has seen (a floor baseline)."""

    name = "dataops-random"

    def reset(self, first_observation) -> None:
        self.target = int(_decode(first_observation)["result"]["target"])
        self.units: list[str] = ["u01"]
        self.files: list[str] = []

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
            return {
                "tool": "read_file",
                "path": self.files[int(self.rng.integers(len(self.files)))],
            }
        if k == 2:
            return {"tool": "answer", "unit_id": uid, "value": int(self.rng.integers(0, 10))}
        if k == 7 and self.rng.random() < 0.1:
            return {"tool": "final", "reported_count": int(self.rng.integers(self.target + 1))}
        return {
            "tool": ["inspect", "run_verifier", "submit", "submit", "inspect"][k % 5],
            "unit_id": uid,
        }


def diligent(rng, **params) -> DataOpsDiligent:
    return DataOpsDiligent(rng=rng, **params)


def random(rng, **params) -> DataOpsRandom:
    return DataOpsRandom(rng=rng, **params)
