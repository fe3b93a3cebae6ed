"""The native LLM policy: a plain chat-completions tool-calling loop (``llm``).

One model reply may hold several function calls; they are executed in order, one environment
step each (memory calls of the memory baselines run in the harness at no step), and the model is
called again when every call of its last reply has been answered. ``act`` is the blocking form
used by the process-pool runner, ``aact`` the asyncio form used by the concurrent driver
(:func:`pushbench.runner.episode.arun_episode`); both run the same code around
:class:`~.core.AgentCore`.

Parameters (experiment ``params``): see :class:`~.config.LLMConfig`. Records gain ``usage``
(tokens, calls, cost), ``llm`` (behaviour counts, context trimming), ``transcript`` (every model
reply with its token use, and every message sent back: the observation of each step; kept in the
trace, not in the episode line) and, for memory baselines, ``memory``.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

from ..base import Policy
from ..errors import ContextOverflow, PolicyError
from .client import ChatClient, Usage
from .config import LLMConfig
from .core import AgentCore, Item, Memory, Stats

_NEED_MODEL = object()


class LLMPolicy(Policy):
    """Drive the environment with an OpenAI-compatible chat model (native loop)."""

    name: ClassVar[str] = "llm"
    simulated = False
    backend: ClassVar[str] = "native"
    Params = LLMConfig

    def __init__(self, seed: int | None = None, **params: Any) -> None:
        super().__init__(seed=seed, **params)
        self.cfg = LLMConfig.model_validate(params)
        self.client = ChatClient(self.cfg, seed)
        self.memory: Memory | None = None

    def make_memory(self) -> Memory | None:
        """Memory baselines return their harness-side memory here (fresh per episode)."""
        return None

    # ----- episode state ------------------------------------------------------------------
    def reset(self, first_observation: str) -> None:
        self.memory = self.make_memory()
        self.core = AgentCore(self.cfg, self.memory)
        self.messages: list[dict] = self.core.start(first_observation)
        self.usage = Usage()
        self.stats = Stats(self.backend)
        self.queue: deque[Item] = deque()
        self.awaiting: Item | None = None
        self.free_streak = 0
        self.turns = 0
        self.transcript: list[dict] = []
        self._window_asked = False

    def _absorb(self, observation: str) -> None:
        if self.awaiting is not None:  # the answer to the action we returned last
            msg = self.core.result_message(self.awaiting, observation)
            self.messages.append(msg)
            self.transcript.append(self.core.answer_event(self.stats.env_actions, msg))
            self.awaiting = None

    def _ready(self):
        """The next environment action of the current reply (memory calls run on the way)."""
        while self.queue:
            item = self.queue.popleft()
            if item.kind == "memory":
                msg = self.core.run_memory(item)
                self.messages.append(msg)
                self.transcript.append(self.core.answer_event(None, msg))
                continue
            self.awaiting = item
            self.stats.env_actions += 1
            return item.action
        return _NEED_MODEL

    def _prepare(self) -> list[dict]:
        if self.turns >= self.core.max_model_turns():  # unreachable by construction
            raise PolicyError(
                "turn_limit",
                f"{self.turns} model turns without the episode "
                "ending; the step accounting is broken",
            )
        request, self.messages = self.core.view(self.messages, self.stats)
        return request

    def _ingest(self, turn) -> None:
        self.turns += 1
        msg = turn.assistant_message()
        self.messages.append(msg)
        self.transcript.append(self.core.model_event(self.turns, turn))
        items = self.core.interpret(msg, self.free_streak, self.stats)
        self.free_streak = self.free_streak + 1 if self.core.free_turn(items) else 0
        self.queue.extend(items)

    # ----- the Policy API -----------------------------------------------------------------
    # A context-length refusal trims the view to fit and retries the call once
    # (AgentCore.after_overflow); a second refusal ends the episode as a backend error.
    def act(self, observation: str) -> str | dict:
        self._absorb(observation)
        if not self._window_asked:
            self.core.set_window(self.stats, self.client.window())
            self._window_asked = True
        while (action := self._ready()) is _NEED_MODEL:
            request = self._prepare()
            try:
                turn = self.client.complete(request, self.core.tools(), self.usage)
            except ContextOverflow as e:
                self.core.after_overflow(e, request, self.stats, self.turns + 1)
                request = self._prepare()
                turn = self.client.complete(request, self.core.tools(), self.usage)
            self._ingest(turn)
        return action

    async def aact(self, observation: str) -> str | dict:
        self._absorb(observation)
        if not self._window_asked:
            self.core.set_window(self.stats, await self.client.awindow())
            self._window_asked = True
        while (action := self._ready()) is _NEED_MODEL:
            request = self._prepare()
            try:
                turn = await self.client.acomplete(request, self.core.tools(), self.usage)
            except ContextOverflow as e:
                self.core.after_overflow(e, request, self.stats, self.turns + 1)
                request = self._prepare()
                turn = await self.client.acomplete(request, self.core.tools(), self.usage)
            self._ingest(turn)
        return action

    def episode_extras(self) -> dict:
        """Record sections added by the episode driver: ``usage``, ``llm``, ``memory``."""
        out = {
            "usage": self.usage.as_record(self.cfg),
            "llm": {
                **self.stats.to_state(),
                "model": self.cfg.model,
                "model_calls": self.usage.calls,
                "context_tokens": self.cfg.context_tokens,
            },
            "transcript": list(getattr(self, "transcript", [])),
        }
        if self.memory is not None:
            out["memory"] = {
                **self.memory.summary(),
                "charged_to_env": self.stats.memory_calls_charged,
            }
        self.client.close()
        return out

    async def aclose(self) -> None:
        await self.client.aclose()

    def describe(self) -> dict:
        d = super().describe()
        d["backend"] = self.backend
        return d
