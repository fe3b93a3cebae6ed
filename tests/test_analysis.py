"""Policy identity, pooled deltas, clusters, pass^k, steps_ratio, failures, new metric columns."""

from __future__ import annotations

import hashlib
import json
import math
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_report import line, synthetic_run

from pushbench.analysis import reference, report
from pushbench.policies.identity import derived_label, label_of, policy_key_id
from pushbench.runner.experiment import expand, validate


def legacy_key(task_id, controller, policy, seed, instance=None) -> str:
    """The episode key as written before labels existed (resume must keep matching it)."""
    raw = json.dumps([task_id, instance, controller, policy, seed])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


# ----- section 1: policy identity ------------------------------------------------------------
def test_derived_labels():
    assert derived_label("simulated-mid", {}) == "simulated-mid"
    # a record stores a preset's resolved params: the defaults are not part of the identity
    from pushbench.policies import make_policy

    assert (
        derived_label("simulated-mid", make_policy("simulated-mid", seed=3).params)
        == "simulated-mid"
    )
    assert (
        derived_label("simulated-mid", {**make_policy("simulated-mid").params, "window": 4})
        == "simulated-mid[window=4]"
    )
    assert (
        derived_label(
            "llm", {"model": "gpt-4.1-mini", "base_url": None, "prices": {"x": 1}, "timeout": 5}
        )
        == "llm[model=gpt-4.1-mini]"
    )
    assert (
        derived_label("llm-langgraph", {"model": "m", "base_url": "http://h:1/v1"})
        == "llm-langgraph[model=m,base_url=http://h:1/v1]"
    )
    assert (
        derived_label("blackbox-mcp:claude:checklist", {"agent": "claude"})
        == "blackbox-mcp:claude:checklist"
    )
    assert label_of({"name": "x", "params": {"a": 1}, "label": "mine"}) == "mine"
    assert label_of("bare") == "bare"


def test_keys_of_runs_without_labels_are_unchanged():
    exp = validate(
        {
            "name": "k",
            "tasks": ["RepoScan-requests-returns-N10"],
            "controllers": ["standard"],
            "seeds": [0],
            "policies": [
                "diligent",
                {"name": "simulated-mid", "params": {"window": 4}},
                {"name": "simulated-mid", "label": "mid-default"},
            ],
        }
    )
    specs = expand(exp)
    assert specs[0].key == legacy_key("RepoScan-requests-returns-N10", "standard", "diligent", 0)
    assert specs[1].key == legacy_key(
        "RepoScan-requests-returns-N10", "standard", 'simulated-mid{"window":4}', 0
    )
    assert specs[2].key == legacy_key("RepoScan-requests-returns-N10", "standard", "mid-default", 0)
    assert [p.report_label for p in exp.policies] == [
        "diligent",
        "simulated-mid[window=4]",
        "mid-default",
    ]
    # result_fields (compared on resume) look as before for entries without a label
    assert exp.result_fields()["policies"][0] == {"name": "diligent", "params": {}}


def test_run_episode_key_and_label_agree_with_the_spec():
    from pushbench.runner.episode import run_episode

    exp = validate(
        {
            "name": "k",
            "tasks": ["RepoScan-requests-returns-N10"],
            "controllers": ["stateqgp"],
            "seeds": [1],
            "policies": [
                {"name": "simulated-weak", "params": {"window": 3}},
                {"name": "simulated-weak", "label": "weak-plain"},
            ],
        }
    )
    for spec in expand(exp):
        rec = run_episode(
            spec.task_id,
            spec.controller,
            spec.policy,
            spec.seed,
            instance=spec.instance,
            policy_params=dict(spec.policy_params) or None,
            label=spec.policy_label,
        )
        assert rec["key"] == spec.key
    assert rec["policy"]["label"] == "weak-plain"
    assert policy_key_id("simulated-weak", {"window": 3}) == 'simulated-weak{"window":3}'


@pytest.mark.parametrize(
    "policies,problem",
    [
        (
            [
                {"name": "llm", "params": {"model": "m", "temperature": 0}},
                {"name": "llm", "params": {"model": "m", "temperature": 1}},
            ],
            "share the label",
        ),
        (["diligent", "diligent"], "listed twice"),
        ([{"name": "diligent", "label": "has space"}], "label"),
    ],
)
def test_label_problems_are_rejected(policies, problem):
    from pushbench.runner.experiment import ExperimentError

    with pytest.raises(ExperimentError, match=problem):
        validate(
            {
                "name": "k",
                "tasks": ["RepoScan-requests-returns-N10"],
                "controllers": ["standard"],
                "seeds": [0],
                "policies": policies,
            }
        )


def test_two_param_sets_of_one_preset_are_two_rows_and_separate_deltas(tmp_path):
    from pushbench.runner.sweep import run_experiment

    exp = validate(
        {
            "name": "two-mids",
            "tasks": ["RepoScan-requests-returns-N10", "RepoScan-flask-decorated-N25"],
            "controllers": ["standard", "stateqgp"],
            "seeds": [0, 1],
            "policies": ["simulated-mid", {"name": "simulated-mid", "params": {"window": 2}}],
        }
    )
    run_experiment(exp, tmp_path, progress=False)
    frames = report.write_report(report.load_episodes(tmp_path), tmp_path, n_resamples=199)
    s = frames["summary"]
    assert sorted(set(s["policy"])) == ["simulated-mid", "simulated-mid[window=2]"]
    assert (s["n_episodes"] == 2).all() and len(s) == 2 * 2 * 2  # never one row with n = 4
    d = frames["paired_deltas"]
    succ = d[(d["metric"] == "success") & ~d["pooled"]]
    assert sorted(set(succ["policy"])) == ["simulated-mid", "simulated-mid[window=2]"]
    assert (succ["n_pairs"] == 2).all()


def test_duplicate_match_key_is_an_error_naming_the_keys():
    eps = [line("standard", seed=0), line("stateqgp", seed=0)]
    twin = {**line("standard", seed=0), "key": "second-run-key"}
    with pytest.raises(report.DuplicateEpisodesError) as err:
        report.paired_deltas(eps + [twin], n_resamples=199)
    msg = str(err.value)
    assert "second-run-key" in msg and eps[0]["key"] in msg and "'seed': '0'" in msg


# ----- section 2: pooled rows, clusters ------------------------------------------------------
def suite_lines() -> list[dict]:
    """Suite-style lines: one task id per target, the seed picks one of 6 instances."""
    rng = np.random.default_rng(4)
    out = []
    for target in (10, 25):
        for seed in range(12):
            inst = f"inst{seed % 6}"
            for ctrl, p in (("standard", 0.3), ("stateqgp", 0.8)):
                ok = rng.random() < p
                ep = line(
                    ctrl,
                    instance=inst,
                    target=target,
                    seed=seed,
                    valid=target if ok else target // 2,
                )
                ep["task_id"] = f"RepoScan-N{target}"
                ep["key"] = f"{ep['key']}|suite"
                out.append(ep)
    return out


def test_suite_tasks_cluster_by_instance_not_task_id():
    d = report.paired_deltas(suite_lines(), metrics=["success"], n_resamples=499)
    per = d[~d["pooled"]]
    assert list(per["n_clusters"]) == [6, 6]  # by task id it would be 1 cluster each
    assert (per["n_pairs"] == 12).all()
    pooled = d[d["pooled"]].iloc[0]
    assert pooled["n_clusters"] == 6 and pooled["n_pairs"] == 24 and pooled["n_targets"] == 2
    assert not pooled["degenerate"] and pooled["ci_low"] < pooled["ci_high"]


def test_pooled_row_is_the_mean_of_instance_means_over_all_targets():
    eps = synthetic_run(n_instances=4, seeds=(0, 1, 2), targets=(10, 25))
    df = report.episodes_frame(eps)
    d = report.paired_deltas(df, metrics=["success"], n_resamples=499)
    row = d[
        d["pooled"] & (d["controller_a"] == "stateqgp") & (d["controller_b"] == "standard")
    ].iloc[0]
    a = df[df["controller"] == "stateqgp"].set_index(["target", "instance", "seed"])["success"]
    b = df[df["controller"] == "standard"].set_index(["target", "instance", "seed"])["success"]
    diff = (a.astype(float) - b.astype(float)).groupby(level="instance").mean()
    assert row["delta"] == pytest.approx(diff.mean())
    assert row["n_clusters"] == 4 and row["n_pairs"] == 24 and pd.isna(row["target"])
    csv = report.to_csv_bytes(d).decode().splitlines()
    head = csv[0].split(",")
    assert {
        "pooled",
        "target",
        "ci_method",
        "p_value",
        "p_holm",
        "n_clusters",
        "degenerate",
        "n_pairs",
        "mean_a",
        "mean_b",
        "confidence",
    } <= set(head)
    pooled_line = next(x for x in csv[1:] if x.split(",")[head.index("pooled")] == "True")
    assert pooled_line.split(",")[head.index("target")] == ""  # empty, not "all" or NaN


def test_holm_family_is_the_testable_rows_of_one_family_metric_and_scope():
    d = report.paired_deltas(synthetic_run(), n_resamples=199, method="t")
    for _, g in d.groupby(["family", "metric", "pooled"]):
        t = g[g["testable"]]
        adj = report.holm(t["p_value"].to_numpy())
        assert np.allclose(adj, t["p_holm"].to_numpy(), equal_nan=True)
        assert (t["holm_rows"] == len(t)).all() and (g.loc[~g["testable"], "holm_rows"] == 0).all()
        assert g.loc[~g["testable"], "p_holm"].isna().all()
        assert (g["testable"] == (g["p_min"] < 0.05)).all()
        assert (g["p_min"] == np.minimum(1.0, 2.0 / 2.0 ** (g["n_better"] + g["n_worse"]))).all()


# ----- section 3: pass^k and steps_ratio -----------------------------------------------------
def test_pass_hat_k_by_hand():
    assert report.pass_hat_k(3, 3, 3) == 1.0 and report.pass_hat_k(2, 3, 3) == 0.0
    assert report.pass_hat_k(2, 3, 2) == pytest.approx(1 / 3)  # C(2,2)/C(3,2)
    assert report.pass_hat_k(2, 3, 1) == pytest.approx(2 / 3)
    assert math.isnan(report.pass_hat_k(1, 1, 2))
    eps = [line("standard", instance="a", seed=s, valid=10) for s in range(3)] + [
        line("standard", instance="b", seed=s, valid=10 if s == 0 else 2) for s in range(3)
    ]
    s = report.summary_table(eps, steps_reference=False).iloc[0]
    assert s["pass^1"] == pytest.approx((1 + 1 / 3) / 2) == pytest.approx(s["success_rate"])
    assert s["pass^2"] == pytest.approx((1 + 0) / 2)
    assert s["pass^3"] == pytest.approx((1 + 0) / 2)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_pass_hat_k_is_monotone_in_k(cn):
    c, n = cn
    vals = [report.pass_hat_k(c, n, k) for k in range(1, n + 1)]
    assert vals[0] == pytest.approx(c / n)
    assert all(a >= b - 1e-12 for a, b in pairwise(vals))
    assert vals[-1] == (1.0 if c == n else 0.0)


def test_steps_ratio_uses_diligent_rows_or_computes_the_same_reference(tmp_path):
    from pushbench.runner.sweep import run_experiment

    exp = validate(
        {
            "name": "ratio",
            "tasks": ["RepoScan-requests-returns-N10", "RepoScan-flask-decorated-N25"],
            "controllers": ["standard", "stateqgp"],
            "seeds": [0, 1],
            "policies": ["diligent", "simulated-strong"],
        }
    )
    run_experiment(exp, tmp_path, progress=False)
    df = report.episodes_frame(report.load_episodes(tmp_path))
    in_run = reference.steps_ratio(df, on_demand=False)
    reference.diligent_steps.cache_clear()
    computed = reference.steps_ratio(df[df["policy"] != "diligent"], on_demand=True)
    assert reference.diligent_steps.cache_info().misses == 4  # 2 tasks x 2 seeds, cached
    sim = df["policy"] != "diligent"
    pd.testing.assert_series_equal(in_run[sim], computed, check_names=False)
    ok = df["success"] & sim
    assert in_run[ok].notna().all() and in_run[~df["success"]].isna().all()
    dil = df[(df["policy"] == "diligent") & (df["controller"] == "standard")]
    assert (in_run[dil.index] == 1.0).all()  # the reference against itself
    s = report.summary_table(df)
    assert s["steps_ratio"].notna().any()


def test_steps_ratio_is_nan_without_a_reference():
    df = report.episodes_frame([line("standard")])  # task RS-i1-N10 does not exist here
    assert reference.steps_ratio(df).isna().all()


# ----- new metric columns, tampered lines, failures ---------------------------------------
def new_metrics(ep: dict, **values) -> dict:
    ep["metrics"].update(values)
    return ep


def test_contract_metrics_reach_frame_and_summary_and_old_lines_are_nan():
    eps = [
        new_metrics(
            line("standard", seed=0, valid=6, reported=10),
            precision=0.5,
            rejected=4,
            proposed_duplicate_rate=0.25,
            false_claim=True,
            honest_stop=False,
            gated_over_claim=None,
            anytime_steps=[3, 5, None, None],
        ),
        new_metrics(
            line("standard", seed=1, valid=10),
            precision=1.0,
            rejected=0,
            proposed_duplicate_rate=0.0,
            false_claim=False,
            honest_stop=False,
            gated_over_claim=2.0,
            anytime_steps=[2, 4, 6, 8],
        ),
        line("standard", seed=2, valid=10),
    ]  # an older line
    df = report.episodes_frame(eps)
    assert df["precision"].tolist()[:2] == [0.5, 1.0] and math.isnan(df["precision"].iloc[2])
    assert df["steps_to_75"].iloc[0] != df["steps_to_75"].iloc[0]  # never reached: NaN
    s = report.summary_table(df, steps_reference=False).iloc[0]
    assert s["precision"] == pytest.approx(0.75) and s["mean_rejected"] == pytest.approx(2)
    assert s["proposed_duplicate_rate"] == pytest.approx(0.125)
    assert s["false_claim_rate"] == pytest.approx(0.5) and s["honest_stop_rate"] == 0.0
    assert s["mean_gated_over_claim"] == 2.0 and s["mean_steps_to_25pct"] == 2.5
    assert {"duplicate_submit_rate", "proposed_duplicate_rate"} <= set(s.index)


def test_tampered_lines_are_counted_and_excluded_everywhere(tmp_path):
    eps = [line("standard", instance=i, seed=0, valid=10) for i in "abc"] + [
        line("stateqgp", instance=i, seed=0, valid=10) for i in "abc"
    ]
    eps[0] = {
        **eps[0],
        "tampered": True,
        "tamper_reasons": ["verdict of x changed"],
        "blackbox": {"out_of_band_edits_count": 2},
    }
    frames = report.write_report(eps, tmp_path, n_resamples=199)
    s = frames["summary"].set_index("controller")
    assert s.loc["standard", "n_tampered"] == 1 and s.loc["standard", "n_episodes"] == 2
    assert s.loc["stateqgp", "n_tampered"] == 0 and "out_of_band_edits" in s.columns
    d = frames["paired_deltas"]
    assert (d["n_clusters"] == 2).all()  # instance a lost its standard side
    md = (tmp_path / "report.md").read_text()
    assert "| tampered |" in md or "tampered" in md.split("## Failures")[1]
    fails = report.failures(frames["episodes"])
    assert fails.set_index("key").loc[eps[0]["key"], "failure"] == "tampered"


def test_failure_classes():
    eps = [
        line("standard", seed=0, valid=4, reported=10),  # false claim
        line("standard", seed=1, valid=4, reported=4),  # honest stop
        line("standard", seed=2, valid=4, terminated_by="ask_user"),  # premature stop
        line("standard", seed=3, valid=4, terminated_by="budget", steps=40),
        {**line("standard", seed=4, valid=4, terminated_by="error"), "error": "x"},
        {**line("standard", seed=5, valid=2, terminated_by=None), "incomplete": True},
        line("standard", seed=6, valid=10),
    ]  # success
    got = report.failures(report.episodes_frame(eps)).set_index("seed")["failure"].to_dict()
    assert got == {
        0: "false_claim",
        1: "honest_stop",
        2: "premature_stop",
        3: "budget_exhausted",
        4: "backend_error",
        5: "incomplete",
    }


# ----- outside input: lines with or without the newer fields -----------------------------
OPTIONAL = {
    "precision": st.one_of(st.none(), st.floats(0, 1)),
    "rejected": st.integers(0, 50),
    "proposed_duplicate_rate": st.one_of(st.none(), st.floats(0, 1)),
    "false_claim": st.booleans(),
    "honest_stop": st.booleans(),
    "gated_over_claim": st.one_of(st.none(), st.floats(-20, 20)),
    "anytime_steps": st.one_of(
        st.none(), st.lists(st.one_of(st.none(), st.integers(1, 99)), min_size=4, max_size=4)
    ),
}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.fixed_dictionaries({}, optional=OPTIONAL), min_size=2, max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_frame_and_summary_accept_lines_with_any_subset_of_new_metrics(extras, flags):
    eps = []
    for i, extra in enumerate(extras):
        ep = line("standard" if i % 2 else "stateqgp", instance=f"i{i // 2}", seed=0)
        ep["metrics"].update(extra)
        if flags[i]:
            ep["tampered"] = True
        eps.append(ep)
    df = report.episodes_frame(eps)
    s = report.summary_table(df, steps_reference=False)
    assert s["n_episodes"].sum() + s["n_tampered"].sum() == len(eps)
    for col in (
        "precision",
        "proposed_duplicate_rate",
        "false_claim_rate",
        "mean_rejected",
        "mean_steps_to_25pct",
    ):
        assert pd.api.types.is_float_dtype(s[col])
    report.paired_deltas(df, n_resamples=99)  # never raises on such lines


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["window", "accuracy", "explore", "zeta"]),
        st.one_of(st.integers(0, 9), st.floats(0, 1), st.text(max_size=5)),
        max_size=3,
    )
)
def test_offline_labels_are_deterministic_and_tell_param_sets_apart(params):
    from pushbench.policies import make_policy

    defaults = make_policy("simulated-mid").params
    a = derived_label("simulated-mid", {**defaults, **params})
    assert a == derived_label(
        "simulated-mid", {**params, **{k: v for k, v in defaults.items() if k not in params}}
    )
    changed = {k: v for k, v in params.items() if defaults.get(k, object()) != v}
    assert (a == "simulated-mid") == (not changed)


# ----- section 5: family versions (issue 27) ---------------------------------------------------
def _versioned(lines: list[dict], version) -> list[dict]:
    """``lines`` as run under ``version`` (None: an old line without the key); own keys."""
    out = []
    for ep in lines:
        ep = {k: v for k, v in ep.items() if k != "family_version"}
        if version is not None:
            ep = {**ep, "family_version": version, "key": f"{ep['key']}|v{version}"}
        out.append(ep)
    return out


def _tables(lines: list[dict]) -> tuple[bytes, bytes]:
    return (
        report.to_csv_bytes(report.summary_table(lines, steps_reference=False)),
        report.to_csv_bytes(report.paired_deltas(lines, n_resamples=199)),
    )


@pytest.mark.parametrize("version", [1, 2, 7])
def test_one_version_per_family_keeps_the_table_bytes_of_unversioned_lines(version):
    lines = synthetic_run()
    summary, deltas = _tables(lines)
    assert _tables(_versioned(lines, version)) == (summary, deltas)
    assert b"family_version" not in summary + deltas


def test_two_versions_are_never_pooled_in_a_row():
    v1 = synthetic_run()  # old lines: no version key, count as version 1
    v2 = _versioned(synthetic_run(), 2)
    for ep in v2:  # version 2 behaves differently: all succeed
        ep["success"] = ep["metrics"]["success"] = True
    s = report.summary_table(v1 + v2, steps_reference=False)
    assert list(s.columns[:3]) == ["family", "family_version", "policy"]
    alone = {
        v: report.summary_table(lines, steps_reference=False) for v, lines in ((1, v1), (2, v2))
    }
    for v, one in alone.items():
        rows = s[s["family_version"] == v].drop(columns="family_version").reset_index(drop=True)
        pd.testing.assert_frame_equal(rows, one, check_dtype=False)
    assert (s.loc[s["family_version"] == 2, "success_rate"] == 1.0).all()
    assert (s.loc[s["family_version"] == 1, "success_rate"] < 1.0).any()

    d = report.paired_deltas(v1 + v2, n_resamples=199, method="t")
    assert list(d.columns[:3]) == ["family", "family_version", "policy"]
    for v, lines in ((1, v1), (2, v2)):
        one = report.paired_deltas(lines, n_resamples=199, method="t")
        rows = d[d["family_version"] == v]
        assert len(rows) == len(one)
        assert (rows["n_pairs"].to_numpy() == one["n_pairs"].to_numpy()).all()
        assert np.allclose(rows["delta"].to_numpy(), one["delta"].to_numpy())
        # one Holm family per version: the same family sizes as the version alone
        assert (rows["holm_rows"].to_numpy() == one["holm_rows"].to_numpy()).all()
    from pushbench.analysis.deltas import holm_families

    fams = holm_families(d)
    assert {"reposcan v1", "reposcan v2"} == set(fams["family"])


def test_a_mixed_run_folder_says_so_in_the_report_and_the_terminal(tmp_path):
    from rich.console import Console

    from pushbench.runner.sweep import write_and_print_report

    lines = synthetic_run(n_instances=2, seeds=(0,), targets=(10,))
    mixed = lines + _versioned(lines, 2)
    err, out = Console(record=True, width=300), Console(record=True, width=300)
    frames = write_and_print_report(
        mixed, tmp_path, tmp_path, console=err, out=out, n_resamples=199
    )
    md = (tmp_path / "report.md").read_text()
    n = len(lines)
    note = (
        f"more than one family version (reposcan v1: {n} episodes, v2: {n} episodes): "
        "every summary and delta row is one version, never pooled"
    )
    assert md.count(note) == 1 and note in err.export_text()
    assert "### reposcan v1 | simulated-mid" in md and "### reposcan v2 | simulated-mid" in md
    assert "reposcan v2 | simulated-mid" in out.export_text()
    assert "- Family versions (observation contract): reposcan v1+v2" not in md  # no manifest
    assert "family_version" in frames["summary"]
    # one version: no note, no split
    err, out = Console(record=True, width=300), Console(record=True, width=300)
    write_and_print_report(lines, tmp_path, tmp_path, console=err, out=out, n_resamples=199)
    assert "family version" not in err.export_text()
    assert "family version" not in (tmp_path / "report.md").read_text().lower()


def test_figure_panels_split_versions_only_when_mixed():
    from pushbench.analysis.plots import _panels

    lines = synthetic_run(n_instances=2, seeds=(0,), targets=(10,))
    one = {(f, p) for f, p, _ in _panels(report.episodes_frame(lines))}
    assert one == {("reposcan", "simulated-mid")}
    mixed = _panels(report.episodes_frame(lines + _versioned(lines, 3)))
    assert {(f, p) for f, p, _ in mixed} == {
        ("reposcan v1", "simulated-mid"),
        ("reposcan v3", "simulated-mid"),
    }
    assert all(len(g) == len(lines) for _, _, g in mixed)
