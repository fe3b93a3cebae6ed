"""``report.md``: the run report a person reads (what ran, tables, deltas, figures, failures).

Deterministic: the same episodes, run info and seed give the same bytes. Nothing time-dependent
or machine-dependent goes in (run info holds the first invocation's versions and revision, no
times, paths or argv); figure and trace links are relative to the report's directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..metrics import SPEND_CUTS
from . import stats
from .bill import bill_markdown
from .failures import FAILURE_CLASSES, failures
from .format import (
    CLIP_NOTE,
    SIM_NOTE,
    counts_text,
    decimals,
    delta_cell,
    is_missing,
    p_text,
    pct_points,
)
from .frame import labelled, version_note
from .summary import pass_columns

MAX_LISTED = 200  # missing or raised episodes listed one by one (the rest are counted)
FIGURES = (
    ("target_scaling.png", "Success rate vs target N"),
    ("duplicate_rate.png", "Duplicate submissions vs target N"),
    ("anytime_progress.png", "Anytime progress"),
    ("component_ablation.png", "Success by controller composition"),
    ("verifier_recoveries.png", "Verifier recoveries"),
)

_SUMMARY_COLUMNS = (  # header, column, kind
    ("controller", "controller", "text"),
    ("N", "target", "int"),
    ("n", "n_episodes", "int"),
    ("succ %", "success_rate", "pct"),
    ("PASS", None, "pass"),
    ("valid", "mean_valid_count", "1f"),
    ("dup %", "duplicate_submit_rate", "pct"),
    ("prop. dup %", "proposed_duplicate_rate", "pct"),
    ("precision %", "precision", "pct"),
    ("rejected", "mean_rejected", "1f"),
    ("valid/step", "valid_per_step", "3f"),
    ("steps ratio", "steps_ratio", "2f"),
    ("false claim %", "false_claim_rate", "pct"),
    ("honest stop %", "honest_stop_rate", "pct"),
    ("prem. stop %", "premature_stop_rate", "pct"),
    ("budget exh. %", "budget_exhausted_rate", "pct"),
    ("over-claim", "mean_over_claim", "1f"),
    ("gated over-claim", "mean_gated_over_claim", "1f"),
    ("interventions", "mean_interventions", "1f"),
    ("errors", "n_backend_errors", "int"),
    ("tampered", "n_tampered", "int"),
)


def _cell(v: Any, kind: str) -> str:
    if kind == "text":
        return _esc(str(v))
    if is_missing(v):
        return "-"
    if kind == "int":
        return str(int(v))
    if kind == "pct":
        return format(100 * float(v), f".{decimals(100 * float(v), 1)}f")
    return format(float(v), f".{decimals(float(v), int(kind[0]))}f")


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]
) -> list[str]:
    out = [
        "| " + " | ".join(_esc(h) for h in header) + " |",
        "|" + "|".join("---:" if r else "---" for r in right) + "|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out + [""]


def _what_ran(
    df: pd.DataFrame,
    info: dict[str, Any] | None,
    seed: int,
    n_resamples: int,
    confidence: float,
    methods: str,
) -> list[str]:
    out = ["## What ran", ""]
    finished = set(df["key"])
    n_err = int((df["terminated_by"] == "error").sum())
    n_cut = int(df["terminated_by"].isin(SPEND_CUTS).sum())
    n_tamp = int(df["tampered"].sum())
    n_inc = int(df["incomplete"].sum())
    if info is None:
        out += ["No manifest.json: counts come from the episode lines alone.", ""]
        counts: list[tuple[str, object]] = [("finished episodes (lines)", len(df))]
    else:
        exp = info["experiment"]
        out.append(
            f"- Experiment: `{exp.get('name')}`"
            + (
                f": {_esc(' '.join(str(exp['description']).split()))}"
                if exp.get("description")
                else ""
            )
        )
        git = info.get("git") or {}
        rev = (
            f"`{git.get('commit')}`" + (" (uncommitted changes)" if git.get("dirty") else "")
            if git
            else "unknown (not a git checkout)"
        )
        out.append(f"- Revision (first invocation): {rev}")
        if info.get("other_revisions"):
            out.append(
                "- Resumed under other revisions: "
                + ", ".join(f"`{c}`" for c in info["other_revisions"])
            )
        pk = info.get("packages") or {}
        out.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(pk.items())))
        if not df.empty:  # of the episodes, not the manifest (a resume may change it)
            fv = df.groupby("family", sort=True)["family_version"].unique()
            out.append(
                "- Family versions (observation contract): "
                + ", ".join(f"{f} " + "+".join(f"v{v}" for v in sorted(vs)) for f, vs in fv.items())
            )
        out.append(f"- Invocations: {info.get('invocations')}")
        out.append("")
        planned = info.get("planned_episodes")
        missing = [p for p in planned if p["key"] not in finished] if planned is not None else None
        raised = [r for r in info.get("raised", []) if r.get("key") not in finished]
        counts = [
            ("planned", info.get("planned") if info.get("planned") is not None else "?"),
            ("finished (lines in episodes.jsonl)", len(df)),
            ("missing (planned, not finished)", len(missing) if missing is not None else "?"),
            ("raised (in errors.jsonl, not finished)", len(raised)),
        ]
    counts += [
        ("backend errors (finished, excluded from metrics)", n_err),
        *(
            [("cut by a spend limit (token_cap/cost_cap, excluded from metrics)", n_cut)]
            if n_cut
            else []
        ),
        *(
            [("cut at the cost cap (capped.jsonl, not finished)", info["cost"]["capped_episodes"])]
            if info and (info.get("cost") or {}).get("capped_episodes")
            else []
        ),
        ("tampered (excluded from metrics)", n_tamp),
        ("incomplete black-box runs", n_inc),
    ]
    out += _table(["episodes", "count"], [[k, str(v)] for k, v in counts], [False, True])
    if info is not None:
        if info.get("planned_episodes") is None and info.get("plan_problem"):
            out += [
                f"The planned episodes could not be listed here: {_esc(info['plan_problem'])}",
                "",
            ]
        if missing:
            out += [
                f"Missing episodes ({len(missing)}; re-run the same `pushbench run` "
                "command to resume):",
                "",
            ]
            rows = [
                [
                    f"`{p['key']}`",
                    _esc(p["task_id"]),
                    _esc(str(p["instance"] or "-")),
                    _esc(p["policy"]),
                    p["controller"],
                    str(p["seed"]),
                ]
                for p in missing[:MAX_LISTED]
            ]
            out += _table(
                ["key", "task", "instance", "policy", "controller", "seed"],
                rows,
                [False] * 5 + [True],
            )
        if raised:
            out += [f"Raised episodes ({len(raised)}; tracebacks in errors.jsonl):", ""]
            rows = [
                [
                    f"`{r['key']}`",
                    _esc(str(r.get("task_id"))),
                    _esc(str((r.get("controller") or {}).get("name"))),
                    _esc(
                        str(
                            (r.get("policy") or {}).get("label")
                            or (r.get("policy") or {}).get("name")
                        )
                    ),
                    str(r.get("seed")),
                    _esc(_last_line(r.get("error"))),
                ]
                for r in raised[:MAX_LISTED]
            ]
            out += _table(
                ["key", "task", "controller", "policy", "seed", "error"],
                rows,
                [False] * 4 + [True, False],
            )
    out += [
        f"Statistics: paired deltas match episodes on (target, task, instance, seed) "
        f"within one policy label; intervals: {round(100 * confidence)}% {methods} over "
        f"task instances (seed {seed}; {n_resamples} draws where a method samples); "
        "p-values: two-sided paired sign-flip randomization tests over instances (exact up "
        "to 16 instances), Holm-adjusted over the testable rows of one task family, metric "
        "and scope (pooled, or per target) in this report. Rates are in percent, deltas of "
        "rates in percentage points.",
        "",
    ]
    return out


def _last_line(text: object) -> str:
    lines = [x for x in str(text or "").strip().splitlines() if x.strip()]
    return lines[-1][:160] if lines else ""


def _summary(summary: pd.DataFrame) -> list[str]:
    out = ["## Summary", ""]
    summary = labelled(summary)  # one version per table (``reposcan v2`` when mixed)
    for (family, policy), grp in summary.groupby(["family", "policy"], sort=False):
        sim = bool(grp["simulated"].any())
        out += [f"### {family} | {_esc(policy)}" + (" (SIMULATED agent)" if sim else ""), ""]
        passes = [c for c in pass_columns(grp) if grp[c].notna().any()]
        cols: list[tuple[str, str | None, str]] = []
        for head, col, kind in _SUMMARY_COLUMNS:
            if kind == "pass":
                cols += [(f"{c} %", c, "pct") for c in passes]
            elif col in grp:
                cols.append((head, col, kind))
        rows = [[_cell(r[col], kind) for _, col, kind in cols] for _, r in grp.iterrows()]
        out += _table([h for h, _, _ in cols], rows, [k != "text" for _, _, k in cols])
    out += [
        "Columns: success and pass^k over instances (all k seeds succeed), mean verified "
        "count, executed and proposed duplicate submit rates, precision (accepted / "
        "distinct submitted), mean rejected submissions, valid per step, steps ratio "
        "(steps of successful episodes / the diligent reference's), false claims and "
        "honest stops (ended by final below target, claiming at least / less than the "
        "target), premature stops, budget exhaustion, mean signed over-claim at final and "
        "at gated finals, controller interventions. All columns: summary.csv.",
        "",
    ]
    return out


def _delta_rows(grp: pd.DataFrame, holm: bool) -> list[list[str]]:
    rows = []
    for _, r in grp.iterrows():
        est, ci = delta_cell(r, r["metric"])
        p_holm = [p_text(r["p_holm"]) if bool(r["testable"]) else "not testable"] if holm else []
        rows.append(
            [
                _esc(r["family"]),
                _esc(r["policy"]) + (" (SIM)" if r["simulated"] else ""),
                "all" if r["pooled"] else str(int(r["target"])),
                f"{r['controller_a']} - {r['controller_b']}",
                est,
                _esc_md(ci),
                counts_text(r),
                p_text(r["p_value"]) + ("" if bool(r["testable"]) or holm else " (not testable)"),
                *p_holm,
                str(int(r["n_clusters"])),
                str(int(r["n_pairs"])),
                _cell(r["mean_a"], _kind(r["metric"])),
                _cell(r["mean_b"], _kind(r["metric"])),
            ]
        )
    return rows


def _esc_md(text: str) -> str:
    return _esc(text).replace("*", "\\*")


def _kind(metric: str) -> str:
    return "pct" if pct_points(metric) else "3f"


def _scope(pooled: bool) -> str:
    return "pooled over targets" if pooled else "per target"


def _holm_lines(fams: pd.DataFrame, alpha: float) -> list[str]:
    out = [
        "Holm families (task family x metric x scope; only testable rows enter, i.e. rows "
        f"where at least {stats.min_clusters(1 - alpha)} instances differ so that the "
        "smallest attainable p, 2/2^m for m "
        f"differing instances, is below {alpha:g}; the others keep their raw p and read "
        '"not testable"):',
        "",
    ]
    rows = [
        [
            _esc(str(f.family)),
            f.metric,
            _scope(f.pooled),
            str(f.rows),
            str(f.testable),
            "-" if is_missing(f.floor) else p_text(f.floor),
            "yes" if f.floor < alpha else "no",
        ]
        for f in fams.itertuples(index=False)
    ]
    out += _table(
        [
            "family",
            "metric",
            "scope",
            "rows",
            "testable rows (Holm family size)",
            "smallest attainable Holm p",
            f"can reach {alpha:g}",
        ],
        rows,
        [False, False, False, True, True, True, False],
    )
    return out


def _deltas(deltas: pd.DataFrame) -> list[str]:
    from .deltas import holm_families

    out = ["## Paired deltas (A - B)", ""]
    if deltas is None or deltas.empty:
        return out + ["No matched controller pairs.", ""]
    deltas = labelled(deltas)  # one version per Holm family and row label
    alpha = 1 - float(deltas["confidence"].iloc[0])
    fams = holm_families(deltas)
    out += [
        "Each row: the estimate, its interval (by default the inversion of the sign-flip "
        'test: it excludes 0 exactly when p < 0.05; "n/a (k<6)": fewer than 6 instances, '
        "too few for any 95% statement), the instances where A did better / worse than B "
        "(the rest tied), the raw sign-flip p and, where the row's Holm family can reach "
        f"{alpha:g}, the Holm-adjusted p. {CLIP_NOTE.replace('*', chr(92) + '*', 1)}.",
        "",
    ]
    out += _holm_lines(fams, alpha)
    metrics = list(dict.fromkeys(deltas["metric"]))
    for scope in (True, False):
        part = deltas[deltas["pooled"] == scope]
        if part.empty:
            continue
        for m in metrics:
            grp = part[part["metric"] == m]
            if grp.empty:
                continue
            f = fams[(fams["metric"] == m) & (fams["pooled"] == scope)]
            holm = bool((f["floor"] < alpha).any())
            unit = " (percentage points)" if pct_points(m) else ""
            title = "pooled over targets (N = all)" if scope else "per target"
            out += [f"### {m}{unit}, {title}", ""]
            head = [
                "family",
                "policy",
                "N",
                "A - B",
                "delta",
                "interval",
                "instances A vs B",
                "p",
                *(["p (Holm)"] if holm else []),
                "instances",
                "pairs",
                "mean A",
                "mean B",
            ]
            right = [
                False,
                False,
                True,
                False,
                True,
                False,
                False,
                True,
                *([True] if holm else []),
                True,
                True,
                True,
                True,
            ]
            out += _table(head, _delta_rows(grp[_reaching(grp, f, alpha) | ~holm], holm), right)
            if not holm or not _reaching(grp, f, alpha).all():
                out += _unreachable(grp, f, alpha, holm)
    return out


def _reaching(grp: pd.DataFrame, fams: pd.DataFrame, alpha: float) -> pd.Series:
    ok = set(fams.loc[fams["floor"] < alpha, "family"])
    return grp["family"].isin(ok)


def _unreachable(grp: pd.DataFrame, fams: pd.DataFrame, alpha: float, holm: bool) -> list[str]:
    out = []
    for f in fams.itertuples(index=False):
        if f.floor < alpha:
            continue
        why = (
            "no row is testable"
            if f.testable == 0
            else f"{f.testable} testable rows x the smallest attainable p "
            f"{p_text(f.floor / f.testable)} = {p_text(f.floor)} >= {alpha:g}"
        )
        out.append(
            f"No Holm-adjusted p for {_esc(str(f.family))} {f.metric} "
            f"{_scope(f.pooled)}: {why}, so no row of this family can be significant "
            "after adjustment; the raw p is shown."
        )
    if holm:
        sub = grp[~_reaching(grp, fams, alpha)]
        out += [""] + _table(
            [
                "family",
                "policy",
                "N",
                "A - B",
                "delta",
                "interval",
                "instances A vs B",
                "p",
                "instances",
                "pairs",
                "mean A",
                "mean B",
            ],
            _delta_rows(sub, False),
            [False, False, True, False, True, False, False, True, True, True, True, True],
        )
    return out + [""]


def _figures(figures: Sequence[str], missing: Sequence[tuple[str, str]] = ()) -> list[str]:
    if not figures and not missing:
        return []
    names = dict(FIGURES)
    out = ["## Figures", ""]
    for f in figures:
        out += [f"![{names.get(f, f)}]({f})", ""]
    if missing:
        out += [f"Missing figures ({len(missing)}):", ""]
        out += [f"- `{name}` ({names.get(name, name)}): {_esc(why)}" for name, why in missing]
        out.append("")
    return out


def _failures(df: pd.DataFrame, trace_prefix: str) -> list[str]:
    fails = failures(df)
    out = ["## Failures", ""]
    if fails.empty:
        return out + ["Every episode succeeded.", ""]
    classes = sorted(
        set(fails["failure"]),
        key=lambda c: (
            FAILURE_CLASSES.index(c) if c in FAILURE_CLASSES else len(FAILURE_CLASSES),
            c,
        ),
    )
    counts = fails.groupby(["family", "policy", "controller", "failure"], sort=False).size()
    rows = []
    for (family, policy, ctrl), _ in fails.groupby(["family", "policy", "controller"], sort=False):
        rows.append(
            [_esc(family), _esc(policy), ctrl]
            + [str(int(counts.get((family, policy, ctrl, c), 0))) for c in classes]
        )
    out += _table(
        ["family", "policy", "controller", *classes], rows, [False] * 3 + [True] * len(classes)
    )
    out += [
        f"Every episode that did not succeed ({len(fails)}), with its failure class and "
        "trace (the full record: calls and controller steps):",
        "",
    ]
    rows = [
        [
            _esc(r.family),
            _esc(r.policy),
            r.controller,
            str(int(r.target)),
            _esc(r.task_id),
            _esc(str(r.instance)),
            "-" if is_missing(r.seed) else str(int(r.seed)),
            r.failure,
            "-" if is_missing(r.valid_count) else str(int(r.valid_count)),
            "-" if is_missing(r.steps_used) else str(int(r.steps_used)),
            f"[trace]({trace_prefix}{r.key}.json.gz)",
        ]
        for r in fails.itertuples(index=False)
    ]
    out += _table(
        [
            "family",
            "policy",
            "controller",
            "N",
            "task",
            "instance",
            "seed",
            "class",
            "valid",
            "steps",
            "trace",
        ],
        rows,
        [False, False, False, True, False, False, True, False, True, True, False],
    )
    return out


def render(
    frames: dict[str, pd.DataFrame],
    info: dict[str, Any] | None = None,
    *,
    seed: int = 0,
    n_resamples: int = 9999,
    figures: Sequence[str] = (),
    trace_prefix: str = "traces/",
    missing_figures: Sequence[tuple[str, str]] = (),
) -> str:
    """The text of ``report.md`` for the report ``frames`` (``episodes``, ``summary``,
    ``paired_deltas``) and the run ``info`` (:func:`pushbench.runner.runinfo.run_info`);
    ``missing_figures``: ``(file name, why)`` of applicable figures not embedded."""
    df, summary = frames["episodes"], frames["summary"]
    name = (info or {}).get("experiment", {}).get("name") or "episodes"
    out = [f"# PushBench report: {_esc(str(name))}", ""]
    if not summary.empty and bool(summary["simulated"].any()):
        sims = sorted(set(summary.loc[summary["simulated"], "policy"]))
        out += [
            f"> **{SIM_NOTE}** Simulated policies here: " + ", ".join(f"`{s}`" for s in sims),
            "",
        ]
    note = version_note(df)
    if note:
        out += [f"> **Family versions.** {note}", ""]
    deltas = frames.get("paired_deltas")
    conf = float(deltas["confidence"].iloc[0]) if deltas is not None and not deltas.empty else 0.95
    used = (
        sorted({m.split(" (")[0] for m in deltas["ci_method"]} - {"none", "n/a", ""})
        if deltas is not None and not deltas.empty
        else []
    )
    methods = ("; ".join(used) or f"{stats.DEFAULT_METHOD} interval") + (
        " (cut to the plausible range where it exceeds it; each row's method is in "
        "paired_deltas.csv)"
    )
    out += _what_ran(df, info, seed, n_resamples, conf, methods)
    out += _summary(summary) if not summary.empty else ["## Summary", "", "No episodes.", ""]
    if frames.get("bill") is not None:
        out += bill_markdown(frames["bill"], (info or {}).get("cost"))
    out += _deltas(deltas)
    out += _figures(figures, missing_figures)
    out += _failures(df, trace_prefix)
    return "\n".join(out).rstrip("\n") + "\n"
