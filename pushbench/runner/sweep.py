"""Run an experiment: expand it, skip finished episodes, execute the rest, write as they finish.

``run_experiment(experiment, out_dir)`` is what ``pushbench run`` calls. Re-running it on the
same ``out_dir`` resumes: finished keys are read back from ``episodes.jsonl`` and skipped, so
an interrupted sweep loses nothing and duplicates nothing.

Ctrl-C (KeyboardInterrupt) stops submitting new episodes, writes the results that are already
in, waits for the few episodes still running (a second Ctrl-C abandons them), and raises
:class:`SweepInterrupted` carrying the summary so callers can tell the user how to resume.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .. import spend
from .costcap import CostGate, line_cost, worst_cases
from .executors.base import Executor
from .experiment import Experiment, expand
from .registry import make_executor
from .rundir import RunDir
from .spec import EpisodeSpec


class SweepInterrupted(KeyboardInterrupt):
    """The sweep stopped early on Ctrl-C; ``summary`` says what was written."""

    def __init__(self, summary: dict) -> None:
        super().__init__("sweep interrupted")
        self.summary = summary


def _success(line: dict) -> bool:
    m = line.get("metrics") or {}
    return bool(m.get("success", line.get("success")))


class _Tally:
    """Counts for the progress bar and the summary (no wall-clock value reaches a record)."""

    def __init__(self, total: int, done_lines: list[dict]) -> None:
        self.total = total
        self.skipped = len(done_lines)
        self.ran = 0
        self.errors = 0
        self.error_keys: list[str] = []
        self.successes = sum(_success(x) for x in done_lines)
        self.finished = len(done_lines)
        self.steps = 0
        self.capped = 0  # cut at the cost cap (capped.jsonl; they run again on resume)

    def add(self, result, written: bool) -> None:
        if not result.ok:
            self.errors += 1
            self.error_keys.append(result.spec.key)
        elif not written and result.line.get("terminated_by") == spend.COST_CAP:
            self.capped += 1
        elif written:
            self.ran += 1
            self.finished += 1
            self.successes += _success(result.line)
            self.steps += int(result.line.get("steps_used") or 0)

    @property
    def rate(self) -> str:
        return f"{self.successes / self.finished:.1%}" if self.finished else "-"


def run_experiment(
    experiment: Experiment,
    out_dir: str | Path,
    executor: Executor | None = None,
    progress: bool = True,
    limit: int | None = None,
    force: bool = False,
    arguments: dict | None = None,
    console: Console | None = None,
    sync_interval: float = 0.5,
    max_cost_usd: float | None = None,
    allow_unpriced: bool = False,
    keys: set[str] | None = None,
    overwrite: bool = False,
) -> dict:
    """Run every unfinished episode of ``experiment`` into ``out_dir``; return a summary dict.

    ``executor`` defaults to the experiment's own (``executor``/``workers`` fields).
    ``limit`` keeps only the first N episodes of the expansion (a quick smoke run; the same
    limit resumes the same subset). ``sync_interval``: see :class:`~.rundir.RunDir` (0 = fsync
    every episode). ``max_cost_usd`` (default: the experiment's ``max_cost_usd``) caps the run
    folder's recorded model spend (:mod:`.costcap`); ``allow_unpriced`` lets models without a
    price run under it at $0. ``keys`` runs only those episodes of the expansion (the pilot of
    ``--estimate --pilot``). Summary keys: ``total, skipped, ran, errors, error_keys,
    success_rate, steps, seconds, episodes_per_s, steps_per_s, interrupted, out_dir``, and the
    spend: ``spent_usd`` (recorded in the folder, cut episodes included), ``cap_usd``,
    ``capped`` (episodes cut at the cap now), ``stopped_by_cap`` (the cap refused an episode
    or cut one), ``not_run`` (planned, still unfinished) and
    ``resume_cap_usd`` (a cap that lets all of those start; ``None`` without a cap).
    """
    specs = expand(experiment, limit=limit)
    console = console or Console(stderr=True)
    described = {**experiment.model_dump(mode="json"), "limit": limit, "episodes": len(specs)}
    run = RunDir(out_dir, sync_interval=sync_interval).open(
        described, experiment.result_fields(), arguments, force=force, overwrite=overwrite
    )
    own_executor = executor is None
    cap = max_cost_usd if max_cost_usd is not None else experiment.max_cost_usd
    todo: list[EpisodeSpec] = [
        s for s in specs if s.key not in run.done and (keys is None or s.key in keys)
    ]
    gate: CostGate | None = None
    try:
        if cap is not None:  # refuses unpriced models and unbounded worst cases up front
            prior = _recorded_spend(run)
            gate = CostGate(cap, prior, worst_cases(todo, allow_unpriced))
        executor = executor or make_executor(
            experiment.executor, experiment.workers, **experiment.options_for_executor()
        )
        uncap = executor.enforce_caps(experiment.max_inflight_per_endpoint)
        executor.gate = gate
        unmeter = executor.install_meter(
            spend.Meter(cap, gate.spent_usd) if gate and cap is not None else None
        )
    except BaseException:
        if own_executor and executor is not None:
            executor.shutdown()
        run.close()
        raise
    wanted = {s.key for s in specs}
    tally = _Tally(len(specs), [line for k, line in run.done.items() if k in wanted])
    start = time.perf_counter()
    interrupted = False
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("success {task.fields[rate]}"),
        TextColumn("errors {task.fields[err]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not progress,
        transient=False,
    )

    def consume(results, task_id) -> None:
        for result in results:
            tally.add(result, run.write(result))
            bar.update(
                task_id, completed=tally.finished + tally.errors, rate=tally.rate, err=tally.errors
            )

    try:
        with bar:
            tid = bar.add_task(
                experiment.name, total=len(specs), completed=tally.finished, rate=tally.rate, err=0
            )
            try:
                consume(executor.run(todo), tid)
            except KeyboardInterrupt:
                interrupted = True
                if executor.in_flight:
                    console.print(
                        f"[yellow]interrupted: no new episodes; waiting for "
                        f"{executor.in_flight} running (Ctrl-C again to abandon them)[/]"
                    )
                    try:
                        consume(executor.drain(), tid)
                    except KeyboardInterrupt:
                        pass
    finally:
        uncap()
        unmeter()
        executor.gate = None
        if own_executor or interrupted:
            executor.shutdown()
        not_run = [s for s in todo if s.key not in run.done]
        seconds = time.perf_counter() - start
        summary = {
            "out_dir": str(out_dir),
            "total": tally.total,
            "skipped": tally.skipped,
            "ran": tally.ran,
            "errors": tally.errors,
            "error_keys": tally.error_keys,
            "finished": tally.finished,
            "success_rate": tally.successes / tally.finished if tally.finished else None,
            "steps": tally.steps,
            "seconds": round(seconds, 3),
            "episodes_per_s": round(tally.ran / seconds, 3) if seconds > 0 else None,
            "steps_per_s": round(tally.steps / seconds, 1) if seconds > 0 else None,
            "interrupted": interrupted,
            "executor": executor.name,
            "workers": executor.workers,
            "spent_usd": round(_recorded_spend(run), 8),
            "cap_usd": cap,
            "capped": tally.capped,
            "not_run": len(not_run),
            "stopped_by_cap": gate is not None
            and (gate.stopped_at is not None or tally.capped > 0),
            "resume_cap_usd": gate.resume_cap(not_run) if gate is not None and not_run else None,
        }
        run.finish(summary)
        run.close()
    if interrupted:
        raise SweepInterrupted(summary)
    return summary


def _recorded_spend(run: RunDir) -> float:
    """Model spend recorded in the run folder: finished episodes plus cut ones."""
    return sum(line_cost(x) for x in run.done.values()) + sum(line_cost(x) for x in run.capped)


def report_and_plot(
    out_dir: str | Path,
    report: bool = True,
    plot: bool = True,
    console: Console | None = None,
    out: Console | None = None,
    seed: int = 0,
    n_resamples: int = 9999,
) -> list[Path]:
    """After a sweep, in order of value, each stage on its own: write ``summary.csv``,
    ``paired_deltas.csv`` and ``report.md`` and print the tables; then draw each figure (one
    that cannot be drawn is skipped with one line saying why); then rewrite ``report.md`` to
    embed the figures drawn and name the missing ones; then the outcome lines
    (:func:`pushbench.analysis.outcomes.outcome_lines`).

    Returns the figure paths. A failed report stage does not stop the figures: its exception
    is raised after them. Missing optional modules are reported, not raised.
    """
    console = console or Console(stderr=True)
    out = out or Console()
    if not (report or plot):
        return []
    try:
        from ..analysis import report as rep
    except ImportError as e:
        console.print(f"[yellow]report skipped: pushbench.analysis.report is unavailable ({e})[/]")
        return []
    episodes = rep.load_episodes(out_dir)
    if not episodes:
        console.print("[yellow]no finished episodes: nothing to report[/]")
        return []
    frames, failed = None, None
    if report:
        try:
            frames = write_and_print_report(
                episodes,
                out_dir,
                out_dir,
                console=console,
                out=out,
                seed=seed,
                n_resamples=n_resamples,
                outcomes=False,
            )
        except Exception as e:  # noqa: BLE001 - raised after the figures (they do not need it)
            failed = e
            console.print(
                f"[bold red]report not written[/]: {type(e).__name__}: {escape(str(e))}",
                highlight=False,
            )
    figures: list[Path] = []
    skipped: list[tuple[str, str]] = []
    if plot:
        figures = _draw_figures(episodes, out_dir, console, skipped)
    for p in figures:
        out.print(f"figure: {p}", highlight=False)
    from .runinfo import run_info

    info = frames["run_info"] if frames is not None else run_info(out_dir)
    if frames is not None and plot:  # embed what was drawn; name what was not
        from ..analysis.output import write_report_md
        from ..analysis.report_md import FIGURES

        drawn = {p.name for p in figures}
        write_report_md(
            frames,
            out_dir,
            info,
            seed=seed,
            n_resamples=n_resamples,
            run_dir=out_dir,
            figures=[n for n, _ in FIGURES if n in drawn],
            skipped_figures=skipped,
        )
    _print_outcomes(episodes, info, console)
    if failed is not None:
        raise failed
    return figures


def _draw_figures(
    episodes: list[dict], out_dir, console: Console, skipped: list[tuple[str, str]]
) -> list[Path]:
    """Every applicable figure, each isolated; one line per figure skipped (and why)."""
    try:
        from ..analysis import plots
    except ImportError as e:
        console.print(f"[yellow]plots skipped: pushbench.analysis.plots is unavailable ({e})[/]")
        return []
    try:
        figures = list(plots.make_plots(episodes, out_dir, skipped=skipped))
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - the frame could not be built: no figure at all
        skipped.append(("all figures", f"{type(e).__name__}: {e}"))
        figures = []
    for name, why in skipped:
        console.print(f"[yellow]figure {name} skipped[/]: {escape(why)}", highlight=False)
    return figures


def _print_outcomes(episodes: list[dict], info: dict | None, console: Console) -> None:
    from rich.text import Text

    from ..analysis.outcomes import outcome_lines

    capped = ((info or {}).get("cost") or {}).get("capped_episodes") or 0
    for line in outcome_lines(episodes, capped_episodes=capped):  # causes are data: no markup
        console.print(Text(line, style="bold yellow"), highlight=False)


def write_and_print_report(
    episodes: list[dict],
    run_dir: str | Path,
    out_dir: str | Path,
    console: Console,
    out: Console,
    seed: int = 0,
    n_resamples: int = 9999,
    ci_method: str | None = None,
    outcomes: bool = True,
) -> dict:
    """Write the report files for ``episodes`` of ``run_dir`` into ``out_dir``, print the
    tables, and say what was written, how many planned episodes are missing and (with
    ``outcomes``) what ended the episodes that are not agent outcomes."""
    from ..analysis import report as rep
    from ..analysis.frame import version_note
    from .runinfo import run_info

    info = run_info(run_dir)
    method: dict[str, Any] = {"ci_method": ci_method} if ci_method else {}
    frames = rep.write_report(
        episodes,
        out_dir,
        seed=seed,
        n_resamples=n_resamples,
        info=info,
        run_dir=run_dir if Path(run_dir).is_dir() else Path(run_dir).parent,
        **method,
    )
    rep.print_report(frames, console=out)
    from ..analysis.bill import print_bill

    if frames.get("bill") is not None:
        print_bill(frames["bill"], out, (info or {}).get("cost"))
    out_dir = Path(out_dir)
    console.print(
        f"wrote {out_dir / 'summary.csv'}, {out_dir / 'paired_deltas.csv'} and "
        f"{out_dir / 'report.md'} ({len(episodes)} episodes)",
        highlight=False,
    )
    note = version_note(frames["episodes"])
    if note:
        console.print(f"[bold yellow]family versions[/]: {escape(note)}", highlight=False)
    for line in missing_lines(info, {e.get("key") for e in episodes}):
        console.print(line, highlight=False)
    if outcomes:
        _print_outcomes(episodes, info, console)
    frames["run_info"] = info
    return frames


def missing_lines(info: dict | None, finished: set) -> list[str]:
    """Terminal lines on planned-but-missing and raised episodes (empty when none)."""
    if info is None:
        return ["[yellow]no manifest.json[/]: planned and missing episodes are unknown"]
    planned = info.get("planned_episodes")
    if planned is None:
        return [
            f"[yellow]could not list the planned episodes[/] ({info.get('plan_problem')}); "
            f"the manifest planned {info.get('planned')}"
        ]
    missing = [p for p in planned if p["key"] not in finished]
    raised = [r for r in info.get("raised", []) if r.get("key") not in finished]
    if not missing:
        return [f"all {len(planned)} planned episodes are finished"]
    return [
        f"[bold yellow]{len(missing)} of {len(planned)} planned episodes are missing[/]"
        + (f" ({len(raised)} raised: see errors.jsonl)" if raised else "")
        + "; re-run the same `pushbench run` command to resume (listed in report.md)"
    ]
