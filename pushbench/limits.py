"""Caps on in-flight model calls per endpoint, shared by every episode an executor runs.

An LLM sweep with many episodes in flight can exceed an API's rate limit; the experiment field
``max_inflight_per_endpoint`` caps how many model calls may wait on one endpoint at once::

    max_inflight_per_endpoint:
      "https://api.openai.com/v1": 16     # this base URL: at most 16 calls at once
      "*": 4                              # every other endpoint: 4 each

The model client wraps each HTTP attempt (not the retry back-off sleeps) in
:func:`model_call` / :func:`amodel_call`. Both are no-ops unless a limiter is installed in the
process, so code outside a sweep pays nothing. Which limiter is installed depends on where
episodes run (each executor's ``enforce_caps``, :mod:`pushbench.runner.executors`):

* in-process and ``async`` executors: a :class:`LocalLimiter` in this process (a counting
  semaphore per endpoint that serves threads and asyncio tasks alike);
* ``ray``: a Ray actor holding the semaphores, consulted by every worker of the cluster
  (:mod:`pushbench.runner.executors.ray`);
* ``process`` pool: each worker runs one episode and so one model call at a time; the pool can
  only honour a cap of at least its worker count (checked when the experiment is validated).

Endpoints are named by their base URL (:func:`endpoint_key`: ``None`` is the SDK's default,
trailing slashes are ignored).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Protocol

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
ANY = "*"  # the cap for endpoints without an entry of their own


def endpoint_key(base_url: str | None) -> str:
    """The name an endpoint is capped under: its base URL without trailing ``/``.

    ``None`` means what the ``openai`` SDK would use: ``$OPENAI_BASE_URL`` or the OpenAI API.
    """
    url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL
    return url.strip().rstrip("/")


def cap_for(caps: dict[str, int], key: str) -> int | None:
    """The cap of endpoint ``key`` under ``caps`` (its own entry, else ``"*"``, else none)."""
    for k, v in caps.items():
        if k != ANY and endpoint_key(k) == key:
            return int(v)
    return int(caps[ANY]) if ANY in caps else None


class Limiter(Protocol):
    """What :func:`install` accepts: a sync and an async context manager per endpoint key."""

    def slot(self, key: str):  # -> ContextManager[None]
        ...

    def aslot(self, key: str):  # -> AsyncContextManager[None]
        ...


_installed: Limiter | None = None


def install(limiter: Limiter | None) -> Limiter | None:
    """Make ``limiter`` govern :func:`model_call` in this process; return the previous one."""
    global _installed
    previous, _installed = _installed, limiter
    return previous


def installed() -> Limiter | None:
    return _installed


@contextmanager
def model_call(base_url: str | None) -> Iterator[None]:
    """Hold a slot of ``base_url``'s cap around one blocking model call (no-op if uncapped)."""
    limiter = _installed
    if limiter is None:
        yield
        return
    with limiter.slot(endpoint_key(base_url)):
        yield


@asynccontextmanager
async def amodel_call(base_url: str | None) -> AsyncIterator[None]:
    """Async twin of :func:`model_call` (waiting never blocks the event loop)."""
    limiter = _installed
    if limiter is None:
        yield
        return
    async with limiter.aslot(endpoint_key(base_url)):
        yield


class LocalLimiter:
    """Per-endpoint counting semaphores for one process, usable from threads and event loops.

    A released slot is handed directly to the longest waiter (FIFO), whether it waits in a
    thread or in an asyncio task, so no waiter starves. ``stats()`` reports each endpoint's
    cap, current and peak in-flight calls, and calls served.
    """

    def __init__(self, caps: dict[str, int]) -> None:
        self.caps = dict(caps)
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        self._peak: dict[str, int] = {}
        self._calls: dict[str, int] = {}
        self._waiters: dict[str, deque] = {}

    def _take(self, key: str) -> None:  # under the lock
        self._held[key] = self._held.get(key, 0) + 1
        self._peak[key] = max(self._peak.get(key, 0), self._held[key])
        self._calls[key] = self._calls.get(key, 0) + 1

    def _try_or_queue(self, key: str, waiter) -> bool:
        """Take a slot now (``True``) or queue ``waiter`` for a hand-off (``False``)."""
        cap = cap_for(self.caps, key)
        with self._lock:
            q = self._waiters.setdefault(key, deque())
            if cap is None or (self._held.get(key, 0) < cap and not q):
                self._take(key)
                return True
            q.append(waiter)
            return False

    def release(self, key: str) -> None:
        with self._lock:
            self._held[key] -= 1
            q = self._waiters.get(key)
            if not q:
                return
            waiter = q.popleft()
            self._take(key)  # the slot passes straight to the waiter
        if isinstance(waiter, threading.Event):
            waiter.set()
        else:
            loop, fut = waiter
            loop.call_soon_threadsafe(_resolve, fut)

    def _withdraw(self, key: str, waiter) -> bool:
        """Remove a waiter that gave up; ``False`` if a slot was already handed to it."""
        with self._lock:
            try:
                self._waiters[key].remove(waiter)
                return True
            except ValueError:
                return False

    @contextmanager
    def slot(self, key: str) -> Iterator[None]:
        event = threading.Event()
        if not self._try_or_queue(key, event):
            try:
                event.wait()
            except BaseException:  # interrupted while waiting: give the slot back if we got it
                if not self._withdraw(key, event):
                    self.release(key)
                raise
        try:
            yield
        finally:
            self.release(key)

    @asynccontextmanager
    async def aslot(self, key: str) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        waiter = (loop, loop.create_future())
        if not self._try_or_queue(key, waiter):
            try:
                await waiter[1]
            except BaseException:  # cancelled while waiting
                if not self._withdraw(key, waiter):
                    self.release(key)
                raise
        try:
            yield
        finally:
            self.release(key)

    def stats(self) -> dict[str, dict]:
        with self._lock:
            return {
                k: {
                    "cap": cap_for(self.caps, k),
                    "in_flight": self._held.get(k, 0),
                    "peak": self._peak.get(k, 0),
                    "calls": self._calls.get(k, 0),
                }
                for k in sorted(self._calls)
            }


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def check_caps(caps: dict[str, int]) -> list[str]:
    """Problems with a ``max_inflight_per_endpoint`` mapping (empty list: fine)."""
    problems = []
    for k, v in caps.items():
        if not isinstance(k, str) or not k.strip():
            problems.append(f"endpoint {k!r}: use a base URL or '*'")
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            problems.append(f"endpoint {k!r}: the cap must be an integer >= 1, got {v!r}")
    return problems


def pool_problem(workers: int, low: int) -> str:
    return (
        f"max_inflight_per_endpoint allows {low} call(s) at once on some endpoint, but the "
        f"process pool runs {workers} workers that cannot share a limiter: use --workers "
        f"{low} or fewer, --executor async (with --concurrency) or --executor ray"
    )
