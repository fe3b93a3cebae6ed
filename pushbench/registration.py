"""Task lookup, ``make`` and Gymnasium registration (plain data, string entry points)."""

from __future__ import annotations

import importlib

import gymnasium as gym

from .tasks import all_tasks, get_task, list_tasks

GYM_NAMESPACE = "PushBench"


def gym_id(task_id: str) -> str:
    return f"{GYM_NAMESPACE}/{task_id}-v0"


def register_all() -> None:
    """Register every task id with Gymnasium (idempotent)."""
    for task_id, spec in all_tasks().items():
        gid = gym_id(task_id)
        if gid not in gym.registry:
            gym.register(id=gid, entry_point=spec.entry_point, kwargs={"task_id": task_id},
                         disable_env_checker=True)


def _load(entry_point: str):
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)


def make(task_id: str, controller: str | None = None, **kwargs) -> gym.Env:
    """Build the environment for ``task_id``, wrapped by the named ``controller`` if given."""
    spec = get_task(task_id)
    env = _load(spec.entry_point)(task_id=task_id, **kwargs)
    if controller is not None:
        from .controllers import wrap

        env = wrap(env, controller)
    return env


__all__ = ["make", "list_tasks", "register_all", "gym_id"]
