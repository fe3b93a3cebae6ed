"""Run the mechanism matrix (both families), then write its CSV and heatmaps. SIMULATED agents.

    python experiments/mechanism_matrix.py --out runs/mechanism_matrix [--workers 2]

Runs experiments/mechanism_matrix.yaml (RepoScan) into OUT/reposcan and
experiments/mechanism_matrix_dataops.yaml (DataOps-lite) into OUT/dataops with the ordinary
runner (re-running the same command resumes; finished episodes are skipped), then writes
OUT/mechanism_deltas.csv (every ``controller - standard`` row of the paired-delta engine, per
target and pooled) and one heatmap per family and metric (OUT/heatmap_<family>_<metric>.png).
Prints the wall-clock seconds of each part and the episode rates. ``--controllers
standard,placebo`` runs only those rows (e.g. to re-measure the placebo rows after the placebo
changed; ``standard`` is needed for the deltas), ``--families dataops`` only that matrix.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pushbench.analysis.frame import load_episodes
from pushbench.analysis.mechanism_map import heatmap, mechanism_deltas
from pushbench.runner.experiment import load_experiment
from pushbench.runner.sweep import run_experiment

HERE = Path(__file__).parent
PARTS = (("reposcan", "mechanism_matrix.yaml"), ("dataops", "mechanism_matrix_dataops.yaml"))
HEAT_METRICS = ("success", "proposed_duplicate_rate")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--resamples", type=int, default=1999, help="bootstrap resamples per row")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument(
        "--controllers",
        default=None,
        help="comma-separated subset of the matrices' controllers (with standard)",
    )
    ap.add_argument(
        "--families",
        default=",".join(f for f, _ in PARTS),
        help="comma-separated subset of: reposcan, dataops",
    )
    args = ap.parse_args()
    parts = [(f, n) for f, n in PARTS if f in args.families.split(",")]
    t0 = time.perf_counter()
    episodes, order = [], {}
    for family, name in parts:
        over: dict = {"workers": args.workers} if args.workers else {}
        if args.controllers:
            over["controllers"] = args.controllers.split(",")
        exp = load_experiment(HERE / name, over or None)
        order[family] = [p.report_label for p in exp.policies]
        t = time.perf_counter()
        s = run_experiment(exp, args.out / family, progress=args.progress)
        print(
            f"{family}: {s['total']} episodes ({s['ran']} run now, {s['skipped']} resumed), "
            f"{time.perf_counter() - t:.1f} s, {s['episodes_per_s']} episodes/s, "
            f"{s['errors']} errors",
            flush=True,
        )
        episodes += load_episodes(args.out / family / "episodes.jsonl")
    t = time.perf_counter()
    table = mechanism_deltas(episodes, n_resamples=args.resamples)
    table.to_csv(args.out / "mechanism_deltas.csv", index=False)
    for family, _ in parts:
        for metric in HEAT_METRICS:
            heatmap(
                table,
                metric,
                family,
                args.out / f"heatmap_{family}_{metric}.png",
                policies=order[family],
            )
    print(f"analysis: {len(table)} delta rows, {time.perf_counter() - t:.1f} s")
    print(f"total: {time.perf_counter() - t0:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
