"""Time `pushbench snapshots add` (+ index) and `pushbench tasks new` (+ calibration) on a real
~5,000-definition repository, against the goals of issue 15 (30 s and 60 s).

The repository is an installed package's source copied to a temp folder (default: `openai`,
about 5,000 definitions in the universe); everything runs in a fresh temp PUSHBENCH_HOME, so
nothing is cached beforehand. Each command runs as the user runs it (the `pushbench` command
in a subprocess, interpreter start and imports included), `--repeat` times into fresh homes;
the script prints each time, the median and its ratio to the goal (< 1 meets it).

``--compare REV`` also times `snapshots add` of the code at git revision REV (exported to a temp
folder, run the same way, interleaved with the current code's runs so both see the same load)
and prints the ratio of the medians, current / REV (<= 1: no slower), for wall-clock time and
for CPU time (user + system of the command and its children: on a shared, loaded machine the
steadier of the two); ``--add-only`` skips `tasks new`.

    python experiments/bench_own_repo.py [--package openai] [--predicate raises] [--repeat 3]
    python experiments/bench_own_repo.py --compare 550a101 --add-only --repeat 5
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ADD_GOAL, NEW_GOAL = 30.0, 60.0
ROOT = Path(__file__).resolve().parent.parent


def export_rev(rev: str, dest: Path) -> Path:
    """The package and its data folders at git revision ``rev``, unpacked into ``dest``."""
    dest.mkdir(parents=True)
    tar = subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "archive",
            rev,
            "pushbench",
            "snapshots",
            "tasks",
            "controllers",
            "pyproject.toml",
        ],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"package {name!r} is not installed as a package folder")
    return Path(list(spec.submodule_search_locations)[0])


CPU: list[float] = []  # CPU seconds of each timed command, in call order


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    t0, c0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    CPU.append(_children_cpu() - c0)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}{proc.stdout}")
    return took, proc.stdout + proc.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="openai")
    ap.add_argument("--predicate", default="raises")
    ap.add_argument("--targets", default="10,25,50,100")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--compare",
        metavar="REV",
        help="also time `snapshots add` at this git revision and print the ratio current / REV",
    )
    ap.add_argument("--add-only", action="store_true", help="skip `tasks new`")
    args = ap.parse_args()
    src_pkg = package_dir(args.package)
    exe = [sys.executable, "-m", "pushbench.cli"]
    adds, news, before = [], [], []
    adds_cpu, before_cpu = [], []
    with tempfile.TemporaryDirectory(prefix="bench-own-") as tmp:
        tmp = Path(tmp)
        src = tmp / "src"
        shutil.copytree(
            src_pkg, src / args.package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        old = export_rev(args.compare, tmp / "old") if args.compare else None
        for i in range(args.repeat):
            env = {**os.environ, "PUSHBENCH_HOME": str(tmp / f"home{i}"), "PYTHONPATH": str(ROOT)}
            env.pop("PUSHBENCH_TASKS", None)
            if old is not None:
                took, out = timed(
                    [*exe, "snapshots", "add", "bench", "--from", str(src)],
                    {**env, "PUSHBENCH_HOME": str(tmp / f"old{i}"), "PYTHONPATH": str(old)},
                )
                before.append(took)
                before_cpu.append(CPU[-1])
                n_old = re.search(r"(\d+) definitions", out).group(1)
                print(
                    f"run {i}: snapshots add + index at {args.compare}: {took:6.2f} s "
                    f"(CPU {CPU[-1]:6.2f} s)  ({n_old} definitions)",
                    flush=True,
                )
            took, out = timed([*exe, "snapshots", "add", "bench", "--from", str(src)], env)
            defs = int(re.search(r"(\d+) definitions", out).group(1))
            adds.append(took)
            adds_cpu.append(CPU[-1])
            print(
                f"run {i}: snapshots add + index: {took:6.2f} s (CPU {CPU[-1]:6.2f} s)  "
                f"({defs} definitions, {args.package} {src_pkg.parent.name})",
                flush=True,
            )
            if args.add_only:
                continue
            took, out = timed(
                [
                    *exe,
                    "tasks",
                    "new",
                    "--snapshot",
                    "bench",
                    "--predicate",
                    args.predicate,
                    "--targets",
                    args.targets,
                ],
                env,
            )
            valid = re.search(r"valid set: (\d+) of (\d+)", out)
            news.append(took)
            print(
                f"run {i}: tasks new + calibration: {took:6.2f} s  (valid {valid.group(1)} of "
                f"{valid.group(2)}, targets {args.targets})",
                flush=True,
            )
    a = statistics.median(adds)
    print(
        f"\nmedian of {args.repeat} (wall clock, CLI in a subprocess, fresh cache, "
        f"{os.cpu_count()} cores):"
    )
    print(
        f"  snapshots add + index   {a:6.2f} s   goal {ADD_GOAL:4.0f} s   ratio {a / ADD_GOAL:.2f}"
    )
    if news:
        n = statistics.median(news)
        print(
            f"  tasks new + calibration {n:6.2f} s   goal {NEW_GOAL:4.0f} s   "
            f"ratio {n / NEW_GOAL:.2f}"
        )
    if before:
        b = statistics.median(before)
        ac, bc = statistics.median(adds_cpu), statistics.median(before_cpu)
        print(
            f"  snapshots add at {args.compare}: {b:6.2f} s   current / {args.compare}: "
            f"{a / b:.2f} wall clock (<= 1: no slower)"
        )
        print(
            f"  CPU time: current {ac:6.2f} s, {args.compare} {bc:6.2f} s   current / "
            f"{args.compare}: {ac / bc:.2f}"
        )
        # each run's pair ran back to back under the same load: the steadiest comparison
        paired = statistics.median(x / y for x, y in zip(adds, before, strict=True))
        paired_cpu = statistics.median(x / y for x, y in zip(adds_cpu, before_cpu, strict=True))
        print(
            f"  paired (run by run) median ratio current / {args.compare}: wall clock "
            f"{paired:.2f}, CPU {paired_cpu:.2f}"
        )


if __name__ == "__main__":
    main()
