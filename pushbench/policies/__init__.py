"""Policies: offline scripted and simulated agents; LLM agents live in optional modules.

Layout: :mod:`.base` (the interface and parameter schemas), :mod:`.offline` (the named offline
policies and the (policy, family) -> agent table), one package of agents per task family
(:mod:`.reposcan`, :mod:`.dataops`, :mod:`.swelite`) and :mod:`.llm` (model-backed agents).

``make_policy(name, seed, **params)`` builds a policy by name; :data:`POLICIES` lists them
and :data:`OFFLINE_POLICIES` the offline ones. Every policy class has a ``Params`` model (its
parameter schema, unknown keys refused); :func:`validate_params` checks parameters against it
(and per task family), which experiments do before their first episode.
"""

from __future__ import annotations

from ..errors import unknown
from .base import Policy, PolicyParamsError, UnsupportedFamily, parse_observation

POLICIES: dict[str, str] = {
    "random": "pushbench.policies.offline:RandomPolicy",
    "diligent": "pushbench.policies.offline:DiligentPolicy",
    # the no-judgement floor (scripted, not simulated; describe() says floor: true)
    "exhaustive": "pushbench.policies.offline:ExhaustivePolicy",
    # competent base + named mechanisms, and the presets (documented mechanism combinations)
    "simulated-base": "pushbench.policies.mechanisms.policy:SimulatedPolicy",
    "simulated-weak": "pushbench.policies.mechanisms.policy:SimulatedWeak",
    "simulated-mid": "pushbench.policies.mechanisms.policy:SimulatedMid",
    "simulated-strong": "pushbench.policies.mechanisms.policy:SimulatedStrong",
    # SWE-lite only; knows the reference fixes (describe(): oracle/simulated), never an agent row
    "diligent-oracle": "pushbench.policies.offline:DiligentOraclePolicy",
    # Aider (the coding agent, its own venv: `pushbench baselines install aider`), SWE-lite only
    "aider": "pushbench.policies.aider:AiderPolicy",
    # Letta (a real Letta server and agent, its own venv: `pushbench baselines install letta`),
    # RepoScan and DataOps; docs/letta.md
    "letta": "pushbench.policies.letta:LettaPolicy",
    # LLM policies (pip install "pushbench[llm]"; the LangGraph ones also "pushbench[langgraph]")
    "llm": "pushbench.policies.llm.native:LLMPolicy",
    "llm-langgraph": "pushbench.policies.llm.langgraph_agent:LangGraphPolicy",
    "llm-langgraph-memory": "pushbench.policies.llm.memory:LangGraphMemoryPolicy",
    "llm-memgpt": "pushbench.policies.llm.memory:MemGPTPolicy",
}

# Policies that need no network or model and are deterministic per seed.
OFFLINE_POLICIES: tuple[str, ...] = (
    "random",
    "diligent",
    "simulated-weak",
    "simulated-mid",
    "simulated-strong",
    "exhaustive",
    "simulated-base",
)


def policy_class(name: str) -> type[Policy]:
    """The class of policy ``name``; unknown names raise ``KeyError`` with the known ones, a
    missing optional dependency raises :class:`PolicyParamsError` saying what to install."""
    import importlib

    if name not in POLICIES:
        raise unknown("policy", name, POLICIES)
    module, _, attr = POLICIES[name].partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as e:
        extra = "langgraph" if "langgraph" in name else "llm"
        raise PolicyParamsError(
            f"policy {name!r} needs an optional dependency ({e}); install "
            f"it with pip install 'pushbench[{extra}]'"
        ) from None


def validate_params(policy_name: str, params: dict | None, families=None) -> dict:
    """Check ``params`` against policy ``policy_name``'s own schema (its ``Params`` model).

    With ``families`` (task families the policy will run on), every parameter must also act on
    each of them (:meth:`Policy.params_for`), so a record never claims a setting that had no
    effect. Returns the validated parameters (only those given). Raises
    :class:`PolicyParamsError` (a ``ValueError``) naming the policy and the parameter, or
    ``KeyError`` for an unknown policy.
    """
    from pydantic import ValidationError

    from .base import describe_validation

    cls = policy_class(policy_name)
    params = dict(params or {})
    try:
        model = cls.Params.model_validate(params)
    except ValidationError as e:
        raise PolicyParamsError(describe_validation(policy_name, e)) from None
    for family in sorted(set(families or ())):
        try:
            cls.params_for(family).model_validate(params)
        except ValidationError as e:
            raise PolicyParamsError(
                describe_validation(policy_name, e, f"on {family} tasks")
            ) from None
    return model.model_dump(exclude_unset=True)


def make_policy(name: str, seed: int | None = None, **params) -> Policy:
    """Build policy ``name`` with ``seed`` and validated ``params``; unknown names raise with
    the list of known ones, bad params with :class:`PolicyParamsError`."""
    validate_params(name, params)
    return policy_class(name)(seed=seed, **params)


__all__ = [
    "Policy",
    "POLICIES",
    "OFFLINE_POLICIES",
    "PolicyParamsError",
    "UnsupportedFamily",
    "make_policy",
    "parse_observation",
    "policy_class",
    "validate_params",
]
