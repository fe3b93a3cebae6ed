"""Executor throughput: in-process vs process pool vs local Ray on the offline controller ablation.

    python experiments/bench_executors.py [--experiment experiments/controller_ablation.yaml]
                                          [--limit N] [--workers 2] [--repeat R] [--no-single]
                                          [--keep DIR]

Every configuration runs the same episodes through :func:`run_experiment` (same writer as
``pushbench run``; no progress bar, no report) into a fresh run directory:

* ``inprocess``: one after another in this process (the baseline);
* ``process xW``: the local process pool with W workers;
* ``ray xW``: a local Ray instance with W CPUs (``ray.init(num_cpus=W,
  include_dashboard=False)``), one Ray task per episode;
* with one slot (unless ``--no-single``): ``process x1`` and ``ray x1``, whose extra time over
  in-process is the executor's own per-episode cost with no parallel speed-up mixed in.

Start-up (pool or Ray instance, workers importing pushbench, first indexes loaded) is timed
separately by a warm-up run of a few episodes on the same executor, then the measured run
starts with warm workers (``--repeat R`` measures R runs on the same warm executor, each into a
fresh directory, and reports the median). Columns:

* ``startup s``: Ray/pool start plus the warm-up run;
* ``ep/s``: measured episodes per second (wall clock);
* ``ms/ep``: wall milliseconds per episode;
* ``slot-ms/ep``: ``ms/ep x slots``, the worker time each episode occupies;
* ``overhead ms/ep``: ``slot-ms/ep`` minus in-process ``ms/ep``: what the executor adds per
  episode (dispatch, pickling, result shipping; with 2 slots on a 2-core machine also the
  driver competing with the workers for the cores).

The script also checks that every executor wrote the same episode lines (by key). The 1-minute
load average is printed because these machines are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pushbench.runner.executors.local import InProcessExecutor, LocalPoolExecutor
from pushbench.runner.experiment import expand, load_experiment
from pushbench.runner.sweep import run_experiment

HERE = Path(__file__).resolve().parent
WARMUP = 4


def _lines(run_dir: Path) -> dict[str, dict]:
    with open(run_dir / "episodes.jsonl") as f:
        return {d["key"]: d for d in map(json.loads, f)}


def _ray_executor(cpus: int):
    import ray

    from pushbench.runner.executors.ray import RayExecutor

    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        object_store_memory=256 * 1024**2,
        log_to_driver=False,
    )
    return RayExecutor(workers=cpus)


def _shutdown_ray() -> None:
    import ray

    ray.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default=str(HERE / "controller_ablation.yaml"))
    ap.add_argument("--limit", type=int, default=None, help="only the first N episodes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="measured runs per executor (median)")
    ap.add_argument("--no-single", action="store_true", help="skip the one-slot runs")
    ap.add_argument("--no-ray", action="store_true", help="skip Ray (e.g. not installed)")
    ap.add_argument("--keep", default=None, help="keep run directories under this folder")
    args = ap.parse_args()

    exp = load_experiment(args.experiment)
    n = len(expand(exp, limit=args.limit))
    root = Path(args.keep or tempfile.mkdtemp(prefix="pushbench-bench-exec-"))
    w = args.workers
    configs: list[tuple[str, int, object, object]] = [  # label, slots, factory, teardown
        ("inprocess", 1, InProcessExecutor, None),
        (f"process x{w}", w, lambda: LocalPoolExecutor(w), None),
    ]
    if not args.no_ray:
        configs.append((f"ray x{w}", w, lambda: _ray_executor(w), _shutdown_ray))
    if not args.no_single:
        configs.append(("process x1", 1, lambda: LocalPoolExecutor(1), None))
        if not args.no_ray:
            configs.append(("ray x1", 1, lambda: _ray_executor(1), _shutdown_ray))

    print(
        f"experiment {exp.name}: {n} episodes"
        + (f" (--limit {args.limit} of {len(expand(exp))})" if args.limit else "")
        + f"; cpus {os.cpu_count()}; load avg {os.getloadavg()[0]:.2f}; python "
        f"{sys.version.split()[0]}"
    )
    head = (
        f"{'executor':<12}{'startup s':>10}{'episodes':>9}{'seconds':>9}{'ep/s':>8}"
        f"{'ms/ep':>8}{'slot-ms/ep':>11}{'overhead ms/ep':>15}"
    )
    print(head)
    base_ms = None
    runs: dict[str, Path] = {}
    try:
        for label, slots, factory, teardown in configs:
            out = root / label.replace(" ", "_")
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            executor = factory()
            try:
                run_experiment(
                    exp,
                    root / f"warmup_{out.name}",
                    executor=executor,
                    progress=False,
                    limit=WARMUP,
                )
                startup = time.perf_counter() - t0
                times = []
                for r in range(max(1, args.repeat)):
                    target = out if r == 0 else out.with_name(f"{out.name}_{r}")
                    t1 = time.perf_counter()
                    s = run_experiment(
                        exp, target, executor=executor, progress=False, limit=args.limit
                    )
                    times.append(time.perf_counter() - t1)  # includes the writer's final sync
                seconds = statistics.median(times)
            finally:
                executor.shutdown()
                if teardown:
                    teardown()
            ms = 1000 * seconds / max(1, s["ran"])
            if base_ms is None:
                base_ms = ms
            runs[label] = out
            print(
                f"{label:<12}{startup:>10.2f}{s['ran']:>9}{seconds:>9.2f}"
                f"{s['ran'] / seconds:>8.1f}"
                f"{ms:>8.2f}{ms * slots:>11.2f}{ms * slots - base_ms:>+15.2f}"
                + (f"  (errors: {s['errors']})" if s["errors"] else ""),
                flush=True,
            )
        ref = _lines(runs["inprocess"])
        same = all(_lines(p) == ref for p in runs.values())
        print(
            f"identical episode lines across executors: {same}; load avg now "
            f"{os.getloadavg()[0]:.2f}"
        )
        return 0 if same else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
