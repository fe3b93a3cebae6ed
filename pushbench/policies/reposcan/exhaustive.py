"""``exhaustive``: the no-judgement floor. What does the task alone demand of an agent?

RepoScan: browses the empty query (it lists every definition in identifier order) page by page
and submits every candidate of every page in order, ten per ``submit``, with perfect books: it
never resubmits an id, never repeats a page and never judges a snippet. It calls ``final`` with
the verifier's count (from the submit results) once that count reaches the target, or when the
pages run out. Deterministic: it uses no randomness at all. Two steps buy ten candidates, so
within ``budget(N) = 10 + 1.5 N`` it sees about ``5 + 0.75 N`` pages; whether that reaches N
valid ids depends only on how dense the property is among all definitions. A judging agent
differs from it in ``precision`` (accepted / distinct ids submitted), not necessarily in
success.

DataOps-lite: "every candidate without judgement" has no direct analogue (a unit is accepted
only when its checker passes), so the floor is the guessing agent of
:mod:`pushbench.policies.dataops.floor`: every unit in list order, never reading a file, cheap
answers through
``run_verifier`` and ``submit``. SWE-lite has no floor: a unit is kept only if its tests fail on
the mutated code (checked when the unit set is built), so an agent that does not read and
repair code cannot get a unit accepted; ``reset`` says so instead of running a meaningless row.

Scripted baseline, not simulated: ``describe()`` marks it ``floor: true``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..base import Policy, parse_observation

BATCH = 10


class ExhaustivePolicy(Policy):
    name = "exhaustive"
    simulated = False

    class Params(BaseModel):
        """No parameters: the floor is one fixed procedure."""

        model_config = ConfigDict(extra="forbid")

    def __init__(self, seed: int | None = None, **params) -> None:
        self.Params.model_validate(params)  # unknown parameters are an error, not ignored
        super().__init__(seed=seed, **params)

    def describe(self) -> dict:
        return {**super().describe(), "floor": True}

    def reset(self, first_observation: str) -> None:
        result = parse_observation(first_observation)["result"]
        self.family = result.get("family", "reposcan")
        self.target = int(result["target"])
        self.page = 0
        self.more = True
        self.pending: list[str] = []
        self.known: set[str] = set()  # every id queued or submitted: perfect books
        self.verified = 0

    def act(self, observation: str):
        obs = parse_observation(observation)
        result = obs.get("result") or {}
        if obs.get("tool") == "search":
            if obs.get("ok"):
                for hit in result["results"]:
                    if hit["id"] not in self.known:
                        self.known.add(hit["id"])
                        self.pending.append(hit["id"])
                self.more = bool(result["has_more"])
            else:  # a page the index refuses (past the last one): nothing more to browse
                self.more = False
        if obs.get("ok") and "valid_count" in result and obs.get("tool") == "submit":
            self.verified = int(result["valid_count"])
        if self.verified >= self.target:
            return {
                "tool": "final",
                "reported_count": self.verified,
                "message": f"the verifier accepted {self.verified} identifiers",
            }
        if self.pending:
            batch, self.pending = self.pending[:BATCH], self.pending[BATCH:]
            return {"tool": "submit", "ids": batch}
        if not self.more:
            return {
                "tool": "final",
                "reported_count": self.verified,
                "message": "every definition was submitted",
            }
        self.page += 1
        return {"tool": "search", "query": "", "page": self.page}
