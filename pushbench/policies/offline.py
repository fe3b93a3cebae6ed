"""The named offline policies: one name, one agent per task family.

``diligent``, ``random``, ``exhaustive`` and ``diligent-oracle`` are the names
experiments use. Each is the RepoScan agent of :mod:`.reposcan` (its parameters, schema and
behaviour) and, on another family, hands the episode at ``reset`` to that family's agent from
:data:`AGENTS`, the table ``(policy, family) -> agent factory``. Factories take the policy's
own seeded generator, so one seed still drives everything. Which parameters act on which family
is each policy's :meth:`~.base.Policy.params_for`, checked when an experiment is validated: a
family without an agent (``simulated-*`` or ``exhaustive`` on SWE-lite) is an error there,
before any episode runs.

This module sits above the family agents (:mod:`.reposcan`, :mod:`.dataops`, :mod:`.swelite`),
which never import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import Field

from .base import NoParams, Policy, UnsupportedFamily, parse_observation
from .dataops import agents as dataops_agents
from .dataops import floor as dataops_floor
from .reposcan import diligent, exhaustive, random_policy
from .swelite import agents as swelite_agents

NO_SWELITE_FLOOR = (
    "exhaustive has no SWE-lite variant: every SWE-lite unit is validated to fail its "
    "tests on the mutated code, so an agent that does not read and repair code gets no "
    "unit accepted (its floor is 0 by construction); run it on RepoScan or DataOps"
)

# (policy, family) -> factory(rng, **params) of the agent that plays the episode there.
AGENTS: dict[tuple[str, str], Callable[..., Any]] = {
    ("diligent", "dataops"): dataops_agents.diligent,
    ("diligent", "swelite"): swelite_agents.diligent,
    ("random", "dataops"): dataops_agents.random,
    ("random", "swelite"): swelite_agents.random,
    ("exhaustive", "dataops"): dataops_floor.guessing,
    # DataOps-public (issue 30): the same agents; the solvers know its rule ops
    ("diligent", "dataops_public"): dataops_agents.diligent,
    ("random", "dataops_public"): dataops_agents.random,
    ("exhaustive", "dataops_public"): dataops_floor.guessing,
}


def agent_for(policy: str, family: str, rng, *args, **params):
    """The ``family`` agent of ``policy``: ``factory(rng, *args, **params)`` from
    :data:`AGENTS` (``NotImplementedError`` if the table has none)."""
    factory = AGENTS.get((policy, family))
    if factory is None:
        if (policy, family) == ("exhaustive", "swelite"):
            raise NotImplementedError(NO_SWELITE_FLOOR)
        raise NotImplementedError(f"no offline agent for family {family!r}")
    return factory(rng, *args, **params)


# The table by policy, as callers outside this module have always used it.
def diligent_for(family: str, rng, **params):
    return agent_for("diligent", family, rng, **params)


def random_for(family: str, rng, **params):
    return agent_for("random", family, rng, **params)


def exhaustive_for(family: str, rng, **params):
    """The no-judgement floor of ``family`` (see :mod:`.reposcan.exhaustive`): DataOps guesses."""
    return agent_for("exhaustive", family, rng, **params)


def _family(first_observation: str) -> str:
    return parse_observation(first_observation)["result"].get("family", "reposcan")


class _Agent(Protocol):
    """What a family agent of :data:`AGENTS` offers (each family module has its own classes)."""

    def reset(self, first_observation: str) -> None: ...

    def act(self, observation: str) -> Any: ...


class _PerFamily(Policy):
    """Mixin over a RepoScan agent: on another family, play the table's agent instead.

    (A Policy subclass only for the type checker: it comes first in the bases of classes that
    are Policies already, so the method order is that of the plain mixin.)"""

    _delegate: _Agent | None = None  # the family agent (:data:`AGENTS`)

    def _delegate_args(self) -> tuple[tuple, dict]:
        """Positional and keyword arguments (after ``rng``) of the family agent's factory."""
        return (), {}

    def _hand_over(self, first_observation: str, policy: str, check: bool = True) -> bool:
        """Start the family agent if the episode is not RepoScan; ``True`` if it took over."""
        self._delegate = None
        family = _family(first_observation)
        if check:
            self.check_family(family)
        if family == "reposcan":
            return False
        self.family = family
        args, kwargs = self._delegate_args()
        self._delegate = agent_for(policy, family, self.rng, *args, **kwargs)
        self._delegate.reset(first_observation)
        return True

    def act(self, observation: str):
        if self._delegate is not None:
            return self._delegate.act(observation)
        return super().act(observation)


class DiligentPolicy(_PerFamily, diligent.DiligentPolicy):
    def reset(self, first_observation: str) -> None:
        if not self._hand_over(first_observation, "diligent"):
            super().reset(first_observation)


class RandomPolicy(_PerFamily, random_policy.RandomPolicy):
    def reset(self, first_observation: str) -> None:
        if self._hand_over(first_observation, "random"):
            self.params = {}  # the family's random floor takes no parameters
        else:
            super().reset(first_observation)


class ExhaustivePolicy(_PerFamily, exhaustive.ExhaustivePolicy):
    @classmethod
    def params_for(cls, family: str):
        if family == "swelite":
            raise UnsupportedFamily(
                f"policy {cls.name!r} has no agent for {family} tasks: " + NO_SWELITE_FLOOR
            )
        return cls.Params

    def reset(self, first_observation: str) -> None:
        if not self._hand_over(first_observation, "exhaustive", check=False):
            super().reset(first_observation)


class OracleParams(NoParams):
    recipe: str | None = Field(None, max_length=4096, description="unit-set recipe file")
    solve_all: bool = Field(False, description="work through the whole backlog")


class DiligentOraclePolicy(Policy):
    """``diligent-oracle``: the SWE-lite oracle (:class:`~.swelite.agents.SWELiteOracle`) as a
    named policy (never an agent row); on other families it behaves exactly like ``diligent``."""

    name = "diligent-oracle"
    simulated = True  # not a model: keeps oracle rows out of agent tables
    oracle = True
    Params = OracleParams

    @classmethod
    def params_for(cls, family: str):
        return OracleParams if family == "swelite" else NoParams

    def describe(self) -> dict:
        out = super().describe()
        out.update(
            oracle=True, simulated=True, note="knows the reference fixes; proves solvability only"
        )
        return out

    def reset(self, first_observation: str) -> None:
        family = _family(first_observation)
        self.check_family(family)
        if family != "swelite":
            # Other families have no reference fixes: behave exactly like ``diligent`` there
            # (the rows stay flagged oracle/simulated all the same).
            self._agent: DiligentPolicy | swelite_agents.SWELiteOracle = DiligentPolicy(
                seed=self.seed
            )
            self._agent.rng = self.rng
        else:
            self._agent = swelite_agents.SWELiteOracle(self.rng, **self.params)
        self._agent.reset(first_observation)

    def act(self, observation: str):
        return self._agent.act(observation)
