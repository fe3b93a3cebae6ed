"""``pushbench mcp``: one episode of a task served to a black-box agent as a stdio MCP server.

The environment, its hidden verifier and the chosen controller live in this process; the agent
only sees the tools the environment declares (names, descriptions and JSON schemas exactly as
``env.unwrapped.tool_schemas()`` gives them), the objective (server instructions, the ``task``
resource and the ``task`` prompt) and the observations of its own calls.

Per tool call: the MCP arguments become the JSON call ``{"tool": name, **arguments}`` for
``env.step`` and the observation JSON comes back as the tool result (``isError`` when the
observation says ``ok: false``; such calls cost a step, as in-process). Then ``episode.json``
(the full record) is replaced atomically and the step is appended to ``trace.jsonl`` with
``fsync``, before the result is sent, so a killed agent or server loses nothing that was
answered. After the episode ends every call gets an ``episode_over`` error and changes nothing.

Oversized arguments: a call whose JSON exceeds the environment's 64 KiB action limit reaches
``env.step`` as the first bytes of its text (the serialisation stops at the limit), so the
environment refuses it by size without parsing it. A JSON-RPC line over :data:`MAX_WIRE_LINE`
is never parsed at all: the stdin reader keeps only its head and tail, and forwards a small
stand-in request with the same id whose call the environment refuses the same way.

Every request is answered: lines the SDK cannot read (a lone surrogate, a huge integer, deep
nesting, not JSON) are screened first (:mod:`pushbench.blackbox.wire`): a ``tools/call`` whose id
and name can be read is refused by the environment (one step), anything else gets a JSON-RPC
error (``-32700`` / ``-32600``), and each such line is logged.

stdout carries protocol messages only (fd 1 points at stderr while serving; protocol lines go
through one writer); logs go to ``DIR/server.log`` and warnings to stderr.

Integrity (see :mod:`pushbench.blackbox.audit` and docs/blackbox.md): the run dir and its files are
private to the user (0700 / 0600) and ``main`` refuses to serve when the cache or the run dir is
readable by other users (``--allow-shared-cache`` downgrades that to a warning), and always
refuses a run dir another user could replace (:mod:`pushbench.blackbox.rundir_safety`). Trace
lines form a sha256 chain whose head ``episode.json`` records; ``run.json``, ``episode.json``
and every trace line are signed with the installation key (:mod:`pushbench.blackbox.signing`).
For families with a live workspace (DataOps-lite, SWE-lite) the server snapshots the workspace
after every call and records, before the next one, every change it did not make
(``blackbox.out_of_band_edits``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from .. import __version__, paths
from . import rundir_safety
from .session import TASK_URI, BlackBoxSession, SetupError
from .wire import BoundedStdin, LineWriter, ScreenedStdin, WireScreen, stand_in_line

log = logging.getLogger("pushbench.mcp")

RESOURCE_NOT_FOUND = -32002


# ----- the MCP server -----------------------------------------------------------------------
def build_server(session: BlackBoxSession) -> Server:
    """A low-level MCP ``Server`` exposing the session's tools, task resource and prompt."""
    tools = [
        types.Tool(name=f["name"], description=f["description"], input_schema=f["parameters"])
        for f in (t["function"] for t in session.tool_schemas)
    ]
    task_resource = types.Resource(
        uri=TASK_URI,
        name="task",
        title="PushBench task",
        description="The objective, target, budget and rules.",
        mime_type="text/markdown",
    )
    task_prompt = types.Prompt(
        name="task",
        title="PushBench task",
        description=f"The {session.condition} prompt for this run, followed by the task.",
    )

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            text, is_error = session.call(params.name, params.arguments)
        except Exception:  # a harness bug: say so without detail, keep the details in the log
            log.exception("internal error in tool call %r", params.name)
            text = json.dumps(
                {
                    "tool": params.name,
                    "ok": False,
                    "error_type": "internal",
                    "error": "internal error in the PushBench server (see its server.log)",
                }
            )
            is_error = True
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[task_resource])

    async def read_resource(ctx, params: types.ReadResourceRequestParams):
        if str(params.uri) != TASK_URI:
            raise MCPError(
                code=RESOURCE_NOT_FOUND,
                message=f"no resource {params.uri!r}; the only resource is {TASK_URI}",
            )
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=TASK_URI, mime_type="text/markdown", text=session.task_text()
                )
            ]
        )

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[task_prompt])

    async def get_prompt(ctx, params: types.GetPromptRequestParams):
        if params.name != "task":
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"no prompt {params.name!r}; the only prompt is 'task'",
            )
        return types.GetPromptResult(
            description=task_prompt.description,
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(text=session.prompt()))
            ],
        )

    return Server(
        "pushbench",
        version=__version__,
        title="PushBench",
        instructions=session.task_text(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def serve(session: BlackBoxSession) -> None:
    """Serve ``session`` over this process's stdin/stdout until the client closes stdin."""
    server = build_server(session)
    wire_fd, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # nothing else in this process may read the protocol stream
    os.close(devnull)
    os.dup2(2, 1)  # nor write to it: stray output goes to stderr (the SDK does the same)
    writer = LineWriter(wire_out)  # the one writer of protocol lines (SDK and wire screen)
    reader = ScreenedStdin(
        BoundedStdin(wire_fd, lambda h, t, n: stand_in_line(h, t, n, session)),
        WireScreen(session),
        writer,
    )
    try:
        # The SDK types its streams as anyio files; it only iterates lines of stdin and calls
        # write/flush on stdout, which these two wrappers provide (duck-typed on purpose).
        streams = stdio_server(stdin=reader, stdout=writer)  # type: ignore[arg-type]
        async with streams as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        os.dup2(wire_out, 1)
        os.close(wire_out)
        os.close(wire_fd)


def exposure_problem(run_dir: str | os.PathLike) -> str | None:
    """One line saying which of the cache and the run dir other users can read, and the fix.

    An agent running as another OS user must not read the cache (SWE-lite reference code) or
    the run dir (the record); ``None`` when both are private (a missing run dir is created so).
    """
    found = [
        (what, p)
        for what, p in (("the cache", paths.home()), ("the run dir", Path(run_dir).expanduser()))
        if p.is_dir() and paths.exposure(p)
    ]  # a non-folder is open()'s error to report
    if not found:
        return None
    modes = ", ".join(f"{what} {p} (mode {os.stat(p).st_mode & 0o777:04o})" for what, p in found)
    fix = " && ".join(f"chmod 700 {p}" for _, p in found)
    return f"other users can read {modes}; make it private: {fix}"


def main(task: str, run_dir: str | os.PathLike, **kwargs: Any) -> int:
    """Entry of ``pushbench mcp``: set up, serve until stdin closes, return an exit code."""
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(logging.Formatter("[pushbench mcp] %(levelname)s: %(message)s"))
    logging.getLogger().addHandler(stderr)
    allow_shared = bool(kwargs.pop("allow_shared_cache", False))
    unsafe = rundir_safety.mcp_problem(run_dir)  # never overridable: the record could be replaced
    if unsafe:
        print(f"[pushbench mcp] error: unsafe run dir: {unsafe}", file=sys.stderr, flush=True)
        return 2
    problem = exposure_problem(run_dir)
    if problem and not allow_shared:
        print(
            f"[pushbench mcp] error: {problem}; or pass --allow-shared-cache to serve anyway",
            file=sys.stderr,
            flush=True,
        )
        return 2
    if problem:
        log.warning("%s (serving anyway: --allow-shared-cache)", problem)
    session = BlackBoxSession(task, run_dir, **kwargs)
    try:
        try:
            session.open()
        except (SetupError, KeyError, ValueError, OSError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            print(f"[pushbench mcp] error: {msg}", file=sys.stderr, flush=True)
            return 2
        anyio.run(serve, session)
    finally:
        session.close()
    done = session.base.terminated_by if session.env is not None else None
    log.info(
        "server stopped after %d calls; episode %s",
        session.mcp_calls,
        f"ended by {done}" if done else "incomplete",
    )
    return 0
