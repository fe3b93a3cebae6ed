"""``pushbench snapshots ...``: repository snapshots (each command a thin layer over
:mod:`pushbench.snapshots`, :mod:`pushbench.sources` and the RepoScan indexer).

``add`` and ``build`` take the :class:`~pushbench.archives.Limits` flags (one per limit; a
refusal names its flag); ``add`` indexes the copied tree before anything is pinned and lists the
files the indexer skipped; ``build`` reports a broken pin as one error line and goes on.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from .. import terminal
from ..archives import DEFAULT_LIMITS, FLAGS, Limits, human, parse_size
from ..errors import PushBenchError
from ..terminal import ident_column, short_path
from .common import TASKS_DIR_HELP, console, error_line, fail, out, use_tasks_dir

_D = DEFAULT_LIMITS
# One Option per limit, shared by `add` and `build` (the flag names are archives.FLAGS).
MAX_TOTAL = typer.Option(
    None,
    FLAGS["total_bytes"],
    help=f"uncompressed bytes of the whole tree, e.g. 4G (default {human(_D.total_bytes)})",
)
MAX_FILE = typer.Option(
    None,
    FLAGS["file_bytes"],
    help=f"bytes of any one file, e.g. 512M (default {human(_D.file_bytes)})",
)
MAX_FILES = typer.Option(
    None, FLAGS["files"], min=1, help=f"files and folders in the tree (default {_D.files})"
)
MAX_RATIO = typer.Option(
    None,
    FLAGS["ratio"],
    min=1,
    help=f"archive compression ratio, checked past the first 16 MiB (default {_D.ratio})",
)
MAX_PATH = typer.Option(
    None, FLAGS["path_length"], min=1, help=f"bytes of one relative path (default {_D.path_length})"
)
MAX_DEPTH = typer.Option(
    None, FLAGS["depth"], min=1, help=f"parts of one relative path (default {_D.depth})"
)


def _limits(
    total: str | None,
    file: str | None,
    files: int | None,
    ratio: int | None,
    path_length: int | None,
    depth: int | None,
) -> Limits:
    given = {
        "total_bytes": parse_size(total, FLAGS["total_bytes"]) if total else None,
        "file_bytes": parse_size(file, FLAGS["file_bytes"]) if file else None,
        "files": files,
        "ratio": ratio,
        "path_length": path_length,
        "depth": depth,
    }
    return Limits(**{k: v for k, v in given.items() if v is not None})


snap_app = typer.Typer(no_args_is_help=True, help="Build, list and verify repository snapshots.")


@snap_app.command("build")
def snapshots_build(
    names: list[str] = typer.Argument(None, help="snapshots to build (default: all)"),
    source: Path | None = typer.Option(None, "--from", help="sdist file or folder holding it"),
    force: bool = typer.Option(False, help="rebuild even if cached"),
    max_total_bytes: str | None = MAX_TOTAL,
    max_file_bytes: str | None = MAX_FILE,
    max_files: int | None = MAX_FILES,
    max_ratio: int | None = MAX_RATIO,
    max_path_length: int | None = MAX_PATH,
    max_depth: int | None = MAX_DEPTH,
) -> None:
    """Obtain, verify (sha256), extract and freeze the pinned sdists; then index them.

    A snapshot that cannot be built is one error line; the others are still built (exit 2)."""
    from .. import snapshots
    from ..families.reposcan import indexer

    limits = _limits(
        max_total_bytes, max_file_bytes, max_files, max_ratio, max_path_length, max_depth
    )
    broken = 0
    for name in names or sorted(snapshots.load_pins()):
        try:
            root = snapshots.build(
                name,
                source,
                force=force,
                limits=limits,
                log=lambda m, n=name: console.print(f"[{n}] {m}"),
            )
            defs = indexer.load_index(name)
        except (PushBenchError, OSError) as e:  # a broken pin: say so, build the others
            error_line(f"snapshot {name}: {e}")
            broken += 1
            continue
        console.print(f"[green]ok[/] {name}: {root} ({len(defs)} definitions)")
    if broken:
        raise typer.Exit(2)


@snap_app.command("list")
def snapshots_list() -> None:
    """List pinned snapshots and whether each is built (and where)."""
    from .. import snapshots

    pins = sorted(snapshots.load_pins().items())
    tab = terminal.table()
    ident_column(tab, "snapshot")
    tab.add_column("source")
    tab.add_column("sha256", no_wrap=True)
    tab.add_column("commit", no_wrap=True)
    tab.add_column("built")
    for name, pin in pins:
        built = snapshots.snapshot_dir(pin).name if snapshots.info(name) else None
        tab.add_row(
            escape(name),
            escape(_source(pin)),
            pin.sha256[:12],
            (pin.commit or "?")[:12],
            "[yellow]no[/]" if built is None else escape(built),
        )
    terminal.fit(tab, out.width, ["source", "built"])
    out.print(tab)
    if pins:  # every snapshot is built into the one snapshots folder
        out.print(
            f"built in {short_path(snapshots.snapshot_dir(pins[0][1]).parent)}",
            highlight=False,
            soft_wrap=True,
        )


def _source(pin) -> str:
    """Where a pin comes from, short: a synth pin's generator, seed and size (its modules and
    density per atom are in the pins file), a user pin's kind and source (home as ``~``)."""
    if pin.builtin:
        return pin.requirement
    if pin.kind == "synth":
        p = pin.params or {}
        return f"synth: {pin.generator} seed {p.get('seed', '?')}" + (
            f", {p['defs']} defs" if "defs" in p else ""
        )
    return f"{pin.kind}: {short_path(pin.source)}"


@snap_app.command("add")
def snapshots_add(
    name: str = typer.Argument(..., help="snapshot name (not a built-in one)"),
    source: Path = typer.Option(
        ...,
        "--from",
        help="an sdist archive (.tar.gz/.zip), a source folder, or a local git repository",
    ),
    rev: str | None = typer.Option(None, help="git revision (default HEAD)"),
    working_tree: bool = typer.Option(
        False,
        help="take a git repository's files as they are "
        "(uncommitted changes included) instead of a commit",
    ),
    tasks_dir: Path | None = typer.Option(None, help=TASKS_DIR_HELP),
    replace: bool = typer.Option(False, help="re-pin an existing user snapshot to new content"),
    skip_unreadable: bool = typer.Option(
        False,
        "--skip-unreadable",
        help="leave out (and "
        "list) files and folders that cannot be read instead "
        "of refusing the source",
    ),
    max_total_bytes: str | None = MAX_TOTAL,
    max_file_bytes: str | None = MAX_FILE,
    max_files: int | None = MAX_FILES,
    max_ratio: int | None = MAX_RATIO,
    max_path_length: int | None = MAX_PATH,
    max_depth: int | None = MAX_DEPTH,
) -> None:
    """Freeze your own source tree as a snapshot, index it and pin it in a user pins file.

    The tree is indexed before anything is pinned; .py files the indexer cannot take (too
    large, too deep, not parseable, not UTF-8) are skipped and listed."""
    import time

    from .. import snapshots
    from ..families.reposcan import indexer

    limits = _limits(
        max_total_bytes, max_file_bytes, max_files, max_ratio, max_path_length, max_depth
    )
    use_tasks_dir(tasks_dir)
    t0 = time.perf_counter()
    found: dict = {}

    def index(root: Path) -> None:  # runs on the copied tree, before anything is pinned
        found["defs"], found["skipped"] = indexer.index_tree_report(root)

    say = lambda m: console.print(f"[{name}] {m}", highlight=False)  # noqa: E731
    pin = snapshots.add_snapshot(
        name,
        source,
        rev,
        tasks_dir,
        kind="folder" if working_tree else None,
        replace=replace,
        log=say,
        limits=limits,
        skip_unreadable=skip_unreadable,
        check=index,
    )
    indexer.remember(name, pin.sha256, found["defs"])
    defs = indexer.load_index(name)
    for s in found["skipped"][:20]:
        say(f"skipped {s.path}: {s.reason}")
    if len(found["skipped"]) > 20:
        say(f"... and {len(found['skipped']) - 20} more skipped .py files")
    if pin.kind == "git" and rev is None:
        import git

        if git.Repo(source).is_dirty(untracked_files=True):
            console.print(
                f"note: {source} has uncommitted changes; the snapshot is its HEAD "
                "commit (--working-tree takes the files as they are)",
                highlight=False,
            )
    skipped = ", ".join(f"{v} {k}" for k, v in (pin.skipped or {}).items() if v) or "none"
    console.print(
        f"[green]ok[/] {name} ({pin.kind}): {pin.files} files (skipped: {skipped}), "
        f"{len(defs)} definitions, .py skipped: {indexer.skipped_summary(found['skipped'])}; "
        f"sha256 {pin.sha256[:12]}, commit {(pin.commit or '')[:12]}; pinned in {pin.origin} "
        f"({time.perf_counter() - t0:.1f} s)",
        highlight=False,
    )


@snap_app.command("synth")
def snapshots_synth(
    name: str = typer.Argument(..., help="snapshot name (not a built-in one)"),
    seed: int = typer.Option(..., help="generator seed: a fresh seed gives code no model has seen"),
    modules: int = typer.Option(8, min=1, help="package modules"),
    defs: int = typer.Option(300, min=1, help="definitions in RepoScan's universe (exact)"),
    density: str = typer.Option(
        "",
        help="ATOM=FRACTION,... (e.g. docstring=0.3,raises=0.1); "
        "unset atoms keep the defaults (docs/synthetic.md)",
    ),
    tasks_dir: Path | None = typer.Option(None, help=TASKS_DIR_HELP),
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
            stats = synth.generate(
                Path(tmp) / name, seed=seed, modules=modules, defs=defs, density=wanted
            )
            params = {
                "seed": seed,
                "modules": modules,
                "defs": defs,
                "density": dict(stats.density),
            }
            pin = snapshots.add_snapshot(
                name,
                Path(tmp) / name,
                None,
                tasks_dir,
                kind="synth",
                generator_name="reposcan-synth",
                params=params,
            )
        n = len(indexer.load_index(name))
    except ValueError as e:  # DensityError, the generator's bounds (SnapshotError: the handler)
        fail(str(e))
    table = terminal.table()
    ident_column(table, "atom")
    table.add_column("predicate", overflow="fold")
    for head in ("definitions", "fraction"):
        table.add_column(head, justify="right", no_wrap=True)
    for atom in synth.ATOMS:
        table.add_row(
            atom, escape(stats.spec(atom)), str(stats.counts[atom]), f"{stats.fraction(atom):.3f}"
        )
    out.print(table)
    console.print(
        f"[green]ok[/] {name} (synth, seed {seed}): {n} definitions, package "
        f"{stats.package}; sha256 {pin.sha256[:12]}; pinned in {pin.origin}",
        highlight=False,
    )


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
