"""The policy-backed model server: all three APIs over real HTTP handling (Starlette's test
client and a real ``pushbench model-server`` process), driven by a client loop that executes
every answered tool call in a real environment, so the episode can be compared with the same
policy run in-process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytest.importorskip("starlette", reason="the model server needs the 'modelserver' extra")

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import pushbench
from pushbench.blackbox.episode_prompt import episode_prompt
from pushbench.modelserver import PolicyBackend, build_app
from pushbench.modelserver import app as app_mod
from pushbench.modelserver.app import RequestLog, check_loopback
from pushbench.modelserver.core import MODEL, observation_from_result
from pushbench.runner.episode import run_episode

TASK = "RepoScan-requests-docstring-N10"
TOOLS = ("search", "submit", "status", "final", "ask_user")
CALL_FIELDS = ("tool", "args", "ok", "verdicts", "valid_count")


@pytest.fixture(scope="module")
def prompt() -> str:
    return episode_prompt("default", TASK, 0)


def client_for(policy="diligent", seed=0, log=None) -> TestClient:
    return TestClient(build_app(PolicyBackend(policy, None, seed), RequestLog(log)))


def sse(text: str) -> list[tuple[str | None, dict | str]]:
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        ev = None
        data = ""
        for line in block.splitlines():
            if line.startswith("event: "):
                ev = line[7:]
            elif line.startswith("data: "):
                data += line[6:]
        out.append((ev, json.loads(data) if data != "[DONE]" else data))
    return out


# ----- three API clients: build the request, read the answer ------------------------------
class Anthropic:
    path = "/v1/messages"

    def __init__(self, prompt, stream):
        self.stream = stream
        self.messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        self.tools = [
            {"name": f"mcp__pushbench__{t}", "input_schema": {"type": "object"}} for t in TOOLS
        ] + [{"name": "Read", "input_schema": {"type": "object"}}]

    def body(self):
        return {
            "model": MODEL,
            "max_tokens": 1000,
            "system": "You are an agent.",
            "messages": self.messages,
            "tools": self.tools,
            "stream": self.stream,
        }

    def read(self, resp):
        if self.stream:
            events = sse(resp.text)
            kinds = [e for e, _ in events]
            assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
            assert kinds[-2] == "message_delta" and "content_block_start" in kinds
            start = next(d for e, d in events if e == "content_block_start")["content_block"]
            delta = next(d for e, d in events if e == "content_block_delta")["delta"]
            if start["type"] == "tool_use":
                block = {**start, "input": json.loads(delta["partial_json"])}
            else:
                block = {"type": "text", "text": delta["text"]}
        else:
            block = resp.json()["content"][0]
        self.messages.append({"role": "assistant", "content": [block]})
        if block["type"] == "tool_use":
            return block["name"].rsplit("__", 1)[1], block["input"], block["id"]
        return None, block["text"], None

    def result(self, call_id, text, is_error):
        self.messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "is_error": is_error,
                        "content": [{"type": "text", "text": text}],
                    }
                ],
            }
        )


class Responses:
    path = "/v1/responses"

    def __init__(self, prompt, stream):
        self.stream = stream
        self.input = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}
        ]
        self.tools = [
            {"type": "function", "name": "exec_command"},
            {
                "type": "namespace",
                "name": "mcp__pushbench",
                "tools": [{"type": "function", "name": t} for t in TOOLS],
            },
        ]

    def body(self):
        return {
            "model": MODEL,
            "input": self.input,
            "tools": self.tools,
            "stream": self.stream,
            "instructions": "be precise",
        }

    def read(self, resp):
        if self.stream:
            events = sse(resp.text)
            kinds = [e for e, _ in events]
            assert kinds[:2] == ["response.created", "response.in_progress"]
            assert kinds[-1] == "response.completed"
            seqs = [d["sequence_number"] for _, d in events]
            assert seqs == list(range(len(seqs)))
            item = next(d for e, d in events if e == "response.output_item.done")["item"]
        else:
            item = resp.json()["output"][0]
        self.input.append(item)
        if item["type"] == "function_call":
            assert item["namespace"] == "mcp__pushbench"  # Codex's namespaced MCP tools
            return item["name"], json.loads(item["arguments"]), item["call_id"]
        return None, item["content"][0]["text"], None

    def result(self, call_id, text, is_error):
        # Codex hands MCP results back as a serialised CallToolResult
        out = json.dumps({"content": [{"type": "text", "text": text}], "isError": is_error})
        self.input.append({"type": "function_call_output", "call_id": call_id, "output": out})


class Chat:
    path = "/v1/chat/completions"

    def __init__(self, prompt, stream):
        self.stream = stream
        self.messages = [
            {"role": "system", "content": "agent"},
            {"role": "user", "content": prompt},
        ]
        self.tools = [{"type": "function", "function": {"name": f"pushbench__{t}"}} for t in TOOLS]

    def body(self):
        return {
            "model": MODEL,
            "messages": self.messages,
            "tools": self.tools,
            "stream": self.stream,
        }

    def read(self, resp):
        if self.stream:
            chunks = [d for _, d in sse(resp.text)]
            assert chunks[-1] == "[DONE]"
            msg = chunks[0]["choices"][0]["delta"]
            calls = msg.get("tool_calls")
        else:
            msg = resp.json()["choices"][0]["message"]
            calls = msg.get("tool_calls")
        self.messages.append(
            {"role": "assistant", "content": msg.get("content"), "tool_calls": calls}
        )
        if calls:
            fn = calls[0]["function"]
            return fn["name"].split("__", 1)[1], json.loads(fn["arguments"]), calls[0]["id"]
        return None, msg["content"], None

    def result(self, call_id, text, is_error):
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


def drive(api, client: TestClient, prompt: str, seed: int = 0, max_requests: int = 200):
    """A client loop: ask the server, run the tool call in a real env, hand the result back."""
    env = pushbench.make(TASK, controller="standard")
    env.reset(seed=seed)
    final = None
    for _ in range(max_requests):
        resp = client.post(api.path, json=api.body())
        assert resp.status_code == 200, resp.text
        tool, args, call_id = api.read(resp)
        if tool is None:
            final = args
            break
        obs, *_ = env.step({"tool": tool, **args})
        api.result(call_id, obs, not json.loads(obs)["ok"])
    rec = env.get_wrapper_attr("episode_record")()
    env.close()
    return rec, final


def calls(rec):
    return [{k: c.get(k) for k in CALL_FIELDS} for c in rec["calls"]]


@pytest.mark.parametrize("api", [Anthropic, Responses, Chat])
@pytest.mark.parametrize("stream", [True, False])
def test_each_api_drives_the_in_process_episode(api, stream, prompt):
    ref = run_episode(TASK, "standard", "diligent", 0)
    rec, final = drive(api(prompt, stream), client_for(), prompt)
    assert calls(rec) == calls(ref) and rec["success"] and final.startswith("Done")


@pytest.mark.parametrize("policy", ["simulated-mid", "random", "exhaustive"])
def test_other_policies_match_in_process(policy):
    p = episode_prompt("default", TASK, 3)
    ref = run_episode(TASK, "standard", policy, 3)
    rec, final = drive(Anthropic(p, True), client_for(policy, 3), p, seed=3)
    assert calls(rec) == calls(ref) and rec["terminated_by"] == ref["terminated_by"]
    assert final


def test_same_conversation_same_answer_and_logged(tmp_path, prompt):
    log = tmp_path / "requests.jsonl"
    c = client_for(log=str(log))
    api = Anthropic(prompt, False)
    a, b = c.post(api.path, json=api.body()), c.post(api.path, json=api.body())
    assert a.json() == b.json()  # deterministic per seed
    other = client_for(policy="random", seed=7).post(api.path, json=api.body())
    assert other.json()["content"] != a.json()["content"]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["bytes_in"] > 1000 and lines[0]["status"] == 200
    assert lines[0]["decision"]["tool"] == "mcp__pushbench__search"
    assert len(lines[0]["pushbench_tools"]) == 5 and lines[0]["latency_ms"] >= 0


def test_harness_results_and_wrapped_observations():
    obs = '{"tool":"status","ok":true,"result":{"valid_count":1}}'
    assert json.loads(observation_from_result("status", "Error: " + obs, True))["ok"]
    wrapped = json.dumps({"content": [{"type": "text", "text": obs}], "isError": False})
    assert json.loads(observation_from_result("status", wrapped, False))["result"] == {
        "valid_count": 1
    }
    refused = json.loads(observation_from_result("submit", "permission denied", True))
    assert refused["ok"] is False and refused["error_type"] == "harness"


def test_errors_in_each_api_shape(prompt, monkeypatch):
    c = client_for()
    no_tools = {
        "model": MODEL,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": prompt}],
        "tools": [{"name": "Read"}],
    }
    r = c.post("/v1/messages", json=no_tools)
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert "none of the client's 1 tools" in r.json()["error"]["message"]
    r = c.post("/v1/messages", json={**no_tools, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400 and "first observation" in r.json()["error"]["message"]
    r = c.post("/v1/responses", content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = c.post("/v1/chat/completions", json={"model": MODEL})
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    r = c.get("/v1/messages")
    assert r.status_code == 405 and r.json()["type"] == "error"
    r = c.post("/v1/embeddings", json={})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    monkeypatch.setattr(app_mod, "MAX_BODY", 1000)
    r = c.post("/v1/messages", content=b"x" * 5000)
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
    r = c.post("/v1/responses", content=b"x" * 5000)
    assert r.status_code == 413 and "limit" in r.json()["error"]["message"]


def _shape_ok(path: str, resp) -> bool:
    body = resp.json()
    if "messages" in path:
        return body["type"] == "error" and set(body["error"]) == {"type", "message"}
    return set(body["error"]) == {"message", "type", "param", "code"}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
PATHS = ["/v1/messages", "/v1/responses", "/v1/chat/completions", "/responses"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), body=st.binary(max_size=300))
def test_property_any_bytes_get_an_error_in_the_api_shape(path, body):
    r = client_for().post(path, content=body)
    assert r.status_code in (400, 413) and _shape_ok(path, r)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(PATHS),
    body=json_values,
    extra=st.dictionaries(
        st.sampled_from(["model", "messages", "input", "tools", "stream", "max_tokens", "system"]),
        json_values,
        max_size=5,
    ),
)
def test_property_malformed_requests_get_an_error_in_the_api_shape(path, body, extra):
    payload = {**body, **extra} if isinstance(body, dict) else body
    r = client_for().post(path, json=payload)
    # a request that validates but names another model: that API's "model not found"
    assert r.status_code in (400, 404) and _shape_ok(path, r)
    assert r.status_code == 400 or "not found" in r.json()["error"]["message"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(st.text(min_size=1, max_size=30), max_size=6), stream=st.booleans())
def test_property_unknown_tools_are_refused(names, stream, prompt):
    names = [n for n in names if "pushbench" not in n and n not in TOOLS]
    body = {
        "model": MODEL,
        "max_tokens": 10,
        "stream": stream,
        "tools": [{"name": n} for n in names],
        "messages": [{"role": "user", "content": prompt}],
    }
    r = client_for().post("/v1/messages", json=body)
    assert r.status_code == 400 and "PushBench tool" in r.json()["error"]["message"]


def test_nested_and_huge_payloads():
    c = client_for()
    deep = "[" * 100000 + "]" * 100000
    r = c.post("/v1/responses", content=deep.encode())
    assert r.status_code == 400 and _shape_ok("/v1/responses", r)
    big = {
        "model": MODEL,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x" * (2 << 20)}],
        "tools": [],
    }
    r = c.post("/v1/messages", json=big)
    assert r.status_code == 400 and _shape_ok("/v1/messages", r)


def test_loopback_only_and_policy_checks():
    assert check_loopback("127.0.0.1") == "127.0.0.1" and check_loopback("::1") == "::1"
    for host in ("0.0.0.0", "10.1.2.3", "example.org"):
        with pytest.raises(ValueError, match="not a loopback"):
            check_loopback(host)
    with pytest.raises(ValueError, match="not an offline policy"):
        PolicyBackend("llm")
    with pytest.raises(ValueError, match="unknown parameter"):
        PolicyBackend("diligent", {"nope": 1})


def test_model_server_command_serves_and_logs(tmp_path, prompt):
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "model-server",
            "--policy",
            "diligent",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--log",
            str(log),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(300):
            if port_file.exists() and port_file.read_text():
                break
            time.sleep(0.1)
        base = f"http://127.0.0.1:{port_file.read_text()}"
        for _ in range(100):
            try:
                health = httpx.get(base + "/health", timeout=5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert health.json()["policy"] == "diligent"
        api = Responses(prompt, True)
        r = httpx.post(base + "/v1/responses", json=api.body(), timeout=30)
        assert r.status_code == 200 and api.read(r)[0] == "search"
        assert json.loads(log.read_text().splitlines()[-1])["api"] == "responses"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "model-server",
            "--policy",
            "diligent",
            "--port",
            "0",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "loopback" in bad.stderr
