"""``pushbench run``, ``report`` and ``plot``: sweeps into a run folder and what is read back
from it (thin layers over :mod:`pushbench.runner.sweep` and :mod:`pushbench.analysis`).

A :class:`~pushbench.errors.PushBenchError` (``ExperimentError``, ``RunDirError``,
``PolicyParamsError``, ...) is left to the one handler in :mod:`.common`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape

from .common import (
    TASKS_DIR_HELP,
    console,
    fail,
    out,
    readable_file,
    split,
    use_tasks_dir,
    writable_dir,
)


def run_cmd(
    experiment: Path = typer.Argument(..., help="experiment YAML (see experiments/)"),
    out_dir: Path | None = typer.Option(
        None,
        "--out",
        help="run directory (re-use it to resume); required except for a plain --estimate",
    ),
    workers: int | None = typer.Option(None, help="process-pool size (overrides the file)"),
    seeds: str | None = typer.Option(None, help="seeds, e.g. 0,1,2 or 0-4"),
    controllers: list[str] | None = typer.Option(None, help="controller names (comma/repeat)"),
    policies: list[str] | None = typer.Option(None, help="policy names (comma/repeat)"),
    tasks: list[str] | None = typer.Option(None, help="task ids or globs (comma/repeat)"),
    executor: str | None = typer.Option(None, help="auto | inprocess | process | async | ray"),
    address: str | None = typer.Option(
        None,
        help="Ray cluster to join: auto | HOST:PORT | ray://HOST:PORT (implies --executor "
        "ray; without it --executor ray starts a local Ray instance)",
    ),
    budget: int | None = typer.Option(None, help="step-budget override for every task"),
    limit: int | None = typer.Option(None, min=1, help="only the first N episodes (smoke run)"),
    concurrency: int | None = typer.Option(
        None,
        min=1,
        help="LLM episodes in flight on one event loop (= --executor async --workers N)",
    ),
    force: bool = typer.Option(False, help="append to a DIR holding a different experiment"),
    overwrite: bool = typer.Option(
        False,
        help="discard what DIR holds (its episodes, traces, "
        "report) and start afresh; needed for a folder another "
        "command wrote",
    ),
    progress: bool = typer.Option(True, help="show the progress bar"),
    sync_interval: float = typer.Option(
        0.5, min=0.0, help="seconds between durability syncs (0: fsync every episode)"
    ),
    report: bool = typer.Option(True, help="print and write the report after the sweep"),
    plot: bool = typer.Option(True, help="write the figures after the sweep"),
    tasks_dir: Path | None = typer.Option(None, help=TASKS_DIR_HELP),
    estimate: bool = typer.Option(
        False,
        "--estimate",
        help="print the expected steps, tokens "
        "and cost per policy label instead of running (no model call "
        "without --pilot)",
    ),
    pilot: int | None = typer.Option(
        None,
        min=1,
        help="with --estimate: first run K real "
        "episodes per label into --out (they count toward the "
        "run) and extrapolate from them",
    ),
    max_cost_usd: float | None = typer.Option(
        None,
        min=0.0,
        help="hard cap on the run folder's model spend in USD (overrides "
        "max_cost_usd in the file); re-run with a higher cap to continue",
    ),
    allow_unpriced: bool = typer.Option(
        False, help="run models without a price under a cost cap (their calls count as $0)"
    ),
) -> None:
    """Run an experiment into DIR; re-running the same command resumes where it stopped."""
    import shlex

    use_tasks_dir(tasks_dir)

    from ..runner.experiment import load_experiment, parse_seeds
    from ..runner.sweep import SweepInterrupted, report_and_plot, run_experiment

    readable_file(experiment, "experiment file")
    if pilot is not None and not estimate:
        fail("--pilot is an option of --estimate")
    if out_dir is None and not (estimate and pilot is None):
        fail("--out DIR is required (the run directory)")
    if out_dir is not None:
        writable_dir(out_dir, "--out")
    if concurrency is not None:  # the asyncio executor (pushbench/runner/executors/async_.py)
        executor, workers = "async", concurrency
    if address is not None:  # the Ray executor (pushbench/runner/executors/ray.py)
        if executor not in (None, "ray"):
            fail(f"--address is for --executor ray, not {executor!r}")
        executor = "ray"
    arguments = {
        "experiment": str(experiment),
        "out": str(out_dir),
        "workers": workers,
        "seeds": seeds,
        "controllers": controllers,
        "policies": policies,
        "tasks": tasks,
        "executor": executor,
        "budget": budget,
        "limit": limit,
        "force": force,
        "overwrite": overwrite,
        "sync_interval": sync_interval,
        "address": address,
        "max_cost_usd": max_cost_usd,
        "allow_unpriced": allow_unpriced,
    }
    try:
        overrides = {
            "workers": workers,
            "controllers": split(controllers),
            "policies": split(policies),
            "tasks": split(tasks),
            "executor": executor,
            "budget": budget,
            "executor_options": {"ray": {"address": address}} if address else None,
            "seeds": parse_seeds(seeds) if seeds is not None else None,
        }
        exp = load_experiment(experiment, overrides)
        if estimate:
            _estimate(
                exp,
                out_dir,
                limit,
                pilot,
                max_cost_usd,
                allow_unpriced,
                dict(
                    progress=progress,
                    force=force,
                    arguments=arguments,
                    console=console,
                    sync_interval=sync_interval,
                ),
            )
            return
        assert out_dir is not None  # required unless --estimate without --pilot (above)
        _preflight(exp)
        summary = run_experiment(
            exp,
            out_dir,
            progress=progress,
            limit=limit,
            force=force,
            arguments=arguments,
            console=console,
            sync_interval=sync_interval,
            max_cost_usd=max_cost_usd,
            allow_unpriced=allow_unpriced,
            overwrite=overwrite,
        )
    except OSError as e:  # the run directory could not be written (full disk, permissions)
        fail(
            f"cannot write the run to {out_dir}: {e.strerror or e}"
            f"{f' ({e.filename})' if e.filename else ''}"
        )
    except SweepInterrupted as e:
        s = e.summary
        console.print(
            f"[bold yellow]interrupted[/]: {s['finished']}/{s['total']} episodes are "
            f"saved in {out_dir}. Resume by re-running the same command:\n  "
            f"pushbench {' '.join(shlex.quote(a) for a in sys.argv[1:])}",
            highlight=False,
        )
        raise typer.Exit(130) from None
    console.print(
        f"[green]done[/]: {summary['finished']}/{summary['total']} episodes in {out_dir} "
        f"({summary['ran']} run now, {summary['skipped']} already there; "
        f"{summary['seconds']:.1f} s, {summary['episodes_per_s'] or 0:.1f} episodes/s)",
        highlight=False,
    )
    if summary["errors"]:
        console.print(
            f"[bold red]{summary['errors']} episode(s) raised[/]: tracebacks in "
            f"{out_dir / 'errors.jsonl'}; re-run the command to retry them",
            highlight=False,
        )
    capped = summary["stopped_by_cap"] and summary["resume_cap_usd"] is not None
    if capped:
        console.print(
            f"[bold yellow]cost cap ${summary['cap_usd']:,.2f} reached[/]: "
            f"${summary['spent_usd']:,.4f} spent; {summary['not_run']} planned episode(s) not "
            f"finished "
            f"({summary['capped']} cut at the cap now, in capped.jsonl). Resume with a higher "
            f"cap (this one lets every remaining episode start at its worst case):\n  pushbench "
            + escape(
                " ".join(shlex.quote(a) for a in _with_cap(sys.argv[1:], summary["resume_cap_usd"]))
            ),
            highlight=False,
            soft_wrap=True,
        )
    try:
        report_and_plot(out_dir, report=report, plot=plot, console=console, out=out)
    except OSError as e:
        fail(f"cannot write the report to {out_dir}: {e.strerror or e}")
    if summary["errors"]:
        raise typer.Exit(1)
    if capped:
        raise typer.Exit(3)


def _preflight(exp) -> None:
    """One ``error:`` line before any episode when a policy's own install is missing (a policy
    class's ``preflight()``, e.g. Letta's server), instead of one traceback per episode."""
    from ..errors import PushBenchError
    from ..policies import policy_class

    for name in dict.fromkeys(p.name for p in exp.policies):
        check = getattr(policy_class(name), "preflight", None)
        if check is not None:
            try:
                check()
            except PushBenchError as e:
                fail(str(e))


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


def _estimate(
    exp,
    out_dir: Path | None,
    limit: int | None,
    pilot: int | None,
    cap: float | None,
    allow_unpriced: bool,
    run_kwargs: dict,
) -> None:
    """``run --estimate``: optionally run the pilot into ``out_dir``, then print the table."""
    from ..records import read_lines
    from ..runner.estimate import estimate_rows, pilot_keys, print_estimate
    from ..runner.experiment import expand
    from ..runner.sweep import run_experiment

    specs = expand(exp, limit=limit)
    if pilot is not None:
        assert out_dir is not None  # --pilot requires --out (run_cmd)
        keys = pilot_keys(specs, pilot)
        console.print(
            f"pilot: {len(keys)} episode(s) ({pilot} per policy label) into {out_dir}",
            highlight=False,
        )
        run_experiment(
            exp,
            out_dir,
            limit=limit,
            max_cost_usd=cap,
            allow_unpriced=allow_unpriced,
            keys=keys,
            **run_kwargs,
        )
    done: dict = {}
    if out_dir is not None:
        for line in read_lines(out_dir / "episodes.jsonl"):
            done.setdefault(line.get("key"), line)
    rows = estimate_rows(specs, done, pilot=pilot is not None)
    print_estimate(
        rows, out, pilot=pilot is not None, cap=cap if cap is not None else exp.max_cost_usd
    )


def _load_run(run_dir: Path) -> list:
    """Episodes of a run directory (or an episodes .jsonl file); _fail when there are none."""
    import warnings

    from ..analysis.report import load_episodes

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            episodes = load_episodes(run_dir)
        except FileNotFoundError:
            fail(
                f"no episodes file: {run_dir} has no episodes.jsonl; produce one with "
                "`pushbench run EXPERIMENT.yaml --out DIR`"
            )
    for w in caught:
        console.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    if not episodes:
        fail(f"no finished episodes in {run_dir}: episodes.jsonl is empty")
    return episodes


def report_cmd(
    run_dir: Path = typer.Argument(..., help="run directory holding episodes.jsonl"),
    seed: int = typer.Option(0, help="bootstrap seed (same seed -> identical CSVs)"),
    out_dir: Path | None = typer.Option(
        None, "--out", help="where to write the CSVs and report.md (default: RUN_DIR)"
    ),
    resamples: int = typer.Option(9999, min=100, help="bootstrap resamples"),
    ci_method: str = typer.Option(
        "sign-flip",
        help=(
            "interval method; 95% coverage, median / worst over the designs in docs/metrics.md: "
            "sign-flip (default, test inversion: 0.96 / 0.83), t (0.96 / 0.82), "
            "studentized (0.95 / 0.83), bca (0.90 / 0.82), percentile (0.90 / 0.80)"
        ),
    ),
) -> None:
    """Print the summary and paired deltas; write summary.csv, paired_deltas.csv, report.md."""
    from ..analysis.stats import METHODS
    from ..runner.sweep import write_and_print_report

    if ci_method not in METHODS:
        fail(f"unknown --ci-method {ci_method!r}; known: {', '.join(METHODS)}")
    if out_dir is not None:
        writable_dir(out_dir, "--out")
    episodes = _load_run(run_dir)
    target = out_dir or (run_dir if run_dir.is_dir() else run_dir.parent)
    try:
        write_and_print_report(
            episodes,
            run_dir,
            target,
            console=console,
            out=out,
            seed=seed,
            n_resamples=resamples,
            ci_method=ci_method,
        )
    except OSError as e:
        fail(f"cannot write the report to {target}: {e.strerror or e}")


def plot_cmd(
    run_dir: Path = typer.Argument(..., help="run directory holding episodes.jsonl"),
    out_dir: Path | None = typer.Option(
        None, "--out", help="where to write the PNGs (default: RUN_DIR)"
    ),
    target: int | None = typer.Option(
        None, min=1, help="target N of the anytime-progress figure (default: the largest)"
    ),
) -> None:
    """Write the figures (PNG) and print their paths."""
    from ..analysis.plots import make_plots

    if out_dir is not None:
        writable_dir(out_dir, "--out")
    episodes = _load_run(run_dir)
    targets = sorted({ep.get("target") for ep in episodes if isinstance(ep.get("target"), int)})
    if target is not None and target not in targets:
        fail(
            f"--target {target}: the run has no episodes with that target; its targets are "
            f"{', '.join(map(str, targets)) or 'none'}"
        )
    dest = out_dir or (run_dir if run_dir.is_dir() else run_dir.parent)
    skipped: list = []
    try:
        paths = make_plots(episodes, dest, target=target, skipped=skipped)
    except OSError as e:
        fail(f"cannot write the figures to {dest}: {e.strerror or e}")
    for p in paths:
        out.print(str(p), highlight=False)
    for name, why in skipped:  # one line per figure that could not be drawn
        console.print(f"[yellow]figure {name} skipped[/]: {escape(why)}", highlight=False)
