"""``steps_ratio``: steps a successful episode used relative to the ``diligent`` reference.

Definition. For a successful episode on ``(task_id, instance, seed)`` with step budget ``B``::

    steps_ratio = steps_used / steps_used(diligent, controller "standard", same task_id,
                                          instance, seed and budget B)

It is NaN for an episode that did not succeed, and for every episode of a cell where the
reference is unavailable: the diligent agent did not succeed there, the family has no cheap
reference (see below), or the task cannot be built here (unknown task id, snapshot not built).
A ratio of 1 means as few steps as a perfect-books agent with no judgement errors; above 1, the
steps the agent spent on repeated, invalid or unproductive work.

Where the reference comes from. Lines of ``diligent`` (label ``diligent``) under ``standard`` in
the same frame are used when present; otherwise the reference is computed on demand, in process,
with an in-process cache (diligent is deterministic per seed and offline; a RepoScan episode takes
milliseconds and a DataOps one well under a second). Families in :data:`ON_DEMAND_FAMILIES` only:
SWE-lite's reference would run real test suites (minutes per task), so it is NaN unless the run
itself contains diligent episodes. Nothing is computed on demand on a machine whose snapshots are
not built (a report never downloads or builds one): the ratio is NaN there.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from ..metrics import NOT_AGENT_OUTCOMES

REFERENCE_POLICY = "diligent"
REFERENCE_CONTROLLER = "standard"
ON_DEMAND_FAMILIES = ("reposcan", "dataops", "dataops_public")


@lru_cache(maxsize=1)
@lru_cache(maxsize=1024)
def snapshots_ready(task_id: str, instance: str | None) -> bool:
    """The snapshots this task (or its recorded instance) reads are built here: a report never
    downloads or builds one, and an unbuilt snapshot of another task changes nothing."""
    from .. import snapshots, tasks

    try:
        spec = tasks.get_task(task_id)
        names = [instance] if instance else list(spec.instances)
        return all(
            snapshots.info(tasks.instance_config(spec.family, n)["snapshot"]) is not None
            for n in names
        )
    except Exception:  # noqa: BLE001 - unreadable pins or cache, unknown task: no reference
        return False


@lru_cache(maxsize=4096)
def diligent_steps(task_id: str, instance: str | None, seed: int, budget: int | None) -> int | None:
    """Steps the diligent agent used on this task (``None`` if it failed or cannot run here)."""
    from .. import make
    from ..policies import make_policy

    try:
        env = make(
            task_id, controller=REFERENCE_CONTROLLER, **({"budget": int(budget)} if budget else {})
        )
    except Exception:  # noqa: BLE001 - unknown task id, missing snapshot: no reference here
        return None
    try:
        pol = make_policy(REFERENCE_POLICY, seed=seed)
        from ..envs.base import QGPEnv

        base = env.unwrapped
        if not isinstance(base, QGPEnv):  # every PushBench task is one
            return None
        options = base.reset_options(instance)
        obs, _ = env.reset(seed=seed, options=options)
        pol.reset(obs)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(pol.act(obs))
            done = terminated or truncated
        record = env.get_wrapper_attr("episode_record")()
    finally:
        env.close()
    return int(record["steps_used"]) if record["success"] else None


def _cell(row: Any) -> tuple[Any, Any, int, int | None]:
    return (
        row.task_id,
        row.instance,
        int(row.seed) if not pd.isna(row.seed) else 0,
        None if pd.isna(row.budget) else int(row.budget),
    )


def reference_steps(df: pd.DataFrame, on_demand: bool = True) -> pd.Series:
    """The diligent reference steps per row of ``df`` (NaN where unavailable)."""
    if df.empty:
        return pd.Series([], dtype=float, index=df.index)
    known: dict[tuple[Any, Any, int, int | None], float] = {}
    ref = df[
        (df["policy"] == REFERENCE_POLICY)
        & (df["controller"] == REFERENCE_CONTROLLER)
        & ~df["terminated_by"].isin(NOT_AGENT_OUTCOMES)
        & ~df["tampered"]
    ]
    for row in ref.itertuples(index=False):
        known[_cell(row)] = float(row.steps_used) if row.success else math.nan
    out = np.full(len(df), math.nan)
    for i, row in enumerate(df.itertuples(index=False)):
        cell = _cell(row)
        if cell in known:
            out[i] = known[cell]
        elif on_demand and row.family in ON_DEMAND_FAMILIES and row.success:
            # the recorded instance is pinned (a line without one falls back to its task id)
            instance = row.instance if row.instance != row.task_id else None
            if not snapshots_ready(row.task_id, instance):
                continue
            steps = diligent_steps(row.task_id, instance, cell[2], cell[3])
            known[cell] = math.nan if steps is None else float(steps)
            out[i] = known[cell]
    return pd.Series(out, index=df.index)


def steps_ratio(df: pd.DataFrame, on_demand: bool = True) -> pd.Series:
    """``steps_used / reference`` for successful rows, NaN otherwise (module docstring)."""
    if df.empty:
        return pd.Series([], dtype=float, index=df.index)
    ref = reference_steps(df, on_demand=on_demand)
    ratio = df["steps_used"].astype(float) / ref
    return ratio.where(df["success"].astype(bool) & (ref > 0))
