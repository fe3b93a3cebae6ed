"""Calibration of the paired-delta statistics on synthetic data with a known effect.

The data mimic one paired-delta row of the report: ``k`` task instances (clusters), ``s`` seeds
per instance, binary outcomes (success), controller B the baseline and controller A the
treatment, matched on (instance, seed). Outcomes follow a logistic random-effects model::

    u_i  ~ N(0, sd_instance^2)     instance difficulty (shared by both controllers)
    v_i  ~ N(0, sd_effect^2)       instance-specific treatment effect
    w_ij ~ N(0, sd_seed^2)         seed-level draw shared by the pair (what pairing removes)
    Y_B,ij ~ Bernoulli(expit(b0 + u_i + w_ij))
    Y_A,ij ~ Bernoulli(expit(b0 + b1 + u_i + v_i + w_ij))

The estimand is the population mean difference in success probability over instances and seeds,
``E[expit(b0 + b1 + u + v + w) - expit(b0 + u + w)]``, computed by Gauss-Hermite quadrature
(not by simulation). Each replication reduces to the ``k`` cluster means of the paired
differences, exactly what :mod:`.deltas` passes to :mod:`.stats`, and all replications go
through one vectorised call. ``experiments/calibrate_intervals.py`` prints the numbers;
``tests/test_stats.py`` asserts the chosen method's coverage band.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import stats


@dataclass(frozen=True)
class Scenario:
    """One synthetic design (defaults: RepoScan's 9 instances x 3 seeds, a moderate effect)."""

    name: str = "reposcan-like"
    clusters: int = 9
    seeds: int = 3
    b0: float = -0.5
    b1: float = 1.0
    sd_instance: float = 1.0
    sd_effect: float = 0.5
    sd_seed: float = 0.5


def _expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def true_delta(sc: Scenario, nodes: int = 40) -> float:
    """The estimand by 3-D Gauss-Hermite quadrature over (u, v, w)."""
    x, w = np.polynomial.hermite_e.hermegauss(nodes)  # weight exp(-x^2/2)
    w = w / w.sum()
    u, v, s = np.meshgrid(x * sd_or_zero(sc.sd_instance), x * sd_or_zero(sc.sd_effect),
                          x * sd_or_zero(sc.sd_seed), indexing="ij")
    wt = w[:, None, None] * w[None, :, None] * w[None, None, :]
    diff = _expit(sc.b0 + sc.b1 + u + v + s) - _expit(sc.b0 + u + s)
    return float((wt * diff).sum())


def sd_or_zero(sd: float) -> float:
    return float(sd) if sd > 0 else 0.0


def simulate(sc: Scenario, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``(reps, clusters)`` cluster means of the paired differences A - B."""
    k, s = sc.clusters, sc.seeds
    u = rng.normal(0, 1, (reps, k, 1)) * sc.sd_instance
    v = rng.normal(0, 1, (reps, k, 1)) * sc.sd_effect
    w = rng.normal(0, 1, (reps, k, s)) * sc.sd_seed
    yb = rng.random((reps, k, s)) < _expit(sc.b0 + u + w)
    ya = rng.random((reps, k, s)) < _expit(sc.b0 + sc.b1 + u + v + w)
    return (ya.astype(float) - yb.astype(float)).mean(axis=-1)


@dataclass(frozen=True)
class Calibration:
    method: str
    coverage: float            # share of non-degenerate replications whose interval holds truth
    coverage_all: float        # degenerate replications counted as misses (no interval)
    degenerate: float          # share of replications without an interval
    mean_width: float
    reject_rate: float         # share with sign-flip p < 1 - confidence
    truth: float
    reps: int


def calibrate(sc: Scenario, method: str, reps: int = 1000, seed: int = 0,
              n_resamples: int = 1999, confidence: float = 0.95) -> Calibration:
    """Coverage of ``method``'s interval and rejection rate of the sign-flip test on ``sc``."""
    rng = np.random.default_rng(seed)
    means = simulate(sc, reps, rng)
    truth = true_delta(sc)
    lo, hi, _ = stats.interval(means, rng=rng, method=method, confidence=confidence,
                               n_resamples=n_resamples, bounds=(-1.0, 1.0))
    p, _ = stats.sign_flip_p(means, rng=rng)
    has = ~np.isnan(lo)
    hit = has & (lo <= truth) & (truth <= hi)
    return Calibration(
        method=method,
        coverage=float(hit[has].mean()) if has.any() else float("nan"),
        coverage_all=float(hit.mean()),
        degenerate=float((~has).mean()),
        mean_width=float((hi - lo)[has].mean()) if has.any() else float("nan"),
        reject_rate=float((p < 1 - confidence).mean()),
        truth=truth, reps=reps)


def monte_carlo_se(p: float, reps: int) -> float:
    """Standard error of a proportion estimated from ``reps`` replications."""
    return float(np.sqrt(p * (1 - p) / reps))
