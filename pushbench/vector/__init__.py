"""Gymnasium vector environments over PushBench tasks (the contract, stated and tested).

Two ways in, for every family (RepoScan, DataOps-lite, SWE-lite):

* ``gymnasium.make_vec("PushBench/RepoScan-N50-v0", num_envs=8, vectorization_mode="sync")``
  (or ``"async"``): bare environments, as ``gymnasium.make`` builds them.
* ``pushbench.make_vec(task_id, num_envs, controller=..., vectorization_mode=...)``: each copy is
  ``pushbench.make(task_id, controller=controller, budget=budget)``, i.e. wrapped exactly as the
  runner wraps it; ``controller=None`` gives the bare environment.

Contract (Gymnasium 1.x vector API):

* Observations are a tuple of ``num_envs`` JSON texts (the single observation space is the
  env's ``Text`` space; the batched space is a ``Tuple`` of them); actions are a sequence of
  ``num_envs`` tool calls (JSON text or dicts); rewards, ``terminated`` and ``truncated`` are
  arrays. ``reset(seed=s)`` seeds copy ``i`` with ``s + i``; ``reset(seed=[s0, s1, ...])``
  seeds each copy explicitly. ``info["qgp"]`` holds the verifier-visible counts of every copy
  (a dict of arrays, with the ``_qgp`` mask). With a controller, ``info["controller"]`` is an
  object array of the copies' controller step entries, each the dict the single env's
  ``info["controller"]`` holds (the same keys and values, ``==`` to it; its type is
  :class:`~.batch.InfoLeaf`, a ``dict`` subclass, so ``json.dumps``, ``pickle`` and
  ``dict(entry)`` work as on any dict; nested values are shared with the env's own entry, so
  copy before changing them). The ``_controller`` mask marks the copies that stepped rather
  than autoreset (their rows are ``None``; on a step where every copy autoresets the key is
  absent). The entries differ in shape from step to step (a proposed call may be an object or
  clipped text; ids appear only on intervened steps), which Gymnasium's info batching would
  merge key by key: the vector envs keep each entry whole. (Until issue 31 each entry was
  JSON text; ``json.loads(text)`` of it equals ``entry`` now.)
* Autoreset is Gymnasium's ``NEXT_STEP`` mode by default: when copy ``i`` terminates or
  truncates at step ``t``, its episode record is still available until the next ``step``
  (``envs.call("episode_record")[i]``); at step ``t + 1`` the action for copy ``i`` is ignored,
  copy ``i`` is reset (with no new seed: its generator continues, and the new record's
  ``seed`` is ``None``) and returns the reset
  observation with reward 0 and ``terminated = truncated = False``. That step costs the new
  episode nothing (its ``steps_used`` stays 0). ``autoreset_mode="disabled"`` leaves finished
  copies (and their records) alone until you reset them with
  ``envs.reset(options={"reset_mask": done})`` (Gymnasium refuses a step with a finished copy
  in this mode); ``"same_step"`` resets in the same step and puts the final
  observation into ``info["final_obs"]``, so the record is gone by the time you see it: use it
  only when records are not needed.
* ``envs.call("episode_record")`` returns one record per copy: the record
  :func:`pushbench.runner.episode.run_episode` writes (before its policy and key fields), with
  the same metrics, so a vectorised run of a policy equals the runner's on the same seeds.

Sync mode is :class:`~.batch.PushBenchSyncVectorEnv` (Gymnasium's ``SyncVectorEnv`` with a
cheaper step and info batching, same results). Async mode is
:class:`~.workers.PushBenchAsyncVectorEnv`: the copies in ``num_workers`` contiguous slices
(default ``min(num_envs, os.cpu_count())``), the first stepped in the caller's process and the
others in one worker process each, observations through pipes (``num_workers=num_envs,
caller_slice=False`` for one process per copy; ``spin`` seconds, default 0.001, of polling a
pipe before blocking on it, 0 to block at once). Issue 31 measured
Gymnasium's one process per copy at 0.35x of a loop over single envs with 8 copies on 2 cores.
Both give every copy exactly the trajectory a single env gives for the same seed and actions
(``tests/test_vector_speed_paths.py``). Calls before the first ``reset`` either work
(``tool_schemas``, ``proposal``, ``render``) or raise :class:`~pushbench.errors.NotResetError`
(``episode_record``, ``step``), in the caller's process for async envs too.

With ``gymnasium.make_vec(..., vectorization_mode="async")`` (Gymnasium's own classes) pass
``vector_kwargs={"shared_memory": False}``: Gymnasium's shared-memory layout for a ``Text``
space is one int32 per character of ``max_length`` (256 Ki here) per copy and step, and with
these spaces it hands back blank strings (Gymnasium 1.4). The factories are picklable
``functools.partial`` objects.
"""

from __future__ import annotations

import functools
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from ..registration import make
from ..tasks import get_task
from .batch import InfoLeaf, PushBenchSyncVectorEnv
from .workers import PushBenchAsyncVectorEnv

MODES = ("sync", "async")
AUTORESET_MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}


def make_vec(
    task_id: str,
    num_envs: int,
    controller: str | None = None,
    vectorization_mode: str = "sync",
    budget: int | None = None,
    autoreset_mode: str | AutoresetMode = "next_step",
    **vector_kwargs: Any,
) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``pushbench.make(task_id, controller=controller, budget=budget)``.

    ``vectorization_mode`` is ``"sync"`` (one process) or ``"async"`` (``num_workers`` slices,
    default ``min(num_envs, cores)``, all but the caller's own in worker processes);
    ``autoreset_mode`` one of ``next_step`` (default), ``same_step``, ``disabled`` (see
    the module docstring). ``vector_kwargs`` go to the vector env class. Unknown task ids,
    controllers, modes and bad budgets raise here, before any worker starts.
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a whole number >= 1, got {num_envs!r}")
    if vectorization_mode not in MODES:
        raise ValueError(f"vectorization_mode must be one of {MODES}, got {vectorization_mode!r}")
    mode = _autoreset(autoreset_mode)
    get_task(task_id)  # unknown ids fail here with close matches
    factory = functools.partial(_make_copy, task_id, controller, budget)
    factory().close()  # bad controller or budget: a clear error in this process
    if vectorization_mode == "sync":
        return PushBenchSyncVectorEnv([factory] * num_envs, autoreset_mode=mode, **vector_kwargs)
    return PushBenchAsyncVectorEnv([factory] * num_envs, autoreset_mode=mode, **vector_kwargs)


class ControllerEntryAsLeaf(gym.Wrapper):
    """``info["controller"]`` as an :class:`~.batch.InfoLeaf` (a shallow copy of the entry, a
    ``dict`` subclass), so the vector envs batch it as one value per copy: the entries differ
    in shape from step to step, which Gymnasium's nested-info batching cannot merge."""

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "controller" in info:
            info = {**info, "controller": InfoLeaf(info["controller"])}
        return obs, reward, terminated, truncated, info


def _make_copy(task_id: str, controller: str | None, budget: int | None) -> gym.Env:
    env = make(task_id, controller=controller, **({"budget": budget} if budget is not None else {}))
    return env if controller is None else ControllerEntryAsLeaf(env)


def _autoreset(mode: str | AutoresetMode) -> AutoresetMode:
    if isinstance(mode, AutoresetMode):
        return mode
    if mode not in AUTORESET_MODES:
        raise ValueError(f"autoreset_mode must be one of {sorted(AUTORESET_MODES)}, got {mode!r}")
    return AUTORESET_MODES[mode]


__all__ = [
    "make_vec",
    "InfoLeaf",
    "MODES",
    "AUTORESET_MODES",
    "PushBenchSyncVectorEnv",
    "PushBenchAsyncVectorEnv",
]
