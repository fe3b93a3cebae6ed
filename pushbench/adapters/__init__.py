"""Thin adapters that serve PushBench's environments, verifier and metrics to other tools.

* :mod:`.vector` -- Gymnasium vector environments (``pushbench.make_vec``), no extra needed.
* :mod:`.inspect_tasks` -- Inspect AI tasks ``pushbench/reposcan``, ``pushbench/dataops`` and
  ``pushbench/swelite`` (extra ``inspect``; registered through the ``inspect_ai`` entry point).
* :mod:`.openenv_env` -- an OpenEnv environment server and client for LLM RL trainers
  (extra ``openenv``).

Every adapter builds its environment with :func:`pushbench.make` (so the controller wraps
exactly as there) and reads numbers only from the environment's episode record and
:func:`pushbench.metrics.episode_metrics`, so they equal ``pushbench run``'s on the same task,
controller and seed. Only :mod:`.vector` is imported here: the others need their extras.
"""

from __future__ import annotations

from ..vector import make_vec

__all__ = ["make_vec"]
