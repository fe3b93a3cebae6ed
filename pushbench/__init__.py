"""PushBench: a benchmark for quantitative goal persistence (QGP) of LLM agents.

``pushbench.make(task_id, controller=None, **kwargs)`` builds an environment (optionally wrapped
by a named controller); ``pushbench.list_tasks(prefix, kind=None)`` lists task ids (``kind``:
instance, suite, synthetic or user). On import every task is registered with Gymnasium as
``PushBench/<task_id>-v0``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .registration import list_tasks, make, register_all

if TYPE_CHECKING:  # the annotation only: pushbench.vector is imported on first use
    from gymnasium.vector import VectorEnv


def make_vec(
    task_id: str, num_envs: int, controller: str | None = None, **kwargs: Any
) -> VectorEnv[Any, Any, Any]:
    """``num_envs`` copies of ``make(task_id, controller)`` as a Gymnasium vector env
    (:func:`pushbench.vector.make_vec`)."""
    from .vector import make_vec as _make_vec

    return _make_vec(task_id, num_envs, controller=controller, **kwargs)


__all__ = ["make", "make_vec", "list_tasks", "__version__"]
__version__ = "0.1.0"

register_all()
