"""The MCP server answers every request (raw JSON-RPC over stdio, real server subprocess).

One server per module (``pushbench mcp`` as a subprocess, a budget large enough never to end
the episode) gets hand-written lines: the cases of issue 11 (a lone surrogate, an integer past
Python's int/str limit, about 200 levels of nesting), other unreadable lines (not JSON, not an
object, a bad id) and, from hypothesis, random tools/call requests with adversarial argument
text mixed with random garbage lines. Every request with an id gets exactly one answer with
that id; a ``tools/call`` answered with a result cost exactly one step, one answered with a
JSON-RPC error none; ``episode.json`` keeps ``steps_used == len(calls)``; every refusal is
logged to ``server.log``.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the MCP server needs the optional 'mcp' extra")

from adversarial import SURROGATES, text_fragments

from pushbench.envs import actions as A

TASK = "RepoScan-requests-docstring-N10"
BUDGET = 100_000


class RawServer:
    """``pushbench mcp`` over pipes; a thread reads its stdout lines into a queue."""

    def __init__(self, run_dir: Path, controller: str = "stateqgp") -> None:
        self.run_dir = run_dir
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pushbench.cli",
                "mcp",
                "--task",
                TASK,
                "--run-dir",
                str(run_dir),
                "--budget",
                str(BUDGET),
                "--controller",
                controller,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        self.lines: queue.Queue = queue.Queue()
        self.ids = itertools.count(1000)
        threading.Thread(target=self._read, daemon=True).start()
        self.request(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        self.send_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(json.loads(raw))
        self.lines.put(None)

    def send_line(self, text: str | bytes) -> None:
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = 20.0) -> dict:
        msg = self.lines.get(timeout=timeout)  # queue.Empty: the server did not answer
        assert msg is not None, "the server closed stdout"
        return msg

    def request(self, obj: dict) -> dict:
        self.send_line(json.dumps(obj))
        return self.until({obj["id"]})[obj["id"]][0]

    def until(self, ids: set) -> dict:
        """Read until every id in ``ids`` was answered; all answers by id (None: id null)."""
        got: dict = {}
        while not ids <= set(got):
            msg = self.recv()
            got.setdefault(msg.get("id"), []).append(msg)
        return got

    def record(self) -> dict:
        return json.loads((self.run_dir / "episode.json").read_text())

    def warnings(self) -> int:
        return (self.run_dir / "server.log").read_text().count(" WARNING ")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = RawServer(tmp_path_factory.mktemp("wire") / "run")
    yield srv
    srv.close()


def tools_call(req_id, name_json: str, args_text: str) -> str:
    return (
        '{"jsonrpc":"2.0","id":' + json.dumps(req_id) + ',"method":"tools/call",'
        '"params":{"name":' + name_json + ',"arguments":' + args_text + "}}"
    )


def step_check(server: RawServer, line: str | bytes, req_id) -> tuple[dict | None, int]:
    """Send ``line`` then a ping; return (the answer to ``req_id`` or None, steps charged)."""
    before = server.record()["steps_used"]
    server.send_line(line)
    ping = next(server.ids)
    server.send_line(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}))
    want = {ping} | ({req_id} if req_id is not None else set())
    got = server.until(want)
    assert set(got) <= want | {None}, got  # nothing answered that was not asked
    assert all(len(v) == 1 for k, v in got.items() if k is not None), got  # exactly once
    assert len(got.get(None, [])) <= 1
    rec = server.record()
    assert rec["steps_used"] == len(rec["calls"])
    return (
        got[req_id][0] if req_id is not None else got.get(None, [None])[0],
        rec["steps_used"] - before,
    )


def tool_obs(answer: dict) -> dict:
    assert "result" in answer, answer
    return json.loads(answer["result"]["content"][0]["text"])


# ----- the cases of issue 11 ----------------------------------------------------------------------
ISSUE_CASES = [
    ("lone-surrogate", '{"query":"\\ud800"}', "bad_encoding"),
    ("int-past-str-limit", '{"query":"x","page":' + "1" * 5000 + "}", "number_too_large"),
    ("nesting-200", '{"query":' + "[" * 200 + "]" * 200 + "}", "too_deep"),
    ("nesting-50", '{"query":' + "[" * 50 + "]" * 50 + "}", "too_deep"),
    ("nan", '{"query":NaN}', "bad_value"),
    ("int-in-ids", '{"ids":[' + "7" * 4500 + "]}", "number_too_large"),
]


@pytest.mark.parametrize("label, args, error_type", ISSUE_CASES, ids=[c[0] for c in ISSUE_CASES])
def test_unreadable_arguments_are_refused_with_one_step(server, label, args, error_type):
    warnings = server.warnings()
    req_id = next(server.ids)
    answer, charged = step_check(server, tools_call(req_id, '"search"', args), req_id)
    obs = tool_obs(answer)
    assert answer["result"]["isError"] and obs["ok"] is False
    assert obs["error_type"] == error_type and charged == 1
    assert server.record()["calls"][-1]["error_type"] == error_type
    if label != "nan" and label != "nesting-50":  # lines the SDK itself cannot read are logged
        assert server.warnings() > warnings


PROTOCOL_CASES = [
    ("not-json", "hello", None, -32700),
    ("truncated", '{"jsonrpc":"2.0","id":"t1","method":"ping"', "t1", -32700),
    ("array", "[1,2]", None, -32600),
    ("id-null", '{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600),
    ("id-fraction", '{"jsonrpc":"2.0","id":5.5,"method":"ping"}', None, -32600),
    ("bad-version", '{"jsonrpc":"1.0","id":"t2","method":"ping"}', "t2", -32600),
    (
        "surrogate-in-uri",
        '{"jsonrpc":"2.0","id":"t3","method":"resources/read","params":{"uri":"\\udc00"}}',
        "t3",
        -32600,
    ),
    ("id-huge", '{"jsonrpc":"2.0","id":' + "9" * 5000 + ',"method":"ping"}', None, -32600),
    (
        "raw-control-char",
        '{"jsonrpc":"2.0","id":"t4","method":"tools/call","params":{"name":'
        '"search","arguments":{"query":"a\x01"}}}',
        "t4",
        -32700,
    ),
    (
        "name-not-string",
        '{"jsonrpc":"2.0","id":"t5","method":"tools/call","params":{"name":3}}',
        "t5",
        -32602,
    ),
    (
        "arguments-list",
        '{"jsonrpc":"2.0","id":"t6","method":"tools/call","params":{"name":'
        '"status","arguments":[1]}}',
        "t6",
        -32602,
    ),
]


@pytest.mark.parametrize(
    "label, line, req_id, code", PROTOCOL_CASES, ids=[c[0] for c in PROTOCOL_CASES]
)
def test_unreadable_requests_get_a_json_rpc_error_and_no_step(server, label, line, req_id, code):
    warnings = server.warnings()
    answer, charged = step_check(server, line, req_id)
    assert answer is not None and answer["id"] == req_id, answer
    assert answer["error"]["code"] == code and charged == 0
    assert server.warnings() > warnings  # logged to server.log


def test_a_notification_is_never_answered(server):
    _, charged = step_check(
        server, '{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"\\ud800"}}', None
    )
    assert charged == 0


# ----- random requests and garbage ----------------------------------------------------------------
names = st.one_of(
    st.sampled_from(['"search"', '"submit"', '"status"', '"final"', '"nope"']),
    st.sampled_from(SURROGATES).map(lambda s: json.dumps("search" + s)),
)
arg_texts = st.one_of(
    text_fragments,
    st.builds(
        lambda k, v: "{" + json.dumps(k) + ":" + v + "}",
        st.sampled_from(["query", "ids", "page", "reported_count", "x"]),
        text_fragments,
    ),
    st.just('{"query":"session","page":1}'),
)
garbage = st.one_of(
    st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" ")),
    st.text(max_size=60).map(lambda t: t.replace("\n", " ")),
    text_fragments.map(lambda t: t.replace("\n", " ")),
)
items = st.one_of(st.tuples(st.just("call"), names, arg_texts), st.tuples(st.just("junk"), garbage))


@settings(
    max_examples=settings.default.max_examples,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(st.lists(items, min_size=1, max_size=4))
def test_every_request_is_answered_and_charged_once(server, batch):
    for item in batch:
        if item[0] == "call":
            req_id = next(server.ids)
            answer, charged = step_check(server, tools_call(req_id, item[1], item[2]), req_id)
            if "result" in answer:  # a tool result: the environment ran (or refused) it
                obs = tool_obs(answer)
                assert obs["ok"] or obs["error_type"] in A.ERROR_TYPES
                assert charged == 1
            else:  # a JSON-RPC error: the request itself was unreadable
                assert answer["error"]["code"] in (-32700, -32600, -32602) and charged == 0
        else:
            answer, charged = step_check(server, item[1], None)
            assert charged == 0
            assert answer is None or answer["error"]["code"] in (-32700, -32600)
