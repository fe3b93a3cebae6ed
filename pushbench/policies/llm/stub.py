"""A tiny OpenAI-compatible chat-completions server for tests, dry runs and benchmarks.

Standard library only; it binds to ``127.0.0.1`` on a free port and answers
``POST /v1/chat/completions`` from a *script* (consumed in order, shared by all clients) and,
once the script is used up, from a deterministic fallback agent (``search`` the next page of
the empty query, then ``submit`` the ids it returned, and so on). Script entries::

    {"tool_calls": [{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}]}
    {"content": "plain text, no tool call"}
    {"status": 429, "headers": {"retry-after": "0"}}      # an error reply
    {"usage": None}                                       # omit usage (any entry)
    {"sleep": 2.0, ...}                                   # answer late (client timeouts)
    {"usage": {"prompt_tokens": 100, "completion_tokens": 7}}

With ``window=W`` the server refuses a request whose prompt (counted as a tokenizer denser
than the policies' estimate would: ``len(json.dumps(messages + tools)) // 3``) plus
``max_tokens`` exceeds ``W``, as llama-cpp-python does (HTTP 400, ``context_length_exceeded``);
``advertise_window`` also reports ``max_model_len: W`` in ``GET /v1/models`` as vLLM does.

Every request body is kept in :attr:`StubServer.requests`. ``latency`` seconds are slept before
each answer (the fixed model time of the throughput benchmark)::

    with StubServer(script=[...], latency=0.05) as server:
        params = {"model": "stub", "base_url": server.url, "api_key_env": None}
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _fallback(body: dict) -> dict:
    """Search page k of the empty query, then submit what it found; deterministic."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        text = last.get("content") or ""
        try:
            obs = json.loads(text[text.index("{") :])
        except ValueError:
            obs = {}
        if obs.get("tool") == "search" and obs.get("ok"):
            ids = [r["id"] for r in obs["result"].get("results", [])][:10]
            if ids:
                return {"tool_calls": [{"name": "submit", "arguments": json.dumps({"ids": ids})}]}
    page = 1 + sum(1 for m in messages if m.get("role") == "assistant") // 2
    return {
        "tool_calls": [{"name": "search", "arguments": json.dumps({"query": "", "page": page})}]
    }


class StubServer:
    """A scripted OpenAI-compatible server on ``127.0.0.1`` (a background thread)."""

    def __init__(
        self,
        script: list[dict] | None = None,
        latency: float = 0.0,
        usage: bool = True,
        fixed_usage: dict | None = None,
        window: int | None = None,
        advertise_window: bool = False,
    ) -> None:
        # fixed_usage: {"prompt_tokens": P, "completion_tokens": C} reported for every reply
        # without a usage entry of its own (cost tests); default: chars/4 of the request/reply
        self.script: deque[dict] = deque(script or ())
        self.latency = latency
        self.usage = usage
        self.fixed_usage = dict(fixed_usage) if fixed_usage else None
        self.requests: list[dict] = []
        self.window, self.advertise_window = window, advertise_window
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0
        self.port = 0

    # ----- lifecycle ----------------------------------------------------------------------
    def start(self) -> StubServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms Nagle/delayed-ACK stall per answer
            wbufsize = -1  # headers and body leave in one write (flushed per request)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # GET /v1/models (not a request)
                entry: dict[str, Any] = {"id": "stub", "object": "model", "owned_by": "stub"}
                if stub.window and stub.advertise_window:
                    entry["max_model_len"] = stub.window
                self._send(
                    200 if self.path.rstrip("/").endswith("/models") else 404,
                    {},
                    {"object": "list", "data": [entry]},
                )

            def do_POST(self) -> None:  # http.server API
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                self._send(*stub.answer(self.path, body))

            def _send(self, status: int, headers: dict, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # the default 5 drops SYNs of concurrent clients (1 s stall)

        self._server = Server(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="pushbench-stub"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stub server is not running (use it as a context manager)")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def push(self, *entries: dict) -> None:
        with self.lock:
            self.script.extend(entries)

    # ----- answering ----------------------------------------------------------------------
    def answer(self, path: str, body: dict) -> tuple[int, dict, dict]:
        with self.lock:
            self.requests.append(body)
            entry = self.script.popleft() if self.script else None
            self._ids += 1
            n = self._ids
        delay = self.latency + float((entry or {}).get("sleep") or 0)
        if delay:
            time.sleep(delay)
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, {}, {"error": {"message": f"no route {path}", "type": "not_found"}}
        if self.window:
            prompt = (
                len(json.dumps([*(body.get("messages") or ()), *(body.get("tools") or ())])) // 3
            )
            asked = int(body.get("max_tokens") or 0)
            if prompt + asked > self.window:
                return (
                    400,
                    {},
                    {
                        "error": {
                            "message": "This model's maximum context length is "
                            f"{self.window} tokens. "
                            f"However, you requested {prompt + asked} tokens ({prompt} in "
                            f"the messages, {asked} in the completion). Please reduce the "
                            "length of the messages or completion.",
                            "type": "invalid_request_error",
                            "param": "messages",
                            "code": "context_length_exceeded",
                        }
                    },
                )
        entry = entry if entry is not None else _fallback(body)
        if "status" in entry:
            status = int(entry["status"])
            return (
                status,
                dict(entry.get("headers") or {}),
                {
                    "error": {
                        "message": entry.get("message", f"stub error {status}"),
                        "type": "stub_error",
                        "code": status,
                    }
                },
            )
        calls = [
            {
                "id": c.get("id", f"call_{n}_{i}"),
                "type": "function",
                "function": {"name": c["name"], "arguments": c.get("arguments", "{}")},
            }
            for i, c in enumerate(entry.get("tool_calls") or ())
        ]
        message: dict = {"role": "assistant", "content": entry.get("content")}
        if calls:
            message["tool_calls"] = calls
        payload: dict = {
            "id": f"chatcmpl-stub-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "stub"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
        }
        usage = entry.get("usage", "default")
        if usage == "default" and self.usage and self.fixed_usage:
            usage = dict(self.fixed_usage)
        elif usage == "default" and self.usage:
            prompt = sum(len(json.dumps(m)) for m in body.get("messages") or ()) // 4
            completion = len(json.dumps(message)) // 4
            usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        if isinstance(usage, dict):
            payload["usage"] = {
                **usage,
                "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
            }
        return 200, {}, payload


def main(argv: list[str] | None = None) -> None:
    """``python -m pushbench.policies.llm.stub [--latency S] [--port P]``: serve until killed.

    Prints the base URL on the first line of stdout (use it as ``base_url``).
    """
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    args = ap.parse_args(argv)
    server = StubServer(latency=args.latency)
    server.port = args.port
    server.start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
