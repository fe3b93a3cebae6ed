"""SIMULATED LLM-like agents: the preset names, kept where experiments and records know them.

The agents are built in :mod:`pushbench.policies.mechanisms`: a competent base per family plus
named failure mechanisms, each one class with one parameter. ``simulated-weak`` / ``-mid`` /
``-strong`` are documented combinations of those mechanisms
(:data:`pushbench.policies.mechanisms.policy.PRESETS`); ``simulated-base`` is the base alone.
Their numbers are labelled "simulated" in every table and plot.
"""

from __future__ import annotations

from .mechanisms.policy import PRESETS as FAMILY_PRESETS
from .mechanisms.policy import SimulatedMid, SimulatedPolicy, SimulatedStrong, SimulatedWeak

PRESETS = FAMILY_PRESETS["reposcan"]  # the RepoScan presets (DataOps: FAMILY_PRESETS["dataops"])

__all__ = [
    "PRESETS",
    "FAMILY_PRESETS",
    "SimulatedMid",
    "SimulatedPolicy",
    "SimulatedStrong",
    "SimulatedWeak",
]
