"""``pushbench view``: the static run browser (a thin layer over :mod:`pushbench.viewer`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from .common import console, fail, out, readable_file, writable_dir


def view_cmd(
    run_dir: Path = typer.Argument(..., help="run folder of `pushbench run` or `evaluate`"),
    out_dir: Path | None = typer.Option(
        None, "--out", help="where the viewer's files go (default: RUN_DIR/view)"
    ),
    serve_it: bool = typer.Option(False, "--serve", help="serve it on 127.0.0.1 until Ctrl-C"),
    port: int = typer.Option(8765, min=0, max=65535, help="port for --serve (0: any free port)"),
) -> None:
    """Build a static, offline run browser (overview, episodes, timelines); open index.html."""
    import warnings

    from ..viewer import OutDirError, build_site, serve

    if not run_dir.is_dir():
        fail(
            f"{run_dir} is not a run folder ({'a file' if run_dir.exists() else 'not found'}); "
            "give the --out folder of `pushbench run` or `pushbench evaluate`"
        )
    readable_file(run_dir / "episodes.jsonl", "episodes file")
    dest = out_dir or run_dir / "view"
    writable_dir(dest, "--out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            site = build_site(run_dir, dest, log=lambda m: console.print(m, highlight=False))
        except FileNotFoundError:
            fail(
                f"no episodes file: {run_dir} has no episodes.jsonl; produce one with "
                "`pushbench run EXPERIMENT.yaml --out DIR`"
            )
        except OutDirError as e:
            fail(str(e))
        except (ValueError, KeyError, TypeError) as e:  # a line the frame cannot read
            fail(f"cannot read the episode lines of {run_dir}: {type(e).__name__}: {e}")
        except OSError as e:
            fail(f"cannot write the viewer to {dest}: {e.strerror or e}")
    for w in caught:
        console.print(f"[yellow]warning:[/] {escape(str(w.message))}", highlight=False)
    index = (site / "index.html").resolve()
    out.print(index.as_uri(), highlight=False, soft_wrap=True)
    if serve_it:
        try:
            serve(
                site,
                port,
                ready=lambda url: console.print(
                    f"serving on {url} (loopback only; Ctrl-C stops)", highlight=False
                ),
            )
        except OSError as e:
            fail(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}")
        except KeyboardInterrupt:
            console.print("stopped", highlight=False)
