"""What a run directory says about itself, for the report: experiment, versions, planned work.

:func:`run_info` reads ``manifest.json`` and ``errors.jsonl`` (never ``episodes.jsonl``: the
report reads that) and returns only deterministic facts: no wall-clock time, no paths, no argv.
Versions and the git revision are the **first** invocation's (later invocations that ran under
another revision are listed), so two runs of one experiment at one revision give the same info.
"""

from __future__ import annotations

import json
from pathlib import Path

from .costcap import line_cost
from .outdir import writer_of
from .rundir import CAPPED, ERRORS, MANIFEST, read_lines


def _planned(experiment: dict) -> tuple[list[dict] | None, str | None]:
    """Episodes the manifest's experiment plans (``None`` and the reason if it cannot expand)."""
    from ..policies.identity import policy_label
    from .experiment import ExperimentError, expand, validate

    fields = {k: v for k, v in experiment.items() if k not in ("limit", "episodes")}
    try:
        exp = validate(fields, source="manifest experiment")
        specs = expand(exp, limit=experiment.get("limit"))
    except (ExperimentError, ValueError, KeyError) as e:
        return None, str(e).splitlines()[0]
    return [
        {
            "key": s.key,
            "task_id": s.task_id,
            "instance": s.instance,
            "controller": s.controller,
            "seed": s.seed,
            "policy": policy_label(s.policy, s.policy_params, s.policy_label),
        }
        for s in specs
    ], None


def _distinct(items) -> list:
    out: list = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def run_info(run_dir: str | Path) -> dict | None:
    """Facts about the run in ``run_dir`` (``None`` when it has no manifest, or its manifest
    is an evaluation's or names no one experiment: :mod:`.outdir`).

    Keys: ``experiment`` (name, description), ``packages``, ``git``, ``other_revisions``,
    ``invocations``, ``family_versions`` (the first invocation's ``{family: version}``;
    ``None`` in a manifest written before versions were recorded, whose episodes count as
    version 1) and ``other_family_versions`` (later invocations' that differ from it: resuming
    under another version adds episodes of that version, which the report splits from the
    rest), ``planned`` (episode count), ``planned_episodes`` (``key``, ``task_id``,
    ``instance``, ``controller``, ``policy`` label, ``seed`` per planned episode; ``None`` when
    the experiment no longer expands here, ``plan_problem`` says why), ``raised`` (the newest
    error line per key that raised at least once), ``cost`` (``cap_usd``: the latest
    invocation's cost cap or ``None``; ``capped_episodes`` and ``capped_cost_usd``: the cuts
    at the cost cap in ``capped.jsonl``, not finished but paid for).
    """
    path = Path(run_dir)
    if path.is_file():
        path = path.parent
    file = path / MANIFEST
    if not file.is_file():
        return None
    try:
        manifest = json.loads(file.read_text())
    except ValueError:
        return None
    if not isinstance(manifest, dict):
        return None
    exp = manifest.get("experiment") or {}
    if writer_of(manifest) != "run" and not (isinstance(exp, dict) and "tasks" in exp):
        return None  # an evaluation, or a verification of more than one experiment
    invocations = manifest.get("invocations") or []
    first = invocations[0] if invocations else {}
    git = first.get("git", manifest.get("git"))
    commit = (git or {}).get("commit")
    others = sorted(
        {c for inv in invocations[1:] if (c := (inv.get("git") or {}).get("commit")) is not None}
        - {commit}
    )
    versions = first.get("family_versions")
    other_versions = [
        v
        for v in _distinct(inv.get("family_versions") for inv in invocations[1:])
        if v is not None and v != versions
    ]
    planned, problem = _planned(exp) if exp else (None, "manifest has no experiment")
    raised: dict[str, dict] = {}
    for line in read_lines(path / ERRORS):
        if isinstance(line, dict) and line.get("key"):
            raised[line["key"]] = line
    capped = read_lines(path / CAPPED)
    last = invocations[-1] if invocations else {}
    cap = (last.get("summary") or {}).get(
        "cap_usd", (last.get("arguments") or {}).get("max_cost_usd")
    )
    return {
        "cost": {
            "cap_usd": cap if cap is not None else exp.get("max_cost_usd"),
            "capped_episodes": len(capped),
            "capped_cost_usd": round(sum(line_cost(x) for x in capped), 8),
        },
        "experiment": {"name": exp.get("name"), "description": exp.get("description", "")},
        "packages": first.get("packages", manifest.get("packages")) or {},
        "git": git,
        "other_revisions": others,
        "invocations": len(invocations),
        "family_versions": versions,
        "other_family_versions": other_versions,
        "planned": len(planned) if planned is not None else exp.get("episodes"),
        "planned_episodes": planned,
        "plan_problem": problem,
        "raised": [raised[k] for k in sorted(raised)],
    }
