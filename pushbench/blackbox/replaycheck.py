"""Black-box runs judged by replay: configuration from the registry, verdicts from the calls.

:func:`check_run` feeds the counted lines of a run dir's ``trace.jsonl`` (each MCP call as the
agent sent it, plus the out-of-band workspace edits recorded before it) to
:func:`pushbench.runner.replay.check_episode`: a fresh environment of the registry's task
(family, instance list, target, budget and valid set from ``pushbench/tasks.py``; the budget
override and instance pin only as ``run.json`` declares them) replays them with the run's seed
and controller, and every stored call, verdict, count and summary field must equal the replay.
This covers every family: RepoScan verdicts, DataOps and SWE-lite checker runs against the
rebuilt workspace (SWE-lite re-runs the repository tests).

:func:`fingerprint` names a run's evidence (its trace head and its calls): two run dirs with the
same fingerprint are one run counted twice (a copy relabelled with another seed or folder name).

What replay cannot bind are labels that change no verdict: ``condition``, ``agent``, and the
``seed`` or ``controller`` where the replay happens to be the same under another value. Those
are bound by the trace's signature (the signing part of issue 24), not here.
"""

from __future__ import annotations

import hashlib
import json

from ..runner import replay as R
from ..runner.replay_steps import steps_from_trace


def trace_objects(raw: bytes | None) -> list:
    """The complete lines of a trace, parsed (``None`` for a line that is not JSON)."""
    if not raw:
        return []
    out = []
    for line in raw.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break  # a torn last line: never answered, never counted
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(None)
    return out


def _override(run: dict, key: str, kind: type):
    v = run.get(key)
    return v if isinstance(v, kind) and not isinstance(v, bool) else None


def check_run(record: dict, run: dict, trace_raw: bytes | None, facts: dict) -> R.Checked:
    """Replay a black-box run (``run``: its run.json, already type-checked) and compare.

    ``facts`` are the trace audit's (:func:`pushbench.blackbox.audit.trace_reasons`): when the
    server was killed before it wrote its last call's trace line, that call (in the record
    only, never answered) is left out of the replay and of the result.
    """
    lines = trace_objects(trace_raw)
    if trace_raw is None:
        return R.Checked(None, [], ["no trace.jsonl to replay"])
    steps = steps_from_trace(lines)
    calls = got if isinstance(got := record.get("calls"), list) else []
    tail = len(calls) - len(steps.steps)
    tail = 1 if facts.get("trace_missing_last") and tail == 1 else 0
    shown = [
        ln.get("observation") for ln in lines if isinstance(ln, dict) and ln.get("step") is not None
    ]
    return R.check_episode(
        record,
        steps,
        task_id=run["task"],
        controller=run.get("controller"),
        seed=run.get("seed"),
        instance=_override(run, "instance", str),
        budget=_override(run, "budget", int),
        tail_dropped=tail,
        observations=shown,
    )


def fingerprint(record: dict, trace_raw: bytes | None) -> str:
    """sha256 of the trace's head (the digest of its last complete line) and the record's
    calls: equal for copies of one run, whatever their folder name, seed or labels."""
    lines = [ln for ln in (trace_raw or b"").splitlines(keepends=True) if ln.endswith(b"\n")]
    head = hashlib.sha256(lines[-1]).hexdigest() if lines else None
    text = json.dumps([head, record.get("calls")], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def blackbox_section(
    stored: dict, run: dict, run_dir, incomplete: bool, mismatch: list[str], facts: dict
) -> dict:
    """The record's ``blackbox`` section with well-typed counts (the stored one is evidence
    of what the server saw, audited against the trace; garbage in it is dropped here)."""
    bb = dict(stored["blackbox"]) if isinstance(stored.get("blackbox"), dict) else {}
    edits = bb.get("out_of_band_edits")
    bb["out_of_band_edits"] = (
        [e for e in edits if isinstance(e, dict)] if isinstance(edits, list) else []
    )
    count = bb.get("out_of_band_edits_count")
    if not isinstance(count, int) or isinstance(count, bool):
        bb["out_of_band_edits_count"] = len(bb["out_of_band_edits"])
    bb.update(
        run_id=run.get("run_id"),
        run_dir=str(run_dir),
        incomplete=incomplete,
        stored_mismatch=mismatch,
        **facts,
    )
    return bb
