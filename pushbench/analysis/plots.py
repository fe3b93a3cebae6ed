"""Figures from episode lines (matplotlib, Agg backend): what a paper or README shows.

Every figure has one panel per ``(family, policy label)``: different models or parameter sets
are different panels. Controllers keep the same colour in every figure. Intervals are the
report's 95% intervals over task instances (:func:`pushbench.analysis.stats.interval`: the
inverted sign-flip test, no band with fewer than 6 instances), seeded, so figures are reproducible;
where every instance gave
the same value there is no band. Whenever a panel's data come from a simulated policy, its title
says "(simulated agent)" and the figure title repeats it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from . import stats
from .deltas import RATE_METRICS
from .frame import (
    ABLATION_CONTROLLERS,
    CONTROLLER_ORDER,
    as_frame,
    family_labels,
    mixed_versions,
    order_controllers,
    scored,
)
from .stats import row_rng

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WORK_UNIT_FAMILIES = ("dataops", "swelite", "dataops_public")
_N_RESAMPLES = 1999
_PANEL_W, _PANEL_H = 5.6, 4.0
_SIM = "(simulated agent)"
_MIN_FIG_W = 8.5
_MARKERS = "osD^vPX*<>"


def _plt() -> Any:
    """matplotlib.pyplot on the Agg backend (imported on first use: it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _names(controllers: Iterable[str]) -> list[str]:
    return CONTROLLER_ORDER + [
        c for c in order_controllers(controllers) if c not in CONTROLLER_ORDER
    ]


def _colors(controllers: Iterable[str]) -> dict[str, tuple[float, float, float, float]]:
    cmap = _plt().get_cmap("tab10")
    return {c: cmap(i % 10) for i, c in enumerate(_names(controllers))}


def _markers(controllers: Iterable[str]) -> dict[str, str]:
    return {c: _MARKERS[i % len(_MARKERS)] for i, c in enumerate(_names(controllers))}


def _panels(df: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    # one panel per family version where the frame mixes versions (``reposcan v2``)
    fam = family_labels(df) if mixed_versions(df) else df["family"]
    return [(f, pol, g) for (f, pol), g in df.groupby([fam, "policy"], sort=True)]


def _figure(
    n: int, title: str, simulated: bool, panel_w: float = _PANEL_W, panel_h: float = _PANEL_H
) -> tuple[Figure, list[Axes]]:
    plt = _plt()
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig_w = max(panel_w * ncols, _MIN_FIG_W)
    fig, axes = plt.subplots(nrows, ncols, figsize=(fig_w, panel_h * nrows + 0.8), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    if simulated:
        title += "\nSIMULATED agents (scripted failure mechanisms, not LLMs)"
    fig.suptitle(title, fontsize=13, fontweight="bold")
    return fig, list(axes.flat[:n])


def _panel_title(ax: Axes, family: str, policy: str, g: pd.DataFrame, extra: str = "") -> None:
    sim = f" {_SIM}" if bool(g["simulated"].any()) else ""
    ax.set_title(f"{family} | {policy}{sim}{extra}", fontsize=10)


def _save(fig: Figure, path: Path, rect: tuple[float, float, float, float] = (0, 0, 1, 1)) -> Path:
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    _plt().close(fig)
    return path


def _shared_legend(fig: Figure, axes: list[Axes]) -> tuple[float, float, float, float]:
    """One legend under all panels (controllers in baseline-first order); returns the
    tight_layout rect that leaves room for it."""
    entries: dict[str, Artist] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, h)
    ctrl = [k for k in order_controllers(k for k in entries if not k.startswith("target"))]
    labels = ctrl + [k for k in entries if k.startswith("target")]
    if not labels:  # no panel drew a line (e.g. no episode submitted anything): no legend
        return (0, 0, 1, 1)
    ncol = min(len(labels), 6)
    rows = math.ceil(len(labels) / max(ncol, 1))
    height = fig.get_size_inches()[1]
    fig.legend(
        [entries[k] for k in labels],
        labels,
        loc="lower center",
        ncol=ncol,
        fontsize=9,
        title="controller (line: mean; band: 95% sign-flip CI over instances)",
        title_fontsize=9,
        frameon=False,
    )
    return (0, min(0.4, (0.3 + 0.22 * rows) / height), 1, 1)


def _no_data(ax: Axes) -> None:
    ax.text(
        0.5,
        0.5,
        "no data for this metric",
        transform=ax.transAxes,
        ha="center",
        va="center",
        color="dimgray",
        fontsize=9,
    )


def _ci(g: pd.DataFrame, col: str, *ident: object) -> tuple[float, float, float, int]:
    """``(estimate, low, high, n_instances)``: the mean of instance means and its interval
    (``low == high == estimate`` where every instance gave the same value: no band; an
    unbounded side is drawn to the metric's range, or to the most extreme instance mean)."""
    vals = pd.Series(g[col].astype(float).to_numpy(), index=g["instance"].astype(str).to_numpy())
    means = vals.dropna().groupby(level=0, sort=True).mean().to_numpy()
    if means.size == 0:
        return math.nan, math.nan, math.nan, 0
    est = float(means.mean())
    lo, hi, _ = stats.interval(
        means[None, :],
        rng=row_rng(0, "plot", col, *ident),
        n_resamples=_N_RESAMPLES,
        bounds=(0.0, 1.0) if col in RATE_METRICS else (float(means.min()), float(means.max())),
    )
    if np.isnan(lo[0]):
        return est, est, est, means.size
    return est, float(lo[0]), float(hi[0]), means.size


def _vs_target(
    df: pd.DataFrame, col: str, path: Path, title: str, ylabel: str, full_scale: bool
) -> Path:
    panels = _panels(df)
    colors, markers = _colors(df["controller"]), _markers(df["controller"])
    fig, axes = _figure(len(panels), title, bool(df["simulated"].any()))
    for ax, (fam, pol, g) in zip(axes, panels, strict=True):
        targets = sorted(g["target"].unique())
        log_x = len(targets) > 1 and min(targets) > 0 and max(targets) / min(targets) >= 4
        ctrls = order_controllers(g["controller"])
        top = 0.0
        for k, ctrl in enumerate(ctrls):
            pts = [
                (t, *_ci(g[(g["controller"] == ctrl) & (g["target"] == t)], col, fam, pol, ctrl, t))
                for t in targets
            ]
            pts = [p for p in pts if not math.isnan(p[1])]
            if not pts:
                continue
            x = np.array([p[0] for p in pts], dtype=float)
            # a small horizontal dodge keeps coinciding lines (e.g. all at 0%) distinguishable
            off = (k - (len(ctrls) - 1) / 2) * 0.012
            x = x * (1 + off) if log_x else x + off * (max(targets) - min(targets) or 1)
            est, lo, hi = (100 * np.array([p[i] for p in pts]) for i in (1, 2, 3))
            top = max(top, float(hi.max()))
            ax.plot(x, est, marker=markers[ctrl], color=colors[ctrl], label=ctrl, lw=2, ms=6)
            ax.fill_between(x, lo, hi, color=colors[ctrl], alpha=0.12, lw=0)
        if top == 0.0 and not ax.lines:
            _no_data(ax)
        _panel_title(ax, fam, pol, g)
        ax.set_xlabel("target N (items)")
        ax.set_ylabel(ylabel)
        if log_x:
            ax.set_xscale("log")
        ax.set_xticks(targets)
        ax.set_xticklabels([str(t) for t in targets])
        ax.minorticks_off()
        ymax = 100.0 if full_scale else min(100.0, max(10.0, top * 1.15 + 2))
        ax.set_ylim(-0.03 * ymax, 1.03 * ymax)
        ax.grid(alpha=0.3)
    return _save(fig, path, rect=_shared_legend(fig, axes))


def plot_target_scaling(df: pd.DataFrame, out_dir: Path) -> Path:
    """Success rate (%) vs target N per controller, 95% instance-bootstrap bands."""
    return _vs_target(
        df,
        "success",
        out_dir / "target_scaling.png",
        "Target scaling: success rate vs target N",
        "success rate (%)",
        full_scale=True,
    )


def plot_duplicate_rate(df: pd.DataFrame, out_dir: Path) -> Path:
    """Duplicate submit rate (%) vs target N per controller (episodes with submissions)."""
    return _vs_target(
        df,
        "duplicate_submit_rate",
        out_dir / "duplicate_rate.png",
        "Duplicate submissions vs target N",
        "duplicate submit rate (%)",
        full_scale=False,
    )


def _padded_progress(g: pd.DataFrame, length: int) -> np.ndarray:
    """Verified count after each step, held at its last value after the episode ended."""
    out = np.zeros((len(g), length))
    for i, prog in enumerate(g["progress"]):
        # a missing or non-numeric entry holds the count before it
        prog = pd.to_numeric(pd.Series(list(prog or [0]), dtype=object), errors="coerce")
        prog = prog.ffill().fillna(0.0).to_numpy(dtype=float)
        out[i, : len(prog)] = prog[:length]
        out[i, len(prog) :] = prog[-1]
    return out


def plot_anytime_progress(df: pd.DataFrame, out_dir: Path, target: int | None = None) -> Path:
    """Mean verified count vs step at one target (default: the largest), 95% band over
    instances; the dashed line is the target."""
    panels = _panels(df)
    colors = _colors(df["controller"])
    fig, axes = _figure(
        len(panels), "Anytime progress: verified count vs step", bool(df["simulated"].any())
    )
    for ax, (fam, pol, g) in zip(axes, panels, strict=True):
        t = target if target is not None and target in set(g["target"]) else int(g["target"].max())
        g = g[g["target"] == t]
        budget = pd.to_numeric(g["budget"], errors="coerce").max()
        longest = max((len(p or []) for p in g["progress"]), default=0)
        length = max(1, longest, 0 if pd.isna(budget) else int(budget))
        steps = np.arange(1, length + 1)
        for ctrl in order_controllers(g["controller"]):
            gc = g[g["controller"] == ctrl]
            prog = _padded_progress(gc, length)
            clusters = gc["instance"].astype(str).to_numpy()
            inst = np.array([prog[clusters == c].mean(axis=0) for c in sorted(set(clusters))])
            mean = inst.mean(axis=0)
            ax.plot(steps, mean, color=colors[ctrl], label=ctrl, lw=2)
            if len(inst) >= 2 and np.ptp(inst, axis=0).max() > 0:
                # an unbounded side of a band is drawn to the most extreme instance mean
                lo, hi, _ = stats.interval(
                    inst.T,
                    n_resamples=_N_RESAMPLES,
                    rng=row_rng(0, "anytime", fam, pol, ctrl, t),
                    bounds=(float(inst.min()), float(inst.max())),
                )
                lo, hi = np.where(np.isnan(lo), mean, lo), np.where(np.isnan(hi), mean, hi)
                ax.fill_between(steps, lo, hi, color=colors[ctrl], alpha=0.15, lw=0)
        ax.axhline(t, color="black", ls="--", lw=1, label=f"target N = {t}")
        _panel_title(ax, fam, pol, g, extra=f", N = {t}")
        ax.set_xlabel("step")
        ax.set_ylabel("verified valid count (items)")
        ax.set_xlim(0, length)
        ax.set_ylim(0, 1.08 * max(t, ax.get_ylim()[1] / 1.05))
        ax.grid(alpha=0.3)
    return _save(fig, out_dir / "anytime_progress.png", rect=_shared_legend(fig, axes))


_COMPONENT_CODES = {
    "progress_state": "P",
    "dedupe": "D",
    "page_memory": "M",
    "buffered_submit": "B",
    "completion_gate": "G",
}
_COMPONENT_KEY = (
    "components: P progress_state, D dedupe, M page_memory, B buffered_submit, "
    "G completion_gate, - none"
)


def _component_code(components: str) -> str:
    if not components:
        return "-"
    return " ".join(_COMPONENT_CODES.get(c, c) for c in components.split("+"))


def _bars(
    df: pd.DataFrame,
    col: str,
    path: Path,
    title: str,
    ylabel: str,
    pct: bool,
    controllers_of: Callable[[pd.DataFrame], list[str]] | None = None,
) -> Path:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    panels = _panels(df)
    colors = _colors(df["controller"])
    chosen = [
        (controllers_of(g) if controllers_of else order_controllers(g["controller"]))
        for _, _, g in panels
    ]
    n_targets = max(g["target"].nunique() for _, _, g in panels)
    width_in = max(_PANEL_W, 1.0 + max(map(len, chosen)) * (0.5 + 0.3 * n_targets))
    fig, axes = _figure(
        len(panels), title, bool(df["simulated"].any()), panel_w=width_in, panel_h=_PANEL_H + 0.6
    )
    scale = 100 if pct else 1
    top = 0.0
    for ax, (fam, pol, g), ctrls in zip(axes, panels, chosen, strict=True):
        targets = sorted(g["target"].unique())
        width = 0.8 / max(len(targets), 1)
        shades = np.linspace(0.35, 1.0, len(targets)) if len(targets) > 1 else [1.0]
        for j, t in enumerate(targets):
            for i, ctrl in enumerate(ctrls):
                sub = g[(g["controller"] == ctrl) & (g["target"] == t)]
                if sub.empty:
                    continue
                est, lo, hi, _ = _ci(sub, col, fam, pol, ctrl, t, "bars")
                if math.isnan(est):
                    continue
                x = i - 0.4 + width * (j + 0.5)
                ax.bar(
                    x,
                    scale * est,
                    width * 0.92,
                    color=colors[ctrl],
                    alpha=shades[j],
                    edgecolor="black",
                    lw=0.5,
                )
                ax.errorbar(
                    x,
                    scale * est,
                    yerr=[[scale * (est - lo)], [scale * (hi - est)]],
                    color="black",
                    capsize=2,
                    lw=1,
                )
                top = max(top, scale * hi)
        labels = []
        for ctrl in ctrls:
            comps = g.loc[g["controller"] == ctrl, "components"]
            labels.append(f"{ctrl}\n[{_component_code(comps.iloc[0] if len(comps) else '')}]")
        ax.set_xticks(range(len(ctrls)))
        wide = len(ctrls) > 3
        ax.set_xticklabels(
            labels, rotation=20 if wide else 0, ha="right" if wide else "center", fontsize=8
        )
        ax.set_xlim(-0.6, len(ctrls) - 0.4)
        _panel_title(ax, fam, pol, g)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
        handles: list[Artist] = [
            Patch(facecolor="grey", alpha=shades[j], edgecolor="black", lw=0.5, label=f"N = {t}")
            for j, t in enumerate(targets)
        ]
        handles.append(Line2D([], [], color="black", marker="_", ms=8, lw=1, label="95% CI"))
        ax.legend(
            handles=handles,
            fontsize=8,
            title="target (bar shade)",
            title_fontsize=8,
            loc="upper left",
            ncol=min(len(handles), 5),
        )
    for ax in axes:
        ax.set_ylim(0, (105 if pct else max(top, 1e-9)) * 1.25)
        if pct:
            ax.set_yticks(range(0, 101, 20))
    fig.text(0.5, 0.005, _COMPONENT_KEY, ha="center", va="bottom", fontsize=8, color="dimgray")
    return _save(fig, path, rect=(0, 0.03, 1, 1))


def plot_component_ablation(df: pd.DataFrame, out_dir: Path) -> Path:
    """Success rate (%) with 95% CI per controller composition, grouped by target N.

    When STATEQGP ablation rows are present the panel shows ``stateqgp`` and its ablations
    (plus ``standard`` as the floor); otherwise every controller present.
    """

    def pick(g: pd.DataFrame) -> list[str]:
        present = set(g["controller"])
        if present & set(ABLATION_CONTROLLERS):
            keep = {"standard", "stateqgp", *ABLATION_CONTROLLERS}
            return order_controllers(present & keep)
        return order_controllers(present)

    return _bars(
        df,
        "success",
        out_dir / "component_ablation.png",
        "Component ablation: success rate by controller composition",
        "success rate (%)",
        pct=True,
        controllers_of=pick,
    )


def plot_verifier_recoveries(df: pd.DataFrame, out_dir: Path) -> Path:
    """Mean verifier recoveries (units) per episode per controller, for work-unit families."""
    return _bars(
        df,
        "verifier_recoveries",
        out_dir / "verifier_recoveries.png",
        "Verifier recoveries: units that failed a run and later passed",
        "recovered units per episode (units)",
        pct=False,
    )


def planned_figures(
    df: pd.DataFrame, target: int | None = None
) -> list[tuple[str, Callable[[Path], Path]]]:
    """``(file name, draw(out_dir) -> path)`` of every figure that applies to the scored
    episodes of the frame ``df``, in the report's order (no matplotlib import)."""
    df = scored(df)  # backend failures and tampered lines are not agent outcomes
    if df.empty:
        return []
    out: list[tuple[str, Callable[[Path], Path]]] = [
        ("target_scaling.png", lambda d: plot_target_scaling(df, d)),
        ("duplicate_rate.png", lambda d: plot_duplicate_rate(df, d)),
    ]
    if "progress" in df and df["progress"].map(lambda p: bool(len(p or []))).any():
        out.append(("anytime_progress.png", lambda d: plot_anytime_progress(df, d, target)))
    out.append(("component_ablation.png", lambda d: plot_component_ablation(df, d)))
    units = df[df["family"].isin(WORK_UNIT_FAMILIES)]
    if not units.empty:
        out.append(("verifier_recoveries.png", lambda d: plot_verifier_recoveries(units, d)))
    return out


def make_plots(
    episodes_or_df: pd.DataFrame | Iterable[dict[str, Any]],
    out_dir: str | Path,
    target: int | None = None,
    skipped: list[tuple[str, str]] | None = None,
) -> list[Path]:
    """Write every applicable figure into ``out_dir``; return the paths written.

    Always: ``target_scaling.png``, ``duplicate_rate.png``, ``anytime_progress.png`` (at
    ``target`` or each panel's largest), ``component_ablation.png``; plus
    ``verifier_recoveries.png`` when a work-unit family (dataops, swelite) is present.
    Backend failures and tampered lines are left out (none when nothing else is left).

    With a ``skipped`` list each figure is drawn on its own: one that raises is appended as
    ``(file name, "Type: message")``, its stale file (from an earlier call) is removed, and
    the others are still drawn. Without it the first failure raises.
    """
    df = as_frame(episodes_or_df)
    if df.empty:
        raise ValueError("no episodes to plot")
    planned = planned_figures(df, target)
    if not planned:
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, draw in planned:
        if skipped is None:
            paths.append(draw(out))
            continue
        try:
            paths.append(draw(out))
        except Exception as e:  # noqa: BLE001 - one figure's failure must not cost the others
            _plt().close("all")
            (out / name).unlink(missing_ok=True)
            skipped.append((name, f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]))
    return paths
