"""Component effects over a population of SIMULATED agents drawn from the committed dose prior.

    python experiments/mechanism_population.py --out runs/mechanism_population [--workers 2]

For each family of experiments/mechanism_population.yaml: draws the population (the prior's
seed; :mod:`pushbench.runner.population`), runs every agent under ``standard`` and each
component-alone controller on the family's tasks with the ordinary runner into OUT/<family>
(re-running resumes), then writes

    OUT/population_agents.csv    every drawn agent and its doses
    OUT/population_effects.csv   one row per family x agent x controller x metric
    OUT/population_summary.csv   per family x controller x metric: median, p10, p90, shares
                                 helped / harmed / unchanged over the agents
    OUT/population_summary.md    the success table as docs/results.md shows it
    OUT/population_<metric>.png  the effect distribution per component and family

and prints each family's wall-clock seconds and, with ``--workers 1`` (episodes run in this
process), its exact CPU seconds against the 10 CPU-minute budget. With a process pool the CPU
of the workers cannot be read here: they are children of multiprocessing's forkserver, not of
this process, so ``getrusage(RUSAGE_CHILDREN)`` never sees them. Every number is from SIMULATED
agents (scripted mechanisms, not LLMs).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import pandas as pd

from pushbench.analysis.frame import load_episodes
from pushbench.analysis.population import (
    EFFECT_METRICS,
    agent_effects,
    effect_figure,
    effect_summary,
)
from pushbench.runner.population import draw_agents, load_prior, population_experiment
from pushbench.runner.sweep import run_experiment

HERE = Path(__file__).parent
BUDGET_CPU_S = 600.0  # 10 CPU-minutes per family


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _markdown(summary: pd.DataFrame, prior_path: Path, seed: int, n: int) -> str:
    t = summary[summary["metric"] == "success"]
    lines = [
        f"SIMULATED agents: {n} per family drawn from `{prior_path.name}` (seed {seed}); "
        "effect = controller - standard in success points, per agent over its tasks.",
        "",
        "| family | controller | median | 10th-90th pct | helped | harmed | unchanged |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in t.itertuples():
        lines.append(
            f"| {r.family} | `{r.controller}` | {r.median:+.1f} | "
            f"[{r.p10:+.1f}, {r.p90:+.1f}] | {r.helped:.0%} | {r.harmed:.0%} | "
            f"{r.unchanged:.0%} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--prior", type=Path, default=HERE / "mechanism_population.yaml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    prior = load_prior(args.prior)
    args.out.mkdir(parents=True, exist_ok=True)
    episodes, agents = [], []
    for family in prior.families:
        exp = population_experiment(prior, family, workers=args.workers)
        t, c = time.perf_counter(), _cpu()
        s = run_experiment(exp, args.out / family, progress=args.progress)
        cpu = _cpu() - c
        cost = (
            f"{cpu:.0f} CPU-s, {cpu / BUDGET_CPU_S:.2f} of the 10 CPU-minute budget"
            f"{' (resumed episodes not counted)' if s['skipped'] else ''}"
            if args.workers == 1
            else "CPU of pool workers not measurable: use --workers 1"
        )
        print(
            f"{family}: {s['total']} episodes ({s['ran']} run now, {s['skipped']} resumed), "
            f"{s['errors']} errors, {time.perf_counter() - t:.1f} s wall; {cost}",
            flush=True,
        )
        episodes += load_episodes(args.out / family / "episodes.jsonl")
        agents += [
            {"family": family, "policy": a["label"], **a["params"]}
            for a in draw_agents(prior, family)
        ]
    effects = agent_effects(episodes)
    summary = effect_summary(effects)
    pd.DataFrame(agents).to_csv(args.out / "population_agents.csv", index=False)
    effects.to_csv(args.out / "population_effects.csv", index=False)
    summary.to_csv(args.out / "population_summary.csv", index=False)
    md = _markdown(summary, args.prior, prior.seed, prior.agents_per_family)
    (args.out / "population_summary.md").write_text(md, encoding="utf-8")
    for metric in EFFECT_METRICS:
        effect_figure(effects, metric, args.out / f"population_{metric}.png")
    print(md)
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
