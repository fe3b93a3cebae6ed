"""Tests that catch wrong numbers in the measurement core (issue 20).

Each test here was written against a mutant that survived the older tests: a wrong line in the
interval, the delta engine, the frame, the CSV writer or the printed tables that nothing noticed.
Expected values come from an independent computation (a direct ``scipy.stats.bootstrap`` call
with the same generator, a hand-built cluster mean, the CSV read back), never from the code
under test.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from rich.console import Console
from test_report import line

from pushbench.analysis import frame, report, stats

# mutmut runs the code from its own copy, through trampoline functions (warnings name those)
UNDER_MUTMUT = "mutants" in Path(frame.__file__).parts


# ----- the delta engine ---------------------------------------------------------------------------
def suite(
    seeds=range(12),
    n_instances=6,
    targets=(10, 25),
    controllers=("standard", "stateqgp"),
    policy="simulated-mid",
    family="reposcan",
    seed=4,
) -> list[dict]:
    """Suite-style lines: one task id per target (``RepoScan-N10``), the seed picks one of
    ``n_instances`` instances; success and valid counts vary by instance and controller."""
    rng = np.random.default_rng(seed)
    out = []
    for target in targets:
        for s in seeds:
            inst = f"inst{s % n_instances}"
            for j, ctrl in enumerate(controllers):
                ok = rng.random() < 0.25 + 0.25 * j
                ep = line(
                    ctrl,
                    policy=policy,
                    family=family,
                    instance=inst,
                    target=target,
                    seed=s,
                    valid=target if ok else int(target * rng.uniform(0.2, 0.9)),
                )
                ep["task_id"] = f"RepoScan-N{target}"
                out.append(ep)
    return out


def instance_means(df: pd.DataFrame, a: str, b: str, metric: str, targets=None) -> pd.Series:
    """Mean paired difference per instance, built by hand from the frame."""
    if targets is not None:
        df = df[df["target"].isin(targets)]
    idx = ["target", "task_id", "instance", "seed"]
    va = df[df["controller"] == a].set_index(idx)[metric].astype(float)
    vb = df[df["controller"] == b].set_index(idx)[metric].astype(float)
    diff = (va - vb).dropna()
    return diff.groupby(level="instance").mean().sort_index()


# Small targeted tests of the delta engine's parts first: cheap, and under `pytest -x` a
# mutant they catch fails within seconds.


def test_delta_stats_without_a_valid_pair_gives_every_column_empty():
    from pushbench.analysis.deltas import STAT_COLUMNS, delta_stats

    nan = math.nan
    out = delta_stats(
        np.array([nan, 1.0]),
        np.array([0.0, nan]),
        np.array(["a", "b"]),
        metric="valid_count",
        rng=np.random.default_rng(0),
        n_resamples=99,
        confidence=0.9,
    )
    assert list(out) == STAT_COLUMNS  # the row itself, not only a frame built from it
    assert {
        c: out[c]
        for c in (
            "metric",
            "ci_method",
            "p_method",
            "n_better",
            "n_worse",
            "n_tied",
            "holm_rows",
            "n_pairs",
            "n_clusters",
            "confidence",
            "degenerate",
            "testable",
            "ci_low_clipped",
            "ci_high_clipped",
        )
    } == {
        "metric": "valid_count",
        "ci_method": "",
        "p_method": "",
        "n_better": 0,
        "n_worse": 0,
        "n_tied": 0,
        "holm_rows": 0,
        "n_pairs": 0,
        "n_clusters": 0,
        "confidence": 0.9,
        "degenerate": False,
        "testable": False,
        "ci_low_clipped": False,
        "ci_high_clipped": False,
    }
    for c in ("delta", "ci_low", "ci_high", "p_value", "p_min", "p_holm", "mean_a", "mean_b"):
        assert math.isnan(out[c]), c


def test_lower_is_better_metrics_count_a_lower_a_as_better():
    from pushbench.analysis.deltas import LOWER_IS_BETTER, delta_stats

    va = np.array([0.0, 0.0, 0.0, 0.0, 0.5, 0.2])
    vb = np.array([0.5, 0.5, 0.5, 0.5, 0.0, 0.2])  # A lower on four, higher on one, one tie
    cl = np.array(list("abcdef"))
    kw = dict(rng=np.random.default_rng(0), n_resamples=99, confidence=0.95)
    assert "duplicate_submit_rate" in LOWER_IS_BETTER
    low = delta_stats(va, vb, cl, metric="duplicate_submit_rate", **kw)
    assert (low["n_better"], low["n_worse"], low["n_tied"]) == (4, 1, 1)
    high = delta_stats(va, vb, cl, metric="success", **kw)
    assert (high["n_better"], high["n_worse"], high["n_tied"]) == (1, 4, 1)
    assert low["delta"] == high["delta"] < 0  # the direction only changes the counts


@pytest.mark.parametrize("n_differ, testable", [(3, False), (4, True)])
def test_a_row_whose_smallest_p_equals_the_level_is_not_testable(n_differ, testable):
    # at 75% the level is 0.25 = 2 / 2^3: three differing instances reach p = 0.25 at best,
    # which is not below the level (Tarone's screen is strict); four reach 0.125
    from pushbench.analysis.deltas import delta_stats

    va = np.array([1.0] * n_differ + [0.0, 0.0])
    vb = np.zeros(n_differ + 2)
    out = delta_stats(
        va,
        vb,
        np.array([f"i{i}" for i in range(n_differ + 2)]),
        metric="success",
        rng=np.random.default_rng(0),
        n_resamples=99,
        confidence=0.75,
    )
    assert out["p_min"] == 2 / 2**n_differ and out["testable"] is testable


def test_holm_families_in_table_order_with_the_reachable_floor():
    from pushbench.analysis.deltas import holm_families

    def rows(fam, metric, pooled, p_mins, testable):
        return [
            {"fam": fam, "metric": metric, "pooled": pooled, "p_min": p, "testable": t}
            for p, t in zip(p_mins, testable, strict=True)
        ]

    d = pd.DataFrame(
        rows("zeta", "valid_count", False, [0.03125, 0.0625, 0.5], [True, True, False])
        + rows("alpha", "success", True, [0.5, 1.0], [False, False])  # nothing testable
        + rows("alpha", "success", False, [0.03125] * 40, [True] * 40)  # 40 x 2/64 > 1
        + rows("zeta", "valid_count", True, [0.015625], [True])
    )
    fams = holm_families(d, by="fam")
    assert list(fams.columns) == ["family", "metric", "pooled", "rows", "testable", "floor"]
    # the order the families first appear in the table, not a sorted one
    assert fams[["family", "metric", "pooled"]].values.tolist() == [
        ["zeta", "valid_count", False],
        ["alpha", "success", True],
        ["alpha", "success", False],
        ["zeta", "valid_count", True],
    ]
    assert fams["rows"].tolist() == [3, 2, 40, 1] and fams["testable"].tolist() == [2, 0, 40, 1]
    floor = fams["floor"].tolist()
    assert floor[0] == 2 * 0.03125  # testable rows x their smallest p_min
    assert math.isnan(floor[1])  # no testable row: no floor
    assert floor[2] == 1.0  # a p-value never exceeds 1
    assert floor[3] == 0.015625
    empty = holm_families(d.iloc[:0], by="fam")
    assert empty.empty and list(empty.columns) == list(fams.columns)


@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_delta_rows_are_a_direct_scipy_bootstrap_over_instance_means(confidence):
    eps = suite()
    df = report.episodes_frame(eps)
    d = report.paired_deltas(
        eps,
        metrics=["success", "valid_count"],
        seed=9,
        n_resamples=999,
        confidence=confidence,
        method="percentile",
    )
    assert len(d) == 2 * 3 and (d["confidence"] == confidence).all()
    for r in d.itertuples():
        targets = None if r.pooled else [r.target]
        m = instance_means(df, r.controller_a, r.controller_b, r.metric, targets)
        assert len(m) == r.n_clusters == 6  # the seed picks one of 6 instances
        assert r.delta == pytest.approx(m.mean(), abs=1e-12)
        rng = stats.row_rng(
            9,
            r.family,
            r.policy,
            "pooled" if r.pooled else r.target,
            r.controller_a,
            r.controller_b,
            r.metric,
        )
        ci = scipy.stats.bootstrap(
            (m.to_numpy(),),
            np.mean,
            method="percentile",
            confidence_level=confidence,
            n_resamples=999,
            rng=rng,
        ).confidence_interval
        assert (r.ci_low, r.ci_high) == pytest.approx((ci.low, ci.high), abs=1e-12)
        assert r.ci_method == "percentile cluster bootstrap"


def test_delta_rows_invert_the_sign_flip_test_by_default_cut_to_the_plausible_range():
    eps = suite()
    df = report.episodes_frame(eps)
    d = report.paired_deltas(
        eps, metrics=["success", "valid_count"], seed=9, n_resamples=999, confidence=0.9
    )
    for r in d.itertuples():
        m = instance_means(
            df, r.controller_a, r.controller_b, r.metric, None if r.pooled else [r.target]
        ).to_numpy()
        rng = stats.row_rng(
            9,
            r.family,
            r.policy,
            "pooled" if r.pooled else r.target,
            r.controller_a,
            r.controller_b,
            r.metric,
        )
        lo, hi, used = stats.interval(m[None, :], rng=rng, confidence=0.9, n_resamples=999)
        assert (r.ci_low, r.ci_high, r.ci_method) == (lo[0], hi[0], used[0])
        assert used[0] == "sign-flip test inversion" and not (r.ci_low_clipped or r.ci_high_clipped)
        p, p_method = stats.sign_flip_p(m[None, :], rng=rng)
        assert r.p_value == p[0] and r.p_method == p_method == "exact sign-flip (64 assignments)"
        assert (r.ci_low <= 0 <= r.ci_high) is (r.p_value >= 0.1)  # inversion: agreement
        up, down = (m > 1e-9).sum(), (m < -1e-9).sum()
        assert (r.n_better, r.n_worse, r.n_tied) == (up, down, 6 - up - down)
        assert r.p_min == 2 / 2 ** (up + down) if up + down else r.p_min == 1.0
        assert r.testable is (r.p_min < 0.1)
        assert m.min() <= r.ci_low <= r.delta <= r.ci_high <= m.max()
    # the other methods are cut to the plausible range and say so: the t interval of counts to
    # the instances' range, of rates to [-1, 1]
    t = report.paired_deltas(
        eps, metrics=["success", "valid_count"], seed=9, n_resamples=999, confidence=0.9, method="t"
    )
    for r in t.itertuples():
        m = instance_means(
            df, r.controller_a, r.controller_b, r.metric, None if r.pooled else [r.target]
        ).to_numpy()
        lo, hi, _ = stats.interval(
            m[None, :], rng=np.random.default_rng(0), confidence=0.9, method="t"
        )
        b = (-1.0, 1.0) if r.metric == "success" else (m.min(), m.max())
        assert (r.ci_low, r.ci_high) == (max(lo[0], b[0]), min(hi[0], b[1]))
        assert (r.ci_low_clipped, r.ci_high_clipped) == (lo[0] < b[0], hi[0] > b[1])
        assert r.ci_method == "t interval over clusters" + (
            " (clipped)" if lo[0] < b[0] or hi[0] > b[1] else ""
        )
    assert t["ci_high_clipped"].any() or t["ci_low_clipped"].any()


def test_instance_means_differing_by_exactly_one_give_an_interval():
    # success deltas per instance: 1, 0, 1, 0, 1, 0 -> not degenerate
    eps = []
    for i, (va, vb) in enumerate([(10, 2), (10, 10), (10, 2), (2, 2), (10, 2), (2, 2)]):
        for s in (0, 1):
            eps += [
                line("stateqgp", instance=f"i{i}", seed=s, valid=va),
                line("standard", instance=f"i{i}", seed=s, valid=vb),
            ]
    row = report.paired_deltas(eps, metrics=["success"], n_resamples=999).iloc[0]
    assert row["delta"] == 0.5 and not row["degenerate"]
    # six instances: the inverted test's interval is [min, max] of the instance differences
    assert (row["ci_low"], row["ci_high"]) == (0.0, 1.0) and row["n_clusters"] == 6
    assert (row["n_better"], row["n_worse"], row["n_tied"]) == (3, 0, 3)
    # four: no 95% interval, and the row says why
    four = report.paired_deltas(eps[:16], metrics=["success"]).iloc[0]
    assert four["n_clusters"] == 4 and four["ci_method"] == "n/a (k<6)"
    assert math.isnan(four["ci_low"]) and math.isnan(four["ci_high"])


def test_backend_errors_and_tampered_lines_leave_the_deltas_as_if_never_run():
    eps = suite()
    # a stateqgp episode that failed on the backend, and a tampered one, each reported as a
    # failure: counted as agent outcomes they would lower stateqgp's success
    bad = {i for i, e in enumerate(eps) if e["controller"]["name"] == "stateqgp" and e["success"]}
    bad = sorted(bad)[:4]
    assert len(bad) == 4
    broken = [dict(e) for e in eps]
    for n, i in enumerate(bad):
        e = broken[i]
        e["metrics"] = {**e["metrics"], "success": False, "valid_count": 0}
        e["success"] = False
        if n % 2:
            e["tampered"] = True
        else:
            e["terminated_by"] = "error"
    kept = [e for i, e in enumerate(eps) if i not in bad]
    got = report.paired_deltas(broken, seed=1, n_resamples=499)
    want = report.paired_deltas(kept, seed=1, n_resamples=499)
    pd.testing.assert_frame_equal(got, want)
    full = report.paired_deltas(eps, seed=1, n_resamples=499)
    assert (got["n_pairs"] < full["n_pairs"]).any()


def test_delta_rows_carry_the_policy_simulated_flag():
    eps = suite(policy="simulated-mid") + suite(policy="gpt-x")  # gpt-x: not simulated
    d = report.paired_deltas(eps, metrics=["success"], n_resamples=199)
    assert set(d["policy"]) == {"simulated-mid", "gpt-x"}
    assert (d["simulated"] == (d["policy"] == "simulated-mid")).all()
    assert d["simulated"].dtype == bool


def test_only_matched_episodes_count_and_one_sided_targets_make_no_rows():
    eps = suite(targets=(10,))
    eps += [e for e in suite(targets=(25,)) if e["controller"]["name"] == "stateqgp"]  # A only
    eps += [e for e in suite(targets=(50,)) if e["controller"]["name"] == "standard"]  # B only
    eps += [
        e for e in suite(targets=(10,), seeds=[40, 41]) if e["controller"]["name"] == "stateqgp"
    ]  # unmatched seeds on the A side
    d = report.paired_deltas(eps, metrics=["success"], n_resamples=199)
    assert list(d["target"]) == [10] and not d["pooled"].any()
    assert d.iloc[0]["n_pairs"] == 12 and d.iloc[0]["n_targets"] == 1


def test_a_pair_without_matches_does_not_hide_the_pairs_after_it():
    # pairs come as (verifier_gated - standard), (stateqgp - standard), (stateqgp -
    # verifier_gated); a pair without any matched episode is skipped, not the end of the list
    def shifted(ctrl, by):
        return [
            {**e, "seed": e["seed"] + by, "key": f"{e['key']}|{by}"}
            for e in suite(controllers=(ctrl,), targets=(10,))
        ]

    d = report.paired_deltas(
        suite(targets=(10,)) + shifted("verifier_gated", 100), metrics=["success"], n_resamples=199
    )
    pairs = list(zip(d["controller_a"], d["controller_b"], strict=True))
    assert pairs == [("stateqgp", "standard")]
    d = report.paired_deltas(
        shifted("standard", 100) + suite(controllers=("verifier_gated", "stateqgp"), targets=(10,)),
        metrics=["success"],
        n_resamples=199,
    )
    pairs = list(zip(d["controller_a"], d["controller_b"], strict=True))
    assert pairs == [("stateqgp", "verifier_gated")]


def test_delta_rows_come_in_documented_order():
    eps = []
    for fam in ("reposcan", "dataops"):
        for pol in ("simulated-mid", "gpt-x"):
            eps += suite(
                controllers=("stateqgp", "verifier_gated", "standard"),
                policy=pol,
                family=fam,
                targets=(25, 10),
                seeds=range(6),
                n_instances=3,
            )
    rng = np.random.default_rng(0)
    eps = [eps[i] for i in rng.permutation(len(eps))]  # the line order must not matter
    metrics = ["valid_count", "success"]  # not the default order
    d = report.paired_deltas(eps, metrics=metrics, n_resamples=199)
    pairs = [
        ("verifier_gated", "standard"),
        ("stateqgp", "standard"),
        ("stateqgp", "verifier_gated"),
    ]
    want = [
        (fam, pol, target, a, b, m)
        for fam in ("dataops", "reposcan")
        for pol in ("gpt-x", "simulated-mid")
        for target in (None, 10, 25)
        for a, b in pairs
        for m in metrics
    ]
    got = [
        (
            r.family,
            r.policy,
            None if r.pooled else r.target,
            r.controller_a,
            r.controller_b,
            r.metric,
        )
        for r in d.itertuples()
    ]
    assert got == want
    assert list(d.columns) == report.PAIRED_COLUMNS
    assert list(d.index) == list(range(len(d)))


def test_frame_and_summary_rows_are_sorted_whatever_the_line_order():
    eps = []
    for fam in ("reposcan", "dataops"):
        eps += suite(
            controllers=("stateqgp", "custom", "standard"),
            family=fam,
            targets=(25, 10),
            seeds=range(4),
            n_instances=2,
        )
    shuffled = [eps[i] for i in np.random.default_rng(1).permutation(len(eps))]
    df = report.episodes_frame(shuffled)
    crank = {"standard": 0, "stateqgp": 1, "custom": 2}  # baseline order, unknown names last
    want = sorted(
        (
            e["family"],
            e["policy"]["name"],
            crank[e["controller"]["name"]],
            e["target"],
            e["task_id"],
            e["instance"],
            e["seed"],
        )
        for e in eps
    )
    got = [
        (r.family, r.policy, crank[r.controller], r.target, r.task_id, r.instance, r.seed)
        for r in df.itertuples()
    ]
    assert got == want and list(df.index) == list(range(len(df)))
    s = report.summary_table(df, steps_reference=False)
    assert [(r.family, crank[r.controller], r.target) for r in s.itertuples()] == sorted(
        {(f, c, t) for f, _, c, t, *_ in want}
    )
    assert report.order_controllers(["zz", "custom", "stateqgp", "none", "standard", "zz"]) == [
        "none",
        "standard",
        "stateqgp",
        "custom",
        "zz",
    ]


# ----- the files written: read back and compared with the frames ----------------------------------
def rich_line(ctrl, instance, seed, target=10, **kw) -> dict:
    """A :func:`line` whose every summary column is defined somewhere (precision, proposed
    duplicates, claims, usage), with values that vary by controller, instance and seed."""
    k = (len(ctrl) * 7 + int(instance[-1]) * 3 + seed * 5) % 11
    valid = target if k % 3 else max(1, target * k // 12)
    ep = line(
        ctrl,
        instance=instance,
        seed=seed,
        target=target,
        valid=valid,
        dup=k / 40,
        steps=12 + k,
        budget=30,
        reported=valid + (k % 4) - 1,
        usage={
            "prompt_tokens": 100 * k + 7,
            "completion_tokens": 3 * k + 1,
            "cost_usd": k / 1000 + 1e-4,
        },
        interventions={"dedupe": k % 3, "completion_gate": k % 2},
        **kw,
    )
    over = ep["metrics"]["over_claim"]
    ep["metrics"].update(
        precision=(k + 3) / 14,
        proposed_duplicate_rate=k / 30,
        rejected=k % 5,
        false_claim=bool(over and over > 0 and not ep["success"]),
        honest_stop=False,
        gated_over_claim=None,
        invalid_actions=k % 2,
        anytime_steps=[2 + k, 4 + k, None, None],
    )
    return ep


def rich_run() -> list[dict]:
    return [
        rich_line(c, f"i{i}", s, target=t)
        for c in ("standard", "verifier_gated", "stateqgp")
        for i in range(5)
        for s in (0, 1, 2)
        for t in (10, 25)
    ]


def assert_csv_is_the_frame(path, frame: pd.DataFrame) -> None:
    back = pd.read_csv(path)
    assert list(back.columns) == list(frame.columns)
    assert len(back) == len(frame) > 0
    for col in frame.columns:
        f, b = frame[col], back[col]
        if pd.api.types.is_bool_dtype(f):
            assert b.tolist() == f.tolist(), col
        elif pd.api.types.is_float_dtype(f) or pd.api.types.is_integer_dtype(f):
            ff = f.astype(float).to_numpy()
            assert np.array_equal(np.isnan(ff), b.isna().to_numpy()), col
            # six decimals written: within half a unit of the sixth decimal, no more
            np.testing.assert_allclose(
                b.astype(float).to_numpy(), ff, rtol=0, atol=5.01e-7, err_msg=col
            )
        else:
            assert b.fillna("").astype(str).tolist() == f.fillna("").astype(str).tolist(), col


def test_csv_files_read_back_equal_the_frames(tmp_path):
    eps = rich_run()
    frames = report.write_report(
        eps,
        tmp_path,
        seed=3,
        n_resamples=199,
        metrics=["success", "valid_count", "precision"],
        steps_reference=False,
        ci_method="percentile",
    )
    assert_csv_is_the_frame(tmp_path / "summary.csv", frames["summary"])
    assert_csv_is_the_frame(tmp_path / "paired_deltas.csv", frames["paired_deltas"])
    # the frames written are the ones asked for: seed, metrics and interval method included
    want = report.paired_deltas(
        eps,
        metrics=["success", "valid_count", "precision"],
        seed=3,
        n_resamples=199,
        method="percentile",
    )
    pd.testing.assert_frame_equal(frames["paired_deltas"], want)
    pd.testing.assert_frame_equal(
        frames["summary"], report.summary_table(eps, steps_reference=False)
    )
    pd.testing.assert_frame_equal(
        frames["episodes"].drop(columns="progress"),
        report.episodes_frame(eps).drop(columns="progress"),
    )
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == frames["report_md"]
    assert "(seed 3; 199 draws where a method samples)" in " ".join(frames["report_md"].split())
    # into a directory that does not exist yet, twice
    deep = tmp_path / "a" / "b"
    for _ in range(2):
        again = report.write_report(
            eps,
            deep,
            seed=3,
            n_resamples=199,
            steps_reference=False,
            metrics=["success", "valid_count", "precision"],
            ci_method="percentile",
        )
        assert (deep / "summary.csv").read_bytes() == (tmp_path / "summary.csv").read_bytes()
    pd.testing.assert_frame_equal(again["paired_deltas"], want)
    s = frames["summary"]
    for col in (
        "precision",
        "proposed_duplicate_rate",
        "mean_prompt_tokens",
        "mean_cost_usd",
        "mean_steps_to_25pct",
        "false_claim_rate",
        "mean_over_claim",
    ):
        assert s[col].notna().all() and s[col].nunique() > 1, col


def test_csv_rounds_to_six_decimals_without_negative_zero(monkeypatch):
    monkeypatch.setattr(os, "linesep", "\r\n")  # "\n" line ends on every platform
    df = pd.DataFrame(
        {
            "x": [-1e-9, 0.1234564, 1 / 3, -2.5, math.nan, -4e-7],
            "n": [1, 2, 3, 4, 5, 6],
            "s": ["a", "b,c", "", "d", "e", "f"],
            "f": [True, False, True, True, False, False],
        }
    )
    text = report.to_csv_bytes(df).decode()
    assert text == (
        'x,n,s,f\n0.000000,1,a,True\n0.123456,2,"b,c",False\n'
        "0.333333,3,,True\n-2.500000,4,d,True\n,5,e,False\n0.000000,6,f,False\n"
    )
    assert df["x"].iloc[0] == -1e-9  # the caller's frame is not changed


def context_run() -> list[dict]:
    """LLM lines of one model with a full and a trimmed context arm (5 instances x 2 seeds)."""
    eps = []
    for ctx in (None, 2500):
        for i in range(5):
            for seed in (0, 1):
                valid = 10 - ((i * 3 + seed) % 4 if ctx else (i + seed) % 2)
                ep = line(
                    "standard",
                    policy="llm",
                    instance=f"i{i}",
                    seed=seed,
                    valid=valid,
                    simulated=False,
                )
                ep["policy"]["params"] = {"model": "m-1", "context_tokens": ctx}
                ep["key"] += f"|{ctx}"
                ep["llm"] = {"context_tokens": ctx, "dropped_turns": 0 if ctx is None else i}
                eps.append(ep)
    return eps


def test_write_report_writes_context_deltas_from_any_iterable_of_lines(tmp_path):
    from pushbench.analysis.context_deltas import context_deltas

    eps = context_run()
    want = context_deltas(eps, seed=5, n_resamples=99)
    assert len(want) and not want["degenerate"].all()
    frames = report.write_report(
        iter(eps), tmp_path, seed=5, n_resamples=99, steps_reference=False
    )  # a generator is read once
    pd.testing.assert_frame_equal(frames["context_deltas"], want)
    assert (tmp_path / "context_deltas.csv").read_bytes() == report.to_csv_bytes(want)
    assert_csv_is_the_frame(tmp_path / "context_deltas.csv", want)
    # a frame holds no context budgets: the same tables, no context deltas
    again = report.write_report(
        report.episodes_frame(eps), tmp_path / "f", seed=5, n_resamples=99, steps_reference=False
    )
    assert "context_deltas" not in again and not (tmp_path / "f" / "context_deltas.csv").exists()
    for name in ("summary.csv", "paired_deltas.csv"):
        assert (tmp_path / "f" / name).read_bytes() == (tmp_path / name).read_bytes()


def test_report_md_is_utf8_whatever_the_locale(tmp_path):
    # an ASCII locale with Python's UTF-8 coercion switched off: the text encoding would be
    # ASCII, and a label outside it must still be written (as UTF-8)
    eps = [
        line(c, policy="modèle-ü", instance=f"i{i}", seed=0, valid=10 - i % 2 * (c < "t"))
        for c in ("standard", "stateqgp")
        for i in range(3)
    ]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))
    # the child imports the package this process tests (also a mutation tester's copy)
    src = str(Path(report.__file__).resolve().parents[2])
    env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    code = (
        "import sys; from pushbench.analysis import report; "
        "assert sys.getfilesystemencoding() and __import__('locale').getencoding() "
        "in ('ANSI_X3.4-1968', 'ascii', 'US-ASCII'), __import__('locale').getencoding(); "
        "report.write_report(report.load_episodes(sys.argv[1]), sys.argv[1], "
        "n_resamples=99, steps_reference=False)"
    )
    code += "; print(report.__file__)"
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(Path(report.__file__).resolve())
    assert "modèle-ü" in (tmp_path / "report.md").read_text(encoding="utf-8")
    # the same bytes as written here, in this process's locale
    here = report.write_report(
        report.load_episodes(tmp_path), tmp_path / "here", n_resamples=99, steps_reference=False
    )
    assert (tmp_path / "report.md").read_bytes() == here["report_md"].encode("utf-8")


def test_write_report_embeds_the_figures_present_and_links_traces(tmp_path):
    eps = rich_run()
    (tmp_path / "target_scaling.png").write_bytes(b"\x89PNG fake")
    assert report.existing_figures(tmp_path) == ["target_scaling.png"]
    frames = report.write_report(eps, tmp_path, n_resamples=199, steps_reference=False)
    assert "](target_scaling.png)" in frames["report_md"]
    assert "](duplicate_rate.png)" not in frames["report_md"]
    other = report.write_report(
        eps,
        tmp_path / "out",
        n_resamples=199,
        steps_reference=False,
        run_dir=tmp_path,
        figures=["duplicate_rate.png"],
    )
    assert "](duplicate_rate.png)" in other["report_md"]
    assert "](target_scaling.png)" not in other["report_md"]
    assert "(traces/" in frames["report_md"]  # failures link their traces
    assert "(../traces/" in other["report_md"] and "(traces/" not in other["report_md"]


def test_steps_reference_flag_reaches_the_summary(tmp_path):
    from pushbench.analysis import reference

    # conftest builds the built-in snapshots for the session; only this task's snapshot counts
    assert reference.snapshots_ready("RepoScan-requests-returns-N10", None)
    assert not reference.snapshots_ready("RepoScan-no-such-task-N10", None)
    ep = line("standard", instance="x", seed=0, valid=10, steps=30, budget=60)
    ep.update(task_id="RepoScan-requests-returns-N10", instance="RepoScan-requests-returns-N10")
    on = report.write_report([ep], tmp_path / "on", n_resamples=199)["summary"]
    off = report.write_report([ep], tmp_path / "off", n_resamples=199, steps_reference=False)[
        "summary"
    ]
    assert on["steps_ratio"].notna().all() and off["steps_ratio"].isna().all()


# ----- the printed tables: checked against the frames they print ----------------------------------
def pct0(v) -> str:
    return "-" if pd.isna(v) else f"{100 * v:.0f}"


def printed(fn, *args, **kw) -> str:
    con = Console(width=200, record=True, file=io.StringIO())
    fn(*args, console=con, **kw)
    return con.export_text()


def test_printed_summary_cells_are_the_summary_frame():
    eps = rich_run()
    eps += [
        {**rich_line(c, "i0", 0, target=50), "key": f"err-{c}", "terminated_by": "error"}
        for c in ("standard", "stateqgp")
    ]  # cells of errors only: no numbers
    s = report.summary_table(eps, steps_reference=False)
    s.loc[s.index[1], "precision"] = math.nan  # an undefined mean prints "-"
    text = printed(report.print_summary, s)
    lines = text.splitlines()
    assert lines[0] == "reposcan | simulated-mid | SIMULATED agent (not an LLM)"
    assert lines[1].split() == [
        "controller",
        "N",
        "n",
        "succ",
        "pass^3",
        "valid",
        "dup",
        "pdup",
        "prec",
        "claim",
        "stop",
        "be",
        "over",
    ]
    body = lines[3 : 3 + len(s)]
    assert lines[3 + len(s)].startswith("N target, n episodes")
    last = None
    for r, text_row in zip(s.itertuples(), body, strict=True):
        cells = text_row.split()
        if r.controller == last:
            assert text_row.startswith(" ")  # the name is not repeated
        else:
            assert cells.pop(0) == r.controller
        last = r.controller
        want = [
            str(r.target),
            str(r.n_episodes),
            pct0(r.success_rate),
            pct0(s.at[r.Index, "pass^3"]),
            "-" if pd.isna(r.mean_valid_count) else f"{r.mean_valid_count:.1f}",
            pct0(r.duplicate_submit_rate),
            pct0(r.proposed_duplicate_rate),
            pct0(r.precision),
            pct0(r.false_claim_rate),
            pct0(r.premature_stop_rate),
            pct0(r.budget_exhausted_rate),
            "-" if pd.isna(r.mean_over_claim) else f"{r.mean_over_claim:+.1f}",
        ]
        assert cells == want, (r.controller, r.target)
    assert "-" in body[1].split() and any(x.split()[1] == "0" for x in body if "50" in x)


def delta_rows(text: str) -> list[list[list[str]]]:
    """The printed delta table as rows of four text lines, each split into cells (an interval,
    a count triple and a p with its "nt" are one cell each)."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("A - B")) + 2
    cell = r"\[[^\]]*\]|n/a \(k<\d+\)|\+\d+ -\d+ =\d+|[pH][=<][^\s]+(?: nt)?|\S+"
    cells = [re.findall(cell, x) for x in lines[start:]]
    rows = []
    while len(cells) >= 4 and cells[1] and cells[1][0] == "-":
        rows.append(cells[:4])
        cells = cells[4:]
    return rows


def p_cell(r, holm: bool) -> str:
    def fmt(p):
        return "<.001" if p < 0.001 else "=" + format(p, ".2g").removeprefix("0")

    if not r["testable"]:
        return "p" + fmt(r["p_value"]) + " nt"
    return ("H" + fmt(r["p_holm"])) if holm else ("p" + fmt(r["p_value"]))


@pytest.mark.parametrize("metric", ["success", "valid_count"])
def test_printed_delta_cells_are_the_delta_frame(metric):
    from pushbench.analysis.format import delta_cell

    eps = rich_run() + [
        rich_line(c, f"i{i}", s, target=10, policy="gpt-x", simulated=False)
        for c in ("standard", "stateqgp")
        for i in range(5)
        for s in (0, 1)
    ]
    d = report.paired_deltas(
        eps, metrics=["success", "valid_count"], n_resamples=199, confidence=0.9
    )
    d["testable"] = d["n_clusters"] > 0  # test the printing of every case
    d.loc[d.index[0], "p_holm"] = 0.0004  # a p below the printed precision
    d.loc[d.index[2], "p_holm"] = 0.001  # exactly the smallest printed p
    d.loc[d.index[3], "p_holm"] = 0.0123
    d.loc[d.index[5], "testable"] = False  # raw p, marked not testable
    drop = d[
        (d["controller_a"] == "stateqgp")
        & (d["controller_b"] == "verifier_gated")
        & (d["target"] == 25)
    ].index
    d = d.drop(index=drop)  # a pair without an N=25 row
    text = printed(report.print_deltas, d, metric=metric)
    # the table follows the rows' targets, not the frame's row order
    by_target = d.sort_values(
        ["family", "policy", "target"],
        ascending=[True, True, False],
        kind="mergesort",
        na_position="first",
    )
    assert list(by_target.index) != list(d.index)
    assert printed(report.print_deltas, by_target, metric=metric) == text
    unit = "points" if metric == "success" else "units"
    title = f"{metric} A - B ({unit}), [90% CI], instances +better -worse =tied, p"
    assert f"reposcan | simulated-mid | {title} | SIMULATED agent (not an LLM)" in " ".join(
        text.split("\n")
    )
    assert f"reposcan | gpt-x | {title}" in " ".join(text.split("\n"))
    assert text.splitlines()[-1].startswith("H: Holm-adjusted") or "H: Holm-adjusted" in text
    from pushbench.analysis.deltas import holm_families

    fams = holm_families(d[d["metric"] == metric])
    reach = {(f.family, f.pooled): f.floor < 0.1 for f in fams.itertuples(index=False)}
    for pol, scopes in (("gpt-x", [10]), ("simulated-mid", [None, 10, 25])):
        part = text.split(f"reposcan | {pol} |")[1].split("\nreposcan | ")[0]
        sel = d[(d["policy"] == pol) & (d["metric"] == metric)]
        pairs = sel[["controller_a", "controller_b"]].drop_duplicates().itertuples(index=False)
        rows = delta_rows(part)
        header = [x for x in part.splitlines() if x.startswith("A - B ")][0]
        assert re.split(r"\s{2,}", header.strip())[1:] == [
            "all N" if t is None else f"N={t}" for t in scopes
        ]
        for (a, b), (l1, l2, l3, l4) in zip(pairs, rows, strict=True):
            assert l1[0] == a and l2[:2] == ["-", b]
            want = [[], [], [], []]
            for t in scopes:
                g = sel[
                    (sel["controller_a"] == a)
                    & (sel["controller_b"] == b)
                    & (sel["pooled"] if t is None else (sel["target"] == t).fillna(False))
                ]
                if g.empty:
                    continue
                r = g.iloc[0]
                e, c = delta_cell(r.to_dict(), metric, short=True)
                k = f"+{r['n_better']} -{r['n_worse']} ={r['n_tied']}"
                cells = (e, c, k, p_cell(r, reach[("reposcan", r["pooled"])]))
                for lst, x in zip(want, cells, strict=True):
                    lst.append(x)
            assert (l1[1:], l2[2:], l3, l4) == tuple(want), (a, b)
    r0 = d.loc[d.index[0]]  # row 0 is a success row
    assert ("<.001" in text) is (metric == "success" and reach[("reposcan", r0["pooled"])])
    nt = any(re.search(r"p=\S+ nt(\s|$)", x) for x in text.splitlines())
    assert nt is (metric == "valid_count")  # row 5 is a valid_count row
    assert printed(report.print_deltas, d, metric="no_such_metric") == ""


def test_printed_tables_use_their_styles():
    eps = rich_run()
    llm = [
        {**e, "simulated": False, "policy": {**e["policy"], "name": "gpt-x", "simulated": False}}
        for e in eps[:20]
    ]
    frames = {
        "summary": report.summary_table(eps + llm, steps_reference=False),
        "paired_deltas": report.paired_deltas(eps + llm, n_resamples=199),
    }
    con = Console(
        width=200, record=True, file=io.StringIO(), force_terminal=True, color_system="standard"
    )
    report.print_report(frames, console=con)
    styled = con.export_text(styles=True)
    assert "\x1b[1mreposcan | gpt-x\x1b[0m" in styled  # bold title
    assert "\x1b[1;33mreposcan | simulated-mid | SIMULATED" in styled  # bold yellow title
    assert "\x1b[1;33mSIMULATED: scripted agents" in styled
    assert "\x1b[2mN target, n episodes" in styled  # the legend is dim
    assert "\x1b[2mH: Holm-adjusted" in styled
    legend = styled.split("\x1b[2mN target")[1].split("\x1b[0m")[0]
    assert "\x1b[" not in legend  # not highlighted


def test_print_report_prints_each_part_once_and_only_when_there():
    eps = rich_run()
    frames = {
        "summary": report.summary_table(eps, steps_reference=False),
        "paired_deltas": report.paired_deltas(eps, n_resamples=199),
    }
    text = printed(report.print_report, frames)
    assert text.count("SIMULATED: scripted agents") == 1
    assert text.count("| success A - B (points), [95% CI], instances") == 1
    assert text.count("N target, n episodes") == 1 and text.count("H: Holm-adjusted") == 1
    no_deltas = printed(
        report.print_report, {**frames, "paired_deltas": frames["paired_deltas"].iloc[:0]}
    )
    assert "A - B" not in no_deltas and "N target" in no_deltas
    assert "A - B" not in printed(report.print_report, {"summary": frames["summary"]})
    llm = [
        {**e, "simulated": False, "policy": {**e["policy"], "name": "gpt-x", "simulated": False}}
        for e in eps
    ]
    plain = printed(
        report.print_report,
        {
            "summary": report.summary_table(llm, steps_reference=False),
            "paired_deltas": report.paired_deltas(llm, n_resamples=199),
        },
    )
    assert "SIMULATED" not in plain and "gpt-x" in plain
    empty = {"summary": report.summary_table([]), "paired_deltas": report.paired_deltas([])}
    assert printed(report.print_report, empty).strip() == "no episodes"


# ----- record loading and the frame ---------------------------------------------------------------
def test_unreadable_lines_anywhere_are_named_and_cost_only_themselves(tmp_path):
    eps = [line(seed=s) for s in range(14)]
    text = [json.dumps(e) for e in eps]
    text[2] = text[2][:40]  # torn in the middle of the file
    text[5] = "[1, 2, 3]"  # JSON, but not an object
    text[6] = '"a string"'
    for i in (8, 9, 10, 11, 12):
        text[i] = "{nope"
    text.insert(4, "   ")  # blank lines are no damage
    (tmp_path / "episodes.jsonl").write_bytes(
        ("\n".join(text) + "\n").encode() + b'{"key": "\xff\xfe bad bytes"\n'
    )
    # one rule for every reader (pushbench.records.read_lines): one warning per unreadable line,
    # naming its 1-based number (blank lines count, and are no damage)
    with pytest.warns(UserWarning) as rec:
        got = report.load_episodes(tmp_path)
    file = tmp_path / "episodes.jsonl"
    assert [str(w.message) for w in rec] == [
        f"{file}:{n}: unreadable line skipped" for n in (3, 7, 8, 10, 11, 12, 13, 14, 16)
    ]
    assert [e["seed"] for e in got] == [0, 1, 3, 4, 7, 13]
    ten = [json.dumps(line(seed=s)) for s in range(2)] + ["{x"] * 10
    file.write_text("\n".join(ten) + "\n")
    with pytest.warns(UserWarning) as rec:
        assert len(report.load_episodes(file)) == 2
    assert len(rec) == 10 and str(rec[-1].message).endswith(":12: unreadable line skipped")


def test_lines_without_a_key_are_deduplicated_by_what_they_ran():
    a = line("stateqgp", seed=1)
    del a["key"]
    twin = {**a, "metrics": {**a["metrics"], "valid_count": 0}}  # a rerun of the same
    other_seed = {k: v for k, v in line("stateqgp", seed=2).items() if k != "key"}
    other_policy = {**a, "policy": {**a["policy"], "label": "mine"}}
    other_instance = {**a, "instance": "i9"}
    other_task = {**a, "task_id": "RS-other"}
    other_ctrl = {**a, "controller": {"name": "standard", "components": []}}
    keys = [
        frame.fallback_key(e)
        for e in (a, twin, other_seed, other_policy, other_instance, other_task, other_ctrl)
    ]
    assert keys[0] == keys[1] and len(set(keys)) == 6
    assert all(re.fullmatch(r"nokey-[0-9a-f]{16}", k) for k in keys)


def test_load_episodes_keeps_the_first_of_lines_sharing_a_key(tmp_path):
    first = line(seed=0)
    again = {**first, "metrics": {**first["metrics"], "valid_count": 0}}
    keyless = {k: v for k, v in line(seed=1).items() if k != "key"}
    (tmp_path / "e.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in (first, again, keyless, keyless))
    )
    got = report.load_episodes(tmp_path / "e.jsonl")
    assert got == [first, keyless]
    # a line's own key decides, whatever it ran; lines without one are told apart by what
    # they ran
    other_run = {**first, "seed": 7}  # first's key, another seed
    keyless2 = {k: v for k, v in line(seed=2).items() if k != "key"}
    (tmp_path / "f.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in (first, other_run, keyless, keyless2, keyless))
    )
    assert report.load_episodes(tmp_path / "f.jsonl") == [first, keyless, keyless2]
    with pytest.raises(FileNotFoundError, match="^no episodes file at .*nothing.jsonl$"):
        report.load_episodes(tmp_path / "nothing.jsonl")


def test_frame_columns_from_odd_and_older_lines():
    base = line("stateqgp", instance="i1", seed=2, components=["dedupe", "completion_gate"])
    assert frame.controller_name({"controller": {"name": None}}) == "none"
    assert frame.controller_name({"controller": "unitqgp"}) == "unitqgp"
    assert frame.controller_name({}) == "none"
    assert frame.policy_name({"policy": {"params": {}}}) == "unknown"
    assert frame.policy_name({"policy": "diligent"}) == "diligent"
    assert frame.policy_name({}) == "unknown"
    assert frame.is_simulated({"simulated": 0, "policy": {"simulated": True}}) is False
    assert frame.is_simulated({"policy": {"simulated": 1}}) is True
    assert frame.is_simulated({"policy": "simulated-mid"}) is False
    no_inst = {**base, "instance": None, "key": "k2"}
    no_sim = {k: v for k, v in base.items() if k != "simulated"}
    no_sim["key"] = "k3"
    no_sim["policy"] = {**base["policy"], "simulated": False}
    bb = {**base, "key": "k4", "blackbox": {"out_of_band_edits_count": 3}}
    short_any = {**base, "key": "k5", "metrics": {**base["metrics"], "anytime_steps": [1, 2]}}
    df = report.episodes_frame([base, no_inst, no_sim, bb, short_any]).set_index("key")
    assert df.loc[base["key"], "components"] == "dedupe+completion_gate"
    assert df.loc["k2", "instance"] == base["task_id"]  # instance falls back to the task id
    assert bool(df.loc[base["key"], "simulated"]) and not bool(df.loc["k3", "simulated"])
    assert df.loc["k4", "out_of_band_edits"] == 3 and math.isnan(df.loc["k3", "out_of_band_edits"])
    assert df.loc["k5", ["steps_to_25", "steps_to_100"]].isna().all()
    assert str(df["seed"].dtype) == "Int64" and df.loc["k2", "seed"] == 2
    assert df["success"].dtype == bool and df["tampered"].dtype == bool
    assert df["valid_count"].dtype == float
    full = {**base, "key": "full", "metrics": {**base["metrics"], "anytime_steps": [3, 5, 8, None]}}
    row = report.episodes_frame([full]).iloc[0]
    assert (row["steps_to_25"], row["steps_to_50"], row["steps_to_75"]) == (3, 5, 8)
    assert math.isnan(row["steps_to_100"])
    assert "out_of_band_edits" not in report.episodes_frame([base]).columns
    assert list(report.episodes_frame([base]).columns) == report.EPISODE_COLUMNS + ["progress"]
    empty = report.episodes_frame([])
    assert list(empty.columns) == report.EPISODE_COLUMNS + ["progress"]
    assert empty["success"].dtype == bool and empty["valid_count"].dtype == float


def test_frame_takes_each_column_from_its_documented_place():
    base = line("stateqgp", policy="simulated-mid", instance="i1", seed=2, budget=40, steps=20)
    # steps_used from the metrics, else from the line; budget and the flags from the line
    own = {**base, "key": "own", "steps_used": 33, "incomplete": True, "budget": 70}
    bare = {
        **base,
        "key": "bare",
        "steps_used": 17,
        "metrics": {k: v for k, v in base["metrics"].items() if k != "steps_used"},
    }
    # a line from before keys, families, task ids, instances and controller sections
    old = {k: v for k, v in base.items() if k not in ("key", "family", "task_id", "instance")}
    old["controller"] = "unitqgp"
    # flags missing, null or NaN are False; numbers written as text are read, other text is NaN
    odd = {
        **base,
        "key": "odd",
        "seed": "x",
        "reported_count": "12",
        "metrics": {
            **base["metrics"],
            "premature_stop": None,
            "budget_exhausted": math.nan,
            "valid_count": "n/a",
            "rejected": True,
        },
    }
    odd["metrics"].pop("false_completion")
    odd["controller"] = {"name": "standard", "components": []}
    df = report.episodes_frame([base, own, bare, old, odd])
    row = {k: r for k, r in zip(df["key"], df.to_dict("records"), strict=True)}
    assert row[base["key"]]["steps_used"] == 20 and row["own"]["steps_used"] == 20
    assert row["bare"]["steps_used"] == 17
    assert row["own"]["budget"] == 70 and row[base["key"]]["budget"] == 40
    assert row["own"]["incomplete"] and not row[base["key"]]["incomplete"]
    assert row[base["key"]]["policy_name"] == "simulated-mid"
    key = frame.fallback_key(old)
    assert (row[key]["family"], row[key]["task_id"], row[key]["instance"]) == ("", "", "")
    assert (row[key]["controller"], row[key]["components"]) == ("unitqgp", "")
    assert row["odd"]["components"] == ""
    for flag in ("premature_stop", "budget_exhausted", "false_completion"):
        assert not row["odd"][flag], flag
    assert row["odd"]["reported_count"] == 12.0 and math.isnan(row["odd"]["valid_count"])
    assert row["odd"]["rejected"] == 1.0 and pd.isna(row["odd"]["seed"])
    nan_only = {**base, "metrics": {**base["metrics"], "budget_exhausted": math.nan}}
    assert not report.episodes_frame([nan_only])["budget_exhausted"].iloc[0]  # a float column
    with pytest.raises(ValueError, match="^episode 'k9' has neither metrics nor calls$"):
        report.episodes_frame([{"key": "k9", "target": 10}])


def test_frame_computes_metrics_from_calls_or_refuses():
    from pushbench.runner.episode import run_episode

    rec = run_episode("RepoScan-requests-returns-N10", "standard", "diligent", 0)
    with_calls = {k: v for k, v in rec.items() if k != "metrics"}
    row = report.episodes_frame([with_calls]).iloc[0]
    assert row["valid_count"] == rec["metrics"]["valid_count"] and bool(row["success"])
    assert row["steps_used"] == rec["metrics"]["steps_used"]
    bare = {k: v for k, v in with_calls.items() if k != "calls"}
    with pytest.raises(ValueError, match="neither metrics nor calls"):
        report.episodes_frame([bare])


def test_scored_drops_errors_and_tampered_lines_only():
    eps = [
        line(seed=0),
        {**line(seed=1), "terminated_by": "error"},
        {**line(seed=2), "tampered": True},
        line(seed=3, terminated_by="budget", valid=2),
    ]
    df = report.episodes_frame(eps)
    assert sorted(report.scored(df)["seed"]) == [0, 3]
    assert report.scored(df.iloc[:0]).empty


# ----- the summary --------------------------------------------------------------------------------
SUMMARY_MEANS = {  # summary column -> episode column whose mean over scored episodes it is
    "success_rate": "success",
    "mean_valid_count": "valid_count",
    "duplicate_submit_rate": "duplicate_submit_rate",
    "proposed_duplicate_rate": "proposed_duplicate_rate",
    "precision": "precision",
    "mean_rejected": "rejected",
    "valid_per_step": "valid_per_step",
    "false_completion_rate": "false_completion",
    "false_claim_rate": "false_claim",
    "honest_stop_rate": "honest_stop",
    "premature_stop_rate": "premature_stop",
    "budget_exhausted_rate": "budget_exhausted",
    "mean_reported_count_error": "reported_count_error",
    "mean_over_claim": "over_claim",
    "mean_gated_over_claim": "gated_over_claim",
    "mean_interventions": "interventions_total",
    "mean_blocked_completions": "blocked_completions",
    "mean_invalid_actions": "invalid_actions",
    "mean_verifier_recoveries": "verifier_recoveries",
    "mean_steps_used": "steps_used",
    "mean_steps_to_25pct": "steps_to_25",
    "mean_steps_to_50pct": "steps_to_50",
    "mean_steps_to_75pct": "steps_to_75",
    "mean_steps_to_100pct": "steps_to_100",
    "mean_prompt_tokens": "prompt_tokens",
    "mean_completion_tokens": "completion_tokens",
    "mean_cost_usd": "cost_usd",
}


def test_summary_columns_are_means_over_scored_episodes_in_documented_order():
    eps = rich_run()
    assert all(eps[i]["target"] == 10 for i in (0, 2, 4))
    eps[0] = {**eps[0], "terminated_by": "error"}
    eps[2] = {**eps[2], "tampered": True}
    eps[4] = {**eps[4], "tampered": True, "terminated_by": "error"}  # an error, counted once
    eps += [
        {**rich_line("standard", "i0", 0, target=50), "terminated_by": "error"},
        {**rich_line("standard", "i1", 0, target=50), "tampered": True},
    ]
    df = report.episodes_frame(eps)
    s = report.summary_table(df, steps_reference=False)
    assert list(s.columns) == (
        [
            "family",
            "policy",
            "controller",
            "target",
            "simulated",
            "n_episodes",
            "n_backend_errors",
            "n_tampered",
            "n_instances",
            "success_rate",
            "pass^1",
            "pass^2",
            "pass^3",
            "mean_valid_count",
            "duplicate_submit_rate",
            "proposed_duplicate_rate",
            "precision",
            "mean_rejected",
            "valid_per_step",
            "steps_ratio",
            "false_completion_rate",
            "false_claim_rate",
            "honest_stop_rate",
            "premature_stop_rate",
            "budget_exhausted_rate",
            "mean_reported_count_error",
            "mean_over_claim",
            "mean_gated_over_claim",
            "mean_interventions",
            "mean_blocked_completions",
            "mean_invalid_actions",
            "mean_verifier_recoveries",
            "mean_steps_used",
            "mean_steps_to_25pct",
            "mean_steps_to_50pct",
            "mean_steps_to_75pct",
            "mean_steps_to_100pct",
            "mean_prompt_tokens",
            "mean_completion_tokens",
            "mean_cost_usd",
            "n_spend_cut",
            "total_prompt_tokens",
            "total_completion_tokens",
            "total_cost_usd",
            "cost_per_success",
        ]
    )
    ok = df[(df["terminated_by"] != "error") & ~df["tampered"]]
    for r in s.itertuples():
        cell = (df["controller"] == r.controller) & (df["target"] == r.target)
        good = ok[(ok["controller"] == r.controller) & (ok["target"] == r.target)]
        assert r.n_episodes == len(good)
        assert r.n_backend_errors == (df[cell]["terminated_by"] == "error").sum()
        assert r.n_tampered == (df[cell]["tampered"] & (df[cell]["terminated_by"] != "error")).sum()
        assert r.n_instances == good["instance"].nunique()
        assert bool(r.simulated)
        # the bill: every episode of the cell pays, cost per success over scored successes
        assert r.total_cost_usd == pytest.approx(df[cell]["cost_usd"].sum(min_count=1), nan_ok=True)
        assert r.total_prompt_tokens == pytest.approx(df[cell]["prompt_tokens"].sum())
        wins = good["success"].sum()
        assert r.cost_per_success == pytest.approx(
            r.total_cost_usd / wins if wins else math.nan, nan_ok=True
        )
        assert r.n_spend_cut == df[cell]["terminated_by"].isin(["cost_cap", "token_cap"]).sum()
        for col, src in SUMMARY_MEANS.items():
            got = s.at[r.Index, col]
            want = good[src].astype(float).mean() if len(good) else math.nan
            assert got == pytest.approx(want, nan_ok=True), (r.controller, r.target, col)
    n50 = s[s["target"] == 50].iloc[0]
    assert (n50["n_episodes"], n50["n_backend_errors"], n50["n_tampered"], n50["n_instances"]) == (
        0,
        1,
        1,
        0,
    )
    assert math.isnan(n50["success_rate"]) and math.isnan(n50["pass^1"])
    assert s["n_episodes"].dtype == int and s["n_backend_errors"].dtype == int
    assert s["n_instances"].dtype == int and s["simulated"].dtype == bool
    first = s[(s["controller"] == "standard") & (s["target"] == 10)].iloc[0]
    assert (first["n_backend_errors"], first["n_tampered"]) == (2, 1)
    assert s["n_spend_cut"].dtype == int


def test_summary_bill_of_a_one_episode_cell_and_cells_with_a_missing_key():
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "cost_usd": 0.25}
    one = report.summary_table(
        [line("standard", target=5, valid=5, usage=usage)], steps_reference=False
    ).iloc[0]
    assert (one["total_prompt_tokens"], one["total_cost_usd"]) == (7, 0.25)
    assert one["cost_per_success"] == 0.25  # one success divides the spend
    none = report.summary_table(
        [line("standard", target=5, valid=2, usage=usage)], steps_reference=False
    ).iloc[0]
    assert none["total_cost_usd"] == 0.25 and math.isnan(none["cost_per_success"])
    # a frame (not lines) may hold a missing key: its cell is kept like any other
    eps = [
        line(c, seed=sd, valid=10 - 5 * (c == "standard" and sd == 1), usage=usage)
        for c in ("standard", "stateqgp")
        for sd in (0, 1)
    ]
    df = report.episodes_frame(eps)
    df.loc[df["controller"] == "stateqgp", "family"] = None
    s = report.summary_table(df, steps_reference=False)
    assert len(s) == 2 and s["family"].isna().tolist() == [False, True]
    nan_row = s[s["family"].isna()].iloc[0]
    assert (
        nan_row["n_episodes"],
        nan_row["n_backend_errors"],
        nan_row["success_rate"],
        nan_row["pass^2"],
        nan_row["total_cost_usd"],
    ) == (2, 0, 1.0, 1.0, 0.5)
    assert nan_row["cost_per_success"] == 0.25 and bool(nan_row["simulated"])
    assert s["n_backend_errors"].dtype == int and s["n_tampered"].dtype == int
    assert s["simulated"].dtype == bool
    assert s[s["family"].notna()].iloc[0]["success_rate"] == 0.5


def test_report_computes_missing_step_references_unless_told_not_to(monkeypatch, tmp_path):
    from pushbench.analysis import summary as summary_mod

    asked = []
    real = summary_mod.steps_ratio
    monkeypatch.setattr(
        summary_mod,
        "steps_ratio",
        lambda work, on_demand: asked.append(on_demand) or real(work, on_demand=False),
    )
    eps = [line()]
    report.summary_table(eps)
    report.summary_table(eps, steps_reference=False)
    report.write_report(eps, tmp_path / "a", n_resamples=99)
    report.write_report(eps, tmp_path / "b", n_resamples=99, steps_reference=False)
    assert asked == [True, False, True, False]


def test_pass_k_table_is_the_summarys_pass_columns_for_any_grouping():
    from pushbench.analysis.summary import GROUP

    eps = rich_run()
    s = report.summary_table(eps, steps_reference=False)
    pk = report.pass_k_table(report.episodes_frame(eps))
    assert list(pk.columns) == GROUP + ["pass^1", "pass^2", "pass^3"]
    merged = s.merge(pk, on=GROUP, suffixes=("", "_t"))
    assert len(merged) == len(s) == len(pk)
    for c in ("pass^1", "pass^2", "pass^3"):
        assert merged[c].tolist() == pytest.approx(merged[c + "_t"].tolist())
    df = report.episodes_frame(eps)
    by_ctrl = report.pass_k_table(df, group=["controller"]).set_index("controller")
    assert list(by_ctrl.columns) == ["pass^1", "pass^2", "pass^3"]
    for ctrl, g in df.groupby("controller"):  # the mean over (task, instance) cells
        cells = g.groupby(["task_id", "instance"])["success"].agg(["sum", "size"])
        for k in (1, 2, 3):
            want = np.mean(
                [
                    math.comb(int(c), k) / math.comb(int(n), k)
                    for c, n in zip(cells["sum"], cells["size"], strict=True)
                ]
            )
            assert by_ctrl.at[ctrl, f"pass^{k}"] == pytest.approx(want), (ctrl, k)
    assert report.pass_k_table(report.episodes_frame([])).columns.tolist() == GROUP


def test_pass_k_counts_seeds_per_instance_up_to_the_largest_seed_count():
    eps = (
        [line("standard", instance="a", seed=s, valid=10) for s in range(4)]
        + [line("standard", instance="b", seed=s, valid=10 if s else 3) for s in range(2)]
        + [line("stateqgp", instance="a", seed=s, valid=10 if s < 2 else 1) for s in range(3)]
    )
    s = report.summary_table(eps, steps_reference=False).set_index("controller")
    from pushbench.analysis.summary import pass_columns

    assert pass_columns(s) == ["pass^1", "pass^2", "pass^3", "pass^4"]
    std, sq = s.loc["standard"], s.loc["stateqgp"]
    assert std["pass^1"] == pytest.approx((1 + 0.5) / 2)
    assert std["pass^2"] == pytest.approx((1 + 0) / 2)
    assert std["pass^3"] == pytest.approx(1.0)  # instance b has 2 seeds: undefined there
    assert std["pass^4"] == pytest.approx(1.0)
    assert sq["pass^1"] == pytest.approx(2 / 3) and sq["pass^2"] == pytest.approx(1 / 3)
    assert sq["pass^3"] == 0.0 and math.isnan(sq["pass^4"])
    assert math.isnan(report.pass_hat_k(1, 2, 0)) and report.pass_hat_k(0, 2, 1) == 0.0
    wide = pd.DataFrame(columns=["pass^10", "pass^2", "pass^1", "x"])
    assert pass_columns(wide) == ["pass^1", "pass^2", "pass^10"]
    assert list(report.pass_k_table(report.episodes_frame([]).iloc[:0]).columns) == [
        "family",
        "policy",
        "controller",
        "target",
    ]


def test_empty_summary_has_the_columns_and_no_rows():
    s = report.summary_table([])
    assert s.empty
    assert list(s.columns)[:9] == [
        "family",
        "policy",
        "controller",
        "target",
        "simulated",
        "n_episodes",
        "n_backend_errors",
        "n_tampered",
        "n_instances",
    ]
    assert "success_rate" in s.columns and "mean_steps_to_100pct" in s.columns


# ----- the engine's edges -------------------------------------------------------------------------
def test_delta_table_rows_follow_strata_pairs_scopes_and_metrics():
    from pushbench.analysis.deltas import STAT_COLUMNS, delta_table

    eps = suite(
        controllers=("standard", "verifier_gated", "stateqgp"),
        targets=(25, 10),
        seeds=range(6),
        n_instances=3,
    )
    df = report.episodes_frame(eps)
    asked = []

    def pairs(names):
        asked.append(sorted(names))
        return [("standard", "stateqgp"), ("verifier_gated", "standard")]  # any direction

    out = delta_table(
        df,
        side="controller",
        strata=["family"],
        pairs=pairs,
        metrics=["valid_count", "success"],
        seed=2,
        n_resamples=199,
        a_col="left",
        b_col="right",
    )
    assert asked == [["standard", "stateqgp", "verifier_gated"]]
    assert list(out.columns) == [
        "family",
        "pooled",
        "target",
        "n_targets",
        "left",
        "right",
        *STAT_COLUMNS,
    ]
    got = [(r.left, r.right, None if r.pooled else r.target, r.metric) for r in out.itertuples()]
    assert got == [
        (a, b, t, m)
        for a, b in (("standard", "stateqgp"), ("verifier_gated", "standard"))
        for t in (None, 10, 25)
        for m in ("valid_count", "success")
    ]
    assert str(out["target"].dtype) == "Int64" and out["pooled"].dtype == bool
    assert out["degenerate"].dtype == bool
    assert list(out["n_targets"]) == [2, 2, 1, 1, 1, 1] * 2
    # strata come in sorted order whatever the frame's row order
    two = report.episodes_frame(
        eps + suite(family="dataops", targets=(10,), seeds=range(4), n_instances=2)
    )
    shuffled = two.iloc[np.random.default_rng(0).permutation(len(two))]
    present = lambda names: [("stateqgp", "standard")]  # noqa: E731
    got = delta_table(
        shuffled,
        side="controller",
        strata=["family"],
        pairs=present,
        metrics=["success"],
        n_resamples=199,
    )
    assert list(got["family"].drop_duplicates()) == ["dataops", "reposcan"]
    pd.testing.assert_frame_equal(
        got,
        delta_table(
            two,
            side="controller",
            strata=["family"],
            pairs=present,
            metrics=["success"],
            n_resamples=199,
        ),
    )
    # the reversed pair is the negated difference with its own generator
    flip = out[(out["left"] == "standard")]
    ref = report.paired_deltas(eps, metrics=["valid_count", "success"], seed=2, n_resamples=199)
    ref = ref[(ref["controller_a"] == "stateqgp") & (ref["controller_b"] == "standard")]
    assert flip["delta"].to_numpy() == pytest.approx(-ref["delta"].to_numpy())
    assert flip["mean_a"].to_numpy() == pytest.approx(ref["mean_b"].to_numpy())


def test_a_metric_undefined_on_every_pair_gives_an_empty_row():
    eps = suite(targets=(10,), seeds=range(6))
    for e in eps:
        e["metrics"]["duplicate_submit_rate"] = None  # no submissions anywhere
    d = report.paired_deltas(eps, metrics=["duplicate_submit_rate", "success"], n_resamples=199)
    row = d[d["metric"] == "duplicate_submit_rate"].iloc[0]
    assert row["n_pairs"] == 0 and row["n_clusters"] == 0
    assert row[["delta", "ci_low", "ci_high", "p_value", "p_holm", "mean_a", "mean_b"]].isna().all()
    assert row["ci_method"] == "" and row["p_method"] == "" and not row["degenerate"]
    assert row["confidence"] == 0.95 and math.isnan(row["p_min"])
    assert (row["n_better"], row["n_worse"], row["n_tied"], row["holm_rows"]) == (0, 0, 0, 0)
    assert not (row["testable"] or row["ci_low_clipped"] or row["ci_high_clipped"])
    # six instances, A succeeds and B fails on each: testable, a Holm family of one
    six = [
        line(c, instance=f"i{i}", seed=0, valid=v)
        for i in range(6)
        for c, v in (("stateqgp", 10), ("standard", 2))
    ]
    ok = report.paired_deltas(six, metrics=["success"]).iloc[0]
    assert ok["n_pairs"] == 6 and ok["testable"] and ok["holm_rows"] == 1
    assert ok["p_value"] == ok["p_min"] == 2 / 64 and ok["p_holm"] == ok["p_value"]
    # one instance tied: five differ, p can never go below 2/32: not testable, no Holm p
    nt = report.paired_deltas(
        six[:-2] + [line("stateqgp", instance="i5", seed=0, valid=2), six[-1]], metrics=["success"]
    ).iloc[0]
    assert (nt["n_better"], nt["n_worse"], nt["n_tied"]) == (5, 0, 1)
    assert not nt["testable"] and nt["holm_rows"] == 0 and math.isnan(nt["p_holm"])
    assert nt["p_value"] == nt["p_min"] == 2 / 32


def test_rate_deltas_are_cut_to_plus_minus_one_and_counts_to_the_instances_range():
    # success deltas per instance: seven +1, one 0 and one -1 (the t interval's upper bound of
    # such a sample lies above 1; the valid_count one above the largest instance difference)
    eps = []
    for i, (a, b) in enumerate([(10, 1)] * 7 + [(10, 10), (1, 10)]):
        eps += [
            line("stateqgp", instance=f"i{i}", seed=0, valid=a),
            line("standard", instance=f"i{i}", seed=0, valid=b),
        ]
    d = report.paired_deltas(eps, metrics=["success", "valid_count"], method="t")
    s = d[d["metric"] == "success"].iloc[0]
    m = np.array([1.0] * 7 + [0.0, -1.0])
    lo, hi, _ = stats.interval(m[None, :], rng=np.random.default_rng(0), method="t")
    assert hi[0] > 1.0 and s["ci_high"] == 1.0 and s["ci_low"] == lo[0]
    assert s["ci_high_clipped"] and not s["ci_low_clipped"]
    assert s["ci_method"] == "t interval over clusters (clipped)"
    v = d[d["metric"] == "valid_count"].iloc[0]
    vlo, vhi, _ = stats.interval(9 * m[None, :], rng=np.random.default_rng(0), method="t")
    assert vhi[0] > 9.0 and (v["ci_low"], v["ci_high"]) == (vlo[0], 9.0)  # not [-1, 1]
    assert v["ci_method"] == "t interval over clusters (clipped)" and v["ci_high_clipped"]
    assert v["delta"] == pytest.approx((7 * 9 + 0 - 9) / 9)
    assert (v["n_better"], v["n_worse"], v["n_tied"]) == (7, 1, 1)
    # the mirror image is cut from below
    swapped = [
        {
            **e,
            "controller": {
                "name": "standard" if e["controller"]["name"] == "stateqgp" else "stateqgp",
                "components": [],
            },
        }
        for e in eps
    ]
    s = report.paired_deltas(swapped, metrics=["success"], method="t").iloc[0]
    assert s["ci_low"] == -1.0 and s["ci_high"] == pytest.approx(-lo[0])
    assert s["ci_low_clipped"] and not s["ci_high_clipped"]
    # the default (test inversion) never leaves the instances' range: nothing to cut
    dflt = report.paired_deltas(eps, metrics=["success", "valid_count"])
    assert not (dflt["ci_low_clipped"] | dflt["ci_high_clipped"]).any()
    assert (dflt["ci_method"] == "sign-flip test inversion").all()


def test_more_than_16_instances_use_the_row_generator_for_a_monte_carlo_test():
    eps = []
    for i in range(20):
        for s in (0, 1):
            eps += [
                line("stateqgp", instance=f"i{i:02d}", seed=s, valid=10 if (i + s) % 3 else 4),
                line("standard", instance=f"i{i:02d}", seed=s, valid=10 if i % 4 else 3),
            ]
    df = report.episodes_frame(eps)
    r = report.paired_deltas(eps, metrics=["success"], seed=5, n_resamples=499).iloc[0]
    m = instance_means(df, "stateqgp", "standard", "success").to_numpy()
    rng = stats.row_rng(5, "reposcan", "simulated-mid", 10, "stateqgp", "standard", "success")
    signs = stats.flip_signs(20, rng, n_mc=499)  # drawn once: the p and its inversion
    p, method = stats.sign_flip_p(m[None, :], rng=rng, signs=signs)
    lo, hi, _ = stats.interval(m[None, :], rng=rng, signs=signs)
    assert r["n_clusters"] == 20 and r["p_method"] == method == "Monte Carlo sign-flip (499 draws)"
    assert r["p_value"] == p[0] and 0 < p[0] < 1
    assert (r["ci_low"], r["ci_high"]) == (lo[0], hi[0])
    assert (r["ci_low"] <= 0 <= r["ci_high"]) is (r["p_value"] >= 0.05)


def test_cluster_means_enter_the_bootstrap_in_instance_order():
    # task ids sort the other way round from the instance names: the clusters are still taken
    # in instance order (the order a direct computation over sorted instances uses)
    eps = []
    for i, name in enumerate(["e", "d", "c", "b", "a"]):
        for s in (0, 1, 2):
            for ctrl, v in (("stateqgp", 10 if (i + s) % 2 else 3 + i), ("standard", 2 + s)):
                ep = line(ctrl, instance=name, seed=s, valid=v)
                ep["task_id"] = f"T{i}"
                eps.append(ep)
    df = report.episodes_frame(eps)
    r = report.paired_deltas(
        eps, metrics=["valid_count"], seed=1, n_resamples=999, method="percentile"
    ).iloc[0]
    m = instance_means(df, "stateqgp", "standard", "valid_count")
    assert list(m.index) == ["a", "b", "c", "d", "e"]
    ci = scipy.stats.bootstrap(
        (m.to_numpy(),),
        np.mean,
        method="percentile",
        n_resamples=999,
        rng=stats.row_rng(
            1, "reposcan", "simulated-mid", 10, "stateqgp", "standard", "valid_count"
        ),
    ).confidence_interval
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_empty_input_and_no_matches_give_the_columns_and_no_rows():
    assert list(report.paired_deltas([]).columns) == report.PAIRED_COLUMNS
    one_side = [line("standard", seed=s) for s in range(3)]
    d = report.paired_deltas(one_side, n_resamples=199)
    assert d.empty and list(d.columns) == report.PAIRED_COLUMNS
    apart = [line("standard", seed=0), line("stateqgp", seed=1)]
    d = report.paired_deltas(apart, n_resamples=199)
    assert d.empty and list(d.columns) == report.PAIRED_COLUMNS


def test_duplicate_error_lists_at_most_ten_keys_sorted():
    from pushbench.analysis.deltas import matched_means

    eps = [line("standard", seed=s) for s in range(12)]
    twins = [{**e, "key": f"{e['key']}|again"} for e in eps]
    df = report.episodes_frame(eps + twins)
    with pytest.raises(report.DuplicateEpisodesError) as err:
        matched_means(df, report.MATCH, ["success"])
    msg = str(err.value)
    assert msg.startswith(
        "12 match key(s) hold more than one episode; a paired delta needs one episode per key "
        "and side (were two runs or two differently parametrised agents mixed under one label?): "
    )
    for n, more in ((10, False), (11, True)):
        with pytest.raises(report.DuplicateEpisodesError) as err:
            matched_means(report.episodes_frame(eps[:n] + twins[:n]), report.MATCH, ["success"])
        assert str(err.value).endswith(" ...") is more
        assert more or str(err.value).endswith(f"<- {eps[9]['key']}, {eps[9]['key']}|again")
    assert msg.endswith(" ...") and msg.count(" <- ") == 10
    first = msg.split(": ", 1)[1].split("; ")[0]
    assert first == (
        "{'target': '10', 'task_id': 'RS-i1-N10', 'instance': 'i1', 'seed': '0'}"
        f" <- {eps[0]['key']}, {eps[0]['key']}|again"
    )
    # a frame without keys names the number of rows instead
    with pytest.raises(report.DuplicateEpisodesError, match=r"'seed': '3'\} <- 2 rows"):
        matched_means(df[df["seed"] == 3].drop(columns="key"), report.MATCH, ["success"])
    # listed in key order whatever the frame's row order
    with pytest.raises(report.DuplicateEpisodesError) as err:
        matched_means(df.iloc[::-1], report.MATCH, ["success"])
    assert str(err.value).split(": ", 1)[1].split("; ")[0] == first
    # a line without a seed is a match key too
    seedless = [{**line("standard", seed=0), "seed": None, "key": k} for k in ("k1", "k2")]
    with pytest.raises(report.DuplicateEpisodesError, match=r"'seed': '<NA>'\} <- k1, k2"):
        matched_means(report.episodes_frame(seedless), report.MATCH, ["success"])
    few = report.episodes_frame(eps[:2] + twins[:2])
    with pytest.raises(report.DuplicateEpisodesError) as err:
        matched_means(few, report.MATCH, ["success"])
    assert not str(err.value).endswith("...") and str(err.value).count(" <- ") == 2
    ok = matched_means(report.episodes_frame(eps), report.MATCH, ["success", "valid_count"])
    assert list(ok.columns) == ["success", "valid_count"] and ok["success"].dtype == float
    assert list(ok.index.names) == list(report.MATCH) and ok.index.is_monotonic_increasing


def test_printed_summary_headers_follow_each_tables_seed_count():
    eps = rich_run()  # 3 seeds: pass^3
    eps += [
        rich_line(c, f"i{i}", s, policy="gpt-x", simulated=False)
        for c in ("standard", "stateqgp")
        for i in range(3)
        for s in (0, 1)
    ]  # pass^2
    eps += [
        {
            **rich_line("standard", "i0", s, policy="gpt-y", simulated=False),
            "terminated_by": "error",
        }
        for s in (0, 1)
    ]  # no scored episode at all
    s = report.summary_table(eps, steps_reference=False)
    text = printed(report.print_summary, s)
    heads = [x for x in text.splitlines() if x.startswith("controller ")]
    assert [h.split()[4] for h in heads] == ["pass^2", "pass^K", "pass^3"]
    # no padding: one space between columns, the names from the first column
    assert heads[0] == "controller  N n succ pass^2 valid dup pdup prec claim stop be over"
    gy = text.split("reposcan | gpt-y\n")[1].splitlines()[2]
    assert gy.split() == ["standard", "10", "0", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"]
    gx = text.split("reposcan | gpt-x\n")[1].splitlines()
    assert gx[0].startswith("controller ") and gx[2].startswith("standard ")
    row = s[(s["policy"] == "gpt-x") & (s["controller"] == "standard")].iloc[0]
    assert gx[2].split()[4] == pct0(row["pass^2"])


# ----- the defaults the signatures promise --------------------------------------------------------
def test_defaults_are_seed_0_9999_resamples_95_percent_sign_flip(tmp_path):
    from pushbench.analysis.deltas import delta_stats, delta_table

    eps = suite(targets=(10,), seeds=range(12), n_instances=6)
    df = report.episodes_frame(eps)
    assert not report.paired_deltas(df, metrics=["success"], n_resamples=199)["degenerate"].any()
    explicit = dict(seed=0, n_resamples=9999, confidence=0.95, method="sign-flip")
    pairs = lambda names: [("stateqgp", "standard")]  # noqa: E731
    # 17 instances: the test and its inversion are Monte Carlo, so the generator's seed and the
    # number of draws show in the bounds
    df9 = report.episodes_frame(suite(targets=(10,), seeds=range(34), n_instances=17))
    kw = dict(side="controller", strata=["family"], pairs=pairs, metrics=["success", "valid_count"])
    got = delta_table(df9, **kw)
    pd.testing.assert_frame_equal(
        got, delta_table(df9, a_col="a", b_col="b", **kw, **explicit), check_exact=True
    )
    cols = ["ci_low", "ci_high", "p_value"]
    for change in ({"seed": 1}, {"n_resamples": 10000}):  # the comparison can tell them
        other = delta_table(df9, **kw, **{**explicit, **change})
        assert (got[cols].to_numpy() != other[cols].to_numpy()).any(), change
    both = ["success", "valid_count"]
    got = report.paired_deltas(df9, metrics=both)
    pd.testing.assert_frame_equal(
        got, report.paired_deltas(df9, metrics=both, **explicit), check_exact=True
    )
    for change in ({"seed": 1}, {"n_resamples": 10000}):
        other = report.paired_deltas(df9, metrics=both, **{**explicit, **change})
        assert (got[cols].to_numpy() != other[cols].to_numpy()).any(), change
    pd.testing.assert_frame_equal(
        report.paired_deltas(df, metrics=["success"]),
        report.paired_deltas(df, metrics=["success"], **explicit),
    )
    assert list(report.paired_deltas(df)["metric"].unique()) == [
        "success",
        "valid_count",
        "duplicate_submit_rate",
        "valid_per_step",
    ]
    va, vb = np.array([1.0, 0.0, 1.0, 1.0, 3.0, 0.0]), np.array([0.0, 0.0, 1.0, 0.0, 1.0, 2.0])
    cl = np.array(["a", "b", "c", "d", "e", "f"])
    kw = dict(metric="valid_count", n_resamples=999, confidence=0.9)
    assert delta_stats(va, vb, cl, rng=np.random.default_rng(1), **kw) == delta_stats(
        va, vb, cl, rng=np.random.default_rng(1), method="sign-flip", **kw
    )
    for name, kwargs in (("d", {}), ("e", dict(seed=0, n_resamples=9999, ci_method="sign-flip"))):
        report.write_report(eps, tmp_path / name, steps_reference=False, **kwargs)
    for f in ("summary.csv", "paired_deltas.csv", "report.md"):
        assert (tmp_path / "d" / f).read_bytes() == (tmp_path / "e" / f).read_bytes(), f


def test_delta_table_rows_come_in_sorted_strata_order_whatever_the_line_order():
    from pushbench.analysis.deltas import delta_table

    eps = suite(targets=(10,), policy="alpha") + suite(targets=(10,), policy="zeta")
    df = report.episodes_frame(eps)
    df = df.iloc[::-1]  # a frame in any row order
    out = delta_table(
        df,
        side="controller",
        strata=["policy"],
        pairs=lambda names: [("stateqgp", "standard")],
        metrics=["success"],
        n_resamples=99,
    )
    assert out["policy"].tolist() == ["alpha", "zeta"]


def test_context_deltas_split_family_versions_only_when_mixed():
    from pushbench.analysis.context_deltas import context_deltas

    eps = context_run()
    want = context_deltas(eps, seed=5, n_resamples=99)
    versioned = [{**e, "family_version": 1} for e in eps]
    pd.testing.assert_frame_equal(context_deltas(versioned, seed=5, n_resamples=99), want)
    later = [{**e, "family_version": 2, "key": e["key"] + "|v2"} for e in eps]
    both = context_deltas(versioned + later, seed=5, n_resamples=99)
    assert list(both.columns[:2]) == ["family", "family_version"]
    assert len(both) == 2 * len(want)
    for v in (1, 2):
        rows = both[both["family_version"] == v]
        assert (rows["n_pairs"].to_numpy() == want["n_pairs"].to_numpy()).all()
        assert np.allclose(rows["delta"].to_numpy(), want["delta"].to_numpy())


def test_version_note_names_each_mixed_family_in_sorted_order():
    from pushbench.analysis.frame import VERSION, mixed_versions, version_note

    df = pd.DataFrame(
        {
            "family": ["reposcan", "reposcan", "dataops", "dataops", "dataops", "swelite"],
            VERSION: [1, 2, 2, 1, 1, 2],
        }
    )
    assert list(mixed_versions(df).items()) == [("dataops", [1, 2]), ("reposcan", [1, 2])]
    assert version_note(df) == (
        "This run folder holds more than one family version (dataops v1: 2 episodes, v2: 1 "
        "episodes; reposcan v1: 1 episodes, v2: 1 episodes): every summary and delta row is one "
        "version, never pooled."
    )
    assert version_note(df[df["family"] == "swelite"]) is None
    assert mixed_versions(df.iloc[:0]) == {}
    assert mixed_versions(pd.DataFrame({"family": ["reposcan"]})) == {}  # lines before versions
