"""SIMULATED agents built from a competent base and named, composable failure mechanisms.

Each mechanism (:mod:`.core`, :mod:`.reposcan`, :mod:`.dataops`) is one small class with one
parameter and a docstring naming the LLM behaviour it stands for; :data:`MECHANISMS` maps each
parameter to its class. Agents read observations only as the rendered JSON text
(:mod:`.reading`). The policies (``simulated-base`` and the presets) are in :mod:`.policy`.

Shared (RepoScan and DataOps): ``window`` context-window loss, ``drift`` progress-tally drift,
``misread`` verdict misreading, ``give_up`` premature quitting, ``insist`` status blindness.
RepoScan: ``overbatch`` over-batching, ``repeat_search`` search repetition, ``misjudge``
property misjudgment, ``fabricate`` id fabrication. DataOps: ``skip_verify`` skipped
verification, ``forget_submit`` forgotten submits, ``stuck`` stale re-inspection,
``answer_error`` answer errors, ``notes_loss`` lossy notes memory.
"""

from __future__ import annotations

from . import dataops, reposcan  # noqa: F401  (register their mechanisms)
from .core import REGISTRY as MECHANISMS
from .core import Hooks, Mechanism

__all__ = ["MECHANISMS", "Hooks", "Mechanism"]
