"""Start llama-cpp-python's OpenAI-compatible server with tool-call generation bounded.

Usage: ``python tests/llama_server.py <llama_cpp.server arguments>``, with
``--chat_format chatml-function-calling-bounded``.

Why: in ``tool_choice="auto"`` mode, llama-cpp-python's ``chatml-function-calling`` handler
(0.3.x) generates the tool name, each tool call's arguments and the follow-up check with
``max_tokens=None``: the request's ``max_tokens`` is ignored, and only the JSON-schema grammar
bounds the output. A string argument without ``maxLength`` then lets a small model write until
the context is full. Inspect's ``openai-api`` provider strips ``maxLength``, ``minimum`` and
``maximum`` from tool schemas (Inspect's ``JSON_SCHEMA_EXTENDED_FIELDS``), so its requests hit
exactly that: seen here as a server spinning for many minutes with growing memory after a few
calls. The ``-bounded`` handler is the same handler whose inner completions are capped at the
request's ``max_tokens``, as an OpenAI-compatible server is expected to do (a cut-off argument
string reaches the agent as malformed JSON, which the environment answers like any malformed
call).

The request model also accepts an assistant message whose ``content`` is ``null`` beside its
``tool_calls``, as the OpenAI API does: llama-cpp-python 0.3.x types that ``content`` as a
string, so every request of a client that replays tool calls that way (Letta does) was refused
with a validation error before the model ran. Everything else is the unmodified server.
"""

from __future__ import annotations

from typing import Any, NotRequired

from llama_cpp import llama_chat_format, llama_types
from llama_cpp.server import types as server_types
from llama_cpp.server.__main__ import main


def accept_null_assistant_content() -> None:
    """Let an assistant message's ``content`` be ``null`` (see the module docstring): widen the
    TypedDict's annotation and rebuild the request model the server's route validates with."""
    message = llama_types.ChatCompletionRequestAssistantMessage
    message.__annotations__["content"] = NotRequired[str | None]
    server_types.CreateChatCompletionRequest.model_rebuild(force=True)


class _Capped:
    """The model object the handler sees, with every completion capped at ``cap`` tokens."""

    def __init__(self, llama: Any, cap: int) -> None:
        self._llama, self._cap = llama, cap

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        asked = kwargs.get("max_tokens")
        if asked is None or asked <= 0 or asked > self._cap:
            kwargs["max_tokens"] = self._cap
        return self._llama.create_completion(*args, **kwargs)


@llama_chat_format.register_chat_completion_handler("chatml-function-calling-bounded")
def chatml_function_calling_bounded(
    llama: Any, max_tokens: int | None = None, **kwargs: Any
) -> Any:
    capped = llama if max_tokens is None or max_tokens <= 0 else _Capped(llama, max_tokens)
    return llama_chat_format.chatml_function_calling(llama=capped, max_tokens=max_tokens, **kwargs)


if __name__ == "__main__":
    accept_null_assistant_content()
    main()
