"""Task lookup, ``make`` and Gymnasium registration (plain data, string entry points)."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import gymnasium as gym

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


__all__ = ["make", "list_tasks", "register_all", "gym_id"]
