"""The HTTP side: routes, body limits, validation, error shapes, per-request log, serving.

Routes (each also without the ``/v1`` prefix): ``POST /v1/messages`` and
``/v1/messages/count_tokens`` (Anthropic), ``POST /v1/responses`` (OpenAI Responses),
``POST /v1/chat/completions`` (Chat Completions), ``GET /v1/models`` (the served model names,
:attr:`PolicyBackend.models`; ``GET /v1/models/{name}`` for one), ``GET /health``. The server
binds loopback addresses only.

Bounds on what a client sends: a body longer than :data:`MAX_BODY` is refused (413) as it
streams in; a gzip body is decompressed as it streams in and refused once the decompressed
bytes pass :data:`MAX_BODY` (the cap is on what comes out, not what goes in); a body the client
cuts off is a 400 in the API's shape, logged as one line; a model name the server does not
serve is the API's own "model not found" error (404). Every answer, error or not, is in the
shape of the API the route belongs to. The request log is created 0600.

Every request is logged as one JSON line (API, path, status,
bytes in and out, the client's tool names, the PushBench tools found, tool results seen, the
decision, latency, the error if any); the server never holds the hidden set, so it cannot log it.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import anthropic_api, openai_api
from .core import Backend, Conversation, RequestProblem

log = logging.getLogger("pushbench.modelserver")
MAX_BODY = 32 << 20  # bytes; a longer body is refused (413) without being read whole
STATUS = {
    "invalid_request": 400,
    "not_found": 404,
    "too_large": 413,
    "internal": 500,
    "method": 405,
    "model_not_found": 404,
}


class RequestLog:
    """Appends one JSON line per request to ``path`` (thread-safe); also logs a summary."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self.entries = 0
        if self.path is not None:  # private from the first byte: it holds the prompts' tools
            os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
            if self.path.stat().st_uid == os.getuid():
                self.path.chmod(0o600)

    def write(self, entry: dict) -> None:
        with self._lock:
            self.entries += 1
            if self.path is not None:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with open(fd, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, ensure_ascii=True, default=repr) + "\n")
        log.info(
            "%s %s -> %s in %.1f ms",
            entry.get("api"),
            entry.get("path"),
            entry.get("status"),
            entry.get("latency_ms", 0.0),
        )


class _Gunzip:
    """Streaming gzip decompression (members in sequence) that stops past ``cap`` bytes out."""

    def __init__(self, cap: int) -> None:
        self.cap, self.out, self.fed = cap, 0, False
        self.d = zlib.decompressobj(wbits=31)

    def feed(self, data: bytes) -> bytes:
        parts = []
        self.fed = self.fed or bool(data)
        try:
            while data:
                piece = self.d.decompress(data, self.cap - self.out + 1)
                self.out += len(piece)
                if self.out > self.cap:
                    raise RequestProblem(
                        f"the decompressed body exceeds the limit of {self.cap} bytes",
                        "too_large",
                        413,
                    )
                parts.append(piece)
                if self.d.eof:  # a gzip member ended; another may follow
                    data = self.d.unused_data
                    if data:
                        self.d = zlib.decompressobj(wbits=31)
                else:
                    data = self.d.unconsumed_tail
        except zlib.error as e:
            raise RequestProblem(f"cannot decompress the gzip body: {e}") from None
        return b"".join(parts)

    def finish(self) -> None:
        if self.fed and not self.d.eof:
            raise RequestProblem("the gzip body is truncated (it ends inside a gzip member)")


async def _read_body(request: Request) -> bytes:
    """The body, decompressed, within :data:`MAX_BODY`; :class:`RequestProblem` otherwise."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY:
        raise RequestProblem(
            f"request body of {declared} bytes exceeds the limit of {MAX_BODY} bytes",
            "too_large",
            413,
        )
    enc = request.headers.get("content-encoding", "identity").strip().lower()
    if enc not in ("identity", "", "gzip"):
        raise RequestProblem(f"unsupported content-encoding {enc[:40]!r} (send identity or gzip)")
    gunzip = _Gunzip(MAX_BODY) if enc == "gzip" else None
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise RequestProblem(
                    f"request body exceeds the limit of {MAX_BODY} bytes", "too_large", 413
                )
            chunks.append(gunzip.feed(chunk) if gunzip else chunk)
    except ClientDisconnect:
        raise RequestProblem(
            f"the request body was cut off after {size} bytes (the client disconnected)"
        ) from None
    if gunzip:
        gunzip.finish()
    return b"".join(chunks)


def _check_model(backend: Backend, model: object) -> None:
    if model not in backend.models:
        raise RequestProblem(
            f"model {str(model)[:100]!r} not found; this server serves "
            f"{', '.join(backend.models)} (GET /v1/models)",
            "model_not_found",
            404,
        )


def _decode(body: bytes) -> dict:
    try:
        obj = json.loads(body)
    except RecursionError:
        raise RequestProblem("the JSON body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestProblem(f"the body is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(obj, dict):
        raise RequestProblem(f"the body must be a JSON object, not {type(obj).__name__}")
    return obj


def _validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:3]:
        loc = ".".join(str(x) for x in err["loc"]) or "body"
        parts.append(f"{loc}: {err['msg']}")
    return "invalid request: " + "; ".join(parts)


def build_app(backend: Backend, request_log: RequestLog | None = None) -> Starlette:
    """The Starlette app answering all three APIs with ``backend``'s decisions."""
    rlog = request_log or RequestLog(None)

    def handler(api: str, parse: Callable, render: Callable, error: Callable):
        async def endpoint(request: Request) -> Response:
            t0 = time.perf_counter()
            entry: dict = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "api": api,
                "path": request.url.path,
                "bytes_in": 0,
            }
            try:
                body = await _read_body(request)
                entry["bytes_in"] = len(body)
                try:
                    conv, extra = parse(_decode(body))
                except ValidationError as e:
                    raise RequestProblem(_validation_message(e)) from None
                except RecursionError:
                    raise RequestProblem("the request is nested too deeply") from None
                _check_model(backend, conv.model)
                entry.update(
                    stream=conv.stream,
                    client_tools=len(conv.tools),
                    client_tool_names=conv.tools[:100],
                    tool_results=sum(s.result is not None for s in conv.steps),
                )
                decision = await run_in_threadpool(backend.decide, conv)
                entry["decision"] = decision.as_log()
                entry["pushbench_tools"] = sorted(t for t in conv.tools if backend.server_name in t)
                chunks = render(decision, conv, extra, len(body))
                status = 200
            except RequestProblem as e:
                status = e.status
                entry["error"] = str(e)
                if "cut off" in str(e):  # one line, no traceback: the client went away
                    log.warning("%s %s: %s", api, request.url.path, e)
                payload = json.dumps(error(e.kind, str(e))).encode()
                entry.update(
                    status=status,
                    bytes_out=len(payload),
                    latency_ms=round(1000 * (time.perf_counter() - t0), 3),
                )
                rlog.write(entry)
                return Response(payload, status_code=status, media_type="application/json")
            except Exception as e:  # a server bug: answer in the API's shape
                log.exception("internal error answering %s", api)
                err_text = json.dumps(error("internal", f"internal error: {type(e).__name__}"))
                entry.update(status=500, error=f"internal: {e!r}"[:300])
                rlog.write(entry)
                return Response(err_text.encode(), status_code=500, media_type="application/json")
            entry.update(
                status=status,
                bytes_out=sum(len(c) for c in chunks),
                latency_ms=round(1000 * (time.perf_counter() - t0), 3),
            )
            rlog.write(entry)
            if conv.stream:

                async def gen():
                    for c in chunks:
                        yield c

                return StreamingResponse(
                    gen(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
                )
            return Response(chunks[0], media_type="application/json")

        return endpoint

    def parse_messages(obj):
        return anthropic_api.conversation(anthropic_api.MessagesRequest.model_validate(obj)), None

    def render_messages(d, conv: Conversation, extra, n):
        if conv.stream:
            return anthropic_api.stream(d, conv.model, n)
        return [json.dumps(anthropic_api.response(d, conv.model, n)).encode()]

    def parse_responses(obj):
        return openai_api.responses_conversation(openai_api.ResponsesRequest.model_validate(obj))

    def render_responses(d, conv: Conversation, namespaced, n):
        if conv.stream:
            return openai_api.responses_stream(d, conv.model, n, namespaced)
        return [json.dumps(openai_api.responses_response(d, conv.model, n, namespaced)).encode()]

    def parse_chat(obj):
        return openai_api.chat_conversation(openai_api.ChatRequest.model_validate(obj)), None

    def render_chat(d, conv: Conversation, extra, n):
        if conv.stream:
            return openai_api.chat_stream(d, conv.model, n)
        return [json.dumps(openai_api.chat_response(d, conv.model, n)).encode()]

    async def count_tokens(request: Request) -> Response:
        try:
            body = await _read_body(request)
            obj = _decode(body)
            if "model" in obj:
                _check_model(backend, obj["model"])
        except RequestProblem as e:
            return JSONResponse(anthropic_api.error(e.kind, str(e)), status_code=e.status)
        return JSONResponse(anthropic_api.count_tokens(len(body)))

    def model_entry(name: str) -> dict:  # both APIs' fields: OpenAI's and Anthropic's
        return {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "pushbench",
            "type": "model",
            "display_name": name,
            "created_at": "1970-01-01T00:00:00Z",
        }

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [model_entry(m) for m in backend.models],
                "has_more": False,
                "first_id": backend.models[0],
                "last_id": backend.models[-1],
            }
        )

    async def one_model(request: Request) -> Response:
        name = request.path_params["name"]
        err = anthropic_api.error if "anthropic-version" in request.headers else openai_api.error
        try:
            _check_model(backend, name)
        except RequestProblem as e:
            return JSONResponse(err(e.kind, str(e)), status_code=e.status)
        return JSONResponse(model_entry(name))

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, **backend.describe()})

    async def not_found(request: Request, exc) -> Response:
        anthropic = "messages" in request.url.path
        err = anthropic_api.error if anthropic else openai_api.error
        code = getattr(exc, "status_code", 404)
        kind = "method" if code == 405 else "not_found"
        msg = (
            f"{request.method} {request.url.path} is not served here; use POST /v1/messages, "
            "/v1/responses or /v1/chat/completions"
        )
        rlog.write(
            {
                "api": "anthropic" if anthropic else "openai",
                "path": request.url.path,
                "status": code,
                "error": msg,
                "bytes_in": 0,
                "latency_ms": 0.0,
            }
        )
        return JSONResponse(err(kind, msg), status_code=code)

    routes = []
    for prefix in ("/v1", ""):
        routes += [
            Route(
                f"{prefix}/messages",
                handler("anthropic", parse_messages, render_messages, anthropic_api.error),
                methods=["POST"],
            ),
            Route(f"{prefix}/messages/count_tokens", count_tokens, methods=["POST"]),
            Route(
                f"{prefix}/responses",
                handler("responses", parse_responses, render_responses, openai_api.error),
                methods=["POST"],
            ),
            Route(
                f"{prefix}/chat/completions",
                handler("chat", parse_chat, render_chat, openai_api.error),
                methods=["POST"],
            ),
            Route(f"{prefix}/models", models, methods=["GET"]),
            Route(f"{prefix}/models/{{name:path}}", one_model, methods=["GET"]),
        ]
    routes.append(Route("/health", health, methods=["GET"]))
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


def check_loopback(host: str) -> str:
    """``host`` if it is a loopback address (or ``localhost``); else ``ValueError``."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise ValueError(
        f"--host {host!r} is not a loopback address; the model server serves "
        "this machine only (use 127.0.0.1 or ::1)"
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port)."""
    host = check_loopback(host)
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(fam, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def _server(app, sock):
    import uvicorn

    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=30
    )
    return uvicorn.Server(config)


def serve(
    backend: Backend,
    host: str = "127.0.0.1",
    port: int = 0,
    log_path: str | None = None,
    port_file: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve in the foreground until interrupted."""
    sock = bind(host, port)
    url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    if port_file:
        Path(port_file).write_text(str(sock.getsockname()[1]))
    if on_ready:
        on_ready(url)
    _server(build_app(backend, RequestLog(log_path)), sock).run(sockets=[sock])


@contextmanager
def running(backend: Backend, log_path: str | None = None) -> Iterator[str]:
    """Serve in a background thread on a free loopback port; yields the base URL."""
    sock = bind("127.0.0.1", 0)
    server = _server(build_app(backend, RequestLog(log_path)), sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
