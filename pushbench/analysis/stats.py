"""Cluster-level statistics of paired differences: interval, sign-flip test, Holm adjustment.

Input is always the vector of **cluster means** (one mean paired difference per task instance;
seeds and targets are nested inside a cluster). Every function accepts a batch: an array of shape
``(..., k)`` holds ``...`` independent rows of ``k`` cluster means, so the calibration
(``experiments/calibrate_intervals.py``) runs thousands of replications in one call through
exactly the code the report uses.

Test (:func:`sign_flip_p`): the paired randomization test over clusters. Under the null of no
effect the two sides are exchangeable within each pair, so every cluster mean is equally likely
to have either sign; the two-sided p-value is the share of sign assignments ``s`` with
``|mean(s * m)| >= |mean(m)|``. All ``2^k`` assignments are enumerated for ``k <= 16``
(:data:`MAX_EXACT_FLIPS`, exact); above that ``n_mc`` random assignments from the seeded generator
(:func:`flip_signs`) give ``(1 + hits) / (1 + n_mc)``. A cluster whose mean is exactly 0 is the
same under either sign, so with ``m`` clusters that differ from 0 the smallest attainable p is
``2 / 2^m`` (:func:`min_p`): fewer than 6 differing clusters can never reach 5%.

Interval (:func:`interval`; the default ``sign-flip``): the **inversion of that test**: the set of
shifts ``d`` for which the test on ``m - d`` has ``p >= 1 - confidence``. Per assignment ``s``
the test counts ``s`` at ``d`` exactly when ``d`` lies between the mean of the clusters ``s``
keeps and the mean of those it flips (both roots of ``|sum s(m - d)| = |sum(m - d)|``; the two
all-equal assignments count everywhere), so ``p(d)`` is a count of intervals that all contain
``mean(m)`` and the end points are order statistics of those subset means: exact, no grid. The
interval lies within ``[min(m), max(m)]`` and contains 0 exactly when the test's p is at least
``1 - confidence``. Limits: with 6 clusters (95%) it is ``[min(m), max(m)]``; with
fewer than :func:`min_clusters` clusters no shift is ever rejected and it has no bounds (NaN,
method ``n/a (k<6)``). A row whose clusters all equal ``c`` gets ``[c, c]``.

The other methods are options (``pushbench report --ci-method``), their coverage measured in the
docs/metrics.md (:data:`METHOD_HELP`):

* ``t``: ``mean +- t(k-1) sd / sqrt(k)`` over the cluster means.
* ``studentized``: the bootstrap-t interval over clusters, ``t* = (mean* - mean) / se*``. A
  resample whose clusters are all equal (``se* = 0``) gets ``t* = +-inf`` by the sign of
  ``mean* - mean`` (0 when equal): its side of the interval is then unbounded and is cut to the
  plausible range, never pinned at a multiple of the estimate.
* ``bca``: ``scipy.stats.bootstrap(method="BCa")``; where scipy cannot form it (NaN) that row
  falls back to the percentile interval and says so in its method.
* ``percentile``: ``scipy.stats.bootstrap(method="percentile")``.

Every method except ``sign-flip`` gives a row whose cluster means are all equal (or one cluster)
no interval (NaN, ``none (degenerate)``). Given ``bounds`` (the plausible range of the estimand)
:func:`clip` cuts a bound that crosses it and says which bound it cut.

Holm (:func:`holm`): the step-down family-wise adjustment over the p-values given (NaN ignored:
rows left out of the family).
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

METHODS = ("sign-flip", "t", "studentized", "bca", "percentile")
DEFAULT_METHOD = "sign-flip"
# Coverage of each method's 95% interval, median / worst over the designs of
# experiments/calibrate_intervals.py (docs/metrics.md: "Paired deltas, intervals and
# p-values"; the worst is a design where no method can cover: six instances, none of which
# responded).
METHOD_HELP = (
    "interval method; 95% coverage, median / worst over the designs in "
    "docs/metrics.md: sign-flip (default, test inversion: 0.96 / 0.83), "
    "t (0.96 / 0.82), studentized (0.95 / 0.83), bca (0.90 / 0.82), "
    "percentile (0.90 / 0.80)"
)
MAX_EXACT_FLIPS = 16
_TIE = 1e-9
# (low, high, method used) per row: what each interval method returns
_Interval = tuple[np.ndarray, np.ndarray, np.ndarray]


def row_rng(seed: int, *parts: Any) -> np.random.Generator:
    """A generator seeded from ``seed`` and a row's identity (stable across runs and rows)."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return np.random.default_rng(
        np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int.from_bytes(digest[:8], "little")])
    )


def degenerate(means: np.ndarray) -> np.ndarray:
    """``True`` per row whose cluster means are all equal (one cluster included)."""
    m = np.asarray(means, dtype=float)
    span = m.max(axis=-1) - m.min(axis=-1)
    tied: np.ndarray = span <= _TIE * np.maximum(1.0, np.abs(m).max(axis=-1))
    return tied


def n_up_down(means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, how many cluster means are above and below 0 (beyond the tie tolerance
    ``1e-9 x max(1, largest |mean|)``, the one :func:`degenerate` uses)."""
    m = np.asarray(means, dtype=float)
    tol = _TIE * np.maximum(1.0, np.abs(m).max(axis=-1, keepdims=True))
    return (m > tol).sum(axis=-1), (m < -tol).sum(axis=-1)


def min_p(n_differ: npt.ArrayLike) -> np.ndarray:
    """Smallest attainable two-sided sign-flip p with ``n_differ`` clusters differing from 0."""
    return np.minimum(1.0, 2.0 / 2.0 ** np.asarray(n_differ, dtype=float))


def min_clusters(confidence: float = 0.95) -> int:
    """Fewest clusters whose sign-flip test can reject (``2 / 2^k < 1 - confidence``; 6 at 95%)."""
    return int(math.floor(1 - math.log2(round(1 - confidence, 12)))) + 1


def interval(
    means: np.ndarray,
    *,
    rng: np.random.Generator,
    method: str = DEFAULT_METHOD,
    confidence: float = 0.95,
    n_resamples: int = 9999,
    bounds: tuple[float, float] | None = None,
    signs: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Interval for the mean of the cluster means, per row of ``means`` (shape ``(..., k)``).

    Returns ``(low, high, method_used)`` arrays of the leading shape; ``method_used`` names the
    method actually applied to each row (a BCa row that fell back says ``percentile (BCa
    undefined)``; a bound cut to ``bounds`` adds ``clipped``). ``signs`` (``sign-flip`` only):
    the assignments of :func:`flip_signs`, to invert the very draws a p-value used; by default
    they are drawn from ``rng`` with ``n_mc = n_resamples``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown interval method {method!r}; known: {', '.join(METHODS)}")
    m = np.asarray(means, dtype=float)
    if m.ndim == 0 or m.shape[-1] == 0:
        raise ValueError("interval needs at least one cluster mean per row")
    lead, k = m.shape[:-1], m.shape[-1]
    flat = m.reshape(-1, k)
    if method == "sign-flip":
        if k < min_clusters(confidence):
            low = np.full(len(flat), math.nan)
            high = low.copy()
            used = np.full(len(flat), f"n/a (k<{min_clusters(confidence)})", dtype=object)
        else:
            low, high = sign_flip_interval(
                flat,
                signs=flip_signs(k, rng, n_resamples) if signs is None else signs,
                confidence=confidence,
            )
            used = np.full(len(flat), "sign-flip test inversion", dtype=object)
    else:
        low = np.full(len(flat), math.nan)
        high = np.full(len(flat), math.nan)
        used = np.full(len(flat), "none (degenerate)", dtype=object)
        ok = ~degenerate(flat)
        if ok.any():
            lo, hi, names = _METHOD_FN[method](
                flat[ok], rng=rng, confidence=confidence, n_resamples=n_resamples
            )
            low[ok], high[ok], used[ok] = lo, hi, names
    if bounds is not None:
        low, high, cut_lo, cut_hi = clip(low, high, bounds)
        used = np.where(cut_lo | cut_hi, used + " (clipped)", used)
    return low.reshape(lead), high.reshape(lead), used.reshape(lead)


def clip(
    low: npt.ArrayLike, high: npt.ArrayLike, bounds: tuple[npt.ArrayLike, npt.ArrayLike]
) -> tuple[np.ndarray, ...]:
    """``(low, high, low_cut, high_cut)``: bounds cut to ``bounds`` (elementwise pairs allowed);
    a NaN bound stays NaN and is not cut. A bound beyond its limit by rounding only (within
    the tie tolerance, e.g. a subset mean of -1 computed as -1.0000000000000002) is set to the
    limit without being marked as cut."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    b_lo, b_hi = (np.asarray(b, dtype=float) for b in bounds)
    tol = _TIE * np.maximum(1.0, np.maximum(np.abs(b_lo), np.abs(b_hi)))
    return (np.maximum(low, b_lo), np.minimum(high, b_hi), low < b_lo - tol, high > b_hi + tol)


def _scipy(
    x: np.ndarray,
    *,
    rng: np.random.Generator,
    confidence: float,
    n_resamples: int,
    method: Literal["percentile", "BCa"],
) -> tuple[np.ndarray, ...]:
    from scipy import stats

    with warnings.catch_warnings():
        # scipy warns (and returns NaN) where BCa is undefined; the caller handles NaN rows.
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.bootstrap(
            (x,),
            np.mean,
            axis=-1,
            vectorized=True,
            method=method,
            confidence_level=confidence,
            n_resamples=n_resamples,
            rng=rng,
            batch=max(1, 2_000_000 // max(1, x.size)),
        )
    return (
        np.asarray(res.confidence_interval.low, dtype=float).reshape(len(x)),
        np.asarray(res.confidence_interval.high, dtype=float).reshape(len(x)),
    )


def _percentile(
    x: np.ndarray, *, rng: np.random.Generator, confidence: float, n_resamples: int
) -> _Interval:
    lo, hi = _scipy(x, rng=rng, confidence=confidence, n_resamples=n_resamples, method="percentile")
    return lo, hi, np.full(len(x), "percentile cluster bootstrap", dtype=object)


def _bca(
    x: np.ndarray, *, rng: np.random.Generator, confidence: float, n_resamples: int
) -> _Interval:
    lo, hi = _scipy(x, rng=rng, confidence=confidence, n_resamples=n_resamples, method="BCa")
    names = np.full(len(x), "BCa cluster bootstrap", dtype=object)
    bad = np.isnan(lo) | np.isnan(hi)
    if bad.any():
        plo, phi = _scipy(
            x[bad], rng=rng, confidence=confidence, n_resamples=n_resamples, method="percentile"
        )
        lo[bad], hi[bad] = plo, phi
        names[bad] = "percentile cluster bootstrap (BCa undefined)"
    return lo, hi, names


def _t(
    x: np.ndarray, *, rng: np.random.Generator, confidence: float, n_resamples: int
) -> _Interval:
    from scipy import stats

    k = x.shape[-1]
    est = x.mean(axis=-1)
    se = x.std(axis=-1, ddof=1) / math.sqrt(k)
    q = stats.t.ppf(0.5 + confidence / 2, k - 1)
    return est - q * se, est + q * se, np.full(len(x), "t interval over clusters", dtype=object)


def _studentized(
    x: np.ndarray, *, rng: np.random.Generator, confidence: float, n_resamples: int
) -> _Interval:
    k = x.shape[-1]
    est = x.mean(axis=-1)
    se = x.std(axis=-1, ddof=1) / math.sqrt(k)
    alpha = 1 - confidence
    q_hi = np.empty(len(x))
    q_lo = np.empty(len(x))
    step = max(1, 4_000_000 // (n_resamples * k))
    for s in range(0, len(x), step):  # bounded memory: rows x resamples x k at most ~4e6
        xb = x[s : s + step]
        idx = rng.integers(0, k, size=(len(xb), n_resamples, k))
        res = np.take_along_axis(xb[:, None, :], idx, axis=-1)
        seb = res.std(axis=-1, ddof=1) / math.sqrt(k)
        diff = res.mean(axis=-1) - est[s : s + step, None]
        tol = _TIE * np.maximum(1.0, np.abs(est[s : s + step, None]))
        zero = seb <= tol
        # a resample without spread: t* = +-inf by the sign of mean* - mean (module docstring)
        with np.errstate(divide="ignore", invalid="ignore"):
            tb = np.where(
                zero, np.where(np.abs(diff) <= tol, 0.0, np.sign(diff) * np.inf), diff / seb
            )
        tb.sort(axis=-1)
        q_lo[s : s + step] = _quantile_sorted(tb, alpha / 2)
        q_hi[s : s + step] = _quantile_sorted(tb, 1 - alpha / 2)
    # se > 0 (degenerate rows never get here); a quantile between -inf and +inf is NaN: that
    # side is unbounded
    lo, hi = est - q_hi * se, est - q_lo * se
    names = np.full(len(x), "studentized cluster bootstrap", dtype=object)
    return np.where(np.isnan(lo), -np.inf, lo), np.where(np.isnan(hi), np.inf, hi), names


def _quantile_sorted(a: np.ndarray, q: float) -> np.ndarray:
    """Linear-interpolation quantile along the last axis of an already sorted array (+-inf ok)."""
    n = a.shape[-1]
    pos = q * (n - 1)
    i = int(math.floor(pos))
    frac = pos - i
    lo = a[..., i]
    if frac == 0 or i + 1 >= n:
        return lo
    hi = a[..., i + 1]
    with np.errstate(invalid="ignore"):
        out = lo + frac * (hi - lo)
    return np.where(lo == hi, lo, out)  # inf - inf would give NaN


_METHOD_FN = {"t": _t, "studentized": _studentized, "bca": _bca, "percentile": _percentile}


# ----- the randomization test and its inversion ---------------------------------------------
@lru_cache(maxsize=MAX_EXACT_FLIPS + 1)
def _all_signs(k: int) -> np.ndarray:
    codes = np.arange(2**k, dtype=np.int64)[:, None]
    bits = (codes >> np.arange(k, dtype=np.int64)) & 1
    signs = 1.0 - 2.0 * bits
    signs.setflags(write=False)
    return signs


def flip_signs(
    k: int, rng: np.random.Generator, n_mc: int = 9999, max_exact: int = MAX_EXACT_FLIPS
) -> np.ndarray:
    """The sign assignments of the test: all ``2^k`` for ``k <= max_exact`` (read-only, cached),
    else ``n_mc`` seeded random ones (a Monte Carlo array is writeable; the exact one is not)."""
    if k <= max_exact:
        return _all_signs(k)
    return rng.choice(np.array([-1.0, 1.0]), size=(n_mc, k))


def _is_exact(signs: np.ndarray) -> bool:
    return not signs.flags.writeable


def sign_flip_p(
    means: np.ndarray,
    *,
    rng: np.random.Generator,
    n_mc: int = 9999,
    max_exact: int = MAX_EXACT_FLIPS,
    signs: np.ndarray | None = None,
) -> tuple[np.ndarray, str]:
    """Two-sided paired randomization p-value per row of ``means`` (shape ``(..., k)``).

    Returns ``(p, method)`` with ``method`` ``"exact sign-flip (2^k assignments)"`` or ``"Monte
    Carlo sign-flip (n_mc draws)"``. A row whose means are all zero gets p = 1. ``signs``: the
    assignments of :func:`flip_signs` (default: drawn here).
    """
    m = np.asarray(means, dtype=float)
    k = m.shape[-1]
    if k == 0:
        raise ValueError("sign_flip_p needs at least one cluster mean per row")
    signs = flip_signs(k, rng, n_mc, max_exact) if signs is None else signs
    obs = np.abs(m.mean(axis=-1))
    tol = _TIE * np.maximum(1.0, obs)
    hits = (np.abs(m @ signs.T) / k >= (obs - tol)[..., None]).sum(axis=-1)
    if _is_exact(signs):
        return hits / len(signs), f"exact sign-flip ({len(signs)} assignments)"
    return (1 + hits) / (1 + len(signs)), f"Monte Carlo sign-flip ({len(signs)} draws)"


def sign_flip_interval(
    means: np.ndarray, *, signs: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """End points of ``{d : sign_flip_p(means - d) >= 1 - confidence}`` per row of ``means``
    (shape ``(rows, k)``), exactly: order statistics of the subset means (module docstring)."""
    m = np.asarray(means, dtype=float)
    n, k = signs.shape
    extra = 0 if _is_exact(signs) else 1  # Monte Carlo p = (1 + hits) / (1 + n)
    need = math.ceil(round((1 - confidence) * (n + extra) - extra, 9))
    if need <= 0:  # every shift is kept
        return np.full(len(m), -math.inf), np.full(len(m), math.inf)
    flipped = signs < 0
    n_neg = flipped.sum(axis=-1)
    low, high = np.empty(len(m)), np.empty(len(m))
    step = max(1, 4_000_000 // n)
    for s in range(0, len(m), step):  # bounded memory: rows x assignments at most ~4e6
        x = m[s : s + step]
        s_neg = x @ flipped.T
        s_pos = x.sum(axis=-1, keepdims=True) - s_neg
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_neg, mean_pos = s_neg / n_neg, s_pos / (k - n_neg)
        whole = (n_neg == 0) | (n_neg == k)  # +-(1, ..., 1): counted at every shift
        lo = np.where(whole, -math.inf, np.minimum(mean_neg, mean_pos))
        hi = np.where(whole, math.inf, np.maximum(mean_neg, mean_pos))
        low[s : s + step] = np.partition(lo, need - 1, axis=-1)[:, need - 1]
        high[s : s + step] = -np.partition(-hi, need - 1, axis=-1)[:, need - 1]
    # a subset mean that is 0 up to rounding (1/3 + 1/3 + 1/3 - 1) is 0, as the test's tie
    # tolerance takes it: then 0 is inside exactly when the p-value says so
    # (and a subset mean never lies outside the instances' range, not even by rounding)
    tol = _TIE * np.maximum(1.0, np.abs(m).max(axis=-1))
    low = np.maximum(np.where(np.abs(low) <= tol, 0.0, low), m.min(axis=-1))
    return low, np.minimum(np.where(np.abs(high) <= tol, 0.0, high), m.max(axis=-1))


def holm(p_values: npt.ArrayLike) -> np.ndarray:
    """Holm step-down adjusted p-values (same order; NaN stays NaN and is not counted)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, math.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return out
    order = ok[np.argsort(p[ok], kind="mergesort")]
    m = order.size
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = adj
    return out
