"""The MCP server's wire screen: every JSON-RPC line the agent sends gets an answer.

The SDK's stdio transport parses each line with pydantic (jiter) and, when that fails, hands
the exception to its dispatcher, which only logs it at debug level: a line with a lone
surrogate escape, an integer of thousands of digits or about 200 levels of nesting got no
response at all, so the client waited for its own timeout. (Likewise a request whose ``id`` is
``null`` or a fraction is read as a notification and never answered.)

:class:`ScreenedStdin` sits between :class:`BoundedStdin` and the SDK and
pre-validates each line exactly as the SDK will (the same pydantic adapter):

* a line the SDK reads is passed through unchanged;
* a ``tools/call`` whose id and tool name can be read but whose arguments the SDK cannot
  parse becomes a small stand-in call (same id); the session then steps the environment with
  an action the environment refuses for the same reason (``bad_encoding``, ``too_deep``,
  ``number_too_large``, ``too_large``, ...), so the call is answered with ``ok: false`` and
  costs one step like any refused call;
* any other unreadable line is answered here with a JSON-RPC error: ``-32700`` (parse error)
  when it is not JSON, ``-32600`` (invalid request) when it is JSON but not a valid request,
  with the request's id when it can be recovered and ``null`` otherwise; a notification (no
  ``id``) is never answered, per JSON-RPC.

Below it, :class:`BoundedStdin` never buffers or parses a line over :data:`MAX_WIRE_LINE`: it
keeps the line's head and tail and :func:`stand_in_line` builds a small request with the same id
(a ``tools/call`` the environment refuses by size, or an unknown method).

Every line that is not passed through unchanged is logged to ``server.log``. Replies are
written by :class:`LineWriter`, the same writer the SDK uses for stdout, one whole line at a
time under a lock, so frames never interleave.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from ..envs import actions
from ..envs.spaces import MAX_ACTION_BYTES

if TYPE_CHECKING:
    from .session import BlackBoxSession

log = logging.getLogger("pushbench.mcp")

MAX_WIRE_LINE = 1 << 20  # JSON-RPC lines longer than this are never parsed
_HEAD_KEEP = MAX_ACTION_BYTES + 1024  # bytes of an overlong line kept for the refusal
_TAIL_KEEP = 4096

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
WIRE_MAX_DEPTH = 3 + actions.MAX_DEPTH  # envelope levels (request, params, arguments) + a call
_LOG_CLIP = 200
_WHY = {
    "too_deep": f"nested more than {WIRE_MAX_DEPTH} levels deep",
    "number_too_large": f"a number of more than {actions.MAX_INT_DIGITS} digits",
}


def _error_line(req_id: Any, code: int, message: str) -> str:
    return json.dumps(
        {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}},
        ensure_ascii=True,
    )


def _plain_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _clean(value: Any) -> bool:
    """True when ``value`` survives the shared normalisation (safe to put in a stand-in)."""
    try:
        actions.decode({"v": value})
    except actions.ActionError:
        return False
    return True


class WireScreen:
    """Decides, per line, whether the SDK gets it, a stand-in, or the line is answered here."""

    def __init__(self, session) -> None:
        self.session = session
        self.adapter = types.jsonrpc_message_adapter

    def screen(self, line: str) -> tuple[str | None, str | None]:
        """``(line for the SDK or None, reply to write or None)`` for one input line."""
        try:
            msg = self.adapter.validate_json(line, by_name=False)
        except Exception as e:  # noqa: BLE001 - any failure is what we answer here
            return self._unreadable(line, _first_line(e))
        if isinstance(msg, types.JSONRPCNotification) and '"id"' in line:
            return self._notification_with_id(line)
        if isinstance(msg, types.JSONRPCRequest) and msg.method == "tools/call":
            p = msg.params if isinstance(msg.params, dict) else {}
            if not isinstance(p.get("name"), str) or not isinstance(
                p.get("arguments", {}), (dict, type(None))
            ):
                log.warning(
                    "tools/call id %r has invalid params (name or arguments); the SDK "
                    "answers it with an invalid-params error (no step)",
                    msg.id,
                )
        return line, None

    # ----- lines the SDK cannot read ------------------------------------------------------
    def _unreadable(self, line: str, why: str) -> tuple[str | None, str | None]:
        try:
            obj = actions.loads(line, max_depth=WIRE_MAX_DEPTH)
        except actions.ActionError as e:
            return self._unparsed(line, e, why)
        if not isinstance(obj, dict):
            return self._reply(None, INVALID_REQUEST, "a request must be a JSON object", line, why)
        has_id, req_id = "id" in obj, obj.get("id")
        method = obj.get("method")
        if has_id and not _plain_id(req_id):
            return self._reply(
                None, INVALID_REQUEST, "the request id must be a string or an integer", line, why
            )
        if not has_id:
            if isinstance(method, str):  # a notification: never answered
                log.warning("unreadable notification %.64r dropped (%s)", method, why)
                return None, None
            return self._reply(None, INVALID_REQUEST, "not a valid JSON-RPC message", line, why)
        params = obj.get("params")
        if (
            method == "tools/call"
            and isinstance(params, dict)
            and isinstance(params.get("name"), str)
        ):
            args = params.get("arguments")
            args = {} if args is None else args
            if isinstance(args, dict):
                call = {"tool": params["name"], **args}
                try:
                    actions.decode(call)
                except actions.ActionError as e:  # the env will refuse it the same way
                    return self._stand_in(
                        req_id, params["name"], params.get("_meta"), call, e.error_type, line
                    )
        return self._reply(req_id, INVALID_REQUEST, f"invalid request ({why})", line, why)

    def _unparsed(self, line: str, err: actions.ActionError, why: str):
        """A line Python's guarded parser refuses too: too deep, a huge number, or not JSON."""
        m = _HEAD_ID.search(line[:4096]) or _TAIL_ID.search(line[-4096:])
        req_id = json.loads(m.group(1)) if m else None
        if req_id is not None and err.error_type in ("too_deep", "number_too_large"):
            args_at = line.find('"arguments"')
            pre = line[:args_at] if args_at >= 0 else line[:4096]
            method = _METHOD.search(pre)
            names = _NAME.findall(pre)
            if method and method.group(1) == "tools/call" and names:
                meta, _ = _meta_from(pre)
                # The env judges the line's text itself: it refuses it for the same reason.
                return self._stand_in(req_id, names[-1], meta, line, err.error_type, line)
        if err.error_type == "bad_json":
            return self._reply(
                req_id, PARSE_ERROR, "parse error: the line is not valid JSON", line, why
            )
        return self._reply(
            req_id, INVALID_REQUEST, f"invalid request: {_WHY[err.error_type]}", line, why
        )

    def _notification_with_id(self, line: str) -> tuple[str | None, str | None]:
        try:
            obj = actions.loads(line, max_depth=WIRE_MAX_DEPTH)
        except actions.ActionError:
            return line, None
        if isinstance(obj, dict) and "id" in obj:  # id null or a fraction: not a notification
            return self._reply(
                None,
                INVALID_REQUEST,
                "the request id must be a string or an integer",
                line,
                "bad id",
            )
        return line, None

    # ----- answers ------------------------------------------------------------------------
    def _stand_in(self, req_id, name: str, meta, action: Any, error_type: str, line: str):
        token = self.session.stash_action(
            action,
            {
                "tool": name if _clean(name) else None,
                "unreadable": error_type,
                "wire_bytes": len(line.encode("utf-8", "replace")),
                "head": line[:_LOG_CLIP],
            },
        )
        params: dict[str, Any] = {
            "name": name if _clean(name) else "?",
            "arguments": {self.session.sentinel: token},
        }
        if isinstance(meta, dict) and _clean(meta):
            params["_meta"] = meta
        log.warning(
            "tools/call id %r: arguments unreadable on the wire (%s); the environment "
            "refuses the call (one step)",
            req_id,
            error_type,
        )
        return json.dumps(
            {"jsonrpc": "2.0", "id": req_id, "method": "tools/call", "params": params}
        ), None

    def _reply(self, req_id, code: int, message: str, line: str, why: str):
        log.warning(
            "unreadable JSON-RPC line answered with error %d (id %r): %s; line starts %s",
            code,
            req_id,
            why,
            json.dumps(line[:_LOG_CLIP], ensure_ascii=True),
        )
        return None, _error_line(req_id, code, message)


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    # pydantic puts the summary first and the reason on the next line, then the input echo
    text = lines[1] if len(lines) > 1 else lines[0] if lines else type(e).__name__
    return text.split(" [type=")[0][:200]


class ScreenedStdin:
    """Async line iterator: the lines of ``inner`` after :class:`WireScreen`, answering the rest."""

    def __init__(self, inner, screen: WireScreen, writer: LineWriter) -> None:
        self.inner, self.screen, self.writer = inner, screen, writer

    def __aiter__(self) -> ScreenedStdin:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self.inner.__anext__()
            forward, reply = self.screen.screen(line)
            if reply is not None:
                await self.writer.write(reply + "\n")
            if forward is not None:
                return forward


class LineWriter:
    """stdout for the SDK's transport and the screen: whole lines, one writer at a time."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = anyio.Lock()
        self._pending = ""

    async def write(self, text: str) -> None:
        async with self._lock:
            self._pending += text
            cut = self._pending.rfind("\n") + 1
            if cut:
                data = self._pending[:cut].encode("utf-8", "replace")
                self._pending = self._pending[cut:]
                await anyio.to_thread.run_sync(_write_all, self.fd, data)

    async def flush(self) -> None:  # every complete line is written by write()
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# ----- the stdin reader that never parses an overlong line --------------------------------
_ID = r'(-?\d{1,19}(?![\d.eE])|"(?:[^"\\]|\\.){0,256}")'  # a longer number is no id
_HEAD_ID = re.compile(r'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_TAIL_ID = re.compile(r'"id"\s*:\s*' + _ID + r'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')
_METHOD = re.compile(r'"method"\s*:\s*"([^"\\]{1,64})"')
_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,128})"')
_META = re.compile(r'"_meta"\s*:\s*\{')


def _object_end(text: str, start: int) -> int | None:
    """Index just past the JSON object opening at ``text[start]`` (``None`` if cut off)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _meta_from(text: str) -> tuple[dict | None, tuple[int, int] | None]:
    m = _META.search(text)
    if not m:
        return None, None
    end = _object_end(text, m.end() - 1)
    if end is None:
        return None, None
    try:
        meta = json.loads(text[m.end() - 1 : end])
    except ValueError:
        return None, None
    return (meta, (m.start(), end)) if isinstance(meta, dict) else (None, None)


def stand_in_line(head: str, tail: str, size: int, session: BlackBoxSession) -> str | None:
    """A small request replacing an overlong JSON-RPC line (``None`` if it has no findable id).

    A ``tools/call`` becomes the same call with stand-in arguments, so the environment refuses
    it by size (and charges the step); any other method becomes an unknown method, which the
    SDK answers with an error. The request's ``_meta`` is carried over when it can be found.
    """
    m = _HEAD_ID.search(head[:4096]) or _TAIL_ID.search(tail)
    if not m:
        return None
    req_id = json.loads(m.group(1))
    args_at = head.find('"arguments"')
    pre = head[:args_at] if args_at >= 0 else head[:4096]
    meta, span = _meta_from(pre)
    if meta is None:
        meta, _ = _meta_from(tail)
    if span:
        pre = pre[: span[0]] + pre[span[1] :]
    method = _METHOD.search(pre) or _METHOD.search(tail)
    params: dict[str, Any] = {}
    if meta is not None:
        params["_meta"] = meta
    if method and method.group(1) == "tools/call":
        names = _NAME.findall(pre)
        name = names[-1] if names else "?"
        params.update(name=name, arguments={session.sentinel: session.stash_oversized(head, size)})
        method_name = "tools/call"
    else:
        method_name = "pushbench/oversized-request"
    log.warning(
        "JSON-RPC line of %d bytes (limit %d) was not parsed; id %r, method %s",
        size,
        MAX_WIRE_LINE,
        req_id,
        method.group(1) if method else "?",
    )
    return json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method_name, "params": params})


class BoundedStdin:
    """Async line iterator over a file descriptor for the SDK's stdio transport.

    Lines up to ``limit`` bytes pass through unchanged. A longer line is never buffered whole
    or parsed: its first ``_HEAD_KEEP`` and last ``_TAIL_KEEP`` bytes are kept and
    ``on_oversized(head, tail, size)`` supplies a replacement line (or ``None`` to drop it).
    """

    def __init__(self, fd: int, on_oversized, limit: int = MAX_WIRE_LINE) -> None:
        self.fd, self.limit, self.on_oversized = fd, limit, on_oversized
        self._lines: deque[str] = deque()
        self._buf = bytearray()
        self._over = False
        self._head = b""
        self._tail = bytearray()
        self._size = 0
        self._eof = False

    def __aiter__(self) -> BoundedStdin:
        return self

    async def __anext__(self) -> str:
        while not self._lines:
            if self._eof:
                raise StopAsyncIteration
            chunk = await anyio.to_thread.run_sync(
                os.read, self.fd, 1 << 16, abandon_on_cancel=True
            )
            if chunk:
                self.feed(chunk)
            else:
                self._eof = True
                if self._buf.strip() or self._over:
                    self._finish()
        return self._lines.popleft()

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            self._append(chunk[start:] if nl < 0 else chunk[start:nl])
            if nl < 0:
                return
            self._finish()
            start = nl + 1

    def _append(self, piece: bytes) -> None:
        if not piece:
            return
        if self._over:
            self._size += len(piece)
            self._tail += piece[-_TAIL_KEEP:]
            del self._tail[:-_TAIL_KEEP]
            return
        self._buf += piece
        if len(self._buf) > self.limit:
            self._over = True
            self._head = bytes(self._buf[:_HEAD_KEEP])
            self._tail = bytearray(self._buf[-_TAIL_KEEP:])
            self._size = len(self._buf)
            self._buf = bytearray()

    def _finish(self) -> None:
        if self._over:
            line = self.on_oversized(
                self._head.decode("utf-8", "replace"),
                self._tail.decode("utf-8", "replace"),
                self._size,
            )
            self._over, self._head, self._tail, self._size = False, b"", bytearray(), 0
        else:
            line = self._buf.decode("utf-8", "replace")
            self._buf = bytearray()
        if line is not None and line.strip():
            self._lines.append(line)
