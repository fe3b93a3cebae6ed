"""Shared pytest fixtures for PushBench.

The snapshots are built once per session (a no-op when CI already ran
``pushbench snapshots build``). Add further shared fixtures below.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests (hypothesis): a modest default so the suite stays fast; ``ci`` runs more
# examples with a fixed seed derivation (reproducible in CI); ``thorough`` for a long local
# hunt. Choose with HYPOTHESIS_PROFILE=ci|thorough (the default is ``default``).
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("default", max_examples=60, deadline=None, suppress_health_check=_QUIET)
settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=_QUIET,
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=_QUIET
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

SNAPSHOTS = ("requests", "flask", "pytest")


@pytest.fixture(scope="session", autouse=True)
def snapshot_roots() -> dict[str, Path]:
    """Build (or find) the three pinned snapshots; name -> snapshot root."""
    from pushbench import snapshots

    return {name: snapshots.ensure(name) for name in SNAPSHOTS}


@contextlib.contextmanager
def temporary_home(root: Path):
    """A fresh ``PUSHBENCH_HOME`` under ``root`` for the duration (own signing key, own locks).

    Built snapshots, indexes and other cache entries of the current home are borrowed through
    symlinks (nothing is rebuilt); ``keys/`` is not, so the installation key is this home's.
    Subprocesses started meanwhile inherit it through the environment.
    """
    from pushbench import paths

    real = paths.home()
    home = root / "pushbench-home"
    home.mkdir(mode=0o700, parents=True)
    for entry in real.iterdir():
        if entry.name not in ("keys", "locks") and not entry.name.startswith(".private"):
            (home / entry.name).symlink_to(entry)
    saved = os.environ.get("PUSHBENCH_HOME")
    os.environ["PUSHBENCH_HOME"] = str(home)
    try:
        yield home
    finally:
        if saved is None:
            os.environ.pop("PUSHBENCH_HOME", None)
        else:
            os.environ["PUSHBENCH_HOME"] = saved
