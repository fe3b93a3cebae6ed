"""The PushBench env server at scale: OpenEnv's protocol, one session per WebSocket, bounded.

``pushbench serve-env`` serves :class:`~.openenv_env.PushBenchEnvironment` the way OpenEnv's
``create_app`` does (``/reset``, ``/step``, ``/health``, ``/schema`` over HTTP and the ``/ws``
session protocol that :class:`~.openenv_env.PushBenchClient` speaks), with the WebSocket
session loop replaced by :func:`session_loop` because OpenEnv 0.3's loop does not hold up at
hundreds of sessions:

* it gives every session its own one-thread executor and hops to it on every step (a thread
  switch costs more than a RepoScan step, and the GIL runs one step at a time anyway); here a
  RepoScan or DataOps step runs on the event loop (in-memory work plus small workspace files),
  while resets (``make`` may load a snapshot index) and SWE-lite steps (test runs) go to threads;
* its idle reaper wakes every ``max(timeout / 4, 5)`` seconds and closes the environment but
  leaves the WebSocket open (the next step fails with an unrelated error); here each session
  waits for its next message with the idle timeout and, when it expires, sends one error line
  (code ``SESSION_ERROR``, "idle for more than ... s") and closes the WebSocket;
* a session is reclaimed (environment closed, slot freed) on every way out: ``close``
  message, client disconnect, idle timeout, server shutdown.

Nothing an agent sees changes: observations, rewards and records are the environment's own,
serialised by OpenEnv's ``serialize_observation``. One extra message type, ``worker``, answers
``{"pid", "active_sessions", "max_sessions"}`` (which worker process holds the session; used by
the scale-out tests and the benchmark); ``GET /pushbench/sessions`` gives the worker's
:class:`SessionBook` counts.

Scale-out (:func:`serve`): ``workers > 1`` runs K uvicorn worker processes on one listening
socket. A WebSocket is one TCP connection and the kernel hands each accepted connection to one
worker, so a session stays on the worker that accepted it for its whole life: no session
state is shared between processes and none needs to be. Each worker loads the snapshot
indexes once (module-level caches) and shares them between its sessions.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from dataclasses import dataclass, field, fields

from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.serialization import deserialize_action, serialize_observation
from openenv.core.env_server.types import (
    WSErrorCode,
    WSErrorResponse,
    WSObservationResponse,
    WSStateResponse,
)
from pydantic import ValidationError

from ..tasks import UnknownTaskError, get_task
from .openenv_env import PushBenchAction, PushBenchEnvironment, PushBenchObservation

# Families whose steps run on the event loop: RepoScan (in-memory work; a thread hop costs more
# than the step) and DataOps (in-memory work plus small workspace files: measured at 256
# sessions, moving its steps to threads gave about the same steps/s and a far longer p99 tail,
# 26 s against 3 s, from queueing in the thread pool). SWE-lite steps run test suites in
# subprocesses (seconds): they go to threads.
INLINE_FAMILIES = frozenset({"reposcan", "dataops", "dataops_public"})
ENV_PREFIX = "PUSHBENCH_ENV_SERVER_"
_RESET_LOCK = threading.Lock()  # see Session._reset


@dataclass(frozen=True)
class ServerOptions:
    """Per-worker limits: ``max_sessions`` live WebSocket sessions, each closed after
    ``idle_timeout`` seconds without a message (None: never). ``compression``: accept
    WebSocket per-message deflate when a client offers it (off by default: on loopback or a
    LAN it costs both ends CPU for nothing; measured in ``experiments/bench_env_server.py``,
    it was about a fifth of the server's and of the load generator's CPU per step; local
    workers only: Ray Serve's proxy negotiates its own)."""

    max_sessions: int = 512
    idle_timeout: float | None = 300.0
    compression: bool = False

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if self.idle_timeout is not None and not self.idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0 seconds, got {self.idle_timeout}")

    def to_environ(self) -> dict[str, str]:
        """The options as environment variables (how uvicorn's worker processes get them)."""
        return {
            ENV_PREFIX + "MAX_SESSIONS": str(self.max_sessions),
            ENV_PREFIX + "IDLE_TIMEOUT": ""
            if self.idle_timeout is None
            else repr(self.idle_timeout),
            ENV_PREFIX + "COMPRESSION": "1" if self.compression else "",
        }

    @classmethod
    def from_environ(cls) -> ServerOptions:
        raw = os.environ.get(ENV_PREFIX + "IDLE_TIMEOUT", "300")
        return cls(
            max_sessions=int(os.environ.get(ENV_PREFIX + "MAX_SESSIONS", "512")),
            idle_timeout=float(raw) if raw else None,
            compression=bool(os.environ.get(ENV_PREFIX + "COMPRESSION")),
        )


@dataclass
class SessionBook:
    """The live sessions of one worker process and what happened to the others."""

    max_sessions: int
    active: int = 0
    opened: int = 0
    closed: int = 0
    reaped: int = 0  # closed by the idle timeout (also counted in ``closed``)
    refused: int = 0  # turned away at capacity (never opened)
    steps: int = 0
    live: set = field(default_factory=set, repr=False, compare=False)

    def open(self, key: object) -> bool:
        if self.active >= self.max_sessions:
            self.refused += 1
            return False
        self.live.add(key)
        self.active, self.opened = len(self.live), self.opened + 1
        return True

    def close(self, key: object, idle: bool = False) -> None:
        self.live.discard(key)
        self.active, self.closed = len(self.live), self.closed + 1
        self.reaped += idle

    def counts(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "live"} | {
            "pid": os.getpid()
        }


def _error(message: str, code: WSErrorCode, **extra) -> str:
    return WSErrorResponse(data={"message": message, "code": code, **extra}).model_dump_json()


def _runs_inline(task_id: object) -> bool:
    """Whether sessions of ``task_id`` step inline (its family is in ``INLINE_FAMILIES``);
    ``False`` for what is not a known task id (the env's own reset refuses it)."""
    try:
        return get_task(task_id).family in INLINE_FAMILIES  # type: ignore[arg-type]
    except (UnknownTaskError, TypeError, AttributeError):
        return False


class Session:
    """One WebSocket session: its environment and how its steps run (inline or in a thread)."""

    def __init__(self) -> None:
        self.env = PushBenchEnvironment()
        self.inline = False

    async def reset(self, data: dict) -> PushBenchObservation:
        obs = await asyncio.to_thread(self._reset, data)
        self.inline = _runs_inline(self.env.state.task_id)
        return obs

    def _reset(self, data: dict) -> PushBenchObservation:
        """Resets of inline families take ``_RESET_LOCK``: a session's first reset on a
        snapshot builds its index from ``ast`` trees, and CPython 3.11 can fail ASTs built in
        several threads at once ("AST constructor recursion depth mismatch", seen with six
        concurrent first resets on a fresh worker). Their resets are in-memory work under the
        GIL, so the lock costs no parallelism; SWE-lite resets (copies, subprocesses) stay
        concurrent."""
        # the env's reset defaults to RepoScan-N10 when no task is named
        if not _runs_inline(data.get("task", "RepoScan-N10")):
            return self.env.reset(**data)
        with _RESET_LOCK:
            return self.env.reset(**data)

    async def step(self, action: PushBenchAction) -> PushBenchObservation:
        if self.inline:
            return self.env.step(action)
        return await asyncio.to_thread(self.env.step, action)

    async def answer(self, message: dict, book: SessionBook) -> str | None:
        """The reply to one message (None: the client closed the session)."""
        kind = message.get("type")
        if kind == "reset":
            data = message.get("data") or {}
            if not isinstance(data, dict):
                raise ValueError("reset data must be an object")
            return WSObservationResponse(
                data=serialize_observation(await self.reset(data))
            ).model_dump_json()
        if kind == "step":
            action = deserialize_action(message.get("data") or {}, PushBenchAction)
            obs = await self.step(action)
            book.steps += 1
            return WSObservationResponse(data=serialize_observation(obs)).model_dump_json()
        if kind == "state":
            return WSStateResponse(data=self.env.state.model_dump()).model_dump_json()
        if kind == "worker":
            return json.dumps(
                {
                    "type": "worker",
                    "data": {
                        "pid": os.getpid(),
                        "active_sessions": book.active,
                        "max_sessions": book.max_sessions,
                    },
                }
            )
        if kind == "close":
            return None
        return _error(f"Unknown message type: {kind}", WSErrorCode.UNKNOWN_TYPE)


async def session_loop(websocket: WebSocket, book: SessionBook, opts: ServerOptions) -> None:
    """Serve one WebSocket session until close, disconnect or idle timeout; always reclaim it."""
    await websocket.accept()
    if not book.open(websocket):
        await websocket.send_text(
            _error(
                f"server at capacity ({book.max_sessions} sessions per worker); retry later",
                WSErrorCode.CAPACITY_REACHED,
                active_sessions=book.active,
                max_sessions=book.max_sessions,
            )
        )
        await websocket.close()
        return
    session, idle = Session(), False
    try:
        while True:
            try:
                # asyncio.timeout, not wait_for: wait_for wraps every receive in a new Task
                async with asyncio.timeout(opts.idle_timeout):
                    raw = await websocket.receive_text()
            except TimeoutError:
                idle = True
                await websocket.send_text(
                    _error(
                        f"session idle for more than {opts.idle_timeout:g} s: closed (open a new "
                        "session)",
                        WSErrorCode.SESSION_ERROR,
                    )
                )
                break
            try:
                message = json.loads(raw)
                if not isinstance(message, dict):
                    raise ValueError("a message must be a JSON object")
                reply = await session.answer(message, book)
            except json.JSONDecodeError as e:
                reply = _error(f"Invalid JSON: {e}", WSErrorCode.INVALID_JSON)
            except ValidationError as e:
                reply = _error(
                    "Invalid message", WSErrorCode.VALIDATION_ERROR, errors=json.loads(e.json())
                )
            except Exception as e:  # noqa: BLE001 - the env's own refusal (bad task, no reset)
                reply = _error(str(e), WSErrorCode.EXECUTION_ERROR)
            if reply is None:
                break
            await websocket.send_text(reply)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client went away (RuntimeError: sending on a socket closed meanwhile)
    finally:
        session.env.close()
        book.close(websocket, idle=idle)
        try:
            await websocket.close()
        except (WebSocketDisconnect, RuntimeError):
            pass  # already closed by the client


def create_server_app(opts: ServerOptions | None = None) -> FastAPI:
    """OpenEnv's app for :class:`PushBenchEnvironment` with :func:`session_loop` at ``/ws``."""
    opts = opts or ServerOptions()
    app = create_app(
        PushBenchEnvironment,
        PushBenchAction,
        PushBenchObservation,
        env_name="pushbench",
        max_concurrent_envs=opts.max_sessions,
    )
    book = SessionBook(opts.max_sessions)
    app.state.pushbench_sessions = book
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/ws"]

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await session_loop(websocket, book, opts)

    @app.get("/pushbench/sessions")
    async def sessions() -> dict:
        return book.counts()

    return app


def app_from_environ() -> FastAPI:
    """The app of one uvicorn worker process (options from :meth:`ServerOptions.to_environ`)."""
    return create_server_app(ServerOptions.from_environ())


def uvicorn_options(opts: ServerOptions) -> dict:
    """The WebSocket settings every worker runs with (``uvicorn.run``/``uvicorn.Config``
    keyword arguments): messages up to 16 MiB, per-message deflate as ``opts`` says."""
    return {"ws_max_size": 16 * 1024 * 1024, "ws_per_message_deflate": opts.compression}


def serve(
    host: str,
    port: int,
    workers: int = 1,
    opts: ServerOptions | None = None,
    log_level: str = "warning",
) -> None:
    """Run the server on ``host:port`` with ``workers`` processes (blocks until stopped)."""
    import uvicorn

    opts = opts or ServerOptions()
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1:
        uvicorn.run(
            create_server_app(opts),
            host=host,
            port=port,
            log_level=log_level,
            **uvicorn_options(opts),
        )
        return
    os.environ.update(opts.to_environ())  # inherited by the worker processes
    uvicorn.run(
        f"{__name__}:app_from_environ",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        **uvicorn_options(opts),
    )


__all__ = [
    "ServerOptions",
    "SessionBook",
    "create_server_app",
    "serve",
    "session_loop",
    "uvicorn_options",
    "INLINE_FAMILIES",
]
