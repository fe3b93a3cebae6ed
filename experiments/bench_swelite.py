"""SWE-lite numbers: kept/discarded units per snapshot, verifier run times, oracle solvability.

For each snapshot it loads (building if needed) the validated unit set, then, in one episode
of ``SWELite-<snapshot>-N10`` (the largest backlog), times ``run_verifier`` on every unit in
the mutated state and ``submit`` after the reference fix, with the ``diligent-oracle`` agent
working through the whole backlog under UNITQGP. Prints a table and writes JSON.

    python experiments/bench_swelite.py [--out experiments/results/bench_swelite.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import pushbench
from pushbench.families.swelite import units as U
from pushbench.policies import make_policy

SNAPSHOTS = ("requests", "flask", "pytest")


def bench(snapshot: str) -> dict:
    data = U.load(snapshot)
    env = pushbench.make(f"SWELite-{snapshot}-N10", controller="unitqgp")
    obs, info = env.reset(seed=0)
    inner = env.unwrapped
    verify_fail = []
    for uid in inner._units:  # mutated state: the verifier's typical first run
        t = time.monotonic()
        r = json.loads(inner.step({"tool": "run_verifier", "unit_id": uid})[0])
        verify_fail.append(time.monotonic() - t)
        assert r["result"]["passed"] is False, (snapshot, uid)
    env.close()
    # the oracle over the whole backlog (fresh episode): solvability and step/time costs
    env = pushbench.make(f"SWELite-{snapshot}-N10", controller="unitqgp")
    pol = make_policy("diligent-oracle", seed=0, solve_all=True)
    obs, info = env.reset(seed=0)
    pol.reset(obs)
    t0, term, trunc = time.monotonic(), False, False
    verify_pass = []  # timed here: records hold no wall-clock time
    while not (term or trunc):
        action = pol.act(obs)
        t = time.monotonic()
        obs, _, term, trunc, info = env.step(action)
        if isinstance(action, dict) and action.get("tool") == "run_verifier":
            verify_pass.append(time.monotonic() - t)
    wall = time.monotonic() - t0
    n = len(env.unwrapped._backlog)
    env.close()
    return {
        "snapshot": snapshot,
        "candidates": data["candidates"],
        "kept": data["kept_count"],
        "discarded": data["discarded"],
        "build_seconds": data["built_seconds"],
        "backlog_N10": n,
        "oracle_accepted": info["qgp"]["valid_count"],
        "oracle_steps": info["qgp"]["steps_used"],
        "budget_N10": info["qgp"]["budget"],
        "oracle_wall_seconds": round(wall, 1),
        "verifier_median_failing_s": round(statistics.median(verify_fail), 3),
        "verifier_median_passing_s": round(statistics.median(verify_pass), 3),
        "verifier_runs": len(verify_fail) + len(verify_pass),
        "verifier_all": [round(x, 3) for x in verify_fail + verify_pass],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="experiments/results/bench_swelite.json")
    a = ap.parse_args()
    rows = [bench(s) for s in SNAPSHOTS]
    every = [x for r in rows for x in r.pop("verifier_all")]
    summary = {
        "rows": rows,
        "verifier_median_s": round(statistics.median(every), 3),
        "verifier_runs": len(every),
    }
    print(
        f"{'snapshot':9s} {'cand':>4s} {'kept':>4s} {'disc':>4s} {'N10 backlog':>11s} "
        f"{'oracle ok':>9s} {'steps/budget':>12s} {'verify med (fail/pass) s':>24s}"
    )
    for r in rows:
        print(
            f"{r['snapshot']:9s} {r['candidates']:4d} {r['kept']:4d} {len(r['discarded']):4d} "
            f"{r['backlog_N10']:11d} {r['oracle_accepted']:9d} "
            f"{r['oracle_steps']:5d}/{r['budget_N10']:<6d} "
            f"{r['verifier_median_failing_s']:11.2f}/{r['verifier_median_passing_s']:.2f}"
        )
    print(
        f"verifier median over {summary['verifier_runs']} runs: "
        f"{summary['verifier_median_s']:.2f} s"
    )
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
