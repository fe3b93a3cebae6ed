"""The OpenAI Responses API (``POST /v1/responses``, Codex CLI) and Chat Completions
(``POST /v1/chat/completions``, other OpenAI-compatible clients).

Responses: input items ``message``, ``function_call`` and ``function_call_output``; tools are
``function`` tools or ``namespace`` tools holding functions (how Codex groups an MCP server's
tools: namespace ``mcp__<server>``). A streamed answer is ``response.created``,
``response.in_progress``, ``response.output_item.added``, the argument or text deltas and their
``.done`` events, ``response.output_item.done`` and ``response.completed``, each with a
``sequence_number``. Chat Completions: ``tool_calls`` / ``tool`` messages, streamed as
``chat.completion.chunk`` lines ending with ``data: [DONE]``. Errors use
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .core import Conversation, Decision, Step

ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "not_found": "not_found_error",
    "too_large": "invalid_request_error",
    "internal": "server_error",
    "method": "invalid_request_error",
    "model_not_found": "invalid_request_error",
}


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


# ----- Responses API --------------------------------------------------------------------------
class Part(_Loose):
    type: str | None = None
    text: str | None = None


class InputItem(_Loose):
    type: str | None = None
    role: str | None = None
    content: str | list[Part] | None = None
    name: str | None = None
    namespace: str | None = None
    arguments: str | None = None
    call_id: str | None = None
    output: str | list[Part] | None = None


class RTool(_Loose):
    type: str
    name: str | None = None
    tools: list[RTool] | None = None


class ResponsesRequest(_Loose):
    model: str = Field(min_length=1, max_length=256)
    input: str | list[InputItem]
    instructions: str | None = None
    tools: list[RTool] | None = None
    stream: bool = False


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.text or "" for p in content)


def _args(raw: str | None) -> Any:
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


def responses_conversation(req: ResponsesRequest) -> tuple[Conversation, set[str]]:
    """The conversation and the set of tool names that live in a namespace."""
    names, namespaced = [], set()
    for t in req.tools or ():
        if t.type == "namespace" and t.name:
            for f in t.tools or ():
                if f.name:
                    names.append(f"{t.name}__{f.name}")
                    namespaced.add(f"{t.name}__{f.name}")
        elif t.name:
            names.append(t.name)
    conv = Conversation(api="responses", stream=req.stream, model=req.model, tools=names)
    if req.instructions:
        conv.texts.append(req.instructions)
    if isinstance(req.input, str):
        conv.texts.append(req.input)
        return conv, namespaced
    by_id: dict[str, Step] = {}
    for item in req.input:
        kind = item.type or ("message" if item.role else None)
        if kind == "message" and item.role != "assistant":
            conv.texts.append(_text(item.content))
        elif kind == "function_call":
            name = f"{item.namespace}__{item.name}" if item.namespace else (item.name or "")
            step = Step(name=name, arguments=_args(item.arguments), call_id=item.call_id or "")
            conv.steps.append(step)
            by_id[step.call_id] = step
        elif kind == "function_call_output" and item.call_id in by_id:
            by_id[item.call_id].result = _text(item.output)
    return conv, namespaced


def _item(d: Decision, namespaced: set[str]) -> dict:
    if d.tool is not None:
        item = {
            "type": "function_call",
            "id": "fc_" + d.call_id,
            "call_id": "call_" + d.call_id,
            "name": d.tool,
            "arguments": json.dumps(d.arguments or {}),
            "status": "completed",
        }
        if d.tool in namespaced:
            ns, _, bare = d.tool.rpartition("__")
            item.update(name=bare, namespace=ns)
        return item
    return {
        "type": "message",
        "id": "msg_" + d.call_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": d.text or "", "annotations": []}],
    }


def _rusage(in_bytes: int, out: int) -> dict:
    i, o = max(1, in_bytes // 4), max(1, out // 4)  # estimates: bytes / 4 (no tokenizer)
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": i + o,
    }


def _envelope(d: Decision, model: str, status: str, output: list, usage: dict | None) -> dict:
    return {
        "id": "resp_" + d.call_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "error": None,
        "incomplete_details": None,
    }


def responses_response(d: Decision, model: str, in_bytes: int, namespaced: set[str]) -> dict:
    item = _item(d, namespaced)
    return _envelope(d, model, "completed", [item], _rusage(in_bytes, len(json.dumps(item))))


def responses_stream(d: Decision, model: str, in_bytes: int, namespaced: set[str]) -> list[bytes]:
    item = _item(d, namespaced)
    seq = iter(range(1 << 30))
    out: list[bytes] = []

    def ev(kind: str, **data) -> None:
        payload = {"type": kind, "sequence_number": next(seq), **data}
        out.append(f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode())

    ev("response.created", response=_envelope(d, model, "in_progress", [], None))
    ev("response.in_progress", response=_envelope(d, model, "in_progress", [], None))
    if item["type"] == "function_call":
        ev(
            "response.output_item.added",
            output_index=0,
            item={**item, "arguments": "", "status": "in_progress"},
        )
        ev(
            "response.function_call_arguments.delta",
            item_id=item["id"],
            output_index=0,
            delta=item["arguments"],
        )
        ev(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=0,
            arguments=item["arguments"],
        )
    else:
        text = item["content"][0]["text"]
        ev(
            "response.output_item.added",
            output_index=0,
            item={**item, "content": [], "status": "in_progress"},
        )
        ev(
            "response.content_part.added",
            item_id=item["id"],
            output_index=0,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": []},
        )
        ev(
            "response.output_text.delta",
            item_id=item["id"],
            output_index=0,
            content_index=0,
            delta=text,
        )
        ev(
            "response.output_text.done",
            item_id=item["id"],
            output_index=0,
            content_index=0,
            text=text,
        )
        ev(
            "response.content_part.done",
            item_id=item["id"],
            output_index=0,
            content_index=0,
            part=item["content"][0],
        )
    ev("response.output_item.done", output_index=0, item=item)
    ev(
        "response.completed",
        response=_envelope(d, model, "completed", [item], _rusage(in_bytes, len(json.dumps(item)))),
    )
    return out


# ----- Chat Completions -------------------------------------------------------------------------
class ToolCall(_Loose):
    id: str | None = None
    function: dict


class ChatMessage(_Loose):
    role: str
    content: str | list[Part] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class ChatTool(_Loose):
    type: str = "function"
    function: dict


class ChatRequest(_Loose):
    model: str = Field(min_length=1, max_length=256)
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ChatTool] | None = None
    stream: bool = False


def chat_conversation(req: ChatRequest) -> Conversation:
    conv = Conversation(
        api="chat",
        stream=req.stream,
        model=req.model,
        tools=[str(t.function.get("name", "")) for t in req.tools or ()],
    )
    by_id: dict[str, Step] = {}
    for m in req.messages:
        if m.role == "assistant":
            for c in m.tool_calls or ():
                step = Step(
                    name=str(c.function.get("name", "")),
                    arguments=_args(c.function.get("arguments")),
                    call_id=c.id or "",
                )
                conv.steps.append(step)
                by_id[step.call_id] = step
        elif m.role == "tool":
            if m.tool_call_id in by_id:
                by_id[m.tool_call_id].result = _text(m.content)
        else:
            conv.texts.append(_text(m.content))
            if m.role == "user":
                conv.last_user = conv.texts[-1]
    return conv


def chat_response(d: Decision, model: str, in_bytes: int) -> dict:
    msg: dict = {"role": "assistant", "content": d.text}
    finish = "stop"
    if d.tool is not None:
        msg["tool_calls"] = [
            {
                "id": "call_" + d.call_id,
                "type": "function",
                "function": {"name": d.tool, "arguments": json.dumps(d.arguments or {})},
            }
        ]
        finish = "tool_calls"
    i, o = max(1, in_bytes // 4), max(1, len(json.dumps(msg)) // 4)
    return {
        "id": "chatcmpl-" + d.call_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o},
    }


def chat_stream(d: Decision, model: str, in_bytes: int) -> list[bytes]:
    full = chat_response(d, model, in_bytes)
    msg, finish = full["choices"][0]["message"], full["choices"][0]["finish_reason"]
    base = {
        "id": full["id"],
        "object": "chat.completion.chunk",
        "created": full["created"],
        "model": model,
    }
    delta: dict = {"role": "assistant", "content": msg["content"]}
    if "tool_calls" in msg:
        delta["tool_calls"] = [{"index": 0, **msg["tool_calls"][0]}]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            "usage": full["usage"],
        },
    ]
    return [f"data: {json.dumps(c, ensure_ascii=False)}\n\n".encode() for c in chunks] + [
        b"data: [DONE]\n\n"
    ]


def error(kind: str, message: str) -> dict:
    model = kind == "model_not_found"  # OpenAI's own shape for an unknown model
    return {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(kind, "server_error"),
            "param": "model" if model else None,
            "code": "model_not_found" if model else None,
        }
    }
