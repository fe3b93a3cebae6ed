"""The controller wrapper: one Gymnasium wrapper that runs a composition of components.

Per step: normalise the proposed call with the environment's own path
(:func:`pushbench.envs.actions.decode`, once per step; an action it refuses passes through
untouched, so the environment refuses it the same way and charges the step), let each enabled
component repair it in registry order (:attr:`Component.order`), execute the result, update the
tracker from what the environment returned, and add the ``progress`` block (progress
components) to the observation. A step whose call a component
blocked, replaced or filtered gets a ``controller`` block stating what was sent, what was
executed instead, the ids filtered out and why (:mod:`.intervention`).
``info["controller"]`` holds ``{proposed, executed, interventions}`` for the step (plus
``filtered`` and ``reason`` when a component intervened); steps with
an intervention are kept for the episode record so passive and assisted behaviour separate.
``proposed`` and ``executed`` are clipped to 2000 characters; a kept step also holds the
unclipped ``proposed_ids`` (and ``proposed_reported_count`` for a proposed ``final``) from
:meth:`~pushbench.envs.base.QGPEnv.proposal`, so what the policy itself proposed stays
measurable exactly.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

from ..envs import actions
from ..envs.base import QGPEnv, base_env
from .catalogue import check_scope, idle_components
from .intervention import describe, filtered_ids
from .registry import REGISTRY, component_order
from .state import TrackerState

_PROPOSED_LIMIT = 2000
# json.dumps(..., ensure_ascii=True, separators=(",", ":")) builds this encoder on every call
_OBS_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


class Controller(gym.Wrapper):
    """Wrap ``env`` with the components named in ``components``; they repair in the registry's
    order (:func:`~.components.component_order`), whatever order the names are given in."""

    def __init__(
        self, env: gym.Env, name: str, components: tuple[str, ...], family_independent: bool = False
    ) -> None:
        family = base_env(env).family
        # Refuse before wrapping: a component that does nothing here would be listed as if
        # it had run (ControllerScopeError names it).
        check_scope(name, components, family, family_independent)
        super().__init__(env)
        self.name = name
        idle = set(idle_components(components, family))
        # Only the components that run on this family (all of them unless the composition is
        # declared family-independent): the record lists exactly these.
        self.component_names = tuple(
            c for c in component_order() if c in components and c not in idle
        )
        self.components = [REGISTRY[c]() for c in self.component_names]
        self.family = family
        self.state = TrackerState()
        self.steps: list[dict] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.state = TrackerState()
        self.steps = []
        self.state.update_from_info(info)
        decoded = json.loads(obs)
        for c in self.components:
            if hasattr(c, "on_reset"):
                c.on_reset(decoded, self.state, self.family)  # shared, as in step's observe
        return self._decorate(obs, None, decoded), info

    def step(self, action: Any):
        # Normalise before stepping (the env's own path): components only ever see a bounded
        # plain call, and nothing after env.step can fail on what the agent sent. The call is
        # decoded once here; the env, the records and the proposal reuse it (decoding is a
        # large share of a controller step, and its result does not depend on who decodes).
        outcome = _decode(action)
        call = outcome if isinstance(outcome, dict) else None
        to_env: Any = action if call is None else call
        to_env_call = call  # to_env decoded (None: the environment refuses it, one step)
        executed: Any = action
        executed_outcome = outcome
        labels: list[str] = []
        messages: list[str] = []
        if call is not None and not self._over():
            repaired = call
            for c in self.components:
                repaired, new, msg = c.repair(repaired, self.state, self.family)
                labels += new
                if msg:
                    messages.append(msg)
            if labels:
                executed = to_env = repaired
                executed_outcome = _decode(repaired)
                to_env_call = executed_outcome if isinstance(executed_outcome, dict) else None
        obs, reward, terminated, truncated, info = self._step_env(to_env, to_env_call)
        self.state.update_from_info(info)
        decoded = json.loads(obs)
        self.state.update_from_observation(decoded)
        for c in self.components:
            if hasattr(c, "observe"):
                c.observe(to_env if call is not None else None, decoded, self.state, self.family)
        entry = {
            "step": info["qgp"]["steps_used"],
            "proposed": actions.preview_decoded(action, outcome, _PROPOSED_LIMIT),
            "executed": actions.preview_decoded(executed, executed_outcome, _PROPOSED_LIMIT),
            "interventions": labels,
        }
        block = None
        if labels:
            # The call was blocked, replaced or filtered: say so in full, in the observation
            # (``controller`` block) and the same facts in the trace. (labels: call decoded.)
            assert call is not None
            filtered = filtered_ids(call, executed)
            reason = " | ".join(messages)
            entry.update(filtered=filtered, reason=reason)
            entry.update(_proposal_fields(base_env(self.env).proposal_decoded(call)))
            block = describe(labels, call, executed, filtered, reason)
        info = {**info, "controller": entry}
        if labels:
            self.steps.append(entry)
        return self._decorate(obs, block, decoded), reward, terminated, truncated, info

    def _step_env(self, action: Any, call: dict | None):
        """``self.env.step(action)``; ``call``: ``action`` decoded, which the base environment
        then need not decode again (:meth:`~pushbench.envs.base.QGPEnv.step_decoded`)."""
        if call is not None and isinstance(self.env, QGPEnv):
            return self.env.step_decoded(call)
        return self.env.step(action)

    def _over(self) -> bool:
        return getattr(self.env.unwrapped, "terminated_by", None) is not None

    def _decorate(self, obs: str, block: dict | None, decoded: dict | None = None) -> str:
        shows_progress = any(c.shows_progress for c in self.components)
        extra = [c for c in self.components if hasattr(c, "extra_block")]
        if not shows_progress and block is None and not extra:
            return obs
        decoded = dict(decoded if decoded is not None else json.loads(obs))
        if shows_progress:
            progress: dict = {}
            for c in self.components:
                c.decorate(progress, self.state, self.family)
            decoded["progress"] = progress
        for c in extra:  # blocks other than progress (the placebo)
            key, value = c.extra_block(self.state, self.family)
            decoded[key] = value
        if block is not None:
            decoded["controller"] = block
        return _OBS_ENCODER.encode(decoded)

    def episode_record(self) -> dict:
        """The environment's record plus this controller's section and intervention counts."""
        from .. import metrics

        record = base_env(self.env).episode_record()
        record["controller"] = {
            "name": self.name,
            "components": list(self.component_names),
            "steps": [dict(s) for s in self.steps],
        }
        record["metrics"] = metrics.episode_metrics(record)
        return record


def _proposal_fields(prop: dict) -> dict:
    """Unclipped facts about a changed call that metrics need (``proposed`` may be clipped).

    ``proposed_ids``: the well-formed ids the proposed call names if it is a ``submit`` ([]
    otherwise); ``proposed_reported_count``: a proposed ``final``'s integer count. Both come
    from actions within the environment's size limit, so they are bounded as calls are.
    """
    out: dict = {"proposed_ids": list(prop.get("ids", ()))}
    if "reported_count" in prop:
        out["proposed_reported_count"] = prop["reported_count"]
    return out


def _decode(action: Any) -> dict | actions.ActionError:
    """:func:`~pushbench.envs.actions.decode`'s call for ``action``, or the refusal it raised."""
    try:
        return actions.decode(action)
    except actions.ActionError as e:
        return e
