"""How a GRPO run would use PushBench through OpenEnv (rollouts and advantages; no training).

GRPO samples a group of G completions for the same prompt and scores each against the group:
advantage_i = (R_i - mean(R)) / (std(R) + eps). Here a prompt is a PushBench episode start
(task, seed): every member of a group is reset with the same task and seed, so the members
differ only by the policy's sampling. This script starts a PushBench OpenEnv server (or uses
``--env-url``), rolls out the groups, and prints each member's return, its parts (from the
verifier, via the episode record) and its group-relative advantage: exactly the numbers a GRPO
trainer would weight the completions' token log-probabilities by.

    # scripted policy (simulated: an offline PushBench agent, no model needed)
    python experiments/grpo_openenv_example.py --policy simulated-mid --group-size 4
    # a model behind any OpenAI-compatible server (e.g. llama_cpp.server, vLLM)
    python experiments/grpo_openenv_example.py --model-url http://127.0.0.1:8080/v1 \\
        --model SmolLM2-135M-Instruct --budget 6 --group-size 4 --context-tokens 1024

With TRL, the same pieces go into ``GRPOTrainer``'s custom rollout function (TRL's OpenEnv
guide): for each prompt, ``llm_rollout`` (or a token-level variant using the trainer's own
generation) with the trainer's sampling, returning the completions and ``Rollout.total`` as the
environment reward that a reward function passes through. Training is not run here (no GPU,
and CI never trains).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import threading
import time

from pushbench.adapters.openenv_env import PushBenchClient, create_pushbench_app
from pushbench.adapters.openenv_rollout import Rollout, llm_rollout, policy_rollout


def group_advantages(returns: list[float], eps: float = 1e-6) -> list[float]:
    """GRPO's group-relative advantages: (R - mean) / (population std + eps)."""
    mean = statistics.fmean(returns)
    std = statistics.pstdev(returns)
    return [(r - mean) / (std + eps) for r in returns]


@contextlib.contextmanager
def local_server(max_concurrent: int = 4):
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # "critical": openenv-core 0.3.0 logs a harmless traceback when a client ends its session
    # first (its server then closes an already closed WebSocket).
    server = uvicorn.Server(
        uvicorn.Config(
            create_pushbench_app(max_concurrent), host="127.0.0.1", port=port, log_level="critical"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the OpenEnv server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="RepoScan-N10,DataOps-N3")
    ap.add_argument("--seeds", default="0,1", help="env seeds: one GRPO prompt per task x seed")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--controller", default="standard")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--policy", default="simulated-mid", help="offline policy when no --model-url")
    ap.add_argument("--model-url", default=None, help="OpenAI-compatible base URL")
    ap.add_argument("--model", default="SmolLM2-135M-Instruct")
    ap.add_argument("--api-key", default="unused")
    ap.add_argument("--context-tokens", type=int, default=None)
    ap.add_argument("--env-url", default=None, help="a running PushBench OpenEnv server")
    ap.add_argument(
        "--weights",
        default="accepted=0.1,success=1,verified_fraction=0.5,duplicate=0.05",
        help="reward weights (RewardWeights fields)",
    )
    args = ap.parse_args()
    weights = {k: float(v) for k, v in (kv.split("=") for kv in args.weights.split(","))}
    chat = None
    if args.model_url:
        import openai

        chat = openai.OpenAI(base_url=args.model_url, api_key=args.api_key, timeout=600)
    who = (
        f"model {args.model} at {args.model_url}"
        if chat
        else f"policy {args.policy} (SIMULATED: an offline scripted agent, not a model)"
    )
    print(f"GRPO rollouts, {who}; group size {args.group_size}; weights {weights}")
    server = contextlib.nullcontext(args.env_url) if args.env_url else local_server()
    with server as url, PushBenchClient(base_url=url).sync() as env:
        for task in args.tasks.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                group: list[Rollout] = []
                for g in range(args.group_size):
                    common = dict(
                        controller=args.controller, budget=args.budget, reward_weights=weights
                    )
                    if chat is not None:
                        group.append(
                            llm_rollout(
                                env,
                                chat,
                                args.model,
                                task,
                                seed,
                                temperature=1.0,
                                sampling_seed=g,
                                context_tokens=args.context_tokens,
                                **common,
                            )
                        )
                    else:  # group members differ by the policy's seed only
                        group.append(
                            policy_rollout(
                                env, args.policy, task, seed, policy_seed=1000 * seed + g, **common
                            )
                        )
                adv = group_advantages([r.total for r in group])
                print(f"\nprompt: {task} seed {seed} (instance {group[0].record['instance']})")
                print(
                    f"  {'member':<7}{'return':>8}{'valid':>7}{'success':>9}{'dup rate':>10}"
                    f"{'steps':>7}{'advantage':>11}"
                )
                for g, (r, a) in enumerate(zip(group, adv, strict=True)):
                    m = r.record["metrics"]
                    dup = m["duplicate_submit_rate"]
                    print(
                        f"  {g:<7}{r.total:>8.3f}{m['valid_count']:>7}{str(m['success']):>9}"
                        f"{'-' if dup is None else f'{dup:.2f}':>10}{m['steps_used']:>7}"
                        f"{a:>11.3f}"
                    )


if __name__ == "__main__":
    main()
