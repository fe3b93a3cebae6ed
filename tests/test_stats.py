"""The paired-delta statistics: interval, sign-flip test, Holm, and their calibration."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from pushbench.analysis import calibration, stats


def brute_force_p(m: list[float]) -> float:
    obs = abs(np.mean(m))
    hits = [abs(np.mean(np.array(s) * m)) >= obs - 1e-12
            for s in itertools.product((1.0, -1.0), repeat=len(m))]
    return float(np.mean(hits))


def test_sign_flip_is_exact_enumeration_up_to_16_clusters():
    rng = np.random.default_rng(0)
    for m in ([0.5, 1.0, -0.25], [1 / 3] * 9, [0, 0, 1, 2 / 3, -1 / 3, 1, 1, 0, 1 / 3],
              list(rng.normal(size=7))):
        p, method = stats.sign_flip_p(np.array(m)[None, :], rng=rng)
        assert p[0] == pytest.approx(brute_force_p(m))
        assert method == f"exact sign-flip ({2 ** len(m)} assignments)"
    p, _ = stats.sign_flip_p(np.full((1, 9), 1 / 3), rng=rng)
    assert p[0] == pytest.approx(2 / 512)        # RepoScan: 9 instances, all the same sign
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


cluster_means = st.lists(st.sampled_from([-1, -2 / 3, -1 / 3, 0, 1 / 3, 2 / 3, 1]),
                         min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(cluster_means, st.sampled_from(stats.METHODS))
def test_interval_is_ordered_bounded_or_degenerate(m, method):
    x = np.array(m, dtype=float)[None, :]
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(0), method=method,
                                  n_resamples=199, bounds=(-1.0, 1.0))
    if stats.degenerate(x)[0]:
        assert math.isnan(lo[0]) and math.isnan(hi[0]) and used[0] == "none (degenerate)"
    else:
        assert lo[0] <= hi[0]
        if method in ("studentized", "percentile", "bca"):
            assert -1.0 <= lo[0] and hi[0] <= 1.0
    p, _ = stats.sign_flip_p(x, rng=np.random.default_rng(0))
    q, _ = stats.sign_flip_p(-x, rng=np.random.default_rng(0))
    assert 0 < p[0] <= 1 and p[0] == pytest.approx(q[0])   # the test is two-sided


@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_bca_rows_scipy_leaves_undefined_get_scipys_percentile_interval(confidence):
    # With few resamples scipy's BCa is undefined for a row whose resample means all lie on one
    # side of the estimate (z0 = ndtri(0) = -inf): it returns NaN for both bounds. Those rows,
    # and only those, get the percentile interval from the same generator, continued.
    x = np.array([[5, 5, 5, 1], [0, 1 / 3, 1, 1], [0, 0, 1, 1], [1, 0, 0, 0],
                  [0.2, 0.5, 0.1, 0.9]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # scipy's warnings stay inside: the method says it
        lo, hi, used = stats.interval(x, rng=np.random.default_rng(1), method="bca",
                                      n_resamples=4, confidence=confidence)
    ref_rng = np.random.default_rng(1)
    kw = dict(axis=-1, vectorized=True, n_resamples=4, confidence_level=confidence, rng=ref_rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # scipy's DegenerateDataWarning
        bca = scipy.stats.bootstrap((x,), np.mean, method="BCa", **kw).confidence_interval
    bad = np.isnan(bca.low) | np.isnan(bca.high)
    assert bad.tolist() == [False, False, False, False, True]   # the case under test exists
    pct = scipy.stats.bootstrap((x[bad],), np.mean, method="percentile", **kw).confidence_interval
    assert lo[~bad] == pytest.approx(bca.low[~bad], rel=1e-12)
    assert hi[~bad] == pytest.approx(bca.high[~bad], rel=1e-12)
    assert lo[bad] == pytest.approx(pct.low, rel=1e-12)
    assert hi[bad] == pytest.approx(pct.high, rel=1e-12)
    assert lo[4] < hi[4]
    assert used.tolist() == ["BCa cluster bootstrap"] * 4 + [
        "percentile cluster bootstrap (BCa undefined)"]


def test_studentized_interval_is_not_clamped_to_the_estimate():
    # the interval of a skewed sample is asymmetric around the estimate and comes from the
    # bootstrap-t quantiles, not from the estimate
    x = np.array([[0, 0, 0, 0, 0, 1 / 3, 1 / 3, 1, 1]], dtype=float)
    lo, hi, used = stats.interval(x, rng=np.random.default_rng(3), n_resamples=4999)
    est = x.mean()
    assert lo[0] < est < hi[0] and used[0].startswith("studentized")
    assert not math.isclose(est - lo[0], hi[0] - est, rel_tol=0.05)


def test_batch_rows_match_single_rows():
    rng = np.random.default_rng(5)
    x = calibration.simulate(calibration.Scenario(), 3, rng)
    lo, hi, _ = stats.interval(x, rng=np.random.default_rng(9), method="t")
    for i in range(3):
        l1, h1, _ = stats.interval(x[i:i + 1], rng=np.random.default_rng(9), method="t")
        assert (l1[0], h1[0]) == pytest.approx((lo[i], hi[i]))


def test_true_delta_quadrature_matches_simulation():
    sc = calibration.Scenario()
    truth = calibration.true_delta(sc)
    sim = calibration.simulate(sc, 20000, np.random.default_rng(0)).mean()
    assert abs(sim - truth) < 0.01 and 0.1 < truth < 0.3


# The band: bootstrap-t intervals are second-order accurate but with 9 clusters and 3 binary
# seeds the discreteness makes them somewhat conservative; we accept the nominal 0.95 minus
# 0.03 to plus 0.03. With 1,000 replications the Monte-Carlo standard error of a coverage near
# 0.95 is 0.007, so the band is about 4 standard errors either side.
COVERAGE_BAND = (0.92, 0.98)


def test_calibration_coverage_and_type_one_error():
    reps = 1000
    sc = calibration.Scenario()
    res = calibration.calibrate(sc, stats.DEFAULT_METHOD, reps=reps, seed=20240611)
    null = calibration.calibrate(calibration.Scenario(name="null", b1=0.0, sd_effect=0.0),
                                 stats.DEFAULT_METHOD, reps=reps, seed=20240612)
    pct = calibration.calibrate(sc, "percentile", reps=reps, seed=20240611)
    print(f"\n{stats.DEFAULT_METHOD}: coverage {res.coverage:.3f} (truth {res.truth:.3f}, "
          f"degenerate {res.degenerate:.3f}, width {res.mean_width:.3f}); null coverage "
          f"{null.coverage:.3f}; sign-flip type-I error {null.reject_rate:.3f}, power "
          f"{res.reject_rate:.3f}; percentile coverage {pct.coverage:.3f}")
    assert COVERAGE_BAND[0] <= res.coverage <= COVERAGE_BAND[1]
    assert COVERAGE_BAND[0] <= null.coverage <= COVERAGE_BAND[1]
    # the exact test's level holds (up to 3 Monte-Carlo standard errors)
    assert null.reject_rate <= 0.05 + 3 * calibration.monte_carlo_se(0.05, reps)
    # the calibration can tell a method that under-covers with 9 clusters
    assert pct.coverage < COVERAGE_BAND[0]
