"""The policy behind the model server: a conversation in, the policy's next move out.

Every request carries the whole conversation, so the server keeps no session: it rebuilds the
named offline policy with its seed, resets it with the episode's first observation (found in
the prompt, see :func:`find_first_observation`), feeds it the observations of the PushBench tool
calls already made, in order, and returns the policy's next action as a tool call of the
client's (or a final text once the episode is over). The same conversation and seed always give
the same answer, so a retried request is answered identically and no state can drift.

The server never holds the hidden set: it sees only what the client sends (prompt, tool
results), which is what the agent sees.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..policies import OFFLINE_POLICIES, make_policy, validate_params

TERMINAL_TOOLS = ("final", "ask_user")
MODEL = "pushbench-policy"  # the model name clients are configured with (blackbox.clients)
_RESET_START = re.compile(r'\{\s*"tool"\s*:\s*"reset"')
_OBS_START = re.compile(r'\{\s*"tool"\s*:')


class RequestProblem(ValueError):
    """The request cannot be answered; ``kind`` picks the API's error type and HTTP status."""

    def __init__(self, message: str, kind: str = "invalid_request", status: int = 400) -> None:
        super().__init__(message)
        self.kind, self.status = kind, status


@dataclass
class Step:
    """One tool call the conversation holds and (once answered) its result text."""

    name: str  # the client's tool name (namespace joined with "__")
    arguments: Any  # decoded arguments (or the raw text if not JSON)
    call_id: str = ""
    result: str | None = None
    is_error: bool = False


@dataclass
class Conversation:
    """What one request says, independent of the API: texts, tool names, tool calls."""

    api: str
    texts: list[str] = field(default_factory=list)  # system/developer/user text, in order
    tools: list[str] = field(default_factory=list)  # client tool names (namespaced: a__b)
    steps: list[Step] = field(default_factory=list)
    stream: bool = False
    model: str = "pushbench-policy"
    last_user: str | None = None  # Chat Completions: the last user message (text-edit answers)


@dataclass
class Decision:
    """The answer: a tool call (``tool`` set) or a final text."""

    tool: str | None = None  # the client's tool name to call
    namespace: str | None = None  # Responses API namespaced tools: the namespace part
    bare_name: str | None = None  # ... and the name inside it
    arguments: dict | None = None
    text: str | None = None
    call_id: str = ""
    step: int = 0  # PushBench calls made before this one
    ended_by: str | None = None
    diverged_at: int | None = None  # first history call that differs from the policy's

    def as_log(self) -> dict:
        return {
            "tool": self.tool,
            "final": self.text is not None,
            "step": self.step,
            "ended_by": self.ended_by,
            "diverged_at": self.diverged_at,
        }


def find_first_observation(texts: list[str]) -> str | None:
    """The episode's first observation (``{"tool": "reset", ...}`` JSON) in the prompt texts."""
    dec = json.JSONDecoder()
    for text in texts:
        for m in _RESET_START.finditer(text):
            try:
                obj, _ = dec.raw_decode(text, m.start())
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("ok") and isinstance(obj.get("result"), dict):
                return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return None


def observation_from_result(name: str, text: str | None, is_error: bool) -> str:
    """The PushBench observation JSON inside a tool result as the client passed it back.

    Clients wrap MCP results differently (plain text, a list of content blocks, a serialised
    ``CallToolResult``, an error prefix); the observation is the first JSON object in it with a
    ``tool`` key. A result without one (the client refused or failed the call itself) becomes
    an observation of kind ``harness`` so the policy sees a failed call.
    """
    dec = json.JSONDecoder()
    queue = [text or ""]
    while queue:
        t = queue.pop(0)
        for m in _OBS_START.finditer(t):
            try:
                obj, _ = dec.raw_decode(t, m.start())
            except ValueError:
                continue
            if isinstance(obj, dict) and "ok" in obj:
                return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        try:
            obj = json.loads(t)
        except ValueError:
            continue
        if isinstance(obj, dict):  # a serialised CallToolResult: look inside its text parts
            for c in obj.get("content") or ():
                if isinstance(c, dict) and isinstance(c.get("text"), str):
                    queue.append(c["text"])
            # Letta hands a tool's return back as {"status": "OK", "message": "<text>", ...}
            if isinstance(obj.get("message"), str):
                queue.append(obj["message"])
        elif isinstance(obj, str):
            queue.append(obj)
    return json.dumps(
        {
            "tool": name,
            "ok": False,
            "error_type": "harness",
            "error": f"the client returned no PushBench observation"
            f"{' (error)' if is_error else ''}: {(text or '')[:300]}",
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


class Backend(Protocol):
    """What the HTTP app asks of a backend (:class:`PolicyBackend`, the oracle-edit one)."""

    server_name: str
    models: tuple[str, ...]

    def describe(self) -> dict: ...

    def decide(self, conv: Conversation) -> Decision: ...


class PolicyBackend:
    """Answers conversations with the moves of offline policy ``name`` (seeded, stateless)."""

    def __init__(
        self,
        name: str,
        params: dict | None = None,
        seed: int = 0,
        server_name: str = "pushbench",
        models: tuple[str, ...] = (MODEL,),
    ) -> None:
        if name not in OFFLINE_POLICIES:
            raise ValueError(
                f"policy {name!r} is not an offline policy; choose one of "
                f"{', '.join(OFFLINE_POLICIES)}"
            )
        if not models or any(not isinstance(m, str) or not m or len(m) > 256 for m in models):
            raise ValueError("the served model names must be 1 to 256 characters each")
        self.name, self.seed, self.server_name = name, seed, server_name
        self.models = tuple(dict.fromkeys(models))  # the names requests may ask for
        self.params = validate_params(name, params or {})

    def describe(self) -> dict:
        return {
            "policy": self.name,
            "params": self.params,
            "seed": self.seed,
            "server_name": self.server_name,
            "models": list(self.models),
        }

    # -- tool names ------------------------------------------------------------------------
    def match_tools(self, client_tools: list[str], env_tools: list[str]) -> dict[str, str]:
        """Map each PushBench tool name to the client's name for it.

        MCP clients name a server's tools ``mcp__<server>__<tool>`` (Claude Code; Codex puts
        them in a namespace ``mcp__<server>``, joined here with ``__``); other clients may use
        ``<server>__<tool>``, ``<server>.<tool>`` or the bare name.
        """
        s = re.escape(self.server_name)
        found: dict[str, str] = {}
        for tool in env_tools:
            pat = re.compile(rf"^(?:mcp__)?{s}(?:__|\.|/|:){re.escape(tool)}$")
            hits = [c for c in client_tools if pat.match(c)] or [
                c for c in client_tools if c == tool
            ]
            if hits:
                found[tool] = hits[0]
        return found

    def _pushbench_tool(self, client_name: str, mapping: dict[str, str]) -> str | None:
        for tool, cname in mapping.items():
            if cname == client_name:
                return tool
        return None

    # -- the decision ----------------------------------------------------------------------
    def decide(self, conv: Conversation) -> Decision:
        first = find_first_observation(conv.texts)
        if first is None:
            raise RequestProblem(
                "the conversation holds no PushBench first observation (a JSON object "
                '{"tool": "reset", ...}); give the agent the prompt that `pushbench mcp-prompt '
                "CONDITION --task TASK --seed SEED` prints"
            )
        result = json.loads(first)["result"]
        env_tools = [
            t["function"]["name"]
            for t in result.get("tools") or ()
            if isinstance(t, dict) and isinstance(t.get("function"), dict)
        ]
        mapping = self.match_tools(conv.tools, env_tools)
        if not mapping:
            raise RequestProblem(
                f"none of the client's {len(conv.tools)} tools is a PushBench tool of server "
                f"{self.server_name!r} (looked for {', '.join(env_tools) or 'none'} as "
                f"mcp__{self.server_name}__<tool>); is the MCP server configured and connected?"
            )
        pol = make_policy(self.name, seed=self.seed, **self.params)
        pol.reset(first)
        budget = int(result.get("budget") or 0)
        obs = first
        history = [
            (s, t) for s in conv.steps if (t := self._pushbench_tool(s.name, mapping)) is not None
        ]
        decision = Decision()
        n = 0
        for s, tool in history:
            if s.result is None:  # a call still unanswered: nothing to decide on yet
                raise RequestProblem(f"tool call {s.call_id or s.name!r} has no result yet")
            expected = pol.act(obs)
            if decision.diverged_at is None and not _same_call(expected, tool, s.arguments):
                decision.diverged_at = n + 1
            n += 1
            obs = observation_from_result(tool, s.result, s.is_error)
            o = json.loads(obs)
            if o.get("error_type") == "episode_over":
                return self._final(decision, n, "over")
            if o.get("ok") and o.get("tool") in TERMINAL_TOOLS:
                return self._final(decision, n, o["tool"])
            if budget and n >= budget:
                return self._final(decision, n, "budget")
        action = pol.act(obs)
        if isinstance(action, str):
            try:
                action = json.loads(action)
            except ValueError:
                action = {"tool": "?", "raw": action}
        action = dict(action) if isinstance(action, dict) else {"tool": "?", "raw": action}
        tool = str(action.pop("tool", "?"))
        client = (
            mapping.get(tool)
            or next(iter(mapping.values())).rsplit(next(iter(mapping)), 1)[0] + tool
        )  # same prefix as the known ones
        decision.tool, decision.arguments, decision.step = client, action, n
        if "__" in client and client.startswith("mcp__"):
            ns, _, bare = client.rpartition("__")
            decision.namespace, decision.bare_name = ns, bare
        decision.call_id = self.call_id(conv, n)
        return decision

    def _final(self, d: Decision, n: int, why: str) -> Decision:
        d.step, d.ended_by = n, why
        d.text = {
            "final": "Done: I called `final`; the episode is over.",
            "ask_user": "I handed control back to the user; the episode is over.",
            "budget": "The step budget is used up; the episode is over.",
            "over": "The episode is over.",
        }[why]
        return d

    def call_id(self, conv: Conversation, n: int) -> str:
        """A deterministic id for the ``n``-th call: same seed and conversation, same id."""
        h = hashlib.sha256(f"{self.name}|{self.seed}|{n}|{len(conv.steps)}".encode())
        return h.hexdigest()[:24]


def _same_call(expected: Any, tool: str, arguments: Any) -> bool:
    if isinstance(expected, str):
        try:
            expected = json.loads(expected)
        except ValueError:
            return False
    if not isinstance(expected, dict):
        return False
    exp = dict(expected)
    return exp.pop("tool", None) == tool and exp == (arguments or {})
