"""Run one episode: build the (wrapped) env, drive the policy, return the episode record."""

from __future__ import annotations

import hashlib
import json

from .. import make
from ..policies import Policy, make_policy
from ..policies.errors import PolicyError, mark_policy_error
from ..policies.identity import policy_key_id, policy_label


def episode_key(task_id: str, controller: str, policy: str, seed: int,
                instance: str | None = None) -> str:
    """Stable id of an episode: what resume uses to skip finished work.

    ``policy`` is the policy's key id (:func:`pushbench.policies.identity.policy_key_id`).
    """
    raw = json.dumps([task_id, instance, controller, policy, seed])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def run_episode(task_id: str, controller: str, policy: str | Policy, seed: int,
                instance: str | None = None, budget: int | None = None,
                policy_params: dict | None = None, label: str | None = None) -> dict:
    """Run ``policy`` on ``task_id`` under ``controller`` with ``seed``; return the record.

    The record is the environment's :meth:`episode_record` (plus the controller's section) with
    ``controller``, ``policy`` (its ``label`` included) and ``key`` fields; ``label`` is an
    explicit policy label (else derived from name and params). It holds no wall-clock time, so
    the same arguments give byte-identical metric fields.
    """
    env = make(task_id, controller=controller, **({"budget": budget} if budget else {}))
    try:
        pol = policy if isinstance(policy, Policy) else make_policy(
            policy, seed=seed, **(policy_params or {}))
        options = {env.unwrapped._instance_option: instance} if instance else None
        obs, _ = env.reset(seed=seed, options=options)
        pol.reset(obs)
        failure: PolicyError | None = None
        try:
            if hasattr(pol, "drive"):  # a policy that owns its loop (LangGraph) steps env itself
                pol.drive(env)
            else:
                done = False
                while not done:
                    obs, _, terminated, truncated, _ = env.step(pol.act(obs))
                    done = terminated or truncated
        except PolicyError as e:  # the model backend failed for good: not an agent failure
            failure = e
        record = env.get_wrapper_attr("episode_record")()
    finally:
        env.close()
    finish_record(record, pol, task_id, controller, seed, instance, label, failure,
                  None if isinstance(policy, Policy) else policy_params)
    return record


def finish_record(record: dict, pol: Policy, task_id: str, controller: str, seed: int,
                  instance: str | None, label: str | None, failure: PolicyError | None,
                  requested_params: dict | None) -> None:
    """Add the policy's description (with its label), extras, failure mark and key to
    ``record``: one place for the sync and the async episode loop.

    The label comes from the params the policy resolved (defaults dropped); the key from the
    params that were asked for (``requested_params``, as the experiment's spec key does; a
    policy object passed in directly keys by its name).
    """
    params = dict(getattr(pol, "params", None) or {})
    record["policy"] = {**pol.describe(), "label": policy_label(pol.name, params, label)}
    if hasattr(pol, "episode_extras"):  # LLM policies: record["usage"], ["llm"], ["memory"]
        record.update(pol.episode_extras())
    if failure is not None:  # terminated_by "error", record["error"], metrics["error"]
        mark_policy_error(record, failure)
    record["simulated"] = bool(pol.simulated)
    record["key"] = episode_key(task_id, controller,
                                policy_key_id(pol.name, requested_params, label), seed, instance)
