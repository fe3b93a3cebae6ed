"""Cluster-level statistics of paired differences: interval, sign-flip test, Holm adjustment.

Input is always the vector of **cluster means** (one mean paired difference per task instance;
seeds and targets are nested inside a cluster). Every function accepts a batch: an array of shape
``(..., k)`` holds ``...`` independent rows of ``k`` cluster means, so the calibration
measurement (``experiments/calibrate_intervals.py``) runs 1,000 replications in one call through
exactly the code the report uses.

Interval (:func:`interval`), method chosen by that calibration (9 clusters x 3 seeds, binary
outcomes, cluster random effects; numbers in the README):

* ``studentized`` (default): the bootstrap-t interval over clusters. Each resample of ``k``
  clusters gives ``t* = (mean* - mean) / se*`` with ``se* = sd*(ddof=1) / sqrt(k)``; the interval
  is ``[mean - q(1-a/2) se, mean - q(a/2) se]``. A resample whose clusters are all equal has
  ``se* = 0``; it is studentized with the smallest positive ``se*`` among the row's resamples.
  (Taking its ``t*`` as +-inf instead makes every row where six of nine instances agree, common
  at a success ceiling or floor, unbounded on one side; in the calibration the floor keeps
  coverage at 0.95 in the RepoScan-like design and costs a few points only where most
  instances show no difference at all: see experiments/calibrate_intervals.py.) Given
  ``bounds`` (the range of the estimand, e.g. [-1, 1] for a difference of rates) the interval
  is intersected with it, which cannot lower coverage, and ``ci_method`` says ``clipped``.
* ``bca``: ``scipy.stats.bootstrap(method="BCa")`` over the cluster means; where scipy cannot
  form it (it returns NaN for some near-degenerate inputs, e.g. when no resample lies below the
  estimate), that row falls back to the percentile interval and says so in its method.
* ``studentized-inf``: the same with ``t* = +-inf`` for zero-spread resamples (comparison).
* ``percentile``: ``scipy.stats.bootstrap(method="percentile")`` (known to under-cover with
  6-9 clusters: kept for comparison).
* ``t``: the analytic Student-t interval ``mean +- t(k-1) sd / sqrt(k)`` (comparison only).

No interval is clamped to contain the estimate. A row whose cluster means are all equal (or has
one cluster) is **degenerate**: no interval (NaN) and ``degenerate = True``.

Test (:func:`sign_flip_p`): the paired randomization test over clusters. Under the null of no
effect the two controllers are exchangeable within each pair, so every cluster mean is equally
likely to have either sign; the two-sided p-value is the share of sign assignments ``s`` with
``|mean(s * m)| >= |mean(m)|``. All ``2^k`` assignments are enumerated for ``k <= 16`` (exact;
2^9 = 512 for RepoScan's 9 instances, so the smallest possible p is 2/512); above that ``n_mc``
random assignments from the seeded generator give ``(1 + hits) / (1 + n_mc)``.

Holm (:func:`holm`): the step-down family-wise adjustment over the p-values given (NaN ignored).
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from functools import lru_cache
from typing import Any

import numpy as np

METHODS = ("studentized", "studentized-inf", "bca", "percentile", "t")
DEFAULT_METHOD = "studentized"
MAX_EXACT_FLIPS = 16
_TIE = 1e-9


def row_rng(seed: int, *parts: Any) -> np.random.Generator:
    """A generator seeded from ``seed`` and a row's identity (stable across runs and rows)."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF,
                                                         int.from_bytes(digest[:8], "little")]))


def degenerate(means: np.ndarray) -> np.ndarray:
    """``True`` per row whose cluster means are all equal (one cluster included)."""
    m = np.asarray(means, dtype=float)
    span = m.max(axis=-1) - m.min(axis=-1)
    return span <= _TIE * np.maximum(1.0, np.abs(m).max(axis=-1))


def interval(means: np.ndarray, *, rng: np.random.Generator, method: str = DEFAULT_METHOD,
             confidence: float = 0.95, n_resamples: int = 9999,
             bounds: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """Interval for the mean of the cluster means, per row of ``means`` (shape ``(..., k)``).

    Returns ``(low, high, method_used)`` arrays of the leading shape; ``method_used`` names the
    method actually applied to each row (a BCa row that fell back says ``percentile (BCa
    undefined)``; a studentized bound clipped to ``bounds`` says ``clipped``). Degenerate rows
    (:func:`degenerate`) get NaN bounds and the method ``none (degenerate)``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown interval method {method!r}; known: {', '.join(METHODS)}")
    m = np.asarray(means, dtype=float)
    if m.ndim == 0 or m.shape[-1] == 0:
        raise ValueError("interval needs at least one cluster mean per row")
    lead = m.shape[:-1]
    flat = m.reshape(-1, m.shape[-1])
    low = np.full(len(flat), math.nan)
    high = np.full(len(flat), math.nan)
    used = np.full(len(flat), "none (degenerate)", dtype=object)
    ok = ~degenerate(flat)
    if ok.any():
        lo, hi, names = _METHOD_FN[method](flat[ok], rng=rng, confidence=confidence,
                                           n_resamples=n_resamples, bounds=bounds)
        low[ok], high[ok], used[ok] = lo, hi, names
    return low.reshape(lead), high.reshape(lead), used.reshape(lead)


def _scipy(x: np.ndarray, *, rng, confidence, n_resamples, method) -> tuple[np.ndarray, ...]:
    from scipy import stats

    with warnings.catch_warnings():
        # scipy warns (and returns NaN) where BCa is undefined; the caller handles NaN rows.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.bootstrap((x,), np.mean, axis=-1, vectorized=True, method=method,
                              confidence_level=confidence, n_resamples=n_resamples, rng=rng,
                              batch=max(1, 2_000_000 // max(1, x.size)))
    return (np.asarray(res.confidence_interval.low, dtype=float).reshape(len(x)),
            np.asarray(res.confidence_interval.high, dtype=float).reshape(len(x)))


def _percentile(x, *, rng, confidence, n_resamples, bounds):
    lo, hi = _scipy(x, rng=rng, confidence=confidence, n_resamples=n_resamples,
                    method="percentile")
    return lo, hi, np.full(len(x), "percentile cluster bootstrap", dtype=object)


def _bca(x, *, rng, confidence, n_resamples, bounds):
    lo, hi = _scipy(x, rng=rng, confidence=confidence, n_resamples=n_resamples, method="BCa")
    names = np.full(len(x), "BCa cluster bootstrap", dtype=object)
    bad = np.isnan(lo) | np.isnan(hi)
    if bad.any():
        plo, phi = _scipy(x[bad], rng=rng, confidence=confidence, n_resamples=n_resamples,
                          method="percentile")
        lo[bad], hi[bad] = plo, phi
        names[bad] = "percentile cluster bootstrap (BCa undefined)"
    return lo, hi, names


def _t(x, *, rng, confidence, n_resamples, bounds):
    from scipy import stats

    k = x.shape[-1]
    est = x.mean(axis=-1)
    se = x.std(axis=-1, ddof=1) / math.sqrt(k)
    q = stats.t.ppf(0.5 + confidence / 2, k - 1)
    return est - q * se, est + q * se, np.full(len(x), "t interval over clusters", dtype=object)


def _studentized(x, *, rng, confidence, n_resamples, bounds, zero_spread: str = "floor"):
    k = x.shape[-1]
    est = x.mean(axis=-1)
    se = x.std(axis=-1, ddof=1) / math.sqrt(k)
    alpha = 1 - confidence
    q_hi = np.empty(len(x))
    q_lo = np.empty(len(x))
    step = max(1, 4_000_000 // max(1, n_resamples * k))
    for s in range(0, len(x), step):  # bounded memory: rows x resamples x k at most ~4e6
        xb = x[s:s + step]
        idx = rng.integers(0, k, size=(len(xb), n_resamples, k))
        res = np.take_along_axis(xb[:, None, :], idx, axis=-1)
        mb = res.mean(axis=-1)
        seb = res.std(axis=-1, ddof=1) / math.sqrt(k)
        diff = mb - est[s:s + step, None]
        tol = _TIE * np.maximum(1.0, np.abs(est[s:s + step, None]))
        zero = seb <= tol
        # a resample whose clusters are all equal has no spread: studentize it with the
        # smallest positive standard error among the row's resamples (see the module docstring)
        floor = np.where(zero, np.inf, seb).min(axis=-1, keepdims=True)
        floor = np.where(np.isfinite(floor), floor, se[s:s + step, None])
        tb = diff / np.where(zero, floor, seb)
        if zero_spread == "inf":  # the comparison variant: +-inf (0 when mean* == mean)
            with np.errstate(invalid="ignore"):
                inf = np.where(np.abs(diff) <= tol, 0.0, np.sign(diff) * np.inf)
            tb = np.where(zero, inf, tb)
        tb.sort(axis=-1)
        q_lo[s:s + step] = _quantile_sorted(tb, alpha / 2)
        q_hi[s:s + step] = _quantile_sorted(tb, 1 - alpha / 2)
    lo = est - q_hi * se     # se > 0 (degenerate rows never get here); NaN/inf q stay so
    hi = est - q_lo * se
    names = np.full(len(x), "studentized cluster bootstrap", dtype=object)
    if bounds is not None:
        clipped = (lo < bounds[0]) | (hi > bounds[1]) | np.isnan(lo) | np.isnan(hi)
        lo = np.clip(np.nan_to_num(lo, nan=bounds[0]), bounds[0], bounds[1])
        hi = np.clip(np.nan_to_num(hi, nan=bounds[1]), bounds[0], bounds[1])
        names[clipped] = "studentized cluster bootstrap (clipped to metric range)"
    return lo, hi, names


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


def _studentized_inf(x, **kw):
    lo, hi, names = _studentized(x, zero_spread="inf", **kw)
    return lo, hi, np.array([n.replace("studentized", "studentized (+-inf)", 1) for n in names],
                            dtype=object)


_METHOD_FN = {"studentized": _studentized, "studentized-inf": _studentized_inf, "bca": _bca,
              "percentile": _percentile, "t": _t}


# ----- the randomization test -------------------------------------------------------------
@lru_cache(maxsize=MAX_EXACT_FLIPS + 1)
def _all_signs(k: int) -> np.ndarray:
    codes = np.arange(2 ** k, dtype=np.int64)[:, None]
    bits = (codes >> np.arange(k, dtype=np.int64)) & 1
    signs = 1.0 - 2.0 * bits
    signs.setflags(write=False)
    return signs


def sign_flip_p(means: np.ndarray, *, rng: np.random.Generator, n_mc: int = 9999,
                max_exact: int = MAX_EXACT_FLIPS) -> tuple[np.ndarray, str]:
    """Two-sided paired randomization p-value per row of ``means`` (shape ``(..., k)``).

    Returns ``(p, method)`` with ``method`` ``"exact sign-flip (2^k of 2^k)"`` or ``"Monte
    Carlo sign-flip (n_mc draws)"``. A row whose means are all zero gets p = 1.
    """
    m = np.asarray(means, dtype=float)
    k = m.shape[-1]
    if k == 0:
        raise ValueError("sign_flip_p needs at least one cluster mean per row")
    obs = np.abs(m.mean(axis=-1))
    tol = _TIE * np.maximum(1.0, obs)
    if k <= max_exact:
        signs = _all_signs(k)
        flipped = np.abs(m @ signs.T) / k
        p = (flipped >= (obs - tol)[..., None]).mean(axis=-1)
        return p, f"exact sign-flip ({2 ** k} assignments)"
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_mc, k))
    flipped = np.abs(m @ signs.T) / k
    hits = (flipped >= (obs - tol)[..., None]).sum(axis=-1)
    return (1 + hits) / (1 + n_mc), f"Monte Carlo sign-flip ({n_mc} draws)"


def holm(p_values) -> np.ndarray:
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
