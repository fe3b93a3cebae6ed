"""The env server at scale (pushbench.adapters.envserver): real uvicorn, real WebSockets.

Sessions opened and closed concurrently (cleanly, by disconnect, mid-step) leave no live
session; a session's trajectory over the server equals ``pushbench.make``'s in process for the
same seed and action stream (with K local worker processes too, ``pushbench serve-env``); the
idle timeout closes a silent session's WebSocket with one error line and reclaims it; capacity
refusals are clean. No timing assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if os.environ.get("CI", "").lower() == "true":
    import openenv  # noqa: F401
else:
    pytest.importorskip("openenv")

from pushbench.adapters.envserver import (
    ServerOptions,
    SessionBook,
    create_server_app,
    uvicorn_options,
)
from pushbench.adapters.envserver_load import (
    action_stream,
    local_trajectory,
    think_times,
    ws_session,
    ws_url,
)
from pushbench.adapters.openenv_env import PushBenchAction, PushBenchClient


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(opts: ServerOptions):
    """The server app under uvicorn in a thread on a free port; yields (url, its SessionBook)."""
    import uvicorn

    port = _free_port()
    app = create_server_app(opts)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", **uvicorn_options(opts)
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not srv.started:
            assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", app.state.pushbench_sessions
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


def wait_idle(book: SessionBook, timeout: float = 60) -> None:
    """Closing is asynchronous on the server: wait until no session is live."""
    deadline = time.monotonic() + timeout
    while book.active and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.fixture(scope="module")
def srv():
    with server(ServerOptions(max_sessions=64, idle_timeout=120)) as pair:
        yield pair


@pytest.mark.parametrize(
    "task,controller",
    [("RepoScan-N10", "standard"), ("RepoScan-N10", "stateqgp"), ("DataOps-N3", "unitqgp")],
)
def test_trajectory_over_the_server_equals_make(srv, task, controller):
    url, _ = srv
    actions = action_stream(task, 7, 150)  # past the budget: includes a reset mid-stream
    local = local_trajectory(task, controller, 7, actions)
    remote = asyncio.run(ws_session(url, task, controller, 7, actions))
    assert remote.errors == []
    assert local.episodes >= 1 and remote.trajectory.episodes == local.episodes
    assert remote.trajectory.texts == local.texts
    assert remote.trajectory.dones == local.dones


def test_a_paced_session_keeps_the_trajectory(srv):
    """The benchmark's paced rows: think times change when steps arrive, never what they do."""
    url, _ = srv
    actions = action_stream("RepoScan-N10", 5, 30)
    pace = think_times(5, len(actions), 0.002)
    assert pace == think_times(5, len(actions), 0.002) and len(set(pace)) == len(pace)
    remote = asyncio.run(ws_session(url, "RepoScan-N10", "stateqgp", 5, actions, pace=pace))
    assert remote.errors == [] and len(remote.latencies) == len(actions)
    assert remote.trajectory.texts == local_trajectory("RepoScan-N10", "stateqgp", 5, actions).texts


def test_action_stream_is_seeded_and_never_terminal():
    a, b = action_stream("RepoScan-N10", 3, 40), action_stream("RepoScan-N10", 3, 40)
    assert a == b and a != action_stream("RepoScan-N10", 4, 40)
    assert not {x["tool"] for x in a} & {"final", "ask_user"}


async def _open_close_many(url: str, n: int) -> list[str]:
    """``n`` sessions at once, each ending differently: clean close, reset then a dropped
    connection, a step then a dropped connection, or a dropped connection before any message."""
    from websockets.asyncio.client import connect

    async def one(i: int) -> str:
        ws = await connect(ws_url(url), max_size=None, open_timeout=60)
        try:
            if i % 4 == 0:
                return (
                    (
                        await ws_session(
                            url, "RepoScan-N10", "stateqgp", i, action_stream("RepoScan-N10", i, 3)
                        )
                    ).errors
                    and "e"
                    or ""
                )
            if i % 4 in (1, 2):
                await ws.send(
                    json.dumps({"type": "reset", "data": {"task": "DataOps-N3", "seed": i}})
                )
                await ws.recv()
            if i % 4 == 2:
                await ws.send(json.dumps({"type": "step", "data": {"tool": "status"}}))
            return ""
        finally:
            await ws.close()

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def test_many_sessions_opened_and_closed_concurrently_leave_none(srv):
    url, book = srv
    wait_idle(book)
    opened, closed = book.opened, book.closed
    errors = asyncio.run(_open_close_many(url, 48))
    assert not any(errors)
    wait_idle(book)
    assert book.active == 0 and not book.live
    # every connection was a session (i % 4 == 0 opens two: the bare one and ws_session's)
    assert book.opened - opened == 48 + 12 and book.closed - closed == 48 + 12
    with urllib.request.urlopen(url + "/pushbench/sessions", timeout=10) as r:
        assert json.loads(r.read())["active"] == 0


def test_the_openenv_client_works_against_it(srv):
    url, book = srv
    with PushBenchClient(base_url=url).sync() as env:
        first = env.reset(task="RepoScan-N10", seed=0, controller="stateqgp")
        assert first.observation.tools and not first.done
        env.step(PushBenchAction(tool="status"))
        assert env.state().step_count == 1
        with pytest.raises(Exception, match="RepoScan-N10"):
            env.reset(task="RepoScan-N1O", seed=0)  # refused; the session survives
        env.step(PushBenchAction(tool="status"))
        assert env.state().step_count == 2


def test_idle_timeout_closes_and_reclaims_the_session():
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async def idle(url: str) -> tuple[dict, bool]:
        async with connect(ws_url(url), max_size=None) as ws:
            await ws.send(
                json.dumps({"type": "reset", "data": {"task": "RepoScan-N10", "seed": 0}})
            )
            await ws.recv()
            notice = json.loads(await asyncio.wait_for(ws.recv(), 60))  # no message sent
            try:
                await asyncio.wait_for(ws.recv(), 60)
                closed = False
            except ConnectionClosed:
                closed = True
            return notice, closed

    with server(ServerOptions(max_sessions=4, idle_timeout=0.3)) as (url, book):
        notice, closed = asyncio.run(idle(url))
        wait_idle(book)
        assert closed and book.active == 0 and book.reaped == 1
        assert notice["type"] == "error" and "idle for more than 0.3 s" in notice["data"]["message"]


def test_capacity_refusal_is_one_error_and_frees_nothing_it_did_not_take():
    from websockets.asyncio.client import connect

    async def go(url: str) -> dict:
        async with connect(ws_url(url)) as a, connect(ws_url(url)) as _b:
            await a.send(json.dumps({"type": "worker"}))
            assert json.loads(await a.recv())["data"]["active_sessions"] == 2
            async with connect(ws_url(url)) as c:
                return json.loads(await c.recv())

    with server(ServerOptions(max_sessions=2, idle_timeout=30)) as (url, book):
        refusal = asyncio.run(go(url))
        wait_idle(book)
        assert refusal["data"]["code"] == "CAPACITY_REACHED"
        assert book.refused == 1 and book.opened == 2 and book.active == 0


@settings(max_examples=25, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.dictionaries(st.text(max_size=10), st.text(max_size=10) | st.integers(), max_size=4).map(
            json.dumps
        ),
        st.sampled_from(
            [
                '{"type":"step","data":{"tool":1}}',
                '{"type":"reset","data":[]}',
                '{"type":"step"}',
                "[1]",
                '{"type":"state"}',
                '"x"',
            ]
        ),
    )
)
def test_any_message_gets_a_reply_and_the_session_stays_usable(srv, message):
    from websockets.asyncio.client import connect

    async def go(url: str) -> tuple[dict, dict]:
        async with connect(ws_url(url)) as ws:
            await ws.send(message)
            reply = json.loads(await ws.recv()) if not _is_close(message) else {"type": "x"}
            if _is_close(message):
                return reply, {"type": "observation"}
            await ws.send(
                json.dumps({"type": "reset", "data": {"task": "RepoScan-N10", "seed": 0}})
            )
            return reply, json.loads(await ws.recv())

    url, _ = srv
    reply, after = asyncio.run(go(url))
    assert reply["type"] in {"error", "observation", "state", "x", "worker"}
    assert after["type"] == "observation"


def _is_close(message: str) -> bool:
    try:
        return json.loads(message).get("type") == "close"
    except (ValueError, AttributeError):
        return False


def test_options_refuse_bad_limits():
    with pytest.raises(ValueError):
        ServerOptions(max_sessions=0)
    with pytest.raises(ValueError):
        ServerOptions(idle_timeout=0)
    for opts in (
        ServerOptions(max_sessions=3, idle_timeout=None),
        ServerOptions(idle_timeout=2.5, compression=True),
    ):
        os.environ.update(opts.to_environ())
        try:
            assert ServerOptions.from_environ() == opts
        finally:
            for k in opts.to_environ():
                os.environ.pop(k)


@pytest.mark.parametrize("compression", [False, True])
def test_deflate_is_negotiated_only_when_the_server_allows_it(compression):
    """A client offering per-message deflate (the websockets default) gets it only from a
    server started with ``compression``; the session works either way."""
    from websockets.asyncio.client import connect

    async def session(url: str) -> tuple[str | None, dict]:
        async with connect(ws_url(url), compression="deflate") as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task": "RepoScan-N10"}}))
            reply = json.loads(await ws.recv())
            assert ws.response is not None
            return ws.response.headers.get("Sec-WebSocket-Extensions"), reply

    with server(ServerOptions(max_sessions=4, compression=compression)) as (url, book):
        extensions, reply = asyncio.run(session(url))
        wait_idle(book)
    assert reply["type"] == "observation" and reply["data"]["observation"]["text"]
    assert ("permessage-deflate" in (extensions or "")) is compression


@pytest.mark.slow
def test_k_local_workers_behind_one_port_keep_every_trajectory():
    """``pushbench serve-env --workers 2``: sessions land on both worker processes and each
    trajectory equals the in-process one."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "serve-env",
            "--port",
            str(port),
            "--workers",
            "2",
            "--max-sessions",
            "16",
        ],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=5).read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no server"
                time.sleep(0.3)
        task, controller = "RepoScan-N10", "stateqgp"
        streams = [action_stream(task, s, 20) for s in range(6)]

        async def all_sessions():
            return await asyncio.gather(
                *(
                    ws_session(url, task, controller, s, streams[s], ask_worker=True)
                    for s in range(6)
                )
            )

        pids = set()
        for _ in range(5):  # the kernel picks the worker: retry until both were used
            results = asyncio.run(all_sessions())
            for s, r in enumerate(results):
                assert r.errors == []
                assert r.trajectory.texts == local_trajectory(task, controller, s, streams[s]).texts
            pids |= {r.pid for r in results}
            if len(pids) == 2:
                break
        assert len(pids) == 2 and proc.pid not in pids
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_sessions_share_the_snapshot_index_not_copies():
    """Memory per session stays small because every RepoScan session of a worker points at the
    one search index of its snapshot (``_search_index`` is a per-process cache)."""
    from pushbench.adapters.envserver import Session

    async def two():
        a, b = Session(), Session()
        for s in (a, b):
            await s.reset({"task": "RepoScan-N10", "seed": 0, "controller": "stateqgp"})
        return a, b

    a, b = asyncio.run(two())
    try:
        assert a.inline and b.inline
        assert a.env._env.unwrapped._index is b.env._env.unwrapped._index
        assert a.env._env is not b.env._env
    finally:
        a.env.close()
        b.env.close()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--address", "auto"], "--ray"),
        (["--replicas", "3"], "--ray"),
        (["--ray", "--workers", "2"], "--replicas"),
        (["--workers", "0"], "workers"),
        (["--idle-timeout", "-1"], "idle-timeout"),
        (["--ray", "--ws-compression"], "Ray Serve"),
    ],
)
def test_serve_env_misuse_is_one_error_line(args, needle):
    from typer.testing import CliRunner

    from pushbench import cli

    res = CliRunner().invoke(cli.app, ["serve-env", "--port", str(_free_port()), *args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "error" in res.output.lower()
    assert needle in res.output
