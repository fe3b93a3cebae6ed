"""The one paired-delta engine: ``A - B`` on matched episodes, per target and pooled over targets.

Used for controller deltas (:func:`paired_deltas`, ``paired_deltas.csv``) and for the black-box
prompt-condition deltas (:func:`pushbench.blackbox.evaluate.condition_deltas`); both go through
:func:`delta_table`.

Matching. Within one stratum (controller deltas: ``(family, policy label)``), an episode of side
A is paired with the episode of side B on the same ``(target, task_id, instance, seed)``. More
than one episode per match key on one side is an error naming the keys
(:class:`DuplicateEpisodesError`), never an average: it means two different agents or runs were
mixed. Pairs where either side's metric is undefined (NaN) are dropped for that metric.

Clusters are task **instances** (``instance`` within the family), not task ids: a suite task
(``RepoScan-N10``, the seed picks the instance) holds several instances under one id, and one
instance appears under one task id per target. Per row, the paired differences are averaged
within each instance; the estimate ``delta`` is the mean of those instance means (each instance
weighs the same), and ``mean_a``/``mean_b`` are the same instance-weighted means of each side, so
``delta == mean_a - mean_b``.

Rows. One row per target (``pooled = False``) and, when a pair has matched episodes at two or
more targets, one **pooled** row over all its targets (``pooled = True``, ``target`` empty,
``n_targets`` the number pooled): the paper's "STATEQGP minus standard over the 36 tasks". A
pooled row resamples instances with all their targets and seeds inside.

Interval and test (:mod:`.stats`): by default the inversion of the sign-flip test over instance
means (the method is named in ``ci_method``; ``n/a (k<6)`` where fewer than 6 instances leave the
95% test unable to reject anything), so an interval excludes 0 exactly when ``p_value`` is below
5%. ``p_value`` is the two-sided paired sign-flip randomization test over instances (exact for up
to 16 instances, ``p_method`` says which; the interval inverts the same assignments). Every
interval is cut to the plausible range (:func:`plausible_bounds`: [-1, 1] for rates, the range of
the instance differences otherwise) and ``ci_low_clipped``/``ci_high_clipped`` say which bound
was cut. Beside the estimate: ``n_better``/``n_worse``/``n_tied`` instances (A's instance mean
better, worse or equal to B's; lower is better for :data:`LOWER_IS_BETTER`, higher otherwise).

Holm (``p_holm``): ``p_min`` is the smallest p the row's test can attain (``2 / 2^m`` with ``m``
instances that differ); a row with ``p_min >= 1 - confidence`` (fewer than 6 differing instances,
a row with every instance tied included) can never be significant: it keeps its raw ``p_value``,
``testable = False`` and no ``p_holm``, and does not enter a family (Tarone's screen). **Family
of tests**: the testable rows of one task family (``family``, the first stratum), one metric and
one scope in one output table (``holm_rows`` counts them): e.g. all testable pooled ``success``
rows of RepoScan in one ``paired_deltas.csv`` (every policy and controller pair), all its
testable per-target ``success`` rows another. Pooled rows are the primary comparisons and
per-target rows their breakdown; adjusting both together would make the primary ones untestable
with 9 instances. :func:`holm_families` lists the families and the smallest adjusted p each can
reach (a family that cannot reach ``1 - confidence`` gets no printed Holm column).

Determinism: each row draws from its own generator seeded from ``seed`` and the row's identity
(adding a controller does not move other rows' intervals; only ``p_holm`` depends on the whole
table).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import stats
from .frame import as_frame, controller_rank, family_labels, order_controllers, scored, versioned

DEFAULT_DELTA_METRICS = ("success", "valid_count", "duplicate_submit_rate", "valid_per_step")
# Metrics whose values lie in [0, 1]: their differences lie in [-1, 1], where every interval of
# theirs is cut (plausible_bounds).
RATE_METRICS = frozenset(
    {
        "success",
        "duplicate_submit_rate",
        "proposed_duplicate_rate",
        "precision",
        "false_completion",
        "false_claim",
        "honest_stop",
        "premature_stop",
        "budget_exhausted",
    }
)
MATCH = ("target", "task_id", "instance", "seed")
# Metrics where a lower value of A is the better one (n_better counts instances A is lower on).
LOWER_IS_BETTER = frozenset(
    {
        "duplicate_submit_rate",
        "proposed_duplicate_rate",
        "rejected",
        "false_completion",
        "false_claim",
        "premature_stop",
        "budget_exhausted",
        "steps_used",
        "steps_ratio",
        "invalid_actions",
    }
)
STAT_COLUMNS = [
    "metric",
    "delta",
    "ci_low",
    "ci_high",
    "ci_low_clipped",
    "ci_high_clipped",
    "degenerate",
    "ci_method",
    "n_better",
    "n_worse",
    "n_tied",
    "p_value",
    "p_method",
    "p_min",
    "testable",
    "p_holm",
    "holm_rows",
    "n_pairs",
    "n_clusters",
    "mean_a",
    "mean_b",
    "confidence",
]
PAIRED_COLUMNS = [
    "family",
    "policy",
    "simulated",
    "pooled",
    "target",
    "n_targets",
    "controller_a",
    "controller_b",
    *STAT_COLUMNS,
]


class DuplicateEpisodesError(ValueError):
    """Two episodes share a match key on one side of a paired delta (names the keys)."""


def matched_means(df: pd.DataFrame, match: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Numeric ``metrics`` indexed by the ``match`` columns: one side of a paired delta.

    Raises :class:`DuplicateEpisodesError` naming the duplicated match keys (and the episode
    keys) when more than one episode shares a match key: episodes of different agents or runs
    must never be averaged into one.
    """
    match = list(match)
    dup = df.duplicated(match, keep=False)
    if dup.any():
        bad = df[dup].sort_values(match + (["key"] if "key" in df else []), kind="mergesort")
        shown = []
        for keys, g in bad.groupby(match, sort=True, dropna=False):
            ids = ", ".join(map(str, g["key"])) if "key" in g else f"{len(g)} rows"
            shown.append(f"{dict(zip(match, map(str, keys), strict=True))} <- {ids}")
        raise DuplicateEpisodesError(
            f"{len(shown)} match key(s) hold more than one episode; a paired delta needs one "
            "episode per key and side (were two runs or two differently parametrised agents "
            "mixed under one label?): "
            + "; ".join(shown[:10])
            + (" ..." if len(shown) > 10 else "")
        )
    vals = df.set_index(match)[list(metrics)].copy()
    for m in metrics:
        vals[m] = pd.to_numeric(vals[m], errors="coerce").astype(float)
    return vals.sort_index()


def _cluster_means(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Per-cluster means of ``values`` (clusters in sorted order)."""
    s = pd.Series(values).groupby(clusters, sort=True).mean()
    means: np.ndarray = s.to_numpy(dtype=float)
    return means


def plausible_bounds(metric: str, diff: np.ndarray) -> tuple[float, float]:
    """The range a row's interval is cut to: [-1, 1] for a difference of rates, else the range
    of the instance mean differences ``diff`` (what the instances allow)."""
    if metric in RATE_METRICS:
        return -1.0, 1.0
    return float(diff.min()), float(diff.max())


def delta_stats(
    va: np.ndarray,
    vb: np.ndarray,
    clusters: np.ndarray,
    *,
    metric: str,
    rng: np.random.Generator,
    n_resamples: int,
    confidence: float,
    method: str = stats.DEFAULT_METHOD,
) -> dict[str, Any]:
    """The statistics of one row from the matched values of each side and their clusters
    (``p_holm`` and ``holm_rows`` are filled per family by :func:`delta_table`)."""
    ok = ~(np.isnan(va) | np.isnan(vb))
    out = {
        "metric": metric,
        "delta": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "ci_low_clipped": False,
        "ci_high_clipped": False,
        "degenerate": False,
        "ci_method": "",
        "n_better": 0,
        "n_worse": 0,
        "n_tied": 0,
        "p_value": math.nan,
        "p_method": "",
        "p_min": math.nan,
        "testable": False,
        "p_holm": math.nan,
        "holm_rows": 0,
        "n_pairs": int(ok.sum()),
        "n_clusters": 0,
        "mean_a": math.nan,
        "mean_b": math.nan,
        "confidence": confidence,
    }
    if not ok.any():
        return out
    cl = clusters[ok]
    diff = _cluster_means(va[ok] - vb[ok], cl)
    signs = stats.flip_signs(diff.size, rng, n_resamples)  # one set: the p and its inversion
    p, p_method = stats.sign_flip_p(diff[None, :], rng=rng, signs=signs)
    lo, hi, used = stats.interval(
        diff[None, :],
        rng=rng,
        method=method,
        confidence=confidence,
        n_resamples=n_resamples,
        signs=signs,
    )
    lo, hi, cut_lo, cut_hi = stats.clip(lo, hi, plausible_bounds(metric, diff))
    up, down = (int(c[0]) for c in stats.n_up_down(diff[None, :]))
    better, worse = (down, up) if metric in LOWER_IS_BETTER else (up, down)
    p_min = float(stats.min_p(up + down))
    out.update(
        delta=float(diff.mean()),
        ci_low=float(lo[0]),
        ci_high=float(hi[0]),
        ci_low_clipped=bool(cut_lo[0]),
        ci_high_clipped=bool(cut_hi[0]),
        degenerate=bool(stats.degenerate(diff[None, :])[0]),
        ci_method=str(used[0]) + (" (clipped)" if cut_lo[0] or cut_hi[0] else ""),
        n_better=better,
        n_worse=worse,
        n_tied=int(diff.size) - up - down,
        p_value=float(p[0]),
        p_method=p_method,
        p_min=p_min,
        testable=p_min < 1 - confidence,
        n_clusters=int(diff.size),
        mean_a=float(_cluster_means(va[ok], cl).mean()),
        mean_b=float(_cluster_means(vb[ok], cl).mean()),
    )
    return out


def delta_table(
    df: pd.DataFrame,
    *,
    side: str,
    strata: Sequence[str],
    pairs: Callable[[list[str]], list[tuple[str, str]]],
    metrics: Sequence[str],
    seed: int = 0,
    n_resamples: int = 9999,
    confidence: float = 0.95,
    a_col: str = "a",
    b_col: str = "b",
    method: str = stats.DEFAULT_METHOD,
    extra: Callable[[pd.DataFrame], dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """The engine: rows ``A - B`` for each stratum, pair of ``side`` values, target and metric.

    ``df`` is an episodes frame (backend errors and tampered lines are dropped here);
    ``strata`` the columns that must be equal on both sides (``family`` first; ``target`` is
    handled here); ``pairs`` maps the side values present in a stratum to ``(a, b)`` pairs;
    ``extra`` adds stratum-level columns (e.g. ``simulated``). Output columns: the strata,
    ``extra``'s keys, ``pooled``, ``target``, ``n_targets``, ``a_col``, ``b_col`` and
    :data:`STAT_COLUMNS`; Holm is applied per family of tests (see the module docstring).
    """
    df = scored(df)
    rows: list[dict[str, Any]] = []
    metrics = list(metrics)
    for ident, grp in df.groupby(list(strata), sort=True):
        ident = ident if isinstance(ident, tuple) else (ident,)
        head = dict(zip(strata, ident, strict=True))
        if extra is not None:
            head.update(extra(grp))
        per_side = {
            name: matched_means(g, MATCH, metrics) for name, g in grp.groupby(side, sort=False)
        }
        for a, b in pairs(list(per_side)):
            joined = per_side[a].add_suffix("_a").join(per_side[b].add_suffix("_b"), how="inner")
            if joined.empty:
                continue
            targets = joined.index.get_level_values("target").to_numpy()
            clusters = joined.index.get_level_values("instance").astype(str).to_numpy()
            # (target, rows); None: pooled over the targets
            scopes: list[tuple[int | None, np.ndarray]] = [
                (int(t), targets == t) for t in sorted(set(targets))
            ]
            if len(scopes) > 1:
                scopes.insert(0, (None, np.ones(len(joined), dtype=bool)))
            for target, mask in scopes:
                for m in metrics:
                    rng = stats.row_rng(
                        seed, *ident, "pooled" if target is None else target, a, b, m
                    )
                    st = delta_stats(
                        joined[f"{m}_a"].to_numpy()[mask],
                        joined[f"{m}_b"].to_numpy()[mask],
                        clusters[mask],
                        metric=m,
                        rng=rng,
                        n_resamples=n_resamples,
                        confidence=confidence,
                        method=method,
                    )
                    rows.append(
                        {
                            **head,
                            "pooled": target is None,
                            "target": pd.NA if target is None else target,
                            "n_targets": len(set(targets[mask])),
                            a_col: a,
                            b_col: b,
                            **st,
                        }
                    )
    head_cols = list(strata) + (list(extra(df.iloc[:0]).keys()) if extra is not None else [])
    cols = head_cols + ["pooled", "target", "n_targets", a_col, b_col] + STAT_COLUMNS
    out = pd.DataFrame(rows, columns=cols)
    out["target"] = out["target"].astype("Int64")
    out["pooled"] = out["pooled"].astype(bool)
    for col in ("degenerate", "ci_low_clipped", "ci_high_clipped", "testable"):
        out[col] = out[col].astype(bool)
    fam = _holm_key(out, strata[0])
    for key in holm_families(out, strata[0]).itertuples(index=False):
        sel = (
            (fam == key.family)
            & (out["metric"] == key.metric)
            & (out["pooled"] == key.pooled)
            & out["testable"]
        ).to_numpy()
        out.loc[sel, "p_holm"] = stats.holm(out.loc[sel, "p_value"].to_numpy(dtype=float))
        out.loc[sel, "holm_rows"] = int(sel.sum())
    return out


def holm_families(deltas: pd.DataFrame, by: str = "family") -> pd.DataFrame:
    """One row per Holm family (``by`` x metric x scope) of a delta table: ``family``,
    ``metric``, ``pooled``, ``rows`` (all), ``testable`` rows, and ``floor``: the smallest
    adjusted p the family can reach (testable rows x the smallest ``p_min`` among them; NaN
    without a testable row), in the table's order. A table split by family version
    (``family_version`` column) has one Holm family per version (``family`` reads
    ``reposcan v2``)."""
    cols = ["family", "metric", "pooled", "rows", "testable", "floor"]
    if deltas.empty:
        return pd.DataFrame(columns=cols)
    out = []
    keyed = deltas.assign(_fam=_holm_key(deltas, by))
    for (fam, metric, pooled), g in keyed.groupby(["_fam", "metric", "pooled"], sort=False):
        t = g[g["testable"].astype(bool)]
        out.append(
            [
                fam,
                metric,
                bool(pooled),
                len(g),
                len(t),
                min(1.0, len(t) * float(t["p_min"].min())) if len(t) else math.nan,
            ]
        )
    return pd.DataFrame(out, columns=cols)


def _holm_key(deltas: pd.DataFrame, by: str) -> pd.Series:
    """The Holm-family column: ``by``, with the version where a table is split by it."""
    return family_labels(deltas) if by == "family" else deltas[by]


def controller_pairs(names: Iterable[str]) -> list[tuple[str, str]]:
    """``(a, b)`` pairs reported as ``a - b``: every pair once, later minus earlier in order."""
    ordered = order_controllers(names)
    return [(a, b) for j, b in enumerate(ordered) for a in ordered[j + 1 :]]


def paired_deltas(
    df: pd.DataFrame | Iterable[dict[str, Any]],
    metrics: Sequence[str] = DEFAULT_DELTA_METRICS,
    seed: int = 0,
    n_resamples: int = 9999,
    confidence: float = 0.95,
    method: str = stats.DEFAULT_METHOD,
) -> pd.DataFrame:
    """``controller_a - controller_b`` per ``(family, policy label)``, per target and pooled.

    Pair direction: controllers are ordered baseline-first (``none``, ``standard``,
    ``verifier_gated``, ``stateqgp``, its ablation rows, ``unitqgp``, then alphabetically) and
    every pair is reported once as *later minus earlier*. Columns: :data:`PAIRED_COLUMNS`
    (with ``family_version`` after ``family``, and one stratum per version, when the episodes
    mix versions of a family: :func:`pushbench.analysis.frame.versioned`).
    Controller pairs without any matched episode are omitted.
    """
    df = as_frame(df)
    columns = versioned(PAIRED_COLUMNS, df)
    if df.empty:
        return pd.DataFrame(columns=columns)
    out = delta_table(
        df,
        side="controller",
        strata=versioned(["family", "policy"], df),
        pairs=controller_pairs,
        metrics=metrics,
        seed=seed,
        n_resamples=n_resamples,
        confidence=confidence,
        a_col="controller_a",
        b_col="controller_b",
        method=method,
        extra=lambda g: {"simulated": bool(g["simulated"].any())},
    )
    out = out[columns]
    if out.empty:
        return out
    rank = {m: i for i, m in enumerate(metrics)}
    out = out.assign(
        _p=~out["pooled"],
        _t=out["target"].fillna(-1),
        _b=[controller_rank(c) for c in out["controller_b"]],
        _a=[controller_rank(c) for c in out["controller_a"]],
        _m=[rank[m] for m in out["metric"]],
    )
    by = versioned(["family", "policy"], df) + ["_p", "_t", "_b", "_a", "_m"]
    return (
        out.sort_values(by, kind="mergesort")
        .drop(columns=["_p", "_t", "_a", "_b", "_m"])
        .reset_index(drop=True)
    )
