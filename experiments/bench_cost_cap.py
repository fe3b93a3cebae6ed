"""Benchmark: what the spend limits cost per model call (pushbench/spend.py).

Real episodes (native ``llm`` policy, RepoScan-N10, the real ``openai`` client over loopback
HTTP to the stub server with zero injected latency, so the harness share is as large as it can
be) run alternately in two arms, round after round:

* ``off``: no cost cap and no token cap (the check returns after one test);
* ``on``: a cost cap (a process meter, as the ``inprocess``/``async`` executors install) and a
  per-episode token cap, both set high enough never to trip, so every call estimates its prompt
  (chars/4 over the history and tool definitions), compares and charges.

It prints the wall time per model call of each arm, the ratio on/off (median over rounds, with
its range), and the time inside the check itself per call (measured by timing the client's
``check_spend`` in the ``on`` arm) as a share of a call. Against a hosted model (0.3-10 s per
call) the absolute check time is what matters.

    python experiments/bench_cost_cap.py                     # 7 rounds x 4 episodes x 20 steps
    python experiments/bench_cost_cap.py --rounds 11 --episodes 8 --budget 40 --context 16000
"""

from __future__ import annotations

import argparse
import statistics
import time

TASK = "RepoScan-N10"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--episodes", type=int, default=4, help="episodes per arm per round")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--context", type=int, default=8000)
    args = ap.parse_args(argv)

    from pushbench import spend
    from pushbench.policies.llm import client as client_mod
    from pushbench.policies.llm.stub import StubServer
    from pushbench.runner.episode import run_episode

    inside = {"s": 0.0, "n": 0}
    original = client_mod.ChatClient.check_spend

    def timed(self, messages, tools, usage):
        t0 = time.perf_counter()
        try:
            return original(self, messages, tools, usage)
        finally:
            inside["s"] += time.perf_counter() - t0
            inside["n"] += 1

    client_mod.ChatClient.check_spend = timed
    with StubServer() as stub:
        params = {
            "model": "stub",
            "base_url": stub.url,
            "api_key_env": None,
            "context_tokens": args.context,
            "max_tokens": 256,
            "timeout": 30,
            "prices": {"stub": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}},
        }

        def arm(on: bool) -> tuple[float, int]:
            calls = 0
            t0 = time.perf_counter()
            previous = spend.install(spend.Meter(1e9) if on else None)
            try:
                for seed in range(args.episodes):
                    rec = run_episode(
                        TASK,
                        "standard",
                        "llm",
                        seed,
                        budget=args.budget,
                        policy_params=params,
                        max_episode_tokens=10**9 if on else None,
                    )
                    calls += rec["usage"]["calls"]
            finally:
                spend.install(previous)
            return time.perf_counter() - t0, calls

        arm(False)  # warm-up: snapshot index loads, HTTP connection, imports
        per_call = {"off": [], "on": []}
        ratios = []
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {}
            for on in order:
                secs, calls = arm(on)
                got[on] = secs / calls
            per_call["off"].append(got[False])
            per_call["on"].append(got[True])
            ratios.append(got[True] / got[False])
    client_mod.ChatClient.check_spend = original
    check_us = 1e6 * inside["s"] / max(1, inside["n"])
    off = statistics.median(per_call["off"])
    print(
        f"rounds {args.rounds}, {args.episodes} episodes x budget {args.budget} per arm, "
        f"context_tokens {args.context}, loopback stub with zero latency"
    )
    print(
        f"per model call: off {1e3 * off:.3f} ms, on "
        f"{1e3 * statistics.median(per_call['on']):.3f} ms (medians over rounds)"
    )
    print(
        f"ratio on/off: median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f})"
    )
    print(
        f"inside the check (on arm): {check_us:.1f} us per call = "
        f"{check_us / (1e6 * off):.2%} of a zero-latency call; "
        f"{check_us / 3e5:.4%} of a 0.3 s hosted call"
    )


if __name__ == "__main__":
    main()
