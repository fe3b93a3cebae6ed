"""Thin adapters that serve PushBench's environments, verifier and metrics to other tools.

* :mod:`.vector` -- Gymnasium vector environments (``pushbench.make_vec``), no extra needed.
* :mod:`.inspect_tasks` -- Inspect AI tasks ``pushbench/reposcan``, ``pushbench/dataops`` and
  ``pushbench/swelite`` (extra ``inspect``; registered through the ``inspect_ai`` entry point).
* :mod:`.openenv_env` -- an OpenEnv environment server and client for LLM RL trainers
  (extra ``openenv``).
* :mod:`.envserver` -- that server at scale (``pushbench serve-env``: bounded sessions, idle
  timeout, K local workers), :mod:`.envserver_ray` as a Ray Serve deployment (extra
  ``ray-serve``), :mod:`.envserver_load` seeded action streams and sessions for the benchmark.

Every adapter builds its environment with :func:`pushbench.make` (so the controller wraps
exactly as there) and reads numbers only from the environment's episode record and
:func:`pushbench.metrics.episode_metrics`, so they equal ``pushbench run``'s on the same task,
controller and seed. Only :mod:`.vector` is imported here: the others need their extras.
"""

from __future__ import annotations

from ..vector import make_vec

__all__ = ["make_vec"]
