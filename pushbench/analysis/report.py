"""Report: episode lines -> a flat table, per-cell summaries, paired deltas, report.md.

The implementation lives in :mod:`pushbench.analysis` (one module per concern); this module
re-exports its public names for existing callers. See :mod:`pushbench.analysis.deltas` for the
paired-delta definitions (matching, clusters, pooled rows, interval, sign-flip test, Holm
family) and :mod:`pushbench.analysis.summary` for the summary columns and pass^k.
"""

from __future__ import annotations

from .console import print_deltas, print_report, print_summary
from .deltas import (
    DEFAULT_DELTA_METRICS,
    MATCH,
    PAIRED_COLUMNS,
    RATE_METRICS,
    DuplicateEpisodesError,
    controller_pairs,
    delta_stats,
    delta_table,
    matched_means,
    paired_deltas,
)
from .failures import FAILURE_CLASSES, failure_class, failures
from .format import SIM_NOTE, SIMULATED_LABEL
from .frame import (
    ABLATION_CONTROLLERS,
    CONTROLLER_ORDER,
    EPISODE_COLUMNS,
    USAGE_COLUMNS,
    as_frame,
    episodes_frame,
    load_episodes,
    order_controllers,
    scored,
)
from .output import FLOAT_FORMAT, existing_figures, to_csv_bytes, write_report
from .reference import steps_ratio
from .stats import holm, interval, row_rng, sign_flip_p
from .summary import pass_hat_k, pass_k_table, summary_table

__all__ = [
    "ABLATION_CONTROLLERS",
    "CONTROLLER_ORDER",
    "DEFAULT_DELTA_METRICS",
    "EPISODE_COLUMNS",
    "FAILURE_CLASSES",
    "FLOAT_FORMAT",
    "MATCH",
    "PAIRED_COLUMNS",
    "RATE_METRICS",
    "SIM_NOTE",
    "SIMULATED_LABEL",
    "USAGE_COLUMNS",
    "DuplicateEpisodesError",
    "as_frame",
    "controller_pairs",
    "delta_stats",
    "delta_table",
    "episodes_frame",
    "existing_figures",
    "failure_class",
    "failures",
    "holm",
    "interval",
    "load_episodes",
    "matched_means",
    "order_controllers",
    "paired_deltas",
    "pass_hat_k",
    "pass_k_table",
    "print_deltas",
    "print_report",
    "print_summary",
    "row_rng",
    "scored",
    "sign_flip_p",
    "steps_ratio",
    "summary_table",
    "to_csv_bytes",
    "write_report",
]
