"""The asyncio episode driver: many LLM episodes in flight on one event loop.

:func:`arun_episode` is the awaitable twin of :func:`pushbench.runner.episode.run_episode`
(same record, same key, same handling of :class:`~pushbench.policies.errors.PolicyError`): model
calls are awaited (``AsyncOpenAI``), so while one episode waits for its model the loop steps the
others. Environment steps run inline; they are in-process and short (about 0.1 ms for a RepoScan
step), so they do not hold up the loop noticeably; building and resetting the environment (the
first reset of an instance loads its index) runs in a worker thread.

:func:`run_many` runs a list of episodes with at most ``concurrency`` in flight and yields
``(index, record_or_exception)`` as each finishes. The runner's ``async`` executor
(:mod:`pushbench.runner.executors.async_`, ``pushbench run --concurrency N``) is built on it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Iterable

from ... import make
from ..base import Policy
from ..errors import PolicyError


_ENV_LOCK = threading.Lock()


def _serialised(fn, *args, **kwargs):
    """Run ``fn`` holding the environment-construction lock (first loads fill shared caches)."""
    with _ENV_LOCK:
        return fn(*args, **kwargs)


async def _drive(pol: Policy, env, obs: str) -> None:
    if hasattr(pol, "adrive"):
        await pol.adrive(env)
        return
    aact = getattr(pol, "aact", None)
    done = False
    while not done:
        action = await aact(obs) if aact is not None else pol.act(obs)
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated


async def arun_episode(task_id: str, controller: str, policy: str | Policy, seed: int,
                       instance: str | None = None, budget: int | None = None,
                       policy_params: dict | None = None, label: str | None = None) -> dict:
    """Run one episode without blocking the event loop; return the episode record."""
    from ...runner.episode import finish_record
    from .. import make_policy

    env = await asyncio.to_thread(
        _serialised, make, task_id, controller=controller, **({"budget": budget} if budget else {}))
    pol: Policy | None = None
    failure: PolicyError | None = None
    try:
        pol = policy if isinstance(policy, Policy) else make_policy(
            policy, seed=seed, **(policy_params or {}))
        options = {env.unwrapped._instance_option: instance} if instance else None
        # The first reset of an instance loads its index (tens of ms): keep it off the loop.
        obs, _ = await asyncio.to_thread(_serialised, env.reset, seed=seed, options=options)
        pol.reset(obs)
        try:
            await _drive(pol, env, obs)
        except PolicyError as e:
            failure = e
        record = env.get_wrapper_attr("episode_record")()
    finally:
        env.close()
        if pol is not None and hasattr(pol, "aclose"):
            await pol.aclose()
    finish_record(record, pol, task_id, controller, seed, instance, label, failure,
                  None if isinstance(policy, Policy) else policy_params)
    return record


async def run_many(episodes: Iterable[dict[str, Any]], concurrency: int = 8
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
