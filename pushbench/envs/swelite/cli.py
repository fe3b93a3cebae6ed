"""``pushbench swelite ...``: build and inspect the locally validated SWE-lite unit sets."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

swelite_app = typer.Typer(no_args_is_help=True, help="Build and list the SWE-lite unit sets "
                          "(test venvs + validated mutations).")
_err = Console(stderr=True)


@swelite_app.command("build")
def build(
    names: list[str] = typer.Argument(None, help="snapshots (default: all of the recipe)"),
    force: bool = typer.Option(False, "--force", help="revalidate even if cached"),
    recipe: str = typer.Option(None, "--recipe", help="another unit recipe file"),
) -> None:
    """Build each snapshot's test venv and validate its units (clean pass, mutated fail, fixed
    pass, together); cached, so a second run is instant."""
    from . import units as U
    from .venvs import VenvError

    raw = U.recipe(U.recipe_path(recipe))
    table = Table("snapshot", "candidates", "kept", "discarded", "built (s)", "cache")
    failed = False
    for name in names or list(raw["snapshots"]):
        try:
            cached = U.is_built(name, recipe) and not force
            data = U.build(name, recipe, force=force, progress=not cached,
                           log=lambda m, n=name: _err.print(f"[dim]{n}: {m}[/]"))
        except (U.UnitBuildError, VenvError, OSError) as e:
            _err.print(f"[bold red]error:[/] {name}: {e}", highlight=False)
            failed = True
            continue
        table.add_row(name, str(data["candidates"]), str(data["kept_count"]),
                      str(data["discarded_count"]),
                      "cached" if cached else str(data["built_seconds"]),
                      str(U.cache_file(name, recipe)))
        for d in data["discarded"]:
            _err.print(f"  [yellow]discarded[/] {name}/{d['key']}: {d['reason']}")
    Console().print(table)
    if failed:
        raise typer.Exit(1)


@swelite_app.command("list")
def list_units(
    name: str = typer.Argument(..., help="snapshot"),
    recipe: str = typer.Option(None, "--recipe"),
    as_json: bool = typer.Option(False, "--json", help="print the kept units as JSON"),
) -> None:
    """List a snapshot's kept units (title and number of tests)."""
    from . import units as U

    data = U.load(name, recipe, build_if_missing=False)
    if as_json:
        print(json.dumps([{k: u[k] for k in ("key", "title", "issue", "tests")}
                          for u in data["kept"]], indent=1))
        return
    table = Table("key", "title", "tests")
    for u in data["kept"]:
        table.add_row(u["key"], u["title"], str(len(u["tests"])))
    Console().print(table)
