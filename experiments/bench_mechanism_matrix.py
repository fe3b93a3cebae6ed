"""CPU cost of the mechanism matrix, measured on a seeded sample of its episodes. SIMULATED agents.

    python experiments/bench_mechanism_matrix.py [--fraction 0.1] [--seed 0]

Wall-clock time of ``experiments/mechanism_matrix.py`` depends on what else the machine runs;
process CPU time does not (much). This runs a seeded random ``fraction`` of each family's
episodes in this process (``time.process_time``), extrapolates the CPU seconds of the whole
matrix, times the delta analysis on the sampled episodes scaled the same way, and prints the
ratio to the 600 core-seconds that 2 cores give in 5 minutes. It ignores process-pool start-up
and file-system waits (reported separately by the driver's wall clock).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from pushbench.analysis.mechanism_map import mechanism_deltas
from pushbench.runner.episode import run_episode
from pushbench.runner.experiment import expand, load_experiment

HERE = Path(__file__).parent
PARTS = (("reposcan", "mechanism_matrix.yaml"), ("dataops", "mechanism_matrix_dataops.yaml"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    total_cpu, sample = 0.0, []
    for family, name in PARTS:
        specs = expand(load_experiment(HERE / name))
        pick = sorted(
            rng.choice(len(specs), size=max(1, int(len(specs) * args.fraction)), replace=False)
        )
        run_episode(specs[0].task_id, "standard", "simulated-base", 0)  # warm caches
        c0 = time.process_time()
        for i in pick:
            s = specs[i]
            sample.append(
                run_episode(
                    s.task_id,
                    s.controller,
                    s.policy,
                    s.seed,
                    instance=s.instance,
                    policy_params=s.policy_params,
                )
            )
        cpu = time.process_time() - c0
        est = cpu / len(pick) * len(specs)
        total_cpu += est
        print(
            f"{family}: {len(pick)}/{len(specs)} episodes sampled, {cpu / len(pick) * 1e3:.1f} "
            f"CPU ms/episode -> {est:.0f} CPU s for all {len(specs)}"
        )
    c0 = time.process_time()
    mechanism_deltas(sample, n_resamples=1999)
    analysis = (time.process_time() - c0) / args.fraction
    total_cpu += analysis
    print(f"analysis (1999 resamples): ~{analysis:.0f} CPU s at full size (scaled linearly)")
    print(
        f"total ~{total_cpu:.0f} CPU s = {total_cpu / 2:.0f} s on 2 cores; "
        f"ratio to the 5-minute budget (600 core-s): {total_cpu / 600:.2f}"
    )


if __name__ == "__main__":
    main()
