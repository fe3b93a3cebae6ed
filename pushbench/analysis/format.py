"""Number formatting shared by the terminal tables and report.md."""

from __future__ import annotations

import math

from .deltas import RATE_METRICS

SIMULATED_LABEL = "SIMULATED agent (not an LLM)"
SIM_NOTE = ("SIMULATED: scripted agents with simulated failure mechanisms, not language "
            "models; their numbers are not LLM results.")
_DECIMALS = {"valid_count": 1, "valid_per_step": 3, "steps_used": 1}


def is_missing(x) -> bool:
    if x is None:
        return True
    try:
        return bool(x != x)  # NaN and pandas NA
    except (TypeError, ValueError):
        return True


def pct_points(metric: str) -> bool:
    """Deltas of rate metrics are shown in percentage points."""
    return metric in RATE_METRICS


def _fmt(x: float, metric: str, short: bool, sign: bool = False) -> str:
    if is_missing(x):
        return "-"
    if math.isinf(x):
        return ("+" if sign and x > 0 else "") + ("inf" if x > 0 else "-inf")
    if pct_points(metric):
        x, dec = 100 * x, (0 if short else 1)
    else:
        dec = _DECIMALS.get(metric, 3)
    text = format(x, f"{'+' if sign else ''}.{dec}f")
    return "+0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


def delta_cell(r, metric: str, short: bool = False) -> tuple[str, str]:
    """``(estimate, interval)`` texts of one delta row; a degenerate row says so instead of
    printing an interval of zero width."""
    if int(r["n_clusters"]) == 0:
        return "-", ""
    est = _fmt(r["delta"], metric, short=False, sign=True)
    if bool(r["degenerate"]):
        n = int(r["n_clusters"])
        return est, ("const" if short else
                     f"(no variation over {n} instance{'s' if n != 1 else ''})")
    return est, f"[{_fmt(r['ci_low'], metric, short)}, {_fmt(r['ci_high'], metric, short)}]"


def p_text(p) -> str:
    if is_missing(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"
