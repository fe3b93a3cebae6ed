"""SIMULATED LLM-like agents: failures from mechanisms, not from rules keyed to the target.

These are not language models. They imitate how a tool-calling LLM loses track in a long
episode, through five mechanisms, all driven by one seeded ``numpy.random.Generator``:

* **Truncated context** (``window``): only the last W (action, observation) pairs are visible.
  Which pages of a query it has seen and which ids it has submitted are re-derived from that
  window, so after switching queries (``explore``) it may restart a query at page 1 and resubmit
  ids it no longer remembers (duplicates, repeated searches).
* **Limited judgement** (``accuracy``): each candidate is judged from its snippet like the
  diligent agent would, then flipped with probability ``1 - accuracy``.
* **Drifting progress belief** (``attention``): it keeps a running tally; reading a submit
  result it adds the accepted count with probability ``attention``, otherwise the number of ids
  it sent (an optimistic misread, duplicates included). A ``status`` result or a controller's
  ``progress`` block in view resets the tally to the verified count.
* **Belief-based stopping**: it calls ``final`` with its tally once the tally reaches the target.
* **Impatience** (``give_up``): a per-step chance to end with ``ask_user`` or ``final``;
  ``overbatch`` is the chance it collects another page before submitting (more than 10 ids).

Presets (``simulated-weak`` / ``-mid`` / ``-strong``) differ only in these parameters; see
:data:`PRESETS`. Their numbers are labelled "simulated" in every table and plot.
"""

from __future__ import annotations

from collections import deque
from typing import Annotated

from pydantic import Field

from ..dataops import agents as dataops_agents
from ..base import NoParams, Policy, UnsupportedFamily, parse_observation
from .judge import judge, property_from_objective, queries_for

MAX_IDS = 10

PRESETS: dict[str, dict[str, float]] = {
    "weak": dict(window=4, accuracy=0.75, attention=0.6, explore=0.35, overbatch=0.3,
                 give_up=0.006),
    "mid": dict(window=8, accuracy=0.85, attention=0.8, explore=0.25, overbatch=0.2,
                give_up=0.003),
    "strong": dict(window=16, accuracy=0.92, attention=0.93, explore=0.15, overbatch=0.1,
                   give_up=0.0015),
}


_Rate = Annotated[float, Field(ge=0.0, le=1.0)]


class RepoScanParams(NoParams):
    """Overrides of the RepoScan presets (unset keys keep the preset's value)."""

    window: int = Field(8, ge=1, le=10_000, description="(action, observation) pairs in view")
    accuracy: _Rate = 0.85
    attention: _Rate = 0.8
    explore: _Rate = 0.25
    overbatch: _Rate = 0.2
    give_up: _Rate = 0.003


class SimulatedParams(RepoScanParams, dataops_agents.SimulatedParams):
    """Every parameter of a simulated agent on some family (each family takes its own subset:
    :meth:`SimulatedAgent.params_for`)."""


class SimulatedAgent(Policy):
    """LLM-like simulated agent; ``preset`` picks parameters, keyword params override them.

    On DataOps-lite the overrides go to the DataOps simulated agent (its own parameters); there
    is no simulated SWE-lite agent. The record's ``params`` are the ones in effect.
    """

    simulated = True
    preset = "mid"
    Params = SimulatedParams

    def __init__(self, seed=None, **overrides) -> None:
        params = {**PRESETS[self.preset], **overrides}
        super().__init__(seed=seed, **params)
        self.overrides = dict(overrides)
        self.window = int(params["window"])
        self.accuracy = float(params["accuracy"])
        self.attention = float(params["attention"])
        self.explore = float(params["explore"])
        self.overbatch = float(params["overbatch"])
        self.give_up = float(params["give_up"])

    @classmethod
    def params_for(cls, family: str):
        if family == "reposcan":
            return RepoScanParams
        if family == "dataops":
            return dataops_agents.SimulatedParams
        raise UnsupportedFamily(f"policy {cls.name!r} has no agent for {family} tasks (there is "
                                "no simulated agent for that family; use diligent, random or an "
                                "LLM policy)")

    def given_params(self) -> dict:
        return dict(self.overrides)

    def reset(self, first_observation: str) -> None:
        result = parse_observation(first_observation)["result"]
        self.family = result.get("family", "reposcan")
        self.check_family(self.family)
        self.target = result["target"]
        self.spec = property_from_objective(result["objective"])
        self.plan = queries_for(self.spec)
        self.done_queries: set[str] = set()
        self.query = self.plan[0]
        self.memory: deque[tuple[dict | None, dict]] = deque(maxlen=self.window)
        self.tally = 0
        self.last_action: dict | None = None
        self.scratch: list[str] = []  # candidates judged plausible, not yet submitted

    # ----- memory-derived views -------------------------------------------------------
    def _remembered_submitted(self) -> set[str]:
        ids = set()
        for action, obs in self.memory:
            if action and action.get("tool") == "submit":
                ids.update(i for i in action.get("ids", ()) if isinstance(i, str))
        return ids

    def _next_page(self, query: str, progress: dict | None) -> int:
        if progress:
            known = (progress.get("searches") or {}).get(" ".join(query.lower().split()))
            if known:
                return known["next_unseen_page"]
        pages = [obs["result"]["page"] for a, obs in self.memory
                 if obs.get("ok") and obs.get("tool") == "search"
                 and obs["result"]["query"] == query]
        return max(pages) + 1 if pages else 1

    # ----- acting -----------------------------------------------------------------------
    def act(self, observation: str):
        obs = parse_observation(observation)
        self.memory.append((self.last_action, obs))
        progress = obs.get("progress")
        self._update_belief(obs, progress)
        action = self._decide(obs, progress)
        self.last_action = action
        return action

    def _update_belief(self, obs: dict, progress: dict | None) -> None:
        result = obs.get("result") or {}
        if progress is not None:
            self.tally = progress["valid_count"]
        elif obs.get("ok") and obs.get("tool") == "status":
            self.tally = result["valid_count"]
        elif obs.get("ok") and obs.get("tool") == "submit":
            if self.rng.random() < self.attention:
                self.tally += result["accepted_now"]
            else:
                self.tally += len(result["verdicts"])

    def _decide(self, obs: dict, progress: dict | None) -> dict:
        if self.rng.random() < self.give_up:
            if self.rng.random() < 0.5:
                return {"tool": "ask_user", "message": "I have collected a lot; shall I stop?"}
            return {"tool": "final", "reported_count": int(self.tally), "message": "done"}
        if self.tally >= self.target:
            return {"tool": "final", "reported_count": int(self.tally),
                    "message": f"found {self.tally} identifiers"}
        if (not obs.get("ok") and obs.get("tool") == "submit" and self.last_action
                and len(self.last_action.get("ids", ())) > MAX_IDS):
            # The call was refused for too many ids: retry with the first ten, forget the rest.
            return {"tool": "submit", "ids": list(self.last_action["ids"][:MAX_IDS])}
        if obs.get("ok") and obs.get("tool") == "search":
            self._collect(obs["result"])
            if not obs["result"]["has_more"]:
                self.done_queries.add(obs["result"]["query"])
            if self.scratch and not (self.rng.random() < self.overbatch and obs["result"]["has_more"]):
                batch, self.scratch = self.scratch, []
                return {"tool": "submit", "ids": batch}
        return self._search(progress)

    def _collect(self, result: dict) -> None:
        remembered = self._remembered_submitted()
        for hit in result["results"]:
            ident = hit["id"]
            if ident in remembered or ident in self.scratch:
                continue
            verdict = judge(self.spec, hit)
            plausible = verdict == "yes" or (verdict == "maybe" and self.rng.random() < 0.5)
            if self.rng.random() > self.accuracy:
                plausible = not plausible
            if plausible:
                self.scratch.append(ident)

    def _search(self, progress: dict | None) -> dict:
        open_queries = [q for q in self.plan if q not in self.done_queries] or self.plan
        if self.query not in open_queries:
            self.query = open_queries[0]
        if len(open_queries) > 1 and self.rng.random() < self.explore:
            self.query = open_queries[int(self.rng.integers(len(open_queries)))]
        return {"tool": "search", "query": self.query,
                "page": self._next_page(self.query, progress)}


class SimulatedWeak(SimulatedAgent):
    name = "simulated-weak"
    preset = "weak"


class SimulatedMid(SimulatedAgent):
    name = "simulated-mid"
    preset = "mid"


class SimulatedStrong(SimulatedAgent):
    name = "simulated-strong"
    preset = "strong"
