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

The request model also takes two things of the OpenAI API that llama-cpp-python 0.3.x does not
(both seen with Letta as the client):

* an assistant message whose ``content`` is ``null`` beside its ``tool_calls``: the server types
  that ``content`` as a string and refused every such request (HTTP 500) before the model ran;
* ``max_completion_tokens``, the API's current name for ``max_tokens``: the server ignored it,
  so a request that gave only it ran with no limit, and tool arguments generated until the
  context was full (one request ran for more than 15 minutes). It now sets ``max_tokens``
  when that is not given.

Everything else is the unmodified server.
"""

from __future__ import annotations

from typing import Any, NotRequired

from llama_cpp import llama_chat_format, llama_types
from llama_cpp.server import types as server_types
from pydantic import Field, model_validator


def patch_request_model() -> None:
    """The request model changes of the module docstring. Must run before
    ``llama_cpp.server.app`` is imported: its route binds the request class at import."""
    message = llama_types.ChatCompletionRequestAssistantMessage
    message.__annotations__["content"] = NotRequired[str | None]
    base = server_types.CreateChatCompletionRequest
    base.model_rebuild(force=True)

    class ChatRequest(base):  # type: ignore[valid-type, misc]
        # exclude: the route passes model_dump() to create_chat_completion, which has no such
        # parameter; the value reaches it as max_tokens
        max_completion_tokens: int | None = Field(default=None, exclude=True)

        @model_validator(mode="after")
        def _completion_tokens_as_max_tokens(self) -> ChatRequest:
            if self.max_tokens is None and self.max_completion_tokens is not None:
                self.max_tokens = self.max_completion_tokens
            return self

    ChatRequest.__name__ = base.__name__
    server_types.CreateChatCompletionRequest = ChatRequest  # type: ignore[misc]


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
    patch_request_model()
    from llama_cpp.server.__main__ import main

    main()
