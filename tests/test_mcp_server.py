"""The black-box MCP server (``pushbench mcp``) through a real SDK client over stdio.

Every server here is a subprocess running ``python -m pushbench.cli mcp``; the client is the
official ``mcp`` SDK's ``Client``. The record the server writes is compared with the record the
in-process environment produces for the same calls.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP server needs the optional 'mcp' extra")

import anyio
from mcp import Client, StdioServerParameters

import pushbench
from pushbench.blackbox import evaluate as blackbox
from pushbench.envs.spaces import MAX_ACTION_BYTES

TASK = "RepoScan-requests-docstring-N10"
INSTANCE = "requests-docstring"
IDENT = re.compile(r"[A-Za-z0-9_.\-/]+\.py::[A-Za-z_][A-Za-z0-9_.]*")
BLACKBOX_ONLY = ("policy", "simulated", "key", "condition", "blackbox", "signature")

try:
    import pushbench.controllers

    HAVE_CONTROLLERS = True
except ImportError:  # pragma: no cover - the controllers package is optional here
    HAVE_CONTROLLERS = False
DEFAULT_CONTROLLER = "standard" if HAVE_CONTROLLERS else None


# ----- helpers ------------------------------------------------------------------------------
def server_args(run_dir: Path, *extra: str, task: str = TASK) -> list[str]:
    return ["-m", "pushbench.cli", "mcp", "--task", task, "--run-dir", str(run_dir), *extra]


def params(
    run_dir: Path,
    *extra: str,
    task: str = TASK,
    wire_log: Path | None = None,
    tmp: Path | None = None,
) -> StdioServerParameters:
    env = {k: os.environ[k] for k in ("PUSHBENCH_HOME", "PYTHONPATH") if k in os.environ}
    args = server_args(run_dir, *extra, task=task)
    if wire_log is None:
        return StdioServerParameters(command=sys.executable, args=args, env=env)
    tee = (tmp or run_dir.parent) / "tee_server.py"
    tee.write_text(TEE)
    return StdioServerParameters(
        command=sys.executable, args=[str(tee), str(wire_log), sys.executable, *args], env=env
    )


# Runs the server and copies every byte it writes to stdout into a file (the wire capture).
TEE = """
import subprocess, sys
log = open(sys.argv[1], "wb")
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE)
while True:
    chunk = proc.stdout.read1(1 << 16)
    if not chunk:
        break
    log.write(chunk); log.flush()
    sys.stdout.buffer.write(chunk); sys.stdout.buffer.flush()
sys.exit(proc.wait())
"""


def replay(
    calls: list[tuple[str, dict]],
    *,
    task: str = TASK,
    seed: int = 0,
    controller: str | None = DEFAULT_CONTROLLER,
    budget: int | None = None,
) -> dict:
    """The in-process record for the same calls (stopping where the episode ends)."""
    env = pushbench.make(task, controller=controller, **({"budget": budget} if budget else {}))
    env.reset(seed=seed)
    for name, args in calls:
        if env.unwrapped.terminated_by is not None:
            break
        env.step({"tool": name, **args})
    rec = env.get_wrapper_attr("episode_record")()
    env.close()
    return json.loads(json.dumps(rec))


def env_part(record: dict) -> dict:
    return {
        k: v
        for k, v in record.items()
        if k not in BLACKBOX_ONLY and not (DEFAULT_CONTROLLER is None and k == "controller")
    }


def load(run_dir: Path) -> tuple[dict, list[dict]]:
    rec = json.loads((run_dir / "episode.json").read_text())
    trace = [json.loads(line) for line in (run_dir / "trace.jsonl").read_text().splitlines()]
    return rec, trace


def obs_of(result) -> dict:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


def valid_set() -> frozenset[str]:
    from pushbench.families.reposcan.env import _valid_set

    return _valid_set(INSTANCE)


async def scripted_agent(client, log: list, stop_at_target: bool = True) -> None:
    """Search, submit unseen ids, check status and end with final once the target is met."""
    submitted: list[str] = []
    queries = ["", "request", "session", "get", "auth", "cookie", "adapter", "url", "header"]
    done = False
    for q in queries:
        for page in (1, 2, 3):
            res = obs_of(await client.call_tool("search", {"query": q, "page": page}))
            log.append(("search", {"query": q, "page": page}))
            ids = [h["id"] for h in res["result"]["results"] if h["id"] not in submitted]
            if ids:
                batch = ids[:10]
                sub = obs_of(await client.call_tool("submit", {"ids": batch}))
                log.append(("submit", {"ids": batch}))
                submitted += batch
                if sub["result"]["valid_count"] >= sub["result"]["target"] and stop_at_target:
                    done = True
                    break
        if done:
            break
    status = obs_of(await client.call_tool("status", {}))
    log.append(("status", {}))
    n = status["result"]["valid_count"]
    await client.call_tool("final", {"reported_count": n, "message": "done"})
    log.append(("final", {"reported_count": n, "message": "done"}))


# ----- the main path: tools, resource, prompt, a short episode ----------------------------
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_episode_over_mcp_matches_in_process(tmp_path, mode):
    run_dir = tmp_path / "run"
    env = pushbench.make(TASK)
    env.reset(seed=0)
    schemas = {t["function"]["name"]: t["function"] for t in env.unwrapped.tool_schemas()}
    objective = json.loads(env.reset(seed=0)[0])["result"]["objective"]
    calls = []

    async def main():
        async with Client(params(run_dir, "--seed", "0"), mode=mode) as c:
            assert objective in (c.instructions or "")
            tools = (await c.list_tools()).tools
            assert [t.name for t in tools] == list(schemas)
            for t in tools:
                assert t.description == schemas[t.name]["description"]
                assert t.input_schema == schemas[t.name]["parameters"]
            res = await c.list_resources()
            assert [str(r.uri) for r in res.resources] == ["pushbench://task"]
            text = (await c.read_resource("pushbench://task")).contents[0].text
            assert objective in text and "Budget:" in text
            prompt = (await c.get_prompt("task")).messages[0].content.text
            assert prompt.startswith(blackbox.PROMPTS["default"]) and objective in prompt

            async def call(name, args):
                calls.append((name, args))
                return await c.call_tool(name, args)

            hits = obs_of(await call("search", {"query": "session", "page": 1}))
            ids = [h["id"] for h in hits["result"]["results"]]
            first = await call("submit", {"ids": ids[:5]})
            assert not first.is_error
            verdicts = obs_of(first)["result"]["verdicts"]
            assert [v["id"] for v in verdicts] == ids[:5]
            dup = obs_of(await call("submit", {"ids": ids[:2]}))
            assert {v["verdict"] for v in dup["result"]["verdicts"]} == {"duplicate"}
            # malformed arguments: an MCP tool error that costs a step
            bad = await call("search", {"query": 5})
            assert bad.is_error and obs_of(bad)["error_type"] == "bad_arguments"
            extra = await call("status", {"verbose": True})
            assert extra.is_error and obs_of(extra)["error_type"] == "bad_arguments"
            unknown = await call("delete_everything", {})
            assert unknown.is_error and obs_of(unknown)["error_type"] == "unknown_tool"
            st = obs_of(await call("status", {}))
            assert st["result"]["steps_used"] == 7
            fin = await call("final", {"reported_count": 3, "message": "stopping"})
            assert not fin.is_error
            # after the end: a clear error, nothing changes
            after = await c.call_tool("status", {})
            assert after.is_error
            assert obs_of(after)["error_type"] == "episode_over"
            assert "episode is over" in obs_of(after)["error"]
            again = await c.call_tool("submit", {"ids": ids[5:7]})
            assert obs_of(again)["error_type"] == "episode_over"

    run(main)
    rec, trace = load(run_dir)
    assert env_part(rec) == env_part(replay(calls))
    assert rec["steps_used"] == 8 and rec["terminated_by"] == "final"
    assert rec["metrics"]["invalid_actions"] == 3
    assert rec["policy"] == {
        "name": "blackbox-mcp:default",
        "label": "blackbox-mcp:default",
        "simulated": False,
        "seed": 0,
        "params": {"transport": "mcp-stdio", "condition": "default", "agent": None},
    }
    assert rec["simulated"] is False and rec["condition"] == "default" and len(rec["key"]) == 16
    assert rec["controller"]["name"] == (DEFAULT_CONTROLLER or "none")
    assert rec["blackbox"]["mcp_calls"] == 10 and rec["blackbox"]["after_end_calls"] == 2
    assert [t["step"] for t in trace] == list(range(1, 9)) + [None, None]
    # strict=False: the two after-end calls are in the trace, not in calls
    assert all(t["proposed"]["tool"] == name for t, (name, _) in zip(trace, calls, strict=False))
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["task"] == TASK and run_json["seed"] == 0
    assert run_json["versions"]["pushbench"] == pushbench.__version__
    assert run_json["versions"]["mcp"].startswith("2.")
    assert "server.log" in os.listdir(run_dir)


@pytest.mark.skipif(not HAVE_CONTROLLERS, reason="pushbench.controllers is not importable")
@pytest.mark.parametrize("controller", ["verifier_gated", "stateqgp"])
def test_controller_inside_the_server(tmp_path, controller):
    run_dir = tmp_path / "run"
    calls = [
        ("search", {"query": "session", "page": 1}),
        ("search", {"query": "session", "page": 1}),
        ("final", {"reported_count": 10}),
        ("status", {}),
    ]

    async def main():
        async with Client(params(run_dir, "--controller", controller)) as c:
            outs = [obs_of(await c.call_tool(n, a)) for n, a in calls]
        # the completion gate turns the early final into a status: the episode goes on
        assert outs[2]["tool"] == "status" and outs[3]["ok"]
        return outs

    run(main)
    rec, _ = load(run_dir)
    assert rec["terminated_by"] is None and rec["steps_used"] == 4
    assert rec["controller"]["name"] == controller
    assert rec["metrics"]["blocked_completions"] == 1
    assert env_part(rec) == env_part(replay(calls, controller=controller))


# ----- version 2 feedback over the wire (issue 27) ---------------------------------------------
def test_feedback_of_version_2_over_mcp(tmp_path):
    """The answer schema offers an array and an array answer is recorded; a wrong shape is a
    tool error quoting the form; a keyword search says what it ignored (real MCP SDK)."""
    dataops, reposcan = "DataOps-b0-N3", TASK
    calls: list = []

    async def main():
        async with Client(params(tmp_path / "d", task=dataops)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            forms = tools["answer"].input_schema["properties"]["value"]["anyOf"]
            assert {
                "type": "array",
                "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            } in forms
            unit = obs_of(await c.call_tool("inspect", {"unit_id": "u01"}))["result"]
            assert unit["answer_type"] == "list"
            calls.append(("inspect", {"unit_id": "u01"}))
            for value in (["4", 17], "4;17"):
                calls.append(("answer", {"unit_id": "u01", "value": value}))
                res = await c.call_tool("answer", calls[-1][1])
                if isinstance(value, list):
                    assert not res.is_error and obs_of(res)["result"]["recorded"] == "4,17"
                else:
                    assert res.is_error and obs_of(res)["error_type"] == "answer_shape"
                    assert 'e.g. "4,17,102"' in obs_of(res)["error"]
        async with Client(params(tmp_path / "r", task=reposcan)) as c:
            res = obs_of(await c.call_tool("search", {"query": "raise return assert"}))
            assert res["result"]["ignored"]["terms"] == ["raise", "return", "assert"]

    run(main)
    rec, _ = load(tmp_path / "d")
    assert env_part(rec) == env_part(replay(calls, task=dataops))


# ----- oversized arguments ----------------------------------------------------------------
def test_oversized_argument_is_refused_and_costs_a_step(tmp_path):
    run_dir = tmp_path / "run"

    async def main():
        async with Client(params(run_dir)) as c:
            # over the env's 64 KiB action limit, under the 1 MiB wire limit
            big = await c.call_tool("search", {"query": "x" * (MAX_ACTION_BYTES + 10)})
            assert big.is_error and obs_of(big)["error_type"] == "too_large"
            # over the wire limit: the line is never parsed, a stand-in call is refused
            huge = await c.call_tool("submit", {"ids": ["a.py::f" * 40] * 10_000})
            assert huge.is_error and obs_of(huge)["error_type"] == "too_large"
            st = obs_of(await c.call_tool("status", {}))
            assert st["result"]["steps_used"] == 3

    run(main)
    rec, trace = load(run_dir)
    assert [c["error_type"] for c in rec["calls"][:2]] == ["too_large", "too_large"]
    assert trace[0]["proposed"]["oversized"] and trace[1]["proposed"]["wire_bytes"] > 1 << 20
    assert all(len(json.dumps(t)) < 20_000 for t in trace)  # the huge text is not stored


def _raw_server(run_dir: Path) -> subprocess.Popen:
    env = dict(os.environ)
    return subprocess.Popen(
        [sys.executable, *server_args(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _send(proc, obj_or_text) -> None:
    text = obj_or_text if isinstance(obj_or_text, str) else json.dumps(obj_or_text)
    proc.stdin.write(text.encode() + b"\n")
    proc.stdin.flush()


def _recv(proc) -> dict:
    line = proc.stdout.readline()
    assert line, proc.stderr.read().decode()[-2000:]
    return json.loads(line)


@pytest.mark.timeout(120)
def test_overlong_wire_lines_get_answers_by_id(tmp_path):
    """Hand-written JSON-RPC (handshake era): both key orders of an overlong request."""
    run_dir = tmp_path / "run"
    proc = _raw_server(run_dir)
    try:
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            },
        )
        assert _recv(proc)["result"]["serverInfo"]["name"] == "pushbench"
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        # Python/Rust order: id first
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "q" * 2_000_000}},
            },
        )
        r = _recv(proc)
        assert r["id"] == 7 and r["result"]["isError"]
        assert json.loads(r["result"]["content"][0]["text"])["error_type"] == "too_large"
        # TypeScript order: method and params first, id last
        ts = (
            '{"method":"tools/call","params":{"name":"submit","arguments":{"ids":['
            + ",".join(['"x.py::f"'] * 300_000)
            + ']}},"jsonrpc":"2.0","id":"req-8"}'
        )
        _send(proc, ts)
        r = _recv(proc)
        assert r["id"] == "req-8" and r["result"]["isError"]
        # another method: a JSON-RPC error for that id, no step
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "resources/read",
                "params": {"uri": "u" * 1_500_000},
            },
        )
        r = _recv(proc)
        assert r["id"] == 9 and "error" in r
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 10,
                "method": "tools/call",
                "params": {"name": "status", "arguments": {}},
            },
        )
        r = _recv(proc)
        assert r["id"] == 10
        assert json.loads(r["result"]["content"][0]["text"])["result"]["steps_used"] == 3
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    rec, trace = load(run_dir)
    assert [c["tool"] for c in rec["calls"]] == [None, None, "status"]
    assert [t["proposed"]["tool"] for t in trace] == ["search", "submit", "status"]


def test_bounded_stdin_and_stand_in_lines():
    from pushbench.blackbox.wire import BoundedStdin, stand_in_line

    class FakeSession:
        sentinel = "__s"

        def stash_oversized(self, head, size):
            self.kept = (len(head), size)
            return "tok"

    got = []
    reader = BoundedStdin(
        -1, lambda h, t, n: got.append((h[:20], t[-20:], n)) or "stand-in", limit=100
    )
    reader.feed(b'{"a":1}\n{"b":')
    reader.feed(b"2}\n" + b"x" * 250)
    reader.feed(b"y" * 50 + b'\n\n{"c":3}\n')
    assert list(reader._lines) == ['{"a":1}', '{"b":2}', "stand-in", '{"c":3}']
    assert got[0][2] == 300 and got[0][1].endswith("y" * 20)

    s = FakeSession()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "x": {"name": "client"}}
    head = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"_meta": meta, "name": "search", "arguments": {"query": "q"}},
        }
    )
    out = json.loads(stand_in_line(head[:-10], head[-30:], 10**7, s))
    assert out["id"] == 3 and out["params"]["name"] == "search"
    assert out["params"]["_meta"] == meta and out["params"]["arguments"] == {"__s": "tok"}
    assert stand_in_line('{"params": {"arguments": [1, 2', "3]}}", 10**7, s) is None


# ----- durability: kill the server midway ---------------------------------------------------
def test_kill_server_midway_loses_no_answered_call(tmp_path):
    run_dir = tmp_path / "run"
    received: list[str] = []
    k = 6

    async def main():
        client = Client(params(run_dir))
        await client.__aenter__()
        try:
            for i in range(k):
                name, args = [("search", {"query": "auth", "page": i + 1}), ("status", {})][i % 2]
                received.append((await client.call_tool(name, args)).content[0].text)
            pid = json.loads((run_dir / "run.json").read_text())["pid"]
            os.kill(pid, signal.SIGKILL)
            # the killed server surfaces as a transport error, a closed stream or a timeout,
            # by timing: any exception is the contract here
            with pytest.raises(Exception):  # noqa: B017 - see above
                with anyio.fail_after(10):
                    await client.call_tool("status", {})
        finally:
            try:
                with anyio.fail_after(10):
                    await client.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - the killed server's transport fails to close
                pass

    run(main)
    rec, trace = load(run_dir)
    assert rec["steps_used"] == k and len(rec["calls"]) == k
    assert rec["terminated_by"] is None
    assert [t["observation"] for t in trace] == received
    # the evaluation reports it as incomplete, with its verified progress
    line = blackbox.records_from_run_dirs([run_dir])[0]
    assert line["incomplete"] and line["terminated_by"] is None
    assert line["metrics"]["steps_used"] == k and "calls" not in line
    assert line["tampered"] is False, line["tamper_reasons"]  # a kill is not tampering


# ----- the leak scan --------------------------------------------------------------------------
def _strip_allowed(obj):
    """Remove the two places identifiers may legitimately appear: search hits and verdicts.

    Tool results carry the observation as JSON text; it is decoded and stripped too.
    """
    if isinstance(obj, dict):
        return {k: _strip_allowed(v) for k, v in obj.items() if k not in ("results", "verdicts")}
    if isinstance(obj, list):
        return [_strip_allowed(v) for v in obj]
    if isinstance(obj, str) and obj.startswith("{"):
        try:
            return _strip_allowed(json.loads(obj))
        except ValueError:
            return obj
    return obj


def _files_text(root: Path) -> dict[Path, str]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            out[p] = p.read_bytes().decode("utf-8", "replace")
    return out


@pytest.mark.timeout(120)
def test_leak_scan_full_episode(tmp_path):
    from pushbench import paths
    from pushbench.tasks import instance_config

    run_dir, ws, wire = tmp_path / "run", tmp_path / "ws", tmp_path / "wire.bin"
    valid = valid_set()
    digest = instance_config("reposcan", INSTANCE)["valid_sha256"]
    home = paths.home()
    home_before = {
        p: p.stat().st_mtime for p in home.rglob("*") if p.is_file() and "locks" not in p.parts
    }
    calls: list = []

    async def main():
        async with Client(
            params(run_dir, "--workspace", str(ws), wire_log=wire, tmp=tmp_path), mode="legacy"
        ) as c:
            await c.list_tools()
            await c.list_resources()
            await c.read_resource("pushbench://task")
            await c.list_prompts()
            await c.get_prompt("task")
            await c.call_tool("search", {"query": 5})  # an error text
            await c.call_tool("nope", {})  # another one
            await scripted_agent(c, calls)
            await c.call_tool("status", {})  # episode-over text

    run(main)
    rec, _ = load(run_dir)
    assert rec["success"] and rec["terminated_by"] == "final"

    # 1. every message the client received
    submitted: set[str] = set()
    shown: set[str] = set()
    pending = iter([a for n, a in calls])
    messages = [json.loads(line) for line in wire.read_bytes().splitlines() if line.strip()]
    assert messages
    raw = wire.read_text()
    assert digest not in raw and "valid_sha256" not in raw
    for msg in messages:
        body = msg.get("result") or msg.get("error") or {}
        texts = [c.get("text", "") for c in body.get("content", [])] if "content" in body else []
        for text in texts:
            obs = json.loads(text)
            result = obs.get("result") or {}
            if obs.get("tool") == "search" and obs.get("ok"):
                for hit in result["results"]:
                    assert set(hit) <= {"id", "kind", "signature", "location", "snippet"}
                    shown.add(hit["id"])
            if obs.get("tool") == "submit" and obs.get("ok"):
                args = next(a for a in pending if "ids" in a)
                ids = [v["id"] for v in result["verdicts"]]
                assert ids == args["ids"]  # a verdict only for ids of this very call
                submitted.update(ids)
        # outside search hits and verdicts no valid identifier appears anywhere
        rest = json.dumps(_strip_allowed(msg))
        assert not (set(IDENT.findall(rest)) & valid), msg
    assert set(IDENT.findall(raw)) & valid <= shown | submitted
    assert submitted

    # 2. the workspace: a clean copy of the snapshot, nothing that reveals validity
    files = _files_text(ws)
    assert files
    names = {p.name for p in files}
    assert ".pushbench-snapshot.json" not in names
    assert not any(
        ".git" in p.relative_to(ws).parts or p.suffix in (".pyc", ".gz") or "__pycache__" in p.parts
        for p in files
    )
    for p, text in files.items():
        assert digest not in text, p
        assert len(set(IDENT.findall(text)) & valid) <= 0.5 * len(valid), p
    assert sum(len(set(IDENT.findall(t)) & valid) for t in files.values()) < 10

    # 3. the run directory: only what the client saw, never the valid set or its digest
    for p, text in _files_text(run_dir).items():
        assert digest not in text, p
        assert set(IDENT.findall(text)) & valid <= shown | submitted, p

    # 4. the cache: the server wrote nothing new there
    home_after = {
        p: p.stat().st_mtime for p in home.rglob("*") if p.is_file() and "locks" not in p.parts
    }
    assert home_after == home_before


# ----- isolation ----------------------------------------------------------------------------
def test_two_servers_at_once_do_not_interfere(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    task_b = "RepoScan-requests-returns-N10"
    seqs = {
        "a": [("search", {"query": "session", "page": p}) for p in (1, 2)] + [("status", {})],
        "b": [
            ("search", {"query": "get", "page": 1}),
            ("status", {}),
            ("search", {"query": "get", "page": 2}),
            ("final", {"reported_count": 0}),
        ],
    }

    async def drive(name, run_dir, task):
        async with Client(params(run_dir, "--seed", "3", task=task)) as c:
            for tool, args in seqs[name]:
                await c.call_tool(tool, args)
                await anyio.sleep(0.01)

    async def main():
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, "a", a_dir, TASK)
            tg.start_soon(drive, "b", b_dir, task_b)

    run(main)
    rec_a, _ = load(a_dir)
    rec_b, _ = load(b_dir)
    assert env_part(rec_a) == env_part(replay(seqs["a"], seed=3))
    assert env_part(rec_b) == env_part(replay(seqs["b"], task=task_b, seed=3))


def test_run_dir_in_use_or_reused_is_refused(tmp_path):
    run_dir = tmp_path / "run"

    async def main():
        async with Client(params(run_dir)) as c:
            await c.call_tool("status", {})
            second = subprocess.run(
                [sys.executable, *server_args(run_dir)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode == 2 and "another pushbench mcp server" in second.stderr
            assert second.stdout == ""

    run(main)
    # the same configuration re-attaches (tests/test_reattach.py); another one is refused
    again = subprocess.run(
        [sys.executable, *server_args(run_dir, "--seed", "1")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        again.returncode == 2
        and "already holds a run of another configuration" in again.stderr
        and "seed 0 there, 1 now" in again.stderr
    )
    assert again.stdout == ""


# ----- in-process pieces: workspace rules, evaluation -----------------------------------------
def _session(run_dir, **kw):
    from pushbench.blackbox.session import BlackBoxSession

    kw.setdefault("controller", DEFAULT_CONTROLLER)
    return BlackBoxSession(TASK, run_dir, argv=["test"], **kw)


def test_workspace_must_be_fresh_and_apart_from_the_run_dir(tmp_path):
    from pushbench.blackbox.session import SetupError

    with pytest.raises(SetupError, match="must not contain each other"):
        _session(tmp_path / "ws" / "run", workspace=tmp_path / "ws").open()
    with pytest.raises(SetupError, match="must not contain each other"):
        _session(tmp_path / "run", workspace=tmp_path / "run" / "ws").open()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f.txt").write_text("x")
    s = _session(tmp_path / "run2", workspace=tmp_path / "busy")
    with pytest.raises(SetupError, match="not an empty directory"):
        s.open()
    s.close()


def test_session_edge_cases_in_process(tmp_path):
    with _session(tmp_path / "run", budget=3) as s:
        # an argument named "tool" cannot rename the call: it is an unknown argument
        text, err = s.call("status", {"tool": "final"})
        assert err and json.loads(text)["error_type"] == "bad_arguments"
        assert "tool (argument)" in json.loads(text)["error"]
        text, err = s.call("status", None)
        assert not err and json.loads(text)["result"]["steps_used"] == 2
        s.call("search", {"query": "x", "page": 1})  # the last step of the budget
        text, err = s.call("status", {})
        assert err and json.loads(text)["error_type"] == "episode_over"
        assert "budget" in json.loads(text)["error"]
        rec = s.record()
    assert rec["terminated_by"] == "budget" and rec["steps_used"] == 3
    assert rec["blackbox"]["after_end_calls"] == 1 and rec["blackbox"]["complete"]


def _episode(run_dir, calls, **kw):
    with _session(run_dir, **kw) as s:
        for name, args in calls:
            s.call(name, args)


def test_evaluate_run_dirs_into_report(tmp_path):
    from typer.testing import CliRunner

    from pushbench.cli import app

    calls = [("search", {"query": "session", "page": 1})]
    env = pushbench.make(TASK)
    env.reset(seed=0)
    res = json.loads(env.step({"tool": "search", "query": "session"})[0])
    session_ids = [h["id"] for h in res["result"]["results"]]
    full = calls + [
        ("submit", {"ids": session_ids}),
        ("status", {}),
        ("final", {"reported_count": 4}),
    ]
    _episode(tmp_path / "d0", full, condition="default", agent="fake-agent")
    _episode(
        tmp_path / "c0",
        full[:2] + [("submit", {"ids": session_ids[:3]})] + full[2:],
        condition="checklist",
        agent="fake-agent",
    )
    _episode(tmp_path / "inc", calls, condition="default", agent="fake-agent", seed=1)

    # a tampered stored summary is not trusted
    honest = (tmp_path / "d0" / "episode.json").read_text()
    ep = json.loads(honest)
    truth = ep["valid_count"]
    ep["valid_count"], ep["success"] = 99, True
    ep["metrics"]["valid_count"] = 99
    (tmp_path / "d0" / "episode.json").write_text(json.dumps(ep))
    with pytest.warns(UserWarning, match="recomputed"):
        lines = blackbox.records_from_run_dirs([tmp_path / "d0"])
    assert lines[0]["valid_count"] == truth and lines[0]["metrics"]["valid_count"] == truth
    assert (
        lines[0]["tampered"]
        and f"stored valid_count 99, replay {truth}" in lines[0]["tamper_reasons"]
    )
    # the report leaves tampered runs out of every metric: restore the honest record
    (tmp_path / "d0" / "episode.json").write_text(honest)

    out = tmp_path / "report"
    result = CliRunner().invoke(
        app,
        [
            "evaluate",
            str(tmp_path / "d0"),
            str(tmp_path / "c0"),
            str(tmp_path / "inc"),
            "--out",
            str(out),
            "--resamples",
            "200",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all("calls" not in x for x in lines)
    by_policy = {(x["policy"]["name"], x["seed"]): x for x in lines}
    assert set(by_policy) == {
        ("blackbox-mcp:fake-agent:default", 0),
        ("blackbox-mcp:fake-agent:checklist", 0),
        ("blackbox-mcp:fake-agent:default", 1),
    }
    inc = by_policy[("blackbox-mcp:fake-agent:default", 1)]
    assert inc["incomplete"] and inc["terminated_by"] is None
    assert by_policy[("blackbox-mcp:fake-agent:checklist", 0)]["condition"] == "checklist"
    assert all("steps" not in x["controller"] for x in lines)
    assert (out / "summary.csv").is_file() and (out / "paired_deltas.csv").is_file()
    deltas = (out / "condition_deltas.csv").read_text()
    assert "checklist,default,success" in deltas
    assert len(list((out / "traces").glob("*.json.gz"))) == 3

    # the same run twice is refused (a copy counts once; replicates need distinct seeds)
    with pytest.raises(blackbox.RunDirError, match="given more than once"):
        blackbox.records_from_run_dirs([tmp_path / "d0", tmp_path / "d0"])


def test_mcp_prompt_command():
    out = subprocess.run(
        [sys.executable, "-m", "pushbench.cli", "mcp-prompt", "checklist"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.strip() == blackbox.PROMPTS["checklist"]


def test_docs_hold_the_prompts_verbatim():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "blackbox.md").read_text()
    for text in blackbox.PROMPTS.values():
        for para in text.split("\n"):
            assert para in doc


def test_bounded_dump_matches_the_env_measure():
    from pushbench.blackbox.session import bounded_dump

    call = {"tool": "search", "query": "é" * 100, "page": 2}
    text, size, over = bounded_dump(call)
    assert not over and text == json.dumps(call, ensure_ascii=False)
    assert size == len(text.encode())
    text, size, over = bounded_dump({"tool": "search", "query": "x" * 10**6})
    assert over and MAX_ACTION_BYTES < len(text) <= 10**6 + 100
