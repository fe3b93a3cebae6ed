"""Measure the steps the scripted `diligent` agent needs per RepoScan task (budget calibration).

Runs every single-instance task with an effectively unlimited budget and prints the steps the
agent used, the manifest's budget and the headroom ratio (budget / steps). The manifest rule
`budget(N) = base + per_unit * N` should leave the worst instance comfortable headroom.

    python experiments/calibrate_budgets.py [--family reposcan] [--policy diligent]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from pushbench.runner.episode import run_episode
from pushbench.tasks import all_tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="reposcan")
    ap.add_argument("--policy", default="diligent")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    by_target = defaultdict(list)
    print(f"{'task':45s} {'steps':>6s} {'budget':>7s} {'headroom':>9s} success")
    for tid, spec in sorted(all_tasks().items(), key=lambda kv: (kv[1].target, kv[0])):
        if spec.family != args.family or spec.is_suite:
            continue
        rec = run_episode(tid, "standard", args.policy, args.seed, budget=100_000)
        steps = rec["steps_used"]
        by_target[spec.target].append(steps)
        print(f"{tid:45s} {steps:6d} {spec.budget:7d} {spec.budget / steps:9.2f} "
              f"{rec['success']}")
    print("\ntarget  median steps  max steps  budget  max-headroom ratio (budget / max steps)")
    for n, steps in sorted(by_target.items()):
        budget = next(s.budget for s in all_tasks().values()
                      if s.family == args.family and s.target == n)
        steps = sorted(steps)
        print(f"{n:6d}  {steps[len(steps) // 2]:12d}  {steps[-1]:9d}  {budget:6d}  "
              f"{budget / steps[-1]:.2f}")


if __name__ == "__main__":
    main()
