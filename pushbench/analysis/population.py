"""Component effects over a population of SIMULATED agents (the analysis side).

The population and its runs come from :mod:`pushbench.runner.population`: agents drawn from a
committed dose prior, each run under ``standard`` and each component-alone controller. Here a
component's effect becomes a distribution over the agents.

- :func:`agent_effects`: per family, agent, controller and metric, the mean over matched
  ``(task_id, instance, seed)`` cells of ``controller - standard`` (success in points). Cells
  without both sides, backend failures and spend cuts (:func:`.frame.scored`) are left out.
- :func:`effect_summary`: per family, controller and metric, the agents' median, 10th and 90th
  percentile, and the shares helped / harmed / unchanged (direction: lower is better for the
  metrics in :data:`.deltas.LOWER_IS_BETTER`; unchanged means an effect of exactly 0).
- :func:`effect_figure`: one panel per family, one row per controller, a dot per agent (its
  effect), the median and the 10th-90th percentile bar; titled SIMULATED when the agents are.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .deltas import LOWER_IS_BETTER
from .frame import as_frame, order_controllers, scored
from .plots import _colors, _figure, _save

BASELINE = "standard"
EFFECT_METRICS = ("success", "steps_used", "proposed_duplicate_rate")
_POINTS = {"success"}  # rates reported in points


def agent_effects(episodes: Any, metrics: Sequence[str] = EFFECT_METRICS) -> pd.DataFrame:
    """One row per family x agent x controller x metric (see the module docstring)."""
    df = scored(as_frame(episodes))
    cols = ["family", "policy", "controller", "metric", "effect", "cells", "simulated"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    cell = ["family", "policy", "task_id", "instance", "seed"]
    base = df[df["controller"] == BASELINE]
    rows = []
    for ctrl in [c for c in order_controllers(df["controller"].unique()) if c != BASELINE]:
        both = (
            df[df["controller"] == ctrl]
            .merge(base, on=cell, how="inner", suffixes=("", "_base"))
            .set_index(cell)
        )
        for metric in metrics:
            diff = both[metric].astype(float) - both[f"{metric}_base"].astype(float)
            diff = diff.dropna() * (100.0 if metric in _POINTS else 1.0)
            for (fam, pol), d in diff.groupby(level=["family", "policy"], sort=True):
                rows.append(
                    {
                        "family": fam,
                        "policy": pol,
                        "controller": ctrl,
                        "metric": metric,
                        "effect": float(d.mean()),
                        "cells": len(d),
                        "simulated": bool(both.loc[(fam, pol), "simulated"].all()),
                    }
                )
    out = pd.DataFrame(rows, columns=cols)
    rank = {c: i for i, c in enumerate(order_controllers(out["controller"].unique()))}
    out["_r"] = out["controller"].map(rank)
    return (
        out.sort_values(["family", "_r", "metric", "policy"], kind="stable")
        .drop(columns="_r")
        .reset_index(drop=True)
    )


def effect_summary(effects: pd.DataFrame) -> pd.DataFrame:
    """Distribution of each component's effect over the agents (see the module docstring)."""
    cols = [
        "family",
        "controller",
        "metric",
        "agents",
        "median",
        "p10",
        "p90",
        "helped",
        "harmed",
        "unchanged",
        "simulated",
    ]
    rows = []
    for (fam, ctrl, metric), g in effects.groupby(["family", "controller", "metric"], sort=False):
        e = g["effect"].to_numpy(float)
        sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
        better, worse = (sign * e > 0), (sign * e < 0)
        rows.append(
            {
                "family": fam,
                "controller": ctrl,
                "metric": metric,
                "agents": len(e),
                "median": float(np.median(e)),
                "p10": float(np.percentile(e, 10)),
                "p90": float(np.percentile(e, 90)),
                "helped": float(better.mean()),
                "harmed": float(worse.mean()),
                "unchanged": float((~better & ~worse).mean()),
                "simulated": bool(g["simulated"].all()),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def effect_figure(effects: pd.DataFrame, metric: str, path: str | Path) -> Path | None:
    """Draw ``metric``'s effect distributions (see the module docstring); None if no rows."""
    t = effects[effects["metric"] == metric]
    if t.empty:
        return None
    families = list(dict.fromkeys(t["family"]))
    unit = " (points)" if metric in _POINTS else ""
    fig, axes = _figure(
        len(families),
        f"{metric}: controller - standard per agent{unit}",
        bool(t["simulated"].all()),
        panel_w=5.5,
        panel_h=1.2 + 0.55 * t.groupby("family")["controller"].nunique().max(),
    )
    colors = _colors(t["controller"])
    for ax, fam in zip(axes, families, strict=True):
        g = t[t["family"] == fam]
        ctrls = order_controllers(g["controller"].unique())
        for y, ctrl in enumerate(ctrls):
            e = np.sort(g.loc[g["controller"] == ctrl, "effect"].to_numpy(float))
            # deterministic vertical spread so equal effects stay visible as a column of dots
            jitter = (np.arange(len(e)) % 7 - 3) * 0.05
            ax.scatter(e, y + jitter, s=10, alpha=0.6, color=colors[ctrl], linewidths=0)
            lo, mid, hi = np.percentile(e, [10, 50, 90])
            ax.plot([lo, hi], [y, y], color="black", lw=2)
            ax.plot([mid], [y], marker="|", color="black", ms=14, mew=2)
        ax.axvline(0, color="grey", lw=0.8, ls="--")
        ax.set_yticks(range(len(ctrls)), ctrls)
        ax.invert_yaxis()
        n = g["policy"].nunique()
        ax.set_title(f"{fam}: {n} agents (bar: 10th-90th pct, tick: median)", fontsize=10)
        ax.set_xlabel(f"{metric} effect{unit}")
    return _save(fig, Path(path))
