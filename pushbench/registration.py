"""Task lookup, ``make`` and Gymnasium registration (plain data, string entry points)."""

from __future__ import annotations

import functools
import importlib
import json
import sys
from typing import Any

import gymnasium as gym

from .envs.base import QGPEnv
from .errors import PushBenchError
from .tasks import all_tasks, builtin_tasks, get_task, list_tasks

GYM_NAMESPACE = "PushBench"


def gym_id(task_id: str) -> str:
    """The Gymnasium id of a task: ``PushBench/<task_id>-v0``."""
    return f"{GYM_NAMESPACE}/{task_id}-v0"


def register_all() -> None:
    """Register every task id with Gymnasium (idempotent), user tasks included.

    A user tasks or pins file that cannot be loaded does not stop ``import pushbench``: the
    built-in ids are registered, a one-line warning goes to stderr, and using any task id
    raises the file's error."""
    try:
        specs = all_tasks()
    except PushBenchError as e:
        print(f"[pushbench] user tasks not loaded: {e}", file=sys.stderr, flush=True)
        specs = builtin_tasks()
    for task_id, spec in specs.items():
        gid = gym_id(task_id)
        if gid not in gym.registry:
            gym.register(
                id=gid,
                entry_point=spec.entry_point,
                kwargs={"task_id": task_id},
                disable_env_checker=True,
            )


def _load(entry_point: str) -> Any:
    """The object ``module:attr`` names (an environment class or factory)."""
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


def make(task_id: str, controller: str | None = None, **kwargs: Any) -> gym.Env[Any, Any]:
    """Build the environment for ``task_id``, wrapped by the named ``controller`` if given."""
    spec = get_task(task_id)
    env: gym.Env[Any, Any] = _load(spec.entry_point)(task_id=task_id, **kwargs)
    if controller is not None:
        from .controllers import wrap

        try:
            env = wrap(env, controller)
        except BaseException:  # e.g. a controller out of scope for the family: free the env
            env.close()
            raise
    return env


def sample_calls(task_id: str, seed: int, n: int) -> list[dict[str, Any]]:
    """``n`` seeded well-formed non-terminal calls for ``task_id`` (``{"tool": name, ...}``, as
    ``env.step`` takes them once JSON-encoded): samples of the environment's own action space,
    without ``final`` and ``ask_user`` so episodes run to their budget. The same seed gives the
    same list (the space is built once per process and reseeded per call); not for concurrent
    use from several threads. The benchmarks' fixed action streams come from here."""
    space = _action_space(task_id)
    space.seed(seed)
    out: list[dict[str, Any]] = []
    while len(out) < n:
        call = json.loads(space.sample())
        if call["tool"] not in QGPEnv.TERMINAL_TOOLS:
            out.append(call)
    return out


@functools.cache
def _action_space(task_id: str) -> gym.Space[Any]:
    # building the env costs more than sampling a stream (512 sessions per server row)
    env = make(task_id)
    try:
        return env.unwrapped.action_space
    finally:
        env.close()


__all__ = ["make", "list_tasks", "register_all", "gym_id", "sample_calls"]
