"""``pushbench bundle``, ``verify`` and ``leaderboard``: results that travel
(:mod:`pushbench.bundles`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from .common import console, fail, out, writable_dir


def bundle_cmd(
    run_dirs: list[Path] = typer.Argument(
        ..., help="`pushbench run` folders and `pushbench mcp` run folders"
    ),
    out_file: Path = typer.Option(..., "--out", help="the archive to write, NAME.pushbench.tar.gz"),
) -> None:
    """Write a self-contained, deterministic archive of runs that any machine can verify."""
    from ..bundles import write_bundle

    if out_file.is_dir():
        fail(f"--out {out_file} is a folder; give a file name ending in .pushbench.tar.gz")
    try:
        made = write_bundle(run_dirs, out_file)
    except OSError as e:
        fail(f"cannot write the bundle {out_file}: {e.strerror or e}")
    out.print(
        f"wrote {made['path']}: {made['episodes']} episodes of {made['tasks']} task(s), "
        f"{made['members']} members; sha256 {made['sha256']}",
        highlight=False,
        soft_wrap=True,
    )


def verify_cmd(
    bundles: list[Path] = typer.Argument(..., help="bundles (NAME.pushbench.tar.gz)"),
    out_dir: Path | None = typer.Option(
        None,
        "--out",
        help="where the replayed run folder goes (default: a folder beside the first bundle)",
    ),
    overwrite: bool = typer.Option(False, help="discard what --out holds first"),
    seed: int = typer.Option(0, help="bootstrap seed (same seed -> identical CSVs)"),
    resamples: int = typer.Option(9999, min=100, help="bootstrap resamples"),
) -> None:
    """Replay every episode of BUNDLE(s) and write the run-folder outputs from the replay."""
    from ..bundles import verify_bundles
    from ..bundles.archive import SUFFIX

    first = bundles[0]
    dest = out_dir or first.with_name(first.name.removesuffix(SUFFIX) + "-verified")
    writable_dir(dest, "--out")
    try:
        results = verify_bundles(
            bundles,
            dest,
            overwrite=overwrite,
            seed=seed,
            n_resamples=resamples,
            console=console,
            printer=out,
            arguments={"bundles": [str(b) for b in bundles], "seed": seed, "resamples": resamples},
        )
    except OSError as e:
        fail(f"cannot verify into {dest}: {e.strerror or e}")
    flagged = 0
    for v in results:
        flagged += len(v.flagged)
        for f in v.flagged:
            console.print(
                f"[bold red]flagged[/] {escape(v.bundle.path.name)} {f['key']}: "
                f"{escape('; '.join(f['reasons']))}",
                highlight=False,
                soft_wrap=True,
            )
        console.print(
            f"{'[green]verified[/]' if not v.flagged else '[yellow]verified[/]'} "
            f"{escape(v.bundle.path.name)} ({v.bundle.sha256[:12]}): "
            f"{len(v.records)} episodes replayed, {len(v.flagged)} flagged",
            highlight=False,
            soft_wrap=True,
        )
    out.print(str(dest), highlight=False, soft_wrap=True)
    if flagged:
        raise typer.Exit(1)


def leaderboard_cmd(
    bundles: list[Path] = typer.Argument(..., help="bundles (NAME.pushbench.tar.gz)"),
    site: Path = typer.Option(..., "--out", help="folder of the static site (index.html)"),
    seed: int = typer.Option(0, help="bootstrap seed of the success intervals"),
    resamples: int = typer.Option(9999, min=100, help="bootstrap resamples"),
) -> None:
    """Verify BUNDLE(s) and build a static, sortable leaderboard page with their run pages."""
    from ..bundles import build_leaderboard
    from ..viewer import OutDirError

    writable_dir(site, "--out")
    try:
        made = build_leaderboard(
            bundles,
            site,
            seed=seed,
            n_resamples=resamples,
            log=lambda m: console.print(m, highlight=False, soft_wrap=True),
        )
    except OutDirError as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write the leaderboard to {site}: {e.strerror or e}")
    out.print((made["site"] / "index.html").resolve().as_uri(), highlight=False, soft_wrap=True)
    if made["refused"]:
        raise typer.Exit(1)
