"""Sweep throughput: the offline controller ablation in-process and on a 2-worker process pool.

    python experiments/bench_sweep.py [--experiment experiments/controller_ablation.yaml]
                                      [--limit N] [--sync-interval S] [--keep DIR]

Each configuration runs the whole experiment into a fresh temporary run directory (through the
same writer as ``pushbench run``, no progress bar, no report) and prints episodes/s, steps/s,
total seconds and the ratio to the 60 s target for the whole controller ablation
(ratio < 1 means within target). It also checks that both runs wrote identical metric fields.
The 1-minute load average is printed because these machines are shared: other load inflates
the times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pushbench.runner.executors.local import InProcessExecutor, LocalPoolExecutor
from pushbench.runner.experiment import expand, load_experiment
from pushbench.runner.sweep import run_experiment

TARGET_SECONDS = 60.0
HERE = Path(__file__).resolve().parent


def _lines(run_dir: Path) -> dict[str, dict]:
    with open(run_dir / "episodes.jsonl") as f:
        return {d["key"]: d for d in map(json.loads, f)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default=str(HERE / "controller_ablation.yaml"))
    ap.add_argument("--limit", type=int, default=None, help="only the first N episodes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--sync-interval",
        type=float,
        default=0.5,
        help="writer group-commit interval (0: fsync every episode)",
    )
    ap.add_argument("--keep", default=None, help="keep run directories under this folder")
    args = ap.parse_args()

    exp = load_experiment(args.experiment)
    n = len(expand(exp, limit=args.limit))
    root = Path(args.keep or tempfile.mkdtemp(prefix="pushbench-bench-"))
    print(
        f"experiment {exp.name}: {n} episodes; cpus {os.cpu_count()}; "
        f"load avg {os.getloadavg()[0]:.2f}; sync interval {args.sync_interval} s"
    )
    print(
        f"{'executor':<14}{'episodes':>9}{'steps':>9}{'seconds':>9}{'episodes/s':>12}"
        f"{'steps/s':>10}{'vs 60 s':>9}"
    )
    results = {}
    try:
        for label, executor in (
            ("inprocess", InProcessExecutor()),
            (f"process x{args.workers}", LocalPoolExecutor(args.workers)),
        ):
            out = root / label.replace(" ", "_")
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            with executor:
                s = run_experiment(
                    exp,
                    out,
                    executor=executor,
                    progress=False,
                    limit=args.limit,
                    sync_interval=args.sync_interval,
                )
            total = time.perf_counter() - t0  # includes pool start-up and final sync
            # scale a --limit run up to the whole experiment for the target ratio
            full = total * len(expand(exp)) / max(1, s["ran"])
            results[label] = out
            print(
                f"{label:<14}{s['ran']:>9}{s['steps']:>9}{total:>9.2f}{s['ran'] / total:>12.1f}"
                f"{s['steps'] / total:>10.0f}{full / TARGET_SECONDS:>9.2f}"
                + (f"  (errors: {s['errors']:d})" if s["errors"] else "")
            )
        a, b = (_lines(p) for p in results.values())
        same = a.keys() == b.keys() and all(a[k]["metrics"] == b[k]["metrics"] for k in a)
        print(f"identical metric fields across executors: {same}")
        return 0 if same else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
