"""What ended the episodes that are not agent outcomes, by cause, in one or two terminal lines.

Backend errors (``terminated_by: "error"``) are grouped by cause from the record's ``error``
(``{type, message, status}``): a request over the model's context window is named so whatever
its type (:func:`pushbench.policies.errors.is_context_error`); other causes by their type.
Spend cuts are counted by limit (``token_cap``, ``cost_cap``; the run's ``capped.jsonl`` cuts
come from the run info). Calls that overflowed the window and were retried trimmed
(``llm.context_retries``) are counted too: they did not end their episode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..metrics import SPEND_CUTS
from ..policies.errors import CONTEXT_KIND, is_context_error

CAUSES = {
    CONTEXT_KIND: "context length exceeded",
    "api_unavailable": "server unavailable after retries",
    "auth": "authentication refused",
    "permission": "permission refused",
    "not_found": "model or URL not found",
    "bad_request": "bad request",
    "unprocessable": "request refused (422)",
    "bad_response": "malformed response",
    "config": "configuration",
    "turn_limit": "turn limit",
    "recursion_limit": "recursion limit",
    "resume_mismatch": "checkpoint mismatch",
    "token_cap": "token cap",
    "cost_cap": "cost cap",
}


def error_cause(error: object) -> str:
    """The cause of one backend error record (``line["error"]``) in words."""
    if not isinstance(error, dict):
        return "unknown"
    kind = str(error.get("type") or "unknown")
    status = error.get("status")
    if kind == CONTEXT_KIND or is_context_error(
        status if isinstance(status, int) else None, str(error.get("message") or "")
    ):
        return CAUSES[CONTEXT_KIND]
    return CAUSES.get(kind, kind)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(
        f"{cause} ({n})" for cause, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def _plural(n: int) -> str:
    return f"{n} episode" + ("" if n == 1 else "s")


def outcome_lines(episodes: Iterable[dict[str, Any]], capped_episodes: int = 0) -> list[str]:
    """At most three short lines: backend errors by cause, spend cuts by limit, context
    retries (none when nothing of the kind happened). ``capped_episodes``: cuts at the cost
    cap kept apart in ``capped.jsonl`` (not in the episode lines)."""
    errors: Counter[str] = Counter()
    cuts: Counter[str] = Counter()
    retries = retried_eps = 0
    for ep in episodes:
        ended = ep.get("terminated_by")
        if ended == "error":
            errors[error_cause(ep.get("error"))] += 1
        elif ended in SPEND_CUTS:
            cuts[CAUSES[ended]] += 1
        llm = ep.get("llm")
        n = llm.get("context_retries") if isinstance(llm, dict) else None
        if isinstance(n, int) and n > 0:
            retries, retried_eps = retries + n, retried_eps + 1
    if capped_episodes:
        cuts[CAUSES["cost_cap"] + " (capped.jsonl, run again on resume)"] += capped_episodes
    out = []
    if errors:
        out.append(
            f"{_plural(sum(errors.values()))} ended with backend errors: "
            f"{_counts(errors)}; excluded from metrics; see report.md"
        )
    if cuts:
        out.append(
            f"{_plural(sum(cuts.values()))} cut by spend limits: {_counts(cuts)}; "
            "excluded from metrics; see report.md"
        )
    if retries:
        out.append(
            f"{retries} model call(s) in {_plural(retried_eps)} exceeded the context "
            "window and were retried with a trimmed context (llm.context_retries)"
        )
    return out
