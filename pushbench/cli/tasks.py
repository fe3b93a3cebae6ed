"""``pushbench tasks [PREFIX]`` and ``pushbench tasks new``: list task ids; create RepoScan tasks
on a snapshot (a thin layer over :mod:`pushbench.runner.calibration`)."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.core import TyperGroup

from .. import terminal
from ..terminal import ident_column
from .common import TASKS_DIR_HELP, console, fail, out, split, use_tasks_dir


class _TasksGroup(TyperGroup):
    """``pushbench tasks [PREFIX]`` lists (as before); ``pushbench tasks new ...`` creates."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


tasks_app = typer.Typer(cls=_TasksGroup, help="List task ids; create your own RepoScan tasks.")


@tasks_app.command("list")
def tasks_cmd(
    prefix: str | None = typer.Argument(None, help="only ids with this prefix"),
    kind: str | None = typer.Option(
        None, help="only tasks of this kind: instance, suite, synthetic or user"
    ),
    tasks_dir: Path | None = typer.Option(None, help=TASKS_DIR_HELP),
) -> None:
    """List task ids with kind, target and budget (built-in and user tasks)."""
    from ..tasks import all_tasks, list_tasks, task_kinds

    use_tasks_dir(tasks_dir)
    specs = all_tasks()
    ids = list_tasks(prefix, kind=kind)  # an unknown kind: one error line naming the kinds
    if prefix and not list_tasks(prefix):
        from ..errors import did_you_mean

        hint = did_you_mean(prefix, specs, n=3, cutoff=0.5)
        fail(f"no task id starts with {prefix!r}.{hint} (`pushbench tasks` lists them all)")
    kinds = task_kinds()
    groups: dict[tuple[str, str], list[str]] = {}
    for tid in ids:
        groups.setdefault((specs[tid].family, kinds[tid]), []).append(tid)
    for (family, kind_), gids in groups.items():  # a table per family and kind, ids whole
        out.print(f"{family}: {kind_} tasks", style="bold", highlight=False)
        table = terminal.table()
        ident_column(table, "task id")
        for head in ("N", "budget", "instances"):
            table.add_column(head, justify="right", no_wrap=True)
        for tid in gids:
            s = specs[tid]
            table.add_row(tid, str(s.target), str(s.budget), str(len(s.instances)))
        terminal.fit(table, out.width, ["task id"], least=24)
        out.print(table)


@tasks_app.command("new")
def tasks_new(
    snapshot: str = typer.Option(..., help="snapshot name (`pushbench snapshots list`)"),
    predicate: str = typer.Option(..., help="the property, e.g. docstring or fixture:app"),
    targets: str = typer.Option("10,25,50,100", help="targets N, comma-separated"),
    name: str | None = typer.Option(None, help="instance id (default <snapshot>-<predicate>)"),
    tasks_dir: Path | None = typer.Option(None, help=TASKS_DIR_HELP),
    seed: int = typer.Option(0, help="seed of the calibration episodes"),
) -> None:
    """Create a RepoScan task: pin its valid set, calibrate its budget, show the floor."""
    import time

    from ..runner.calibration import HEADROOM, new_task

    use_tasks_dir(tasks_dir)
    try:
        wanted = [int(t) for t in split([targets]) or []]
    except ValueError:
        fail(f"--targets {targets!r}: give comma-separated integers, e.g. 10,25,50,100")
    t0 = time.perf_counter()
    made = new_task(
        snapshot,
        predicate,
        wanted,
        name=name,
        seed=seed,
        log=lambda m: console.print(m, highlight=False),
    )
    # one row per target N (the task ids, long with a long instance name, are listed below)
    out.print(
        f"calibration of {made.name} (scripted agents; headroom >= {HEADROOM}x)",
        style="bold",
        highlight=False,
    )
    table = terminal.table()
    for head in ("N", "budget", "steps", "headroom", "floor solved", "floor ids", "floor steps"):
        table.add_column(head, justify="right", no_wrap=True)
    for r in made.rows:
        table.add_row(
            str(r.target),
            str(r.budget),
            str(r.steps),
            f"{r.headroom:.2f}x",
            "yes" if r.floor_success else "no",
            str(r.floor_valid),
            str(r.floor_steps),
        )
    out.print(table)
    out.print(
        "steps: diligent, unlimited budget; headroom: budget / steps; floor: did "
        "`exhaustive` reach N within the budget (solved), the ids it got accepted, the "
        "steps it used",
        style="dim",
        highlight=False,
    )
    solved = sum(r.floor_success for r in made.rows)
    out.print(
        f"valid set: {made.valid_count} of {made.universe} definitions; the no-judgement "
        f"`exhaustive` floor solves {solved} of {len(made.rows)} targets"
        + (" (every one: the task does not test judgement)" if solved == len(made.rows) else ""),
        highlight=False,
    )
    from .. import userdata

    shipped = Path(made.path).parent.resolve() == userdata.shipped_dir().resolve()
    suite = userdata.SHIPPED_SYNTH if shipped else "user"
    out.print(
        f"written to {made.path} in {time.perf_counter() - t0:.1f} s; "
        f"task ids: {', '.join(made.task_ids)} (suites RepoScan-{suite}-N<k>)",
        highlight=False,
    )
