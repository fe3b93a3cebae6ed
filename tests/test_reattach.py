"""``pushbench mcp`` re-attaching to its own run dir (health checks, reconnects, restarts).

Servers are real subprocesses driven by the official MCP SDK client over stdio; a restart after
``kill -9`` must continue the episode so that the final record equals an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("mcp", reason="the MCP server needs the optional 'mcp' extra")

import anyio
from mcp import Client
from test_mcp_server import _session, env_part, load, params, replay, server_args

from pushbench.blackbox import audit, signing
from pushbench.blackbox import evaluate as blackbox

CALLS = [
    ("search", {"query": "auth", "page": 1}),
    ("status", {}),
    ("search", {"query": "auth", "page": 2}),
    ("search", {"query": "session", "page": 1}),
    ("status", {}),
    ("final", {"reported_count": 0, "message": "stop"}),
]


async def _calls(run_dir, calls, *extra, kill_after=False) -> list[str]:
    out = []
    client = Client(params(run_dir, *extra))
    await client.__aenter__()
    try:
        for name, args in calls:
            out.append((await client.call_tool(name, args)).content[0].text)
        if kill_after:
            os.kill(json.loads((run_dir / "run.json").read_text())["pid"], signal.SIGKILL)
    finally:
        try:
            with anyio.fail_after(10):
                await client.__aexit__(None, None, None)
        except Exception:  # noqa: BLE001 - the killed server's transport fails to close
            pass
    return out


def test_kill_restart_continue_equals_an_uninterrupted_episode(tmp_path):
    run_dir, ws = tmp_path / "run", tmp_path / "agent" / "repo"
    first = anyio.run(lambda: _calls(run_dir, CALLS[:3], "--workspace", str(ws), kill_after=True))
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    (ws / "marker-by-agent.txt").write_text("the agent's own file")  # the copy is kept as is
    rest = anyio.run(_calls, run_dir, CALLS[3:], "--workspace", str(ws))
    rec, trace = load(run_dir)
    assert env_part(rec) == env_part(replay(CALLS))  # as if never interrupted
    assert [t["observation"] for t in trace] == first + rest
    assert rec["terminated_by"] == "final" and rec["steps_used"] == len(CALLS)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["run_id"] == run_id and len(run["reattached"]) == 1
    assert run["reattached"][0]["replayed_steps"] == 3
    assert (ws / "marker-by-agent.txt").exists()
    line = blackbox.records_from_run_dirs([run_dir])[0]
    assert line["tampered"] is False, line["tamper_reasons"]
    assert not line.get("incomplete")


def test_connect_without_calls_then_the_agent_run(tmp_path):
    """A health check (connect, list tools, leave) must not use up the episode."""
    run_dir = tmp_path / "run"

    async def health():
        async with Client(params(run_dir)) as c:
            assert {t.name for t in (await c.list_tools()).tools} >= {"search", "final"}

    anyio.run(health)
    anyio.run(health)  # a second check also connects
    out = anyio.run(_calls, run_dir, CALLS)
    rec, _ = load(run_dir)
    assert env_part(rec) == env_part(replay(CALLS)) and len(out) == len(CALLS)
    assert len(json.loads((run_dir / "run.json").read_text())["reattached"]) == 2
    assert blackbox.records_from_run_dirs([run_dir])[0]["tampered"] is False


def test_other_configuration_refused_and_overwrite_discards(tmp_path):
    run_dir = tmp_path / "run"
    anyio.run(_calls, run_dir, CALLS[:2])
    for extra, what in (
        (["--seed", "2"], "seed 0 there, 2 now"),
        (["--condition", "checklist"], "condition 'default' there"),
        (["--agent", "codex"], "agent None there"),
        (["--budget", "7"], "budget None there, 7 now"),
    ):
        p = subprocess.run(
            [sys.executable, *server_args(run_dir, *extra)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 2 and what in p.stderr, p.stderr
    before = json.loads((run_dir / "run.json").read_text())["run_id"]
    anyio.run(_calls, run_dir, CALLS[:1], "--seed", "2", "--overwrite")
    rec, trace = load(run_dir)
    assert json.loads((run_dir / "run.json").read_text())["run_id"] != before
    assert rec["steps_used"] == 1 and len(trace) == 1 and rec["seed"] == 2


def _rechain(run_dir, edit):
    """Apply ``edit`` to the parsed trace lines and rebuild a consistent, signed digest chain
    (with this installation's key: a trace re-attach must accept as its own)."""
    key = signing.installation_key()
    run = json.loads((run_dir / "run.json").read_text())
    lines = [json.loads(x) for x in (run_dir / "trace.jsonl").read_text().splitlines()]
    edit(lines)
    head, out = signing.genesis(run), b""
    for ln in lines:
        ln.pop("sig", None)
        ln["prev"] = head
        data = signing.sign_line(
            key, json.dumps(ln, ensure_ascii=True, separators=(",", ":")).encode()
        )
        head = audit.line_digest(data)
        out += data
    (run_dir / "trace.jsonl").write_bytes(out)


def test_replay_that_disagrees_is_refused_naming_the_step(tmp_path):
    from pushbench.blackbox.session import SetupError

    run_dir = tmp_path / "run"
    with _session(run_dir) as s:
        for name, args in CALLS[:4]:
            s.call(name, args)

    def edit(lines):
        lines[2]["observation"] = lines[2]["observation"].replace('"ok":true', '"ok":false')

    _rechain(run_dir, edit)
    s = _session(run_dir)
    with pytest.raises(SetupError, match=r"replaying step 3 \(search\) gave a different"):
        s.open()
    s.close()
    (run_dir / "trace.jsonl").write_bytes(b"{}\n")  # a broken chain is refused too
    s = _session(run_dir)
    with pytest.raises(SetupError, match="trace chain is broken at line 1"):
        s.open()
    s.close()


def test_workspace_recognised_refused_or_prepared_again(tmp_path):
    from pushbench.blackbox.session import SetupError

    run_dir, ws, other = tmp_path / "run", tmp_path / "ws", tmp_path / "other"
    with _session(run_dir, workspace=ws) as s:
        s.call(*CALLS[0])
    marker = json.loads((run_dir / "workspace.json").read_text())
    assert marker["path"] == str(ws) and marker["files"] > 10
    with _session(run_dir, workspace=ws) as s:  # its own copy: kept
        assert s.base.steps_used == 1
    other.mkdir()
    (other / "x.py").write_text("x = 1\n")
    s = _session(run_dir, workspace=other)  # someone else's folder: refused
    with pytest.raises(SetupError, match="not the copy this run made"):
        s.open()
    s.close()
    import shutil

    shutil.rmtree(ws)  # gone: prepared again
    with _session(run_dir, workspace=ws) as s:
        assert s.base.steps_used == 1 and any(ws.rglob("*.py"))


def test_torn_last_trace_line_is_cut_and_the_run_continues(tmp_path):
    run_dir = tmp_path / "run"
    with _session(run_dir) as s:
        for name, args in CALLS[:2]:
            s.call(name, args)
    with open(run_dir / "trace.jsonl", "ab") as f:
        f.write(b'{"index":3,"step":3,"ok":tr')  # killed mid-write of a third line
    with _session(run_dir) as s:
        assert s.base.steps_used == 2
        for name, args in CALLS[2:]:
            s.call(name, args)
    rec, _ = load(run_dir)
    assert env_part(rec) == env_part(replay(CALLS))
    assert blackbox.records_from_run_dirs([run_dir])[0]["tampered"] is False


def test_oversized_call_is_replayed_by_its_size(tmp_path):
    """A call refused by its size alone (its text is not kept whole) still replays."""
    from test_mcp_server import MAX_ACTION_BYTES  # the limit the env applies

    run_dir = tmp_path / "run"
    calls = [("search", {"query": "x" * (MAX_ACTION_BYTES + 10)}), ("status", {})]
    with _session(run_dir) as s:
        for name, args in calls[:1]:
            text, err = s.call(name, args)
        assert err and "limit" in text
    with _session(run_dir) as s:
        assert s.base.steps_used == 1
        s.call(*calls[1])
    rec, trace = load(run_dir)
    assert rec["steps_used"] == 2 and len(trace) == 2
    assert blackbox.records_from_run_dirs([run_dir])[0]["tampered"] is False
