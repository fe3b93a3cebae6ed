"""Executors: where episodes run. A small interface so a cluster engine can slot in later.

An executor takes episode specs and yields :class:`EpisodeResult` objects **as they finish**
(not in submission order)::

    with make_executor("process", workers=2) as ex:
        for result in ex.run(specs):
            ...

The consumer may stop iterating at any time (Ctrl-C, an error): closing the iterator stops new
submissions. :meth:`Executor.drain` then yields results that finish afterwards, so a graceful
stop can still keep work already in flight. The worker-side function is
:func:`run_spec`: it never raises for an episode failure; an exception becomes a result with
``error`` set (the traceback text), so one broken episode cannot kill a sweep.

Results carry the small per-episode line and the full record already serialised and gzipped
(``trace_gz``) so compression happens in the workers and results ship cheaply between processes
or machines. Register a new executor in :data:`EXECUTORS` (name -> class taking ``workers``).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Iterator

from ... import limits, spend
from ...records import encode_trace, episode_line
from ..costcap import CostGate
from ..spec import EpisodeResult, EpisodeSpec


def run_spec(spec: EpisodeSpec) -> EpisodeResult:
    """Run one episode; any exception becomes an error result (never raised)."""
    try:
        from ..episode import run_episode

        record = run_episode(
            spec.task_id,
            spec.controller,
            spec.policy,
            spec.seed,
            instance=spec.instance,
            budget=spec.budget,
            policy_params=dict(spec.policy_params) or None,
            label=spec.policy_label,
            max_episode_tokens=spec.max_episode_tokens,
        )
        record["key"] = spec.key  # the spec's key is the resume authority (includes params)
        return EpisodeResult(spec, line=episode_line(record), trace_gz=encode_trace(record))
    except Exception:  # noqa: BLE001 - recorded, reported separately, never kills the sweep
        return EpisodeResult(spec, error=traceback.format_exc())


async def arun_spec(spec: EpisodeSpec) -> EpisodeResult:
    """Async twin of :func:`run_spec` (never raises)."""
    try:
        from ..episode import arun_episode

        record = await arun_episode(
            spec.task_id,
            spec.controller,
            spec.policy,
            spec.seed,
            instance=spec.instance,
            budget=spec.budget,
            policy_params=dict(spec.policy_params) or None,
            label=spec.policy_label,
            max_episode_tokens=spec.max_episode_tokens,
        )
        record["key"] = spec.key
        return EpisodeResult(spec, line=episode_line(record), trace_gz=encode_trace(record))
    except Exception:  # noqa: BLE001 - recorded, reported separately, never kills the sweep
        return EpisodeResult(spec, error=traceback.format_exc())


class Executor:
    """Base: subclasses implement :meth:`run` (and :meth:`drain` if work can be in flight)."""

    name = "executor"
    # the cost cap's admission (pushbench/runner/costcap.py): asked before an episode starts,
    # told when it comes back; None: no cap
    gate: CostGate | None = None

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, int(workers))

    def admit(self, spec: EpisodeSpec) -> bool:
        """Whether ``spec`` may start now (always, without a cost cap)."""
        return self.gate is None or self.gate.admit(spec)

    def settled(self, result: EpisodeResult) -> EpisodeResult:
        """Book ``result`` with the cost cap before it is handed on; returns it."""
        if self.gate is not None:
            self.gate.settle(result)
        return result

    def install_meter(self, meter: spend.Meter | None) -> Callable[[], None]:
        """Make ``meter`` (the run's cost cap) govern the model calls of the episodes this
        executor runs; return the function that undoes it. In-process executors install it
        here (this default); others override it."""
        if meter is None:
            return lambda: None
        previous = spend.install(meter)

        def undo() -> None:
            spend.install(previous)

        return undo

    def run(self, specs: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        raise NotImplementedError

    def drain(self) -> Iterator[EpisodeResult]:
        """After :meth:`run` was closed early: results of work still in flight, as it finishes."""
        return iter(())

    @property
    def in_flight(self) -> int:
        return 0

    def shutdown(self) -> None:
        """Stop everything now (in-flight work is abandoned)."""

    def enforce_caps(self, caps: dict[str, int] | None) -> Callable[[], None]:
        """Enforce ``max_inflight_per_endpoint`` ``caps`` for the episodes this executor runs;
        return the function that undoes it. Executors running episodes in this process use a
        :class:`~pushbench.limits.LocalLimiter` (this default); others override it."""
        if not caps:
            return lambda: None
        previous = limits.install(limits.LocalLimiter(caps))

        def undo() -> None:
            limits.install(previous)

        return undo

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
