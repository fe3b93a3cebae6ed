"""Delegation from the offline policies to family-specific agents (DataOps, SWE-lite).

The named offline policies (``diligent``, ``random``, ``simulated-*``, ``exhaustive``) are
RepoScan agents; for other families they hand the episode to that family's agent, passing their
own seeded generator so one seed still drives everything.
"""

from __future__ import annotations


def _module(family: str):
    if family == "dataops":
        from .dataops import agents as dataops_agents

        return dataops_agents
    if family == "swelite":
        from .swelite import agents as swelite_agents

        return swelite_agents
    raise NotImplementedError(f"no offline agent for family {family!r}")


def diligent_for(family: str, rng, **params):
    return _module(family).diligent(rng, **params)


def random_for(family: str, rng, **params):
    return _module(family).random(rng, **params)


def exhaustive_for(family: str, rng, **params):
    """The no-judgement floor of ``family`` (see :mod:`.exhaustive`): DataOps guesses."""
    if family == "dataops":
        from .dataops import floor as dataops_floor

        return dataops_floor.guessing(rng, **params)
    if family == "swelite":
        raise NotImplementedError(
            "exhaustive has no SWE-lite variant: every SWE-lite unit is validated to fail its "
            "tests on the mutated code, so an agent that does not read and repair code gets no "
            "unit accepted (its floor is 0 by construction); run it on RepoScan or DataOps")
    raise NotImplementedError(f"no exhaustive floor for family {family!r}")


def simulated_for(family: str, rng, preset: str, **params):
    """``preset`` is the preset name (weak / mid / strong); the family maps it to parameters."""
    return _module(family).simulated(rng, preset, **params)
