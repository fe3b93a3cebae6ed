"""The model client: one chat-completions call with tools, retries and token accounting.

Uses the official ``openai`` SDK (major version 3) against any OpenAI-compatible server. The
SDK's own retries are switched off (``max_retries=0``) so this module decides what is retried:

* transient: connection errors and timeouts, HTTP 408, 409, 429 and every 5xx. Retried with
  exponential backoff (``backoff_base * 2**attempt``, jittered, capped at ``backoff_max``, at
  least the server's ``Retry-After``) up to ``max_retries`` times. No environment step is
  involved: the policy only returns an action once a call succeeded.
* permanent: every other status (400 bad request, 401 auth, 403, 404 model not found, 422) and
  transient failures that outlast ``max_retries``: raised as :class:`PolicyError`, which the
  episode driver turns into ``terminated_by: "error"``.

Token usage comes from the server's ``usage`` field; a server that sends none is charged the
estimate of :func:`pushbench.policies.llm.context.estimate_tokens` and the call is counted in
``estimated_calls``, so records say how much of the count is measured.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ... import limits, spend
from ...envs.actions import escape_surrogates
from ..errors import ContextOverflow, PolicyError, SpendCut, is_context_error
from .config import LLMConfig
from .context import estimate_message_tokens, estimate_tokens
from .window import discover_window, overflow_numbers

if TYPE_CHECKING:  # imported lazily at run time (an optional dependency)
    import openai

TRANSIENT_STATUS = frozenset({408, 409, 429})
_LOCK = threading.Lock()
_SYNC_CLIENTS: dict[tuple, openai.OpenAI] = {}
_ASYNC_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict] = (
    weakref.WeakKeyDictionary()
)
_PERMANENT_KIND = {
    400: "bad_request",
    401: "auth",
    403: "permission",
    404: "not_found",
    422: "unprocessable",
}


@dataclass
class ToolCall:
    """One function call the model asked for; ``arguments`` is the raw text it produced."""

    id: str
    name: str
    arguments: str


@dataclass
class ModelTurn:
    """One parsed model reply: its text, its tool calls and what the call cost."""

    content: str | None
    tool_calls: list[ToolCall]
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool

    def assistant_message(self) -> dict:
        """The reply as a chat message for the conversation history."""
        msg: dict = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return msg


@dataclass
class Usage:
    """Token and call counts of one episode (``record["usage"]``)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    retries: int = 0
    estimated_calls: int = 0
    transient_errors: dict[str, int] = field(default_factory=dict)

    def add(self, turn: ModelTurn) -> None:
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens
        self.calls += 1
        self.estimated_calls += int(turn.usage_estimated)

    def as_record(self, cfg: LLMConfig) -> dict:
        price = cfg.price()
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "calls": self.calls,
            "cost_usd": (price.cost(self.prompt_tokens, self.completion_tokens) if price else None),
            "price": price.model_dump() if price else None,
            "retries": self.retries,
            "estimated_calls": self.estimated_calls,
            "transient_errors": dict(sorted(self.transient_errors.items())),
        }

    def to_state(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "calls": self.calls,
            "retries": self.retries,
            "estimated_calls": self.estimated_calls,
            "transient_errors": dict(self.transient_errors),
        }

    @classmethod
    def from_state(cls, d: dict | None) -> Usage:
        return cls(**(d or {}))


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        return float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None


def classify(exc: Exception) -> tuple[bool, str, int | None]:
    """``(transient, kind, status)`` for an exception raised by the SDK."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return True, "timeout", None
    if isinstance(exc, openai.APIConnectionError):
        return True, "connection", None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in TRANSIENT_STATUS or status >= 500:
            return True, f"http_{status}", status
        return False, _PERMANENT_KIND.get(status, f"http_{status}"), status
    if isinstance(exc, openai.APIResponseValidationError):
        return False, "bad_response", getattr(exc, "status_code", None)
    return False, type(exc).__name__, None


def _overflow(exc: Exception, status: int | None) -> ContextOverflow:
    """A context-length refusal with the numbers its message or body gives."""
    window, prompt = overflow_numbers(str(exc))
    body = getattr(exc, "body", None)
    if isinstance(body, dict):  # llama.cpp's own server: {"n_ctx", "n_prompt_tokens"}
        body = body.get("error", body) if isinstance(body.get("error"), dict) else body
        window = window or (got if isinstance(got := body.get("n_ctx"), int) else None)
        prompt = prompt or (
            body.get("n_prompt_tokens") if isinstance(body.get("n_prompt_tokens"), int) else None
        )
    return ContextOverflow(
        f"{type(exc).__name__}: {exc}", status=status, window=window, prompt_tokens=prompt
    )


def _arguments_text(raw) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return escape_surrogates(raw)
    try:  # some servers send an object, not a string
        return escape_surrogates(json.dumps(raw, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return repr(type(raw))  # not JSON: the environment refuses it as bad_json


def _text(value) -> str:
    """Model text made safe to store and send back (a lone surrogate becomes its escape)."""
    return escape_surrogates(value) if isinstance(value, str) else ""


def parse_completion(completion, request_messages: list[dict]) -> ModelTurn:
    """The first choice of a ``ChatCompletion`` as a :class:`ModelTurn` (ids made unique).

    Text fields (content, names, ids, arguments) are made valid Unicode: a lone surrogate the
    server sent as a JSON escape is kept as that escape (:func:`escape_surrogates`), so the
    history can be sent again and checkpointed, and the environment still refuses such
    arguments as ``bad_encoding``.
    """
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise PolicyError("bad_response", "the server returned no choices")
    choice = choices[0]
    msg = choice.message
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
        fn = getattr(tc, "function", None)
        if fn is None:  # a non-function (custom) tool call: keep it, it becomes invalid
            name, args = _text(getattr(tc, "type", "unknown")), ""
        else:
            name, args = _text(fn.name), _arguments_text(fn.arguments)
        cid = _text(getattr(tc, "id", None))
        if not cid or cid in seen:
            cid = f"call_{i}_{len(seen)}"
        seen.add(cid)
        calls.append(ToolCall(cid, name, args))
    legacy = getattr(msg, "function_call", None)
    if not calls and legacy is not None:  # the pre-tools function_call form
        calls.append(ToolCall("call_0", _text(legacy.name), _arguments_text(legacy.arguments)))
    content = _text(msg.content) if isinstance(msg.content, str) else None
    usage = getattr(completion, "usage", None)
    pt = getattr(usage, "prompt_tokens", None) if usage is not None else None
    ct = getattr(usage, "completion_tokens", None) if usage is not None else None
    estimated = pt is None or ct is None
    turn = ModelTurn(
        content,
        calls,
        getattr(choice, "finish_reason", None),
        int(pt or 0),
        int(ct or 0),
        estimated,
    )
    if estimated:
        turn.prompt_tokens = sum(estimate_message_tokens(m) for m in request_messages)
        turn.completion_tokens = estimate_message_tokens(turn.assistant_message())
    return turn


class ChatClient:
    """Sync and async chat-completions calls with the retry policy of this module."""

    def __init__(self, cfg: LLMConfig, seed: int | None = None) -> None:
        self.cfg = cfg
        self.seed = seed
        if cfg.api_key_env:
            key = os.environ.get(cfg.api_key_env)
            if not key:
                raise PolicyError(
                    "config",
                    f"environment variable {cfg.api_key_env} is not set "
                    "(it should hold the API key; use api_key_env: null for a "
                    "local server that needs none)",
                )
            self._key = key
        else:
            self._key = "not-needed"
        self._sync: openai.OpenAI | None = None
        self._async: openai.AsyncOpenAI | None = None
        self._rng = random.Random(seed)
        self._price = cfg.price()
        self._tools_est: int | None = None  # estimated tokens of the tool definitions
        self._last_prompt = 0  # the previous call's real prompt tokens (a floor for the next)

    # ----- clients ------------------------------------------------------------------------
    # SDK clients are shared by every episode with the same endpoint (per process for the
    # blocking client, per event loop for the async one): building one costs ~20 ms (TLS
    # setup) and sharing keeps connections alive across episodes.
    def _key_tuple(self) -> tuple:
        return (self.cfg.base_url, self._key, self.cfg.timeout)

    def sync_client(self):
        if self._sync is None:
            import openai

            key = self._key_tuple()
            with _LOCK:
                if key not in _SYNC_CLIENTS:
                    _SYNC_CLIENTS[key] = openai.OpenAI(
                        api_key=self._key,
                        base_url=self.cfg.base_url,
                        max_retries=0,
                        timeout=self.cfg.timeout,
                    )
                self._sync = _SYNC_CLIENTS[key]
        return self._sync

    def async_client(self):
        if self._async is None:
            import openai

            clients = _ASYNC_CLIENTS.setdefault(asyncio.get_running_loop(), {})
            key = self._key_tuple()
            if key not in clients:
                clients[key] = openai.AsyncOpenAI(
                    api_key=self._key,
                    base_url=self.cfg.base_url,
                    max_retries=0,
                    timeout=self.cfg.timeout,
                )
            self._async = clients[key]
        return self._async

    def close(self) -> None:
        """Forget the shared clients (they stay open for the next episode)."""
        self._sync = None

    async def aclose(self) -> None:
        self._async = None

    def window(self) -> int | None:
        """The server's context window where configured or discoverable (:mod:`.window`)."""
        return discover_window(self.cfg, self._key if self.cfg.api_key_env else None)

    async def awindow(self) -> int | None:
        return await asyncio.to_thread(self.window)

    # ----- requests -----------------------------------------------------------------------
    def request(self, messages: list[dict], tools: list[dict]) -> dict:
        cfg = self.cfg
        req: dict = {"model": cfg.model, "messages": messages, cfg.max_tokens_param: cfg.max_tokens}
        if cfg.temperature is not None:  # some reasoning models accept no temperature
            req["temperature"] = cfg.temperature
        if tools:
            req["tools"] = tools
            if cfg.tool_choice:
                req["tool_choice"] = cfg.tool_choice
        if cfg.send_seed and self.seed is not None:
            req["seed"] = int(self.seed)
        if cfg.extra_body:
            req["extra_body"] = dict(cfg.extra_body)
        return req

    def _delay(self, attempt: int, exc: Exception) -> float:
        cfg = self.cfg
        delay = min(cfg.backoff_max, cfg.backoff_base * (2**attempt))
        delay *= 0.5 + 0.5 * self._rng.random()  # jitter: spread retries of parallel episodes
        after = _retry_after(exc)
        if after is not None:
            delay = max(delay, min(after, cfg.backoff_max))
        return delay

    def _failure(self, exc: Exception, usage: Usage, attempt: int) -> float:
        """Account one failed attempt; return the delay before the next, or raise."""
        transient, kind, status = classify(exc)
        if not transient and is_context_error(status, str(exc), getattr(exc, "code", None)):
            raise _overflow(exc, status) from exc
        if not transient:
            raise PolicyError(
                kind, f"{type(exc).__name__}: {exc}", status=status, retries=attempt
            ) from exc
        usage.transient_errors[kind] = usage.transient_errors.get(kind, 0) + 1
        if attempt >= self.cfg.max_retries:
            raise PolicyError(
                "api_unavailable",
                f"gave up after {attempt} retries; last error {type(exc).__name__}: {exc}",
                status=status,
                retries=attempt,
            ) from exc
        usage.retries += 1
        return self._delay(attempt, exc)

    def _send(self, client, req: dict):
        """``chat.completions.create(**req)``, or the same POST without the typed transform.

        ``create`` first runs the SDK's typed transform over the whole request (a no-op for
        chat messages and tools, which have no aliased fields) at ~2-3 ms of CPU per call with
        a long history. By default (``sdk_transform: false``) the identical body goes through
        the client's documented ``post`` method to ``/chat/completions`` with
        ``cast_to=ChatCompletion``: same endpoint, headers, errors and parsed result.
        """
        if self.cfg.sdk_transform:
            return client.chat.completions.create(**req)
        from openai.types.chat import ChatCompletion

        body = {k: v for k, v in req.items() if k != "extra_body"}
        body.update(req.get("extra_body") or {})
        return client.post("/chat/completions", body=body, cast_to=ChatCompletion)

    # ----- spend limits (pushbench/spend.py) -------------------------------------------------
    def check_spend(self, messages: list[dict], tools: list[dict], usage: Usage) -> None:
        """Raise :class:`SpendCut` if the next call would pass the run's cost cap or the
        episode's token cap (nothing is estimated when neither is set)."""
        if not spend.active():
            return
        if self._tools_est is None:  # the same definitions every call of an episode
            self._tools_est = estimate_tokens(json.dumps(tools)) if tools else 0
        # the chars/4 estimate, but never below what the server counted for the last prompt
        # (the history only grows between trims, and tokenizers may count more than chars/4)
        prompt = max(
            self._last_prompt, self._tools_est + sum(estimate_message_tokens(m) for m in messages)
        )
        price = self._price
        cut = spend.check(
            usage.prompt_tokens + usage.completion_tokens,
            prompt,
            self.cfg.max_tokens,
            price.input_per_mtok if price else None,
            price.output_per_mtok if price else None,
        )
        if cut is not None:
            raise SpendCut(cut[0], cut[1])

    def _charge(self, turn: ModelTurn) -> None:
        self._last_prompt = turn.prompt_tokens
        if self._price is not None and spend.installed() is not None:
            spend.charge(self._price.cost(turn.prompt_tokens, turn.completion_tokens))

    def complete(self, messages: list[dict], tools: list[dict], usage: Usage) -> ModelTurn:
        """One model reply (blocking), retrying transient failures."""
        import openai

        self.check_spend(messages, tools, usage)
        req = self.request(messages, tools)
        attempt = 0
        while True:
            try:
                with limits.model_call(self.cfg.base_url):  # endpoint cap (runner/limits.py)
                    completion = self._send(self.sync_client(), req)
            except openai.OpenAIError as exc:
                time.sleep(self._failure(exc, usage, attempt))
                attempt += 1
                continue
            turn = parse_completion(completion, messages)
            usage.add(turn)
            self._charge(turn)
            return turn

    async def acomplete(self, messages: list[dict], tools: list[dict], usage: Usage) -> ModelTurn:
        """One model reply without blocking the event loop, retrying transient failures."""
        import openai

        self.check_spend(messages, tools, usage)
        req = self.request(messages, tools)
        attempt = 0
        while True:
            try:
                async with limits.amodel_call(self.cfg.base_url):  # endpoint cap
                    completion = await self._send(self.async_client(), req)
            except openai.OpenAIError as exc:
                await asyncio.sleep(self._failure(exc, usage, attempt))
                attempt += 1
                continue
            turn = parse_completion(completion, messages)
            usage.add(turn)
            self._charge(turn)
            return turn


__all__ = [
    "ChatClient",
    "ModelTurn",
    "ToolCall",
    "Usage",
    "classify",
    "parse_completion",
    "estimate_tokens",
]
