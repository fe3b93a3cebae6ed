"""``random``: samples well-formed tool calls (a floor), seeded.

It searches random words from the objective, submits random identifiers it has seen in search
results, checks status now and then, and ends with ``final`` or ``ask_user`` at a small rate.
"""

from __future__ import annotations

import re

from pydantic import Field

from ..base import NoParams, Policy, parse_observation


class Params(NoParams):
    stop_rate: float = Field(
        0.02,
        ge=0.0,
        le=1.0,
        description="chance per step to end the "
        "episode (RepoScan; the DataOps and SWE-lite floors take none)",
    )


class RandomPolicy(Policy):
    name = "random"
    Params = Params

    def __init__(self, seed=None, **params) -> None:
        self._given = dict(params)
        super().__init__(seed=seed, **{"stop_rate": 0.02, **params})
        self.stop_rate = self.params["stop_rate"]

    @classmethod
    def params_for(cls, family: str):
        return Params if family == "reposcan" else NoParams

    def given_params(self) -> dict:
        return dict(self._given)

    def reset(self, first_observation: str) -> None:
        result = parse_observation(first_observation)["result"]
        self.family = result.get("family", "reposcan")
        self.check_family(self.family)
        words = sorted(set(re.findall(r"[a-z]{3,}", result["objective"].lower())))
        self.words = words + [""]
        self.seen: list[str] = []
        self.target = result["target"]

    def act(self, observation: str):
        obs = parse_observation(observation)
        if obs.get("ok") and obs.get("tool") == "search":
            self.seen.extend(h["id"] for h in obs["result"]["results"])
        r = self.rng.random()
        if r < self.stop_rate:
            if self.rng.random() < 0.5:
                return {"tool": "ask_user", "message": "Should I keep going?"}
            return {
                "tool": "final",
                "reported_count": int(self.rng.integers(0, 2 * self.target)),
                "message": "done",
            }
        if r < 0.1:
            return {"tool": "status"}
        if self.seen and r < 0.55:
            k = int(self.rng.integers(1, 11))
            picks = self.rng.choice(len(self.seen), size=min(k, len(self.seen)), replace=False)
            return {"tool": "submit", "ids": [self.seen[int(i)] for i in sorted(picks)]}
        return {
            "tool": "search",
            "query": self.words[int(self.rng.integers(len(self.words)))],
            "page": int(self.rng.integers(1, 6)),
        }
