"""The ``ray`` executor: one Ray task per episode, on a local Ray instance or a cluster.

``pushbench run EXP.yaml --out DIR --executor ray [--address auto|HOST:PORT|ray://HOST:PORT]``
(install with ``pip install "pushbench[ray]"``). Without an address a private local Ray
instance is started (``--workers N`` CPUs, default all) and stopped afterwards; with one, the
driver joins that cluster. Results stream back as episodes finish (``ray.wait``) and this
process writes them through the same atomic, resumable :class:`~pushbench.runner.rundir.RunDir` as
every other
executor, so results land in the driver's ``--out`` directory and a restarted driver skips
finished episodes.

Failures:

* an episode that raises (agent, policy or harness error) becomes an error result in the worker
  (:func:`~.base.run_spec`), exactly as in the local pool, and is **not** retried;
* a lost worker or node (OOM kill, preemption, segfault) is an infrastructure failure: Ray
  re-runs the task up to ``max_retries`` times (default 1; ``retry_exceptions=False`` so an
  exception is never retried). If every attempt dies the episode becomes an error result of
  this invocation and runs again on resume.

Workers ``import pushbench`` (registering the environments) and need the snapshots: either a
shared cache (``PUSHBENCH_HOME`` on storage every node mounts, built once with
``pushbench snapshots build``) or a local build from the pinned sdists on first use (the lazy
default; ``PUSHBENCH_SDIST_DIR`` or a package index must be reachable). ``PUSHBENCH_*``
variables of the driver, plus those named in ``forward_env``, are passed to the workers through
the job's ``runtime_env``. See ``docs/ray.md``.

Options (experiment field ``executor_options``, or keyword arguments): see :class:`RayOptions`.
"""

from __future__ import annotations

import math
import os
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import ExperimentError
from ..spec import EpisodeResult, EpisodeSpec
from .base import Executor
from .ray_worker import EndpointLimiter, episode_task

NAMESPACE = "pushbench"

INSTALL_HINT = 'the ray executor needs Ray: pip install "pushbench[ray]"'


class RayOptions(BaseModel):
    """``executor_options`` of the ray executor (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(
        default=None,
        description="None: start a local instance; 'auto', 'HOST:PORT' or "
        "'ray://HOST:PORT': join that cluster",
    )
    num_cpus: int | None = Field(
        default=None,
        ge=1,
        description="CPUs of a local instance (default: --workers if > 1, "
        "else all of this machine's)",
    )
    task_cpus: float = Field(
        default=1.0,
        gt=0,
        description="CPUs reserved per episode task; below 1 packs several "
        "waiting LLM episodes on one CPU",
    )
    max_in_flight: int | None = Field(
        default=None,
        ge=1,
        description="episodes submitted but unfinished (default: twice the cluster's task slots)",
    )
    max_retries: int = Field(default=1, ge=0, description="re-runs after a lost worker")
    forward_pushbench_env: bool = Field(
        default=True,
        description="pass the driver's PUSHBENCH_* variables (PUSHBENCH_HOME, "
        "PUSHBENCH_SDIST_DIR) to the workers",
    )
    forward_env: list[str] = Field(
        default_factory=list,
        description="driver environment variables passed to workers "
        "besides PUSHBENCH_* (e.g. the API key variable of LLM policies)",
    )
    runtime_env: dict[str, Any] = Field(
        default_factory=dict, description="extra Ray runtime_env entries (pip, working_dir, ...)"
    )
    object_store_memory: int | None = Field(
        default=512 * 1024**2,
        ge=78 * 1024**2,
        description="object store bytes of a local instance (results are small)",
    )
    log_to_driver: bool = True


def _ray():
    try:
        import ray
    except ImportError:
        raise ExperimentError(INSTALL_HINT) from None
    return ray


# ----- driver side ------------------------------------------------------------------------


class RayExecutor(Executor):
    """Episodes as Ray tasks; ``workers`` sizes a local instance (ignored with an address)."""

    name = "ray"

    def __init__(
        self,
        workers: int = 1,
        fn: Callable[[EpisodeSpec], EpisodeResult] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(workers)
        try:
            self.options = RayOptions(**options)
        except ValidationError as e:
            raise ExperimentError(f"executor_options for the ray executor: {e}") from None
        _ray()  # fail early, with the install hint, if Ray is missing
        self.fn = fn  # what a task runs per spec (default run_spec); tests inject crashes here
        self.caps: dict[str, int] | None = None
        self.limiter: Any = None  # the EndpointLimiter actor handle (Ray types handles loosely)
        self.limiter_stats: dict | None = None
        self._refs: dict[Any, EpisodeSpec] = {}
        self._started_ray = False
        self._task: Any = None  # the Ray remote function of episode_task (made by start())
        self.window = self.options.max_in_flight or 0

    # ----- setup --------------------------------------------------------------------------
    def set_endpoint_caps(self, caps: dict[str, int] | None) -> None:
        """Set (``None``: drop) the caps the cluster-wide limiter actor enforces."""
        if caps is None:
            self._stop_limiter()
        self.caps = caps

    def install_meter(self, meter) -> Callable[[], None]:
        """The cost cap's live per-call check is not shared across a Ray cluster: admission
        (worst cases reserved before an episode starts) still holds the cap, but an episode
        in flight is never cut at it (docs/llm.md "Spend limits")."""
        return lambda: None

    def enforce_caps(self, caps: dict[str, int] | None) -> Callable[[], None]:
        """Caps hold across the cluster through the :class:`EndpointLimiter` actor."""
        if not caps:
            return lambda: None
        self.set_endpoint_caps(dict(caps))
        return lambda: self.set_endpoint_caps(None)

    def _runtime_env(self) -> dict:
        env = {
            k: v
            for k, v in os.environ.items()
            if k.startswith("PUSHBENCH_") and self.options.forward_pushbench_env
        }
        for name in self.options.forward_env:
            if name in os.environ:
                env[name] = os.environ[name]
        rt = dict(self.options.runtime_env)
        if env:
            rt["env_vars"] = {**env, **rt.get("env_vars", {})}
        return rt

    def _connect(self) -> None:
        ray = _ray()
        opts = self.options
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "namespace": NAMESPACE,
                "log_to_driver": opts.log_to_driver,
                "runtime_env": self._runtime_env() or None,
            }
            if opts.address is None:  # a private local instance, never someone else's
                kwargs.update(
                    address="local",
                    include_dashboard=False,
                    num_cpus=opts.num_cpus
                    or (self.workers if self.workers > 1 else os.cpu_count()),
                    object_store_memory=opts.object_store_memory,
                )
            else:
                kwargs["address"] = opts.address
            try:
                ray.init(**kwargs)
            except ConnectionError as e:
                raise ExperimentError(
                    f"cannot join the Ray cluster at {opts.address!r} ({e}). Start one with "
                    "`ray start --head` (docs/ray.md), check --address, or leave --address out "
                    "to run on a local Ray instance"
                ) from None
            self._started_ray = True
        if self._task is None:
            self._task = ray.remote(max_retries=opts.max_retries, retry_exceptions=False)(
                episode_task
            ).options(num_cpus=opts.task_cpus)
        cpus = float(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, int(cpus))  # reported in the sweep summary
        if not opts.max_in_flight:
            self.window = max(2, 2 * math.floor(cpus / opts.task_cpus))
        if self.caps and self.limiter is None:
            self._start_limiter()

    def _start_limiter(self) -> None:
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        actor = ray.remote(EndpointLimiter).options(
            name=f"pushbench-endpoint-limiter-{uuid.uuid4().hex[:8]}",
            namespace=NAMESPACE,
            num_cpus=0,
            max_concurrency=10_000,
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True),
        )
        self.limiter = actor.remote(self.caps)
        ray.get(self.limiter.stats.remote())  # up and running before episodes need it

    def _stop_limiter(self) -> None:
        if self.limiter is None:
            return
        ray = _ray()
        try:
            self.limiter_stats = ray.get(self.limiter.stats.remote(), timeout=10)
            ray.kill(self.limiter)
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass
        self.limiter = None

    # ----- running ------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return len(self._refs)

    def _submit(self, spec: EpisodeSpec) -> None:
        args = (spec, self.limiter, self.fn) if self.fn is not None else (spec, self.limiter)
        self._refs[self._task.remote(*args)] = spec

    def _collect(self, ready: list) -> Iterator[EpisodeResult]:
        ray = _ray()
        from ray.exceptions import RayTaskError

        for ref in sorted(ready, key=lambda r: self._refs[r].key):
            spec = self._refs[ref]
            try:
                result = ray.get(ref)  # (a Ctrl-C here leaves the ref for drain())
            except RayTaskError as e:  # raised by the task body: not retried, like the pool
                result = EpisodeResult(spec, error=str(e))
            except Exception as e:  # noqa: BLE001 - lost worker/node after every retry
                if self.limiter is not None:
                    self.limiter.end.remote(ref.task_id().hex())
                attempts = self.options.max_retries + 1
                result = EpisodeResult(
                    spec,
                    error=f"Ray task failed after {attempts} attempt(s) "
                    f"(infrastructure failure): {type(e).__name__}: {e}\n"
                    + traceback.format_exc(limit=2),
                )
            del self._refs[ref]
            yield self.settled(result)

    def _wait(self) -> list:
        ray = _ray()
        refs = list(self._refs)
        ready, rest = ray.wait(refs, num_returns=1)
        if rest:  # everything else that is already done, in the same round
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        return ready

    def run(self, specs: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        self._connect()
        queue = deque(specs)
        while queue or self._refs:
            while queue and len(self._refs) < self.window:
                if not self.admit(queue[0]):  # the cost cap: schedule nothing more
                    queue.clear()
                    break
                self._submit(queue.popleft())
            if self._refs:
                yield from self._collect(self._wait())

    def drain(self) -> Iterator[EpisodeResult]:
        while self._refs:
            yield from self._collect(self._wait())

    def shutdown(self) -> None:
        try:
            import ray
        except ImportError:
            return
        if ray.is_initialized():
            for ref in list(self._refs):  # abandoned: do not let them run on in the cluster
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001
                    pass
            self._stop_limiter()
            if self._started_ray:
                ray.shutdown()
        self._refs.clear()
        self._started_ray = False
        self._task = None
