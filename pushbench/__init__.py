"""PushBench: a benchmark for quantitative goal persistence (QGP) of LLM agents.

``pushbench.make(task_id, controller=None, **kwargs)`` builds an environment (optionally wrapped
by a named controller); ``pushbench.list_tasks(prefix)`` lists task ids. On import every task is
registered with Gymnasium as ``PushBench/<task_id>-v0``.
"""

from __future__ import annotations

from .registration import list_tasks, make, register_all

__all__ = ["make", "list_tasks", "__version__"]
__version__ = "0.1.0"

register_all()
