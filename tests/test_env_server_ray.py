"""The env server as a Ray Serve deployment (pushbench.adapters.envserver_ray) on a local Ray
instance: sessions spread over two replicas, and every session's trajectory equals the
in-process ``pushbench.make`` one for the same seed and actions. Slow (Ray and Serve start)."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

pytestmark = pytest.mark.slow

if os.environ.get("CI", "").lower() == "true":
    import ray.serve
else:
    pytest.importorskip("ray.serve")
    pytest.importorskip("openenv")

import ray  # noqa: E402

from pushbench.adapters import envserver_ray  # noqa: E402
from pushbench.adapters.envserver import ServerOptions  # noqa: E402
from pushbench.adapters.envserver_load import action_stream, local_trajectory, ws_session  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def serve_url():
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=128 * 1024**2,
            log_to_driver=False,
        )
    try:
        yield envserver_ray.run(
            ServerOptions(max_sessions=32, idle_timeout=120),
            replicas=2,
            port=_free_port(),
            replica_cpus=0.5,
        )
    finally:
        envserver_ray.shutdown()
        if started:
            ray.shutdown()


@pytest.mark.parametrize(
    "task,controller", [("RepoScan-N10", "stateqgp"), ("DataOps-N3", "standard")]
)
def test_sessions_over_two_replicas_equal_make(serve_url, task, controller):
    seeds = range(8)
    streams = {s: action_stream(task, s, 25) for s in seeds}

    async def all_sessions():
        # every session is open at once, so the proxy sees both replicas busy and spreads them
        return await asyncio.gather(
            *(
                ws_session(serve_url, task, controller, s, streams[s], ask_worker=True)
                for s in seeds
            )
        )

    results = asyncio.run(all_sessions())
    for s, r in zip(seeds, results, strict=True):
        assert r.errors == []
        local = local_trajectory(task, controller, s, streams[s])
        assert r.trajectory.texts == local.texts and r.trajectory.dones == local.dones
    assert len({r.pid for r in results}) == 2
