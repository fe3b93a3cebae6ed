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
through one vectorised call.

:class:`Sparse` is the pattern that dominates the real rows: most instances show no difference
at all (both controllers succeed, or both fail, on every seed), a few a large one. In a
responding instance each seed's paired difference is +1 with probability ``p_gain``, -1 with
``p_loss``, else 0; ``p_noise`` adds symmetric +-1 noise to the seeds that would otherwise tie.
Two readings of "the instances":

* fixed (``random_instances=False``, the benchmark's view: its 9 RepoScan instances *are* the
  task family): exactly ``round(p_affected * k)`` instances respond, the seeds are the random
  part, and the estimand is the mean over these instances, ``n_affected (p_gain - p_loss) / k``;
* drawn (``random_instances=True``): each instance responds with probability ``p_affected``,
  a new set every replication, and the estimand is ``p_affected (p_gain - p_loss)``: the mean
  over a population of instances. With 6 instances and a quarter responding, no instance
  responds in 18% of the samples, and no interval computed from six exact ties can cover a
  non-zero effect: every method under-covers there (docs/metrics.md).

``experiments/calibrate_intervals.py`` prints the numbers and writes the table of docs/metrics.md;
``tests/test_stats.py`` asserts the default method's coverage and the test's level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import stats


@dataclass(frozen=True)
class Scenario:
    """One synthetic design (defaults: RepoScan's 9 instances x 3 seeds, a moderate effect)."""

    name: str = "drawn: logistic 9 x 3 (README)"
    clusters: int = 9
    seeds: int = 3
    b0: float = -0.5
    b1: float = 1.0
    sd_instance: float = 1.0
    sd_effect: float = 0.5
    sd_seed: float = 0.5


def _expit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-x))
    return out


def true_delta(sc: Scenario, nodes: int = 40) -> float:
    """The estimand by 3-D Gauss-Hermite quadrature over (u, v, w)."""
    x, w = np.polynomial.hermite_e.hermegauss(nodes)  # weight exp(-x^2/2)
    w = w / w.sum()
    u, v, s = np.meshgrid(
        x * sd_or_zero(sc.sd_instance),
        x * sd_or_zero(sc.sd_effect),
        x * sd_or_zero(sc.sd_seed),
        indexing="ij",
    )
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
    means: np.ndarray = (ya.astype(float) - yb.astype(float)).mean(axis=-1)
    return means


@dataclass(frozen=True)
class Sparse:
    """Most instances tie exactly, a few differ by a lot (module docstring)."""

    name: str
    clusters: int
    seeds: int
    p_affected: float
    p_gain: float
    p_loss: float = 0.0
    p_noise: float = 0.0
    random_instances: bool = False

    @property
    def n_affected(self) -> int:
        return round(self.p_affected * self.clusters)


def truth_of(sc: Scenario | Sparse) -> float:
    """The estimand of either kind of scenario."""
    if isinstance(sc, Sparse):
        share = sc.p_affected if sc.random_instances else sc.n_affected / sc.clusters
        return share * (sc.p_gain - sc.p_loss)
    return true_delta(sc)


def simulate_any(sc: Scenario | Sparse, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``(reps, clusters)`` cluster means of either kind of scenario."""
    if not isinstance(sc, Sparse):
        return simulate(sc, reps, rng)
    k, s = sc.clusters, sc.seeds
    if sc.random_instances:
        hit = rng.random((reps, k, 1)) < sc.p_affected
    else:
        hit = np.arange(k)[None, :, None] < sc.n_affected
    u = rng.random((reps, k, s))
    d = np.where(u < sc.p_gain, 1.0, np.where(u < sc.p_gain + sc.p_loss, -1.0, 0.0)) * hit
    noise = (rng.random((reps, k, s)) < sc.p_noise) * rng.choice([-1.0, 1.0], (reps, k, s))
    means: np.ndarray = np.where(d == 0, noise, d).mean(axis=-1)
    return means


@dataclass(frozen=True)
class Calibration:
    method: str
    coverage: float  # share of replications whose interval holds the truth
    median_width: float
    no_interval: float  # share without bounds (counted as the point [c, c]: see below)
    reject_rate: float  # share with sign-flip p < 1 - confidence
    truth: float
    reps: int


def calibrate(
    sc: Scenario | Sparse,
    method: str,
    reps: int = 1000,
    seed: int = 0,
    n_resamples: int = 1999,
    confidence: float = 0.95,
) -> Calibration:
    """Coverage and median width of ``method``'s interval and the rejection rate of the
    sign-flip test on ``sc`` (:class:`Scenario` or :class:`Sparse`), bounds cut to [-1, 1] as
    the report cuts a difference of rates. A replication without bounds (every instance gave
    the same difference ``c``, for the bootstrap methods) counts as the point ``[c, c]``: that
    is all the row tells a reader."""
    rng = np.random.default_rng(seed)
    means = simulate_any(sc, reps, rng)
    truth = truth_of(sc)
    lo, hi, _ = stats.interval(
        means,
        rng=rng,
        method=method,
        confidence=confidence,
        n_resamples=n_resamples,
        bounds=(-1.0, 1.0),
    )
    p, _ = stats.sign_flip_p(means, rng=rng)
    none = np.isnan(lo)
    lo, hi = np.where(none, means[:, 0], lo), np.where(none, means[:, 0], hi)
    hit = (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)
    return Calibration(
        method=method,
        coverage=float(hit.mean()),
        median_width=float(np.median(hi - lo)),
        no_interval=float(none.mean()),
        reject_rate=float((p < 1 - confidence).mean()),
        truth=truth,
        reps=reps,
    )


def monte_carlo_se(p: float, reps: int) -> float:
    """Standard error of a proportion estimated from ``reps`` replications."""
    return float(np.sqrt(p * (1 - p) / reps))
