"""``pushbench model-server``: an offline policy served as a model over HTTP on loopback (a
thin layer over :mod:`pushbench.modelserver`)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, fail


def model_server_cmd(
    policy: str = typer.Option(
        ...,
        "--policy",
        help="offline policy: diligent, exhaustive, "
        "random, simulated-weak|mid|strong; or oracle-edit (the "
        "SWE-lite reference fixes as Aider edits: an oracle, never a "
        "result)",
    ),
    params: str | None = typer.Option(None, "--params", help="policy parameters as JSON"),
    seed: int = typer.Option(0, min=0, help="policy seed (same seed, same answers)"),
    port: int = typer.Option(..., "--port", min=0, max=65535, help="TCP port (0: any free)"),
    host: str = typer.Option("127.0.0.1", help="loopback address to bind"),
    log_file: Path | None = typer.Option(
        None, "--log", help="append one JSON line per request here"
    ),
    port_file: Path | None = typer.Option(
        None, "--port-file", help="write the bound port here once listening"
    ),
    server_name: str = typer.Option("pushbench", help="the MCP server name the client uses"),
    models: list[str] | None = typer.Option(
        None,
        "--model",
        help="a model name to serve "
        "(repeat for more; default pushbench-policy); "
        "any other gets the API's model-not-found error",
    ),
) -> None:
    """Serve an offline policy as a model (Anthropic Messages, OpenAI Responses and Chat
    Completions APIs) on loopback, for driving Claude Code or Codex CLI offline."""
    import json as _json

    from ..modelserver import PolicyBackend, serve
    from ..modelserver.app import check_loopback
    from ..modelserver.core import Backend

    try:
        parsed = _json.loads(params) if params else {}
        if not isinstance(parsed, dict):
            raise ValueError("--params must be a JSON object")
        if policy == "oracle-edit":  # the text-edit oracle for coding agents (Aider)
            from ..modelserver.oracle_edit import OracleEditBackend

            if parsed:
                raise ValueError("oracle-edit takes no --params")
            backend: Backend = (
                OracleEditBackend(models=tuple(models)) if models else OracleEditBackend()
            )
        else:
            backend = PolicyBackend(
                policy, parsed, seed, server_name, **({"models": tuple(models)} if models else {})
            )
        check_loopback(host)
    except (KeyError, ValueError) as e:
        fail(str(e.args[0] if isinstance(e, KeyError) and e.args else e))
    try:
        serve(
            backend,
            host,
            port,
            str(log_file) if log_file else None,
            str(port_file) if port_file else None,
            on_ready=lambda url: console.print(
                f"model server ({policy}, seed {seed}) listening on {url}", highlight=False
            ),
        )
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
