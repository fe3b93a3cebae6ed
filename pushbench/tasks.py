"""Task manifests (data under ``tasks/``) as validated models, and task-id lookup.

A family manifest lists instances and targets; task ids are derived from them:
``<Family>-<instance>-N<k>`` for one instance and ``<Family>-N<k>`` for the suite, whose reset
seed picks an instance. Manifests are validated with pydantic on load; an unknown task id fails
with close-match suggestions.

User tasks (``pushbench tasks new``) live in ``reposcan.yaml`` files of the user folders
(:mod:`pushbench.userdata`: the cache's ``user/``, then ``$PUSHBENCH_TASKS``), loaded after the
built-ins in that order. Each instance has the built-in instance fields plus its own
``targets`` (and the ``calibration`` it was created with); it gets the ids
``<Prefix>-<instance>-N<k>`` with the family's budget rule, and every user instance with target
``k`` joins the suite ``<Prefix>-user-N<k>``. An instance name or task id defined twice is an
error (:class:`~pushbench.userdata.UserDataError`). :func:`reload` re-reads the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import paths, userdata
from .errors import UnknownNameError, did_you_mean, unknown

TASK_SCHEMA_VERSION = 1

# What an agent sees, per family: observation text, tool schemas, verdict rules, budgets and
# search. Any change to one of them bumps that family's version (Gymnasium's ``-vN`` habit);
# records, traces and bundles carry it, and results of two versions are never pooled.
# Version 2 (issue 27): controller observations changed in every family (a placebo that
# carries only a length, interventions stated in full, the tracker's ``accepted`` list); RepoScan
# search lists ignored terms; DataOps answers of the wrong shape are explained, JSON arrays taken.
FAMILY_VERSIONS: dict[str, int] = {
    "reposcan": 2,
    "dataops": 2,
    "swelite": 2,
    "dataops_public": 1,
}  # issue 30: its own family


def family_version(family: str) -> int:
    """The current version of ``family`` (``reposcan``, ``dataops``, ``swelite`` or
    ``dataops_public``)."""
    try:
        return FAMILY_VERSIONS[family]
    except KeyError:
        raise unknown("family", family, FAMILY_VERSIONS) from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RepoScanInstance(_Strict):
    snapshot: str
    predicate: str
    valid_count: int = Field(gt=0, description="size of the valid set (pinned)")
    valid_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the sorted set")


class UserRepoScanInstance(RepoScanInstance):
    """A user instance: the built-in fields plus its targets and its creation calibration."""

    targets: list[int] = Field(min_length=1)
    calibration: dict[str, Any] | None = None

    @field_validator("targets")
    @classmethod
    def _targets(cls, v: list[int]) -> list[int]:
        if any(t <= 0 for t in v) or len(set(v)) != len(v) or v != sorted(v):
            raise ValueError("targets must be distinct positive integers in increasing order")
        return v


class UserTaskFile(_Strict):
    schema_version: Literal[1]
    family: Literal["reposcan"]
    instances: dict[str, UserRepoScanInstance] = {}


USER_SUITE = "user"
_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


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
    instances: dict[str, dict[str, Any]]


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


@cache
def manifests() -> dict[str, FamilyManifest]:
    """Every family manifest under ``tasks/``, keyed by family name."""
    out = {}
    for f in sorted(paths.data_dir("tasks").glob("*.yaml")):
        m = FamilyManifest.model_validate(yaml.safe_load(f.read_text()))
        out[m.family] = m
    return out


_STAGED: dict[str, UserRepoScanInstance] = {}  # tasks being calibrated (not yet written)


@cache
def user_instances() -> dict[str, tuple[UserRepoScanInstance, str]]:
    """User RepoScan instances in load order: name -> (instance, the file defining it)."""
    out: dict[str, tuple[UserRepoScanInstance, str]] = {}
    builtin = manifests()["reposcan"].instances
    sources = [(d / userdata.TASKS_FILE) for d in userdata.search_dirs()]
    entries = []
    for path in sources:
        raw = userdata.read(path, "instances")
        if raw:
            try:
                entries += [
                    (n, i, str(path)) for n, i in UserTaskFile.model_validate(raw).instances.items()
                ]
            except ValidationError as e:
                raise userdata.UserDataError(
                    f"{path}: not a valid user task file: {_first_error(e)}"
                ) from e
    entries += [(n, i, "(being created)") for n, i in _STAGED.items()]
    for name, inst, where in entries:
        if not _INSTANCE_NAME.match(name) or name in (USER_SUITE, userdata.SHIPPED_SYNTH):
            raise userdata.UserDataError(f"{where}: instance name {name!r} is not allowed")
        if name in builtin or name in out:
            other = "the built-in tasks/reposcan.yaml" if name in builtin else out[name][1]
            raise userdata.UserDataError(
                f"RepoScan instance {name!r} in {where} is already defined in {other}"
            )
        out[name] = (inst, where)
    return out


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"


def reload() -> None:
    """Forget loaded manifests and user tasks (read again on next use)."""
    manifests.cache_clear()
    user_instances.cache_clear()
    all_tasks.cache_clear()
    task_kinds.cache_clear()


@contextmanager
def staged(name: str, instance: UserRepoScanInstance) -> Iterator[None]:
    """Register user instance ``name`` in this process only while the block runs (so it can
    be calibrated before it is written); collisions raise as for written instances."""
    if name in _STAGED:
        raise userdata.UserDataError(f"instance {name!r} is already being created")
    _STAGED[name] = instance
    reload()
    try:
        all_tasks()
        yield
    finally:
        del _STAGED[name]
        reload()


def _is_shipped(where: str) -> bool:
    """Whether a user-instance file is the shipped synthetic folder's (``tasks/synth/``)."""
    return Path(where).parent.resolve() == userdata.shipped_dir().resolve()


def _add(tasks: dict[str, TaskSpec], spec: TaskSpec, where: str) -> None:
    if spec.task_id in tasks:
        raise userdata.UserDataError(
            f"task id {spec.task_id!r} from {where} is already defined; rename the instance"
        )
    tasks[spec.task_id] = spec


@cache
def all_tasks() -> dict[str, TaskSpec]:
    """Every task id: the built-in manifests, then the user instances (:func:`user_instances`)."""
    tasks = builtin_tasks()
    m = manifests()["reposcan"]
    suites: dict[tuple[str, int], list[str]] = {}
    for name, (inst, where) in user_instances().items():
        # the shipped synthetic family has its own suite; everything else is the user's
        suite = userdata.SHIPPED_SYNTH if _is_shipped(where) else USER_SUITE
        for n in inst.targets:
            tid = f"{m.prefix}-{name}-N{n}"
            _add(
                tasks,
                TaskSpec(
                    task_id=tid,
                    family=m.family,
                    entry_point=m.entry_point,
                    target=n,
                    budget=m.budget.for_target(n),
                    instances=(name,),
                ),
                where,
            )
            suites.setdefault((suite, n), []).append(name)
    for (suite, n), names in sorted(suites.items()):
        tid = f"{m.prefix}-{suite}-N{n}"
        _add(
            tasks,
            TaskSpec(
                task_id=tid,
                family=m.family,
                entry_point=m.entry_point,
                target=n,
                budget=m.budget.for_target(n),
                instances=tuple(names),
            ),
            f"the {suite} suite",
        )
    return tasks


def builtin_tasks() -> dict[str, TaskSpec]:
    """The task ids of the shipped manifests only."""
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


TASK_KINDS = ("instance", "suite", "synthetic", "user")


@cache
def task_kinds() -> dict[str, str]:
    """Every task id's kind (one of :data:`TASK_KINDS`).

    ``instance``: a shipped manifest's single-instance task (``RepoScan-pytest-raises-N50``);
    ``suite``: a shipped manifest's suite, whose reset seed picks an instance
    (``RepoScan-N50``); ``synthetic``: the shipped synthetic RepoScan tasks of ``tasks/synth/``
    and their suite (``RepoScan-synth-...``); ``user``: tasks from the user folders and the
    user suite (``RepoScan-user-N<k>``).
    """
    kinds = {}
    for m in manifests().values():
        for n in m.targets:
            kinds.update({f"{m.prefix}-{inst}-N{n}": "instance" for inst in m.instances})
            kinds[f"{m.prefix}-N{n}"] = "suite"
    m = manifests()["reposcan"]
    for name, (inst, where) in user_instances().items():
        kind = "synthetic" if _is_shipped(where) else "user"
        suite = userdata.SHIPPED_SYNTH if kind == "synthetic" else USER_SUITE
        for n in inst.targets:
            kinds[f"{m.prefix}-{name}-N{n}"] = kinds[f"{m.prefix}-{suite}-N{n}"] = kind
    return {tid: kinds[tid] for tid in all_tasks()}


class UnknownTaskKindError(UnknownNameError):
    """A ``kind`` that is not one of :data:`TASK_KINDS`."""


def list_tasks(prefix: str | None = None, kind: str | None = None) -> list[str]:
    """Task ids, sorted: all of them (the default), those starting with ``prefix``, and of
    ``kind`` (one of :data:`TASK_KINDS`, see :func:`task_kinds`; ``None``: every kind). An
    unknown kind raises :class:`UnknownTaskKindError` naming the valid kinds."""
    if kind is not None and kind not in TASK_KINDS:
        raise UnknownTaskKindError(
            f"unknown task kind {kind!r}; the kinds are "
            f"{', '.join(TASK_KINDS)} (or none for every task)"
        )
    kinds = task_kinds() if kind is not None else {}
    return sorted(
        (
            t
            for t in all_tasks()
            if (prefix is None or t.startswith(prefix)) and (kind is None or kinds[t] == kind)
        ),
        key=_natural,
    )


def _natural(task_id: str) -> list[int | str]:
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


def instance_config(family: str, instance: str) -> dict[str, Any]:
    """An instance's manifest fields (built-in, else user); ``KeyError`` if unknown."""
    builtin = manifests()[family].instances
    if instance in builtin:
        return builtin[instance]
    if family == "reposcan" and instance in user_instances():
        return user_instances()[instance][0].model_dump(exclude={"targets", "calibration"})
    raise KeyError(instance)


def task_manifest_digest(task_id: str) -> str:
    """sha256 of what the registry says task ``task_id`` is: its spec (family, entry point,
    target, budget, instances), each instance's manifest fields (a RepoScan instance's valid
    set pin among them) and the pin of every snapshot they name (the source's sha256).

    Two machines agree on the digest exactly when they would build the same task; a bundle
    records it per task id and ``pushbench verify`` refuses a bundle whose digest differs.
    Unknown task ids raise :class:`UnknownTaskError`.
    """
    import hashlib
    import json

    from .snapshots import load_pins

    spec = get_task(task_id)
    instances = {name: instance_config(spec.family, name) for name in spec.instances}
    pins = load_pins()
    snaps = sorted({str(cfg["snapshot"]) for cfg in instances.values() if "snapshot" in cfg})
    body = {
        "task": spec.model_dump(mode="json"),
        "instances": instances,
        "snapshots": {n: pins[n].sha256 if n in pins else None for n in snaps},
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
