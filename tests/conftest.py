"""Shared pytest fixtures for PushBench.

The snapshots are built once per session (a no-op when CI already ran
``pushbench snapshots build``). Add further shared fixtures below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SNAPSHOTS = ("requests", "flask", "pytest")


@pytest.fixture(scope="session", autouse=True)
def snapshot_roots() -> dict[str, Path]:
    """Build (or find) the three pinned snapshots; name -> snapshot root."""
    from pushbench import snapshots

    return {name: snapshots.ensure(name) for name in SNAPSHOTS}
