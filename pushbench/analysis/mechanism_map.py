"""The mechanism map: paired deltas of every controller against ``standard``, per mechanism.

Rows come from the one paired-delta engine (:func:`pushbench.analysis.deltas.delta_table`):
for each ``(family, policy label)`` (a policy label names the mechanism and its strength) and
each controller ``C``, the row ``C - standard`` on matched episodes, per target and pooled over
targets, with the engine's interval, sign-flip p-value and Holm adjustment (one Holm family per
task family, metric and scope over the testable rows, as in ``paired_deltas.csv``). :func:`heatmap`
draws the pooled rows of one
metric as a mechanism x controller grid: the cell text is the delta, ``*`` marks a Holm-adjusted
p < 0.05, ``+``/``-`` an interval that excludes zero without that, ``=`` a degenerate row (every
instance equal: no interval). Every figure and table says the agents are simulated when they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .deltas import delta_table
from .frame import as_frame, order_controllers

BASELINE = "standard"
MAP_METRICS = ("success", "proposed_duplicate_rate", "steps_used", "valid_count")


def mechanism_deltas(
    episodes: Any,
    metrics: Sequence[str] = MAP_METRICS,
    seed: int = 0,
    n_resamples: int = 1999,
    baseline: str = BASELINE,
) -> pd.DataFrame:
    """``controller - baseline`` rows for every policy label (see the module docstring)."""
    df = as_frame(episodes)

    def pairs(names: list[str]) -> list[tuple[str, str]]:
        if baseline not in names:
            return []
        return [(c, baseline) for c in order_controllers(names) if c != baseline]

    return delta_table(
        df,
        side="controller",
        strata=["family", "policy"],
        pairs=pairs,
        metrics=list(metrics),
        seed=seed,
        n_resamples=n_resamples,
        a_col="controller",
        b_col="baseline",
        extra=lambda g: {"simulated": bool(g["simulated"].any())},
    )


def mark(row: Any) -> str:
    """The significance mark of one delta row (see the module docstring)."""
    if row["degenerate"]:
        return "="
    if row["p_holm"] < 0.05:
        return "*"
    if row["ci_low"] > 0 or row["ci_high"] < 0:
        return "+" if row["ci_low"] > 0 else "-"
    return ""


def grid(
    table: pd.DataFrame, metric: str, family: str, policies: list[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Pooled ``metric`` rows of ``family`` as (delta frame, mark frame), policies x controllers."""
    t = table[(table["metric"] == metric) & table["pooled"] & (table["family"] == family)]
    if t.empty:
        return pd.DataFrame(), pd.DataFrame()
    t = t.assign(mark=t.apply(mark, axis=1))
    rows = policies or list(dict.fromkeys(t["policy"]))
    rows = [p for p in rows if p in set(t["policy"])]
    cols = order_controllers(set(t["controller"]))
    d = t.pivot(index="policy", columns="controller", values="delta").reindex(
        index=rows, columns=cols
    )
    m = t.pivot(index="policy", columns="controller", values="mark").reindex(
        index=rows, columns=cols
    )
    return d, m.fillna("")


def heatmap(
    table: pd.DataFrame,
    metric: str,
    family: str,
    path: str | Path,
    policies: list[str] | None = None,
    title: str = "",
) -> Path | None:
    """Draw the ``metric`` grid of ``family`` to ``path`` (None when there is nothing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d, m = grid(table, metric, family, policies)
    if d.empty:
        return None
    simulated = bool(table[table["family"] == family]["simulated"].any())
    vals = d.to_numpy(dtype=float)
    lim = max(float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 1.0, 1e-9)
    fig, ax = plt.subplots(figsize=(1.0 + 0.85 * d.shape[1], 1.2 + 0.42 * d.shape[0]))
    im = ax.imshow(
        vals,
        cmap="RdBu" if metric != "proposed_duplicate_rate" else "RdBu_r",
        vmin=-lim,
        vmax=lim,
        aspect="auto",
    )
    for i in range(d.shape[0]):
        for j in range(d.shape[1]):
            v = vals[i, j]
            if np.isfinite(v):
                ax.text(j, i, f"{v:+.2f}{m.iat[i, j]}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(d.shape[1]), d.columns, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(d.shape[0]), d.index, fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.03, label=f"{metric}: controller - {BASELINE}")
    sim = " (simulated agents)" if simulated else ""
    ax.set_title(
        (title or f"{family}: paired {metric} delta vs {BASELINE}")
        + sim
        + "\n* Holm p<0.05, +/- 95% interval excludes 0, = degenerate (all equal)",
        fontsize=9,
    )
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
