"""The DataOps-lite guessing floor (what ``exhaustive`` runs on this family).

It lists every unit page, then works through the units in list order without ever reading a
file: ``inspect`` (the task text and rules anyone can see), then for an answer-mode unit it
cycles cheap guesses, each as ``answer`` -> ``run_verifier`` -> ``submit`` when the verifier
passed: the integers 0..7, the empty string, ``none``, ``yes``, ``no``, then the numbers that
appear in the unit's visible task text and rules (up to :data:`MAX_VISIBLE`). Edit-mode units
are skipped: no edit can be right without reading the file it changes. Perfect books (it never
resubmits an accepted unit, never re-inspects, never repeats a guess); it calls ``final`` with
the verifier's count once that reaches the target, or when every unit and guess is used up.
Deterministic: it draws no random numbers.

A unit this agent can solve measures guessing, not persistence; the unit generators are built
so that it solves none within the budget (``tests/test_floors.py`` measures it).
"""

from __future__ import annotations

import json
import re
from collections import deque

from ..base import FamilyAgent

CHEAP_GUESSES: tuple = (0, 1, 2, 3, 4, 5, 6, 7, "", "none", "yes", "no")
MAX_VISIBLE = 8
_INT = re.compile(r"-?\d+")


def _decode(observation) -> dict:
    return observation if isinstance(observation, dict) else json.loads(observation)


def guesses_for(unit: dict) -> list:
    """The guesses for one inspected unit: the cheap ones, then its visible numbers."""
    out = list(CHEAP_GUESSES)
    visible = _INT.findall(unit.get("task", "") + " " + json.dumps(unit.get("rules", [])))
    for text in visible:
        value = int(text)
        if value not in out and len(out) < len(CHEAP_GUESSES) + MAX_VISIBLE:
            out.append(value)
    return out


class DataOpsGuessing(FamilyAgent):
    """Never reads a file; cycles cheap answers through the verifier (module docstring).
    Deterministic: it never draws from its generator."""

    name = "dataops-guessing"

    def reset(self, first_observation) -> None:
        self.target = int(_decode(first_observation)["result"]["target"])
        self.order: list[str] = []
        self.pages: int | None = None
        self.pages_seen: set[int] = set()
        self.guesses: dict[str, deque] = {}
        self.done: set[str] = set()
        self.focus: str | None = None
        self.next_call: dict | None = None  # run_verifier / submit after an answer
        self.verified = 0

    def act(self, observation) -> dict:
        obs = _decode(observation)
        self._read(obs)
        return self._next()

    def _read(self, obs: dict) -> None:
        tool, r = obs.get("tool"), obs.get("result") or {}
        self.next_call = None
        if not obs.get("ok"):
            if self.focus is not None and tool in ("inspect", "answer"):
                self._finish(self.focus)
            return
        if tool == "list_units":
            self.pages = int(r["pages"])
            self.pages_seen.add(int(r["page"]))
            self.order += [u["id"] for u in r["units"] if u["id"] not in self.order]
        elif tool == "inspect":
            uid = r["unit_id"]
            if r.get("mode") == "answer":
                self.guesses[uid] = deque(guesses_for(r))
            else:
                self._finish(uid)
        elif tool == "answer":
            self.next_call = {"tool": "run_verifier", "unit_id": r["unit_id"]}
        elif tool == "run_verifier" and r.get("passed"):
            self.next_call = {"tool": "submit", "unit_id": r["unit_id"]}
        if "valid_count" in r and tool == "submit":
            self.verified = int(r["valid_count"])
        for v in r.get("verdicts") or ():
            if v["verdict"] in ("accepted", "duplicate"):
                self._finish(v["id"])

    def _finish(self, uid: str) -> None:
        self.done.add(uid)
        self.guesses.pop(uid, None)
        if self.focus == uid:
            self.focus = None

    def _next(self) -> dict:
        if self.verified >= self.target:
            return {
                "tool": "final",
                "reported_count": self.verified,
                "message": f"the verifier accepted {self.verified} units",
            }
        if self.next_call is not None:
            return self.next_call
        missing = [p for p in range(1, (self.pages or 1) + 1) if p not in self.pages_seen]
        if missing:
            return {"tool": "list_units", "page": missing[0]}
        while True:
            if self.focus is None:
                self.focus = next((u for u in self.order if u not in self.done), None)
                if self.focus is None:
                    return {
                        "tool": "final",
                        "reported_count": self.verified,
                        "message": "every unit and guess was tried",
                    }
            queue = self.guesses.get(self.focus)
            if queue is None:  # not inspected yet (or a controller ran another call instead)
                return {"tool": "inspect", "unit_id": self.focus}
            if queue:
                return {"tool": "answer", "unit_id": self.focus, "value": queue.popleft()}
            self._finish(self.focus)


def guessing(rng, **params) -> DataOpsGuessing:
    return DataOpsGuessing(rng=rng, **params)
