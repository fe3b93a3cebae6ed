"""One episode: build the (wrapped) env, drive the policy, return the episode record.

This is the one episode loop. :func:`run_episode` (sync: in-process and process-pool
executors, Ray workers) and :func:`arun_episode` (asyncio: the ``async`` executor, many LLM
episodes on one event loop) share everything but the stepping itself: building the policy
(:func:`_make_policy`), pinning the instance (``reset_options``) and assembling the record
(:func:`finish_record`). :func:`episode_key` is the one key function: experiments (resume),
episode records and black-box runs all key episodes with it.

In the async loop, model calls are awaited (``AsyncOpenAI``), so while one episode waits for
its model the loop steps the others. Environment steps run inline; they are in-process and
short (about 0.1 ms for a RepoScan step); building and resetting the environment (the first
reset of an instance loads its index) runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterable
from typing import Any

from .. import make, spend
from ..policies import Policy, make_policy
from ..policies.errors import PolicyError, mark_policy_error
from ..policies.identity import policy_key_id, policy_label


def episode_key(
    task_id: str,
    controller: str,
    policy: str,
    seed: int | None,
    instance: str | None = None,
    params: dict | None = None,
    label: str | None = None,
) -> str:
    """Stable id of an episode: what resume uses to skip finished work.

    ``policy`` is the policy's name; with ``params`` and ``label`` (an experiment entry) its
    key id is :func:`pushbench.policies.identity.policy_key_id` of the three (the bare name when
    neither is given, as for black-box runs). Passing a key id as ``policy`` (and no params or
    label) gives the same key.
    """
    raw = json.dumps([task_id, instance, controller, policy_key_id(policy, params, label), seed])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _make_env(task_id: str, controller: str, budget: int | None):
    return make(task_id, controller=controller, **({"budget": budget} if budget else {}))


def _make_policy(policy: str | Policy, seed: int, policy_params: dict | None) -> Policy:
    return (
        policy
        if isinstance(policy, Policy)
        else make_policy(policy, seed=seed, **(policy_params or {}))
    )


def _step(env, action) -> tuple[str, bool]:
    obs, _, terminated, truncated, _ = env.step(action)
    return obs, terminated or truncated


def run_episode(
    task_id: str,
    controller: str,
    policy: str | Policy,
    seed: int,
    instance: str | None = None,
    budget: int | None = None,
    policy_params: dict | None = None,
    label: str | None = None,
    max_episode_tokens: int | None = None,
) -> dict:
    """Run ``policy`` on ``task_id`` under ``controller`` with ``seed``; return the record.

    ``max_episode_tokens`` caps the model tokens of the episode (:mod:`pushbench.spend`; an
    episode that would pass it ends as ``terminated_by: "token_cap"``).

    The record is the environment's :meth:`episode_record` (plus the controller's section) with
    ``controller``, ``policy`` (its ``label`` included) and ``key`` fields; ``label`` is an
    explicit policy label (else derived from name and params). It holds no wall-clock time, so
    the same arguments give byte-identical metric fields.
    """
    env = _make_env(task_id, controller, budget)
    try:
        pol = _make_policy(policy, seed, policy_params)
        obs, _ = env.reset(seed=seed, options=env.unwrapped.reset_options(instance))
        pol.reset(obs)
        failure: PolicyError | None = None
        try:
            with spend.episode_limits(max_episode_tokens):
                if hasattr(pol, "drive"):  # a policy owning its loop (LangGraph) steps env itself
                    pol.drive(env)
                else:
                    done = False
                    while not done:
                        obs, done = _step(env, pol.act(obs))
        except PolicyError as e:  # the model backend failed for good: not an agent failure
            failure = e
        record = env.get_wrapper_attr("episode_record")()
    finally:
        env.close()
    finish_record(
        record,
        pol,
        task_id,
        controller,
        seed,
        instance,
        label,
        failure,
        None if isinstance(policy, Policy) else policy_params,
    )
    return record


_ENV_LOCK = threading.Lock()


def serialised(fn, *args, **kwargs):
    """Run ``fn`` holding the environment-construction lock (first loads fill shared caches)."""
    with _ENV_LOCK:
        return fn(*args, **kwargs)


async def arun_episode(
    task_id: str,
    controller: str,
    policy: str | Policy,
    seed: int,
    instance: str | None = None,
    budget: int | None = None,
    policy_params: dict | None = None,
    label: str | None = None,
    max_episode_tokens: int | None = None,
) -> dict:
    """:func:`run_episode` without blocking the event loop (same record, same key).

    Uses the policy's ``adrive`` (a policy owning its loop) or ``aact`` when it has them, else
    its ``act`` inline.
    """
    env = await asyncio.to_thread(serialised, _make_env, task_id, controller, budget)
    pol: Policy | None = None
    failure: PolicyError | None = None
    try:
        pol = _make_policy(policy, seed, policy_params)
        # The first reset of an instance loads its index (tens of ms): keep it off the loop.
        obs, _ = await asyncio.to_thread(
            serialised, env.reset, seed=seed, options=env.unwrapped.reset_options(instance)
        )
        pol.reset(obs)
        try:
            with spend.episode_limits(max_episode_tokens):  # this task's own context
                if hasattr(pol, "adrive"):
                    await pol.adrive(env)
                else:
                    aact = getattr(pol, "aact", None)
                    done = False
                    while not done:
                        obs, done = _step(
                            env, await aact(obs) if aact is not None else pol.act(obs)
                        )
        except PolicyError as e:
            failure = e
        record = env.get_wrapper_attr("episode_record")()
    finally:
        env.close()
        if pol is not None and hasattr(pol, "aclose"):
            await pol.aclose()
    finish_record(
        record,
        pol,
        task_id,
        controller,
        seed,
        instance,
        label,
        failure,
        None if isinstance(policy, Policy) else policy_params,
    )
    return record


async def run_many(
    episodes: Iterable[dict[str, Any]], concurrency: int = 8
) -> AsyncIterator[tuple[int, dict | BaseException]]:
    """Run ``arun_episode(**kwargs)`` for each kwargs dict, at most ``concurrency`` at once.

    Yields ``(index, record)`` or ``(index, exception)`` in completion order.
    """
    sem = asyncio.Semaphore(max(1, int(concurrency)))

    async def one(i: int, kwargs: dict) -> tuple[int, dict | BaseException]:
        async with sem:
            try:
                return i, await arun_episode(**kwargs)
            except Exception as e:  # noqa: BLE001 - reported to the caller, never lost
                return i, e

    tasks = [asyncio.ensure_future(one(i, kw)) for i, kw in enumerate(episodes)]
    try:
        for fut in asyncio.as_completed(tasks):
            yield await fut
    finally:
        for t in tasks:
            t.cancel()


def finish_record(
    record: dict,
    pol: Policy,
    task_id: str,
    controller: str,
    seed: int,
    instance: str | None,
    label: str | None,
    failure: PolicyError | None,
    requested_params: dict | None,
) -> None:
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
    record["key"] = episode_key(
        task_id, controller, pol.name, seed, instance, params=requested_params, label=label
    )
