"""A policy's identity: its **label** (what reports group by) and its **key id** (what episode
keys hash).

Two agents are the same agent only if their labels are equal; reports never pool different
labels. The label is, in order of precedence:

* an explicit label (an experiment's ``label:`` field of a policy entry);
* for a policy that talks to a model (its params have ``model``): the name plus the model and,
  when set, the base URL: ``llm[model=gpt-4.1-mini]``,
  ``llm[model=qwen,base_url=http://localhost:8000/v1]``, plus the context budget when it is
  given (``llm[model=gpt-4.1,context=16000]``, ``llm[model=gpt-4.1,context=full]`` for
  ``context_tokens: null``: two arms of a context experiment); prices, timeouts and retries do not
  name a different agent (entries of one experiment that differ only there need explicit
  labels, which :mod:`pushbench.runner.experiment` enforces);
* for a black-box agent (``blackbox-mcp[:agent]:condition``): the name, which already carries
  the agent and prompt condition;
* otherwise the name plus every param that differs from the policy's defaults, sorted:
  ``simulated-mid[window=4]``; the bare name when none differs. Records store a policy's
  resolved params (a simulated preset records all of its parameters), so the defaults are
  taken from a default-constructed instance of a registered offline policy.

The key id is the explicit label when there is one, else the name (no params) or the name plus
the canonical JSON of the params (``simulated-mid{"window":4}``). It is the identity episode keys
were built from before labels existed, so run folders written then still resume; within one
experiment key ids and labels correspond one to one (both are checked for uniqueness).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

MODEL_PARAMS = ("model", "base_url")
# pushbench.blackbox.evaluate.POLICY_PREFIX (that module sits above)
BLACKBOX_PREFIX = "blackbox-mcp"


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=64)
def _defaults(name: str) -> str:
    """JSON of the params a default-constructed offline policy ``name`` records ("{}" if none
    or not constructible without a model)."""
    from . import POLICIES, make_policy

    if name not in POLICIES:
        return "{}"
    try:
        pol = make_policy(name, seed=0)
    except Exception:  # noqa: BLE001 - needs params (a model policy): no defaults to drop
        return "{}"
    return json.dumps(dict(getattr(pol, "params", {}) or {}), sort_keys=True)


def derived_label(name: str, params: dict | None = None) -> str:
    """The label of policy ``name`` with ``params`` when no explicit label is given."""
    params = dict(params or {})
    if name.split(":", 1)[0] == BLACKBOX_PREFIX:
        return name
    if "model" in params:
        shown = [(k, params[k]) for k in MODEL_PARAMS if params.get(k) is not None]
        if "context_tokens" in params:  # a context budget names an arm of a context experiment
            shown.append(("context", params["context_tokens"] or "full"))
    else:
        defaults = json.loads(_defaults(name)) if params else {}
        shown = sorted((k, v) for k, v in params.items() if k not in defaults or defaults[k] != v)
    if not shown:
        return name
    return f"{name}[{','.join(f'{k}={_value(v)}' for k, v in shown)}]"


def policy_label(name: str, params: dict | None = None, label: str | None = None) -> str:
    """The explicit ``label`` if given, else :func:`derived_label`."""
    return label if label else derived_label(name, params)


def policy_key_id(name: str, params: dict | None = None, label: str | None = None) -> str:
    """The policy part of an episode key (see the module docstring)."""
    if label:
        return label
    if not params:
        return name
    return f"{name}{json.dumps(params, sort_keys=True, separators=(',', ':'))}"


def label_of(policy: Any) -> str:
    """The label of a record's ``policy`` field (a dict as :meth:`Policy.describe` gives, or a
    bare name); lines written before labels existed get :func:`derived_label`."""
    if isinstance(policy, dict):
        name = str(policy.get("name") or "unknown")
        return policy_label(name, policy.get("params"), policy.get("label"))
    return str(policy) if policy else "unknown"
