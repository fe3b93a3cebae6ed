"""Report: episode lines -> a flat table, per-condition summaries and paired bootstrap deltas.

Input is the runner's ``DIR/episodes.jsonl`` (one finished episode per line: the episode record
without ``calls`` and without the controller's per-step trace, with per-episode ``metrics`` from
:mod:`pushbench.metrics`). The MCP black-box path writes the same line format.

Paired deltas (``controller_a - controller_b``) match episodes on ``(task_id, instance, seed)``
within one ``(family, policy, target)``. The interval is a cluster bootstrap over task instances:
the paired deltas are averaged within each instance, and ``scipy.stats.bootstrap`` (percentile
method, explicit seeded ``numpy.random.Generator``) resamples those instance means. The point
estimate is the mean of the instance means (each instance weighs the same, which is exactly the
quantity the bootstrap resamples; with a balanced design it equals the mean over all pairs).

Pair direction: controllers are ordered baseline-first (:data:`CONTROLLER_ORDER`: ``none``,
``standard``, ``verifier_gated``, ``stateqgp``, its ablation rows, ``unitqgp``, then any other
name alphabetically), and every pair is reported once as *later minus earlier*. So each
controller appears minus ``standard`` and minus ``verifier_gated`` (when present), ``stateqgp``
minus both baselines, and each STATEQGP ablation row minus full ``stateqgp`` (a negative delta on
success is what the removed components were worth).

Everything is deterministic: rows are sorted, every bootstrap uses its own generator seeded from
``seed`` and the row's identity (adding a controller does not move other rows' intervals), and
CSVs are written with a fixed float format.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import metrics as _metrics

CONTROLLER_ORDER = ["none", "standard", "verifier_gated", "stateqgp", "stateqgp_dedupe_only",
                    "stateqgp_page_memory_only", "stateqgp_dedupe_page_nobuffer", "unitqgp"]
ABLATION_CONTROLLERS = ("stateqgp_dedupe_only", "stateqgp_page_memory_only",
                        "stateqgp_dedupe_page_nobuffer")
DEFAULT_DELTA_METRICS = ("success", "valid_count", "duplicate_submit_rate", "valid_per_step")
USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "cost_usd")
FLOAT_FORMAT = "%.6f"
SIMULATED_LABEL = "SIMULATED agent (not an LLM)"

EPISODE_COLUMNS = [
    "key", "family", "policy", "simulated", "controller", "components", "target", "task_id",
    "instance", "seed", "success", "valid_count", "submissions", "duplicate_submit_rate",
    "valid_per_step", "false_completion", "premature_stop", "budget_exhausted",
    "reported_count_error", "over_claim", "invalid_actions", "verifier_recoveries",
    "blocked_completions", "interventions_total", "steps_used", "budget", "terminated_by",
]
_BOOL_METRICS = ("success", "false_completion", "premature_stop", "budget_exhausted")
_GROUP = ["family", "policy", "controller", "target"]
_MATCH = ["task_id", "instance", "seed"]


# ----- loading ----------------------------------------------------------------------------
def load_episodes(path: str | Path) -> list[dict]:
    """Episode lines from ``path`` (a run directory holding ``episodes.jsonl``, or the file).

    Blank lines are ignored. A line that is not valid JSON (a run killed mid-write leaves a
    truncated last line) is skipped with one warning naming the line numbers. Lines sharing a
    ``key`` are deduplicated, keeping the first (the runner treats that one as finished).
    Raises ``FileNotFoundError`` when there is no such file.
    """
    path = Path(path)
    file = path / "episodes.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(f"no episodes file at {file}")
    episodes: list[dict] = []
    seen: set[str] = set()
    bad: list[int] = []
    with file.open("r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                ep = json.loads(line)
            except json.JSONDecodeError:
                bad.append(lineno)
                continue
            if not isinstance(ep, dict):
                bad.append(lineno)
                continue
            key = ep.get("key") or _fallback_key(ep)
            if key in seen:
                continue
            seen.add(key)
            episodes.append(ep)
    if bad:
        warnings.warn(f"{file}: skipped {len(bad)} unreadable line(s) (line "
                      f"{', '.join(map(str, bad[:10]))}{', ...' if len(bad) > 10 else ''}); "
                      "a run killed mid-write leaves a truncated last line", stacklevel=2)
    return episodes


def _fallback_key(ep: dict) -> str:
    raw = json.dumps([ep.get("task_id"), ep.get("instance"), _controller_name(ep),
                      _policy_name(ep), ep.get("seed")])
    return "nokey-" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def _controller_name(ep: dict) -> str:
    c = ep.get("controller")
    if isinstance(c, dict):
        return str(c.get("name") or "none")
    return str(c) if c else "none"


def _policy_name(ep: dict) -> str:
    p = ep.get("policy")
    if isinstance(p, dict):
        return str(p.get("name") or "unknown")
    return str(p) if p else "unknown"


def _is_simulated(ep: dict) -> bool:
    if "simulated" in ep:
        return bool(ep["simulated"])
    p = ep.get("policy")
    return bool(p.get("simulated")) if isinstance(p, dict) else False


# ----- the flat episode table -------------------------------------------------------------
def episodes_frame(episodes: Iterable[dict]) -> pd.DataFrame:
    """One row per episode with flat columns (:data:`EPISODE_COLUMNS`, plus ``progress``).

    Metrics come from the line's ``metrics`` (computed from ``calls`` when a full record
    without them is given). Undefined values (no submissions, not ended by ``final``) are NaN.
    LLM usage columns (``prompt_tokens``, ``completion_tokens``, ``cost_usd``) are added when
    any episode has ``usage``. ``progress`` (verified count after each step) is kept as a list
    for the anytime-progress plot; it is never written to CSV. Rows are sorted.
    """
    rows = []
    usage_seen = False
    for ep in episodes:
        met = ep.get("metrics")
        if met is None:
            if "calls" not in ep:
                raise ValueError(f"episode {ep.get('key')!r} has neither metrics nor calls")
            met = _metrics.episode_metrics(ep)
        ctrl = ep.get("controller")
        comps = ctrl.get("components") if isinstance(ctrl, dict) else None
        inter = met.get("interventions") or {}
        row: dict[str, Any] = {
            "key": ep.get("key") or _fallback_key(ep),
            "family": ep.get("family", ""),
            "policy": _policy_name(ep),
            "simulated": _is_simulated(ep),
            "controller": _controller_name(ep),
            "components": "+".join(comps) if comps else "",
            "target": int(ep["target"]),
            "task_id": ep.get("task_id", ""),
            "instance": ep.get("instance") or ep.get("task_id", ""),
            "seed": ep.get("seed"),
            "steps_used": met.get("steps_used", ep.get("steps_used")),
            "budget": ep.get("budget"),
            "terminated_by": ep.get("terminated_by"),
            "interventions_total": int(sum(inter.values())),
            "progress": list(ep.get("progress") or []),
        }
        for name in ("success", "valid_count", "submissions", "duplicate_submit_rate",
                     "valid_per_step", "false_completion", "premature_stop", "budget_exhausted",
                     "reported_count_error", "over_claim", "invalid_actions",
                     "verifier_recoveries", "blocked_completions"):
            row[name] = met.get(name)
        usage = ep.get("usage")
        if isinstance(usage, dict):
            usage_seen = True
            for col in USAGE_COLUMNS:
                row[col] = usage.get(col)
        rows.append(row)
    cols = EPISODE_COLUMNS + (list(USAGE_COLUMNS) if usage_seen else []) + ["progress"]
    df = pd.DataFrame(rows, columns=cols)
    for col in _BOOL_METRICS + ("simulated",):
        df[col] = df[col].astype(bool)
    for col in ("duplicate_submit_rate", "valid_per_step", "reported_count_error", "over_claim",
                *(USAGE_COLUMNS if usage_seen else ())):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    df["seed"] = pd.to_numeric(df["seed"], errors="coerce").astype("Int64")
    return _sort(df, ["family", "policy", "controller", "target", "task_id", "instance", "seed",
                      "key"])


def _controller_rank(name: str) -> tuple[int, str]:
    return (CONTROLLER_ORDER.index(name), "") if name in CONTROLLER_ORDER else (
        len(CONTROLLER_ORDER), name)


def order_controllers(names: Iterable[str]) -> list[str]:
    """Controller names baseline-first (:data:`CONTROLLER_ORDER`, then alphabetical)."""
    return sorted(set(names), key=_controller_rank)


def _sort(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    if df.empty:
        return df.reset_index(drop=True)
    keyed = df.assign(_crank=[_controller_rank(c) for c in df["controller"]]) \
        if "controller" in df else df
    by = ["_crank" if c == "controller" else c for c in by]
    return keyed.sort_values(by, kind="mergesort").drop(columns="_crank", errors="ignore") \
        .reset_index(drop=True)


def _as_frame(data: pd.DataFrame | Iterable[dict]) -> pd.DataFrame:
    return data if isinstance(data, pd.DataFrame) else episodes_frame(data)


# ----- summary ----------------------------------------------------------------------------
def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per ``(family, policy, controller, target)`` means over episodes.

    Columns: ``simulated``, ``n_episodes``, ``n_instances``, ``success_rate``,
    ``mean_valid_count``, ``duplicate_submit_rate`` (over episodes with submissions),
    ``valid_per_step``, ``false_completion_rate``, ``premature_stop_rate``,
    ``budget_exhausted_rate``, ``mean_reported_count_error`` and ``mean_over_claim`` (over
    episodes ended by ``final``), ``mean_interventions``, ``mean_blocked_completions``,
    ``mean_invalid_actions``, ``mean_verifier_recoveries``, ``mean_steps_used``, and the mean
    LLM usage per episode when present. Rates are fractions in [0, 1]. Episodes ended by a
    permanent model-backend failure (``terminated_by == "error"``) are counted in
    ``n_backend_errors`` and excluded from ``n_episodes`` and every metric.
    """
    df = _as_frame(df)
    # Episodes whose model backend failed for good (terminated_by "error") are not agent
    # outcomes: they are counted in n_backend_errors and left out of every metric.
    errors = df.assign(_err=(df["terminated_by"] == "error").astype(int)) if not df.empty \
        else df.assign(_err=0)
    n_err = errors.groupby(_GROUP, sort=False, dropna=False)["_err"].sum() \
        if not df.empty else None
    df = df[df["terminated_by"] != "error"] if not df.empty else df
    spec = {
        "simulated": ("simulated", "any"),
        "n_episodes": ("key", "size"),
        "n_instances": ("instance", "nunique"),
        "success_rate": ("success", "mean"),
        "mean_valid_count": ("valid_count", "mean"),
        "duplicate_submit_rate": ("duplicate_submit_rate", "mean"),
        "valid_per_step": ("valid_per_step", "mean"),
        "false_completion_rate": ("false_completion", "mean"),
        "premature_stop_rate": ("premature_stop", "mean"),
        "budget_exhausted_rate": ("budget_exhausted", "mean"),
        "mean_reported_count_error": ("reported_count_error", "mean"),
        "mean_over_claim": ("over_claim", "mean"),
        "mean_interventions": ("interventions_total", "mean"),
        "mean_blocked_completions": ("blocked_completions", "mean"),
        "mean_invalid_actions": ("invalid_actions", "mean"),
        "mean_verifier_recoveries": ("verifier_recoveries", "mean"),
        "mean_steps_used": ("steps_used", "mean"),
    }
    for col in USAGE_COLUMNS:
        if col in df:
            spec[f"mean_{col}"] = (col, "mean")
    if df.empty and n_err is None:
        return pd.DataFrame(columns=_GROUP + ["n_backend_errors"] + list(spec))
    work = df.copy()
    for col in _BOOL_METRICS:
        work[col] = work[col].astype(float)
    for col in ("valid_count", "interventions_total", "blocked_completions", "invalid_actions",
                "verifier_recoveries", "steps_used"):
        work[col] = pd.to_numeric(work[col], errors="coerce").astype(float)
    if work.empty:  # every episode errored: one row per cell, no metric
        out = pd.DataFrame(index=n_err.index, columns=list(spec), dtype=float)
    else:
        out = work.groupby(_GROUP, sort=False, dropna=False).agg(**spec)
    if n_err is not None:  # keep cells whose every episode errored visible, with 0 episodes
        out = out.reindex(out.index.union(n_err.index))
        out["n_episodes"] = out["n_episodes"].fillna(0).astype(int)
        out["simulated"] = out["simulated"].astype(object).fillna(False)
        out.insert(out.columns.get_loc("n_episodes") + 1, "n_backend_errors",
                   n_err.reindex(out.index).fillna(0).astype(int))
    out = out.reset_index()
    out["simulated"] = out["simulated"].astype(bool)
    return _sort(out, _GROUP)


# ----- bootstrap --------------------------------------------------------------------------
def cluster_bootstrap_ci(values: Sequence[float], clusters: Sequence[Any], *, rng:
                         np.random.Generator, n_resamples: int = 9999,
                         confidence: float = 0.95) -> tuple[float, float, float, int]:
    """Mean over clusters of the per-cluster means, with a percentile bootstrap interval.

    NaN values are dropped first. Returns ``(estimate, ci_low, ci_high, n_clusters)``; with no
    values all three are NaN; with one cluster or identical cluster means the interval is the
    point estimate (a resample cannot vary).
    """
    from scipy import stats

    s = pd.Series(np.asarray(values, dtype=float), index=pd.Index(list(clusters)))
    s = s[~s.isna()]
    if s.empty:
        return math.nan, math.nan, math.nan, 0
    means = s.groupby(level=0, sort=True).mean().to_numpy()
    est = float(means.mean())
    if len(means) < 2 or np.ptp(means) == 0:
        return est, est, est, len(means)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        res = stats.bootstrap((means,), np.mean, n_resamples=n_resamples,
                              confidence_level=confidence, method="percentile",
                              vectorized=True, rng=rng)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return est, min(lo, est), max(hi, est), len(means)


def row_rng(seed: int, *parts: Any) -> np.random.Generator:
    """A generator seeded from ``seed`` and a row's identity (stable across runs and rows)."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF,
                                                         int.from_bytes(digest[:8], "little")]))


# ----- paired deltas ----------------------------------------------------------------------
def controller_pairs(names: Iterable[str]) -> list[tuple[str, str]]:
    """``(a, b)`` pairs reported as ``a - b``: every pair once, later minus earlier in order."""
    ordered = order_controllers(names)
    return [(a, b) for j, b in enumerate(ordered) for a in ordered[j + 1:]]


PAIRED_COLUMNS = ["family", "policy", "simulated", "target", "controller_a", "controller_b",
                  "metric", "delta", "ci_low", "ci_high", "n_pairs", "n_instances", "mean_a",
                  "mean_b", "confidence"]


def matched_means(df: pd.DataFrame, match: Sequence[str],
                  metrics: Sequence[str]) -> pd.DataFrame:
    """Numeric ``metrics`` indexed by the ``match`` columns, the one side of a paired delta.

    More than one episode per match key (should not happen) is averaged.
    """
    vals = df[list(match) + list(metrics)].copy()
    for m in metrics:
        vals[m] = pd.to_numeric(vals[m], errors="coerce").astype(float)
    return vals.groupby(list(match), sort=True, dropna=False)[list(metrics)].mean()


def paired_deltas(df: pd.DataFrame | Iterable[dict],
                  metrics: Sequence[str] = DEFAULT_DELTA_METRICS, seed: int = 0,
                  n_resamples: int = 9999, confidence: float = 0.95) -> pd.DataFrame:
    """``controller_a - controller_b`` per metric, matched episodes, instance-cluster bootstrap.

    For each ``(family, policy, target)`` and each pair from :func:`controller_pairs`,
    episodes are matched on ``(task_id, instance, seed)``; pairs where either side's metric is
    undefined (NaN) are dropped for that metric. ``delta`` is the mean over instances of the
    within-instance mean paired delta, ``ci_low``/``ci_high`` its percentile bootstrap interval
    (:func:`cluster_bootstrap_ci`), ``mean_a``/``mean_b`` the matched means of each side.
    Controller pairs without any matched episode are omitted.
    """
    df = _as_frame(df)
    rows = []
    if df.empty:
        return pd.DataFrame(columns=PAIRED_COLUMNS)
    df = df[df["terminated_by"] != "error"]  # backend failures are not agent outcomes
    for (family, policy, target), grp in df.groupby(["family", "policy", "target"], sort=True):
        simulated = bool(grp["simulated"].any())
        per_ctrl = {}
        for ctrl, g in grp.groupby("controller", sort=False):
            per_ctrl[ctrl] = matched_means(g, _MATCH, metrics)
        for a, b in controller_pairs(per_ctrl):
            joined = per_ctrl[a].add_suffix("_a").join(per_ctrl[b].add_suffix("_b"), how="inner")
            if joined.empty:
                continue
            inst = joined.index.get_level_values("task_id").astype(str) + "\x00" + \
                joined.index.get_level_values("instance").astype(str)
            for m in metrics:
                va, vb = joined[f"{m}_a"].to_numpy(), joined[f"{m}_b"].to_numpy()
                ok = ~(np.isnan(va) | np.isnan(vb))
                rng = row_rng(seed, family, policy, target, a, b, m)
                est, lo, hi, n_inst = cluster_bootstrap_ci(
                    (va - vb)[ok], np.asarray(inst)[ok], rng=rng, n_resamples=n_resamples,
                    confidence=confidence)
                rows.append({
                    "family": family, "policy": policy, "simulated": simulated,
                    "target": int(target), "controller_a": a, "controller_b": b, "metric": m,
                    "delta": est, "ci_low": lo, "ci_high": hi, "n_pairs": int(ok.sum()),
                    "n_instances": n_inst,
                    "mean_a": float(va[ok].mean()) if ok.any() else math.nan,
                    "mean_b": float(vb[ok].mean()) if ok.any() else math.nan,
                    "confidence": confidence,
                })
    out = pd.DataFrame(rows, columns=PAIRED_COLUMNS)
    if out.empty:
        return out
    metric_rank = {m: i for i, m in enumerate(metrics)}
    out = out.assign(_b=[_controller_rank(c) for c in out["controller_b"]],
                     _a=[_controller_rank(c) for c in out["controller_a"]],
                     _m=[metric_rank[m] for m in out["metric"]])
    return out.sort_values(["family", "policy", "target", "_b", "_a", "_m"], kind="mergesort") \
        .drop(columns=["_a", "_b", "_m"]).reset_index(drop=True)


# ----- writing and printing ---------------------------------------------------------------
def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """The CSV bytes :func:`write_report` writes (fixed float format, ``\\n`` line ends)."""
    df = df.copy()
    for col in df.columns:
        if pd.api.types.is_float_dtype(df[col]):
            df[col] = df[col].round(6) + 0.0       # no "-0.000000" from rounding noise
    return df.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n").encode()


def write_report(episodes: pd.DataFrame | Iterable[dict], out_dir: str | Path, seed: int = 0,
                 n_resamples: int = 9999,
                 metrics: Sequence[str] = DEFAULT_DELTA_METRICS) -> dict[str, pd.DataFrame]:
    """Write ``summary.csv`` and ``paired_deltas.csv`` into ``out_dir``.

    Returns ``{"episodes": ..., "summary": ..., "paired_deltas": ...}`` frames. The same
    input and ``seed`` give byte-identical files.
    """
    df = _as_frame(episodes)
    summary = summary_table(df)
    deltas = paired_deltas(df, metrics=metrics, seed=seed, n_resamples=n_resamples)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.csv").write_bytes(to_csv_bytes(summary))
    (out / "paired_deltas.csv").write_bytes(to_csv_bytes(deltas))
    return {"episodes": df, "summary": summary, "paired_deltas": deltas}


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _pct(x: float, sign: bool = False) -> str:
    return "-" if _missing(x) else format(100 * x, "+.1f" if sign else ".1f")


def _num(x: float, fmt: str = ".2f") -> str:
    return "-" if _missing(x) else format(x, fmt)


_SUMMARY_COLUMNS = ("N", "n", "succ%", "valid", "dup%", "v/st", "fc%", "ps%", "be%", "over",
                    "intv")
_SUMMARY_LEGEND = ("N target, n episodes, succ% success rate, valid mean verified count, dup% "
                   "duplicate submit rate, v/st valid per step, fc% false completion, ps% "
                   "premature stop, be% budget exhausted, over mean signed over-claim at final, "
                   "intv mean controller interventions per episode (all columns: summary.csv)")
_SIM_NOTE = ("SIMULATED: scripted agents with simulated failure mechanisms, not language "
             "models; their numbers are not LLM results.")


def print_report(report: dict[str, pd.DataFrame], console=None) -> None:
    """Print the summary (one table per family and policy, rows controller x target) and the
    paired success deltas (rows controller pair, columns target). Tables of simulated
    policies say so in their title, and a note follows them."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    summary = report["summary"]
    deltas = report.get("paired_deltas")
    if summary.empty:
        console.print("no episodes")
        return
    any_sim = bool(summary["simulated"].any())
    for (family, policy), grp in summary.groupby(["family", "policy"], sort=False):
        sim = bool(grp["simulated"].any())
        title = f"{family} | policy {policy}" + (f" | {SIMULATED_LABEL}" if sim else "")
        table = Table(title=title, title_style="bold yellow" if sim else "bold",
                      box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        table.add_column("controller", overflow="fold", min_width=12)
        for col in _SUMMARY_COLUMNS:
            table.add_column(col, justify="right", overflow="fold")
        last = None
        for _, r in grp.iterrows():
            name = r["controller"] if r["controller"] != last else ""
            last = r["controller"]
            table.add_row(name, str(r["target"]), str(r["n_episodes"]), _pct(r["success_rate"]),
                          _num(r["mean_valid_count"], ".1f"), _pct(r["duplicate_submit_rate"]),
                          _num(r["valid_per_step"], ".2f"), _pct(r["false_completion_rate"]),
                          _pct(r["premature_stop_rate"]), _pct(r["budget_exhausted_rate"]),
                          _num(r["mean_over_claim"], "+.1f"), _num(r["mean_interventions"], ".1f"))
        console.print(table)
    console.print(_SUMMARY_LEGEND, style="dim", highlight=False)
    if any_sim:
        console.print(_SIM_NOTE, style="bold yellow", highlight=False)
    if deltas is None or deltas.empty:
        return
    succ = deltas[deltas["metric"] == "success"]
    for (family, policy), grp in succ.groupby(["family", "policy"], sort=False):
        sim = bool(grp["simulated"].any())
        conf = int(round(100 * float(grp["confidence"].iloc[0])))
        targets = sorted(grp["target"].unique())
        title = (f"{family} | policy {policy} | success A - B, points [{conf}% CI]"
                 + (f" | {SIMULATED_LABEL}" if sim else ""))
        table = Table(title=title, title_style="bold yellow" if sim else "bold",
                      box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        table.add_column("A - B", overflow="fold", min_width=12)
        for t in targets:
            table.add_column(f"N={t}", justify="right", overflow="fold")
        pairs = grp[["controller_a", "controller_b"]].drop_duplicates()
        for a, b in pairs.itertuples(index=False):
            cells = []
            for t in targets:
                hit = grp[(grp["controller_a"] == a) & (grp["controller_b"] == b)
                          & (grp["target"] == t)]
                if hit.empty:
                    cells.append("")
                    continue
                r = hit.iloc[0]
                cells.append(f"{_pct(r['delta'], True)}\n[{_pct(r['ci_low'])}, "
                             f"{_pct(r['ci_high'])}]")
            table.add_row(f"{a}\n - {b}", *cells)
        console.print(table)
