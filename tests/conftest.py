"""Shared pytest fixtures for PushBench.

The snapshots are built once per session (a no-op when CI already ran
``pushbench snapshots build``). Add further shared fixtures below.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests (hypothesis): a modest default so the suite stays fast; ``ci`` runs more
# examples with a fixed seed derivation (reproducible in CI); ``thorough`` for a long local
# hunt. Choose with HYPOTHESIS_PROFILE=ci|thorough (the default is ``default``).
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=_QUIET)
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          print_blob=True, suppress_health_check=_QUIET)
settings.register_profile("thorough", max_examples=2000, deadline=None,
                          suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

SNAPSHOTS = ("requests", "flask", "pytest")


@pytest.fixture(scope="session", autouse=True)
def snapshot_roots() -> dict[str, Path]:
    """Build (or find) the three pinned snapshots; name -> snapshot root."""
    from pushbench import snapshots

    return {name: snapshots.ensure(name) for name in SNAPSHOTS}
