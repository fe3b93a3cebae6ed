"""The ``pushbench`` command line (typer). Each command is a thin layer over the library.

Size: one short function per command (and the one error handler), about 400 lines; splitting
it would only scatter the option help that users read together.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from .errors import PushBenchError

try:  # Typer >= 0.20 carries its own copy of click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older Typer uses click itself
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError


class _OneLineErrors(TyperGroup):
    """Usage errors (bad option values, missing arguments) and any
    :class:`~pushbench.errors.PushBenchError` as one ``error: ...`` line, exit 2.

    Everything else is Typer's own handling (help, ``--help``, exit codes of commands).
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError:  # bare `pushbench`: Typer prints the help
            return super().main(args, prog_name, complete_var, True, **extra)
        except UsageError as e:
            where = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
            console.print(f"[bold red]error:[/] {escape(e.format_message())}{where}",
                          highlight=False, soft_wrap=True)
            sys.exit(2)
        except ClickException as e:
            console.print(f"[bold red]error:[/] {escape(e.format_message())}", highlight=False,
                          soft_wrap=True)
            sys.exit(e.exit_code)
        except typer.Abort:
            console.print("aborted", highlight=False)
            sys.exit(1)
        except PushBenchError as e:  # bad input a command did not report itself: one line, 2
            console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False,
                          soft_wrap=True)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_OneLineErrors,
                  help="PushBench: quantitative goal persistence benchmark for LLM agents.")
snap_app = typer.Typer(no_args_is_help=True, help="Build, list and verify repository snapshots.")
app.add_typer(snap_app, name="snapshots")
from .families.swelite.cli import swelite_app  # noqa: E402  (light: typer and rich only)

app.add_typer(swelite_app, name="swelite")
console = Console(stderr=True)
out = Console()


_TASKS_DIR_HELP = ("user tasks folder to read and write (sets PUSHBENCH_TASKS for this command "
                   "and its workers; default: $PUSHBENCH_TASKS, else the cache's user folder)")


def _fail(msg: str, code: int = 2) -> None:
    """One ``error: ...`` line on stderr (never wrapped), then exit ``code`` (2: misuse)."""
    console.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _writable_dir(path: Path, option: str) -> None:
    """_fail unless ``path`` is a directory or could be created as one."""
    if path.exists() and not path.is_dir():
        _fail(f"{option} {path} is a file; give a directory (it is created if missing)")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        _fail(f"{option} {path}: {probe} is a file, so the directory cannot be created")
    if not os.access(probe, os.W_OK | os.X_OK):
        _fail(f"{option} {path}: cannot create or write it (no write permission on {probe})")


def _readable_file(path: Path, what: str) -> None:
    if path.is_dir():
        return
    if path.exists() and not os.access(path, os.R_OK):
        _fail(f"{what} {path} is not readable (permission denied)")


@snap_app.command("build")
def snapshots_build(
    names: list[str] = typer.Argument(None, help="snapshots to build (default: all)"),
    source: Optional[Path] = typer.Option(None, "--from", help="sdist file or folder holding it"),
    force: bool = typer.Option(False, help="rebuild even if cached"),
) -> None:
    """Obtain, verify (sha256), extract and freeze the pinned sdists; then index them."""
    from .families.reposcan import indexer
    from . import snapshots

    for name in names or sorted(snapshots.load_pins()):
        try:
            root = snapshots.build(name, source, force=force,
                                   log=lambda m, n=name: console.print(f"[{n}] {m}"))
            defs = indexer.load_index(name)
        except snapshots.SnapshotError as e:
            _fail(str(e))
        console.print(f"[green]ok[/] {name}: {root} ({len(defs)} definitions)")


@snap_app.command("list")
def snapshots_list() -> None:
    """List pinned snapshots and whether each is built."""
    from . import snapshots

    table = Table("snapshot", "source", "sha256", "commit", "built at")
    for name, pin in sorted(snapshots.load_pins().items()):
        meta = snapshots.info(name)
        what = (pin.requirement if pin.builtin
                else f"synth: {pin.generator} {pin.params}" if pin.kind == "synth"
                else f"{pin.kind}: {pin.source}")
        table.add_row(name, what, pin.sha256[:12], (pin.commit or "?")[:12],
                      str(snapshots.snapshot_dir(pin)) if meta else "[yellow]not built[/]")
    out.print(table)


@snap_app.command("add")
def snapshots_add(
    name: str = typer.Argument(..., help="snapshot name (not a built-in one)"),
    source: Path = typer.Option(..., "--from", help="an sdist archive (.tar.gz/.zip), a source "
                                "folder, or a local git repository"),
    rev: Optional[str] = typer.Option(None, help="git revision (default HEAD)"),
    working_tree: bool = typer.Option(False, help="take a git repository's files as they are "
                                      "(uncommitted changes included) instead of a commit"),
    tasks_dir: Optional[Path] = typer.Option(None, help=_TASKS_DIR_HELP),
    replace: bool = typer.Option(False, help="re-pin an existing user snapshot to new content"),
) -> None:
    """Freeze your own source tree as a snapshot, index it and pin it in a user pins file."""
    import time

    from . import snapshots
    from .families.reposcan import indexer

    _use_tasks_dir(tasks_dir)
    t0 = time.perf_counter()
    try:
        pin = snapshots.add_snapshot(name, source, rev, tasks_dir,
                                     kind="folder" if working_tree else None, replace=replace,
                                     log=lambda m: console.print(f"[{name}] {m}",
                                                                 highlight=False))
        defs = indexer.load_index(name)
        unparsable = indexer.unparsable_files(snapshots.ensure(name), defs)
    except snapshots.SnapshotError as e:
        _fail(str(e))
    if pin.kind == "git" and rev is None:
        import git

        if git.Repo(source).is_dirty(untracked_files=True):
            console.print(f"note: {source} has uncommitted changes; the snapshot is its HEAD "
                          "commit (--working-tree takes the files as they are)", highlight=False)
    skipped = ", ".join(f"{v} {k}" for k, v in (pin.skipped or {}).items() if v) or "none"
    console.print(
        f"[green]ok[/] {name} ({pin.kind}): {pin.files} files (skipped: {skipped}), "
        f"{len(defs)} definitions, {len(unparsable)} .py files skipped (not parseable or not "
        f"UTF-8); sha256 {pin.sha256[:12]}, commit {pin.commit[:12]}; pinned in {pin.origin} "
        f"({time.perf_counter() - t0:.1f} s)", highlight=False)


@snap_app.command("synth")
def snapshots_synth(
    name: str = typer.Argument(..., help="snapshot name (not a built-in one)"),
    seed: int = typer.Option(..., help="generator seed: a fresh seed gives code no model has seen"),
    modules: int = typer.Option(8, min=1, help="package modules"),
    defs: int = typer.Option(300, min=1, help="definitions in RepoScan's universe (exact)"),
    density: str = typer.Option("", help="ATOM=FRACTION,... (e.g. docstring=0.3,raises=0.1); "
                                "unset atoms keep the defaults (docs/synthetic.md)"),
    tasks_dir: Optional[Path] = typer.Option(None, help=_TASKS_DIR_HELP),
) -> None:
    """Generate a seeded synthetic repository and add it as snapshot NAME (kind ``synth``).

    The pin records the generator and its parameters, so any machine rebuilds the same bytes by
    regenerating; the realised count of every atom is printed.
    """
    import tempfile

    from . import snapshots
    from .families.reposcan import indexer, synth

    _use_tasks_dir(tasks_dir)
    try:
        wanted = synth.parse_density(density)
        with tempfile.TemporaryDirectory(prefix="pushbench-synth-") as tmp:
            stats = synth.generate(Path(tmp) / name, seed=seed, modules=modules, defs=defs,
                                   density=wanted)
            params = {"seed": seed, "modules": modules, "defs": defs,
                      "density": dict(stats.density)}
            pin = snapshots.add_snapshot(name, Path(tmp) / name, None, tasks_dir, kind="synth",
                                         generator_name="reposcan-synth", params=params)
        n = len(indexer.load_index(name))
    except (ValueError, snapshots.SnapshotError) as e:  # DensityError is a ValueError
        _fail(str(e))
    table = Table("atom", "predicate", "definitions", "fraction")
    for atom in synth.ATOMS:
        table.add_row(atom, stats.spec(atom), str(stats.counts[atom]),
                      f"{stats.fraction(atom):.3f}")
    out.print(table)
    console.print(f"[green]ok[/] {name} (synth, seed {seed}): {n} definitions, package "
                  f"{stats.package}; sha256 {pin.sha256[:12]}; pinned in {pin.origin}",
                  highlight=False)


@snap_app.command("verify")
def snapshots_verify() -> None:
    """Check built snapshots against their pins (hash, commit id, clean tree)."""
    from . import snapshots

    problems = [p for name in sorted(snapshots.load_pins()) for p in snapshots.verify(name)]
    for p in problems:
        console.print(f"[red]x[/] {p}")
    if problems:
        raise typer.Exit(1)
    console.print("[green]all snapshots match their pins[/]")


class _TasksGroup(TyperGroup):
    """``pushbench tasks [PREFIX]`` lists (as before); ``pushbench tasks new ...`` creates."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


tasks_app = typer.Typer(cls=_TasksGroup, help="List task ids; create your own RepoScan tasks.")
app.add_typer(tasks_app, name="tasks")


def _use_tasks_dir(tasks_dir: Optional[Path]) -> None:
    """Make ``tasks_dir`` the ``$PUSHBENCH_TASKS`` folder of this process and its children."""
    if tasks_dir is None:
        return
    if tasks_dir.exists() and not tasks_dir.is_dir():
        _fail(f"--tasks-dir {tasks_dir} is a file; give a folder")
    from .registration import register_all
    from .tasks import reload
    from .userdata import ENV_VAR

    os.environ[ENV_VAR] = str(tasks_dir.expanduser().resolve())
    reload()
    register_all()


@tasks_app.command("list")
def tasks_cmd(prefix: Optional[str] = typer.Argument(None, help="only ids with this prefix"),
              tasks_dir: Optional[Path] = typer.Option(None, help=_TASKS_DIR_HELP)) -> None:
    """List task ids with target and budget (built-in and user tasks)."""
    from .tasks import all_tasks, list_tasks

    _use_tasks_dir(tasks_dir)
    table = Table("task id", "family", "target", "budget", "instances")
    specs = all_tasks()
    if prefix and not list_tasks(prefix):
        from .errors import did_you_mean

        hint = did_you_mean(prefix, specs, n=3, cutoff=0.5)
        _fail(f"no task id starts with {prefix!r}.{hint} (`pushbench tasks` lists them all)")
    for tid in list_tasks(prefix):
        s = specs[tid]
        table.add_row(tid, s.family, str(s.target), str(s.budget), str(len(s.instances)))
    out.print(table)


@tasks_app.command("new")
def tasks_new(
    snapshot: str = typer.Option(..., help="snapshot name (`pushbench snapshots list`)"),
    predicate: str = typer.Option(..., help="the property, e.g. docstring or fixture:app"),
    targets: str = typer.Option("10,25,50,100", help="targets N, comma-separated"),
    name: Optional[str] = typer.Option(None, help="instance id (default <snapshot>-<predicate>)"),
    tasks_dir: Optional[Path] = typer.Option(None, help=_TASKS_DIR_HELP),
    seed: int = typer.Option(0, help="seed of the calibration episodes"),
) -> None:
    """Create a RepoScan task: pin its valid set, calibrate its budget, show the floor."""
    import time

    from .runner.calibration import HEADROOM, new_task

    _use_tasks_dir(tasks_dir)
    try:
        wanted = [int(t) for t in _split([targets]) or []]
    except ValueError:
        _fail(f"--targets {targets!r}: give comma-separated integers, e.g. 10,25,50,100")
    t0 = time.perf_counter()
    made = new_task(snapshot, predicate, wanted, name=name, seed=seed,
                    log=lambda m: console.print(m, highlight=False))
    table = Table("budget", "steps", "headroom", "floor", "floor ids", "floor steps",
                  title=f"calibration (scripted agents; headroom >= {HEADROOM}x)",
                  caption="steps: diligent, unlimited budget; floor: did `exhaustive` reach "
                          "N within the budget, ids it got accepted, steps it used")
    table.add_column("task id", no_wrap=True)
    table.columns.insert(0, table.columns.pop())
    for r in made.rows:
        table.add_row(r.task_id, str(r.budget), str(r.steps), f"{r.headroom:.2f}x",
                      "yes" if r.floor_success else "no", str(r.floor_valid), str(r.floor_steps))
    out.print(table)
    solved = sum(r.floor_success for r in made.rows)
    out.print(f"valid set: {made.valid_count} of {made.universe} definitions; the no-judgement "
              f"`exhaustive` floor solves {solved} of {len(made.rows)} targets"
              + (" (every one: the task does not test judgement)"
                 if solved == len(made.rows) else ""), highlight=False)
    from . import userdata

    shipped = Path(made.path).parent.resolve() == userdata.shipped_dir().resolve()
    suite = userdata.SHIPPED_SYNTH if shipped else "user"
    out.print(f"written to {made.path} in {time.perf_counter() - t0:.1f} s; "
              f"task ids: {', '.join(made.task_ids)} (suites RepoScan-{suite}-N<k>)",
              highlight=False)


def _split(values: Optional[list[str]]) -> Optional[list[str]]:
    """Repeatable, comma-separated option values -> list (``None`` when not given)."""
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


@app.command("run")
def run_cmd(
    experiment: Path = typer.Argument(..., help="experiment YAML (see experiments/)"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="run directory (re-use it to "
                                           "resume); required except for a plain --estimate"),
    workers: Optional[int] = typer.Option(None, help="process-pool size (overrides the file)"),
    seeds: Optional[str] = typer.Option(None, help="seeds, e.g. 0,1,2 or 0-4"),
    controllers: Optional[list[str]] = typer.Option(None, help="controller names (comma/repeat)"),
    policies: Optional[list[str]] = typer.Option(None, help="policy names (comma/repeat)"),
    tasks: Optional[list[str]] = typer.Option(None, help="task ids or globs (comma/repeat)"),
    executor: Optional[str] = typer.Option(None, help="auto | inprocess | process | async | ray"),
    address: Optional[str] = typer.Option(
        None, help="Ray cluster to join: auto | HOST:PORT | ray://HOST:PORT (implies --executor "
        "ray; without it --executor ray starts a local Ray instance)"),
    budget: Optional[int] = typer.Option(None, help="step-budget override for every task"),
    limit: Optional[int] = typer.Option(None, min=1, help="only the first N episodes (smoke run)"),
    concurrency: Optional[int] = typer.Option(
        None, min=1, help="LLM episodes in flight on one event loop (= --executor async --workers N)"),
    force: bool = typer.Option(False, help="append to a DIR holding a different experiment"),
    progress: bool = typer.Option(True, help="show the progress bar"),
    sync_interval: float = typer.Option(
        0.5, min=0.0, help="seconds between durability syncs (0: fsync every episode)"),
    report: bool = typer.Option(True, help="print and write the report after the sweep"),
    plot: bool = typer.Option(True, help="write the figures after the sweep"),
    tasks_dir: Optional[Path] = typer.Option(None, help=_TASKS_DIR_HELP),
    estimate: bool = typer.Option(False, "--estimate", help="print the expected steps, tokens "
                                  "and cost per policy label instead of running (no model call "
                                  "without --pilot)"),
    pilot: Optional[int] = typer.Option(None, min=1, help="with --estimate: first run K real "
                                        "episodes per label into --out (they count toward the "
                                        "run) and extrapolate from them"),
    max_cost_usd: Optional[float] = typer.Option(
        None, min=0.0, help="hard cap on the run folder's model spend in USD (overrides "
        "max_cost_usd in the file); re-run with a higher cap to continue"),
    allow_unpriced: bool = typer.Option(False, help="run models without a price under a cost "
                                        "cap (their calls count as $0)"),
) -> None:
    """Run an experiment into DIR; re-running the same command resumes where it stopped."""
    import shlex

    _use_tasks_dir(tasks_dir)

    from .runner.experiment import load_experiment, parse_seeds
    from .runner.sweep import SweepInterrupted, report_and_plot, run_experiment

    _readable_file(experiment, "experiment file")
    if pilot is not None and not estimate:
        _fail("--pilot is an option of --estimate")
    if out_dir is None and not (estimate and pilot is None):
        _fail("--out DIR is required (the run directory)")
    if out_dir is not None:
        _writable_dir(out_dir, "--out")
    if concurrency is not None:  # the asyncio executor (pushbench/runner/executors/async_.py)
        executor, workers = "async", concurrency
    if address is not None:  # the Ray executor (pushbench/runner/executors/ray.py)
        if executor not in (None, "ray"):
            _fail(f"--address is for --executor ray, not {executor!r}")
        executor = "ray"
    arguments = {"experiment": str(experiment), "out": str(out_dir), "workers": workers,
                 "seeds": seeds, "controllers": controllers, "policies": policies, "tasks": tasks,
                 "executor": executor, "budget": budget, "limit": limit, "force": force,
                 "sync_interval": sync_interval, "address": address,
                 "max_cost_usd": max_cost_usd, "allow_unpriced": allow_unpriced}
    try:
        overrides = {"workers": workers, "controllers": _split(controllers),
                     "policies": _split(policies), "tasks": _split(tasks),
                     "executor": executor, "budget": budget,
                     "executor_options": {"ray": {"address": address}} if address else None,
                     "seeds": parse_seeds(seeds) if seeds is not None else None}
        exp = load_experiment(experiment, overrides)
        if estimate:
            _estimate(exp, out_dir, limit, pilot, max_cost_usd, allow_unpriced,
                      dict(progress=progress, force=force, arguments=arguments,
                           console=console, sync_interval=sync_interval))
            return
        summary = run_experiment(exp, out_dir, progress=progress, limit=limit, force=force,
                                 arguments=arguments, console=console,
                                 sync_interval=sync_interval, max_cost_usd=max_cost_usd,
                                 allow_unpriced=allow_unpriced)
    except PushBenchError as e:  # ExperimentError, RunDirError, PolicyParamsError, ...
        _fail(str(e))
    except OSError as e:  # the run directory could not be written (full disk, permissions)
        _fail(f"cannot write the run to {out_dir}: {e.strerror or e}"
              f"{f' ({e.filename})' if e.filename else ''}")
    except SweepInterrupted as e:
        s = e.summary
        console.print(f"[bold yellow]interrupted[/]: {s['finished']}/{s['total']} episodes are "
                      f"saved in {out_dir}. Resume by re-running the same command:\n  "
                      f"pushbench {' '.join(shlex.quote(a) for a in sys.argv[1:])}", highlight=False)
        raise typer.Exit(130)
    console.print(
        f"[green]done[/]: {summary['finished']}/{summary['total']} episodes in {out_dir} "
        f"({summary['ran']} run now, {summary['skipped']} already there; "
        f"{summary['seconds']:.1f} s, {summary['episodes_per_s'] or 0:.1f} episodes/s)",
        highlight=False)
    if summary["errors"]:
        console.print(f"[bold red]{summary['errors']} episode(s) raised[/]: tracebacks in "
                      f"{out_dir / 'errors.jsonl'}; re-run the command to retry them", highlight=False)
    capped = summary["stopped_by_cap"] and summary["resume_cap_usd"] is not None
    if capped:
        console.print(
            f"[bold yellow]cost cap ${summary['cap_usd']:,.2f} reached[/]: "
            f"${summary['spent_usd']:,.4f} spent; {summary['not_run']} planned episode(s) not "
            f"finished "
            f"({summary['capped']} cut at the cap now, in capped.jsonl). Resume with a higher "
            f"cap (this one lets every remaining episode start at its worst case):\n  pushbench "
            + escape(" ".join(shlex.quote(a)
                              for a in _with_cap(sys.argv[1:], summary["resume_cap_usd"]))),
            highlight=False, soft_wrap=True)
    try:
        report_and_plot(out_dir, report=report, plot=plot, console=console, out=out)
    except OSError as e:
        _fail(f"cannot write the report to {out_dir}: {e.strerror or e}")
    if summary["errors"]:
        raise typer.Exit(1)
    if capped:
        raise typer.Exit(3)


def _with_cap(argv: list[str], cap: float) -> list[str]:
    """``argv`` with ``--max-cost-usd`` set to ``cap`` (replaced, or appended)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--max-cost-usd":
            skip = True
            continue
        if a.startswith("--max-cost-usd="):
            continue
        out.append(a)
    return [*out, "--max-cost-usd", f"{cap:.2f}"]


def _estimate(exp, out_dir: Optional[Path], limit: Optional[int], pilot: Optional[int],
              cap: Optional[float], allow_unpriced: bool, run_kwargs: dict) -> None:
    """``run --estimate``: optionally run the pilot into ``out_dir``, then print the table."""
    from .records import read_lines
    from .runner.estimate import estimate_rows, pilot_keys, print_estimate
    from .runner.experiment import expand
    from .runner.sweep import run_experiment

    specs = expand(exp, limit=limit)
    if pilot is not None:
        keys = pilot_keys(specs, pilot)
        console.print(f"pilot: {len(keys)} episode(s) ({pilot} per policy label) into {out_dir}",
                      highlight=False)
        run_experiment(exp, out_dir, limit=limit, max_cost_usd=cap,
                       allow_unpriced=allow_unpriced, keys=keys, **run_kwargs)
    done = {}
    if out_dir is not None:
        for line in read_lines(out_dir / "episodes.jsonl"):
            done.setdefault(line.get("key"), line)
    rows = estimate_rows(specs, done, pilot=pilot is not None)
    print_estimate(rows, out, pilot=pilot is not None,
                   cap=cap if cap is not None else exp.max_cost_usd)


def _load_run(run_dir: Path) -> list:
    """Episodes of a run directory (or an episodes .jsonl file); _fail when there are none."""
    import warnings

    from .analysis.report import load_episodes

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            episodes = load_episodes(run_dir)
        except FileNotFoundError:
            _fail(f"no episodes file: {run_dir} has no episodes.jsonl; produce one with "
                  "`pushbench run EXPERIMENT.yaml --out DIR`")
    for w in caught:
        console.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    if not episodes:
        _fail(f"no finished episodes in {run_dir}: episodes.jsonl is empty")
    return episodes


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="run directory holding episodes.jsonl"),
    seed: int = typer.Option(0, help="bootstrap seed (same seed -> identical CSVs)"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="where to write the CSVs and "
                                           "report.md (default: RUN_DIR)"),
    resamples: int = typer.Option(9999, min=100, help="bootstrap resamples"),
    ci_method: str = typer.Option("sign-flip", help="interval method: sign-flip (default; test "
                                  "inversion, worst coverage 0.94), t (0.88), studentized (0.81), "
                                  "bca (0.79), percentile (0.71); README: Metrics"),
) -> None:
    """Print the summary and paired deltas; write summary.csv, paired_deltas.csv, report.md."""
    from .analysis.stats import METHODS
    from .runner.sweep import write_and_print_report

    if ci_method not in METHODS:
        _fail(f"unknown --ci-method {ci_method!r}; known: {', '.join(METHODS)}")
    if out_dir is not None:
        _writable_dir(out_dir, "--out")
    episodes = _load_run(run_dir)
    target = out_dir or (run_dir if run_dir.is_dir() else run_dir.parent)
    try:
        write_and_print_report(episodes, run_dir, target, console=console, out=out, seed=seed,
                               n_resamples=resamples, ci_method=ci_method)
    except OSError as e:
        _fail(f"cannot write the report to {target}: {e.strerror or e}")


@app.command("plot")
def plot_cmd(
    run_dir: Path = typer.Argument(..., help="run directory holding episodes.jsonl"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="where to write the PNGs "
                                           "(default: RUN_DIR)"),
    target: Optional[int] = typer.Option(None, min=1, help="target N of the anytime-progress "
                                         "figure (default: the largest)"),
) -> None:
    """Write the figures (PNG) and print their paths."""
    from .analysis.plots import make_plots

    if out_dir is not None:
        _writable_dir(out_dir, "--out")
    episodes = _load_run(run_dir)
    targets = sorted({ep.get("target") for ep in episodes if isinstance(ep.get("target"), int)})
    if target is not None and target not in targets:
        _fail(f"--target {target}: the run has no episodes with that target; its targets are "
              f"{', '.join(map(str, targets)) or 'none'}")
    dest = out_dir or (run_dir if run_dir.is_dir() else run_dir.parent)
    try:
        paths = make_plots(episodes, dest, target=target)
    except OSError as e:
        _fail(f"cannot write the figures to {dest}: {e.strerror or e}")
    for p in paths:
        out.print(str(p), highlight=False)


@app.command("view")
def view_cmd(
    run_dir: Path = typer.Argument(..., help="run folder of `pushbench run` or `evaluate`"),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="where the viewer's files go "
                                           "(default: RUN_DIR/view)"),
    serve_it: bool = typer.Option(False, "--serve", help="serve it on 127.0.0.1 until Ctrl-C"),
    port: int = typer.Option(8765, min=0, max=65535, help="port for --serve (0: any free port)"),
) -> None:
    """Build a static, offline run browser (overview, episodes, timelines); open index.html."""
    import warnings

    from .viewer import OutDirError, build_site, serve

    if not run_dir.is_dir():
        _fail(f"{run_dir} is not a run folder ({'a file' if run_dir.exists() else 'not found'}); "
              "give the --out folder of `pushbench run` or `pushbench evaluate`")
    _readable_file(run_dir / "episodes.jsonl", "episodes file")
    dest = out_dir or run_dir / "view"
    _writable_dir(dest, "--out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            site = build_site(run_dir, dest, log=lambda m: console.print(m, highlight=False))
        except FileNotFoundError:
            _fail(f"no episodes file: {run_dir} has no episodes.jsonl; produce one with "
                  "`pushbench run EXPERIMENT.yaml --out DIR`")
        except OutDirError as e:
            _fail(str(e))
        except (ValueError, KeyError, TypeError) as e:  # a line the frame cannot read
            _fail(f"cannot read the episode lines of {run_dir}: {type(e).__name__}: {e}")
        except OSError as e:
            _fail(f"cannot write the viewer to {dest}: {e.strerror or e}")
    for w in caught:
        console.print(f"[yellow]warning:[/] {escape(str(w.message))}", highlight=False)
    index = (site / "index.html").resolve()
    out.print(index.as_uri(), highlight=False, soft_wrap=True)
    if serve_it:
        try:
            serve(site, port, ready=lambda url: console.print(
                f"serving on {url} (loopback only; Ctrl-C stops)", highlight=False))
        except OSError as e:
            _fail(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}")
        except KeyboardInterrupt:
            console.print("stopped", highlight=False)


# ----- black-box agents over MCP (docs/blackbox.md) -----------------------------------------
@app.command("mcp")
def mcp_cmd(
    task: str = typer.Option(..., "--task", help="task id, e.g. RepoScan-requests-docstring-N50"),
    run_dir: Path = typer.Option(..., "--run-dir", help="where the record goes (one per episode; "
                                 "keep it out of the agent's reach)"),
    seed: int = typer.Option(0, min=0, help="reset seed (also picks a suite's instance)"),
    controller: str = typer.Option("standard", help="controller wrapping the environment"),
    workspace: Optional[Path] = typer.Option(None, help="prepare a fresh copy of the snapshot "
                                             "here for the agent to read"),
    condition: str = typer.Option("default", help="prompt condition label: default | checklist"),
    agent: Optional[str] = typer.Option(None, help="agent label for the report, e.g. claude-code"),
    instance: Optional[str] = typer.Option(None, help="instance of a suite task"),
    budget: Optional[int] = typer.Option(None, min=1, help="step-budget override"),
    overwrite: bool = typer.Option(False, help="discard a run already in --run-dir"),
    allow_shared_cache: bool = typer.Option(False, "--allow-shared-cache", help="serve even if "
                                            "other users can read the cache or the run dir "
                                            "(a warning instead of a refusal)"),
) -> None:
    """Serve one episode of TASK to a black-box agent as a stdio MCP server."""
    from .blackbox.evaluate import check_label

    try:
        check_label("condition", condition)
        if agent is not None:
            check_label("agent", agent)
    except ValueError as e:
        _fail(f"--{str(e)}")
    _writable_dir(run_dir, "--run-dir")
    if workspace is not None and workspace.exists() and not workspace.is_dir():
        _fail(f"--workspace {workspace} is a file; give a new directory for the copy")
    try:
        from .blackbox import server as mcp_server
    except ImportError as e:
        _fail(f"the MCP server needs the optional dependency ({e}): pip install 'pushbench[mcp]'")
    code = mcp_server.main(task, run_dir, seed=seed, controller=controller, workspace=workspace,
                           condition=condition, agent=agent, instance=instance, budget=budget,
                           overwrite=overwrite, allow_shared_cache=allow_shared_cache)
    raise typer.Exit(code)


@app.command("mcp-prompt")
def mcp_prompt_cmd(
    condition: str = typer.Argument("default", help="default | checklist"),
    task: Optional[str] = typer.Option(None, help="append this task's first observation (the "
                                       "episode `pushbench mcp` serves with the same options)"),
    seed: int = typer.Option(0, min=0, help="with --task: the episode's seed"),
    controller: str = typer.Option("standard", help="with --task: the episode's controller"),
    instance: Optional[str] = typer.Option(None, help="with --task: instance of a suite task"),
    budget: Optional[int] = typer.Option(None, min=1, help="with --task: step-budget override"),
) -> None:
    """Print the prompt to give a black-box agent under CONDITION."""
    from .blackbox.prompts import PROMPTS

    if condition not in PROMPTS:
        _fail(f"unknown condition {condition!r}; known: {', '.join(PROMPTS)}")
    if task is None:
        print(PROMPTS[condition])
        return
    from .blackbox.episode_prompt import episode_prompt

    try:
        print(episode_prompt(condition, task, seed, controller, instance, budget), end="")
    except (KeyError, ValueError) as e:
        _fail(str(e.args[0] if isinstance(e, KeyError) and e.args else e))


@app.command("model-server")
def model_server_cmd(
    policy: str = typer.Option(..., "--policy", help="offline policy: diligent, exhaustive, "
                               "random, simulated-weak|mid|strong"),
    params: Optional[str] = typer.Option(None, "--params", help="policy parameters as JSON"),
    seed: int = typer.Option(0, min=0, help="policy seed (same seed, same answers)"),
    port: int = typer.Option(..., "--port", min=0, max=65535, help="TCP port (0: any free)"),
    host: str = typer.Option("127.0.0.1", help="loopback address to bind"),
    log_file: Optional[Path] = typer.Option(None, "--log", help="append one JSON line per "
                                            "request here"),
    port_file: Optional[Path] = typer.Option(None, "--port-file", help="write the bound port "
                                             "here once listening"),
    server_name: str = typer.Option("pushbench", help="the MCP server name the client uses"),
) -> None:
    """Serve an offline policy as a model (Anthropic Messages, OpenAI Responses and Chat
    Completions APIs) on loopback, for driving Claude Code or Codex CLI offline."""
    import json as _json

    from .modelserver import PolicyBackend, serve
    from .modelserver.app import check_loopback

    try:
        parsed = _json.loads(params) if params else {}
        if not isinstance(parsed, dict):
            raise ValueError("--params must be a JSON object")
        backend = PolicyBackend(policy, parsed, seed, server_name)
        check_loopback(host)
    except (KeyError, ValueError) as e:
        _fail(str(e.args[0] if isinstance(e, KeyError) and e.args else e))
    try:
        serve(backend, host, port, str(log_file) if log_file else None,
              str(port_file) if port_file else None,
              on_ready=lambda url: console.print(f"model server ({policy}, seed {seed}) "
                                                 f"listening on {url}", highlight=False))
    except OSError as e:
        _fail(f"cannot listen on {host}:{port}: {e.strerror or e}")


@app.command("evaluate")
def evaluate_cmd(
    run_dirs: list[Path] = typer.Argument(..., help="run directories written by `pushbench mcp`"),
    out_dir: Path = typer.Option(..., "--out", help="where episodes.jsonl and the report go"),
    seed: int = typer.Option(0, help="bootstrap seed (same seed -> identical CSVs)"),
    resamples: int = typer.Option(9999, min=100, help="bootstrap resamples"),
) -> None:
    """Turn black-box run directories into episodes.jsonl plus the report tables."""
    import warnings

    from .blackbox.evaluate import RunDirError, full_records_from_run_dirs, write_evaluation

    _writable_dir(out_dir, "--out")
    for d in run_dirs:
        if not d.is_dir():
            _fail(f"{d} is not a run directory ({'a file' if d.exists() else 'not found'}); "
                  "give the --run-dir folders of `pushbench mcp`")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            records = full_records_from_run_dirs(run_dirs)
        except RunDirError as e:
            _fail(str(e))
        except OSError as e:
            _fail(f"cannot read the run directories: {e.strerror or e} ({e.filename})")
    for w in caught:
        console.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    try:
        write_evaluation(records, out_dir, seed=seed, n_resamples=resamples, console=console,
                         out=out)
    except OSError as e:
        _fail(f"cannot write the evaluation to {out_dir}: {e.strerror or e}")


bb_app = typer.Typer(no_args_is_help=True, help="Run black-box agents (Claude Code, Codex CLI) "
                     "on PushBench episodes.")
app.add_typer(bb_app, name="blackbox")


@bb_app.command("run")
def blackbox_run_cmd(
    agent: str = typer.Option(..., "--agent", help="claude-code | codex"),
    tasks: list[str] = typer.Option(..., "--tasks", help="task ids (repeat or comma-separate)"),
    seeds: list[str] = typer.Option(["0"], "--seeds", help="seeds (repeat or comma-separate)"),
    condition: str = typer.Option("default", help="prompt condition: default | checklist"),
    out_dir: Path = typer.Option(..., "--out", help="batch folder (episodes, report)"),
    policy: Optional[str] = typer.Option(None, "--model-server", help="drive the client with "
                                         "this offline policy behind a loopback model server"),
    params: Optional[str] = typer.Option(None, "--params", help="policy parameters as JSON"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="a real model endpoint "
                                           "instead of --model-server (no /v1)"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="with --base-url: "
                                              "the environment variable holding the key"),
    model: Optional[str] = typer.Option(None, "--model", help="with --base-url: model name"),
    controller: str = typer.Option("standard", help="controller wrapping the environment"),
    budget: Optional[int] = typer.Option(None, min=1, help="step-budget override"),
    timeout: float = typer.Option(600.0, min=1, help="seconds per episode before the client "
                                  "is killed"),
    client_bin: Optional[str] = typer.Option(None, "--client-bin", help="path of the client"),
) -> None:
    """Run a batch of episodes through a real client headless, then evaluate it."""
    import json as _json

    from . import blackbox_run
    from .blackbox import clients as blackbox_clients
    from .blackbox.prompts import PROMPTS

    if agent not in blackbox_clients.LAUNCHERS:
        _fail(f"--agent {agent!r}: choose claude-code or codex")
    if condition not in PROMPTS:
        _fail(f"--condition {condition!r}: choose {' or '.join(PROMPTS)}")
    if (policy is None) == (base_url is None):
        _fail("give exactly one of --model-server POLICY and --base-url URL")
    try:
        seed_list = [int(x) for x in _split(seeds)]
    except ValueError:
        _fail("--seeds takes integers")
    endpoint = None
    parsed = None
    try:
        parsed = _json.loads(params) if params else None
        if policy is not None:
            from .modelserver import PolicyBackend

            PolicyBackend(policy, parsed, 0)  # validates name and params before any episode
        else:
            key = os.environ.get(api_key_env or "", "") if api_key_env else ""
            if api_key_env and not key:
                _fail(f"--api-key-env {api_key_env}: the variable is not set")
            endpoint = blackbox_clients.Endpoint(base_url=base_url, api_key=key or "none",
                                                 model=model or "default", offline=False)
    except (KeyError, ValueError) as e:
        _fail(str(e.args[0] if isinstance(e, KeyError) and e.args else e))
    _writable_dir(out_dir, "--out")
    batch = blackbox_run.Batch(agent=agent, tasks=_split(tasks), seeds=seed_list,
                               condition=condition, out=out_dir, policy=policy, params=parsed,
                               endpoint=endpoint, controller=controller, budget=budget,
                               timeout=timeout, client_bin=client_bin)
    try:
        summary = blackbox_run.run_batch(batch, log=lambda m: console.print(m, highlight=False),
                                         console=console, out=out)
    except FileNotFoundError as e:
        _fail(str(e))
    console.print(_json.dumps(summary, indent=1), highlight=False)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
