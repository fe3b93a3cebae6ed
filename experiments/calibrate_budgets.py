"""Measure the steps the scripted `diligent` agent needs per RepoScan task (budget calibration).

Runs every single-instance task with an effectively unlimited budget and prints the steps the
agent used, the manifest's budget and the headroom ratio (budget / steps). The manifest rule
`budget(N) = base + per_unit * N` should leave the worst instance at least 1.6x headroom; the
rule, the headroom check and the runs are `pushbench.runner.calibration`, the same code
`pushbench tasks new` uses for user tasks (which this script includes; `--builtin-only` not).

    python experiments/calibrate_budgets.py [--family reposcan] [--policy diligent]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from pushbench.runner.calibration import HEADROOM, calibrate, headroom_problems
from pushbench.tasks import all_tasks, builtin_tasks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="reposcan")
    ap.add_argument("--policy", default="diligent")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--builtin-only", action="store_true", help="leave user tasks out")
    args = ap.parse_args()
    specs = builtin_tasks() if args.builtin_only else all_tasks()
    ids = [
        tid
        for tid, spec in sorted(specs.items(), key=lambda kv: (kv[1].target, kv[0]))
        if spec.family == args.family and not spec.is_suite
    ]
    rows = calibrate(ids, seed=args.seed, policy=args.policy, floor=False)
    by_target = defaultdict(list)
    print(f"{'task':45s} {'steps':>6s} {'budget':>7s} {'headroom':>9s} success")
    for r in rows:
        by_target[(r.target, r.budget)].append(r.steps)
        print(f"{r.task_id:45s} {r.steps:6d} {r.budget:7d} {r.headroom:9.2f} {r.success}")
    print("\ntarget  median steps  max steps  budget  max-headroom ratio (budget / max steps)")
    for (n, budget), steps in sorted(by_target.items()):
        steps = sorted(steps)
        print(
            f"{n:6d}  {steps[len(steps) // 2]:12d}  {steps[-1]:9d}  {budget:6d}  "
            f"{budget / steps[-1]:.2f}"
        )
    problems = headroom_problems(rows)
    print(
        f"\nheadroom check (>= {HEADROOM}x for every task): "
        + ("passed" if not problems else "FAILED: " + "; ".join(problems))
    )


if __name__ == "__main__":
    main()
