"""The Anthropic Messages API (``POST /v1/messages``), as Claude Code speaks it.

Requests are validated with pydantic (unknown fields pass: clients send many beta fields);
answers are a ``tool_use`` block (``stop_reason: tool_use``) or a text block (``end_turn``),
streamed as the documented event sequence ``message_start``, ``content_block_start``,
``content_block_delta`` (``input_json_delta`` / ``text_delta``), ``content_block_stop``,
``message_delta``, ``message_stop`` when ``stream`` is true. Errors use the API's shape
``{"type": "error", "error": {"type": ..., "message": ...}}``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .core import Conversation, Decision, Step

ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "not_found": "not_found_error",
    "too_large": "request_too_large",
    "internal": "api_error",
    "method": "invalid_request_error",
    "model_not_found": "not_found_error",
}


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class Block(_Loose):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None
    tool_use_id: str | None = None
    content: str | list[Block] | None = None
    is_error: bool | None = None


class Message(_Loose):
    role: str
    content: str | list[Block]


class Tool(_Loose):
    name: str = Field(min_length=1, max_length=256)


class MessagesRequest(_Loose):
    model: str = Field(min_length=1, max_length=256)
    messages: list[Message] = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    system: str | list[Block] | None = None
    tools: list[Tool] | None = None
    stream: bool = False


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        _text_of(b.content) if b.type == "tool_result" else (b.text or "") for b in content
    )


def conversation(req: MessagesRequest) -> Conversation:
    conv = Conversation(
        api="anthropic", stream=req.stream, model=req.model, tools=[t.name for t in req.tools or ()]
    )
    if req.system:
        conv.texts.append(_text_of(req.system))
    by_id: dict[str, Step] = {}
    for m in req.messages:
        if isinstance(m.content, str):
            if m.role != "assistant":
                conv.texts.append(m.content)
            continue
        for b in m.content:
            if b.type == "text" and b.text and m.role != "assistant":
                conv.texts.append(b.text)
            elif b.type == "tool_use" and m.role == "assistant":
                step = Step(name=b.name or "", arguments=b.input, call_id=b.id or "")
                conv.steps.append(step)
                by_id[step.call_id] = step
            elif b.type == "tool_result" and b.tool_use_id in by_id:
                by_id[b.tool_use_id].result = _text_of(b.content)
                by_id[b.tool_use_id].is_error = bool(b.is_error)
    return conv


def _content(d: Decision) -> tuple[list[dict], str]:
    if d.tool is not None:
        return [
            {
                "type": "tool_use",
                "id": "toolu_" + d.call_id,
                "name": d.tool,
                "input": d.arguments or {},
            }
        ], "tool_use"
    return [{"type": "text", "text": d.text or ""}], "end_turn"


def _usage(in_bytes: int, out: int) -> dict:
    # No tokenizer here: sizes in bytes / 4, an estimate (the server's log has the bytes).
    return {"input_tokens": max(1, in_bytes // 4), "output_tokens": max(1, out // 4)}


def response(d: Decision, model: str, in_bytes: int) -> dict:
    content, stop = _content(d)
    return {
        "id": "msg_" + d.call_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _usage(in_bytes, len(json.dumps(content))),
    }


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def stream(d: Decision, model: str, in_bytes: int) -> list[bytes]:
    content, stop = _content(d)
    block = content[0]
    usage = _usage(in_bytes, len(json.dumps(content)))
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_" + d.call_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
                },
            },
        )
    ]
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    out += [
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": start},
        ),
        _sse("ping", {"type": "ping"}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return out


def error(kind: str, message: str) -> dict:
    return {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(kind, "api_error"), "message": message},
    }


def count_tokens(in_bytes: int) -> dict:
    return {"input_tokens": max(1, in_bytes // 4)}


Kind = Literal["anthropic"]
