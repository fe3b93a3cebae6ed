"""``pushbench snapshots ...`` and ``pushbench tasks ...``: repository snapshots and the tasks
built on them (each command a thin layer over :mod:`pushbench.snapshots` and the runner's
calibration)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from typer.core import TyperGroup

from .common import TASKS_DIR_HELP, console, fail, out, split, use_tasks_dir

snap_app = typer.Typer(no_args_is_help=True, help="Build, list and verify repository snapshots.")


@snap_app.command("build")
def snapshots_build(
    names: list[str] = typer.Argument(None, help="snapshots to build (default: all)"),
    source: Optional[Path] = typer.Option(None, "--from", help="sdist file or folder holding it"),
    force: bool = typer.Option(False, help="rebuild even if cached"),
) -> None:
    """Obtain, verify (sha256), extract and freeze the pinned sdists; then index them."""
    from ..families.reposcan import indexer
    from .. import snapshots

    for name in names or sorted(snapshots.load_pins()):
        root = snapshots.build(name, source, force=force,
                               log=lambda m, n=name: console.print(f"[{n}] {m}"))
        defs = indexer.load_index(name)
        console.print(f"[green]ok[/] {name}: {root} ({len(defs)} definitions)")


@snap_app.command("list")
def snapshots_list() -> None:
    """List pinned snapshots and whether each is built."""
    from .. import snapshots

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
    tasks_dir: Optional[Path] = typer.Option(None, help=TASKS_DIR_HELP),
    replace: bool = typer.Option(False, help="re-pin an existing user snapshot to new content"),
) -> None:
    """Freeze your own source tree as a snapshot, index it and pin it in a user pins file."""
    import time

    from .. import snapshots
    from ..families.reposcan import indexer

    use_tasks_dir(tasks_dir)
    t0 = time.perf_counter()
    pin = snapshots.add_snapshot(name, source, rev, tasks_dir,
                                 kind="folder" if working_tree else None, replace=replace,
                                 log=lambda m: console.print(f"[{name}] {m}", highlight=False))
    defs = indexer.load_index(name)
    unparsable = indexer.unparsable_files(snapshots.ensure(name), defs)
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
    tasks_dir: Optional[Path] = typer.Option(None, help=TASKS_DIR_HELP),
) -> None:
    """Generate a seeded synthetic repository and add it as snapshot NAME (kind ``synth``).

    The pin records the generator and its parameters, so any machine rebuilds the same bytes by
    regenerating; the realised count of every atom is printed.
    """
    import tempfile

    from .. import snapshots
    from ..families.reposcan import indexer, synth

    use_tasks_dir(tasks_dir)
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
    except ValueError as e:  # DensityError, the generator's bounds (SnapshotError: the handler)
        fail(str(e))
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
    from .. import snapshots

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


@tasks_app.command("list")
def tasks_cmd(prefix: Optional[str] = typer.Argument(None, help="only ids with this prefix"),
              tasks_dir: Optional[Path] = typer.Option(None, help=TASKS_DIR_HELP)) -> None:
    """List task ids with target and budget (built-in and user tasks)."""
    from ..tasks import all_tasks, list_tasks

    use_tasks_dir(tasks_dir)
    table = Table("task id", "family", "target", "budget", "instances")
    specs = all_tasks()
    if prefix and not list_tasks(prefix):
        from ..errors import did_you_mean

        hint = did_you_mean(prefix, specs, n=3, cutoff=0.5)
        fail(f"no task id starts with {prefix!r}.{hint} (`pushbench tasks` lists them all)")
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
    tasks_dir: Optional[Path] = typer.Option(None, help=TASKS_DIR_HELP),
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
    from .. import userdata

    shipped = Path(made.path).parent.resolve() == userdata.shipped_dir().resolve()
    suite = userdata.SHIPPED_SYNTH if shipped else "user"
    out.print(f"written to {made.path} in {time.perf_counter() - t0:.1f} s; "
              f"task ids: {', '.join(made.task_ids)} (suites RepoScan-{suite}-N<k>)",
              highlight=False)

