"""RepoScan budget calibration and new user tasks (``pushbench tasks new``).

The rule is the one the built-in manifest states and ``experiments/calibrate_budgets.py``
measures: ``budget(N) = base + per_unit * N`` (the family's :class:`~pushbench.tasks.BudgetRule`),
and the scripted ``diligent`` agent (observations only, perfect books), run with an unlimited
budget, must succeed in at most ``budget / HEADROOM`` steps for every target (headroom
``budget / steps >= 1.6``). Beside it, the no-judgement ``exhaustive`` floor runs under the real
budget, so a task author sees whether a task is trivial (the floor solves it) or impossible.

A task is refused (:class:`TaskCreationError`, nothing written) when its predicate matches fewer
than :data:`MIN_VALID` definitions, when a target exceeds ``valid_count / HEADROOM`` (the valid
set cannot support it with headroom: the agent would have to find nearly every valid
definition), or when the diligent agent misses the headroom check for some target.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

from .. import snapshots, tasks, userdata
from ..errors import PushBenchError
from ..families.reposcan import indexer, verifier
from ..families.reposcan.predicates import parse_predicate
from ..registration import register_all
from .episode import run_episode

HEADROOM = 1.6  # budget / diligent steps, for every target
MIN_VALID = math.ceil(HEADROOM * 10)  # the smallest built-in target with headroom: 16
UNLIMITED = 100_000  # the calibration run's budget ("effectively unlimited")
DEFAULT_TARGETS = (10, 25, 50, 100)
POLICY, FLOOR = "diligent", "exhaustive"


class TaskCreationError(PushBenchError, ValueError):
    """A task that cannot be created as asked; the message says why and what would work."""


@dataclass(frozen=True)
class CalibrationRow:
    """One target of one task: what the diligent agent needed and what the floor achieved."""

    task_id: str
    target: int
    budget: int
    steps: int  # diligent, unlimited budget
    success: bool  # diligent reached the target (unlimited budget)
    floor_success: bool  # exhaustive under the real budget
    floor_valid: int  # identifiers the floor got accepted
    floor_steps: int

    @property
    def headroom(self) -> float:
        return self.budget / self.steps if self.steps else math.inf

    @property
    def ok(self) -> bool:
        return self.success and self.headroom >= HEADROOM


def calibrate(
    task_ids: Iterable[str], seed: int = 0, policy: str = POLICY, floor: bool = True
) -> list[CalibrationRow]:
    """Run ``policy`` (unlimited budget) and, if ``floor``, ``exhaustive`` (real budget) on
    each single-instance task id under the ``standard`` controller."""
    rows = []
    for tid in task_ids:
        spec = tasks.get_task(tid)
        rec = run_episode(tid, "standard", policy, seed, budget=UNLIMITED)
        fl = run_episode(tid, "standard", FLOOR, seed) if floor else None
        rows.append(
            CalibrationRow(
                task_id=tid,
                target=spec.target,
                budget=spec.budget,
                steps=rec["steps_used"],
                success=bool(rec["success"]),
                floor_success=bool(fl["success"]) if fl else False,
                floor_valid=int(fl["valid_count"]) if fl else 0,
                floor_steps=int(fl["steps_used"]) if fl else 0,
            )
        )
    return rows


def headroom_problems(rows: Sequence[CalibrationRow]) -> list[str]:
    """One line per row that fails the headroom check (empty: the budget rule fits)."""
    return [
        f"{r.task_id} (N={r.target}): "
        + (
            f"needs {r.steps} steps, budget {r.budget} leaves {r.headroom:.2f}x < "
            f"{HEADROOM}x headroom"
            if r.success
            else f"the agent did not reach {r.target} in {r.steps} steps"
        )
        for r in rows
        if not r.ok
    ]


def support_problems(valid_count: int, targets: Sequence[int]) -> list[str]:
    """Targets the valid set cannot support with headroom (``N > valid_count / HEADROOM``)."""
    most = int(valid_count // HEADROOM)
    return [
        f"N={n} needs at least {math.ceil(HEADROOM * n)} valid definitions "
        f"(the valid set has {valid_count}; the largest target it supports is {most})"
        for n in targets
        if valid_count < HEADROOM * n
    ]


def default_name(snapshot: str, predicate: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", predicate).strip("-").lower()[:60] or "task"
    return f"{snapshot}-{slug}"


@dataclass(frozen=True)
class NewTask:
    name: str
    task_ids: list[str]
    path: str  # the user tasks file it was written to
    universe: int  # definitions in the snapshot
    valid_count: int
    rows: list[CalibrationRow]


def _parse_targets(targets: Iterable[int]) -> list[int]:
    out = sorted(set(int(t) for t in targets))
    if not out or out[0] <= 0:
        raise TaskCreationError("targets must be positive integers, e.g. 10,25,50,100")
    return out


def new_task(
    snapshot: str,
    predicate: str,
    targets: Iterable[int] = DEFAULT_TARGETS,
    name: str | None = None,
    tasks_dir=None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> NewTask:
    """Create, calibrate and record the user RepoScan instance ``name`` (default
    ``<snapshot>-<predicate slug>``) on ``snapshot`` with ``predicate``; see the module doc.

    Writes ``reposcan.yaml`` in :func:`pushbench.userdata.target_dir` only if every check
    passes; the new ids are registered in this process (``make``, Gymnasium) on return.
    """
    say = log or (lambda m: None)
    targets = _parse_targets(targets)
    name = name or default_name(snapshot, predicate)
    if name in tasks.manifests()["reposcan"].instances or name in tasks.user_instances():
        where = (
            tasks.user_instances()[name][1]
            if name in tasks.user_instances()
            else "the built-in tasks/reposcan.yaml"
        )
        raise TaskCreationError(
            f"instance {name!r} is already defined in {where}; choose another --name"
        )
    snapshots.get_pin(snapshot)  # unknown snapshot: the error lists the known ones
    try:
        pred = parse_predicate(predicate)
    except ValueError as e:
        raise TaskCreationError(f"bad predicate {predicate!r}: {e}") from e
    say(f"computing the valid set of {predicate!r} on {snapshot} ...")
    facts = indexer.load_facts(snapshot)
    valid = frozenset(f.ident for f in facts if pred.test(f))
    universe = len({f.ident for f in facts})
    if len(valid) < MIN_VALID:
        raise TaskCreationError(
            f"predicate {predicate!r} matches {len(valid)} of the {universe} definitions of "
            f"{snapshot}; a task needs at least {MIN_VALID}"
        )
    bad = support_problems(len(valid), targets)
    if bad:
        raise TaskCreationError(
            f"targets the valid set cannot support with {HEADROOM}x headroom: " + "; ".join(bad)
        )
    inst = tasks.UserRepoScanInstance(
        snapshot=snapshot,
        predicate=predicate,
        valid_count=len(valid),
        valid_sha256=verifier.digest(valid),
        targets=targets,
    )
    prefix = tasks.manifests()["reposcan"].prefix
    ids = [f"{prefix}-{name}-N{n}" for n in targets]
    say(
        f"{len(valid)} of {universe} definitions are valid; calibrating with {POLICY} and "
        f"{FLOOR} ({len(ids)} targets) ..."
    )
    with tasks.staged(name, inst):
        try:
            rows = calibrate(ids, seed=seed)
        except ValueError as e:  # a scripted agent that cannot read this objective
            raise TaskCreationError(f"calibration failed for predicate {predicate!r}: {e}") from e
    problems = headroom_problems(rows)
    if problems:
        raise TaskCreationError(
            "the budget rule leaves too little headroom: "
            + "; ".join(problems)
            + " (drop these targets)"
        )
    rule = tasks.manifests()["reposcan"].budget
    calibration = {
        "policy": POLICY,
        "seed": seed,
        "headroom_min": HEADROOM,
        "budget_rule": {"base": rule.base, "per_unit": rule.per_unit},
        "universe": universe,
        "per_target": {
            r.target: {k: v for k, v in asdict(r).items() if k not in ("task_id", "target")}
            for r in rows
        },
    }
    entry = inst.model_dump()
    entry["calibration"] = calibration
    folder = userdata.target_dir(tasks_dir)
    path = userdata.record(
        folder, userdata.TASKS_FILE, "instances", name, entry, header={"family": "reposcan"}
    )
    tasks.reload()
    register_all()
    return NewTask(
        name=name,
        task_ids=ids,
        path=str(path),
        universe=universe,
        valid_count=len(valid),
        rows=rows,
    )
