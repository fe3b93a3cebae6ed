"""The executor registry: name -> executor class, and :func:`make_executor`.

Register a new executor here (a class taking ``workers`` and its own keyword options); the
experiment validates ``executor`` and ``executor_options`` against this table.
"""

from __future__ import annotations

from ..errors import unknown
from .executors.async_ import AsyncExecutor
from .executors.base import Executor
from .executors.local import InProcessExecutor, LocalPoolExecutor
from .executors.ray import RayExecutor

EXECUTORS: dict[str, type[Executor]] = {
    InProcessExecutor.name: InProcessExecutor,
    LocalPoolExecutor.name: LocalPoolExecutor,
    AsyncExecutor.name: AsyncExecutor,  # asyncio executor for LLM episodes
    RayExecutor.name: RayExecutor,  # Ray cluster executor (pushbench[ray])
}


def make_executor(name: str = "auto", workers: int = 1, **options) -> Executor:
    """Executor ``name`` (``auto``: a process pool when ``workers > 1``, else in-process).

    ``options`` (the experiment's ``executor_options``) go to the executor's constructor.
    An unknown name raises :class:`~pushbench.errors.UnknownNameError` (close matches named).
    """
    if name == "auto":
        name = "process" if workers > 1 else "inprocess"
    if name not in EXECUTORS:
        raise unknown("executor", name, ["auto", *EXECUTORS])
    return EXECUTORS[name](workers=workers, **options)


def apply_caps(executor: Executor, caps: dict[str, int] | None):
    """Enforce ``max_inflight_per_endpoint`` ``caps`` on ``executor``; return the undo function
    (each executor knows how: :meth:`Executor.enforce_caps`)."""
    return executor.enforce_caps(caps)
