"""Terminal tables (rich) that fit an 80-column terminal without breaking names mid-word.

Names (controllers, policy labels) never wrap inside a word: name cells are ``no_wrap`` and the
tables keep few, narrow numeric columns (every column is in ``summary.csv`` and ``report.md``).
Percentages are whole numbers here; the CSVs and report.md carry the decimals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from .format import (
    CLIP_NOTE,
    SIM_NOTE,
    SIMULATED_LABEL,
    counts_text,
    delta_cell,
    is_missing,
    pct_points,
)
from .frame import labelled

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

_SUMMARY: tuple[tuple[str, str | None, Callable[[Any], str] | None], ...] = (
    # header, summary column, formatter
    ("N", "target", lambda v: str(int(v))),
    ("n", "n_episodes", lambda v: str(int(v))),
    ("succ", "success_rate", lambda v: _pct0(v)),
    ("pass^K", None, None),  # filled per table with the largest pass^k column
    ("valid", "mean_valid_count", lambda v: _num(v, ".1f")),
    ("dup", "duplicate_submit_rate", lambda v: _pct0(v)),
    ("pdup", "proposed_duplicate_rate", lambda v: _pct0(v)),
    ("prec", "precision", lambda v: _pct0(v)),
    ("claim", "false_claim_rate", lambda v: _pct0(v)),
    ("stop", "premature_stop_rate", lambda v: _pct0(v)),
    ("be", "budget_exhausted_rate", lambda v: _pct0(v)),
    ("over", "mean_over_claim", lambda v: _num(v, "+.1f")),
)
LEGEND = (
    "N target, n episodes, succ success %, pass^K % of instances where all K seeds "
    "succeed, valid mean verified count, dup executed / pdup proposed duplicate "
    "submit %, prec precision %, claim false claim %, stop premature stop %, be budget "
    "exhausted %, over mean signed over-claim at final. Every column and more: "
    "summary.csv, report.md."
)


def _pct0(v: Any) -> str:
    return "-" if is_missing(v) else f"{100 * v:.0f}"


def _num(v: Any, fmt: str) -> str:
    return "-" if is_missing(v) else format(v, fmt)


def _table(console: Console, title: str, simulated: bool) -> Table:
    """A compact table; its title is printed as a line of its own first, so it wraps at the
    console's width (between words) rather than at the table's."""
    from rich.text import Text

    from .. import terminal

    console.print(Text(title, style="bold yellow" if simulated else "bold"))
    table: Table = terminal.table(padding=0)
    return table


def print_summary(summary: pd.DataFrame, console: Console) -> None:
    """One table per ``(family, policy)``: rows controller x target."""
    from .summary import pass_columns

    summary = labelled(summary)  # one version per table (``reposcan v2`` when mixed)
    for (family, policy), grp in summary.groupby(["family", "policy"], sort=False):
        sim = bool(grp["simulated"].any())
        table = _table(
            console, f"{family} | {policy}" + (f" | {SIMULATED_LABEL}" if sim else ""), sim
        )
        width = max(len("controller"), *(len(c) for c in grp["controller"]))
        table.add_column("controller", no_wrap=True, min_width=width)
        passes = [c for c in pass_columns(grp) if grp[c].notna().any()]
        last_pass = passes[-1] if passes else None
        cols = [
            (h if c is not None else (last_pass or "pass^K"), c or last_pass, f)
            for h, c, f in _SUMMARY
        ]
        for head, _, _ in cols:
            table.add_column(head, justify="right", no_wrap=True)
        last = None
        for _, r in grp.iterrows():
            name = r["controller"] if r["controller"] != last else ""
            last = r["controller"]
            cells = []
            for _, col, fmt in cols:
                if col is None or col not in r:
                    cells.append("-")
                elif fmt is None:
                    cells.append(_pct0(r[col]))
                else:
                    cells.append(fmt(r[col]))
            table.add_row(name, *cells)
        console.print(table)
    console.print(LEGEND, style="dim", highlight=False)


def print_deltas(deltas: pd.DataFrame, console: Console, metric: str = "success") -> None:
    """Paired ``metric`` deltas per ``(family, policy)``: rows controller pair, columns pooled
    (all targets) then each target; each cell the delta, its interval, the instances A is
    better / worse / tied on, and the p-value: Holm-adjusted (``H``) where the row's Holm family
    can reach significance, else the raw sign-flip p (``p``); ``nt`` marks a row that is not
    testable (fewer than 6 instances differ)."""
    from .deltas import holm_families

    sel = labelled(deltas[deltas["metric"] == metric])
    fams = holm_families(sel)
    alpha = 1 - float(sel["confidence"].iloc[0]) if not sel.empty else 0.05
    reach = {(f.family, f.pooled): f.floor < alpha for f in fams.itertuples(index=False)}
    for (family, policy), grp in sel.groupby(["family", "policy"], sort=False):
        sim = bool(grp["simulated"].any())
        conf = int(round(100 * float(grp["confidence"].iloc[0])))
        unit = "points" if pct_points(metric) else "units"
        title = (
            f"{family} | {policy} | {metric} A - B ({unit}), [{conf}% CI], instances "
            "+better -worse =tied, p" + (f" | {SIMULATED_LABEL}" if sim else "")
        )
        pairs = list(
            grp[["controller_a", "controller_b"]].drop_duplicates().itertuples(index=False)
        )
        width = max(len(" - b"), *(len(a) for a, _ in pairs), *(len(f" - {b}") for _, b in pairs))
        scopes = ([("all N", grp["pooled"])] if grp["pooled"].any() else []) + [
            (f"N={int(t)}", (~grp["pooled"]) & (grp["target"] == t))
            for t in sorted(grp.loc[~grp["pooled"], "target"].dropna().unique())
        ]
        cells: dict[tuple[str, str, str], str] = {}  # (pair, scope head) -> cell text
        for head, mask in scopes:
            for a, b in pairs:
                hit = grp[
                    mask.fillna(False).astype(bool)
                    & (grp["controller_a"] == a)
                    & (grp["controller_b"] == b)
                ]
                cells[(a, b, head)] = (
                    ""
                    if hit.empty
                    else _cell(
                        hit.iloc[0], metric, reach.get((family, bool(hit.iloc[0]["pooled"])), False)
                    )
                )
        for part in _fit(scopes, cells, width, console.width):
            table = _table(console, title, sim)
            table.add_column("A - B", no_wrap=True, min_width=width)
            for head in part:
                table.add_column(head, justify="right", no_wrap=True)
            for a, b in pairs:
                table.add_row(f"{a}\n - {b}", *(cells[(a, b, h)] for h in part))
            console.print(table)
    if not sel.empty:
        console.print(DELTA_LEGEND, style="dim", highlight=False)


def _fit(
    scopes: Sequence[tuple[str, Any]],
    cells: Mapping[tuple[str, str, str], str],
    name_width: int,
    total: int,
) -> list[list[str]]:
    """The scope columns split into consecutive groups whose tables fit ``total`` columns (a
    table per group, each repeating the pair names), so no cell is cut."""
    groups: list[list[str]] = [[]]
    used = name_width
    for head, _ in scopes:
        w = 1 + max(
            [len(head)]
            + [len(x) for (_, _, h), c in cells.items() if h == head for x in c.splitlines()]
        )
        if groups[-1] and used + w > total:
            groups.append([])
            used = name_width
        groups[-1].append(head)
        used += w
    return groups


DELTA_LEGEND = (
    "H: Holm-adjusted sign-flip p over instances (family: task family x metric x "
    "pooled or per target, testable rows only); p: raw p where that family cannot "
    "reach 0.05 after adjustment (report.md says why); nt: not testable (fewer "
    "than 6 instances differ: p never below 0.05); n/a (k<6): too few instances "
    "for a 95% interval; " + CLIP_NOTE + "."
)


def _cell(r: Any, metric: str, holm_shown: bool) -> str:
    est, ci = delta_cell(r, metric, short=True)
    if is_missing(r["p_value"]):
        ptxt = ""
    elif not bool(r["testable"]):
        ptxt = "p" + _p(r["p_value"]) + " nt"
    elif holm_shown:
        ptxt = "H" + _p(r["p_holm"])
    else:
        ptxt = "p" + _p(r["p_value"])
    return "\n".join(x for x in (est, ci, counts_text(r, short=True), ptxt) if x)


def _p(p: Any) -> str:
    """``=.031``: two significant digits without the leading zero (``<.001`` below 0.001)."""
    if is_missing(p):
        return "=-"
    return "<.001" if p < 0.001 else "=" + format(float(p), ".2g").removeprefix("0")


def print_report(report: dict[str, pd.DataFrame], console: Console | None = None) -> None:
    """Print the summary tables and the paired success deltas; simulated tables say so in their
    title, and a note follows them."""
    from rich.console import Console

    console = console or Console()
    summary = report["summary"]
    if summary.empty:
        console.print("no episodes")
        return
    print_summary(summary, console)
    if bool(summary["simulated"].any()):
        console.print(SIM_NOTE, style="bold yellow", highlight=False)
    deltas = report.get("paired_deltas")
    if deltas is not None and not deltas.empty:
        print_deltas(deltas, console)
