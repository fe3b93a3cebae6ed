"""Task manifests (data under ``tasks/``) as validated models, and task-id lookup.

A family manifest lists instances and targets; task ids are derived from them:
``<Family>-<instance>-N<k>`` for one instance and ``<Family>-N<k>`` for the suite, whose reset
seed picks an instance. Manifests are validated with pydantic on load; an unknown task id fails
with close-match suggestions.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from . import paths
from .errors import UnknownNameError, did_you_mean

TASK_SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RepoScanInstance(_Strict):
    snapshot: str
    predicate: str
    valid_count: int = Field(gt=0, description="size of the valid set (pinned)")
    valid_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the sorted set")


class BudgetRule(_Strict):
    """Step budget for a target: ``base + per_unit * N`` (calibration in the manifest header)."""

    base: int = Field(ge=1)
    per_unit: float = Field(gt=0)

    def for_target(self, target: int) -> int:
        return int(round(self.base + self.per_unit * target))


class FamilyManifest(_Strict):
    schema_version: Literal[1]
    family: str
    prefix: str
    entry_point: str
    targets: list[int]
    budget: BudgetRule
    instances: dict[str, dict]


class TaskSpec(_Strict):
    """One task: a family, a target, a budget and either one instance or the suite's list."""

    task_id: str
    family: str
    entry_point: str
    target: int = Field(gt=0)
    budget: int = Field(gt=0)
    instances: tuple[str, ...]  # one for single tasks, all of the family for suites

    @property
    def is_suite(self) -> bool:
        return len(self.instances) > 1


@lru_cache(maxsize=None)
def manifests() -> dict[str, FamilyManifest]:
    """Every family manifest under ``tasks/``, keyed by family name."""
    out = {}
    for f in sorted(paths.data_dir("tasks").glob("*.yaml")):
        m = FamilyManifest.model_validate(yaml.safe_load(f.read_text()))
        out[m.family] = m
    return out


@lru_cache(maxsize=None)
def all_tasks() -> dict[str, TaskSpec]:
    tasks: dict[str, TaskSpec] = {}
    for m in manifests().values():
        names = tuple(m.instances)
        for n in m.targets:
            budget = m.budget.for_target(n)
            common = dict(family=m.family, entry_point=m.entry_point, target=n, budget=budget)
            for inst in names:
                tid = f"{m.prefix}-{inst}-N{n}"
                tasks[tid] = TaskSpec(task_id=tid, instances=(inst,), **common)
            tid = f"{m.prefix}-N{n}"
            tasks[tid] = TaskSpec(task_id=tid, instances=names, **common)
    return tasks


def list_tasks(prefix: str | None = None) -> list[str]:
    """All task ids (optionally those starting with ``prefix``), sorted."""
    return sorted((t for t in all_tasks() if prefix is None or t.startswith(prefix)),
                  key=_natural)


def _natural(task_id: str) -> list:
    # "RepoScan-N10" after "RepoScan-N5": compare digit runs as numbers.
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", task_id)]


class UnknownTaskError(UnknownNameError):
    """An unknown task id (a ``KeyError``, printed without quotes)."""


def get_task(task_id: str) -> TaskSpec:
    """The :class:`TaskSpec` for ``task_id``; unknown ids raise with close matches."""
    tasks = all_tasks()
    if task_id in tasks:
        return tasks[task_id]
    hint = did_you_mean(task_id, tasks, n=5, cutoff=0.5)
    raise UnknownTaskError(
        f"unknown task id {task_id!r}.{hint} (`pushbench tasks` lists all {len(tasks)} ids)"
    )


def instance_config(family: str, instance: str) -> dict:
    return manifests()[family].instances[instance]
