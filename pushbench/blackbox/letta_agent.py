"""The Letta client of one black-box episode: a Letta agent with MemGPT-style memory, driven
turn by turn over Letta's REST API (``python -m pushbench.blackbox.letta_agent CONFIG``).

``blackbox_run`` starts this module as the episode's client process (its own process group,
killed at the episode timeout like Claude Code or Codex), with a JSON config written into the
episode folder. It

1. registers ``pushbench mcp`` for this episode as Letta's stdio MCP server ``pushbench``
   (replacing the previous episode's: Letta names MCP tools by their bare names, one per
   organisation) and adds its tools (``search``, ``submit``, ...) as Letta tools;
2. creates the agent (``letta_v1_agent``) with two core memory blocks, ``objective`` (the
   task's objective from the first observation) and ``progress`` (notes, empty at the start),
   Letta's own memory tools (``memory_insert``, ``memory_replace``, ``conversation_search``,
   ``archival_memory_insert``, ``archival_memory_search``) and the PushBench tools, its model
   being the episode's endpoint. An agent already made for this episode (``letta-agent.json``,
   a rerun after a crash) is reused with its memory and history, pointed at the new endpoint;
3. sends the episode prompt as one user message (on a rerun ``Continue.`` instead, unless
   Letta never persisted the prompt: see :func:`prompt_persisted`) and, while Letta stops a
   turn only because it reached ``max_steps`` (the agent is still calling tools), sends
   ``Continue.``; it stops when
   the agent ends its turn by itself (or errs), when the episode is over (the record in the run
   folder says how it ended) or after ``max_turns`` turns. A turn still running
   ``END_GRACE`` seconds after the episode ended (a model that keeps calling tools after
   ``final``: every further PushBench call is refused, yet Letta would step it up to
   ``max_steps`` times) is cancelled through Letta's cancel endpoint (``cancelled_after_end``);
4. appends every Letta message to ``letta-trace.jsonl`` and writes ``letta.json``: turns, stop
   reasons, and the tool calls split into PushBench calls (they consume steps, the MCP server
   counts them) and Letta's memory calls (``memory_calls``: they consume no PushBench step;
   ``memory_errors`` of them failed inside Letta).

A Letta server that fails or goes away is one line on stderr and exit code 3 (the summary
keeps what happened before); the caller records it in ``client.json``. A Letta failure after
the episode ended cannot change its record: it is kept as ``error_after_end`` (exit code 0).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

SERVER = "pushbench"
MEMORY_TOOLS = frozenset(
    {
        "memory_insert",
        "memory_replace",
        "memory_rethink",
        "memory",
        "memory_apply_patch",
        "memory_finish_edits",
        "core_memory_append",
        "core_memory_replace",
        "archival_memory_insert",
        "archival_memory_search",
        "conversation_search",
    }
)
ARCHIVAL_TOOLS = ("archival_memory_insert", "archival_memory_search")
CONTINUE = "Continue."
EXIT_LETTA = 3
# Seconds a turn may go on after the episode ended before it is cancelled: long enough for a
# model that ends its turn after ``final`` (one more Letta step, 1-2 s here: the offline
# policies, a well-behaved LLM) to finish on its own on a loaded machine, short enough that a
# model repeating refused calls does not spend the episode timeout.
END_GRACE = 30.0


class LettaError(RuntimeError):
    """The Letta server refused a request or could not be reached."""


class Api:
    def __init__(self, url: str, timeout: float = 600) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout

    def call(self, method: str, path: str, body: object = None, ok404: bool = False):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            if ok404 and e.code == 404:
                return None
            detail = e.read().decode(errors="replace")[:300].replace("\n", " ")
            raise LettaError(f"{method} {path}: HTTP {e.code}: {detail}") from None
        except (OSError, urllib.error.URLError) as e:
            raise LettaError(
                f"{method} {path}: the Letta server is unreachable ({getattr(e, 'reason', e)})"
            ) from None
        return json.loads(raw) if raw else None


def objective_of(first_observation: dict) -> str:
    res = first_observation.get("result") or {}
    parts = [str(res["objective"])] if res.get("objective") else []
    if res.get("target") is not None:
        parts.append(f"Target: {res['target']}")
    return "\n".join(parts) or json.dumps(res)[:2000]


def register_tools(api: Api, cfg: dict) -> list[str]:
    if SERVER in (api.call("GET", "/v1/tools/mcp/servers") or {}):
        api.call("DELETE", f"/v1/tools/mcp/servers/{SERVER}")
    api.call(
        "PUT",
        "/v1/tools/mcp/servers",
        {
            "server_name": SERVER,
            "type": "stdio",
            "command": cfg["mcp_command"][0],
            "args": cfg["mcp_command"][1:],
            "env": cfg["mcp_env"],
        },
    )
    ids = []
    for name in cfg["tools"]:
        # Adding the server synced its tools already; reading them back from Letta's database
        # avoids one more start of `pushbench mcp` per tool (POST .../{tool} lists them again)
        synced = [
            t
            for t in api.call("GET", f"/v1/tools/?name={name}") or ()
            if ((t.get("metadata_") or {}).get("mcp") or {}).get("server_name") == SERVER
        ]
        ids.append(
            synced[0]["id"]
            if synced
            else api.call("POST", f"/v1/tools/mcp/servers/{SERVER}/{name}")["id"]
        )
    return ids


def ensure_agent(api: Api, cfg: dict, tool_ids: list[str], ep: Path) -> tuple[str, bool]:
    """The episode's agent id and whether it already existed (a rerun)."""
    marker = ep / "letta-agent.json"
    if marker.exists():
        agent_id = json.loads(marker.read_text())["agent_id"]
        agent = api.call("GET", f"/v1/agents/{agent_id}", ok404=True)
        if agent is not None:
            # tool_ids in a PATCH replace the agent's whole tool set: keep Letta's own (memory)
            # tools, swap in this run's PushBench tools (the MCP server was registered anew)
            keep = [
                t["id"]
                for t in agent.get("tools") or ()
                if isinstance(t, dict) and t.get("name") not in cfg["tools"]
            ]
            api.call(
                "PATCH",
                f"/v1/agents/{agent_id}",
                {"llm_config": cfg["llm_config"], "tool_ids": keep + tool_ids},
            )
            return agent_id, True
    agent = api.call(
        "POST",
        "/v1/agents/",
        {
            "name": cfg["agent_name"],
            "agent_type": "letta_v1_agent",
            "llm_config": cfg["llm_config"],
            "embedding_config": None,
            # letta_v1_agent's base tools are memory_insert, memory_replace and
            # conversation_search; 0.16.8 left the archival tools out of the base set
            # (DEPRECATED_LETTA_TOOLS), so they are asked for by name. Without an embedding
            # configuration Letta stores archival passages unembedded (text search only).
            "include_base_tools": True,
            "tools": list(ARCHIVAL_TOOLS),
            "tool_ids": tool_ids,
            "memory_blocks": [
                {
                    "label": "objective",
                    "value": cfg["objective"],
                    "limit": 8000,
                    "description": "The task's objective and target (from the first observation).",
                },
                {
                    "label": "progress",
                    "value": "",
                    "limit": 20000,
                    "description": "Your own progress notes: what you did, what was verified, "
                    "what remains. Keep it up to date.",
                },
            ],
        },
    )
    marker.write_text(json.dumps({"agent_id": agent["id"]}) + "\n")
    return agent["id"], False


def prompt_persisted(messages: list[dict] | None) -> bool:
    """Whether Letta kept the episode prompt: a ``user_message`` among the agent's messages.

    The driver's first user message is always the prompt, and ``Continue.`` is sent only after
    a turn that Letta persisted, so any persisted user message means the prompt is there.
    Letta 0.16.8 persists a turn's input message together with the turn's first step, at the
    step's end (``LettaAgentV3._checkpoint_messages``): a server killed during that step leaves
    the agent with its system message only, and the prompt (the first observation the model
    needs) must be sent again."""
    return any(
        isinstance(m, dict) and m.get("message_type") == "user_message" for m in messages or ()
    )


def _tool_calls(msg: dict) -> list[dict]:
    calls = msg.get("tool_calls") or ([msg["tool_call"]] if msg.get("tool_call") else [])
    return [c for c in calls if isinstance(c, dict)]


def episode_over(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "episode.json").read_text()).get("terminated_by")
    except (OSError, ValueError):
        return None


def _cancel_on_sigterm(api: Api, agent_id: str) -> None:
    """At the episode timeout the caller SIGTERMs this process: cancel the agent's run first,
    or Letta would go on stepping it server-side (and call the next episode's MCP server,
    which then owns the tool names)."""

    def handler(signum, frame):
        try:
            Api(api.url, 10).call("POST", f"/v1/agents/{agent_id}/messages/cancel", {})
        except LettaError:
            pass  # nothing running, or the server is gone
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


class EndWatch(threading.Thread):
    """Cancels the agent's running turn once the PushBench episode has been over for
    ``grace`` seconds (polled every ``poll`` seconds, from the run folder's record).

    Letta checks for cancellation between its steps, so the turn's request then returns with
    stop reason ``cancelled`` and the driver stops. ``cancelled`` says whether it fired.
    ``stop()`` ends the watch (the driver calls it when the episode's turns are done)."""

    def __init__(
        self, api: Api, agent_id: str, run_dir: Path, grace: float, poll: float = 1.0
    ) -> None:
        super().__init__(name="letta-end-watch", daemon=True)
        self.api, self.agent_id, self.run_dir = api, agent_id, run_dir
        self.grace, self.poll = grace, poll
        self.cancelled = False
        self._done = threading.Event()

    def run(self) -> None:
        over_since: float | None = None
        while not self._done.wait(self.poll):
            if episode_over(self.run_dir) is None:
                continue
            over_since = over_since if over_since is not None else time.monotonic()
            if time.monotonic() - over_since < self.grace:
                continue
            try:
                Api(self.api.url, 30).call(
                    "POST", f"/v1/agents/{self.agent_id}/messages/cancel", {}
                )
                self.cancelled = True
            except LettaError:
                pass  # no run in flight (the turn just ended) or the server is gone: try again
            if self.cancelled:
                return

    def stop(self) -> None:
        self._done.set()


def drive(cfg: dict) -> dict:
    ep, run_dir = Path(cfg["episode_dir"]), Path(cfg["run_dir"])
    # One request carries a whole turn (up to steps_per_turn Letta steps, many minutes on a
    # loaded machine): no client-side limit, the episode timeout (the caller kills this
    # process) bounds it. 600 s cut a DataOps turn here.
    api = Api(cfg["url"], cfg.get("request_timeout", 86400))
    summary: dict[str, Any] = {
        "agent_id": None,
        "resumed": False,
        "prompt_resent": False,
        "turns": 0,
        "stop_reasons": [],
        "letta_messages": 0,
        "pushbench_calls": 0,
        "memory_calls": 0,
        "other_calls": 0,
        "memory_tools_used": {},
        "memory_errors": 0,
        "cancelled_after_end": False,
        "error": None,
        "error_after_end": None,
    }
    watch: EndWatch | None = None
    t0 = time.monotonic()
    try:
        tool_ids = register_tools(api, cfg)
        agent_id, resumed = ensure_agent(api, cfg, tool_ids, ep)
        summary.update(agent_id=agent_id, resumed=resumed)
        _cancel_on_sigterm(api, agent_id)
        text = cfg["prompt"]
        if resumed and prompt_persisted(
            api.call(
                "GET",
                f"/v1/agents/{agent_id}/messages?limit=50&order=asc"
                "&include_return_message_types=user_message",
            )
        ):
            text = CONTINUE
        summary["prompt_resent"] = resumed and text != CONTINUE
        watch = EndWatch(api, agent_id, run_dir, float(cfg.get("end_grace", END_GRACE)))
        watch.start()
        with open(ep / "letta-trace.jsonl", "a", encoding="utf-8") as trace:
            while summary["turns"] < cfg["max_turns"] and episode_over(run_dir) is None:
                resp = api.call(
                    "POST",
                    f"/v1/agents/{agent_id}/messages",
                    {
                        "messages": [{"role": "user", "content": text}],
                        "max_steps": cfg["steps_per_turn"],
                    },
                )
                summary["turns"] += 1
                stop = (resp.get("stop_reason") or {}).get("stop_reason")
                summary["stop_reasons"].append(stop)
                for m in resp.get("messages") or ():
                    summary["letta_messages"] += 1
                    if (
                        m.get("message_type") == "tool_return_message"
                        and m.get("name") in MEMORY_TOOLS
                        and m.get("status") == "error"
                    ):
                        summary["memory_errors"] += 1  # a memory call Letta could not carry out
                    for c in _tool_calls(m):
                        name = c.get("name")
                        kind = (
                            "memory"
                            if name in MEMORY_TOOLS
                            else "pushbench"
                            if name in cfg["tools"]
                            else "other"
                        )
                        summary[f"{kind}_calls"] += 1
                        if kind == "memory":
                            used = summary["memory_tools_used"]
                            used[name] = used.get(name, 0) + 1
                    trace.write(json.dumps({"turn": summary["turns"], **m}, default=str) + "\n")
                trace.write(
                    json.dumps(
                        {"turn": summary["turns"], "stop_reason": stop, "usage": resp.get("usage")},
                        default=str,
                    )
                    + "\n"
                )
                trace.flush()
                if stop != "max_steps":  # the agent ended its turn itself, or Letta erred
                    break
                text = CONTINUE
    except LettaError as e:
        # After the episode ended (its record is complete) a failing Letta request cannot
        # change the score: kept as error_after_end, not as the client's failure (exit 0)
        summary["error" if episode_over(run_dir) is None else "error_after_end"] = str(e)
        if summary["agent_id"]:  # stop the agent's run, if the server still answers
            try:
                Api(api.url, 10).call(
                    "POST", f"/v1/agents/{summary['agent_id']}/messages/cancel", {}
                )
            except LettaError:
                pass
    if watch is not None:
        watch.stop()
        summary["cancelled_after_end"] = watch.cancelled
    summary["ended_by"] = episode_over(run_dir)
    summary["seconds"] = round(time.monotonic() - t0, 2)
    (ep / "letta.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pushbench.blackbox.letta_agent CONFIG.json", file=sys.stderr)
        return 2
    summary = drive(json.loads(Path(args[0]).read_text()))
    print(
        json.dumps(
            {
                k: summary[k]
                for k in ("turns", "stop_reasons", "pushbench_calls", "memory_calls", "ended_by")
            }
        )
    )
    if summary["error"]:
        print(f"error: {summary['error']}", file=sys.stderr)
        return EXIT_LETTA
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
