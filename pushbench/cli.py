"""The ``pushbench`` command line (typer). Each command is a thin layer over the library."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="PushBench: quantitative goal persistence benchmark for LLM agents.")
snap_app = typer.Typer(no_args_is_help=True, help="Build, list and verify repository snapshots.")
app.add_typer(snap_app, name="snapshots")
console = Console(stderr=True)
out = Console()


def _fail(msg: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {msg}", highlight=False)
    raise typer.Exit(code)


@snap_app.command("build")
def snapshots_build(
    names: list[str] = typer.Argument(None, help="snapshots to build (default: all)"),
    source: Optional[Path] = typer.Option(None, "--from", help="sdist file or folder holding it"),
    force: bool = typer.Option(False, help="rebuild even if cached"),
) -> None:
    """Obtain, verify (sha256), extract and freeze the pinned sdists; then index them."""
    from . import indexer, snapshots

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

    table = Table("snapshot", "sdist", "sha256", "commit", "built at")
    for name, pin in sorted(snapshots.load_pins().items()):
        meta = snapshots.info(name)
        table.add_row(name, pin.requirement, pin.sha256[:12], (pin.commit or "?")[:12],
                      str(snapshots.snapshot_dir(pin)) if meta else "[yellow]not built[/]")
    out.print(table)


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


@app.command("tasks")
def tasks_cmd(prefix: Optional[str] = typer.Argument(None, help="only ids with this prefix")) -> None:
    """List task ids with target and budget."""
    from .tasks import all_tasks, list_tasks

    table = Table("task id", "family", "target", "budget", "instances")
    specs = all_tasks()
    for tid in list_tasks(prefix):
        s = specs[tid]
        table.add_row(tid, s.family, str(s.target), str(s.budget), str(len(s.instances)))
    out.print(table)


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
