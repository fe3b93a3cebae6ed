"""Reports and figures on thin or odd data never crash and always write valid files.

Generated episode sets (hypothesis) and the named corners (one episode; every episode a backend
error; a family with one controller; NaN or missing metrics; one target; many policies) go
through what ``pushbench run`` does after its sweep (``report_and_plot``), through
``pushbench report`` and through every plot function: each finishes without raising, and the
CSVs parse, report.md is UTF-8 markdown naming every figure it does not embed, and every PNG is
a PNG. Matplotlib runs headless (Agg); example counts are modest (each example draws figures).
"""

from __future__ import annotations

import json
import math
import tempfile
from io import StringIO
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from pushbench.analysis import plots
from pushbench.analysis.frame import episodes_frame, scored
from pushbench.analysis.report_md import FIGURES
from pushbench.runner.sweep import report_and_plot

PNG = b"\x89PNG\r\n\x1a\n"
CONTROLLERS = (
    "none",
    "standard",
    "verifier_gated",
    "stateqgp",
    "stateqgp_dedupe_only",
    "my_controller",
)
ENDINGS = ("final", "budget", "ask_user", "error", "token_cap", "cost_cap")
METRICS = (
    "valid_count",
    "success",
    "submissions",
    "duplicate_submit_rate",
    "proposed_duplicate_rate",
    "precision",
    "rejected",
    "valid_per_step",
    "false_completion",
    "false_claim",
    "honest_stop",
    "premature_stop",
    "budget_exhausted",
    "reported_count_error",
    "over_claim",
    "gated_over_claim",
    "invalid_actions",
    "verifier_recoveries",
    "blocked_completions",
)
# a metric value as a line may hold it: a number, a flag, undefined (null), NaN, or absent
VALUES = st.one_of(
    st.floats(0, 1),
    st.integers(0, 30),
    st.booleans(),
    st.none(),
    st.just(math.nan),
    st.just("absent"),
)


def episode(
    i: int,
    family="reposcan",
    controller="standard",
    policy="simulated-mid",
    target=10,
    instance="i0",
    seed=0,
    ended="final",
    metrics=None,
    progress=None,
    error=None,
    tampered=False,
) -> dict:
    """One runner-format episode line; ``metrics`` entries equal to "absent" are left out."""
    met = {
        "valid_count": target,
        "success": True,
        "steps_used": 12,
        "submissions": 3,
        "duplicate_submit_rate": 0.0,
        "interventions": {},
    }
    for k, v in (metrics or {}).items():
        if v == "absent":
            met.pop(k, None)
        else:
            met[k] = v
    pol = (
        policy
        if isinstance(policy, dict)
        else {"name": policy, "simulated": policy.startswith("simulated"), "params": {}}
    )
    line = {
        "key": f"k{i}",
        "family": family,
        "task_id": f"T-{instance}-N{target}",
        "instance": instance,
        "target": target,
        "budget": 30,
        "seed": seed,
        "steps_used": 12,
        "terminated_by": ended,
        "valid_count": met.get("valid_count"),
        "success": met.get("success"),
        "reported_count": None,
        "metrics": met,
        "controller": {"name": controller, "components": []},
        "policy": pol,
        "simulated": bool(pol.get("simulated")),
    }
    if progress is not None:
        line["progress"] = progress
    if ended == "error":
        line["error"] = error or {
            "type": "bad_request",
            "status": 400,
            "retries": 0,
            "message": "This model's maximum context length is 4096 "
            "tokens. However, you requested 4608 tokens",
        }
        line["metrics"]["error"] = True
    if tampered:
        line["tampered"] = True
    return line


@st.composite
def episode_sets(draw) -> list[dict]:
    families = draw(
        st.lists(
            st.sampled_from(("reposcan", "dataops", "swelite")), min_size=1, max_size=2, unique=True
        )
    )
    n_policies = draw(st.integers(1, 4))
    policies = [
        f"simulated-p{k}" if k % 2 else {"name": "llm", "params": {"model": f"m{k}"}}
        for k in range(n_policies)
    ]
    out, seen = [], set()
    for i in range(draw(st.integers(1, 10))):
        met = draw(st.dictionaries(st.sampled_from(METRICS), VALUES, max_size=6))
        prog = draw(
            st.one_of(st.none(), st.lists(st.one_of(st.integers(0, 12), st.none()), max_size=8))
        )
        out.append(
            episode(
                i,
                family=draw(st.sampled_from(families)),
                controller=draw(st.sampled_from(CONTROLLERS)),
                policy=draw(st.sampled_from(policies)),
                target=draw(st.sampled_from((1, 3, 10, 25))),
                instance=draw(st.sampled_from(("i0", "i1", "i2"))),
                seed=draw(st.integers(0, 2)),
                ended=draw(st.sampled_from(ENDINGS)),
                metrics=met,
                progress=prog,
                tampered=draw(st.booleans()) and draw(st.booleans()),
            )
        )
        # one episode per (agent, controller, task, instance, seed), as a run writes them
        ident = json.dumps(
            [out[-1][k] for k in ("family", "policy", "controller", "target", "instance", "seed")],
            sort_keys=True,
        )
        if ident in seen:
            out.pop()
        seen.add(ident)
    return out


NAMED = {
    "one episode": [episode(0)],
    "every episode a backend error": [
        episode(i, ended="error", controller=c) for i, c in enumerate(("standard", "stateqgp"))
    ],
    "a family with one controller": [
        episode(0, family="dataops", controller="stateqgp"),
        episode(1, family="reposcan"),
        episode(2, family="reposcan", controller="stateqgp"),
    ],
    "NaN or missing metrics": [
        episode(
            i,
            controller=c,
            instance=f"i{i % 2}",
            seed=i,
            metrics={m: v for m in METRICS[i % 3 :: 3]},
            progress=[None, 1, "x"] if i else [],
        )
        for i, (c, v) in enumerate(
            (
                ("standard", math.nan),
                ("stateqgp", "absent"),
                ("standard", None),
                ("stateqgp", math.nan),
            )
        )
    ],
    "no duplicate-rate data (the first real run's crash)": [
        episode(i, controller=c, metrics={"duplicate_submit_rate": None, "submissions": 0})
        for i, c in enumerate(("standard", "verifier_gated", "stateqgp"))
    ],
    "one target": [
        episode(i, controller=c, instance=f"i{i}", seed=i)
        for i, c in enumerate(("standard", "stateqgp", "standard", "stateqgp"))
    ],
    "many policies": [
        episode(
            i,
            policy={"name": "llm", "params": {"model": f"model-{i}"}},
            controller=("standard", "stateqgp")[i % 2],
        )
        for i in range(8)
    ],
}


def _quiet() -> Console:
    return Console(file=StringIO(), width=80, record=True)


def check_outputs(run: Path, lines: list[dict], figures: list[Path]) -> None:
    """The files the analysis wrote are valid, and report.md accounts for every figure."""
    for name in ("summary.csv", "paired_deltas.csv"):
        text = (run / name).read_text(encoding="utf-8")
        if text.strip():
            pd.read_csv(run / name)  # parses
    report = (run / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# PushBench report")
    for p in figures:
        assert p.read_bytes()[:8] == PNG
    planned = [n for n, _ in plots.planned_figures(episodes_frame(lines))]
    for name in planned:  # embedded, or named as missing
        assert f"({name})" in report or f"`{name}`" in report, name
    assert {p.name for p in figures} <= {n for n, _ in FIGURES}


def run_analysis(lines: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        err, out = _quiet(), _quiet()
        figures = report_and_plot(run, console=err, out=out, n_resamples=199)
        check_outputs(run, lines, figures)
        said = err.export_text()
        assert "skipped" not in said, said  # every applicable figure was drawn
        n_err = sum(x["terminated_by"] == "error" for x in lines)
        if n_err:
            assert f"ended with backend errors: context length exceeded ({n_err})" in " ".join(
                said.split()
            )
        for line in (err.export_text() + out.export_text()).splitlines():
            assert len(line) <= 80, line


@pytest.mark.parametrize("name", list(NAMED))
def test_named_corners(name):
    run_analysis(NAMED[name])


@settings(max_examples=6)
@given(episode_sets())
def test_generated_episode_sets(lines):
    run_analysis(lines)


@settings(max_examples=4)
@given(episode_sets())
def test_every_plot_function_on_generated_sets(lines):
    df = scored(episodes_frame(lines))
    if df.empty:
        assert plots.make_plots(lines, tempfile.gettempdir()) == []
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        drawn = [
            plots.plot_target_scaling(df, out),
            plots.plot_duplicate_rate(df, out),
            plots.plot_anytime_progress(df, out),
            plots.plot_component_ablation(df, out),
            plots.plot_verifier_recoveries(df, out),
        ]
        for p in drawn:
            assert p.read_bytes()[:8] == PNG


@settings(max_examples=3)
@given(episode_sets())
def test_pushbench_report_and_plot_commands(lines):
    from typer.testing import CliRunner

    from pushbench.cli import app

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        res = CliRunner().invoke(app, ["report", str(run), "--resamples", "199"])
        assert res.exit_code == 0, res.output
        res = CliRunner().invoke(app, ["plot", str(run)])
        assert res.exit_code == 0 and "skipped" not in res.output, res.output
        figures = sorted(run.glob("*.png"))
        res = CliRunner().invoke(app, ["report", str(run), "--resamples", "199"])
        assert res.exit_code == 0, res.output
        check_outputs(run, lines, figures)


def test_a_figure_that_fails_is_skipped_with_its_reason_and_the_rest_survive(monkeypatch, tmp_path):
    """One figure raising costs that figure only: the tables, report.md (which names it and
    why) and the other figures are written, and one terminal line says which and why."""

    def broken(df, out_dir):
        raise ValueError("number sections must be larger than 0.")

    monkeypatch.setattr(plots, "plot_duplicate_rate", broken)
    lines = NAMED["one target"]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "duplicate_rate.png").write_bytes(PNG)  # stale, from an earlier run
    err = _quiet()
    figures = report_and_plot(tmp_path, console=err, out=_quiet(), n_resamples=199)
    assert "duplicate_rate.png" not in {p.name for p in figures}
    assert not (tmp_path / "duplicate_rate.png").exists()
    assert {"target_scaling.png", "component_ablation.png"} <= {p.name for p in figures}
    said = " ".join(err.export_text().split())
    assert (
        "figure duplicate_rate.png skipped: ValueError: number sections must be larger than 0."
    ) in said
    report = (tmp_path / "report.md").read_text()
    assert "Missing figures (1)" in report and "`duplicate_rate.png`" in report
    assert "number sections must be larger than 0." in report
    assert "![Success rate vs target N](target_scaling.png)" in report
    assert (tmp_path / "summary.csv").stat().st_size > 0
