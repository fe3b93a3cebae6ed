"""What every command module of the CLI shares: the app, the consoles, the one error handler.

:class:`OneLineErrors` is the one place a problem becomes output: usage errors (bad option
values, missing arguments) and any :class:`~pushbench.errors.PushBenchError` a command raises
(or :func:`fail` raises for it) are printed as one ``error: ...`` line on stderr, exit 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from ..errors import PushBenchError

try:  # Typer >= 0.20 carries its own copy of click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older Typer uses click itself
    # mypy sees Typer's copy above: these are the same classes under click's own name.
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # type: ignore[assignment]

console = Console(stderr=True)
out = Console()


class CommandError(PushBenchError):
    """A problem a command found in its own arguments or environment (raised by :func:`fail`)."""


def error_line(msg: str) -> None:
    """One ``error: ...`` line on stderr, never wrapped (rich markup in ``msg`` is escaped)."""
    console.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)


class OneLineErrors(TyperGroup):
    """Usage errors (bad option values, missing arguments) and any
    :class:`~pushbench.errors.PushBenchError` as one ``error: ...`` line, exit 2.

    Everything else is Typer's own handling (help, ``--help``, exit codes of commands).
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        extra["windows_expand_args"] = windows_expand_args  # the parent's, passed on as given
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError:  # bare `pushbench`: Typer prints the help
            return super().main(args, prog_name, complete_var, True, **extra)
        except UsageError as e:
            where = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
            console.print(
                f"[bold red]error:[/] {escape(e.format_message())}{where}",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
        except ClickException as e:
            error_line(e.format_message())
            sys.exit(e.exit_code)
        except typer.Abort:
            console.print("aborted", highlight=False)
            sys.exit(1)
        except PushBenchError as e:  # bad input, found by a command or the library: one line, 2
            error_line(str(e))
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    cls=OneLineErrors,
    help="PushBench: quantitative goal persistence benchmark for LLM agents.",
)

TASKS_DIR_HELP = (
    "user tasks folder to read and write (sets PUSHBENCH_TASKS for this command "
    "and its workers; default: $PUSHBENCH_TASKS, else the cache's user folder)"
)


def fail(msg: str) -> NoReturn:
    """Stop the command: :class:`OneLineErrors` prints ``error: msg`` and exits 2 (misuse)."""
    raise CommandError(msg)


def writable_dir(path: Path, option: str) -> None:
    """fail unless ``path`` is a directory or could be created as one."""
    if path.exists() and not path.is_dir():
        fail(f"{option} {path} is a file; give a directory (it is created if missing)")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        fail(f"{option} {path}: {probe} is a file, so the directory cannot be created")
    if not os.access(probe, os.W_OK | os.X_OK):
        fail(f"{option} {path}: cannot create or write it (no write permission on {probe})")


def readable_file(path: Path, what: str) -> None:
    if path.is_dir():
        return
    if path.exists() and not os.access(path, os.R_OK):
        fail(f"{what} {path} is not readable (permission denied)")


def split(values: list[str] | None) -> list[str] | None:
    """Repeatable, comma-separated option values -> list (``None`` when not given)."""
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def use_tasks_dir(tasks_dir: Path | None) -> None:
    """Make ``tasks_dir`` the ``$PUSHBENCH_TASKS`` folder of this process and its children."""
    if tasks_dir is None:
        return
    if tasks_dir.exists() and not tasks_dir.is_dir():
        fail(f"--tasks-dir {tasks_dir} is a file; give a folder")
    from ..registration import register_all
    from ..tasks import reload
    from ..userdata import ENV_VAR

    os.environ[ENV_VAR] = str(tasks_dir.expanduser().resolve())
    reload()
    register_all()
