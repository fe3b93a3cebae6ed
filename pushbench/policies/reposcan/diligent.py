"""``diligent``: a competent scripted agent that reads only observations and keeps perfect books.

RepoScan: it reads the property from the objective, works through its queries page by page,
judges each hit from its snippet (:mod:`.judge`), submits plausible candidates (evidence seen
first, then ones whose snippet may be cut) ten at a time, never resubmits, never repeats a page,
and ends with ``final`` reporting the verifier's count only once that count reaches the target.
On other families the named policy ``diligent`` (:mod:`pushbench.policies.offline`) hands the
episode to that family's agent.
"""

from __future__ import annotations

from collections import deque

from ..base import Policy, parse_observation
from .judge import judge, property_from_objective, queries_for

BATCH = 10


class DiligentPolicy(Policy):
    name = "diligent"

    def reset(self, first_observation: str) -> None:
        result = parse_observation(first_observation)["result"]
        self.family = result.get("family", "reposcan")
        self.check_family(self.family)
        self.target = result["target"]
        self.spec = property_from_objective(result["objective"])
        self.queries = deque(queries_for(self.spec))
        self.page = 0
        self.sure: list[str] = []
        self.unsure: list[str] = []
        self.queued: set[str] = set()
        self.submitted: set[str] = set()
        self.accepted: set[str] = set()
        self.exhausted = False
        self.steps_left = result["budget"]

    def act(self, observation: str):
        obs = parse_observation(observation)
        self.steps_left -= 1 if obs.get("tool") != "reset" else 0
        self._read(obs)
        if len(self.accepted) >= self.target:
            return {
                "tool": "final",
                "reported_count": len(self.accepted),
                "message": f"verifier accepted {len(self.accepted)} identifiers",
            }
        pending = self.sure + self.unsure
        if len(pending) >= BATCH or (pending and (self.exhausted or self.steps_left <= 2)):
            batch = (self.sure + self.unsure)[:BATCH]
            self.sure = [i for i in self.sure if i not in batch]
            self.unsure = [i for i in self.unsure if i not in batch]
            self.submitted.update(batch)
            return {"tool": "submit", "ids": batch}
        if self.exhausted:
            return {"tool": "status"}
        self.page += 1
        return {"tool": "search", "query": self.queries[0], "page": self.page}

    def _read(self, obs: dict) -> None:
        if not obs.get("ok"):
            return
        result = obs.get("result") or {}
        for v in result.get("verdicts") or ():
            if v["verdict"] == "accepted":
                self.accepted.add(v["id"])
        if obs.get("tool") == "search":
            for hit in result["results"]:
                ident = hit["id"]
                if ident in self.queued or ident in self.submitted:
                    continue
                verdict = judge(self.spec, hit)
                if verdict != "no":
                    self.queued.add(ident)
                    (self.sure if verdict == "yes" else self.unsure).append(ident)
            if not result["has_more"]:
                self.queries.popleft()
                self.page = 0
                self.exhausted = not self.queries
