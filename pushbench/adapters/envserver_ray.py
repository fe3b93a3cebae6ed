"""The env server as a Ray Serve deployment (``pip install "pushbench[ray-serve]"``).

:func:`deployment` wraps :func:`~.envserver.create_server_app` (built on each replica, so
nothing unpicklable crosses the cluster) in a Serve deployment with ``replicas`` replicas.
Serve's HTTP proxy forwards a WebSocket to one replica and keeps the connection there until it
closes, so a session is as sticky as with local workers; each live WebSocket counts as one
ongoing request, so ``max_ongoing_requests`` is the replica's session limit (the proxy routes a
new session to the less busy of two sampled replicas, which spreads sessions over replicas).

:func:`run` starts (or joins) Ray, starts Serve's HTTP proxy on ``host:port`` and deploys the
app at ``/``; clients connect to ``ws://host:port/ws`` exactly as to ``pushbench serve-env``.
"""

from __future__ import annotations

from .envserver import ServerOptions, create_server_app

APP_NAME = "pushbench-env"


def deployment(opts: ServerOptions, replicas: int, replica_cpus: float = 1.0):
    """The bound Serve application (``serve.run`` it)."""
    from ray import serve

    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")

    def build():
        return create_server_app(opts)

    cls = serve.ingress(build)()
    # The decorator form: Ray types serve.deployment(cls, ...) as returning the decorator.
    dep = serve.deployment(
        name="PushBenchEnvServer",
        num_replicas=replicas,
        max_ongoing_requests=opts.max_sessions,
        ray_actor_options={"num_cpus": replica_cpus},
    )(cls)
    return dep.bind()


def run(
    opts: ServerOptions,
    replicas: int,
    host: str = "127.0.0.1",
    port: int = 8000,
    address: str | None = None,
    replica_cpus: float = 1.0,
    blocking: bool = False,
) -> str:
    """Deploy on Ray (``address``: an existing cluster; None: the one this process already
    joined, else a private local instance) and return the server's base URL."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        ray.init(address=address or "local", include_dashboard=False)
    serve.start(http_options={"host": host, "port": port})
    serve.run(
        deployment(opts, replicas, replica_cpus), name=APP_NAME, route_prefix="/", blocking=blocking
    )
    return f"http://{host}:{port}"


def shutdown() -> None:
    """Remove the deployment and stop Serve (Ray itself stays up)."""
    from ray import serve

    serve.shutdown()


__all__ = ["deployment", "run", "shutdown", "APP_NAME"]
