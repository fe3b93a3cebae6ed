"""Writing a report: ``summary.csv``, ``paired_deltas.csv`` and ``report.md`` into a directory."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from . import report_md
from .bill import bill_table
from .deltas import DEFAULT_DELTA_METRICS, paired_deltas
from .frame import as_frame
from .stats import DEFAULT_METHOD
from .summary import summary_table

FLOAT_FORMAT = "%.6f"


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """The CSV bytes :func:`write_report` writes (fixed float format, ``\\n`` line ends)."""
    df = df.copy()
    for col in df.columns:
        if pd.api.types.is_float_dtype(df[col]):
            df[col] = df[col].round(6) + 0.0  # no "-0.000000" from rounding noise
    text: str = df.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
    return text.encode()


def existing_figures(out_dir: str | Path) -> list[str]:
    """The report's known figures present in ``out_dir``, in the report's order."""
    return [name for name, _ in report_md.FIGURES if (Path(out_dir) / name).is_file()]


def write_report(
    episodes: pd.DataFrame | Iterable[dict[str, Any]],
    out_dir: str | Path,
    seed: int = 0,
    n_resamples: int = 9999,
    metrics: Sequence[str] = DEFAULT_DELTA_METRICS,
    info: dict[str, Any] | None = None,
    run_dir: str | Path | None = None,
    figures: Sequence[str] | None = None,
    steps_reference: bool = True,
    ci_method: str = DEFAULT_METHOD,
    skipped_figures: Sequence[tuple[str, str]] = (),
) -> dict[str, pd.DataFrame]:
    """Write ``summary.csv``, ``paired_deltas.csv`` and ``report.md`` into ``out_dir`` (and
    ``context_deltas.csv`` when LLM episodes ran a full and a trimmed context arm:
    :mod:`.context_deltas`).

    ``info`` is the run's :func:`~pushbench.runner.runinfo.run_info` (what ran, planned and
    missing episodes); ``run_dir`` where the traces live (default ``out_dir``); ``figures``
    the PNG names to embed (default: those already in ``out_dir``; :func:`write_report_md`
    says which applicable figures are missing); ``ci_method`` one of
    :data:`pushbench.analysis.stats.METHODS`. Returns the frames
    ``episodes``, ``summary``, ``paired_deltas``, ``bill`` (:func:`.bill.bill_table`) and, under
    ``"report_md"``, the markdown text.
    The same input and ``seed`` give byte-identical files.
    """
    if not isinstance(episodes, pd.DataFrame):
        episodes = list(episodes)
    df = as_frame(episodes)
    summary = summary_table(df, steps_reference=steps_reference)
    deltas = paired_deltas(
        df, metrics=metrics, seed=seed, n_resamples=n_resamples, method=ci_method
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.csv").write_bytes(to_csv_bytes(summary))
    (out / "paired_deltas.csv").write_bytes(to_csv_bytes(deltas))
    frames = {"episodes": df, "summary": summary, "paired_deltas": deltas, "bill": bill_table(df)}
    if not isinstance(episodes, pd.DataFrame):  # LLM context arms: context_deltas.csv
        from .context_deltas import context_deltas

        ctx = context_deltas(episodes, seed=seed, n_resamples=n_resamples)
        if not ctx.empty:
            (out / "context_deltas.csv").write_bytes(to_csv_bytes(ctx))
            frames["context_deltas"] = ctx
    write_report_md(
        frames,
        out,
        info,
        seed=seed,
        n_resamples=n_resamples,
        run_dir=run_dir,
        figures=figures,
        skipped_figures=skipped_figures,
    )
    return frames


def write_report_md(
    frames: dict[str, Any],
    out_dir: str | Path,
    info: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    n_resamples: int = 9999,
    run_dir: str | Path | None = None,
    figures: Sequence[str] | None = None,
    skipped_figures: Sequence[tuple[str, str]] = (),
) -> str:
    """(Re)write ``report.md`` from the frames of :func:`write_report` (nothing recomputed);
    return its text, also kept in ``frames["report_md"]``.

    ``figures``: the PNG names to embed (default: those in ``out_dir``). Every figure that
    applies to the episodes (:func:`.plots.planned_figures`) but is not embedded is listed as
    missing, with its reason from ``skipped_figures`` (``(name, reason)``) or as not drawn.
    """
    from .plots import planned_figures

    out = Path(out_dir)
    shown = existing_figures(out) if figures is None else list(figures)
    why = dict(skipped_figures)
    missing = [
        (name, why.get(name, "not drawn (`pushbench plot RUN_DIR` draws it)"))
        for name, _ in planned_figures(frames["episodes"])
        if name not in shown
    ]
    traces = Path(run_dir) / "traces" if run_dir is not None else out / "traces"
    prefix = Path(os.path.relpath(traces, out)).as_posix() + "/"
    text = report_md.render(
        frames,
        info,
        seed=seed,
        n_resamples=n_resamples,
        figures=shown,
        trace_prefix=prefix,
        missing_figures=missing,
    )
    (out / "report.md").write_text(text, encoding="utf-8")
    frames["report_md"] = text
    return text
