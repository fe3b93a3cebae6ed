"""The bill of a run: model tokens and cost per policy label, controller and target.

Spend is spend: every finished episode counts (backend errors and spend-limit cuts included),
plus the episodes cut at the cost cap, which live in ``capped.jsonl`` rather than
``episodes.jsonl`` (they run again on resume; the run info carries their count and cost).
``cost per success`` divides a row's cost by its scored successes (:func:`.frame.scored`).
The same figures are in ``summary.csv`` (``total_*`` and ``cost_per_success`` columns).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from .frame import scored, sort_frame

if TYPE_CHECKING:
    from rich.console import Console

GROUP_BILL = ["policy", "controller", "target"]
BILL_COLUMNS = [
    "policy",
    "controller",
    "target",
    "n_episodes",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "successes",
    "cost_per_success",
]


def bill_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per ``(policy, controller, target)`` of the episodes frame ``df`` (empty when
    no episode recorded usage)."""
    if df.empty or "cost_usd" not in df:
        return pd.DataFrame(columns=BILL_COLUMNS)
    g = df.groupby(GROUP_BILL, sort=False, dropna=False)
    out = g.agg(
        n_episodes=("key", "size"),
        prompt_tokens=("prompt_tokens", "sum"),
        completion_tokens=("completion_tokens", "sum"),
    )
    out["cost_usd"] = g["cost_usd"].sum(min_count=1)
    ok = scored(df)
    wins = (
        ok.groupby(GROUP_BILL, sort=False, dropna=False)["success"].sum()
        if not ok.empty
        else pd.Series(dtype=float)
    )
    out["successes"] = wins.reindex(out.index).fillna(0).astype(int)
    out["cost_per_success"] = (out["cost_usd"] / out["successes"]).where(out["successes"] > 0)
    return sort_frame(out.reset_index(), GROUP_BILL)[BILL_COLUMNS]


def totals(bill: pd.DataFrame, cost: dict[str, Any] | None = None) -> dict[str, Any]:
    """Whole-run totals of ``bill`` plus the cut episodes and the cap from the run info's
    ``cost`` section (``capped_episodes``, ``capped_cost_usd``, ``cap_usd``)."""
    cost = cost or {}
    finished = float(bill["cost_usd"].sum(min_count=1)) if not bill.empty else float("nan")
    capped = float(cost.get("capped_cost_usd") or 0.0)
    total = (0.0 if pd.isna(finished) else finished) + capped
    wins = int(bill["successes"].sum()) if not bill.empty else 0
    return {
        "episodes": int(bill["n_episodes"].sum()) if not bill.empty else 0,
        "prompt_tokens": int(bill["prompt_tokens"].sum()) if not bill.empty else 0,
        "completion_tokens": int(bill["completion_tokens"].sum()) if not bill.empty else 0,
        "finished_cost_usd": finished,
        "capped_episodes": int(cost.get("capped_episodes") or 0),
        "capped_cost_usd": capped,
        "total_cost_usd": total,
        "successes": wins,
        "cost_per_success": total / wins if wins else float("nan"),
        "cap_usd": cost.get("cap_usd"),
    }


def _money(v: Any, missing: str = "unpriced") -> str:
    return missing if v is None or pd.isna(v) else f"${v:,.4f}"


def _per_success(cost: Any, wins: Any) -> str:
    return "-" if not wins else _money(cost)


def total_line(t: dict[str, Any]) -> str:
    """One sentence: total spend, its parts and the cap."""
    text = (
        f"Total ${t['total_cost_usd']:,.4f} for {t['prompt_tokens']:,} prompt + "
        f"{t['completion_tokens']:,} completion tokens in {t['episodes']} finished episodes"
    )
    if t["capped_episodes"]:
        text += (
            f" and ${t['capped_cost_usd']:,.4f} in {t['capped_episodes']} episode cut(s) "
            "at the cost cap (capped.jsonl)"
        )
    text += f"; {t['successes']} successes" + (
        f", {_money(t['cost_per_success'])} per success" if t["successes"] else ""
    )
    if t["cap_usd"] is not None:
        text += f"; cap ${t['cap_usd']:,.2f} ({t['total_cost_usd'] / t['cap_usd']:.0%} used)"
    return text + "."


def bill_markdown(bill: pd.DataFrame, cost: dict[str, Any] | None) -> list[str]:
    """The ``## Bill`` section of report.md (nothing when no episode recorded usage)."""
    if bill.empty:
        return []
    out = [
        "## Bill",
        "",
        "| policy | controller | N | episodes | prompt tokens "
        "| completion tokens | cost USD | successes | cost per success |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in bill.itertuples(index=False):
        out.append(
            f"| {str(r.policy).replace('|', '/')} | {r.controller} | {int(r.target)} | "
            f"{int(r.n_episodes)} | {int(r.prompt_tokens):,} | {int(r.completion_tokens):,} "
            f"| {_money(r.cost_usd)} | {int(r.successes)} "
            f"| {_per_success(r.cost_per_success, r.successes)} |"
        )
    return out + ["", total_line(totals(bill, cost)), ""]


def _tokens(v: Any) -> str:
    """Token counts for the terminal: exact below 100,000, then k / M (exact in report.md)."""
    v = int(v)
    if v < 100_000:
        return f"{v:,}"
    return f"{v / 1e6:.2f}M" if v >= 1_000_000 else f"{v / 1e3:.0f}k"


def print_bill(bill: pd.DataFrame, console: Console, cost: dict[str, Any] | None) -> None:
    """The bill as terminal tables (one per policy label, whose name is a line of its own so
    the table fits 80 columns) and its total line."""
    if bill.empty:
        return
    from rich.text import Text

    from .. import terminal

    console.print(Text("Bill", style="bold"))
    for policy, grp in bill.groupby("policy", sort=False):
        console.print(Text(str(policy), style="bold"), overflow="fold")
        table = terminal.table()
        for head in ("controller", "N", "n", "prompt tok", "compl tok", "USD", "succ", "USD/succ"):
            table.add_column(
                head, no_wrap=True, justify="left" if head == "controller" else "right"
            )
        for r in grp.itertuples(index=False):
            table.add_row(
                str(r.controller),
                str(int(r.target)),
                str(int(r.n_episodes)),
                _tokens(r.prompt_tokens),
                _tokens(r.completion_tokens),
                _money(r.cost_usd),
                str(int(r.successes)),
                _per_success(r.cost_per_success, r.successes),
            )
        console.print(table)
    console.print(total_line(totals(bill, cost)), highlight=False)
