"""The ``pushbench`` command line (typer): ``pushbench.cli:app`` is the console entry point.

One module per command group, each command a thin layer over the library:

- :mod:`.common`: the app, the consoles, and :class:`~.common.OneLineErrors`, the one place a
  usage error or a :class:`~pushbench.errors.PushBenchError` becomes one ``error: ...`` line
  and exit status 2 (commands raise; they do not print errors themselves);
- :mod:`.run`: ``run``, ``report``, ``plot``;
- :mod:`.snapshots`: ``snapshots ...``; :mod:`.tasks`: ``tasks``, ``tasks new``;
- :mod:`.viewer`: ``view``;
- :mod:`.blackbox`: ``mcp``, ``mcp-prompt``, ``evaluate``, ``blackbox run``;
- :mod:`.modelserver`: ``model-server``;
- :mod:`.envserver`: ``serve-env`` (the OpenEnv env server: local workers or Ray Serve);
- :mod:`.baselines`: ``baselines install``, ``baselines list``;
- :mod:`.bundles`: ``bundle``, ``verify``, ``leaderboard``;
- ``swelite ...`` lives with its family (:mod:`pushbench.families.swelite.cli`).

The commands are registered here, in one list, because their order is the order of
``pushbench --help``.
"""

from __future__ import annotations

from ..families.swelite.cli import swelite_app  # light: typer and rich only
from . import baselines, blackbox, bundles, envserver, modelserver, run, snapshots, tasks, viewer
from .common import app

app.add_typer(snapshots.snap_app, name="snapshots")
app.add_typer(swelite_app, name="swelite")
app.add_typer(tasks.tasks_app, name="tasks")
app.command("run")(run.run_cmd)
app.command("report")(run.report_cmd)
app.command("plot")(run.plot_cmd)
app.command("view")(viewer.view_cmd)
app.command("mcp")(blackbox.mcp_cmd)
app.command("mcp-prompt")(blackbox.mcp_prompt_cmd)
app.command("model-server")(modelserver.model_server_cmd)
app.command("serve-env")(envserver.serve_env_cmd)
app.command("evaluate")(blackbox.evaluate_cmd)
app.add_typer(blackbox.bb_app, name="blackbox")
app.add_typer(baselines.baselines_app, name="baselines")
app.command("bundle")(bundles.bundle_cmd)
app.command("verify")(bundles.verify_cmd)
app.command("leaderboard")(bundles.leaderboard_cmd)

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover - console entry
    app()
