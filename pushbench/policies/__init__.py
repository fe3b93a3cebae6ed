"""Policies: offline scripted and simulated agents; LLM agents live in optional modules.

``make_policy(name, seed, **params)`` builds a policy by name; :data:`POLICIES` lists the
offline ones.
"""

from __future__ import annotations

from .base import Policy, parse_observation

POLICIES: dict[str, str] = {
    "random": "pushbench.policies.random_policy:RandomPolicy",
    "diligent": "pushbench.policies.diligent:DiligentPolicy",
    # the no-judgement floor (scripted, not simulated; describe() says floor: true)
    "exhaustive": "pushbench.policies.exhaustive:ExhaustivePolicy",
    "simulated-weak": "pushbench.policies.simulated:SimulatedWeak",
    "simulated-mid": "pushbench.policies.simulated:SimulatedMid",
    "simulated-strong": "pushbench.policies.simulated:SimulatedStrong",
    # SWE-lite only; knows the reference fixes (describe(): oracle/simulated), never an agent row
    "diligent-oracle": "pushbench.policies.swelite_agents:DiligentOraclePolicy",
    # LLM policies (pip install "pushbench[llm]"; the LangGraph ones also "pushbench[langgraph]")
    "llm": "pushbench.policies.llm.native:LLMPolicy",
    "llm-langgraph": "pushbench.policies.llm.langgraph_agent:LangGraphPolicy",
    "llm-langgraph-memory": "pushbench.policies.llm.memory:LangGraphMemoryPolicy",
    "llm-memgpt": "pushbench.policies.llm.memory:MemGPTPolicy",
}

# Policies that need no network or model and are deterministic per seed.
OFFLINE_POLICIES: tuple[str, ...] = ("random", "diligent", "simulated-weak", "simulated-mid",
                                     "simulated-strong", "exhaustive")


def make_policy(name: str, seed: int | None = None, **params) -> Policy:
    """Build policy ``name`` with ``seed``; unknown names raise with the list of known ones."""
    import difflib
    import importlib

    if name not in POLICIES:
        close = difflib.get_close_matches(name, list(POLICIES), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown policy {name!r}.{hint} Known: {', '.join(POLICIES)}")
    module, _, attr = POLICIES[name].partition(":")
    return getattr(importlib.import_module(module), attr)(seed=seed, **params)


__all__ = ["Policy", "POLICIES", "OFFLINE_POLICIES", "make_policy", "parse_observation"]
