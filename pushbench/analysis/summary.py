"""Per-cell summaries: means over episodes per ``(family, policy label, controller, target)``.

Episodes ended by a permanent model-backend failure (``terminated_by == "error"``) are not agent
outcomes: counted in ``n_backend_errors``, left out of every metric. Lines a fresh verifier
disagreed with (``tampered``) are counted in ``n_tampered`` and left out of every metric too.

pass^k (:func:`pass_hat_k`): for one ``(policy label, controller, instance, target)`` cell with
``n`` seeds of which ``c`` succeeded, the probability that ``k`` seeds drawn without replacement
all succeed, ``C(c, k) / C(n, k)`` (the unbiased estimator; with ``k = n`` it is 1 exactly when
all seeds succeeded); cells with fewer than ``k`` seeds are undefined. ``pass^k`` is the mean
over instances, so ``pass^1`` is the success rate with each instance weighted equally (the
success rate itself weighs episodes; the two agree in a balanced design). Columns ``pass^1`` ..
``pass^K`` for the largest seed count ``K`` of the table.
"""

from __future__ import annotations

import math
from math import comb

import pandas as pd

from ..metrics import NOT_AGENT_OUTCOMES, SPEND_CUTS
from .frame import (
    ANYTIME_COLUMNS,
    BOOL_METRICS,
    FLAG_METRICS,
    USAGE_COLUMNS,
    as_frame,
    sort_frame,
    versioned,
)
from .reference import steps_ratio

GROUP = ["family", "policy", "controller", "target"]


def pass_hat_k(successes: int, n: int, k: int) -> float:
    """``C(successes, k) / C(n, k)``; NaN when ``n < k``."""
    if n < k or k < 1:
        return math.nan
    return comb(int(successes), k) / comb(int(n), k)


def pass_k_table(df: pd.DataFrame, group: list[str] = GROUP) -> pd.DataFrame:
    """``pass^1`` .. ``pass^K`` per ``group`` (instances averaged; see the module docstring)."""
    if df.empty:
        return pd.DataFrame(columns=group)
    return _pass_k(df, group).reset_index()


def _pass_k(df: pd.DataFrame, group: list[str]) -> pd.DataFrame:
    """:func:`pass_k_table` indexed by ``group`` as groupby builds it. (``set_index`` would
    code a missing key differently, and such a row would then match no cell of the summary.)"""
    cells = (
        df.groupby(group + ["task_id", "instance"], dropna=False)["success"]
        .agg(["sum", "size"])
        .reset_index()
    )
    cols = [f"pass^{k}" for k in range(1, int(cells["size"].max()) + 1)]
    for k, col in enumerate(cols, start=1):
        cells[col] = [pass_hat_k(c, n, k) for c, n in zip(cells["sum"], cells["size"], strict=True)]
    return cells.groupby(group, dropna=False)[cols].mean()


def summary_table(df: pd.DataFrame, steps_reference: bool = True) -> pd.DataFrame:
    """Per ``(family, policy, controller, target)`` means over scored episodes (and per
    ``family_version`` after ``family`` when the episodes mix versions of a family:
    :func:`pushbench.analysis.frame.versioned`).

    Columns: ``simulated``, ``n_episodes``, ``n_backend_errors``, ``n_tampered``,
    ``n_instances``, ``success_rate``, ``pass^1..K``, ``mean_valid_count``,
    ``duplicate_submit_rate`` (executed submissions) and ``proposed_duplicate_rate`` (what the
    policy proposed, before a controller filtered), ``precision`` and ``mean_rejected``,
    ``valid_per_step``, ``steps_ratio`` (successful episodes, see :mod:`.reference`),
    ``false_completion_rate`` split into ``false_claim_rate`` and ``honest_stop_rate``,
    ``premature_stop_rate``, ``budget_exhausted_rate``, ``mean_reported_count_error`` and
    ``mean_over_claim`` (episodes ended by ``final``), ``mean_gated_over_claim`` (finals a gate
    blocked), ``mean_interventions``, ``mean_blocked_completions``, ``mean_invalid_actions``,
    ``mean_verifier_recoveries``, ``mean_steps_used``, ``mean_steps_to_25pct`` ..
    ``mean_steps_to_100pct`` (over episodes that reached that share of the target),
    ``out_of_band_edits`` (black-box lines that count them) and mean LLM usage; with LLM usage
    also the bill: ``n_spend_cut`` (episodes ended by ``token_cap``/``cost_cap``, excluded from
    the metrics like backend errors), ``total_prompt_tokens``, ``total_completion_tokens`` and
    ``total_cost_usd`` over **every** episode of the cell (spend is spend, whatever the
    outcome) and ``cost_per_success`` (that total over the scored successes; NaN without
    one). Rates are
    fractions in [0, 1]; a mean over no defined value is NaN. ``steps_reference=False`` skips
    computing missing diligent references on demand.
    """
    df = as_frame(df)
    group = versioned(GROUP, df)
    spec = {
        "simulated": ("simulated", "any"),
        "n_episodes": ("key", "size"),
        "n_instances": ("instance", "nunique"),
        "success_rate": ("success", "mean"),
        "mean_valid_count": ("valid_count", "mean"),
        "duplicate_submit_rate": ("duplicate_submit_rate", "mean"),
        "proposed_duplicate_rate": ("proposed_duplicate_rate", "mean"),
        "precision": ("precision", "mean"),
        "mean_rejected": ("rejected", "mean"),
        "valid_per_step": ("valid_per_step", "mean"),
        "steps_ratio": ("steps_ratio", "mean"),
        "false_completion_rate": ("false_completion", "mean"),
        "false_claim_rate": ("false_claim", "mean"),
        "honest_stop_rate": ("honest_stop", "mean"),
        "premature_stop_rate": ("premature_stop", "mean"),
        "budget_exhausted_rate": ("budget_exhausted", "mean"),
        "mean_reported_count_error": ("reported_count_error", "mean"),
        "mean_over_claim": ("over_claim", "mean"),
        "mean_gated_over_claim": ("gated_over_claim", "mean"),
        "mean_interventions": ("interventions_total", "mean"),
        "mean_blocked_completions": ("blocked_completions", "mean"),
        "mean_invalid_actions": ("invalid_actions", "mean"),
        "mean_verifier_recoveries": ("verifier_recoveries", "mean"),
        "mean_steps_used": ("steps_used", "mean"),
        **{f"mean_{c}pct": (c, "mean") for c in ANYTIME_COLUMNS},
    }
    if "out_of_band_edits" in df:
        spec["out_of_band_edits"] = ("out_of_band_edits", "mean")
    for col in USAGE_COLUMNS:
        if col in df:
            spec[f"mean_{col}"] = (col, "mean")
    counts = ["n_backend_errors", "n_tampered"]
    if df.empty:
        return pd.DataFrame(columns=group + ["simulated", "n_episodes"] + counts + list(spec)[2:])
    flags = df.assign(
        n_backend_errors=(df["terminated_by"] == "error").astype(int),
        n_tampered=(df["tampered"] & ~df["terminated_by"].isin(NOT_AGENT_OUTCOMES)).astype(int),
    )
    # Cells are matched by label from here on (column assignment and insert align a Series on
    # the index), and every cell of the table is a group of ``flags``; the row order is set
    # once, by sort_frame at the end.
    n_bad = flags.groupby(group, dropna=False)[counts].sum()
    work = df[~df["terminated_by"].isin(NOT_AGENT_OUTCOMES) & ~df["tampered"]].copy()
    work["steps_ratio"] = steps_ratio(work, on_demand=steps_reference)
    for col in BOOL_METRICS + FLAG_METRICS:
        work[col] = work[col].astype(float)
    if work.empty:  # every episode errored or was tampered: one row per cell, no metric
        out = pd.DataFrame(index=n_bad.index, columns=list(spec), dtype=float)
    else:
        out = work.groupby(group, dropna=False).agg(**spec)
        passk = _pass_k(work, group)
        pos = out.columns.get_loc("success_rate") + 1
        for j, col in enumerate(passk.columns):
            out.insert(pos + j, col, passk[col])
    # keep cells whose every episode errored or was tampered visible, with 0 episodes
    out = out.reindex(out.index.union(n_bad.index))
    out["n_episodes"] = out["n_episodes"].fillna(0).astype(int)
    out["simulated"] = flags.groupby(group, dropna=False)["simulated"].any()
    pos = out.columns.get_loc("n_episodes") + 1
    for j, col in enumerate(counts):
        out.insert(pos + j, col, n_bad[col])
    out["n_instances"] = out["n_instances"].fillna(0).astype(int)
    if "cost_usd" in df:  # the bill (pushbench/runner/costcap.py; docs/llm.md)
        _bill_columns(out, df, work, group)
    out = out.reset_index()
    return sort_frame(out, group)


def _bill_columns(
    out: pd.DataFrame, df: pd.DataFrame, work: pd.DataFrame, group: list[str]
) -> None:
    """Add the bill columns to ``out`` (indexed by ``group``) in place."""
    g = df.assign(_cut=df["terminated_by"].isin(SPEND_CUTS).astype(int)).groupby(
        group, dropna=False
    )
    out["n_spend_cut"] = g["_cut"].sum()  # aligned by cell (see summary_table)
    for col in ("prompt_tokens", "completion_tokens", "cost_usd"):
        out[f"total_{col}"] = g[col].sum(min_count=1).astype(float)
    wins = work.groupby(group, dropna=False)["success"].sum().reindex(out.index)
    out["cost_per_success"] = (out["total_cost_usd"] / wins).where(wins > 0)


def pass_columns(summary: pd.DataFrame) -> list[str]:
    """The ``pass^k`` columns of a summary, in k order."""
    cols = [c for c in summary.columns if c.startswith("pass^")]
    return sorted(cols, key=lambda c: int(c.split("^")[1]))
