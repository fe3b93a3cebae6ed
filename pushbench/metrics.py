"""Per-episode metrics: small pure functions over an episode record's ledger.

Every function reads only the record (``calls``, ``target``, ``budget``, ``terminated_by``,
``reported_count`` and, when a controller wrapped the run, ``controller``), so the same record
always gives the same numbers. Definitions follow DESIGN.md; "submissions" are the verdicts of
well-formed identifiers (``malformed`` entries are counted separately, not as submissions).
"""

from __future__ import annotations

from collections import Counter


def _verdicts(record: dict):
    for call in record["calls"]:
        for ident, verdict in call.get("verdicts") or ():
            yield ident, verdict


def valid_count(record: dict) -> int:
    """Distinct identifiers (work units) the verifier accepted during the episode."""
    return len({i for i, v in _verdicts(record) if v == "accepted"})


def success(record: dict) -> bool:
    """``valid_count >= target`` at episode end."""
    return valid_count(record) >= record["target"]


def submissions(record: dict) -> int:
    """Verdicts on well-formed submissions (accepted, duplicate or rejected)."""
    return sum(1 for _, v in _verdicts(record) if v != "malformed")


def duplicate_submit_rate(record: dict) -> float | None:
    """Submissions of an id already submitted earlier in the episode / all submissions.

    ``None`` when the episode made no submission (undefined, skipped by averages).
    """
    n = submissions(record)
    return None if n == 0 else sum(1 for _, v in _verdicts(record) if v == "duplicate") / n


def valid_per_step(record: dict) -> float:
    """``valid_count / steps_used`` (0 when no step was taken)."""
    steps = len(record["calls"])
    return valid_count(record) / steps if steps else 0.0


def false_completion(record: dict) -> bool:
    """The episode ended with ``final`` while ``valid_count < target``."""
    return record["terminated_by"] == "final" and not success(record)


def premature_stop(record: dict) -> bool:
    """The agent ended the episode (``final`` or ``ask_user``) below target with budget left."""
    return (record["terminated_by"] in ("final", "ask_user") and not success(record)
            and len(record["calls"]) < record["budget"])


def budget_exhausted(record: dict) -> bool:
    """The budget ran out with ``valid_count < target``."""
    return record["terminated_by"] == "budget" and not success(record)


def reported_count_error(record: dict) -> int | None:
    """``|reported_count - valid_count|`` at ``final``; ``None`` if the episode did not end so."""
    over = over_claim(record)
    return None if over is None else abs(over)


def over_claim(record: dict) -> int | None:
    """Signed ``reported_count - valid_count`` at ``final`` (positive: claimed more than done)."""
    if record["terminated_by"] != "final" or record.get("reported_count") is None:
        return None
    return record["reported_count"] - valid_count(record)


def invalid_actions(record: dict) -> int:
    """Calls the environment refused (``ok: false``); each still cost a step."""
    return sum(1 for c in record["calls"] if not c["ok"])


def verifier_recoveries(record: dict) -> int:
    """Work units whose verifier run failed and that passed a later verifier run."""
    failed, recovered = set(), set()
    for call in record["calls"]:
        check = call.get("check")
        if not check:
            continue
        if not check["passed"]:
            failed.add(check["unit"])
        elif check["unit"] in failed:
            recovered.add(check["unit"])
    return len(recovered)


def interventions(record: dict) -> dict[str, int]:
    """Count of controller interventions by kind (empty for an unwrapped run)."""
    steps = (record.get("controller") or {}).get("steps") or []
    return dict(sorted(Counter(k for s in steps for k in s.get("interventions", ())).items()))


def blocked_completions(record: dict) -> int:
    """``final``/``ask_user`` calls the agent proposed below target that a gate blocked."""
    return interventions(record).get("completion_gate", 0)


def episode_metrics(record: dict) -> dict:
    """All per-episode metrics of ``record`` in one JSON-serialisable dict."""
    return {
        "valid_count": valid_count(record),
        "success": success(record),
        "steps_used": len(record["calls"]),
        "submissions": submissions(record),
        "duplicate_submit_rate": duplicate_submit_rate(record),
        "valid_per_step": valid_per_step(record),
        "false_completion": false_completion(record),
        "premature_stop": premature_stop(record),
        "budget_exhausted": budget_exhausted(record),
        "reported_count_error": reported_count_error(record),
        "over_claim": over_claim(record),
        "invalid_actions": invalid_actions(record),
        "verifier_recoveries": verifier_recoveries(record),
        "interventions": interventions(record),
        "blocked_completions": blocked_completions(record),
    }
