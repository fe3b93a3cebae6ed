"""Code that runs inside Ray workers for the ``ray`` executor (:mod:`.ray_executor`).

Kept apart from the driver side (:mod:`.ray`) so a worker imports only what an episode needs.
``EndpointLimiter`` is the actor behind the cluster-wide ``max_inflight_per_endpoint`` caps.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from ... import limits
from .base import run_spec


class _RayLimiter:
    """The worker's view of the limiter actor (installed by :func:`episode_task`)."""

    def __init__(self, actor, task_id: str, holder: str) -> None:
        self.actor, self.task_id, self.holder = actor, task_id, holder

    def _acquire_ref(self, key: str):
        return self.actor.acquire.remote(key, self.task_id, self.holder)

    def _release(self, lease: int | None) -> None:
        if lease is not None:
            self.actor.release.remote(lease)  # fire and forget: calls from one caller keep order

    @contextmanager
    def slot(self, key: str):
        import ray

        lease = ray.get(self._acquire_ref(key))
        try:
            yield
        finally:
            self._release(lease)

    @asynccontextmanager
    async def aslot(self, key: str):
        lease = await self._acquire_ref(key)
        try:
            yield
        finally:
            self._release(lease)


def episode_task(spec, limiter=None, fn: Callable | None = None):
    """Body of the episode task: ``run_spec(spec)`` (or ``fn``) under the endpoint caps.

    Returns an :class:`~pushbench.runner.spec.EpisodeResult`; an episode's exception is already an
    error
    result there, so anything raised here is a harness failure.
    """
    import ray

    import pushbench  # noqa: F401  - registers the environments in this worker

    if limiter is None:
        return (fn or run_spec)(spec)
    task_id = ray.get_runtime_context().get_task_id()
    assert task_id is not None  # this runs inside a Ray task
    holder = uuid.uuid4().hex
    # a previous attempt of this task may have died holding a slot: begin() returns it
    ray.get(limiter.begin.remote(task_id, holder))
    previous = limits.install(_RayLimiter(limiter, task_id, holder))
    try:
        return (fn or run_spec)(spec)
    finally:
        limits.install(previous)
        # Wait for it: the episode's result must not reach the driver before its slots are back
        # (calls from one caller keep order, so earlier fire-and-forget releases go first).
        ray.get(limiter.end.remote(task_id, holder))


class EndpointLimiter:
    """Ray actor: one asyncio semaphore per endpoint, shared by every worker of the sweep.

    Slots are leases tagged with the Ray task id of the episode holding them. A retried task
    (its worker died, possibly mid-call) calls :meth:`begin`, which returns the slots of earlier
    attempts; the driver calls :meth:`end` for tasks whose every attempt died. So a lost worker
    never leaks a slot.
    """

    def __init__(self, caps: dict[str, int]) -> None:
        self.caps = dict(caps)
        self.sems: dict[str, Any] = {}
        self.leases: dict[int, tuple[str, str, str]] = {}  # lease -> (key, task, holder)
        self.current: dict[str, str] = {}  # task -> holder of its live attempt
        self.ended: set[str] = set()
        self.held: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.next_lease = 0

    def _sem(self, key: str, cap: int):
        import asyncio

        if key not in self.sems:
            self.sems[key] = asyncio.Semaphore(cap)
        return self.sems[key]

    def _drop(self, lease: int) -> None:
        key, _, _ = self.leases.pop(lease)
        self.held[key] -= 1
        self.sems[key].release()

    def _drop_task(self, task: str, keep_holder: str | None = None) -> None:
        for lease, (_, t, h) in list(self.leases.items()):
            if t == task and h != keep_holder:
                self._drop(lease)

    async def begin(self, task: str, holder: str) -> None:
        self.ended.discard(task)
        self.current[task] = holder
        self._drop_task(task, keep_holder=holder)

    async def end(self, task: str, holder: str | None = None) -> None:
        """The attempt ``holder`` of ``task`` finished (``None``: the task is over for good)."""
        if holder is None or self.current.get(task) == holder:
            self.current.pop(task, None)
            self.ended.add(task)
            self._drop_task(task)
        else:
            self._drop_task(task, keep_holder=self.current.get(task))

    async def acquire(self, key: str, task: str, holder: str) -> int | None:
        cap = limits.cap_for(self.caps, key)
        if cap is None:
            return None
        sem = self._sem(key, cap)
        await sem.acquire()
        if task in self.ended or self.current.get(task, holder) != holder:
            sem.release()  # the asking attempt is gone; do not let its slot leak
            return None
        self.next_lease += 1
        self.leases[self.next_lease] = (key, task, holder)
        self.held[key] = self.held.get(key, 0) + 1
        self.peak[key] = max(self.peak.get(key, 0), self.held[key])
        self.calls[key] = self.calls.get(key, 0) + 1
        return self.next_lease

    async def release(self, lease: int) -> None:
        if lease in self.leases:
            self._drop(lease)

    async def stats(self) -> dict[str, dict]:
        return {
            k: {
                "cap": limits.cap_for(self.caps, k),
                "in_flight": self.held.get(k, 0),
                "peak": self.peak.get(k, 0),
                "calls": self.calls.get(k, 0),
            }
            for k in sorted(self.calls)
        }
