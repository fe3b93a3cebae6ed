"""Replay cost per episode, per family: what verifying a record by replay costs (issue 24).

For each family it runs a few in-process episodes with an offline agent (the records
``pushbench run`` writes), then times :func:`pushbench.runner.replay.check_episode` on each:
a fresh environment of the registry's task, every call replayed (RepoScan: the verifier;
DataOps: the workspace rebuilt and every checker re-run; SWE-lite: the snapshot copied and the
repository's tests re-run for every ``run_verifier`` and ``submit``). Every replay must agree
with its record. Prints a table and writes JSON.

    python experiments/bench_verify.py [--episodes 3] [--families reposcan,dataops,swelite]
        [--swelite-recipe tests/data/swelite_tiny.yaml]
        [--out experiments/results/bench_verify.json]

The first episode of an instance also pays the one-time loads (RepoScan index, SWE-lite test
venv); the median is the steady cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from pushbench.runner.episode import run_episode
from pushbench.runner.replay import check_episode
from pushbench.runner.replay_steps import steps_from_record

CASES = (  # family, task, controller, policy
    ("reposcan", "RepoScan-requests-docstring-N10", "stateqgp", "simulated-mid"),
    ("dataops", "DataOps-b1-N5", "unitqgp", "diligent"),
    ("swelite", "SWELite-requests-N3", "unitqgp", "diligent-oracle"),
)


def bench(family: str, task: str, controller: str, policy: str, episodes: int) -> dict:
    times, run_times, steps, checks = [], [], [], []
    for seed in range(episodes):
        t = time.perf_counter()
        rec = run_episode(task, controller, policy, seed=seed)
        run_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        checked = check_episode(
            rec, steps_from_record(rec), task_id=task, controller=controller, seed=seed
        )
        times.append(time.perf_counter() - t)
        if checked.reasons or checked.unverifiable:
            raise SystemExit(
                f"{task} seed {seed}: the replay disagrees with an honest record: "
                f"{checked.reasons + checked.unverifiable}"
            )
        steps.append(rec["steps_used"])
        checks.append(sum(1 for c in rec["calls"] if "check" in c))
    return {
        "family": family,
        "task": task,
        "controller": controller,
        "policy": policy,
        "episodes": episodes,
        "median_steps": statistics.median(steps),
        "median_checker_runs": statistics.median(checks),
        "replay_first_s": round(times[0], 3),
        "replay_median_s": round(statistics.median(times), 3),
        "replay_ms_per_step": round(
            1000 * statistics.median(times) / max(1, statistics.median(steps)), 2
        ),
        "run_median_s": round(statistics.median(run_times), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument(
        "--swelite-recipe",
        default=None,
        help="another SWE-lite unit recipe (e.g. tests/data/swelite_tiny.yaml)",
    )
    ap.add_argument("--families", default="reposcan,dataops,swelite")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.swelite_recipe:
        os.environ["PUSHBENCH_SWELITE_RECIPE"] = args.swelite_recipe
    wanted = set(args.families.split(","))
    rows = [bench(*case, args.episodes) for case in CASES if case[0] in wanted]
    print(
        f"{'family':9} {'task':34} {'steps':>5} {'checks':>6} {'replay 1st':>10} "
        f"{'replay med':>10} {'ms/step':>8} {'run med':>8}"
    )
    for r in rows:
        print(
            f"{r['family']:9} {r['task']:34} {r['median_steps']:>5} "
            f"{r['median_checker_runs']:>6} {r['replay_first_s']:>9}s "
            f"{r['replay_median_s']:>9}s {r['replay_ms_per_step']:>8} {r['run_median_s']:>7}s"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"rows": rows, "swelite_recipe": args.swelite_recipe}, indent=1) + "\n"
        )
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
