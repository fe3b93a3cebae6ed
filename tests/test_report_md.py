"""report.md, the report CLI, 80-column terminal tables, and LLM labels end to end."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml
from rich.console import Console
from test_report import line, synthetic_run
from typer.testing import CliRunner

from pushbench.analysis import report
from pushbench.cli import app

SMALL = {
    "name": "md-test",
    "tasks": [
        "RepoScan-requests-returns-N10",
        "RepoScan-flask-decorated-N10",
        "RepoScan-flask-decorated-N25",
    ],
    "controllers": ["standard", "verifier_gated", "stateqgp"],
    "policies": ["simulated-weak", "diligent"],
    "seeds": [0, 1],
}


def run_cli(tmp_path, name: str, *extra: str):
    exp = tmp_path / f"{name}.yaml"
    exp.write_text(yaml.safe_dump(SMALL))
    res = CliRunner().invoke(
        app, ["run", str(exp), "--out", str(tmp_path / name), "--no-progress", *extra]
    )
    assert res.exit_code == 0, res.output
    return tmp_path / name, res


def test_report_md_is_byte_identical_for_two_runs(tmp_path):
    a, res = run_cli(tmp_path, "a")
    b, _ = run_cli(tmp_path, "b")
    for name in ("report.md", "summary.csv", "paired_deltas.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    md = (a / "report.md").read_text()
    assert "report.md" in res.output
    for section in ("## What ran", "## Summary", "## Paired deltas", "## Figures", "## Failures"):
        assert section in md
    assert "`md-test`" in md and "| planned | 36 |" in md and "| missing (planned, not" in md
    assert "![Success rate vs target N](target_scaling.png)" in md
    assert "SIMULATED" in md and "simulated-weak" in md
    assert "pass^2 %" in md and "steps ratio" in md
    # no wall-clock time or machine path
    assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", md) and str(tmp_path) not in md
    # every failure of the run is listed with its class and trace link
    fails = report.failures(report.episodes_frame(report.load_episodes(a)))
    assert len(fails) > 0
    for r in fails.itertuples():
        assert f"traces/{r.key}.json.gz" in md
        assert (a / "traces" / f"{r.key}.json.gz").exists()


def test_report_says_how_many_planned_episodes_are_missing(tmp_path):
    run, _ = run_cli(tmp_path, "run", "--no-report", "--no-plot")
    lines = (run / "episodes.jsonl").read_text().splitlines()
    (run / "episodes.jsonl").write_text("\n".join(lines[:30]) + "\n")
    res = CliRunner().invoke(app, ["report", str(run), "--resamples", "199"])
    assert res.exit_code == 0, res.output
    assert "6 of 36 planned episodes are missing" in " ".join(res.output.split())
    md = (run / "report.md").read_text()
    assert "| missing (planned, not finished) | 6 |" in md
    gone = [json.loads(x)["key"] for x in lines[30:]]
    assert all(f"`{k}`" in md.split("Missing episodes")[1] for k in gone)


def test_report_seed_changes_intervals_only(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in synthetic_run()))
    out = {}
    for name, seed in (("s1", 1), ("s1b", 1), ("s2", 2)):
        res = CliRunner().invoke(
            app,
            [
                "report",
                str(run),
                "--seed",
                str(seed),
                "--resamples",
                "499",
                "--out",
                str(tmp_path / name),
            ],
        )
        assert res.exit_code == 0, res.output
        assert "no manifest.json" in res.output
        out[name] = {
            f: (tmp_path / name / f).read_bytes()
            for f in ("summary.csv", "paired_deltas.csv", "report.md")
        }
    assert out["s1"] == out["s1b"]
    assert out["s1"]["summary.csv"] == out["s2"]["summary.csv"]
    d1 = pd.read_csv(tmp_path / "s1" / "paired_deltas.csv")
    d2 = pd.read_csv(tmp_path / "s2" / "paired_deltas.csv")
    assert (d1["delta"] == d2["delta"]).all() and (d1["p_value"] == d2["p_value"]).all()
    live = ~d1["degenerate"]
    assert (d1.loc[live, "ci_low"] != d2.loc[live, "ci_low"]).any()
    res = CliRunner().invoke(app, ["report", str(run), "--ci-method", "nope"])
    assert res.exit_code == 2 and "studentized" in res.output


LONG = ("stateqgp_dedupe_page_nobuffer", "verifier_gated", "stateqgp", "standard")


def test_terminal_tables_fit_80_columns_without_splitting_names():
    eps = []
    for pol in ("llm[model=gpt-4.1-mini]", "simulated-mid[window=4]"):
        for ctrl in LONG:
            for t in (10, 25, 50, 100):
                for i in range(3):
                    for s in (0, 1):
                        eps.append(
                            line(
                                ctrl,
                                policy=pol,
                                instance=f"i{i}",
                                target=t,
                                seed=s,
                                valid=t if (i + s + len(ctrl)) % 3 else t // 2,
                                dup=0.1 * i,
                                steps=t + 5,
                                budget=2 * t + 10,
                            )
                        )
    frames = {
        "summary": report.summary_table(eps, steps_reference=False),
        "paired_deltas": report.paired_deltas(eps, n_resamples=199),
    }
    con = Console(width=80, record=True)
    report.print_report(frames, console=con)
    text = con.export_text()
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 80
    words = set(re.findall(r"[\w.\[\]=-]+", text))
    for name in LONG + ("llm[model=gpt-4.1-mini]", "simulated-mid[window=4]"):
        assert name in words, name  # appears whole somewhere
    for frag in ("verifier_gat", "stateqgp_dedupe_page_nobuf"):  # and never cut
        assert not any(w.startswith(frag) and w not in LONG for w in words), frag
    assert "all N" in text and "N=100" in text


def test_print_report_marks_degenerate_cells():
    eps = [
        line(c, instance=i, seed=s, valid=10 if c == "stateqgp" else 2)
        for c in ("standard", "stateqgp")
        for i in "abc"
        for s in (0, 1)
    ]
    frames = {
        "summary": report.summary_table(eps, steps_reference=False),
        "paired_deltas": report.paired_deltas(eps, n_resamples=199),
    }
    con = Console(width=80, record=True)
    report.print_report(frames, console=con)
    text = con.export_text()
    assert "n/a (k<6)" in text and "[100, 100]" not in text
    con = Console(width=80, record=True)
    report.print_report(
        {**frames, "paired_deltas": report.paired_deltas(eps, method="t")}, console=con
    )
    assert "const" in con.export_text()


def test_two_llm_models_are_two_rows_and_separate_deltas(tmp_path):
    pytest.importorskip("openai")
    from pushbench.policies.llm.stub import StubServer
    from pushbench.runner.experiment import validate
    from pushbench.runner.sweep import run_experiment

    with StubServer(latency=0.0) as server:
        url = server.url
        base = {
            "base_url": url,
            "api_key_env": None,
            "backoff_base": 0.001,
            "backoff_max": 0.01,
            "timeout": 10,
        }
        exp = validate(
            {
                "name": "two-models",
                "tasks": ["RepoScan-requests-returns-N10"],
                "controllers": ["standard", "verifier_gated"],
                "seeds": [0, 1],
                "budget": 3,
                "executor": "async",
                "workers": 4,
                "policies": [
                    {"name": "llm", "params": {**base, "model": "model-a"}},
                    {"name": "llm", "params": {**base, "model": "model-b"}},
                ],
            }
        )
        summary = run_experiment(exp, tmp_path, progress=False)
    assert summary["errors"] == 0 and summary["finished"] == 8
    eps = report.load_episodes(tmp_path)
    labels = {e["policy"]["label"] for e in eps}
    assert labels == {f"llm[model=model-a,base_url={url}]", f"llm[model=model-b,base_url={url}]"}
    frames = report.write_report(eps, tmp_path, n_resamples=199)
    s = frames["summary"]
    assert len(s) == 4 and (s["n_episodes"] == 2).all()
    d = frames["paired_deltas"]
    succ = d[d["metric"] == "success"]
    assert sorted(succ["policy"]) == sorted(labels) and (succ["n_pairs"] == 2).all()
    md = (tmp_path / "report.md").read_text()
    assert "model-a" in md and "model-b" in md
