"""The paired-delta statistics: interval, sign-flip test, Holm, and their calibration."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from pushbench.analysis import calibration, stats


def brute_force_p(m: list[float]) -> float:
    obs = abs(np.mean(m))
    hits = [
        abs(np.mean(np.array(s) * m)) >= obs - 1e-12
        for s in itertools.product((1.0, -1.0), repeat=len(m))
    ]
    return float(np.mean(hits))


# Small targeted tests first (defaults, tie tolerances at and beside their boundary, batch
# shapes): cheap, and under `pytest -x` a mutant they catch fails within seconds.


def test_defaults_of_the_helpers_are_the_documented_ones():
    assert stats.min_clusters() == stats.min_clusters(0.95) == 6
    signs = stats.flip_signs(17, np.random.default_rng(0))
    assert signs.shape == (9999, 17) and set(np.unique(signs)) == {-1.0, 1.0}
    assert signs.flags.writeable and not stats.flip_signs(16, None).flags.writeable


def test_counts_use_each_rows_own_tolerance_and_any_leading_shape():
    # tie tolerance 1e-9 x max(1, largest |mean| of the row), per row; a mean exactly at the
    # tolerance is a tie (as in degenerate(), whose span <= tolerance is all-equal)
    m = np.array(
        [
            [1.5e-9, -1.5e-9, 5e-10, 0.5, 0.0, 0.0],  # |max| <= 1: tolerance 1e-9
            [1e-9, -1e-9, 0.0, 0.5, 0.0, 0.0],  # exactly at it: ties
            [1e6, 1e-5, -1e-5, 0.0, 0.0, 0.0],  # tolerance 1e-3
            [1e-5, -1e-5, 0.0, 0.0, 0.0, 0.0],
        ]
    )  # beside it: tolerance 1e-9
    up, down = stats.n_up_down(m)
    assert up.tolist() == [2, 1, 1, 1] and down.tolist() == [1, 0, 0, 1]
    batch = np.stack([m, m[::-1], -m])  # shape (3, 4, 6)
    up3, down3 = stats.n_up_down(batch)
    assert up3.shape == down3.shape == (3, 4)
    assert up3.tolist() == [up.tolist(), up[::-1].tolist(), down.tolist()]
    assert down3.tolist() == [down.tolist(), down[::-1].tolist(), up.tolist()]


def test_clip_tolerance_is_relative_to_the_limit_and_inclusive():
    tol = 1e-9
    # limits +-1: rounding within 1e-9 (inclusive) is not a cut, 1.5e-9 beyond is
    lo, hi, cl, ch = stats.clip(
        [-1 - tol * 1.0, -1 - 1.5e-9], [1 + tol * 1.0, 1 + 1.5e-9], (-1.0, 1.0)
    )
    assert lo.tolist() == [-1.0, -1.0] and hi.tolist() == [1.0, 1.0]
    assert cl.tolist() == [False, True] and ch.tolist() == [False, True]
    # limits +-100 (points): the tolerance is 1e-7, so 1e-8 beyond is rounding only
    lo, hi, cl, ch = stats.clip(
        [-100 - 1e-8, -100 - 1e-6], [100 + 1e-8, 100 + 1e-6], (-100.0, 100.0)
    )
    assert cl.tolist() == [False, True] and ch.tolist() == [False, True]
    # a missing bound (None, as an object column holds it) is NaN and not cut
    lo, hi, cl, ch = stats.clip([None, -2.0], [None, 2.0], (-1, 1))
    assert math.isnan(lo[0]) and math.isnan(hi[0]) and lo[1] == -1.0 and hi[1] == 1.0
    assert cl.tolist() == [False, True] and ch.tolist() == [False, True]


@pytest.mark.parametrize(
    "m, want",
    [
        ([-1e-9, 1, 1, 1, 1, 1], (0.0, 1.0)),  # a bound exactly at the tolerance is 0
        ([1e-9, -1, -1, -1, -1, -1], (-1.0, 0.0)),
        ([-1.5e-9, 1, 1, 1, 1, 1], (-1.5e-9, 1.0)),  # beyond it: kept
        ([-5e-8, 1e3, 1e3, 1e3, 1e3, 1e3], (0.0, 1e3)),  # tolerance 1e-9 x 1e3 = 1e-6
        ([5e-8, -1e3, -1e3, -1e3, -1e3, -1e3], (-1e3, 0.0)),
    ],
)
def test_inversion_snaps_bounds_within_the_rows_tie_tolerance_to_zero(m, want):
    # six instances: the interval is [min, max] before snapping (module docstring)
    lo, hi = stats.sign_flip_interval(np.array([m], dtype=float), signs=stats.flip_signs(6, None))
    assert (lo[0], hi[0]) == want


def test_sign_flip_counts_a_flipped_mean_exactly_at_the_tolerance():
    # [a, 1e-9]: the flipped mean (a - 1e-9) / 2 lies 1e-9 below the observed (a + 1e-9) / 2;
    # for this a (found by search) the two sides are equal in floating point, and the
    # tolerance is inclusive: both flips count as ties, p = 4/4 (not 2/4)
    m = np.array([[0.13277881914895576, 1e-9]])
    obs = abs(m.mean())
    assert abs(m[0, 0] - m[0, 1]) / 2 == obs - 1e-9 * max(1.0, obs)
    p, _ = stats.sign_flip_p(m, rng=np.random.default_rng(0))
    assert p[0] == 1.0


def test_sign_flip_is_exact_enumeration_up_to_16_clusters():
    rng = np.random.default_rng(0)
    for m in (
        [0.5, 1.0, -0.25],
        [1 / 3] * 9,
        [0, 0, 1, 2 / 3, -1 / 3, 1, 1, 0, 1 / 3],
        list(rng.normal(size=7)),
    ):
        p, method = stats.sign_flip_p(np.array(m)[None, :], rng=rng)
        assert p[0] == pytest.approx(brute_force_p(m))
        assert method == f"exact sign-flip ({2 ** len(m)} assignments)"
    p, _ = stats.sign_flip_p(np.full((1, 9), 1 / 3), rng=rng)
    assert p[0] == pytest.approx(2 / 512)  # RepoScan: 9 instances, all the same sign
    p, _ = stats.sign_flip_p(np.zeros((1, 4)), rng=rng)
    assert p[0] == 1.0


def test_sign_flip_monte_carlo_above_16_clusters_is_seeded():
    m = np.r_[np.full(12, 0.5), np.full(8, -0.1)][None, :]
    p1, method = stats.sign_flip_p(m, rng=np.random.default_rng(1), n_mc=4999)
    p2, _ = stats.sign_flip_p(m, rng=np.random.default_rng(1), n_mc=4999)
    p3, _ = stats.sign_flip_p(m, rng=np.random.default_rng(2), n_mc=4999)
    assert method == "Monte Carlo sign-flip (4999 draws)"
    assert p1[0] == p2[0] and p1[0] != p3[0]
    exact, _ = stats.sign_flip_p(m, rng=np.random.default_rng(1), max_exact=20)
    assert abs(p1[0] - exact[0]) < 0.01 and p1[0] >= 1 / 5000


def test_holm_by_hand():
    p = [0.01, 0.04, math.nan, 0.03, 0.5]
    # sorted: 0.01*4=0.04, 0.03*3=0.09, 0.04*2=0.08 -> running max 0.09, 0.5*1=0.5
    assert stats.holm(p)[[0, 1, 3, 4]] == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert math.isnan(stats.holm(p)[2])
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    # a missing p-value from an object column (None) is NaN too: not counted, stays missing
    adj = stats.holm(np.array([0.01, None, 0.04], dtype=object))
    assert adj[[0, 2]] == pytest.approx([0.02, 0.04]) and math.isnan(adj[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30))
def test_holm_properties(ps):
    adj = stats.holm(ps)
    p = np.array(ps)
    assert (adj >= p - 1e-15).all() and (adj <= 1.0).all()
    order = np.argsort(p, kind="mergesort")
    assert (np.diff(adj[order]) >= -1e-15).all()  # monotone in the raw p-values


cluster_means = st.lists(
    st.sampled_from([-1, -2 / 3, -1 / 3, 0, 1 / 3, 2 / 3, 1]), min_size=1, max_size=12
)


@settings(max_examples=60, deadline=None)
@given(cluster_means, st.sampled_from(stats.METHODS))
def test_interval_is_ordered_bounded_or_degenerate(m, method):
    x = np.array(m, dtype=float)[None, :]
    lo, hi, used = stats.interval(
        x, rng=np.random.default_rng(0), method=method, n_resamples=199, bounds=(-1.0, 1.0)
    )
    if method == "sign-flip" and x.size < 6:
        assert math.isnan(lo[0]) and math.isnan(hi[0]) and used[0] == "n/a (k<6)"
    elif method == "sign-flip":  # within the instances' range, [c, c] when all equal c
        assert x.min() <= lo[0] <= x.mean() <= hi[0] <= x.max()
        assert used[0] == "sign-flip test inversion"
    elif stats.degenerate(x)[0]:
        assert math.isnan(lo[0]) and math.isnan(hi[0]) and used[0] == "none (degenerate)"
    else:
        assert -1.0 <= lo[0] <= hi[0] <= 1.0
    p, _ = stats.sign_flip_p(x, rng=np.random.default_rng(0))
    q, _ = stats.sign_flip_p(-x, rng=np.random.default_rng(0))
    assert 0 < p[0] <= 1 and p[0] == pytest.approx(q[0])  # the test is two-sided


@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_bca_rows_scipy_leaves_undefined_get_scipys_percentile_interval(confidence):
    # With few resamples scipy's BCa is undefined for a row whose resample means all lie on one
    # side of the estimate (z0 = ndtri(0) = -inf): it returns NaN for both bounds. Those rows,
    # and only those, get the percentile interval from the same generator, continued.
    x = np.array([[5, 5, 5, 1], [0, 1 / 3, 1, 1], [0, 0, 1, 1], [1, 0, 0, 0], [0.2, 0.5, 0.1, 0.9]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's warnings stay inside: the method says it
        lo, hi, used = stats.interval(
            x, rng=np.random.default_rng(1), method="bca", n_resamples=4, confidence=confidence
        )
    ref_rng = np.random.default_rng(1)
    kw = dict(axis=-1, vectorized=True, n_resamples=4, confidence_level=confidence, rng=ref_rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's DegenerateDataWarning
        bca = scipy.stats.bootstrap((x,), np.mean, method="BCa", **kw).confidence_interval
    bad = np.isnan(bca.low) | np.isnan(bca.high)
    assert bad.tolist() == [False, False, False, False, True]  # the case under test exists
    pct = scipy.stats.bootstrap((x[bad],), np.mean, method="percentile", **kw).confidence_interval
    assert lo[~bad] == pytest.approx(bca.low[~bad], rel=1e-12)
    assert hi[~bad] == pytest.approx(bca.high[~bad], rel=1e-12)
    assert lo[bad] == pytest.approx(pct.low, rel=1e-12)
    assert hi[bad] == pytest.approx(pct.high, rel=1e-12)
    assert lo[4] < hi[4]
    assert used.tolist() == ["BCa cluster bootstrap"] * 4 + [
        "percentile cluster bootstrap (BCa undefined)"
    ]


def test_studentized_interval_is_not_clamped_to_the_estimate():
    # the interval of a skewed sample is asymmetric around the estimate and comes from the
    # bootstrap-t quantiles, not from the estimate
    x = np.array([[0, 0, 0, 0, 0, 1 / 3, 1 / 3, 1, 1]], dtype=float)
    lo, hi, used = stats.interval(
        x, rng=np.random.default_rng(3), n_resamples=4999, method="studentized"
    )
    est = x.mean()
    assert lo[0] < est < hi[0] and used[0].startswith("studentized")
    assert not math.isclose(est - lo[0], hi[0] - est, rel_tol=0.05)


def test_batch_rows_match_single_rows():
    rng = np.random.default_rng(5)
    x = calibration.simulate(calibration.Scenario(), 3, rng)
    lo, hi, _ = stats.interval(x, rng=np.random.default_rng(9), method="t")
    for i in range(3):
        l1, h1, _ = stats.interval(x[i : i + 1], rng=np.random.default_rng(9), method="t")
        assert (l1[0], h1[0]) == pytest.approx((lo[i], hi[i]))


def test_true_delta_quadrature_matches_simulation():
    sc = calibration.Scenario()
    truth = calibration.true_delta(sc)
    sim = calibration.simulate(sc, 20000, np.random.default_rng(0)).mean()
    assert abs(sim - truth) < 0.01 and 0.1 < truth < 0.3


def test_sparse_design_ties_most_instances_and_has_the_stated_truth():
    sc = calibration.Sparse(
        "t", 9, 3, p_affected=0.3, p_gain=0.8, p_loss=0.1, random_instances=True
    )
    x = calibration.simulate_any(sc, 20000, np.random.default_rng(0))
    assert x.shape == (20000, 9)
    assert calibration.truth_of(sc) == pytest.approx(0.21)
    assert abs(x.mean() - calibration.truth_of(sc)) < 0.01
    assert 0.68 < (x == 0).mean() < 0.76  # 70% of instances never respond (+ ties)
    # fixed instances: exactly round(0.3 x 9) = 3 respond, the same three every time
    fixed = replace(sc, random_instances=False)
    y = calibration.simulate_any(fixed, 20000, np.random.default_rng(0))
    assert fixed.n_affected == 3 and calibration.truth_of(fixed) == pytest.approx(0.7 / 3)
    assert (y[:, 3:] == 0).all() and (y[:, :3] != 0).mean() > 0.9
    assert abs(y.mean() - calibration.truth_of(fixed)) < 0.01
    noisy = calibration.simulate_any(
        replace(sc, p_affected=0.0, p_noise=0.5), 20000, np.random.default_rng(0)
    )
    assert abs(noisy.mean()) < 0.01 and (noisy != 0).mean() > 0.5  # symmetric noise only
    assert calibration.truth_of(calibration.Scenario()) == calibration.true_delta(
        calibration.Scenario()
    )


# The test set (experiments/calibrate_intervals.py has these and more, 4,000 replications
# each): the three sparse designs of the real rows with the benchmark's instances fixed, the
# 9 x 12 one with instances drawn from a population, and docs/metrics.md's logistic design.
# With 600 replications the Monte-Carlo s.e. of a coverage near 0.95 is 0.009, and the seeds are
# fixed: the runs are deterministic. The measured coverages (docs/metrics.md, 2,000 reps) are
# 0.93-1.00; the asserted 0.90 is 2.5 s.e. below the lowest. Not in the set, each below 0.90
# for the default in docs/metrics.md's table (2,000 replications):
# - drawn sparse 6 x 4 (0.83; every method 0.80-0.83): 0.75^6 = 18% of its samples are six
#   exact ties, whose interval is [0, 0] for every method; the ceiling 1 - P(all tie) = 0.82 is
#   the whole miss (the next test checks it: the default covers 95%+ of the other samples);
# - drawn sparse 9 x 3 (0.87): ties cap it at 0.96 only; the rest is the inversion's
#   assumption of differences symmetric about their mean, which one-sided gains of about 3 of 9
#   instances break (t 0.94, studentized 0.95; docs/metrics.md says so);
# - the logistic success-ceiling design (0.89, t 0.90): 3% of samples tie, and coverage among
#   the others is 0.93 (measured with this test's seed, 2,000 replications).
Sp = calibration.Sparse
COVERAGE_DESIGNS = [
    Sp("fixed sparse 9 x 3", 9, 3, p_affected=1 / 3, p_gain=0.8),
    Sp("fixed sparse 9 x 12, noise", 9, 12, p_affected=1 / 3, p_gain=0.6, p_loss=0.05, p_noise=0.1),
    Sp("fixed sparse 6 x 4", 6, 4, p_affected=1 / 3, p_gain=0.8),
    Sp(
        "drawn sparse 9 x 12, noise",
        9,
        12,
        p_affected=0.3,
        p_gain=0.6,
        p_loss=0.05,
        p_noise=0.1,
        random_instances=True,
    ),
    calibration.Scenario(),
]
NULL_DESIGNS = [
    calibration.Scenario(name="null", b1=0.0, sd_effect=0.0),
    Sp("fixed null sparse", 9, 3, p_affected=1 / 3, p_gain=0.4, p_loss=0.4),
    Sp("drawn null sparse", 9, 3, p_affected=0.3, p_gain=0.4, p_loss=0.4, random_instances=True),
]


@pytest.mark.parametrize("design", COVERAGE_DESIGNS + NULL_DESIGNS, ids=lambda d: d.name)
def test_default_interval_covers_and_the_test_keeps_its_level(design):
    reps = 600
    res = calibration.calibrate(design, stats.DEFAULT_METHOD, reps=reps, seed=20240611)
    print(
        f"\n{design.name}: coverage {res.coverage:.3f}, median width "
        f"{res.median_width:.3f}, rejects {res.reject_rate:.3f}"
    )
    assert res.coverage >= 0.90
    assert res.no_interval == 0.0
    if res.truth == 0:
        # the exact test's level: at most 0.05 by construction (conservative with ties); the
        # interval excludes 0 exactly when the test rejects, so 1 - coverage is the same rate
        assert res.reject_rate <= 0.05
        assert res.reject_rate == pytest.approx(1 - res.coverage)


def test_calibration_sees_what_no_interval_can_cover():
    # drawn sparse 6 x 4, a quarter of the instances respond: in 0.75^6 = 18% of the samples
    # no instance responds, every difference is exactly 0, and the interval is [0, 0] while the
    # truth is 0.2: coverage is at most 82%, for any method that reports six ties as "no effect"
    sc = Sp("drawn sparse 6 x 4", 6, 4, p_affected=0.25, p_gain=0.8, random_instances=True)
    reps, seed = 600, 20240611
    res = calibration.calibrate(sc, stats.DEFAULT_METHOD, reps=reps, seed=seed)
    means = calibration.simulate_any(sc, reps, np.random.default_rng(seed))
    tied = (means == 0).all(-1)
    assert abs(tied.mean() - 0.75**6) < 3 * calibration.monte_carlo_se(0.75**6, reps)
    assert res.coverage <= 1 - tied.mean() < 0.90
    # no interval built from the instance differences covers a sample of ties: every method
    # gives [0, 0] there (the bootstrap ones no bounds, which the calibration counts as 0)
    for method in stats.METHODS:
        lo, hi, _ = stats.interval(
            means[tied], rng=np.random.default_rng(0), method=method, n_resamples=99
        )
        assert (np.nan_to_num(lo) == 0).all() and (np.nan_to_num(hi) == 0).all(), method
    # ... and the ties are the whole miss: among the other samples the default holds its 95%
    # (measured 0.999 with 2,000 replications), so its coverage is the ceiling 1 - P(all tie)
    lo, hi, _ = stats.interval(means, rng=np.random.default_rng(0), bounds=(-1.0, 1.0))
    hit = (lo <= res.truth + 1e-12) & (res.truth - 1e-12 <= hi)
    assert hit.mean() == res.coverage and not hit[tied].any()
    assert hit[~tied].mean() >= 0.95
    assert res.coverage == pytest.approx((1 - tied.mean()) * hit[~tied].mean())


# ----- the studentized interval against a plain-Python reference ---------------------------
# One row at a time, in loops, from the module docstring's definition: resample k clusters
# with the generator's own draws (one `integers` call of shape (1, B, k) for a one-row input),
# t* = (mean* - mean) / se*; a resample with no spread (se* within 1e-9 x max(1, |mean|) of
# zero) gets t* = 0 or +-inf by the sign of mean* - mean; linear-interpolation quantiles of the
# sorted t*,
# where two equal neighbours (also two infinities) give that value. A batch of rows draws
# (rows, B, k) at once, which is the same stream as one row after another.


def _quantile(ts: list[float], q: float) -> float:
    pos = q * (len(ts) - 1)
    i = math.floor(pos)
    if pos == i or i + 1 >= len(ts):
        return ts[i]
    if ts[i] == ts[i + 1]:
        return ts[i]
    return ts[i] + (pos - i) * (ts[i + 1] - ts[i])


def reference_bootstrap_t(x, rng, n_resamples, confidence=0.95, bounds=None):
    k = len(x)
    est = sum(x) / k

    def sd(v):
        mu = sum(v) / len(v)
        return math.sqrt(sum((a - mu) ** 2 for a in v) / (len(v) - 1))

    se = sd(x) / math.sqrt(k)
    idx = rng.integers(0, k, size=(1, n_resamples, k))[0]
    draws = [[x[j] for j in row] for row in idx.tolist()]
    tol = 1e-9 * max(1.0, abs(est))
    ses = [sd(r) / math.sqrt(k) for r in draws]
    ts = []
    for r, s in zip(draws, ses, strict=True):
        diff = sum(r) / k - est
        if s > tol:
            ts.append(diff / s)
        else:
            ts.append(0.0 if abs(diff) <= tol else math.copysign(math.inf, diff))
    ts.sort()
    alpha = 1 - confidence
    lo = est - _quantile(ts, 1 - alpha / 2) * se
    hi = est - _quantile(ts, alpha / 2) * se
    lo = -math.inf if math.isnan(lo) else lo  # between -inf and +inf: unbounded
    hi = math.inf if math.isnan(hi) else hi
    clipped = False
    if bounds is not None:
        clipped = lo < bounds[0] or hi > bounds[1]
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return lo, hi, clipped


# Nine distinct cluster means: a resample of 9 from 9 has zero spread only when all nine draws
# hit one cluster (probability 9 / 9^9), so the +-inf rule never acts on it.
SKEWED = np.array([-0.4, -0.1, 0.0, 0.05, 0.1, 0.2, 0.35, 0.8, 1.0])

STUDENTIZED_CASES = [
    # (cluster means, n_resamples, confidence, bounds, seed)
    ([0, 0, 0, 0, 0, 1 / 3, 1 / 3, 1, 1], 999, 0.95, None, 11),  # skewed, RepoScan-sized
    ([0, 0, 0, 0, 0, 0, 0, 2 / 3, 0], 199, 0.95, (-1.0, 1.0), 11),  # mostly all-zero resamples
    ([1, 1, 1, 1, 1, 1, 2 / 3, 1, 1], 199, 0.9, (-1.0, 1.0), 11),  # at the ceiling: clipped
    ([-1, 1 / 3, 2 / 3, 0, 1], 500, 0.8, (-1.0, 1.0), 11),  # even B - 1: interpolation
    ([0.25, -0.5, 0.75], 4, 0.95, None, 11),  # +-inf neighbours: inf high
    ([0.25, -0.5, 0.75], 4, 0.95, (-2.0, 2.0), 11),  # ... clipped to the bound
    ([-0.25, 0.5, -0.75], 3, 0.95, (-2.0, 2.0), 0),  # -inf low, clipped
    ([0.0, 1.0], 5, 0.95, None, 45),  # no resample has spread
    ([3.0, 3.0, 3.0, 4.0], 300, 0.95, None, 11),  # |mean| > 1
    ([3.0, 3.0, 3.0, 3.0 + 4e-9], 199, 0.95, None, 11),  # tolerance relative to |mean|
    ([0.0] * 8 + [1.35e-8], 199, 0.95, None, 11),  # spread near the tolerance
    ([0] * 7 + [1, -1], 199, 0.05, None, 11),  # quantiles inside the t*=0 block
    ([2.0, -1.0], 50, 0.99, (-1.0, 2.0), 11),  # a bound reached exactly
    ([5.0, 6.0, 7.5], 99, 0.95, (-1.0, 1.0), 11),  # above the range: [1, 1]
    ([-5.0, -6.0, -7.5], 99, 0.95, (-1.0, 1.0), 11),  # below the range: [-1, -1]
    ([0.0, 0.5, 1.0], 41, 0.95, None, 3),  # integral quantile position, +inf next to it
    (list(SKEWED), 999, 0.8, None, 5),  # nine distinct means
    (list(SKEWED), 999, 0.95, (-5.0, 5.0), 5),  # bounds that do not bite
    (list(SKEWED), 401, 0.95, None, 8),  # quantiles on a resample
    (list(SKEWED), 1000, 0.95, None, 8),  # ... and between two
]


@pytest.mark.parametrize("case", range(len(STUDENTIZED_CASES)))
def test_studentized_interval_equals_the_reference(case):
    m, b, conf, bounds, seed = STUDENTIZED_CASES[case]
    want_lo, want_hi, clipped = reference_bootstrap_t(
        m, np.random.default_rng(seed), b, conf, bounds
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf - inf stays inside, as NaN
        lo, hi, used = stats.interval(
            np.array([m]),
            rng=np.random.default_rng(seed),
            method="studentized",
            n_resamples=b,
            confidence=conf,
            bounds=bounds,
        )
    for got, want in ((lo[0], want_lo), (hi[0], want_hi)):
        if math.isinf(want):
            assert got == want, (got, want)
        else:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert used[0] == "studentized cluster bootstrap" + (" (clipped)" if clipped else "")


def test_studentized_batch_equals_the_reference_row_after_row():
    # degenerate rows are skipped (no draws); the others share one generator in row order;
    # 250 rows of 9 clusters x 1,999 resamples span several memory-bounded chunks
    rng = np.random.default_rng(4)
    x = rng.choice(
        [-1, -2 / 3, -1 / 3, 0, 1 / 3, 2 / 3, 1],
        size=(250, 9),
        p=[0.05, 0.05, 0.1, 0.4, 0.2, 0.1, 0.1],
    )
    x[3] = 1 / 3  # a degenerate row in the middle
    lo, hi, used = stats.interval(
        x, rng=np.random.default_rng(8), n_resamples=1999, bounds=(-1.0, 1.0), method="studentized"
    )
    assert math.isnan(lo[3]) and math.isnan(hi[3]) and used[3] == "none (degenerate)"
    ref_rng = np.random.default_rng(8)
    for i in range(len(x)):
        if i == 3:
            continue
        want_lo, want_hi, _ = reference_bootstrap_t(list(x[i]), ref_rng, 1999, bounds=(-1.0, 1.0))
        assert (lo[i], hi[i]) == pytest.approx((want_lo, want_hi), rel=1e-9, abs=1e-12), i


def test_t_interval_is_scipys_student_t_interval():
    x = np.array([[0.0, 1 / 3, 1.0, 2 / 3, 0.0], [0.5, -0.25, 0.75, 0.0, 1.0]])
    for conf in (0.8, 0.95):
        lo, hi, used = stats.interval(x, rng=np.random.default_rng(0), method="t", confidence=conf)
        for i, row in enumerate(x):
            want = scipy.stats.t.interval(
                conf, len(row) - 1, loc=row.mean(), scale=scipy.stats.sem(row)
            )
            assert (lo[i], hi[i]) == pytest.approx(want, rel=1e-12)
        assert used.tolist() == ["t interval over clusters"] * 2


def test_degenerate_uses_a_tolerance_relative_to_the_largest_mean():
    rows = np.array(
        [
            [0.0, 0.0],
            [0.0, 1.5e-9],
            [0.0, 0.5e-9],
            [1e3, 1e3 + 1e-7],
            [1e3, 1e3 + 1e-5],
            [0.0, 1e-9],
        ]
    )
    # the last row's spread equals the tolerance (1e-9 x 1) exactly: still degenerate
    assert stats.degenerate(rows).tolist() == [True, False, True, True, False, True]
    # any leading shape; booleans and integers count as 0/1 values
    assert stats.degenerate(rows.reshape(6, 1, 2)).tolist() == [[d] for d in stats.degenerate(rows)]
    assert stats.degenerate(np.array([[True, False], [True, True]])).tolist() == [False, True]
    assert stats.degenerate(np.array([[[2, 2], [2, 3]]])).tolist() == [[True, False]]
    # rows of very different size keep their own tolerance
    assert stats.degenerate(np.array([[0.0, 1e-3], [1e12, 1e12]])).tolist() == [False, True]


@pytest.mark.parametrize("method", stats.METHODS)
def test_interval_accepts_any_leading_shape(method):
    x = np.array(
        [
            [[0, 1 / 3, 1, 0, 2 / 3], [1, 1, 1, 1, 1]],
            [[0.5, -0.5, 0, 1, 0.25], [1e12, 1e12 + 1e6, 1e12, 1e12, 1e12 - 1e6]],
        ]
    )
    kw = dict(method=method, n_resamples=99, confidence=0.9)
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(2), **kw)
    assert lo.shape == hi.shape == used.shape == (2, 2)
    flo, fhi, fused = stats.interval(x.reshape(4, 5), rng=np.random.default_rng(2), **kw)
    np.testing.assert_array_equal(lo.reshape(4), flo)
    np.testing.assert_array_equal(hi.reshape(4), fhi)
    assert used.reshape(4).tolist() == fused.tolist()
    if method == "sign-flip":  # 5 instances suffice at 90% (2/32 < 0.10); [c, c] if all c
        assert set(used.reshape(4)) == {"sign-flip test inversion"} and lo[0, 1] == hi[0, 1] == 1
    else:
        assert used[0, 1] == "none (degenerate)" and used[1, 1] != "none (degenerate)"
    # one row as a 1-D array gives 0-d results; an empty batch gives empty results
    one = stats.interval(x[0, 0], rng=np.random.default_rng(2), **kw)
    assert [a.shape for a in one] == [()] * 3
    assert (float(one[0]), float(one[1])) == (flo[0], fhi[0])
    for empty in (np.empty((0, 5)), np.empty((2, 0, 5))):
        out = stats.interval(empty, rng=np.random.default_rng(2), **kw)
        assert [a.shape for a in out] == [empty.shape[:-1]] * 3


def test_interval_converts_numbers_held_in_object_arrays():
    x = np.array([[0.0, 1 / 3, 1.0, 2 / 3, 0.0]])
    for method in ("studentized", "t"):
        want = stats.interval(x, rng=np.random.default_rng(1), method=method, n_resamples=99)
        got = stats.interval(
            x.astype(object), rng=np.random.default_rng(1), method=method, n_resamples=99
        )
        assert got[0] == pytest.approx(want[0]) and got[1] == pytest.approx(want[1])


def test_interval_and_test_defaults_are_the_documented_ones():
    x = np.random.default_rng(0).normal(size=(1, 9))
    default = stats.interval(x, rng=np.random.default_rng(1))
    explicit = stats.interval(
        x, rng=np.random.default_rng(1), method="sign-flip", n_resamples=9999, confidence=0.95
    )
    assert (default[0][0], default[1][0]) == (explicit[0][0], explicit[1][0])
    assert default[2][0] == "sign-flip test inversion"
    # 95%: the 26th of 512 ordered subset means from either end (not the 90% 52nd)
    lo, hi = brute_force_interval(x[0], 0.95)
    assert (default[0][0], default[1][0]) == pytest.approx((lo, hi), abs=1e-12)
    # Monte Carlo above 16 instances with n_mc = n_resamples = 9999 draws by default
    y = np.random.default_rng(2).normal(size=(1, 17))
    d = stats.interval(y, rng=np.random.default_rng(1))
    e = stats.interval(y, rng=np.random.default_rng(1), n_resamples=9999)
    f = stats.interval(y, rng=np.random.default_rng(1), n_resamples=5000)
    assert (d[0][0], d[1][0]) == (e[0][0], e[1][0]) != (f[0][0], f[1][0])
    m = np.tile(x, 2)  # 18 clusters: Monte Carlo
    p, method = stats.sign_flip_p(m, rng=np.random.default_rng(1))
    q, _ = stats.sign_flip_p(m, rng=np.random.default_rng(1), n_mc=9999)
    assert method == "Monte Carlo sign-flip (9999 draws)" and p[0] == q[0]


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.float64(0.5), "^interval needs at least one cluster mean per row$"),
        (np.empty((3, 0)), "^interval needs at least one cluster mean per row$"),
    ],
)
def test_interval_rejects_rows_without_clusters(bad, message):
    with pytest.raises(ValueError, match=message):
        stats.interval(bad, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="^sign_flip_p needs at least one cluster mean per row$"):
        stats.sign_flip_p(np.empty((3, 0)), rng=np.random.default_rng(0))
    with pytest.raises(
        ValueError,
        match=r"unknown interval method 'bootstrap'; known: "
        r"sign-flip, t, studentized, bca, percentile$",
    ):
        stats.interval(np.ones((1, 3)), rng=np.random.default_rng(0), method="bootstrap")


def test_sign_flip_exact_up_to_and_including_16_clusters():
    m = np.r_[np.full(10, 0.5), np.full(6, -0.1)][None, :]
    p, method = stats.sign_flip_p(m, rng=np.random.default_rng(0))
    assert method == "exact sign-flip (65536 assignments)"
    assert p[0] == pytest.approx(brute_force_p(list(m[0])))


def test_sign_flip_monte_carlo_equals_the_reference_draws():
    # (1 + hits) / (1 + n_mc) over the generator's own assignments, rows of any leading shape
    m = np.array(
        [
            [[0.5] * 12 + [-0.1] * 8, [1.0, -1.0] * 10],
            [[0.2, -0.3, 0.1, 0.4] * 5, [1 / 3] * 17 + [-1, 0, 0]],
        ]
    )
    p, _ = stats.sign_flip_p(m, rng=np.random.default_rng(3), n_mc=999)
    signs = np.random.default_rng(3).choice(np.array([-1.0, 1.0]), size=(999, 20))
    for i, j in itertools.product(range(2), range(2)):
        row = m[i, j]
        obs = abs(row.mean())
        hits = sum(abs(float(s @ row)) / 20 >= obs - 1e-9 * max(1.0, obs) for s in signs)
        assert p[i, j] == pytest.approx((1 + hits) / 1000, rel=1e-12), (i, j)
    assert p[0, 1] == 1.0  # mean 0: every assignment is at least as extreme (ties count)


def test_sign_flip_exact_rows_of_any_leading_shape():
    m = np.array([[[0.5, 1.0, -0.25], [1.0, 1.0, 1.0]], [[0.0, 0.0, 0.0], [2.0, -1.0, 0.5]]])
    p, _ = stats.sign_flip_p(m, rng=np.random.default_rng(0))
    assert p.shape == (2, 2)
    for i, j in itertools.product(range(2), range(2)):
        assert p[i, j] == pytest.approx(brute_force_p(list(m[i, j])))


def test_sign_flip_ties_within_a_relative_tolerance():
    # assignments whose |mean| falls short of the observed one by less than 1e-9 x max(1, obs)
    # count as ties (rounding in the sums must not decide a p-value); larger shortfalls do not.
    # [a, e, a]: the flips (+, -, +) and (-, +, -) fall short by 2e / 3.
    def p_of(a, e):
        return stats.sign_flip_p(np.array([[a, e, a]]), rng=np.random.default_rng(0))[0][0]

    assert p_of(3.0, 1.5e-9) == 0.5  # obs = 2: shortfall 1e-9 <= tolerance 2e-9
    assert p_of(3.0, 6e-9) == 0.25  # shortfall 4e-9 > 2e-9
    assert p_of(0.3, 1.2e-9) == 0.5  # obs = 0.2: shortfall 0.8e-9 <= 1e-9
    assert p_of(0.3, 2.25e-9) == 0.25  # shortfall 1.5e-9 > 1e-9


# ----- moved from test_measurement.py: the interval's and the test's corners ---------------


@pytest.mark.parametrize("method,scipy_method", [("percentile", "percentile"), ("bca", "BCa")])
@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_scipy_methods_are_a_direct_scipy_bootstrap_with_the_same_generator(
    method, scipy_method, confidence
):
    lo, hi, used = stats.interval(
        SKEWED[None, :],
        rng=np.random.default_rng(11),
        method=method,
        confidence=confidence,
        n_resamples=1999,
    )
    ref = scipy.stats.bootstrap(
        (SKEWED,),
        np.mean,
        method=scipy_method,
        confidence_level=confidence,
        n_resamples=1999,
        rng=np.random.default_rng(11),
    ).confidence_interval
    assert (lo[0], hi[0]) == pytest.approx((ref.low, ref.high), rel=1e-12, abs=1e-12)
    assert used[0] == (
        "BCa cluster bootstrap" if method == "bca" else "percentile cluster bootstrap"
    )


def test_bounds_clip_only_the_side_that_crosses_and_say_so():
    # skewed near the ceiling, nine distinct values (no zero-spread resample)
    x = np.array([[1.0, 0.98, 0.95, 0.9, 0.99, 0.97, 0.2, 0.93, 0.96]])
    kw = dict(n_resamples=999, method="studentized")
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(2), **kw)
    lo_c, hi_c, used_c = stats.interval(x, rng=np.random.default_rng(2), **kw, bounds=(-1.0, 0.95))
    assert hi[0] > 0.95 and hi_c[0] == 0.95  # the side that crosses is cut
    assert lo_c[0] == lo[0] and -1.0 < lo[0] < x.mean()  # the other side is untouched
    assert used_c[0] == "studentized cluster bootstrap (clipped)"
    assert used[0] == "studentized cluster bootstrap"
    # cut from below as well
    lo_n, hi_n, _ = stats.interval(-x, rng=np.random.default_rng(2), **kw, bounds=(-0.95, 1.0))
    assert lo_n[0] == -0.95 and hi_n[0] == pytest.approx(-lo[0])


@pytest.mark.parametrize(
    "means,expected",
    [
        ([0.0, 1.0], False),  # instance means that differ by exactly 1
        ([1.0, 2.0, 1.0], False),
        ([-1.0, 0.0], False),
        ([0.0, 2e-9], False),  # a difference just above the tie tolerance
        ([0.0, 5e-10], True),  # rounding noise below it
        ([3.0, 3.0, 3.0], True),
        ([7.0], True),  # one cluster
        ([1e6, 1e6 + 1e-4], True),  # the tolerance scales with the magnitude ...
        ([-1e6, -1e6 + 1e-4], True),  # ... of either sign
        ([1e6, 1e6 + 1e-2], False),
        ([2.0, 2.0 + 1.5e-9], True),  # 1.5e-9 is within 1e-9 of magnitude 2 ...
        ([0.5, 0.5 + 1.5e-9], False),  # ... but below magnitude 1 the tolerance stays 1e-9
    ],
)
def test_degenerate_means_all_equal(means, expected):
    x = np.array([means])
    assert bool(stats.degenerate(x)[0]) is expected
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(0), n_resamples=199, method="t")
    assert (used[0] == "none (degenerate)") is expected
    assert math.isnan(lo[0]) is expected and math.isnan(hi[0]) is expected


def test_row_rng_depends_on_seed_and_every_part_in_order():
    draw = lambda *a: stats.row_rng(*a).integers(0, 2**62, size=4).tolist()  # noqa: E731
    base = draw(3, "reposcan", "p", 10, "a", "b", "success")
    assert base == draw(3, "reposcan", "p", 10, "a", "b", "success")
    others = [
        draw(4, "reposcan", "p", 10, "a", "b", "success"),
        draw(3, "reposcan", "p", 10, "b", "a", "success"),
        draw(3, "reposcan", "p", 25, "a", "b", "success"),
        draw(3, "reposcan", "p", 10, "a", "b", "valid_count"),
    ]
    assert all(o != base for o in others)


def test_studentized_takes_zero_spread_resamples_as_infinite():
    # two clusters: the resamples (a, a) and (b, b) have no spread; as +-inf they fill both
    # 2.5% tails, so the interval is unbounded (cut to the plausible range when given), never
    # pinned at a multiple of the estimate
    x = np.array([[0.5, -1.0]])
    kw = dict(method="studentized", n_resamples=999)
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(0), **kw)
    assert (lo[0], hi[0]) == (-math.inf, math.inf)
    assert used[0] == "studentized cluster bootstrap"
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(0), **kw, bounds=(-1.0, 1.0))
    assert (lo[0], hi[0]) == (-1.0, 1.0)
    assert used[0] == "studentized cluster bootstrap (clipped)"
    # one instance of nine differs: a third of the resamples have no spread; the far bound is
    # the plausible range's, not twice the estimate
    y = np.array([[0.0] * 8 + [2 / 3]])
    lo, hi, _ = stats.interval(y, rng=np.random.default_rng(0), **kw, bounds=(-1.0, 1.0))
    assert hi[0] == 1.0 and not math.isclose(hi[0], 2 * y.mean())


def test_quantile_of_sorted_values_with_infinities():
    from pushbench.analysis.stats import _quantile_sorted

    a = np.array([[-np.inf, -np.inf, 0.0, 1.0, np.inf, np.inf]])
    assert _quantile_sorted(a, 0.1)[0] == -np.inf  # between two -inf: no NaN
    assert _quantile_sorted(a, 0.9)[0] == np.inf
    assert _quantile_sorted(a, 0.5)[0] == pytest.approx(0.5)
    assert _quantile_sorted(a, 0.0)[0] == -np.inf and _quantile_sorted(a, 1.0)[0] == np.inf
    b = np.array([[1.0, 2.0, 4.0]])
    assert _quantile_sorted(b, 0.75)[0] == pytest.approx(3.0)
    assert _quantile_sorted(b, 0.5)[0] == 2.0


def test_monte_carlo_sign_flip_p_written_out():
    m = np.r_[np.full(12, 0.5), np.full(8, -0.4), [0.1]]
    p, method = stats.sign_flip_p(m[None, :], rng=np.random.default_rng(3), n_mc=999)
    signs = np.random.default_rng(3).choice([-1.0, 1.0], size=(999, m.size))
    obs = abs(m.mean())
    hits = sum(abs((s * m).mean()) >= obs - 1e-9 for s in signs)
    assert p[0] == (1 + hits) / 1000 and method == "Monte Carlo sign-flip (999 draws)"
    # ties with the observed statistic count as extreme (both signs of the all-equal sample)
    p, _ = stats.sign_flip_p(np.full((1, 3), 0.2), rng=np.random.default_rng(0))
    assert p[0] == 2 / 8
    p, _ = stats.sign_flip_p(np.array([[1e6, 1e6, 1e6 - 1e-4]]), rng=np.random.default_rng(0))
    assert p[0] == 2 / 8  # the tie tolerance scales with the statistic
    p, method = stats.sign_flip_p(
        np.array([[0.3, -0.1]]), rng=np.random.default_rng(0), max_exact=1
    )
    assert method == "Monte Carlo sign-flip (9999 draws)"
    p, method = stats.sign_flip_p(np.full((1, 16), 0.1), rng=np.random.default_rng(0))
    assert method == "exact sign-flip (65536 assignments)" and p[0] == 2 / 65536


def test_row_rng_derivation_is_stable_across_versions():
    # the same seed must give the same CSVs tomorrow: the generator is a SeedSequence of the
    # seed (32 bits) and the first 8 bytes (little-endian) of the sha256 of the row's identity
    parts = ["reposcan", "simulated-mid", 10, "stateqgp", "standard", "success"]
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    want = np.random.default_rng(
        np.random.SeedSequence([7, int.from_bytes(digest[:8], "little")])
    ).integers(0, 2**62, size=4)
    assert stats.row_rng(7, *parts).integers(0, 2**62, size=4).tolist() == want.tolist()
    # parts enter as text; the seed modulo 2^32
    again = stats.row_rng(7 + 2**32, *map(str, parts)).integers(0, 2**62, size=4)
    assert again.tolist() == want.tolist()


# ----- the sign-flip test inversion ---------------------------------------------------------
def brute_force_interval(x, confidence, grid=None):
    """The kept shifts by definition: p(d) >= 1 - confidence with p by full enumeration
    (itertools, not the module's sign matrix), on the candidate end points (every subset mean)
    and a grid; returns (min, max) kept."""
    x = np.asarray(x, dtype=float)
    k = len(x)
    subsets = itertools.chain.from_iterable(
        itertools.combinations(range(k), r) for r in range(1, k + 1)
    )
    cands = np.array(sorted({float(np.mean(x[list(c)])) for c in subsets}))
    d = cands if grid is None else np.r_[cands, grid]
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=k)))
    y = x[None, :] - d[:, None]
    obs = np.abs(y.mean(axis=1))
    p = (np.abs(y @ signs.T) / k >= obs[:, None] - 1e-12).mean(axis=1)
    kept = d[p >= 1 - confidence - 1e-12]
    return kept.min(), kept.max()


def p_at(x, d, signs):
    return stats.sign_flip_p(
        np.asarray(x, dtype=float)[None, :] - d, rng=np.random.default_rng(0), signs=signs
    )[0][0]


@pytest.mark.parametrize("k", range(6, 21))
def test_inversion_equals_a_grid_search_on_random_data(k):
    # the end points against the test itself: kept at the end point, rejected just outside,
    # and the kept set on a grid is exactly the grid inside [low, high]; k > 16 is Monte Carlo
    rng = np.random.default_rng(k)
    x = np.round(rng.normal(0.2, 1.0, size=k), 3)
    signs = stats.flip_signs(k, np.random.default_rng(k), n_mc=999)
    assert (len(signs) == 2**k) is (k <= 16)
    lo, hi, used = stats.interval(x[None, :], rng=rng, signs=signs)
    lo, hi = lo[0], hi[0]
    alpha = 0.05
    assert x.min() <= lo < x.mean() < hi <= x.max()
    assert p_at(x, lo, signs) >= alpha and p_at(x, hi, signs) >= alpha
    assert p_at(x, lo - 1e-6, signs) < alpha and p_at(x, hi + 1e-6, signs) < alpha
    n = 41 if k >= 15 else 301
    grid = np.linspace(x.min() - 0.2, x.max() + 0.2, n)
    grid = grid[(np.abs(grid - lo) > 1e-7) & (np.abs(grid - hi) > 1e-7)]
    p = stats.sign_flip_p(x[None, :] - grid[:, None], rng=rng, signs=signs)[0]
    np.testing.assert_array_equal(p >= alpha, (grid >= lo) & (grid <= hi))
    if k <= 10:  # and against the definition written out (enumeration in Python)
        assert (lo, hi) == pytest.approx(brute_force_interval(x, 0.95), abs=1e-12)


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
@pytest.mark.parametrize(
    "case",
    [
        [0.0] * 9,  # all equal (zero): the point 0
        [0.5] * 7,  # all equal: the point, though p = 2/128
        [0.0] * 8 + [1.0],  # one instance differs
        [0.0] * 6 + [1 / 3, 1.0, 2 / 3],  # all positive or tied
        [0.2, 0.4, 0.4, 0.9, 1.0, 0.3, 0.7],  # all positive, with ties
        [1.0, -1.0, 1.0, -1.0, 0.0, 0.0, 1 / 3, 1 / 3],  # ties at +-1
        [0.0, 0.0, 0.0, 1.0, 1.0, 1.0],  # six instances
    ],
)
def test_inversion_hand_cases_against_the_enumerated_definition(case, confidence):
    x = np.array([case])
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(0), confidence=confidence)
    want = brute_force_interval(case, confidence, grid=np.linspace(-1.5, 1.5, 61))
    if len(case) < stats.min_clusters(confidence):  # the definition keeps every shift
        assert want == (-1.5, 1.5) and math.isnan(lo[0]) and math.isnan(hi[0])
        assert used[0] == f"n/a (k<{stats.min_clusters(confidence)})"
    else:
        assert (lo[0], hi[0]) == pytest.approx(want, abs=1e-12)


def test_inversion_by_hand():
    rng = np.random.default_rng(0)

    def iv(x, **kw):
        lo, hi, used = stats.interval(np.array([x], dtype=float), rng=rng, **kw)
        return lo[0], hi[0], used[0]

    # all equal: [c, c]; one of nine differs by a: [0, a/3] (26th of 512 from the top: 2 x inf,
    # 2 x a, 16 x a/2, 56 x a/3); six instances: [min, max]
    assert iv([0.25] * 9)[:2] == (0.25, 0.25)
    assert iv([0.0] * 8 + [0.9])[:2] == pytest.approx((0.0, 0.3))
    assert iv([0.0] * 8 + [-0.9])[:2] == pytest.approx((-0.3, 0.0))
    assert iv([3, -1, 0, 2, 5, 1])[:2] == (-1, 5)
    # fewer than 6 instances: no shift is ever rejected at 95%: no bounds, and it says so
    lo, hi, used = iv([0.0, 1.0, 1.0, 1.0, 1.0])
    assert math.isnan(lo) and math.isnan(hi) and used == "n/a (k<6)"
    lo, hi, used = iv([0.0, 1.0, 1.0, 1.0], confidence=0.8)
    assert (lo, hi, used) == (0.0, 1.0, "sign-flip test inversion")
    # 20%: two instances suffice (2/4 < 0.8); every one of the 4 assignments is needed
    assert iv([1.0, 2.0], confidence=0.2)[:2] == (1.0, 2.0)
    # bounds cut the inverted interval too (it is never wider than the instances' range)
    lo, hi, used = iv([0.0] * 8 + [0.9], bounds=(0.0, 0.2))
    assert (lo, hi, used) == (0.0, 0.2, "sign-flip test inversion (clipped)")


def test_inversion_agrees_with_the_p_value():
    # 0 is inside exactly when p >= 0.05, over many random sparse rows (exact and Monte Carlo)
    rng = np.random.default_rng(7)
    for k in (6, 9, 12, 18):
        x = rng.choice([-1, -1 / 3, 0, 0, 0, 1 / 3, 2 / 3, 1], size=(300, k))
        signs = stats.flip_signs(k, np.random.default_rng(1), n_mc=499)
        lo, hi, _ = stats.interval(x, rng=rng, signs=signs)
        p, _ = stats.sign_flip_p(x, rng=rng, signs=signs)
        np.testing.assert_array_equal((lo <= 0) & (0 <= hi), p >= 0.05)
        assert (p < 0.05).any() and (p >= 0.05).any()


def test_exact_and_monte_carlo_switch():
    rng = np.random.default_rng(0)
    exact = stats.flip_signs(16, rng)
    assert exact.shape == (65536, 16) and not exact.flags.writeable
    assert stats.flip_signs(16, rng) is exact  # cached
    mc = stats.flip_signs(17, np.random.default_rng(3), n_mc=500)
    ref = np.random.default_rng(3).choice(np.array([-1.0, 1.0]), size=(500, 17))
    np.testing.assert_array_equal(mc, ref)
    assert mc.flags.writeable
    low = stats.flip_signs(4, np.random.default_rng(3), n_mc=50, max_exact=3)
    assert low.shape == (50, 4) and low.flags.writeable
    # the interval switches with the test: MC with (1 + hits) / (1 + n) >= alpha
    x = np.random.default_rng(5).normal(0.3, 1, size=(1, 17))
    lo, hi, _ = stats.interval(x, rng=np.random.default_rng(3), n_resamples=500)
    lo2, hi2, _ = stats.interval(x, rng=np.random.default_rng(0), signs=mc)
    assert (lo[0], hi[0]) == (lo2[0], hi2[0])
    # need = ceil(0.05 x 501 - 1) = 25 of the 500 draws' subset-mean intervals
    neg = mc < 0
    s_neg = x[0] @ neg.T
    mean_neg = np.where(neg.sum(1) > 0, s_neg / np.maximum(neg.sum(1), 1), -np.inf)
    mean_pos = np.where(neg.sum(1) < 17, (x.sum() - s_neg) / np.maximum(17 - neg.sum(1), 1), np.inf)
    whole = (neg.sum(1) == 0) | (neg.sum(1) == 17)
    lows = np.sort(np.where(whole, -np.inf, np.minimum(mean_neg, mean_pos)))
    highs = np.sort(np.where(whole, np.inf, np.maximum(mean_neg, mean_pos)))[::-1]
    assert (lo[0], hi[0]) == (lows[24], highs[24])


def test_inversion_keeps_every_shift_when_no_draw_can_reject():
    # 9 Monte Carlo draws: (1 + hits) / 10 >= 0.05 always (need <= 0): unbounded both ways
    signs = stats.flip_signs(20, np.random.default_rng(0), n_mc=9)
    lo, hi = stats.sign_flip_interval(np.ones((2, 20)), signs=signs)
    assert lo.tolist() == [-math.inf] * 2 and hi.tolist() == [math.inf] * 2
    # 19 draws: need = ceil(0.05 x 20 - 1) = 0 as well; 39 draws: need 1 = the extreme draw
    lo, hi = stats.sign_flip_interval(
        np.arange(20.0)[None, :], signs=stats.flip_signs(20, np.random.default_rng(0), 19)
    )
    assert (lo[0], hi[0]) == (-math.inf, math.inf)
    lo, hi = stats.sign_flip_interval(
        np.arange(20.0)[None, :], signs=stats.flip_signs(20, np.random.default_rng(0), 39)
    )
    assert 0.0 < lo[0] < 9.5 < hi[0] < 19.0  # the extreme subset means of the 39 draws


def test_inversion_batch_spans_memory_chunks():
    # 65536 assignments: 61 rows per chunk; 130 rows = three chunks, each row as alone
    x = np.random.default_rng(1).normal(size=(130, 16))
    signs = stats.flip_signs(16, np.random.default_rng(0))
    lo, hi = stats.sign_flip_interval(x, signs=signs)
    for i in (0, 60, 61, 122, 129):
        lo1, hi1 = stats.sign_flip_interval(x[i : i + 1], signs=signs)
        assert (lo[i], hi[i]) == pytest.approx((lo1[0], hi1[0]), rel=1e-12)  # BLAS blocks


@pytest.mark.parametrize(
    "confidence,k", [(0.95, 6), (0.9, 5), (0.8, 4), (0.75, 4), (0.99, 8), (0.5, 3), (0.25, 2)]
)
def test_min_clusters_is_the_fewest_that_can_reject(confidence, k):
    assert stats.min_clusters(confidence) == k
    assert 2 / 2**k < 1 - confidence <= 2 / 2 ** (k - 1)


def test_min_p_and_counts_of_instances_that_differ():
    assert stats.min_p([0, 1, 5, 6, 9]).tolist() == [1.0, 1.0, 2 / 32, 2 / 64, 2 / 512]
    up, down = stats.n_up_down(np.array([[0.0, 1e-10, -0.3, 0.2, 0.2], [2e3, 2e3, 0, 0, 0]]))
    assert up.tolist() == [2, 2] and down.tolist() == [1, 0]
    # the tie tolerance scales with the largest |mean| of the row: 1e-9 x 1e3 = 1e-6
    up, down = stats.n_up_down(np.array([[1e3, 5e-7, -5e-7, 2e-6, -2e-6]]))
    assert (up[0], down[0]) == (2, 1)


def test_clip_cuts_and_marks_each_bound():
    lo, hi, cl, ch = stats.clip(
        np.array([-2.0, 0.0, math.nan, -1.0]), np.array([0.5, 3.0, math.nan, 1.0]), (-1.0, 1.0)
    )
    assert lo[:2].tolist() == [-1.0, 0.0] and hi[:2].tolist() == [0.5, 1.0]
    assert cl.tolist() == [True, False, False, False] and ch.tolist() == [False, True, False, False]
    assert math.isnan(lo[2]) and math.isnan(hi[2])
    assert (lo[3], hi[3]) == (-1.0, 1.0)  # on the bound: not cut
    # per-row bounds
    lo, hi, cl, ch = stats.clip([-5.0, -5.0], [5.0, 5.0], ([-1.0, -6.0], [1.0, 6.0]))
    assert lo.tolist() == [-1.0, -5.0] and cl.tolist() == [True, False]


def test_cli_help_names_the_measured_coverages():
    import inspect

    from pushbench.cli.run import report_cmd

    opt = inspect.signature(report_cmd).parameters["ci_method"].default
    assert opt.default == stats.DEFAULT_METHOD and opt.help == stats.METHOD_HELP
    for m in stats.METHODS:
        assert m in stats.METHOD_HELP


def test_inversion_and_clip_stay_quiet_and_tolerate_rounding_only():
    # the all-kept / all-flipped assignments divide by zero flipped instances: silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = stats.sign_flip_interval(
            np.array([[0.0, 1.0, 2.0, 0.5, 0.25, 3.0]]),
            signs=stats.flip_signs(6, np.random.default_rng(0)),
        )
        assert (lo[0], hi[0]) == (0.0, 3.0)
        stats.interval(
            np.array([[0.5, -1.0, 0.5, 0.5]]),
            rng=np.random.default_rng(0),
            method="studentized",
            n_resamples=99,
        )
    # a bound beyond the limit by less than 1e-9 x max(1, |limit|) is set to the limit unmarked
    lo, hi, cl, ch = stats.clip(
        [-1 - 5e-10, -1 - 2e-9, -3 - 2e-9],
        [1 + 5e-10, 1 + 2e-9, 3.0],
        ([-1.0, -1.0, -3.0], [1.0, 1.0, 3.0]),
    )
    assert lo.tolist() == [-1.0, -1.0, -3.0] and hi.tolist() == [1.0, 1.0, 3.0]
    assert cl.tolist() == [False, True, False] and ch.tolist() == [False, True, False]
    # subset means that are 0 or the instances' extremes up to rounding are snapped there
    x = np.array([[1 / 3, 1 / 3, 1 / 3, -1.0, 1 / 3, 1 / 3, 1 / 3, -1.0, 0.1]])
    lo, hi, _ = stats.interval(x, rng=np.random.default_rng(0))
    p, _ = stats.sign_flip_p(x, rng=np.random.default_rng(0))
    assert (lo[0] <= 0 <= hi[0]) is (p[0] >= 0.05) and x.min() <= lo[0] and hi[0] <= x.max()
