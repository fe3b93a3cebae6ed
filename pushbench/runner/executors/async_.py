"""The ``async`` executor: many episodes in flight on one asyncio event loop.

For LLM policies an episode spends nearly all its time waiting for the model, so processes are
the wrong unit of parallelism: this executor runs up to ``workers`` episodes concurrently
(``pushbench run --concurrency N`` is ``--executor async --workers N``) on one event loop in a
background thread, using the policies' async paths (``aact`` / ``adrive`` over ``AsyncOpenAI``).
Offline policies work too (their ``act`` runs inline). Results are the same
:class:`~pushbench.runner.spec.EpisodeResult` objects as the other executors produce, in
completion order; an exception becomes an error result and never stops the sweep.

Stopping early (closing the :meth:`run` iterator) starts no new episode; :meth:`drain` yields the
ones still in flight; :meth:`shutdown` cancels them.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterable, Iterator

from ..spec import EpisodeResult, EpisodeSpec
from .base import Executor, arun_spec

_DONE = object()


class AsyncExecutor(Executor):
    """Up to ``workers`` episodes concurrently on one event loop (a background thread)."""

    name = "async"

    def __init__(self, workers: int = 8) -> None:
        super().__init__(workers)
        self._results: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task] = []
        self._stop = threading.Event()
        self._running = 0
        self._finished = True

    @property
    def in_flight(self) -> int:
        return self._running

    async def _main(self, specs: list[EpisodeSpec]) -> None:
        sem = asyncio.Semaphore(self.workers)

        async def one(spec: EpisodeSpec) -> None:
            async with sem:
                if self._stop.is_set() or not self.admit(spec):
                    return
                self._running += 1
                try:
                    self._results.put(self.settled(await arun_spec(spec)))
                finally:
                    self._running -= 1

        self._tasks = [asyncio.ensure_future(one(s)) for s in specs]
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            self._results.put(_DONE)

    def _start(self, specs: list[EpisodeSpec]) -> None:
        self._finished = False
        self._stop.clear()

        def target() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._main(specs))
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=target, name="pushbench-async", daemon=True)
        self._thread.start()

    def _next(self, timeout: float | None = None):
        item = self._results.get(timeout=timeout)
        if item is _DONE:
            self._finished = True
        return item

    def run(self, specs: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        self._start(list(specs))
        try:
            while True:
                item = self._next()
                if item is _DONE:
                    return
                yield item
        finally:
            self._stop.set()  # closed early: start nothing new

    def drain(self) -> Iterator[EpisodeResult]:
        while not self._finished:
            item = self._next()
            if item is not _DONE:
                yield item

    def shutdown(self) -> None:
        self._stop.set()
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            for t in list(self._tasks):
                try:
                    loop.call_soon_threadsafe(t.cancel)
                except RuntimeError:  # the loop finished meanwhile: nothing left to cancel
                    break
            thread.join(timeout=10)
        self._thread = None
        self._loop = None
