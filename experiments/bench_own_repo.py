"""Time `pushbench snapshots add` (+ index) and `pushbench tasks new` (+ calibration) on a real
~5,000-definition repository, against the goals of issue 15 (30 s and 60 s).

The repository is an installed package's source copied to a temp folder (default: `openai`,
about 5,000 definitions in the universe); everything runs in a fresh temp PUSHBENCH_HOME, so
nothing is cached beforehand. Each command runs as the user runs it (the `pushbench` command
in a subprocess, interpreter start and imports included), `--repeat` times into fresh homes;
the script prints each time, the median and its ratio to the goal (< 1 meets it).

    python experiments/bench_own_repo.py [--package openai] [--predicate raises] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ADD_GOAL, NEW_GOAL = 30.0, 60.0


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"package {name!r} is not installed as a package folder")
    return Path(list(spec.submodule_search_locations)[0])


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}{proc.stdout}")
    return took, proc.stdout + proc.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="openai")
    ap.add_argument("--predicate", default="raises")
    ap.add_argument("--targets", default="10,25,50,100")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    src_pkg = package_dir(args.package)
    exe = [sys.executable, "-m", "pushbench.cli"]
    adds, news = [], []
    with tempfile.TemporaryDirectory(prefix="bench-own-") as tmp:
        tmp = Path(tmp)
        src = tmp / "src"
        shutil.copytree(src_pkg, src / args.package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for i in range(args.repeat):
            env = {**os.environ, "PUSHBENCH_HOME": str(tmp / f"home{i}")}
            env.pop("PUSHBENCH_TASKS", None)
            took, out = timed([*exe, "snapshots", "add", "bench", "--from", str(src)], env)
            defs = int(re.search(r"(\d+) definitions", out).group(1))
            adds.append(took)
            print(f"run {i}: snapshots add + index: {took:6.2f} s  ({defs} definitions, "
                  f"{args.package} {src_pkg.parent.name})", flush=True)
            took, out = timed([*exe, "tasks", "new", "--snapshot", "bench", "--predicate",
                               args.predicate, "--targets", args.targets], env)
            valid = re.search(r"valid set: (\d+) of (\d+)", out)
            news.append(took)
            print(f"run {i}: tasks new + calibration: {took:6.2f} s  (valid {valid.group(1)} of "
                  f"{valid.group(2)}, targets {args.targets})", flush=True)
    a, n = statistics.median(adds), statistics.median(news)
    print(f"\nmedian of {args.repeat} (wall clock, CLI in a subprocess, fresh cache, "
          f"{os.cpu_count()} cores):")
    print(f"  snapshots add + index   {a:6.2f} s   goal {ADD_GOAL:4.0f} s   ratio {a / ADD_GOAL:.2f}")
    print(f"  tasks new + calibration {n:6.2f} s   goal {NEW_GOAL:4.0f} s   ratio {n / NEW_GOAL:.2f}")


if __name__ == "__main__":
    main()
