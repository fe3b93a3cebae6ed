"""Report and plots on synthetic episode lines whose numbers are known by construction."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from pushbench.analysis import report
from pushbench.analysis.plots import make_plots


def line(
    controller="standard",
    policy="simulated-mid",
    instance="i1",
    target=10,
    seed=0,
    *,
    family="reposcan",
    valid=None,
    success=None,
    dup=0.0,
    vps=None,
    terminated_by="final",
    reported=None,
    budget=40,
    steps=20,
    interventions=None,
    recoveries=0,
    usage=None,
    components=None,
    simulated=None,
    progress=None,
) -> dict:
    """One runner-format episode line (no calls, no controller steps)."""
    valid = target if valid is None else valid
    success = valid >= target if success is None else success
    fin = terminated_by == "final"
    reported = valid if reported is None and fin else reported
    over = reported - valid if fin and reported is not None else None
    inter = interventions or {}
    sim = policy.startswith("simulated") if simulated is None else simulated
    progress = (
        progress
        if progress is not None
        else [min(valid, (valid * (s + 1)) // steps) for s in range(steps)]
    )
    ep = {
        "key": f"{family}|{instance}|{target}|{controller}|{policy}|{seed}",
        "schema_version": 1,
        "family": family,
        "task_id": f"RS-{instance}-N{target}",
        "instance": instance,
        "target": target,
        "budget": budget,
        "seed": seed,
        "steps_used": steps,
        "terminated_by": terminated_by,
        "valid_count": valid,
        "success": success,
        "reported_count": reported if fin else None,
        "final_message": "",
        "progress": progress,
        "metrics": {
            "valid_count": valid,
            "success": success,
            "steps_used": steps,
            "submissions": 0 if dup is None else 10,
            "duplicate_submit_rate": dup,
            "valid_per_step": valid / steps if vps is None else vps,
            "false_completion": fin and not success,
            "premature_stop": terminated_by in ("final", "ask_user")
            and not success
            and steps < budget,
            "budget_exhausted": terminated_by == "budget" and not success,
            "reported_count_error": None if over is None else abs(over),
            "over_claim": over,
            "invalid_actions": 0,
            "verifier_recoveries": recoveries,
            "interventions": inter,
            "blocked_completions": inter.get("completion_gate", 0),
        },
        "controller": {"name": controller, "components": components or []},
        "policy": {"name": policy, "simulated": sim, "seed": seed, "params": {}},
        "simulated": sim,
    }
    if usage is not None:
        ep["usage"] = usage
    return ep


def synthetic_run(n_instances=4, seeds=(0, 1, 2), targets=(10, 25)) -> list[dict]:
    """standard < verifier_gated < stateqgp, with instance-level variation; fixed rng."""
    rng = np.random.default_rng(123)
    skill = {"standard": 0.3, "verifier_gated": 0.55, "stateqgp": 0.9, "stateqgp_dedupe_only": 0.7}
    comps = {
        "standard": [],
        "verifier_gated": ["completion_gate"],
        "stateqgp": [
            "progress_state",
            "dedupe",
            "page_memory",
            "buffered_submit",
            "completion_gate",
        ],
        "stateqgp_dedupe_only": ["dedupe"],
    }
    out = []
    for target in targets:
        for i in range(n_instances):
            for seed in seeds:
                for ctrl, p in skill.items():
                    ok = rng.random() < p - 0.1 * i
                    valid = target if ok else int(target * rng.uniform(0.2, 0.9))
                    dup = 0.0 if ctrl.startswith("stateqgp") else float(rng.uniform(0, 0.4))
                    out.append(
                        line(
                            ctrl,
                            instance=f"inst{i}",
                            target=target,
                            seed=seed,
                            valid=valid,
                            dup=dup,
                            components=comps[ctrl],
                            budget=20 + 2 * target,
                            steps=15 + target,
                            terminated_by="final" if ok or rng.random() < 0.5 else "budget",
                        )
                    )
    return out


def write_jsonl(path, eps, tail: str = "") -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in eps) + tail)


# ----- loading ----------------------------------------------------------------------------
def test_load_directory_and_file_dedupes_by_key(tmp_path):
    eps = [line(seed=s) for s in range(3)]
    write_jsonl(tmp_path / "episodes.jsonl", eps + [eps[1]])  # a duplicate line
    got = report.load_episodes(tmp_path)
    assert [e["seed"] for e in got] == [0, 1, 2]
    assert report.load_episodes(tmp_path / "episodes.jsonl") == got


def test_truncated_last_line_is_skipped_with_one_warning(tmp_path):
    eps = [line(seed=s) for s in range(3)]
    write_jsonl(tmp_path / "episodes.jsonl", eps, tail=json.dumps(line(seed=9))[:57])
    with pytest.warns(UserWarning, match="truncated") as rec:
        got = report.load_episodes(tmp_path)
    assert len(rec) == 1
    assert [e["seed"] for e in got] == [0, 1, 2]


def test_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        report.load_episodes(tmp_path)


# ----- frame and summary ------------------------------------------------------------------
def test_episodes_frame_flattens_lines():
    eps = [
        line(
            "stateqgp",
            interventions={"dedupe": 3, "completion_gate": 2},
            usage={"prompt_tokens": 100, "completion_tokens": 7, "cost_usd": 0.5},
        ),
        line("standard", dup=None, terminated_by="budget", valid=4, steps=40),
    ]
    df = report.episodes_frame(eps)
    assert list(df["controller"]) == ["standard", "stateqgp"]  # baseline-first order
    std, sq = df.iloc[0], df.iloc[1]
    assert sq["interventions_total"] == 5 and sq["blocked_completions"] == 2
    assert sq["prompt_tokens"] == 100 and sq["cost_usd"] == 0.5
    assert math.isnan(std["prompt_tokens"])
    assert math.isnan(std["duplicate_submit_rate"]) and math.isnan(std["over_claim"])
    assert bool(std["budget_exhausted"]) and not bool(std["success"])
    assert bool(sq["simulated"])
    for col in (
        "controller",
        "policy",
        "simulated",
        "family",
        "task_id",
        "instance",
        "target",
        "seed",
        "success",
        "valid_count",
        "duplicate_submit_rate",
        "valid_per_step",
        "false_completion",
        "premature_stop",
        "budget_exhausted",
        "reported_count_error",
        "over_claim",
        "invalid_actions",
        "verifier_recoveries",
        "blocked_completions",
        "interventions_total",
        "steps_used",
        "budget",
    ):
        assert col in df.columns
    assert "prompt_tokens" not in report.episodes_frame(eps[1:]).columns


def test_summary_numbers_match_hand_computation():
    eps = [
        # standard, N=10: 4 episodes
        line("standard", instance="a", seed=0, valid=10, dup=0.5, steps=20),  # success
        line(
            "standard", instance="a", seed=1, valid=6, dup=0.25, steps=20, reported=10
        ),  # false compl.
        line(
            "standard", instance="b", seed=0, valid=3, dup=None, steps=40, terminated_by="budget"
        ),  # exhausted
        line(
            "standard", instance="b", seed=1, valid=5, dup=0.0, steps=10, terminated_by="ask_user"
        ),  # premature
        # stateqgp, N=10: 2 episodes
        line(
            "stateqgp",
            instance="a",
            seed=0,
            valid=12,
            dup=0.0,
            steps=24,
            interventions={"dedupe": 4},
        ),
        line(
            "stateqgp",
            instance="b",
            seed=0,
            valid=10,
            dup=0.0,
            steps=20,
            reported=8,
            interventions={"dedupe": 1, "completion_gate": 1},
        ),
    ]
    s = report.summary_table(report.episodes_frame(eps))
    assert list(s["controller"]) == ["standard", "stateqgp"]
    std = s.iloc[0]
    assert std["n_episodes"] == 4 and std["n_instances"] == 2
    assert std["success_rate"] == 0.25
    assert std["mean_valid_count"] == pytest.approx((10 + 6 + 3 + 5) / 4)
    assert std["duplicate_submit_rate"] == pytest.approx((0.5 + 0.25 + 0.0) / 3)  # 3 with subs
    assert std["valid_per_step"] == pytest.approx((10 / 20 + 6 / 20 + 3 / 40 + 5 / 10) / 4)
    assert std["false_completion_rate"] == 0.25
    assert std["premature_stop_rate"] == 0.5  # the false completion and the ask_user
    assert std["budget_exhausted_rate"] == 0.25
    assert std["mean_reported_count_error"] == pytest.approx((0 + 4) / 2)  # finals only
    assert std["mean_over_claim"] == pytest.approx((0 + 4) / 2)
    assert std["mean_interventions"] == 0
    sq = s.iloc[1]
    assert sq["success_rate"] == 1.0 and sq["mean_valid_count"] == 11
    assert sq["mean_over_claim"] == pytest.approx((0 - 2) / 2)
    assert sq["mean_reported_count_error"] == pytest.approx(1.0)
    assert sq["mean_interventions"] == pytest.approx(3.0)
    assert sq["mean_blocked_completions"] == pytest.approx(0.5)
    assert bool(sq["simulated"])


# ----- paired deltas ----------------------------------------------------------------------
def test_always_vs_never_is_degenerate_with_no_interval():
    eps = []
    for inst in ("a", "b", "c"):
        for seed in (0, 1):
            eps.append(line("stateqgp", instance=inst, seed=seed, valid=10, steps=20))
            eps.append(line("standard", instance=inst, seed=seed, valid=2, steps=20))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning spam on degenerate data
        d = report.paired_deltas(report.episodes_frame(eps), seed=0, n_resamples=999)
    row = d[d["metric"] == "success"].iloc[0]
    assert (row["controller_a"], row["controller_b"]) == ("stateqgp", "standard")
    assert row["delta"] == 1.0 and bool(row["degenerate"])
    # three instances: too few for a 95% statement, never "[100, 100]"
    assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    assert row["ci_method"] == "n/a (k<6)" and not row["testable"]
    assert row["n_pairs"] == 6 and row["n_clusters"] == 3
    # all 3 instances positive: only the all-plus and all-minus of 2^3 sign flips are as extreme
    assert row["p_value"] == pytest.approx(2 / 8) and "exact" in row["p_method"]
    vc = d[d["metric"] == "valid_count"].iloc[0]
    assert vc["delta"] == 8.0 and bool(vc["degenerate"])
    vps = d[d["metric"] == "valid_per_step"].iloc[0]
    assert vps["delta"] == pytest.approx(0.4)
    from pushbench.analysis.format import delta_cell

    assert delta_cell(row, "success") == ("+100.0", "n/a (k<6)")
    # a bootstrap option gives no interval for the degenerate row and says why
    t = report.paired_deltas(report.episodes_frame(eps), metrics=["success"], method="t").iloc[0]
    assert t["ci_method"] == "none (degenerate)" and math.isnan(t["ci_low"])
    assert delta_cell(t, "success") == ("+100.0", "(no variation over 3 instances)")
    assert delta_cell(t, "success", short=True) == ("+100.0", "const")


def test_paired_delta_matches_on_instance_and_seed_and_averages_within_instance():
    eps = [
        # instance a: deltas (seed0) 1-0 = 1, (seed1) 1-1 = 0 -> instance mean 0.5
        line("verifier_gated", instance="a", seed=0, valid=10),
        line("standard", instance="a", seed=0, valid=1),
        line("verifier_gated", instance="a", seed=1, valid=10),
        line("standard", instance="a", seed=1, valid=10),
        # instance b: one pair, delta 0 - 1 = -1
        line("verifier_gated", instance="b", seed=0, valid=1),
        line("standard", instance="b", seed=0, valid=10),
        # unmatched episodes (seed 7 only on one side, another target) are ignored
        line("verifier_gated", instance="b", seed=7, valid=10),
        line("standard", instance="a", seed=0, target=25, valid=1),
    ]
    d = report.paired_deltas(eps, metrics=["success"], seed=3, n_resamples=999)
    assert not d["pooled"].any()  # one matched target only: no pooled row
    row = d[(d["target"] == 10)].iloc[0]
    assert (row["controller_a"], row["controller_b"]) == ("verifier_gated", "standard")
    assert row["n_pairs"] == 3 and row["n_clusters"] == 2
    assert row["delta"] == pytest.approx((0.5 + -1.0) / 2)
    # instance-weighted means of each side: delta == mean_a - mean_b exactly
    assert row["mean_a"] == pytest.approx((1 + 0) / 2) and row["mean_b"] == pytest.approx(
        (0.5 + 1) / 2
    )
    assert row["delta"] == pytest.approx(row["mean_a"] - row["mean_b"])
    # two clusters: no 95% interval from the test (n/a); the t interval is cut to the instances'
    # range, -1 .. 1 for rates
    assert math.isnan(row["ci_low"]) and row["ci_method"] == "n/a (k<6)"
    assert (row["n_better"], row["n_worse"], row["n_tied"]) == (1, 1, 0)
    assert row["p_value"] == 1.0  # 2 instances of opposite sign: nothing to see
    t = report.paired_deltas(eps, metrics=["success"], method="t").iloc[0]
    assert (t["ci_low"], t["ci_high"]) == (-1.0, 1.0) and t["ci_method"].endswith("(clipped)")
    assert len(d[d["target"] == 25]) == 0  # nothing to match there


def test_single_instance_is_degenerate_and_undefined_metric_is_dropped():
    eps = [line("stateqgp", instance="a", seed=s, valid=10, dup=0.0) for s in (0, 1)] + [
        line("standard", instance="a", seed=0, valid=5, dup=0.5),
        line("standard", instance="a", seed=1, valid=10, dup=None),
    ]
    d = report.paired_deltas(eps, seed=0, n_resamples=999).set_index("metric")
    assert d.loc["success", "delta"] == 0.5 and bool(d.loc["success", "degenerate"])
    assert math.isnan(d.loc["success", "ci_low"]) and d.loc["success", "n_clusters"] == 1
    assert d.loc["duplicate_submit_rate", "n_pairs"] == 1
    assert d.loc["duplicate_submit_rate", "delta"] == -0.5


def test_pair_directions():
    names = ["stateqgp_dedupe_only", "standard", "stateqgp", "verifier_gated", "custom"]
    pairs = report.controller_pairs(names)
    assert ("verifier_gated", "standard") in pairs
    assert ("stateqgp", "standard") in pairs and ("stateqgp", "verifier_gated") in pairs
    assert ("stateqgp_dedupe_only", "stateqgp") in pairs
    assert ("custom", "stateqgp_dedupe_only") in pairs
    assert len(pairs) == len(set(pairs)) == 10
    assert all((b, a) not in pairs for a, b in pairs)


def test_ci_reproducible_with_seed_and_not_clamped_to_the_estimate():
    df = report.episodes_frame(synthetic_run())
    d1 = report.paired_deltas(df, seed=7, n_resamples=999)
    d2 = report.paired_deltas(df, seed=7, n_resamples=999)
    pd.testing.assert_frame_equal(d1, d2)
    d3 = report.paired_deltas(df, seed=8, n_resamples=999, method="studentized")
    d4 = report.paired_deltas(df, seed=7, n_resamples=999, method="studentized")
    live = ~d1["degenerate"]
    assert not np.allclose(d4.loc[live, "ci_low"], d3.loc[live, "ci_low"])  # the seed matters
    # (the default with 4 instances: too few for a 95% interval; exact: no seed in it)
    assert (d1.loc[d1["n_clusters"] > 0, "ci_method"] == "n/a (k<6)").all()
    # 4 controllers -> 6 pairs x (2 targets + 1 pooled row) x 4 metrics
    assert len(d1) == 6 * 3 * 4 and d1["pooled"].sum() == 6 * 4
    assert set(report.PAIRED_COLUMNS) <= set(d1.columns)
    assert (d1["n_clusters"] == 4).all()
    # the interval is reported as computed: at least it holds the estimate on this data, and
    # nothing forces it to (no min/max with the estimate in the code path)
    assert (
        (d4.loc[live, "ci_low"] <= d4.loc[live, "delta"])
        & (d4.loc[live, "delta"] <= d4.loc[live, "ci_high"])
    ).all()
    # a subset of the controllers gives the same rows for the pairs it keeps (p_holm aside:
    # the family of tests is smaller)
    sub = report.paired_deltas(df[df["controller"] != "verifier_gated"], seed=7, n_resamples=999)
    keep = d1[(d1["controller_a"] != "verifier_gated") & (d1["controller_b"] != "verifier_gated")]
    pd.testing.assert_frame_equal(
        sub.drop(columns=["p_holm", "holm_rows"]),
        keep.drop(columns=["p_holm", "holm_rows"]).reset_index(drop=True),
    )
    a, b = sub["p_holm"].to_numpy(), keep["p_holm"].to_numpy()
    assert (np.isnan(a) == np.isnan(b)).all() and (a[~np.isnan(a)] <= b[~np.isnan(b)] + 1e-12).all()


# ----- writing, printing, plots ---------------------------------------------------------------
def test_write_report_is_byte_deterministic(tmp_path):
    eps = synthetic_run()
    a = report.write_report(eps, tmp_path / "a", seed=0, n_resamples=999)
    report.write_report(list(reversed(eps)), tmp_path / "b", seed=0, n_resamples=999)
    for name in ("summary.csv", "paired_deltas.csv"):
        ba, bb = ((tmp_path / d / name).read_bytes() for d in ("a", "b"))
        assert ba == bb and len(ba) > 100
    head = (tmp_path / "a" / "paired_deltas.csv").read_text().splitlines()[0].split(",")
    for col in (
        "controller_a",
        "controller_b",
        "target",
        "metric",
        "delta",
        "ci_low",
        "ci_high",
        "n_pairs",
    ):
        assert col in head
    assert set(a) == {"episodes", "summary", "paired_deltas", "bill", "report_md"}
    md = [(tmp_path / d / "report.md").read_bytes() for d in ("a", "b")]
    assert md[0] == md[1]
    assert "progress" not in (tmp_path / "a" / "summary.csv").read_text()


def test_print_report_labels_simulated(tmp_path):
    from rich.console import Console

    frames = report.write_report(
        synthetic_run(n_instances=2, seeds=(0,)), tmp_path, n_resamples=199
    )
    con = Console(record=True, width=200)
    report.print_report(frames, console=con)
    text = con.export_text()
    assert "SIMULATED agent" in text and " - standard" in text and "stateqgp" in text
    # a non-simulated policy gets no label
    eps = [
        line("standard", policy="gpt-x", simulated=False),
        line("stateqgp", policy="gpt-x", simulated=False),
    ]
    con = Console(record=True, width=200)
    report.print_report(report.write_report(eps, tmp_path / "llm", n_resamples=199), console=con)
    assert "SIMULATED" not in con.export_text()


def test_make_plots_writes_pngs(tmp_path):
    eps = synthetic_run(n_instances=3, seeds=(0, 1))
    eps += [
        line(c, family="dataops", instance=f"d{i}", target=5, seed=0, recoveries=i + k, valid=5)
        for k, c in enumerate(("standard", "stateqgp"))
        for i in range(3)
    ]
    paths = make_plots(report.episodes_frame(eps), tmp_path / "plots")  # a DataFrame works
    names = sorted(p.name for p in paths)
    assert names == [
        "anytime_progress.png",
        "component_ablation.png",
        "duplicate_rate.png",
        "target_scaling.png",
        "verifier_recoveries.png",
    ]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_cli_report_and_plot(tmp_path):
    from typer.testing import CliRunner

    from pushbench.cli import app

    run = tmp_path / "run"
    run.mkdir()
    write_jsonl(
        run / "episodes.jsonl",
        synthetic_run(n_instances=2, seeds=(0,), targets=(10,)),
        tail='{"key": "cut',
    )
    runner = CliRunner()
    res = runner.invoke(app, ["report", str(run), "--resamples", "199"])
    assert res.exit_code == 0, res.output
    assert (run / "summary.csv").stat().st_size > 0 and (run / "paired_deltas.csv").exists()
    assert "SIMULATED" in res.output
    res = runner.invoke(app, ["plot", str(run), "--out", str(tmp_path / "figs")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "figs" / "target_scaling.png").stat().st_size > 0
    assert not (tmp_path / "figs" / "verifier_recoveries.png").exists()  # reposcan only
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["report", str(empty)])
    assert res.exit_code == 2 and "no episodes file" in res.output
    (empty / "episodes.jsonl").write_text("")
    res = runner.invoke(app, ["plot", str(empty)])
    assert res.exit_code == 2 and "empty" in res.output


def test_backend_errors_are_counted_apart_and_excluded_from_metrics():
    from pushbench.runner.episode import run_episode

    ok = run_episode("RepoScan-requests-returns-N10", "standard", "diligent", 0)
    err = run_episode("RepoScan-requests-returns-N10", "standard", "diligent", 1)
    err.update(terminated_by="error", success=False, key="err")
    err["metrics"] = {**err["metrics"], "success": False, "error": True}
    lines = [{k: v for k, v in r.items() if k != "calls"} for r in (ok, err)]
    summary = report.summary_table(report.episodes_frame(lines))
    row = summary.iloc[0]
    assert row["n_episodes"] == 1 and row["n_backend_errors"] == 1
    assert row["success_rate"] == 1.0  # the failed backend does not count as an agent failure
    only_err = report.summary_table(report.episodes_frame(lines[1:])).iloc[0]
    assert only_err["n_episodes"] == 0 and only_err["n_backend_errors"] == 1
