"""Coverage and width of the paired-delta intervals, level of the sign-flip test, on synthetic data.

Usage::

    python experiments/calibrate_intervals.py [--reps 4000] [--seed 0] [--resamples 1999]
                                              [--write-readme docs/metrics.md]

For each design (:mod:`pushbench.analysis.calibration`: logistic random-effects designs and
:class:`~pushbench.analysis.calibration.Sparse` ones where most instances tie exactly and a few
differ by a lot; "fixed": the same instances every replication, seeds random; "drawn": instances
drawn from a population; clusters = task instances, seeds nested, binary outcomes) and
each interval method of :mod:`pushbench.analysis.stats`, it measures the empirical coverage of
the 95% interval (a replication without bounds counts as the point it reports), its median
width in percentage points, and the sign-flip test's rejection rate at 5% (its type-I error in
the null designs, its power elsewhere). Everything runs through the same vectorised code the
report uses. It prints the table and, with ``--write-readme``, replaces the table between the
``calibration`` markers of docs/metrics.md.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import replace
from pathlib import Path

from pushbench.analysis import stats
from pushbench.analysis.calibration import Scenario, Sparse, calibrate, monte_carlo_se

BASE = Scenario()
DESIGNS = [
    Sparse("fixed: sparse 9 x 3, 3 of 9 respond", 9, 3, p_affected=1 / 3, p_gain=0.8),
    Sparse(
        "fixed: sparse 9 x 12, 3 of 9, noise",
        9,
        12,
        p_affected=1 / 3,
        p_gain=0.6,
        p_loss=0.05,
        p_noise=0.1,
    ),
    Sparse("fixed: sparse 6 x 4, 2 of 6 respond", 6, 4, p_affected=1 / 3, p_gain=0.8),
    Sparse("fixed: sparse 9 x 3, 1 of 9 responds", 9, 3, p_affected=1 / 9, p_gain=0.9),
    Sparse(
        "fixed: null, sparse 9 x 3 (gains = losses)", 9, 3, p_affected=1 / 3, p_gain=0.4, p_loss=0.4
    ),
    Sparse(
        "drawn: sparse 9 x 3, 30% respond", 9, 3, p_affected=0.3, p_gain=0.8, random_instances=True
    ),
    Sparse(
        "drawn: sparse 9 x 12, 30%, noise",
        9,
        12,
        p_affected=0.3,
        p_gain=0.6,
        p_loss=0.05,
        p_noise=0.1,
        random_instances=True,
    ),
    Sparse(
        "drawn: sparse 6 x 4, 25% respond", 6, 4, p_affected=0.25, p_gain=0.8, random_instances=True
    ),
    BASE,
    replace(BASE, name="drawn: null, logistic 9 x 3", b1=0.0, sd_effect=0.0),
    replace(BASE, name="drawn: logistic, small effect", b1=0.5),
    replace(BASE, name="drawn: logistic, large effect", b0=-1.0, b1=3.0),
    replace(BASE, name="drawn: logistic, 6 instances", clusters=6),
    replace(BASE, name="drawn: logistic, rare success", b0=-3.0),
    replace(BASE, name="drawn: logistic, success ceiling", b0=2.5),
]
START, END = "<!-- calibration:start -->", "<!-- calibration:end -->"


def measure(
    reps: int, seed: int, resamples: int, designs=DESIGNS, methods=stats.METHODS, log=print
) -> list[tuple]:
    """``(design, truth, {method: Calibration})`` per design."""
    out = []
    for sc in designs:
        res = {}
        for method in methods:
            t0 = time.perf_counter()
            res[method] = calibrate(sc, method, reps=reps, seed=seed, n_resamples=resamples)
            log(
                f"{sc.name:40s} {method:12s} coverage {res[method].coverage:.3f} "
                f"width {100 * res[method].median_width:5.1f} "
                f"reject {res[method].reject_rate:.3f} ({time.perf_counter() - t0:.1f} s)"
            )
        out.append((sc, res[methods[0]].truth, res))
    return out


def table(rows, reps: int, resamples: int, methods=stats.METHODS) -> str:
    """docs/metrics.md's markdown table: coverage / median width (points) per method and design."""
    head = ["design (k x seeds)", "truth", *methods, "test rejects"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    worst = {m: min(r[m].coverage for _, _, r in rows) for m in methods}
    for sc, truth, res in rows:
        cells = [f"{res[m].coverage:.3f} / {100 * res[m].median_width:.0f}" for m in methods]
        lines.append(
            f"| {sc.name} | {100 * truth:+.1f} | "
            + " | ".join(cells)
            + f" | {res[methods[0]].reject_rate:.3f} |"
        )
    lines.append(
        "| **worst coverage** | | " + " | ".join(f"**{worst[m]:.3f}**" for m in methods) + " | |"
    )
    se = monte_carlo_se(0.95, reps)
    return "\n".join(lines) + (
        f"\n\nCoverage / median width in percentage points; {reps} replications per design "
        f"(Monte-Carlo s.e. of a coverage near 0.95: {se:.3f}), {resamples} bootstrap "
        'resamples; "test rejects": share of replications where the sign-flip p < 0.05.'
    )


def write_readme(path: Path, text: str) -> None:
    old = path.read_text(encoding="utf-8")
    if START not in old or END not in old:
        raise SystemExit(f"{path} has no {START} ... {END} block")
    new = re.sub(
        re.escape(START) + ".*?" + re.escape(END),
        lambda _: f"{START}\n{text}\n{END}",
        old,
        count=1,
        flags=re.S,
    )
    path.write_text(new, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=1999)
    ap.add_argument("--write-readme", type=Path, default=None, metavar="docs/metrics.md")
    args = ap.parse_args()
    rows = measure(args.reps, args.seed, args.resamples)
    text = table(rows, args.reps, args.resamples)
    print(text)
    if args.write_readme:
        write_readme(args.write_readme, text)
        print(f"wrote the table into {args.write_readme}")


if __name__ == "__main__":
    main()
