"""CPU per simulated DataOps-lite episode on a slice of the mechanism population (issue 27).

    python experiments/bench_dataops_episode.py                 # every 40th episode (120)
    python experiments/bench_dataops_episode.py --every 10 --family reposcan
    python experiments/bench_dataops_episode.py --profile 25    # and the top 25 by cumulative time

Runs every N-th episode of the family's population (experiments/mechanism_population.yaml, in
its expansion order, so every task, agent and controller is represented) in this process with
the ordinary runner into a temporary folder, and prints episodes, CPU seconds (user + system
of this process), ms per episode and episodes per CPU-second. A slice builds each task's
backlog once for few episodes, so it costs more per episode than the full population, whose
per-family CPU the population script itself reports (``--workers 1``). Machine load inflates
CPU time: compare two versions on the same slice at the same time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import tempfile
from pathlib import Path

from pushbench.runner.experiment import expand
from pushbench.runner.population import load_prior, population_experiment
from pushbench.runner.sweep import run_experiment

HERE = Path(__file__).parent


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="dataops", choices=["dataops", "reposcan"])
    ap.add_argument("--every", type=int, default=40, help="run every N-th episode")
    ap.add_argument("--prior", type=Path, default=HERE / "mechanism_population.yaml")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also print the N functions with the most cumulative time",
    )
    args = ap.parse_args(argv)
    exp = population_experiment(load_prior(args.prior), args.family, workers=1)
    keys = {s.key for s in expand(exp)[:: max(1, args.every)]}
    prof = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory(prefix="bench-dataops-") as tmp:
        start = _cpu()
        if prof:
            prof.enable()
        summary = run_experiment(exp, Path(tmp) / "run", progress=False, keys=keys)
        if prof:
            prof.disable()
        cpu = _cpu() - start
    n = summary["ran"]
    print(
        f"{args.family}: {n} episodes ({summary['errors']} errors), {cpu:.2f} CPU-s, "
        f"{1000 * cpu / max(n, 1):.1f} ms per episode, {n / cpu:.1f} episodes per CPU-s"
        + (" (under cProfile: slower)" if prof else "")
    )
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue())


if __name__ == "__main__":
    main()
