"""Replay: rebuild an episode from its calls through a fresh environment, and judge a record by it.

Records are evidence only where a number follows from what cannot be edited into a better one.
This module is the one place that turns recorded calls back into verdicts, for every family
and for both kinds of run folder (in-process ``pushbench run`` traces and black-box
``pushbench mcp`` run dirs); ``pushbench evaluate`` and ``pushbench verify`` use it.

Contract
    :func:`replay` ``(task_id, controller, seed, steps, instance=None, budget=None)`` builds
    the environment from the task registry (``pushbench.make(task_id, controller)``: family,
    instance list, target, budget and valid-set pin are the registry's, never the record's;
    ``budget`` is only an override the run itself declared), resets it with ``seed`` (and
    ``instance`` pinned only if the run pinned it: a suite's seed otherwise chooses), applies
    each step's recorded out-of-band edits to the fresh workspace, then steps its action. It
    returns a :class:`Replay`: the replayed record (the environment's ``episode_record`` plus
    the controller's section: per-call verdicts, checks, counts, metrics), the observations,
    and ``problems`` (the replay could not follow the steps: calls after the end, an edit it
    refused, an exception). It never raises for bad input except
    :class:`~pushbench.errors.PushBenchError` subclasses for an unknown task or controller.

    :func:`check_episode` ``(record, steps, ...)`` replays and compares: it returns a
    :class:`Checked` with ``reasons`` (the record is tampered: the stored configuration differs
    from the registry, naming the field, or a stored call/summary differs from the replay,
    naming the step and field), ``unverifiable`` (the replay cannot vouch for the record:
    clipped arguments, edits over the size cap, a failed replay) and the replay.
    :func:`adopt` then gives the record to report: calls and every derived number are the
    replayed ones; a stored summary that differed is kept under ``claimed``.

    Steps come from :mod:`pushbench.runner.replay_steps` (``steps_from_trace`` for black-box
    traces, ``steps_from_record`` for in-process records).

Cost per episode (``experiments/bench_verify.py``, 2 loaded cores): RepoScan N10 about 0.03 s;
DataOps-lite N5 about 0.5 s (workspace generated, every checker re-run); SWE-lite N3 about 31 s
(snapshot copied and mutated, the repository tests re-run for every ``run_verifier`` and
``submit``): what the episode's environment cost the first time. Replaying SWE-lite runs the
agent's edited code, as the original episode did.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import metrics
from ..errors import PushBenchError
from ..tasks import get_task
from .replay_steps import Edit, Step, Steps

# Fields of a ledger entry compared with the replay (everything metrics and reports read).
CALL_FIELDS = (
    "step",
    "tool",
    "ok",
    "error_type",
    "args",
    "unclipped",
    "verdicts",
    "check",
    "reward",
    "valid_count",
)
STAND_IN_FIELDS = ("step", "ok", "verdicts", "check", "reward", "valid_count")
SUMMARY_FIELDS = (
    "schema_version",
    "steps_used",
    "terminated_by",
    "reported_count",
    "valid_count",
    "success",
    "progress",
)
CONFIG_FIELDS = ("family", "instance", "target", "budget")
MAX_REASONS = 5


@dataclass
class Replay:
    record: dict
    observations: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class Checked:
    """What :func:`check_episode` found: tampered ``reasons``, ``unverifiable`` reasons and the
    replay (``None`` when none could run)."""

    replay: Replay | None
    reasons: list[str] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)


# ----- edits -------------------------------------------------------------------------------
def _walk(root: str, parts: list[str]) -> int:
    """Descriptor of the folder holding ``parts[-1]`` under ``root``, creating missing folders,
    never following a link (an edit can only land inside ``root``)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nfd = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except FileNotFoundError:
                os.mkdir(name, 0o755, dir_fd=fd)
                nfd = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def apply_edit(root: str, edit: Edit) -> str | None:
    """Apply one recorded edit under ``root``; ``None``, or why it was refused.

    Paths must be relative, ``/``-separated, without ``..``, NUL or backslash; no component
    may be a symlink; only regular files and links are replaced or removed.
    """
    parts = [p for p in edit.path.split("/") if p not in ("", ".")]
    if (
        not parts
        or edit.path.startswith(("/", "~"))
        or ".." in parts
        or any("\x00" in p or "\\" in p for p in parts)
        or len(edit.path) > 1000
    ):
        return f"out-of-band edit path {edit.path[:60]!r} is not a plain relative path"
    try:
        dfd = _walk(root, parts)
    except OSError as e:
        return f"out-of-band edit of {edit.path[:60]}: {e.strerror or e}"
    name = parts[-1]
    try:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            return f"out-of-band edit of {edit.path[:60]}: a folder is in the way"
        if st is not None:
            os.unlink(name, dir_fd=dfd)
        if edit.kind == "deleted":
            return (
                None
                if st is not None
                else f"out-of-band deletion of {edit.path[:60]}: no such file in the replay"
            )
        if edit.link is not None:
            os.symlink(edit.link, name, dir_fd=dfd)
            return None
        fd = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dfd,
        )
        with os.fdopen(fd, "wb") as fh:
            fh.write(edit.data or b"")
        return None
    except OSError as e:
        return f"out-of-band edit of {edit.path[:60]}: {e.strerror or e}"
    finally:
        os.close(dfd)


# ----- the replay ----------------------------------------------------------------------------
def _make(task_id: str, controller: str | None, budget: int | None):
    from .. import make

    kwargs: dict[str, Any] = {"budget": budget} if budget is not None else {}
    if controller in (None, "none"):
        return make(task_id, **kwargs), False
    return make(task_id, controller=controller, **kwargs), True


def replay(
    task_id: str,
    controller: str | None,
    seed: int | None,
    steps: Sequence[Step],
    *,
    instance: str | None = None,
    budget: int | None = None,
) -> Replay:
    """Rebuild the episode of ``steps`` through a fresh environment (see the module contract)."""
    out = Replay(record={})
    try:
        env, wrapped = _make(task_id, controller, budget)
    except PushBenchError:
        raise
    except Exception as e:  # noqa: BLE001 - e.g. a budget override out of range
        out.problems.append(f"no environment: {type(e).__name__}: {str(e)[:80]}")
        return out
    try:
        obs, _ = env.reset(seed=seed, options=env.unwrapped.reset_options(instance))
        base = env.unwrapped
        for i, step in enumerate(steps, 1):
            if base.terminated_by is not None:
                out.problems.append(
                    f"{len(steps) - i + 1} call(s) after the episode ended at step {i - 1}"
                )
                break
            if step.edits:
                ws = getattr(getattr(base, "_ws", None), "root", None)
                if ws is None:
                    out.problems.append(
                        f"step {i}: out-of-band edits for a family without a workspace"
                    )
                else:
                    for edit in step.edits:
                        why = apply_edit(ws, edit)
                        if why:
                            out.problems.append(f"step {i}: {why}")
            obs, *_ = env.step(step.action)
            out.observations.append(obs)
    except Exception as e:  # noqa: BLE001 - a harness failure (a snapshot or test venv missing
        # here, a test run that crashed) is a finding about this replay, not a crash
        out.problems.append(
            f"the replay failed at step {len(out.observations) + 1}: "
            f"{type(e).__name__}: {str(e)[:80]}"
        )
    try:
        out.record = (
            env.get_wrapper_attr("episode_record")() if wrapped else env.unwrapped.episode_record()
        )
    except Exception as e:  # noqa: BLE001 - reset itself failed (e.g. a bad instance pin)
        out.problems.append(f"no replayed record: {type(e).__name__}: {str(e)[:80]}")
    finally:
        env.close()
    if out.record and not wrapped:
        out.record["controller"] = {"name": "none", "components": [], "steps": []}
    return out


# ----- judging a record by its replay ----------------------------------------------------------
def _short(v: Any) -> str:
    text = json.dumps(v, sort_keys=True, default=repr)
    return text if len(text) <= 30 else text[:27] + "..."


def config_reasons(record: dict, task_id: str, budget: int | None = None) -> list[str]:
    """The stored configuration fields that disagree with the registry's task ``task_id``.

    ``budget`` is an override the run declared (else the registry's budget applies). The
    instance is checked against the replay (:func:`check_episode`), which chose it.
    """
    spec = get_task(task_id)
    want = {
        "family": spec.family,
        "target": spec.target,
        "budget": budget if budget is not None else spec.budget,
    }
    return [
        f"{k} {_short(record.get(k))} differs from the registry's {_short(v)}"
        for k, v in want.items()
        if record.get(k) != v or type(record.get(k)) is bool
    ]


def call_reasons(stored: Any, replayed: list[dict], steps: Sequence[Step]) -> list[str]:
    """Per-call differences between the stored calls and the replayed ones (first few)."""
    if not isinstance(stored, list):
        return ["calls is not a list"]
    out: list[str] = []
    if len(stored) != len(replayed):
        out.append(f"{len(stored)} calls stored, {len(replayed)} replayed")
    # strict=False: differing counts are reported above
    for i, (s, r) in enumerate(zip(stored, replayed, strict=False)):
        s = s if isinstance(s, dict) else {}
        fields = STAND_IN_FIELDS if i < len(steps) and steps[i].stand_in else CALL_FIELDS
        bad = [k for k in fields if s.get(k) != r.get(k) or type(s.get(k)) is not type(r.get(k))]
        if bad:
            k = bad[0]
            out.append(f"step {i + 1}: {k} {_short(s.get(k))}, replay {_short(r.get(k))}")
        if len(out) >= MAX_REASONS:
            break
    return out


def summary_reasons(record: dict, replayed: dict) -> list[str]:
    """Stored summary fields, metrics and controller steps that differ from the replay."""
    out = [
        f"stored {k} {_short(record.get(k))}, replay {_short(replayed.get(k))}"
        for k in SUMMARY_FIELDS
        if k in record and record[k] != replayed.get(k)
    ]
    stored_m = record.get("metrics")
    if stored_m is not None and (
        not isinstance(stored_m, dict)
        or any(stored_m.get(k) != v for k, v in replayed["metrics"].items())
    ):
        out.append("stored metrics differ from the replay")
    ctl, rctl = record.get("controller"), replayed.get("controller") or {}
    if isinstance(ctl, dict) and "steps" in ctl and ctl.get("steps") != rctl.get("steps"):
        out.append("stored controller steps differ from the replay")
    return out


def _label_stand_ins(stored: Any, replayed: list[dict], steps: Sequence[Step]) -> None:
    """A stand-in replays a refused call whose text the record does not hold: its replayed
    entry takes the stored tool and error type (labels no number depends on)."""
    for i, r in enumerate(replayed):
        s = stored[i] if isinstance(stored, list) and i < len(stored) else None
        if (
            i < len(steps)
            and steps[i].stand_in
            and isinstance(s, dict)
            and not r.get("ok")
            and s.get("ok") is False
        ):
            if isinstance(s.get("error_type"), str):
                r["error_type"] = s["error_type"][:40]
            if s.get("tool") is None or isinstance(s.get("tool"), str):
                r["tool"] = s.get("tool") if s.get("tool") is None else s["tool"][:40]


def check_episode(
    record: dict,
    steps: Steps,
    *,
    task_id: str,
    controller: str | None,
    seed: int | None,
    instance: str | None = None,
    budget: int | None = None,
    tail_dropped: int = 0,
    observations: Sequence[Any] | None = None,
) -> Checked:
    """Replay ``steps`` with the registry's configuration and compare ``record`` with it.

    ``tail_dropped``: calls at the end of the record that the steps do not cover and that do
    not count (a black-box server killed before it answered its last call); they are compared
    with nothing and left out of the replayed record. ``observations``: what the agent was
    shown per step (a black-box trace keeps it); each must equal the replayed observation
    byte for byte, which binds everything the agent saw (target, budget, instance, progress).
    """
    try:
        reasons = config_reasons(record, task_id, budget)
    except PushBenchError as e:
        return Checked(None, [f"task: {str(e)[:100]}"])
    checked = Checked(None, reasons, list(steps.unverifiable))
    try:
        rep = replay(task_id, controller, seed, steps.steps, instance=instance, budget=budget)
    except PushBenchError as e:
        checked.reasons.append(f"controller: {str(e)[:100]}")
        return checked
    checked.replay = rep
    checked.unverifiable += rep.problems
    if not rep.record:
        return checked
    ended = record.get("terminated_by")
    if ended in metrics.NOT_AGENT_OUTCOMES and rep.record.get("terminated_by") is None:
        # a policy-side end (backend failure, spend cap): not an environment fact to replay
        rep.record["terminated_by"] = ended
        rep.record["metrics"] = {**metrics.episode_metrics(rep.record), "error": True}
    if record.get("instance") != rep.record.get("instance"):
        checked.reasons.append(
            f"instance {_short(record.get('instance'))} differs from the "
            f"replay's {_short(rep.record.get('instance'))}"
        )
    calls = record.get("calls")
    if tail_dropped and isinstance(calls, list) and len(calls) >= tail_dropped:
        calls = calls[: len(calls) - tail_dropped]
    checked.reasons += call_reasons(calls, rep.record["calls"], steps.steps)
    _label_stand_ins(calls, rep.record["calls"], steps.steps)
    # strict=False: a shorter side (dropped tail) is reported by call_reasons
    for i, (want, got) in enumerate(zip(observations or (), rep.observations, strict=False), 1):
        if not steps.steps[i - 1].stand_in and want != got:
            checked.reasons.append(f"step {i}: the observation differs from the replay's")
            break
    if not tail_dropped:
        checked.reasons += summary_reasons(record, rep.record)
    return checked


CLAIM_FIELDS = (
    "valid_count",
    "success",
    "steps_used",
    "terminated_by",
    "reported_count",
    "metrics",
)


def adopt(record: dict, checked: Checked) -> dict:
    """``record`` with the replay's calls and numbers; the stored ones kept under ``claimed``
    when the record is tampered or unverifiable.

    Without a replayed record every number is that of an empty episode (nothing verified).
    Configuration fields become the registry's (through the replay's record).
    """
    rep = checked.replay.record if checked.replay is not None else {}
    out = dict(record)
    if checked.reasons or checked.unverifiable:
        out["claimed"] = {k: record.get(k) for k in CLAIM_FIELDS if k in record}
    if not rep:
        empty: dict[str, Any]
        empty = {
            "calls": [],
            "target": record.get("target"),
            "budget": record.get("budget"),
            "terminated_by": None,
        }
        try:
            m = metrics.episode_metrics(empty)
        except (TypeError, ValueError, KeyError):
            m = metrics.episode_metrics({**empty, "target": 1, "budget": 1})
        out.update(calls=[], progress=[], metrics=m, valid_count=0, success=False, steps_used=0)
        return out
    for k in (
        "schema_version",
        "family",
        "task_id",
        "instance",
        "target",
        "budget",
        "steps_used",
        "terminated_by",
        "valid_count",
        "success",
        "reported_count",
        "final_message",
        "calls",
        "progress",
        "metrics",
    ):
        out[k] = rep.get(k)
    ctl = got if isinstance(got := out.get("controller"), dict) else {}
    out["controller"] = {**ctl, **rep["controller"]}
    return out
