"""How each black-box client is configured and started headless for one episode.

Both clients get a fresh home of their own inside the episode folder (nothing leaks between
episodes or from the user's own configuration), the MCP server ``pushbench`` configured the way
their documentation describes (Claude Code: a ``.mcp.json`` passed with ``--mcp-config``
and ``--strict-mcp-config``; Codex CLI: ``[mcp_servers.pushbench]`` in ``$CODEX_HOME/config.toml``)
and a model endpoint: the loopback model server, or a real endpoint the user names.

Offline settings (model server): the environment is built from a short allow-list (no inherited
API keys), ``HTTP(S)_PROXY`` point at a closed loopback port with ``NO_PROXY`` for loopback only,
so any traffic that is not to the model server or between the client and its MCP server fails
at once; Claude Code also gets ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` and Codex has
update checks, analytics, plugins and apps switched off in its config.

Settings both clients need to be driven reliably (found by running them here):

- Claude Code 2.1.x defers MCP tool schemas behind a ``ToolSearch`` tool and may send its first
  request before MCP servers are connected; ``ENABLE_TOOL_SEARCH=false`` and
  ``MCP_CONNECTION_NONBLOCKING=false`` make the first request carry the PushBench tools.
- Codex CLI 0.17x adds MCP tools to a running turn only with its ``incremental_tools`` feature
  and starts servers in the background; ``incremental_tools = false`` and the server's
  ``startup_readiness = "catalog"`` with ``required = true`` make it wait for the tool list.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SERVER = "pushbench"
DEAD_PROXY = "http://127.0.0.1:9"  # discard port: nothing listens, connections fail at once
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "PYTHONPATH")


@dataclass
class Endpoint:
    """Where the client's model requests go: the model server (offline) or a real endpoint."""

    base_url: str  # e.g. http://127.0.0.1:PORT (no /v1)
    api_key: str = "pushbench-offline"
    model: str = "pushbench-policy"
    offline: bool = True


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    files: list[Path] = field(default_factory=list)


def find_binary(agent: str, explicit: str | None = None) -> str:
    """The client executable, as an absolute path: ``explicit``, ``$PUSHBENCH_CLAUDE`` /
    ``$PUSHBENCH_CODEX``, then PATH."""
    name = {"claude-code": "claude", "codex": "codex"}[agent]
    cand = explicit or os.environ.get(f"PUSHBENCH_{name.upper()}") or shutil.which(name)
    if not cand or not os.access(cand, os.X_OK):
        pkg = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}[name]
        raise FileNotFoundError(
            f"{name} not found (install it with npm install -g {pkg}, or "
            f"give --client-bin / $PUSHBENCH_{name.upper()})"
        )
    # Absolute, because the client is started with the episode workspace as its working
    # folder: a relative path given from elsewhere would no longer name the file there.
    return os.path.abspath(cand)


def client_version(binary: str) -> str:
    try:
        out = subprocess.run(
            [binary, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"},
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"
    return (out.stdout.strip().splitlines() or ["unknown"])[-1]


def server_command(
    task: str,
    seed: int,
    condition: str,
    agent: str,
    run_dir: Path,
    workspace: Path | None,
    controller: str,
    budget: int | None,
) -> list[str]:
    """``pushbench mcp`` for this episode (the same interpreter as this process); no
    ``--workspace`` when ``workspace`` is None (a task without a snapshot: DataOps)."""
    cmd = [
        sys.executable,
        "-m",
        "pushbench.cli",
        "mcp",
        "--task",
        task,
        "--seed",
        str(seed),
        "--condition",
        condition,
        "--agent",
        agent,
        "--controller",
        controller,
        "--run-dir",
        str(run_dir),
    ]
    cmd += ["--workspace", str(workspace)] if workspace is not None else []
    return cmd + (["--budget", str(budget)] if budget is not None else [])


def server_env() -> dict[str, str]:
    """What ``pushbench mcp`` needs from the environment: the built cache.

    Codex starts MCP servers with a short default environment (not the client's own), and the
    client's HOME is temporary, so without this the server would look for the cache in the
    temporary home and build every snapshot again.
    """
    from .. import paths

    return {"PUSHBENCH_HOME": str(paths.home())}


def _base_env(home: Path, endpoint: Endpoint) -> dict[str, str]:
    from .. import paths

    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(HOME=str(home), PUSHBENCH_HOME=str(paths.home()), NO_COLOR="1")
    if endpoint.offline:
        env.update(
            HTTP_PROXY=DEAD_PROXY,
            HTTPS_PROXY=DEAD_PROXY,
            ALL_PROXY=DEAD_PROXY,
            http_proxy=DEAD_PROXY,
            https_proxy=DEAD_PROXY,
            NO_PROXY="127.0.0.1,localhost,::1",
            no_proxy="127.0.0.1,localhost,::1",
        )
    return env


def claude_code(
    binary: str, ep: Path, prompt: str, server_cmd: list[str], endpoint: Endpoint
) -> Launch:
    agent_dir, home = ep / "agent", ep / "client-home"
    home.mkdir(parents=True, exist_ok=True)
    mcp = {
        "mcpServers": {
            SERVER: {
                "type": "stdio",
                "command": server_cmd[0],
                "args": server_cmd[1:],
                "env": server_env(),
            }
        }
    }
    cfg = agent_dir / ".mcp.json"
    cfg.write_text(json.dumps(mcp, indent=1) + "\n")
    tools = ",".join(
        f"mcp__{SERVER}__{t}" for t in ("search", "submit", "status", "final", "ask_user")
    )
    env = _base_env(home, endpoint)
    env.update(
        ANTHROPIC_BASE_URL=endpoint.base_url,
        ANTHROPIC_API_KEY=endpoint.api_key,
        ANTHROPIC_MODEL=endpoint.model,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        ENABLE_TOOL_SEARCH="false",
        MCP_CONNECTION_NONBLOCKING="false",
        MCP_TIMEOUT="120000",
        MCP_TOOL_TIMEOUT="300000",
    )
    if endpoint.offline:  # the model server answers its served names only: no haiku side calls
        env.update(
            ANTHROPIC_SMALL_FAST_MODEL=endpoint.model, ANTHROPIC_DEFAULT_HAIKU_MODEL=endpoint.model
        )
    argv = [
        binary,
        "-p",
        prompt,
        "--mcp-config",
        str(cfg),
        "--strict-mcp-config",
        "--tools",
        "Read,Grep,Glob",
        "--permission-mode",
        "dontAsk",
        "--allowedTools",
        tools + ",Read,Grep,Glob",
        "--output-format",
        "json",
    ]
    return Launch(argv, env, agent_dir, [cfg])


def _toml(value) -> str:
    return json.dumps(value)  # TOML basic strings and arrays of them read like JSON


def codex(binary: str, ep: Path, prompt: str, server_cmd: list[str], endpoint: Endpoint) -> Launch:
    agent_dir, home = ep / "agent", ep / "client-home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    lines = [
        f"model = {_toml(endpoint.model)}",
        'model_provider = "pushbench"',
        "check_for_update_on_startup = false",
        "",
        "[features]",
        "incremental_tools = false",
        "incremental_tools_legacy = false",
        "incremental_tools_legacy_gcp = false",
        "plugins = false",
        "apps = false",
        "remote_plugin = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[model_providers.pushbench]",
        'name = "PushBench model endpoint"',
        f"base_url = {_toml(endpoint.base_url.rstrip('/') + '/v1')}",
        'env_key = "PUSHBENCH_MODEL_KEY"',
        'wire_api = "responses"',
        "",
        f"[mcp_servers.{SERVER}]",
        f"command = {_toml(server_cmd[0])}",
        f"args = [{', '.join(_toml(a) for a in server_cmd[1:])}]",
        "startup_timeout_sec = 120",
        "tool_timeout_sec = 300",
        'startup_readiness = "catalog"',
        "required = true",
        'default_tools_approval_mode = "approve"',
        "",
        f"[mcp_servers.{SERVER}.env]",
        *[f"{k} = {_toml(v)}" for k, v in server_env().items()],
        "",
    ]
    cfg = codex_home / "config.toml"
    cfg.write_text("\n".join(lines))
    env = _base_env(home, endpoint)
    env.update(CODEX_HOME=str(codex_home), PUSHBENCH_MODEL_KEY=endpoint.api_key)
    argv = [
        binary,
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "read-only",
        "--cd",
        str(agent_dir),
        prompt,
    ]
    return Launch(argv, env, agent_dir, [cfg])


LAUNCHERS = {"claude-code": claude_code, "codex": codex}


def first_observation_in(prompt: str) -> dict:
    """The first observation JSON block that :func:`episode_prompt` appends to the prompt."""
    body = prompt.rsplit("```json\n", 1)[-1].split("\n```", 1)[0]
    return json.loads(body)


def letta(
    server_url: str,
    ep: Path,
    prompt: str,
    server_cmd: list[str],
    endpoint: Endpoint,
    max_turns: int | None = None,
    steps_per_turn: int | None = None,
    context_window: int | None = None,
    max_tokens: int | None = None,
) -> Launch:
    """The Letta client (:mod:`pushbench.blackbox.letta_agent`) for one episode: a config file
    in the episode folder and this interpreter running the driver against ``server_url``.
    The limits and the model settings default to :mod:`pushbench.policies.letta`'s (what the
    ``letta`` policy's estimate assumes); ``context_window`` (the tokens Letta fits its prompt
    into, compacting beyond) and ``max_tokens`` (per completion) are for a model smaller than
    those defaults assume, e.g. the local SmolLM2 with its 8,192-token context."""
    from ..policies import letta as L
    from .letta_agent import objective_of

    home = ep / "client-home"
    home.mkdir(parents=True, exist_ok=True)
    first = first_observation_in(prompt)
    tools = [
        t["function"]["name"]
        for t in (first.get("result") or {}).get("tools") or ()
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    ]
    mcp_env = server_env()
    if os.environ.get("PYTHONPATH"):  # Letta's stdio client passes a short default env only
        mcp_env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    cfg = {
        "url": server_url,
        "episode_dir": str(ep),
        "run_dir": str(ep / "run"),
        "agent_name": "pushbench-" + "-".join(ep.parts[-4:]).replace("/", "-"),
        "prompt": prompt,
        "objective": objective_of(first),
        "tools": tools,
        "mcp_command": server_cmd,
        "mcp_env": mcp_env,
        "max_turns": max_turns or L.MAX_TURNS,
        "steps_per_turn": steps_per_turn or L.STEPS_PER_TURN,
        "llm_config": {
            "model": endpoint.model,
            "model_endpoint_type": "openai",
            "model_endpoint": endpoint.base_url.rstrip("/") + "/v1",
            "context_window": context_window or L.CONTEXT_WINDOW,
            "put_inner_thoughts_in_kwargs": False,
            "temperature": 0.0,
            "max_tokens": max_tokens or L.MAX_TOKENS,
        },
    }
    (ep / "letta.json").unlink(missing_ok=True)  # a killed driver's summary would be stale
    path = ep / "letta-config.json"
    path.write_text(json.dumps(cfg, indent=1) + "\n")
    env = _base_env(home, endpoint)
    argv = [sys.executable, "-m", "pushbench.blackbox.letta_agent", str(path)]
    return Launch(argv, env, ep / "agent", [path])
