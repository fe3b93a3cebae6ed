"""What every LLM backend shares: prompts, tools, the context view and reading model output.

The native loop (:mod:`.native`) and the LangGraph graph (:mod:`.langgraph_agent`) differ only
in orchestration; both call :class:`AgentCore` for everything else, so prompts, tool schemas,
the context budget, the treatment of invalid output and the records are identical.

Reading a model reply (:meth:`AgentCore.interpret`) gives a list of :class:`Item` in call order:

* a function call whose arguments parse as a JSON object becomes the action
  ``{"tool": name, **arguments}``; the environment validates it (an unknown tool or bad
  arguments is its ``ok: false`` answer, costing a step, exactly as for any agent);
* arguments the shared normalisation refuses (not valid JSON, not an object, too large or
  deep, a lone surrogate, ...) are passed on as the raw text, which the environment rejects
  with the same ``error_type`` (one step);
* a reply with no tool call (plain text) is passed on as a JSON *string*, which the environment
  rejects as ``not_object`` (one step) even if the text itself looks like a tool call; the agent
  gets a user message saying so plus the environment's answer;
* memory tools (memory baselines only) run in the harness and cost no step, up to
  ``max_memory_turns`` consecutive model turns without an environment action; after that a
  memory call is passed to the environment like any unknown tool (and is charged a step), which
  bounds every episode at ``budget * (1 + max_memory_turns) + max_memory_turns`` model calls.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ...envs import actions
from ..errors import ContextOverflow
from .client import ToolCall
from .config import LLMConfig
from .context import estimate_tokens, trim, view_tokens
from .window import fitted_budget

SYSTEM_PROMPT = (
    "You are an autonomous agent working in a tool-based environment. You act only by calling "
    "the provided functions. Every function call costs one step of a fixed step budget, and "
    "invalid calls cost a step too. The environment answers each call with JSON. An "
    "independent verifier decides whether the task succeeded from its own records, not from "
    "what you report."
)
MEMORY_PROMPT = (
    " You also have memory tools ({names}); calling them costs no step of the budget, but only "
    "{limit} replies in a row may use memory tools alone."
)
PLAIN_TEXT_NOTE = (
    "[harness] Your reply contained no function call. It was passed to the "
    "environment as an invalid action and used one step. Reply with a function "
    "call. Environment response:"
)
MEMORY_LIMIT_NOTE = (
    "[harness] Too many replies in a row used only memory tools, so this call "
    "was passed to the environment and used one step. Environment response:"
)


class Memory(Protocol):
    """A memory baseline's harness-side tools (see :mod:`.memory`)."""

    kind: ClassVar[str]
    tools: list[dict]
    names: frozenset[str]

    def call(self, name: str, args: dict) -> dict: ...
    def note_call(self, name: str, ok: bool) -> None: ...
    def context_block(self) -> str | None: ...
    def summary(self) -> dict: ...
    def bind(self, store: Any) -> None: ...  # the LangGraph store (None-op without one)
    def to_state(self) -> dict: ...
    def load_state(self, d: dict) -> None: ...


@dataclass
class Item:
    """One thing to do with a model reply: an environment action or a memory call."""

    kind: str  # "env" | "memory"
    call: ToolCall | None  # None: a plain-text reply
    action: str | dict | None = None
    args: dict | None = None  # memory calls: parsed arguments (None if unparseable)
    note: str | None = None


def call_action(name: str, arguments: str) -> str | dict:
    """The environment action for a function call (see the module docstring).

    The arguments go through the environment's own normalisation
    (:func:`pushbench.envs.actions.decode`): a plain bounded object becomes the call; anything
    it refuses (bad JSON, not an object, too large or deep, a number too long, a lone
    surrogate) is passed on as the raw text, which the environment refuses with the same
    ``error_type`` (one step). Nothing the model sends can raise here.
    """
    text = arguments.strip()
    try:
        parsed = actions.decode(text) if text else {}
    except actions.ActionError:
        return actions.escape_surrogates(arguments)
    call = {**parsed, "tool": name}
    if actions.escape_surrogates(name) != name:  # keep actions storable: refuse it as text
        return json.dumps(call, ensure_ascii=True)
    return call


def text_action(content: str | None) -> str:
    """The environment action for a plain-text reply: a JSON string (never a valid call)."""
    return json.dumps(content or "", ensure_ascii=True)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Stats:
    """Behaviour counts of one episode (``record["llm"]``)."""

    backend: str
    tool_calls: int = 0
    env_actions: int = 0
    plain_text_replies: int = 0
    unparseable_arguments: int = 0
    unknown_tools: int = 0
    multi_call_turns: int = 0
    memory_calls_charged: int = 0
    dropped_turns: int = 0
    max_view_tokens_est: int = 0
    # The server's context window (None: not known) and what was fitted to it: the ratio of
    # server tokens to estimated tokens learned from a refusal, the budget of the last view,
    # and each refused call that was trimmed and retried (AgentCore.after_overflow).
    context_window: int | None = None
    context_token_ratio: float = 1.0
    context_budget: int | None = None
    context_retries: int = 0
    context_retry: list = field(default_factory=list)

    def to_state(self) -> dict:
        return {**self.__dict__, "context_retry": [dict(e) for e in self.context_retry]}

    @classmethod
    def from_state(cls, d: dict) -> Stats:
        return cls(**d)


class AgentCore:
    """Prompts, tools, context view and output reading shared by the backends."""

    def __init__(self, cfg: LLMConfig, memory: Memory | None = None) -> None:
        self.cfg = cfg
        self.memory = memory
        self.env_tools: list[dict] = []
        self.env_tool_names: frozenset[str] = frozenset()
        self.budget = 0
        self._tools_est: int | None = None

    # ----- the start of an episode --------------------------------------------------------
    def start(self, first_observation: str) -> list[dict]:
        """The pinned messages (system, objective) for the reset observation."""
        obs = json.loads(first_observation)
        result = dict(obs.get("result") or {})
        self.env_tools = list(result.pop("tools", []))
        self.env_tool_names = frozenset(t["function"]["name"] for t in self.env_tools)
        self.budget = int(result.get("budget") or 0)
        objective = result.pop("objective", "")
        target, budget = result.pop("target", None), result.pop("budget", None)
        lines = [
            f"Objective: {objective}",
            "",
            f"Target: at least {target} distinct items accepted by the verifier.",
            f"Step budget: {budget} function calls (each call costs one step, invalid "
            "calls included; the episode ends when the budget is used).",
        ]
        if result:
            lines.append(f"Task details: {json.dumps(result, sort_keys=True)}")
        extra = {k: v for k, v in obs.items() if k not in ("tool", "ok", "result")}
        if extra:  # a controller's progress block or message
            lines.append(f"Environment state: {json.dumps(extra, sort_keys=True)}")
        return [
            {"role": "system", "content": self.system_prompt()},
            {"role": "user", "content": "\n".join(lines)},
        ]

    def system_prompt(self) -> str:
        text = self.cfg.system_prompt or SYSTEM_PROMPT
        if self.memory is not None:
            text += MEMORY_PROMPT.format(
                names=", ".join(sorted(self.memory.names)), limit=self.cfg.max_memory_turns
            )
        return text

    def tools(self) -> list[dict]:
        return self.env_tools + (list(self.memory.tools) if self.memory else [])

    def max_model_turns(self) -> int:
        k = self.cfg.max_memory_turns if self.memory else 0
        return self.budget * (1 + k) + k

    # ----- the context view ---------------------------------------------------------------
    def view(self, messages: list[dict], stats: Stats) -> tuple[list[dict], list[dict]]:
        """``(request_messages, kept_history)`` for the next model call.

        ``request_messages`` carries the current system message (with the memory block of a
        MemGPT-style memory); ``kept_history`` is the history after trimming, to store back.
        """
        system = {"role": "system", "content": self.system_prompt()}
        block = self.memory.context_block() if self.memory else None
        if block:
            system["content"] += "\n\n" + block
        budget = self.context_budget(stats)
        stats.context_budget = budget
        if budget is None:  # full context: nothing is dropped
            kept, dropped = [system, *messages[1:]], 0
        else:
            kept, dropped = trim([system, *messages[1:]], budget)
        stats.dropped_turns += dropped
        stats.max_view_tokens_est = max(stats.max_view_tokens_est, view_tokens(kept))
        return kept, [messages[0], *kept[1:]]

    def tools_tokens(self) -> int:
        """Estimated tokens of the tool definitions (sent with every request)."""
        if self._tools_est is None:
            tools = self.tools()
            self._tools_est = estimate_tokens(json.dumps(tools)) if tools else 0
        return self._tools_est

    def context_budget(self, stats: Stats) -> int | None:
        """``context_tokens``, lowered to what fits the server's window when it is known
        (:func:`.window.fitted_budget`); ``None``: no trimming."""
        budget = self.cfg.context_tokens
        if stats.context_window:
            fit = fitted_budget(
                stats.context_window,
                self.cfg.max_tokens,
                self.tools_tokens(),
                stats.context_token_ratio,
            )
            budget = fit if budget is None else min(budget, fit)
        return budget

    @staticmethod
    def set_window(stats: Stats, window: int | None) -> None:
        """Record the server's window (discovered or configured) unless one is known."""
        if window and stats.context_window is None:
            stats.context_window = int(window)

    def after_overflow(
        self, error: ContextOverflow, request: list[dict], stats: Stats, turn_no: int
    ) -> None:
        """Learn from a context-length refusal of ``request`` so the next view fits.

        The window is the server's number (else the known one, else three quarters of what
        was sent plus ``max_tokens``); the ratio of server to estimated tokens is the prompt
        tokens the server counted over the estimate of what was sent (else grown by a quarter,
        at least enough for the window to have been exceeded). Recorded as a context retry.
        """
        sent = view_tokens(request) + self.tools_tokens()
        ratio = stats.context_token_ratio
        window = (
            error.window or stats.context_window or int(0.75 * sent * ratio) + self.cfg.max_tokens
        )
        if error.prompt_tokens:
            ratio = max(ratio, error.prompt_tokens / max(sent, 1))
        else:
            ratio = max(ratio * 1.25, (window - self.cfg.max_tokens) / max(sent, 1))
        stats.context_window = window
        stats.context_token_ratio = round(ratio, 4)
        stats.context_retries += 1
        stats.context_retry.append(
            {
                "turn": turn_no,
                "window": window,
                "prompt_tokens": error.prompt_tokens,
                "sent_est": sent,
                "budget": self.context_budget(stats),
                "message": error.message[:300],
            }
        )

    # ----- reading a reply ----------------------------------------------------------------
    def interpret(self, assistant: dict, free_streak: int, stats: Stats) -> list[Item]:
        calls = [
            ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in assistant.get("tool_calls") or ()
        ]
        if not calls:
            stats.plain_text_replies += 1
            return [
                Item(
                    "env", None, action=text_action(assistant.get("content")), note=PLAIN_TEXT_NOTE
                )
            ]
        stats.tool_calls += len(calls)
        stats.multi_call_turns += len(calls) > 1
        memory_names = self.memory.names if self.memory else frozenset()
        memory_ok = free_streak < self.cfg.max_memory_turns
        items: list[Item] = []
        for c in calls:
            if c.name in memory_names and memory_ok:
                try:
                    args = actions.decode(c.arguments) if c.arguments.strip() else {}
                except actions.ActionError:
                    args = None
                items.append(Item("memory", c, args=args))
                continue
            if c.name in memory_names:
                stats.memory_calls_charged += 1
            elif c.name not in self.env_tool_names:
                stats.unknown_tools += 1
            action = call_action(c.name, c.arguments)
            if isinstance(action, str):
                stats.unparseable_arguments += 1
            items.append(
                Item(
                    "env",
                    c,
                    action=action,
                    note=MEMORY_LIMIT_NOTE if c.name in memory_names else None,
                )
            )
        return items

    @staticmethod
    def free_turn(items: list[Item]) -> bool:
        """A turn that took no environment action (memory calls only)."""
        return all(i.kind == "memory" for i in items)

    # ----- the transcript (record["transcript"]) -------------------------------------------
    @staticmethod
    def model_event(turn_no: int, turn) -> dict:
        """Transcript entry of model reply ``turn_no`` (1-based): its message and token use."""
        return {
            "turn": turn_no,
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
            "usage_estimated": turn.usage_estimated,
            "finish_reason": turn.finish_reason,
            "message": turn.assistant_message(),
        }

    @staticmethod
    def answer_event(step: int | None, message: dict) -> dict:
        """Transcript entry of a message sent back to the model: the answer to environment
        step ``step`` (the observation), or to a memory call (``step`` None)."""
        return {"step": step, "message": message}

    # ----- answers ------------------------------------------------------------------------
    @staticmethod
    def result_message(item: Item, observation: str) -> dict:
        """The message carrying the environment's answer to ``item``."""
        content = f"{item.note}\n{observation}" if item.note else observation
        if item.call is None:
            return {"role": "user", "content": content}
        return {"role": "tool", "tool_call_id": item.call.id, "content": content}

    def run_memory(self, item: Item) -> dict:
        """Run a memory call in the harness (no step); return its tool message."""
        call, memory = item.call, self.memory
        if call is None or memory is None:  # items are memory calls only where both exist
            raise ValueError("run_memory needs a memory call and a policy with a memory")
        name = call.name
        out: dict[str, Any]
        if item.args is None:
            out = {
                "tool": name,
                "ok": False,
                "error_type": "bad_json",
                "error": f"{name}: arguments are not a JSON object",
            }
        else:
            try:
                out = {"tool": name, "ok": True, "result": memory.call(name, item.args)}
            except (TypeError, ValueError, KeyError) as e:
                out = {
                    "tool": name,
                    "ok": False,
                    "error_type": "bad_arguments",
                    "error": f"{name}: {e}",
                }
        memory.note_call(name, out["ok"])
        return {
            "role": "tool",
            "tool_call_id": call.id,
            "content": json.dumps(out, ensure_ascii=True, separators=(",", ":")),
        }
