"""``pushbench model-server``: a loopback model server whose "model" is an offline policy.

Black-box clients (Claude Code, Codex CLI, any OpenAI-compatible agent) point their model
endpoint here and their MCP client at ``pushbench mcp``; the server answers each model request
with the move the named policy (``diligent``, ``simulated-*``, ``exhaustive``, ``random``) makes
on the observations in the conversation. The same policy in-process and through a client's
harness then gives a paired comparison of what the harness itself adds or loses.

Modules: :mod:`.core` (conversation -> decision, stateless and seeded), :mod:`.anthropic_api`
(Messages API), :mod:`.openai_api` (Responses API and Chat Completions), :mod:`.app` (HTTP,
limits, error shapes, the request log, serving on loopback).
"""

from .app import build_app, running, serve
from .core import Conversation, Decision, PolicyBackend, RequestProblem, find_first_observation
from .notes import NotingBackend

__all__ = [
    "Conversation",
    "Decision",
    "NotingBackend",
    "PolicyBackend",
    "RequestProblem",
    "build_app",
    "find_first_observation",
    "running",
    "serve",
]
