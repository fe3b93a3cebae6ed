"""``PushBenchAsyncVectorEnv``: the copies of a vector env in a few worker processes.

Gymnasium's ``AsyncVectorEnv`` gives every copy its own process: each step the parent writes
one pipe message per copy and reads one back, and on a machine with fewer cores than copies a
write wakes a worker that preempts the parent, so the copies mostly run one after another
(issue 31 measured 0.35x of a single-env loop with 8 copies on 2 cores). Here the copies are
cut into ``num_workers`` contiguous slices (default ``min(num_envs, os.cpu_count())``), each a
:class:`~.batch.PushBenchSyncVectorEnv` stepped in turn: one message out and one back per slice
per step. The first slice is stepped in the caller's own process (``caller_slice=True``, the
default, with two slices or more) while the worker processes step theirs: on 2 cores that is two
busy processes instead of three, and that slice's observations and infos are never pickled. A
worker pickles its reply once with ``pickle.dumps`` and sends its copies' infos as they are
(plain dicts pickle about ten times faster than batched arrays); the parent batches all copies'
infos at once. A process waiting for the other side of a pipe polls it for up to ``spin``
seconds (default 1 ms) before it blocks: blocking leaves its CPU idle, and waking an idle
virtual CPU costs more than the wait it saves (measured: bare async 0.66x and 0.48x of a loop
blocking, 0.86x both times spinning; ``docs/performance.md``). ``spin=0`` blocks at once.

Contract: the same as ``SyncVectorEnv`` over the same factories (observations, rewards,
flags, infos, autoreset, ``call``/``get_attr``/``set_attr``), which the tests check copy for
copy; ``step_async``/``step_wait`` split a step as Gymnasium's async env does. An exception in
a worker is raised in the parent as itself (``PushBenchError`` subclasses keep their class);
a worker that dies makes the next call raise ``RuntimeError`` naming it.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import pickle
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .batch import PushBenchSyncVectorEnv, _BatchInfo, place_batch


def _ops(envs: PushBenchSyncVectorEnv, mode: AutoresetMode) -> dict[str, Callable]:
    """What a slice answers: the commands the parent sends, on the slice's sync env."""
    return {
        "step": envs.step
        if mode == AutoresetMode.SAME_STEP
        else functools.partial(_raw_step, envs),
        "reset": lambda kw: envs.reset(**kw),
        "call": lambda d: envs.call(d[0], *d[1], **d[2]),
        "get_attr": envs.get_attr,
        "set_attr": lambda d: envs.set_attr(*d),
    }


def _wait(conn, spin: float) -> None:
    """Poll ``conn`` for up to ``spin`` seconds before the caller blocks in ``recv``: a
    process blocked on a pipe leaves its CPU idle, and waking an idle (virtual) CPU costs more
    than a short poll (``experiments/bench_wakeup.py``: a pipe round trip of 85 us blocking
    against 25 us spinning, on this project's 2-core machines)."""
    if spin > 0 and not conn.poll(0):
        deadline = time.perf_counter() + spin
        while not conn.poll(0) and time.perf_counter() < deadline:
            pass


def _worker(
    conn, parent_ends, env_fns: list[Callable], mode: AutoresetMode, spin: float = 0.0
) -> None:
    # A forked worker inherits the parent's end of its own pipe (and, for later workers, the
    # parent ends of the pipes made before it): closed here, the pipe's only other holder is
    # the parent, so when the parent dies without close() (SIGKILL, os._exit) ``recv`` sees
    # EOF and the worker exits instead of waiting forever.
    for end in parent_ends:
        end.close()
    # messages are pickled here with pickle.dumps: Connection.send builds a ForkingPickler
    # (a Python-level subclass) per message, which costs more than a small slice's pickle
    try:
        envs = PushBenchSyncVectorEnv(env_fns, autoreset_mode=mode)
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send_bytes(_dumps((False, _picklable(e))))
        return
    conn.send_bytes(_dumps((True, None)))
    ops = _ops(envs, mode)
    try:
        while True:
            try:
                _wait(conn, spin)
                cmd, data = pickle.loads(conn.recv_bytes())
            except (EOFError, KeyboardInterrupt):
                break
            if cmd == "close":
                envs.close()
                conn.send_bytes(_dumps((True, None)))
                break
            try:
                reply = _dumps((True, ops[cmd](data)))
            except Exception as e:  # noqa: BLE001 - sent to the parent, which raises it
                reply = _dumps((False, _picklable(e)))
            conn.send_bytes(reply)
    finally:
        conn.close()


def _dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


class _CallerSlice:
    """A slice stepped in the caller's process, behind the same send/recv as a worker's pipe.

    ``send`` only records the command; ``recv`` runs it. The parent sends to every slice
    first and then receives in slice order, so this slice's copies step while the worker
    processes step theirs, and its observations and infos are never pickled."""

    def __init__(self, env_fns: list[Callable], mode: AutoresetMode) -> None:
        self.envs = PushBenchSyncVectorEnv(env_fns, autoreset_mode=mode)
        self._ops = _ops(self.envs, mode)
        self._pending: tuple[str, Any] | None = None

    def send(self, message: tuple[str, Any]) -> None:
        self._pending = message

    def recv(self) -> tuple[bool, Any]:
        assert self._pending is not None, "recv() without send()"
        (cmd, data), self._pending = self._pending, None
        if cmd == "close":
            self.envs.close()
            return True, None
        try:
            return True, self._ops[cmd](data)
        except Exception as e:  # noqa: BLE001 - raised by the parent after every slice answered
            return False, e

    def poll(self, timeout: float | None = None) -> bool:
        return self._pending is not None

    def close(self) -> None:
        self.envs.close()


class _Pipe:
    """The parent's end of a worker's pipe, pickling with ``pickle.dumps`` (see ``_worker``)."""

    def __init__(self, conn, spin: float = 0.0) -> None:
        self.conn, self.spin = conn, spin

    def send(self, message: Any) -> None:
        self.conn.send_bytes(_dumps(message))

    def recv(self) -> Any:
        _wait(self.conn, self.spin)
        return pickle.loads(self.conn.recv_bytes())

    def poll(self, timeout: float | None = None) -> bool:
        return self.conn.poll(timeout)

    def close(self) -> None:
        self.conn.close()


def _raw_step(envs: PushBenchSyncVectorEnv, actions: list) -> tuple:
    """A slice's step as plain Python objects (``None`` marks it unbatched for the parent)."""
    obs, rewards, terms, truncs, infos = envs.step_unbatched(actions)
    return obs, rewards.tolist(), terms.tolist(), truncs.tolist(), infos, None


def _picklable(e: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001 - any pickling failure: send a picklable stand-in
        return RuntimeError(f"{type(e).__name__}: {e}")


def _slices(n: int, workers: int) -> list[tuple[int, int]]:
    """``workers`` contiguous (start, stop) ranges covering ``range(n)``, sizes within one."""
    base, extra = divmod(n, workers)
    out, start = [], 0
    for w in range(workers):
        stop = start + base + (w < extra)
        out.append((start, stop))
        start = stop
    return out


class PushBenchAsyncVectorEnv(_BatchInfo, VectorEnv):
    """Copies stepped in ``num_workers`` slices: the first in the caller's process when
    ``caller_slice`` (and ``num_workers > 1``), the others in worker processes (see the module
    docstring). ``num_workers=num_envs, caller_slice=False`` is Gymnasium's one process per
    copy."""

    def __init__(
        self,
        env_fns: list[Callable],
        autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
        num_workers: int | None = None,
        context: str | None = None,
        shared_memory: bool = False,
        caller_slice: bool = True,
        spin: float = 0.001,
    ) -> None:
        if isinstance(spin, bool) or not isinstance(spin, (int, float)) or not 0 <= spin <= 1:
            raise ValueError(f"spin must be a number of seconds from 0 to 1, got {spin!r}")
        if shared_memory:
            raise ValueError(
                "shared_memory is not supported: observations are text and go through pipes"
            )
        self.num_envs = n = len(env_fns)
        workers = num_workers if num_workers is not None else min(n, os.cpu_count() or 1)
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= n:
            raise ValueError(
                f"num_workers must be a whole number from 1 to {n}, got {num_workers!r}"
            )
        probe = env_fns[0]()
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        self.metadata = {**probe.metadata, "autoreset_mode": autoreset_mode}
        self.render_mode, self.spec = probe.render_mode, probe.spec
        probe.close()
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self.autoreset_mode = autoreset_mode
        self.closed = False
        self._slices = _slices(n, workers)
        self._obs: list[Any] = [None] * n
        self._pipes: list[Any] = [None] * workers
        self._procs: list[Any] = [None] * workers
        ctx = mp.get_context(context)
        local = caller_slice and workers > 1
        try:
            for w, (start, stop) in enumerate(self._slices):
                if w == 0 and local:
                    continue  # built after the workers start: they need not inherit it
                parent, child = ctx.Pipe()
                # the parent ends a forked worker inherits: its own and the earlier workers'
                inherited = [parent, *(p.conn for p in self._pipes if isinstance(p, _Pipe))]
                # Every concrete context has Process; typeshed types get_context(str) as the base.
                proc = ctx.Process(  # type: ignore[attr-defined]
                    target=_worker,
                    args=(child, inherited, env_fns[start:stop], autoreset_mode, spin),
                    name=f"pushbench-vector-{start}-{stop - 1}",
                    daemon=True,
                )
                proc.start()
                child.close()
                self._pipes[w], self._procs[w] = _Pipe(parent, spin), proc
            if local:
                start, stop = self._slices[0]
                self._pipes[0] = _CallerSlice(env_fns[start:stop], autoreset_mode)
            self._waiting = False
            self._receive([w for w, p in enumerate(self._procs) if p is not None])
        except BaseException:
            self.close_extras(terminate=True)
            raise

    # ----- plumbing -------------------------------------------------------------------------
    def _send(self, w: int, cmd: str, data: Any) -> None:
        try:
            self._pipes[w].send((cmd, data))
        except (BrokenPipeError, OSError) as e:
            raise self._dead(w) from e

    def _receive(self, workers) -> list[Any]:
        results, error = [], None
        for w in workers:  # read every answer even after an error: pipes stay in step
            try:
                ok, value = self._pipes[w].recv()
            except (EOFError, OSError):
                ok, value = False, self._dead(w)
            if not ok and error is None:
                error = value
            results.append(value)
        if error is not None:
            raise error
        return results

    def _dead(self, w: int) -> RuntimeError:
        start, stop = self._slices[w]
        proc = self._procs[w]
        return RuntimeError(
            f"vector env worker {w} (copies {start}..{stop - 1}) died "
            f"(exit code {proc.exitcode if proc is not None else None})"
        )

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the vector env is closed")
        if self._waiting:
            raise RuntimeError("step_async was called: call step_wait before anything else")

    def _gather(self, parts: list[tuple], obs_only: bool = False):
        n = self.num_envs
        infos: dict[str, Any] = {}
        for (start, stop), part in zip(self._slices, parts, strict=True):
            self._obs[start:stop] = part[0]
            place_batch(infos, part[-1], start, n)
        return tuple(self._obs), infos

    # ----- the VectorEnv API --------------------------------------------------------------
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ):
        """Reset every copy (or those of ``options["reset_mask"]``); an int seed gives copy i
        ``seed + i``, as Gymnasium's vector envs do. Returns (observations, batched infos)."""
        self._check_open()
        n = self.num_envs
        seeds = (
            [None] * n
            if seed is None
            else [seed + i for i in range(n)]
            if isinstance(seed, int)
            else list(seed)
        )
        if len(seeds) != n:
            raise ValueError(
                f"If seeds are passed as a list the length must match "
                f"num_envs={n} but got length={len(seeds)}."
            )
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is not None and (
            not isinstance(mask, np.ndarray)
            or mask.shape != (n,)
            or mask.dtype != np.bool_
            or not mask.any()
        ):
            raise ValueError(
                f"options['reset_mask'] must be a bool numpy array of shape ({n},) "
                f"with at least one True, got {mask!r}"
            )
        active = [w for w, (a, b) in enumerate(self._slices) if mask is None or mask[a:b].any()]
        for w in active:
            a, b = self._slices[w]
            opts = dict(options, reset_mask=mask[a:b]) if mask is not None else options
            self._send(w, "reset", {"seed": seeds[a:b], "options": opts or None})
        parts = dict(zip(active, self._receive(active), strict=True))
        infos: dict[str, Any] = {}
        for w in active:
            a, b = self._slices[w]
            self._obs[a:b] = parts[w][0]
            place_batch(infos, parts[w][1], a, n)
        return tuple(self._obs), infos

    def step_async(self, actions: Any) -> None:
        """Send one action per copy to the workers; :meth:`step_wait` collects the results."""
        self._check_open()
        actions = actions if isinstance(actions, (list, tuple)) else list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        for w, (a, b) in enumerate(self._slices):
            self._send(w, "step", list(actions[a:b]))
        self._waiting = True

    def step_wait(self):
        """Collect the step sent by :meth:`step_async`: (obs, rewards, terminations,
        truncations, infos) batched as Gymnasium's vector envs batch them."""
        if not self._waiting:
            raise RuntimeError("step_wait without step_async")
        self._waiting = False
        parts = self._receive(range(len(self._pipes)))
        if len(parts[0]) == 6:  # unbatched slices: batch here, all copies at once
            env_infos: list[dict[str, Any]] = []
            for (start, stop), part in zip(self._slices, parts, strict=True):
                self._obs[start:stop] = part[0]
                env_infos += part[4]
            infos = self._batch_infos(env_infos)
            return (
                tuple(self._obs),
                np.array([r for p in parts for r in p[1]], dtype=np.float64),
                np.array([t for p in parts for t in p[2]], dtype=np.bool_),
                np.array([t for p in parts for t in p[3]], dtype=np.bool_),
                infos,
            )
        obs, infos = self._gather(parts)
        return (
            obs,
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]),
            infos,
        )

    def step(self, actions: Any):
        """:meth:`step_async` then :meth:`step_wait`."""
        self.step_async(actions)
        return self.step_wait()

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` (or read attribute ``name``) on every copy, in copy order;
        an exception in a worker is raised here as itself."""
        self._check_open()
        for w in range(len(self._pipes)):
            self._send(w, "call", (name, args, kwargs))
        return tuple(x for part in self._receive(range(len(self._pipes))) for x in part)

    def render(self) -> tuple[Any, ...]:
        """Every copy's ``render()``, in copy order."""
        return self.call("render")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every copy, in copy order."""
        self._check_open()
        for w in range(len(self._pipes)):
            self._send(w, "get_attr", name)
        return tuple(x for part in self._receive(range(len(self._pipes))) for x in part)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set attribute ``name`` on every copy: one value per copy, or one value for all."""
        self._check_open()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"values has length {len(values)}, expected {self.num_envs}")
        for w, (a, b) in enumerate(self._slices):
            self._send(w, "set_attr", (name, list(values[a:b])))
        self._receive(range(len(self._pipes)))

    def close_extras(self, timeout: float | None = 10, terminate: bool = False, **_: Any) -> None:
        for pipe, proc in zip(self._pipes, self._procs, strict=True):
            if pipe is None:  # construction failed before this slice was built
                continue
            if proc is None:  # the caller's own slice
                pipe.close()
                continue
            if not terminate and proc.is_alive():
                try:
                    pipe.send(("close", None))
                    if pipe.poll(timeout):
                        pipe.recv()
                except (OSError, EOFError):
                    pass
            proc.join(timeout if not terminate else 0)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
            pipe.close()
