"""Mutation score per module of the measurement core (mutmut 3), each with its fast tests only.

    pip install -e ".[mutation]"
    python experiments/mutation_score.py                         # every configured module
    python experiments/mutation_score.py pushbench/families/reposcan/verifier.py   # only these
    python experiments/mutation_score.py --list                  # modules, functions, tests
    python experiments/mutation_score.py --recheck MODULE        # survivors vs current tests
    python experiments/mutation_score.py --skip-listed MODULE    # listed equivalents not run

The modules, the tests that judge each one and (optionally) the functions whose mutants count
live in ``[tool.pushbench.mutation.modules]`` of pyproject.toml, next to the ``[tool.mutmut]``
table that a plain ``mutmut run`` uses; the two module lists must agree. mutmut reads its
configuration from the working directory only, so each module runs in a scratch copy of the
repository (``mutants/score/<module>/``, which mutmut fills with its own ``mutants/`` copy)
whose ``[tool.mutmut]`` names that module and its tests alone.

Per module the script prints the mutants generated, how many the tests killed (a mutmut
``timeout`` counts as killed: the tests noticed), survived, had no test reaching them, and the
equivalent ones listed in ``experiments/mutation_equivalents.yaml`` (mutants that behave exactly
like the original, each with a one-line reason). Scores: killed / total and killed /
non-equivalent. Survivors that are not listed as equivalent are shown with their diff. A
listed equivalent whose mutant no longer exists or no longer changes the quoted code is
reported as stale and not counted. ``--skip-listed`` does not run the listed equivalents at
all (each would run every test that reaches it): much faster, but a listed mutant that a new test
kills is then not noticed (their diffs are still checked against the quoted code). Wall-clock
seconds per module are printed (they vary with
the machine; nothing asserts them). Exit status 1 when a module's killed / non-equivalent is
below ``--fail-under`` (default: report only).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "experiments" / "mutation_equivalents.yaml"
WORK = ROOT / "mutants" / "score"
COPY = ("pushbench", "tests", "tasks", "snapshots", "controllers", "pyproject.toml")
KILLED = ("killed", "timeout")
STATUS = re.compile(r"^\s+(\S+__mutmut_\d+): (.+)$")


@dataclass
class Target:
    module: str  # path relative to the repository root
    tests: list[str]
    functions: list[str] = field(default_factory=list)  # "f" or "Class.method"; empty: all

    @property
    def dotted(self) -> str:
        return self.module.removesuffix(".py").replace("/", ".")

    def name_patterns(self) -> list[str]:
        """mutmut mutant-name globs for this target (mutmut names methods ``xǁClassǁmethod``)."""
        if not self.functions:
            return [f"{self.dotted}.*"]
        out = []
        for f in self.functions:
            cls, _, meth = f.rpartition(".")
            out.append(
                f"{self.dotted}.x\u01c1{cls}\u01c1{meth}__mutmut_*"
                if cls
                else f"{self.dotted}.x_{meth}__mutmut_*"
            )
        return out

    def owns(self, mutant: str) -> bool:
        return any(_glob(p).fullmatch(mutant) for p in self.name_patterns())


def _glob(pattern: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")))


def load_targets() -> dict[str, Target]:
    """The configured modules; refuses a pyproject whose two module lists disagree."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    modules = cfg["pushbench"]["mutation"]["modules"]
    targets = {
        m: Target(m, list(v["tests"]), list(v.get("functions", ()))) for m, v in modules.items()
    }
    mutmut = cfg["mutmut"]
    if sorted(mutmut["only_mutate"]) != sorted(targets):
        sys.exit(
            "pyproject.toml: [tool.mutmut] only_mutate and [tool.pushbench.mutation.modules] "
            f"list different modules:\n  {sorted(mutmut['only_mutate'])}\n  {sorted(targets)}"
        )
    tests = sorted({t for tg in targets.values() for t in tg.tests})
    if sorted(mutmut["pytest_add_cli_args_test_selection"]) != tests:
        sys.exit(
            "pyproject.toml: [tool.mutmut] pytest_add_cli_args_test_selection should be the "
            f"union of the modules' tests: {tests}"
        )
    for tg in targets.values():
        for path in (tg.module, *tg.tests):
            if not (ROOT / path).exists():
                sys.exit(f"pyproject.toml names {path}, which does not exist (moved?)")
    return targets


def load_equivalents() -> dict[str, dict]:
    """mutant name -> {"changes": code the mutant writes, "reason": why it is equivalent}."""
    if not EQUIVALENTS.exists():
        return {}
    data = yaml.safe_load(EQUIVALENTS.read_text()) or {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not entry.get("reason") or not entry.get("changes"):
            sys.exit(f"{EQUIVALENTS}: {name} needs a 'changes' fragment and a one-line 'reason'")
    return data


def scratch_copy(target: Target) -> Path:
    """A fresh copy of the repository whose [tool.mutmut] covers ``target`` alone."""
    work = WORK / target.dotted
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=ignore)
        else:
            shutil.copy2(src, work / name)
    text = (work / "pyproject.toml").read_text()
    table = (
        "[tool.mutmut]\n"
        f'source_paths = ["{target.module.split("/")[0]}"]\n'
        f'only_mutate = ["{target.module}"]\n'
        f"pytest_add_cli_args_test_selection = {_toml_list(target.tests)}\n"
    )
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", "", text)
    mutmut = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    for key in ("pytest_add_cli_args", "also_copy"):
        table += f"{key} = {_toml_list(mutmut.get(key, []))}\n"
    (work / "pyproject.toml").write_text(text + "\n" + table)
    return work


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def mutmut(work: Path, *args: str, log: Path | None = None, check: bool = True) -> str:
    exe = Path(sys.executable).with_name("mutmut")
    cmd = [str(exe) if exe.exists() else "mutmut", *args]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    res = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
    if log is not None:
        log.write_text(res.stdout + res.stderr)
    if check and res.returncode != 0:
        sys.exit(
            f"`{' '.join(cmd)}` failed in {work} (exit {res.returncode}):\n"
            f"{(res.stdout + res.stderr)[-3000:]}"
        )
    return res.stdout


@dataclass
class Score:
    target: Target
    seconds: float
    statuses: dict[str, str]
    equivalent: dict[str, str]
    stale: list[str]
    diffs: dict[str, str]
    what: str = "mutmut run"

    def count(self, *statuses: str) -> int:
        return sum(s in statuses for s in self.statuses.values())

    @property
    def total(self) -> int:
        return len(self.statuses)

    @property
    def killed(self) -> int:
        return self.count(*KILLED)

    @property
    def survivors(self) -> list[str]:
        return sorted(
            m
            for m, s in self.statuses.items()
            if s not in (*KILLED, "not checked") and m not in self.equivalent
        )

    def ratio(self, num: int, den: int) -> str:
        return f"{num}/{den} = {100 * num / den:.1f}%" if den else "-"


def _statuses(work: Path, target: Target) -> dict[str, str]:
    statuses = {}
    for line in mutmut(work, "results", "--all", "true").splitlines():
        m = STATUS.match(line)
        if m and target.owns(m.group(1)):
            statuses[m.group(1)] = m.group(2).strip()
    return statuses


def score(
    target: Target, equivalents: dict[str, dict], children: int, skip_listed: bool = False
) -> Score:
    work = scratch_copy(target)
    start = time.perf_counter()
    patterns = target.name_patterns()
    skipped: set[str] = set()
    if skip_listed:
        # generate the mutants (and mutmut's test map) without running any, then run all but
        # the listed equivalents: a survivor costs every test reaching it, a kill only one.
        # (mutmut fails on the name that matches nothing, after generating: expected.)
        mutmut(
            work,
            "run",
            "--max-children",
            str(children),
            f"{target.dotted}.no_such_mutant",
            log=work / "mutmut-generate.log",
            check=False,
        )
        names = sorted(_statuses(work, target))
        if not names:
            sys.exit(
                f"mutmut generated no mutants for {target.module} (see {work}/mutmut-generate.log)"
            )
        skipped = {n for n in names if n in equivalents}
        patterns = [n for n in names if n not in skipped]
    if patterns:
        mutmut(work, "run", "--max-children", str(children), *patterns, log=work / "mutmut-run.log")
    seconds = time.perf_counter() - start
    statuses = _statuses(work, target)
    if not statuses:
        sys.exit(f"mutmut produced no mutants for {target.module} (see {work}/mutmut-run.log)")
    for name in skipped:
        if statuses[name] == "not checked":
            statuses[name] = "listed, not run"
    unchecked = [m for m, s in statuses.items() if s == "not checked"]
    if unchecked:  # an interrupted run: a score over part of the mutants would mislead
        sys.exit(
            f"{len(unchecked)} of {len(statuses)} mutants of {target.module} were not "
            f"checked (interrupted?); see {work}/mutmut-run.log"
        )
    diffs, equivalent, stale = _judge_equivalents(work, target, statuses, equivalents)
    return Score(target, seconds, statuses, equivalent, stale, diffs)


def _judge_equivalents(
    work: Path, target: Target, statuses: dict[str, str], equivalents: dict[str, dict]
) -> tuple[dict, dict, list]:
    diffs = {
        m: mutmut(work, "show", m)
        for m, s in statuses.items()
        if s not in KILLED or m in equivalents
    }
    equivalent, stale = {}, []
    for name, entry in equivalents.items():
        if not target.owns(name):
            continue
        added = "\n".join(
            x[1:]
            for x in diffs.get(name, "").splitlines()
            if x.startswith("+") and not x.startswith("+++")
        )
        if name in statuses and statuses[name] not in KILLED and entry["changes"] in added:
            equivalent[name] = entry["reason"]
        else:
            stale.append(name)
    return diffs, equivalent, stale


def _last_statuses(work: Path, target: Target, equivalents: dict[str, dict]) -> dict[str, str]:
    """The statuses of the last run in ``work``; after a ``--skip-listed`` run the listed
    equivalents it never ran say ``listed, not run`` (not ``not checked``)."""
    statuses = _statuses(work, target)
    if (work / "mutmut-generate.log").exists():  # a --skip-listed run: listed ones never run
        for name in equivalents:
            if statuses.get(name) == "not checked":
                statuses[name] = "listed, not run"
    return statuses


def results_only(target: Target, equivalents: dict[str, dict]) -> Score:
    """The score of the last run of ``target`` as it stands (also while it runs), nothing run.

    Mutants not checked yet are counted as such; the ratios are then over the checked ones.
    """
    work = WORK / target.dotted
    if not (work / "mutants" / target.module).exists():
        sys.exit(f"no earlier run of {target.module} in {work}")
    statuses = _last_statuses(work, target, equivalents)
    diffs, equivalent, stale = _judge_equivalents(
        work, target, {m: s for m, s in statuses.items() if s != "not checked"}, equivalents
    )
    stale = [n for n in stale if statuses.get(n) != "not checked"]
    return Score(
        target, 0.0, statuses, equivalent, stale, diffs, what="results so far (nothing run)"
    )


def recheck(target: Target, equivalents: dict[str, dict]) -> Score:
    """Re-judge the survivors of the last full run of ``target`` against the current tests.

    The mutants stay as mutmut generated them in ``mutants/score/<module>/mutants``; the current
    test files are copied in, a clean run must pass, then each survivor that is not listed as
    equivalent is switched on through mutmut's ``MUTANT_UNDER_TEST`` and the module's tests run
    (``-x``): a failing run kills it. Meant for iterating on tests after a full run (a full run
    takes long); a source change needs a full run again (the script refuses a stale copy).
    """
    work = WORK / target.dotted
    mdir = work / "mutants"
    if not (mdir / target.module).exists():
        sys.exit(f"no earlier run of {target.module} in {work}: run it without --recheck first")
    if (ROOT / target.module).read_bytes() != (work / target.module).read_bytes():
        sys.exit(f"{target.module} changed since its last full run: run it without --recheck")
    for test in target.tests:
        for dest in (work, mdir):
            shutil.copy2(ROOT / test, dest / test)
    mutmut_cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *mutmut_cfg.get("pytest_add_cli_args", []),
        *target.tests,
    ]
    base_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}

    def run(mutant: str) -> int:
        res = subprocess.run(
            cmd,
            cwd=mdir,
            capture_output=True,
            text=True,
            env={**base_env, "MUTANT_UNDER_TEST": mutant},
        )
        return res.returncode

    start = time.perf_counter()
    if run("") != 0:
        sys.exit(f"the current tests of {target.module} fail without a mutant (in {mdir})")
    statuses = _last_statuses(work, target, equivalents)
    again = [n for n, s in sorted(statuses.items()) if s not in KILLED and n not in equivalents]
    for name in again:
        if run(name) != 0:
            statuses[name] = "killed"
    print(
        f"\n== {target.module}: the current tests kill "
        f"{sum(statuses[n] == 'killed' for n in again)} of the {len(again)} survivors of the "
        "last full run that are not listed as equivalent"
    )
    seconds = time.perf_counter() - start
    diffs, equivalent, stale = _judge_equivalents(work, target, statuses, equivalents)
    return Score(
        target, seconds, statuses, equivalent, stale, diffs, what="recheck of the survivors"
    )


def report(s: Score) -> None:
    t = s.target
    scope = f" ({', '.join(t.functions)})" if t.functions else ""
    print(f"\n== {t.module}{scope}   tests: {' '.join(t.tests)}")
    print(
        f"   mutants {s.total}: killed {s.count('killed')}, timeout {s.count('timeout')}, "
        f"survived {s.count('survived')}, no tests {s.count('no tests')}, listed and not "
        f"run {s.count('listed, not run')}, other "
        f"{s.total - s.count('killed', 'timeout', 'survived', 'no tests', 'listed, not run')}; "
        f"equivalent (listed) {len(s.equivalent)}"
    )
    unchecked = s.count("not checked")
    if unchecked:
        print(
            f"   NOT CHECKED yet: {unchecked}; the ratios are over the "
            f"{s.total - unchecked} checked"
        )
    print(f"   killed / total          {s.ratio(s.killed, s.total - unchecked)}")
    print(
        f"   killed / non-equivalent {s.ratio(s.killed, s.total - unchecked - len(s.equivalent))}"
    )
    print(f"   {s.what} took {s.seconds:.0f} s")
    for name in s.stale:
        print(f"   STALE equivalent entry (mutant gone, killed or changed): {name}")
    for name in s.survivors:
        print(f"\n   survivor {name} [{s.statuses[name]}]")
        print(
            "".join(
                f"     {x}\n"
                for x in s.diffs.get(name, "").splitlines()
                if x.startswith(("+", "-")) and not x.startswith(("+++", "---"))
            )
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="module paths (default: every configured one)")
    ap.add_argument("--list", action="store_true", help="show the configuration and exit")
    ap.add_argument(
        "--max-children",
        type=int,
        default=os.cpu_count() or 2,
        help="parallel mutant runs (default: CPU count)",
    )
    ap.add_argument(
        "--recheck",
        action="store_true",
        help="re-judge the last run's survivors against the current tests "
        "(no new mutants; see recheck())",
    )
    ap.add_argument(
        "--results",
        action="store_true",
        help="print the score of the last run as it stands (nothing is run)",
    )
    ap.add_argument(
        "--skip-listed",
        action="store_true",
        help="do not run the mutants listed as equivalent (much faster; a listed "
        "mutant that a test now kills is then not reported as stale)",
    )
    ap.add_argument(
        "--fail-under",
        type=float,
        default=0.0,
        help="exit 1 if killed / non-equivalent is below this percentage",
    )
    args = ap.parse_args(argv)
    targets = load_targets()
    unknown = [m for m in args.modules if m not in targets]
    if unknown:
        ap.error(f"not configured: {', '.join(unknown)}; configured: {', '.join(targets)}")
    chosen = [targets[m] for m in args.modules] or list(targets.values())
    if args.list:
        for t in chosen:
            print(
                f"{t.module}: tests {t.tests}"
                + (f", functions {t.functions}" if t.functions else "")
            )
        return 0
    equivalents = load_equivalents()
    failed = False
    for t in chosen:
        if args.results:
            s = results_only(t, equivalents)
        elif args.recheck:
            s = recheck(t, equivalents)
        else:
            s = score(t, equivalents, args.max_children, skip_listed=args.skip_listed)
        report(s)
        den = s.total - len(s.equivalent)
        failed |= bool(den) and 100 * s.killed / den < args.fail_under
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
