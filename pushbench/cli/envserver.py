"""``pushbench serve-env``: the OpenEnv env server, as K local worker processes behind one port
or as a Ray Serve deployment (a thin layer over :mod:`pushbench.adapters.envserver`)."""

from __future__ import annotations

import typer

from .common import console, fail


def serve_env_cmd(
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port"),
    host: str = typer.Option(
        "127.0.0.1",
        help="address to bind (the server has no "
        "authentication: keep it on loopback or a private network)",
    ),
    workers: int = typer.Option(
        1,
        "--workers",
        min=1,
        help="local worker processes sharing "
        "the port (a session stays on the worker that accepted it)",
    ),
    max_sessions: int = typer.Option(
        512, "--max-sessions", min=1, help="live WebSocket sessions per worker (or per Ray replica)"
    ),
    idle_timeout: float = typer.Option(
        300.0,
        "--idle-timeout",
        min=0.0,
        help="close a session after this many seconds without a message (0: never)",
    ),
    ws_compression: bool = typer.Option(
        False,
        "--ws-compression/--no-ws-compression",
        help="accept WebSocket per-message deflate (worth it only over slow links)",
    ),
    ray: bool = typer.Option(False, "--ray", help="deploy on Ray Serve instead of local workers"),
    replicas: int = typer.Option(2, "--replicas", min=1, help="Ray Serve replicas (with --ray)"),
    address: str | None = typer.Option(
        None,
        "--address",
        help="Ray cluster to join "
        "(auto | HOST:PORT | ray://HOST:PORT; with --ray; "
        "default: a private local Ray instance)",
    ),
    replica_cpus: float = typer.Option(
        1.0, "--replica-cpus", min=0.0, help="CPUs reserved per Ray Serve replica"
    ),
) -> None:
    """Serve PushBench environments over OpenEnv's HTTP/WebSocket protocol (one environment per
    WebSocket session) for RL trainers: ``PushBenchClient(base_url)`` connects to it."""
    try:
        from ..adapters.envserver import ServerOptions, serve
    except ImportError as e:
        fail(f'serve-env needs the openenv extra: pip install "pushbench[openenv]" ({e})')
    opts = ServerOptions(
        max_sessions=max_sessions, idle_timeout=idle_timeout or None, compression=ws_compression
    )
    if not ray:
        if address is not None or replicas != 2:
            fail("--address and --replicas are for --ray")
        console.print(
            f"env server on http://{host}:{port} ({workers} worker(s), "
            f"{max_sessions} sessions each, idle timeout "
            f"{idle_timeout or 'none'} s)",
            highlight=False,
        )
        serve(host, port, workers, opts)
        return
    if workers != 1:
        fail("--workers is for local workers; with --ray use --replicas")
    if ws_compression:
        fail("--ws-compression is for local workers (Ray Serve's proxy negotiates its own)")
    try:
        from ..adapters import envserver_ray
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        fail(f'--ray needs Ray Serve: pip install "pushbench[ray-serve]" ({e})')
    url = envserver_ray.run(opts, replicas, host, port, address, replica_cpus)
    console.print(
        f"env server on {url} (Ray Serve, {replicas} replica(s), {max_sessions} "
        "sessions each); Ctrl-C stops it",
        highlight=False,
    )
    try:
        import time

        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        envserver_ray.shutdown()
