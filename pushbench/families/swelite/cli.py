"""``pushbench swelite ...``: build and inspect the locally validated SWE-lite unit sets."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from ... import terminal
from ...terminal import common_folder, ident_column, short_path

swelite_app = typer.Typer(
    no_args_is_help=True,
    help="Build and list the SWE-lite unit sets (test venvs + validated mutations).",
)
_err = Console(stderr=True)


def _fail(msg: str) -> None:
    _err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _recipe(recipe: str | None) -> dict:
    """The unit recipe (``--recipe`` or the shipped one); a bad file is a one-line error."""
    from . import units as U

    path = U.recipe_path(recipe)
    if recipe is not None and not Path(path).is_file():
        _fail(f"--recipe {recipe}: no such file")
    try:
        raw = U.recipe(path)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        _fail(f"--recipe {path}: not a valid SWE-lite recipe ({str(e).splitlines()[0][:200]})")
    except Exception as e:  # noqa: BLE001 - yaml errors and the like: still the user's file
        _fail(f"--recipe {path}: not a valid SWE-lite recipe ({type(e).__name__})")
    if not isinstance(raw, dict) or not isinstance(raw.get("snapshots"), dict):
        _fail(f"--recipe {path}: not a valid SWE-lite recipe (no 'snapshots' mapping)")
    return raw


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

    raw = _recipe(recipe)
    unknown = [n for n in names or () if n not in raw["snapshots"]]
    if unknown:
        _fail(
            f"the recipe has no units for snapshot(s) {', '.join(map(repr, unknown))}; known: "
            f"{', '.join(raw['snapshots'])}"
        )
    rows, failed = [], False
    for name in names or list(raw["snapshots"]):
        try:
            cached = U.is_built(name, recipe) and not force
            data = U.build(
                name,
                recipe,
                force=force,
                progress=not cached,
                log=lambda m, n=name: _err.print(f"[dim]{n}: {m}[/]"),
            )
        except (U.UnitBuildError, VenvError, OSError) as e:
            _err.print(f"[bold red]error:[/] {name}: {e}", highlight=False)
            failed = True
            continue
        rows.append(
            (
                name,
                str(data["candidates"]),
                str(data["kept_count"]),
                str(data["discarded_count"]),
                "cached" if cached else str(data["built_seconds"]),
                U.cache_file(name, recipe),
            )
        )
        for d in data["discarded"]:
            _err.print(f"  [yellow]discarded[/] {name}/{d['key']}: {d['reason']}")
    _print_builds(rows)
    if failed:
        raise typer.Exit(1)


@swelite_app.command("list")
def list_units(
    name: str = typer.Argument(..., help="snapshot"),
    recipe: str = typer.Option(None, "--recipe"),
    as_json: bool = typer.Option(False, "--json", help="print the kept units as JSON"),
) -> None:
    """List a snapshot's kept units (title and number of tests)."""
    from ... import snapshots
    from . import units as U

    raw = _recipe(recipe)
    if name not in raw["snapshots"]:
        _fail(
            f"the recipe has no units for snapshot {name!r}; known: {', '.join(raw['snapshots'])}"
        )
    try:
        data = U.load(name, recipe, build_if_missing=False)
    except (U.UnitBuildError, snapshots.SnapshotError, OSError, ValueError) as e:
        _fail(f"{name}: {e}")
    if as_json:
        print(
            json.dumps(
                [{k: u[k] for k in ("key", "title", "issue", "tests")} for u in data["kept"]],
                indent=1,
            )
        )
        return
    table = terminal.table()
    ident_column(table, "key")
    table.add_column("title")
    table.add_column("tests", justify="right", no_wrap=True)
    for u in data["kept"]:
        table.add_row(escape(u["key"]), escape(u["title"]), str(len(u["tests"])))
    out = Console()
    terminal.fit(table, out.width, ["title"])
    out.print(table)


def _print_builds(rows: list[tuple]) -> None:
    """The build table (the unit-set file names in full, their shared folder under it)."""
    out = Console()
    folder = common_folder(r[-1] for r in rows)
    table = terminal.table()
    ident_column(table, "snapshot")
    for head in ("candi-\ndates", "kept", "dis-\ncarded", "built\n(s)"):  # narrow: 80 cols
        table.add_column(head, justify="right", no_wrap=True)
    table.add_column("unit set" if folder else "unit set file")
    for *cells, path in rows:
        table.add_row(*map(escape, cells), escape(path.name if folder else short_path(path)))
    terminal.fit(table, out.width, ["unit set", "unit set file"])
    out.print(table)
    if folder:
        out.print(f"unit sets in {short_path(folder)}", highlight=False, soft_wrap=True)
