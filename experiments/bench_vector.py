"""Steps per second of PushBench vector environments (issue 19, section 3).

Steps ``--num-envs`` copies (default 8) of ``--task`` with the seeded ``random`` policy (one
policy per copy, seeded ``seed + i``; a new episode after each autoreset) for ``--steps``
vector steps, and prints environment steps per second for each vectorization mode (sync:
one process; async: one worker process per copy) and controller (bare and ``stateqgp``), plus
the same policy on a single non-vectorised env for reference. Every process first resets
once on each instance of the task, untimed (the first episode on a snapshot loads its index).
Policy time is included (it is what a rollout pays); the async figure also includes pickling
observations through pipes. ``--policy space`` samples the action space instead (Gymnasium's
random policy, seeded): well-formed calls without reading observations.

    python experiments/bench_vector.py
    python experiments/bench_vector.py --policy space    # action-space samples: env cost mostly
    python experiments/bench_vector.py --task DataOps-N10 --steps 300 --modes sync
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import pushbench
from pushbench.policies import make_policy
from pushbench.tasks import get_task


def _warm(env, task: str) -> None:
    """Reset once on every instance of ``task`` (untimed): the first episode on a snapshot
    loads its index and computes its facts in that process, a one-off cost per process."""
    probe = pushbench.make(task)
    key = probe.unwrapped._instance_option  # "instance", "backlog" or "snapshot"
    probe.close()
    for inst in get_task(task).instances:
        env.reset(seed=0, options={key: inst})


class SpacePolicy:
    """Gymnasium's random policy: a seeded sample of the env's action space (well-formed calls,
    no reading of observations), so the rate is mostly the environments' own."""

    def __init__(self, space, seed: int) -> None:
        self.space = space
        self.space.seed(seed)

    def reset(self, obs: str) -> None:
        pass

    def act(self, obs: str | None):
        return self.space.sample()


def _policy(name: str, env, seed: int):
    if name == "space":
        return SpacePolicy(env.unwrapped.action_space if hasattr(env, "unwrapped") else env,
                           seed)
    return make_policy(name, seed=seed)


def bench_vector(task: str, controller: str | None, mode: str, num_envs: int, steps: int,
                 seed: int, policy: str = "random") -> tuple[float, int]:
    envs = pushbench.make_vec(task, num_envs, controller=controller, vectorization_mode=mode)
    try:
        _warm(envs, task)
        obs, _ = envs.reset(seed=[seed + i for i in range(num_envs)])
        if policy == "space":  # one seeded sample of the batched action space per step
            pols = [SpacePolicy(envs.action_space, seed)]
        else:
            pols = [make_policy(policy, seed=seed + i) for i in range(num_envs)]
        for p, o in zip(pols, obs):
            p.reset(o)
        # NEXT_STEP autoreset: a copy that finished at step t ignores its action at t + 1 and
        # returns the reset observation there, where its policy starts a new episode.
        resetting = np.zeros(num_envs, dtype=bool)
        episodes = 0
        t0 = time.perf_counter()
        for _ in range(steps):
            actions = (pols[0].act(None) if policy == "space"
                       else [p.act(o) for p, o in zip(pols, obs)])
            obs, _, term, trunc, _ = envs.step(actions)
            for i in np.flatnonzero(resetting) if policy != "space" else ():
                pols[i].reset(obs[i])
            done = np.logical_or(term, trunc)
            episodes += int(done.sum())
            resetting = done
        elapsed = time.perf_counter() - t0
    finally:
        envs.close()
    return num_envs * steps / elapsed, episodes


def bench_single(task: str, controller: str | None, steps: int, seed: int,
                 policy: str = "random") -> float:
    env = pushbench.make(task, controller=controller)
    pol = _policy(policy, env, seed)
    _warm(env, task)
    obs, _ = env.reset(seed=seed)
    pol.reset(obs)
    t0 = time.perf_counter()
    for _ in range(steps):
        obs, _, term, trunc, _ = env.step(pol.act(obs))
        if term or trunc:
            obs, _ = env.reset()
            pol.reset(obs)
    elapsed = time.perf_counter() - t0
    env.close()
    return steps / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="RepoScan-N50")
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2000, help="vector steps per configuration")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="sync,async")
    ap.add_argument("--policy", default="random", help="an offline policy name (reads "
                    "observations), or 'space': seeded samples of the action space")
    args = ap.parse_args()
    print(f"task {args.task}, {args.num_envs} envs, {args.steps} vector steps, seeded "
          f"{args.policy} policy (seed {args.seed}); env steps per second (policy time "
          "included)")
    print(f"{'controller':<12}{'mode':<9}{'steps/s':>10}{'episodes':>10}{'vs single':>11}")
    for controller in (None, "stateqgp"):
        single = bench_single(args.task, controller, args.steps * args.num_envs // 4, args.seed,
                              args.policy)
        name = controller or "bare"
        print(f"{name:<12}{'single':<9}{single:>10.0f}{'':>10}{1.0:>10.2f}x")
        for mode in args.modes.split(","):
            rate, episodes = bench_vector(args.task, controller, mode, args.num_envs,
                                          args.steps, args.seed, args.policy)
            print(f"{name:<12}{mode:<9}{rate:>10.0f}{episodes:>10}{rate / single:>10.2f}x")


if __name__ == "__main__":
    main()
