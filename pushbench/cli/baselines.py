"""``pushbench baselines install|list``: coding-agent baselines in their own pinned venvs (a thin
layer over :mod:`pushbench.baselines`; a ``BaselineError`` becomes one ``error:`` line)."""

from __future__ import annotations

import typer

from .common import console

baselines_app = typer.Typer(
    no_args_is_help=True,
    help="Install and list agent baselines "
    "(Aider, Letta) in their own pinned virtual environments.",
)


@baselines_app.command("install")
def install_cmd(
    name: str = typer.Argument(..., help="baseline to install: aider | letta"),
    force: bool = typer.Option(False, help="rebuild even if the pinned version is installed"),
) -> None:
    """Install NAME's pinned version into $PUSHBENCH_HOME/baselines/NAME (idempotent)."""
    from ..baselines import install

    mark = install(name, force=force, log=lambda m: console.print(m, highlight=False))
    what = "already installed" if mark["kept"] else f"installed in {mark['seconds']} s"
    console.print(f"{name} {mark['version']}: {what} ({mark['program']})", highlight=False)


@baselines_app.command("list")
def list_cmd() -> None:
    """Show each baseline: pinned version, installed version, state and path."""
    from ..baselines import list_baselines

    for row in list_baselines():
        console.print(
            f"{row['baseline']}\tpinned {row['pinned']}\t{row['state']}"
            f"{' ' + row['version'] if row['version'] else ''}\t{row['path']}",
            highlight=False,
        )
