"""Local executors: episodes one after another in this process, or in a process pool."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection

from ... import limits, spend
from ..spec import EpisodeResult, EpisodeSpec
from .base import Executor, run_spec


class InProcessExecutor(Executor):
    """Run episodes one after another in this process (debuggable, no pickling)."""

    name = "inprocess"

    def run(self, specs: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        for spec in specs:
            if not self.admit(spec):
                return
            yield self.settled(run_spec(spec))


# The cache and the user tasks folder a worker must see: a forkserver keeps the environment it
# was started with, so the parent's current values are passed to every new pool explicitly.
_SHARED_ENV = ("PUSHBENCH_HOME", "PUSHBENCH_TASKS")


def _worker_init(
    parent_alive,
    env: dict[str, str | None] | None = None,
    meter_value=None,
    cap_usd: float | None = None,
) -> None:
    # Ctrl-C goes to the whole process group: the parent decides what stops, not the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent_alive,), daemon=True).start()
    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if meter_value is not None and cap_usd is not None:  # the run's cost cap (both or none)
        spend.install(spend.SharedMeter(cap_usd, meter_value))
    import pushbench  # noqa: F401 - registers the environments (user tasks too) in the worker

    from ... import registration, tasks

    tasks.reload()  # a forkserver may have loaded the task lists under its own environment
    registration.register_all()


def _exit_with_parent(parent_alive) -> None:
    """Exit when the parent dies (SIGKILL included): only it holds the pipe's write end.

    Pool workers otherwise wait forever on their call queue, keeping the terminal's pipes open.
    """
    try:
        parent_alive.recv()
    except (EOFError, OSError):
        pass
    os._exit(1)


def _context() -> mp.context.BaseContext:
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


class LocalPoolExecutor(Executor):
    """A local process pool (``concurrent.futures`` with a forkserver/spawn context).

    At most ``window`` (default ``2 * workers``) episodes are submitted at once, so stopping
    early leaves little queued work and memory stays flat for long sweeps.

    A worker process that dies (OOM kill, segfault) breaks the whole pool: Python fails every
    episode in flight in it, including those running in healthy workers. Those episodes are
    run again **alone**, one at a time, in a fresh pool (nothing else is submitted meanwhile),
    so only the one that kills its worker a second time becomes an error result (``errors.jsonl``;
    it runs again on resume) and the others finish in this invocation. A pool that breaks
    before any episode has come back from any pool is a setup failure (workers cannot start):
    :meth:`run` raises ``RuntimeError`` rather than failing every episode.
    """

    name = "process"

    def __init__(
        self,
        workers: int = 2,
        window: int | None = None,
        fn: Callable[[EpisodeSpec], EpisodeResult] | None = None,
    ) -> None:
        super().__init__(workers)
        self.window = window or 2 * self.workers
        # what a worker runs per spec (default run_spec; must pickle by reference): tests
        # inject worker deaths here, as they do for the Ray executor
        self.fn = fn or run_spec
        self._pool: cf.ProcessPoolExecutor | None = None
        # the parent-alive pipe (write end never written)
        self._alive: Connection | None = None
        self._reader: Connection | None = None
        # future -> (spec, the pool it went to, whether it ran alone in that pool)
        self._futures: dict[cf.Future, tuple[EpisodeSpec, cf.ProcessPoolExecutor, bool]] = {}
        self._suspects: deque[EpisodeSpec] = deque()  # lost with a broken pool: re-run alone
        self._any_ok = False  # an episode came back from some pool: workers can start
        self._meter: tuple | None = None  # (shared mp.Value('d') of the spend, cap) or None
        self._pool_meter: tuple | None = None  # the meter the running pool's workers hold

    def _ensure_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            ctx = _context()
            reader, self._alive = ctx.Pipe(duplex=False)
            meter = self._meter or (None, None)
            self._pool_meter = self._meter
            self._pool = cf.ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=ctx,
                initializer=_worker_init,
                initargs=(reader, {k: os.environ.get(k) for k in _SHARED_ENV}, *meter),
            )
            self._reader = reader  # kept until the pool has started its workers
        return self._pool

    def _pool_broke(self, pool: cf.ProcessPoolExecutor, err: BaseException) -> None:
        """Forget a broken pool (its workers are gone); raise if workers never got going."""
        if pool is not self._pool:
            return
        pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        self._close_pipe()
        if not self._any_ok:
            raise RuntimeError(
                "the process pool's workers died before finishing any episode (see their "
                "output above; a script fed on stdin cannot be re-imported by workers). "
                f"Try --executor inprocess to see the error directly. ({err!r})"
            ) from err

    def _close_pipe(self) -> None:
        for conn in (self._alive, self._reader):
            if conn is not None:
                conn.close()
        self._alive = self._reader = None

    @property
    def in_flight(self) -> int:
        return len(self._futures)

    def _submit(self, spec: EpisodeSpec, alone: bool) -> bool:
        """Submit ``spec`` to the pool (a fresh one if it broke); ``False`` if it broke now."""
        pool = self._ensure_pool()
        try:
            fut = pool.submit(self.fn, spec)
        except cf.process.BrokenProcessPool as e:
            self._pool_broke(pool, e)
            return False
        self._futures[fut] = (spec, pool, alone)
        return True

    def _fill(self, queue: deque) -> None:
        if self._suspects:  # one suspect at a time, alone, until none is left
            if not self._futures and self._submit(self._suspects[0], alone=True):
                self._suspects.popleft()
            return
        while queue and len(self._futures) < self.window:
            if not self.admit(queue[0]):  # the cost cap: schedule nothing more
                queue.clear()
                return
            if self._submit(queue[0], alone=False):
                queue.popleft()

    def _collect(self, done: Iterable[cf.Future]) -> Iterator[EpisodeResult]:
        done = sorted(done, key=lambda f: self._futures[f][0].key)
        # Note any episode that came back before judging the breaks of the same batch.
        if any(not f.cancelled() and f.exception() is None for f in done):
            self._any_ok = True
        for fut in done:
            spec, pool, alone = self._futures.pop(fut)
            try:
                result = fut.result()
            except cf.process.BrokenProcessPool as e:
                self._pool_broke(pool, e)
                if alone:  # it broke a pool on its own: this episode kills its worker
                    yield self.settled(
                        EpisodeResult(
                            spec,
                            error=(
                                "worker process died while running this episode (twice, the second "
                                f"time alone in its pool): {e!r}. It runs again on resume."
                            ),
                        )
                    )
                else:  # maybe only a bystander of another episode's death: run it again
                    self._suspects.append(spec)
                continue
            except cf.CancelledError:
                yield self.settled(EpisodeResult(spec, error="cancelled before it ran"))
                continue
            yield self.settled(result)

    def run(self, specs: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        queue = deque(specs)
        while queue or self._suspects or self._futures:
            self._fill(queue)
            if self._futures:
                done, _ = cf.wait(list(self._futures), return_when=cf.FIRST_COMPLETED)
                yield from self._collect(done)

    def drain(self) -> Iterator[EpisodeResult]:
        """Results of episodes still running. Suspects not yet re-run are not run (like
        episodes never submitted, they run on resume)."""
        while self._futures:
            done, _ = cf.wait(list(self._futures), return_when=cf.FIRST_COMPLETED)
            yield from self._collect(done)

    def shutdown(self) -> None:
        pool, self._pool = self._pool, None
        self._futures.clear()
        self._suspects.clear()
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # abandon running episodes now rather than at interpreter exit
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
        self._close_pipe()

    def install_meter(self, meter: spend.Meter | None) -> Callable[[], None]:
        """Share ``meter``'s spend with every worker (a ``multiprocessing.Value`` handed to the
        workers as they start; an idle pool from an earlier sweep is restarted for it)."""
        if self._pool is not None and (meter is not None or self._pool_meter is not None):
            self.shutdown()  # idle workers started under another meter (or none): restart
        self._meter = (
            None if meter is None else (_context().Value("d", meter.spent_usd), meter.cap_usd)
        )

        def undo() -> None:
            self._meter = None

        return undo

    def enforce_caps(self, caps: dict[str, int] | None) -> Callable[[], None]:
        """Nothing to install: a worker runs one episode, hence one model call, at a time, so
        caps hold as long as none is below the worker count (else ``ValueError``)."""
        if not caps:
            return lambda: None
        low = min(int(v) for v in caps.values())
        if self.workers > low:
            raise ValueError(limits.pool_problem(self.workers, low))
        return lambda: None
