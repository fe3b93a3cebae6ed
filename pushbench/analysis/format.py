"""Number formatting shared by the terminal tables and report.md."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .deltas import RATE_METRICS

SIMULATED_LABEL = "SIMULATED agent (not an LLM)"
SIM_NOTE = (
    "SIMULATED: scripted agents with simulated failure mechanisms, not language "
    "models; their numbers are not LLM results."
)
_DECIMALS = {"valid_count": 1, "valid_per_step": 3, "steps_used": 1}


def is_missing(x: Any) -> bool:
    if x is None:
        return True
    try:
        return bool(x != x)  # NaN and pandas NA
    except (TypeError, ValueError):
        return True


def pct_points(metric: str) -> bool:
    """Deltas of rate metrics are shown in percentage points."""
    return metric in RATE_METRICS


def decimals(x: float, least: int) -> int:
    """Decimals that print ``x`` with at least two significant digits (and at least ``least``):
    a non-zero value never prints as 0 (0.037 -> 3 decimals, 3.7 -> 1, 37 -> ``least``).
    Below 1e-9 a value is rounding noise (a sum of thirds) and prints with ``least``."""
    if not math.isfinite(x) or abs(x) < 1e-9:
        return least
    return max(least, 1 - math.floor(math.log10(abs(x))))


def _fmt(x: float, metric: str, short: bool, sign: bool = False) -> str:
    if is_missing(x):
        return "-"
    if math.isinf(x):
        return ("+" if sign and x > 0 else "") + ("inf" if x > 0 else "-inf")
    if pct_points(metric):
        x = 100 * x
    # the terminal's bounds (short): two significant digits, no more; report.md: the metric's
    # decimals, more where a small value needs them
    dec = 0 if short else (1 if pct_points(metric) else _DECIMALS.get(metric, 3))
    text = format(x, f"{'+' if sign else ''}.{decimals(x, dec)}f")
    return "+0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


CLIP_MARK = "*"
CLIP_NOTE = "* bound cut to the plausible range ([-100, 100] points; counts: the instances' range)"


def delta_cell(r: Mapping[str, Any], metric: str, short: bool = False) -> tuple[str, str]:
    """``(estimate, interval)`` texts of one delta row. A row without bounds says why: ``n/a
    (k<6)`` (too few instances for the test to reject anything) or, for the bootstrap options,
    that every instance gave the same difference; a bound cut to the plausible range is marked
    with :data:`CLIP_MARK`."""
    if int(r["n_clusters"]) == 0:
        return "-", ""
    est = _fmt(r["delta"], metric, short=False, sign=True)
    if is_missing(r["ci_low"]) or is_missing(r["ci_high"]):
        if str(r["ci_method"]).startswith("n/a"):
            return est, str(r["ci_method"])
        if bool(r["degenerate"]):
            n = int(r["n_clusters"])
            return est, (
                "const" if short else f"(no variation over {n} instance{'s' if n != 1 else ''})"
            )
        return est, "-"
    lo = _fmt(r["ci_low"], metric, short) + (CLIP_MARK if r.get("ci_low_clipped") else "")
    hi = _fmt(r["ci_high"], metric, short) + (CLIP_MARK if r.get("ci_high_clipped") else "")
    return est, f"[{lo}, {hi}]"


def counts_text(r: Mapping[str, Any], short: bool = False) -> str:
    """Instances where A is better / worse than B (``5/9 better, 0 worse``; short ``+5 -0 =4``)."""
    if int(r["n_clusters"]) == 0:
        return ""
    b, w, t = int(r["n_better"]), int(r["n_worse"]), int(r["n_tied"])
    return f"+{b} -{w} ={t}" if short else f"{b}/{b + w + t} better, {w} worse"


def p_text(p: Any) -> str:
    if is_missing(p):
        return "-"
    return "<0.001" if p < 0.001 else format(p, f".{decimals(p, 3)}f")
