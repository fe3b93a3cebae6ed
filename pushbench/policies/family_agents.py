"""Delegation from the offline policies to family-specific agents (DataOps, SWE-lite)."""

from __future__ import annotations


def _unsupported(kind: str, family: str):
    raise NotImplementedError(f"no offline {kind} agent for family {family!r} yet")


def diligent_for(family: str, rng, **params):
    _unsupported("diligent", family)


def random_for(family: str, rng, **params):
    _unsupported("random", family)


def simulated_for(family: str, rng, preset: dict, **params):
    _unsupported("simulated", family)
