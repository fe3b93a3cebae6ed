"""Context budget as an experimental factor: ``full - trimmed`` on matched LLM episodes.

An LLM record stores its context budget (``llm.context_tokens``: an integer, or ``None`` for the
full-context arm) and how many turns the harness dropped (``llm.dropped_turns``). Two arms of
one agent differ only in that budget, so their labels differ only in ``context=...``
(:func:`pushbench.policies.identity.derived_label`). :func:`context_deltas` pairs them through
the one paired-delta engine (:func:`.deltas.delta_table`): per ``(family, agent, controller)``,
where *agent* is the label without the budget, each trimmed arm against the full arm on the
same ``(target, task, instance, seed)``, per target and pooled, with the engine's interval,
sign-flip p-value and Holm adjustment. ``dropped_turns`` is one of the metrics, so the table
also shows how much the trimmed arm actually lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from ..policies.identity import derived_label
from .deltas import STAT_COLUMNS, delta_table
from .frame import episodes_frame, fallback_key, versioned

FULL = "full"
CONTEXT_METRICS = ("success", "valid_count", "duplicate_submit_rate", "dropped_turns")
COLUMNS = [
    "family",
    "agent",
    "controller",
    "pooled",
    "target",
    "n_targets",
    "context_a",
    "context_b",
    *STAT_COLUMNS,
]


def context_of(ep: dict[str, Any]) -> str | None:
    """``"full"``, the budget as text, or None for a line that is not an LLM episode."""
    llm = ep.get("llm")
    if not isinstance(llm, dict) or "context_tokens" not in llm:
        return None
    return FULL if llm["context_tokens"] is None else str(int(llm["context_tokens"]))


def agent_of(ep: dict[str, Any]) -> str:
    """The policy's identity without its context budget (explicit labels are kept as given)."""
    policy = ep.get("policy")
    p: dict[str, Any] = policy if isinstance(policy, dict) else {}
    params = {k: v for k, v in (p.get("params") or {}).items() if k != "context_tokens"}
    return derived_label(str(p.get("name") or "unknown"), params)


def context_frame(episodes: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """The LLM episodes as an episodes frame plus ``context``, ``agent``, ``dropped_turns``."""
    eps = [ep for ep in episodes if context_of(ep) is not None]
    if not eps:
        return pd.DataFrame()
    df = episodes_frame(eps)
    extra = {
        ep.get("key") or fallback_key(ep): (
            context_of(ep),
            agent_of(ep),
            float(ep["llm"].get("dropped_turns") or 0),
        )
        for ep in eps
    }
    df["context"] = [extra[k][0] for k in df["key"]]
    df["agent"] = [extra[k][1] for k in df["key"]]
    df["dropped_turns"] = [extra[k][2] for k in df["key"]]
    return df


def context_deltas(
    episodes: Iterable[dict[str, Any]],
    metrics: Sequence[str] = CONTEXT_METRICS,
    seed: int = 0,
    n_resamples: int = 9999,
) -> pd.DataFrame:
    """Rows ``trimmed - full`` (``context_a`` a budget, ``context_b`` ``"full"``); empty when no
    agent ran both a full and a trimmed arm."""
    df = context_frame(episodes)
    if df.empty or df["context"].nunique() < 2:
        return pd.DataFrame(columns=COLUMNS)

    def pairs(names: list[str]) -> list[tuple[str, str]]:
        return [(c, FULL) for c in sorted(names) if c != FULL] if FULL in names else []

    # a frame that mixes family versions gets one stratum (and Holm family) per version
    return delta_table(
        df,
        side="context",
        strata=versioned(["family", "agent", "controller"], df),
        pairs=pairs,
        metrics=list(metrics),
        seed=seed,
        n_resamples=n_resamples,
        a_col="context_a",
        b_col="context_b",
    )[versioned(COLUMNS, df)]
