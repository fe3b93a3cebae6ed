"""LLM policies against a scripted OpenAI-compatible server on loopback (fast; no model).

The stub (:mod:`pushbench.policies.llm.stub`) is a real HTTP server on 127.0.0.1, so these
tests exercise the real ``openai`` SDK, the retry policy, both backends, the memory baselines
and the asyncio driver and executor.
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("openai")

from pushbench import metrics
from pushbench.policies.llm.context import estimate_message_tokens, trim, turns
from pushbench.policies.llm.core import PLAIN_TEXT_NOTE, SYSTEM_PROMPT, call_action
from pushbench.policies.llm.stub import StubServer
from pushbench.runner.episode import run_episode

TASK = "RepoScan-N10"
BACKENDS = ["llm", "llm-langgraph"]


def call(name: str, args: dict | str | None = None, **kw) -> dict:
    text = args if isinstance(args, str) else json.dumps(args or {})
    return {"tool_calls": [{"name": name, "arguments": text}], **kw}


@pytest.fixture
def stub():
    with StubServer() as server:
        yield server


@pytest.fixture
def params(stub, tmp_path):
    def make(policy: str = "llm", **extra) -> dict:
        p = {
            "model": "stub-model",
            "base_url": stub.url,
            "api_key_env": None,
            "backoff_base": 0.001,
            "backoff_max": 0.01,
            "timeout": 10,
        }
        if "langgraph" in policy:
            p["checkpoint_dir"] = str(tmp_path / "checkpoints")
        p.update(extra)
        return p

    return make


def episode(policy: str, params, budget: int = 6, controller: str = "standard", **extra) -> dict:
    record = run_episode(
        TASK, controller, policy, 0, budget=budget, policy_params=params(policy, **extra)
    )
    check_record(record)
    return record


def check_record(record: dict) -> None:
    """Well-formed: JSON-able, metrics recomputed from the record, usage and llm sections."""
    json.dumps(record)
    expected = metrics.episode_metrics(record)
    assert {k: record["metrics"][k] for k in expected} == expected
    assert record["metrics"].get("error", False) == (record["terminated_by"] == "error")
    assert record["steps_used"] == len(record["calls"])
    usage = record["usage"]
    assert set(usage) >= {"prompt_tokens", "completion_tokens", "calls", "cost_usd"}
    assert record["llm"]["model_calls"] == usage["calls"]


# ----- pure pieces ---------------------------------------------------------------------------
def test_call_action_forms():
    assert call_action("search", '{"query": "x"}') == {"tool": "search", "query": "x"}
    assert call_action("status", "") == {"tool": "status"}
    assert call_action("search", '{"query": "x"') == '{"query": "x"'  # env says bad_json
    assert call_action("search", "[1, 2]") == "[1, 2]"  # env says not_object
    assert call_action("search", '{"tool": "final", "q": 1}')["tool"] == "search"


def test_trim_keeps_pinned_and_pairs():
    sys_msg = {"role": "system", "content": "s" * 40}
    obj = {"role": "user", "content": "o" * 40}
    hist = [sys_msg, obj]
    for i in range(6):
        hist.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "search", "arguments": "{}"},
                    }
                ],
            }
        )
        hist.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 400})
    total = sum(estimate_message_tokens(m) for m in hist)
    kept, dropped = trim(hist, total)
    assert dropped == 0 and kept == hist
    kept, dropped = trim(hist, 300)
    assert kept[:2] == [sys_msg, obj] and dropped >= 4
    assert all(len(t) == 2 and t[0]["role"] == "assistant" for t in turns(kept))
    kept, dropped = trim(hist, 10)  # over budget even alone: the newest turn is kept
    assert dropped == 5 and kept[2:] == hist[-2:]


# ----- invalid output ------------------------------------------------------------------------
@pytest.mark.parametrize("policy", BACKENDS)
def test_invalid_output_is_an_invalid_action_costing_a_step(stub, params, policy):
    stub.push(
        {"content": '{"tool": "status"}'},  # plain text that looks like a call
        call("search", '{"query": "raise", "page": '),  # arguments are not JSON
        call("frobnicate", {"x": 1}),  # unknown tool
        call("search", {"query": 7}),  # wrong argument type
        call("status"),
    )
    r = episode(policy, params, budget=5)
    kinds = [(c["ok"], c.get("error_type")) for c in r["calls"]]
    assert kinds == [
        (False, "not_object"),
        (False, "bad_json"),
        (False, "unknown_tool"),
        (False, "bad_arguments"),
        (True, None),
    ]
    assert r["steps_used"] == 5 and r["metrics"]["invalid_actions"] == 4
    assert r["llm"]["plain_text_replies"] == 1 and r["llm"]["unparseable_arguments"] == 1
    assert r["llm"]["unknown_tools"] == 1
    # The agent saw each error: the plain-text reply got a harness note plus the env's answer.
    second = stub.requests[1]["messages"]
    assert second[-1]["role"] == "user" and second[-1]["content"].startswith(PLAIN_TEXT_NOTE)
    assert '"error_type":"not_object"' in second[-1]["content"]
    third = stub.requests[2]["messages"]
    assert third[-1]["role"] == "tool" and '"error_type":"bad_json"' in third[-1]["content"]


def test_multiple_calls_in_one_reply_are_steps_in_order(stub, params):
    stub.push(
        {
            "tool_calls": [
                {"name": "status", "arguments": "{}"},
                {"name": "search", "arguments": '{"query": "raise"}'},
            ]
        }
    )
    r = episode("llm", params, budget=3)
    assert [c["tool"] for c in r["calls"][:2]] == ["status", "search"]
    assert r["llm"]["multi_call_turns"] == 1
    # both tool results answer the one assistant message, in order, before the next call
    msgs = stub.requests[1]["messages"]
    assert [m["role"] for m in msgs[-3:]] == ["assistant", "tool", "tool"]


# ----- transient and permanent API failures --------------------------------------------------
@pytest.mark.parametrize("policy", BACKENDS)
def test_transient_errors_are_retried_and_not_charged(stub, params, policy):
    stub.push(
        {"status": 429, "headers": {"retry-after": "0"}},
        {"status": 500},
        {"status": 503},
        call("status"),
        {"status": 502},
        call("status"),
    )
    r = episode(policy, params, budget=2)
    assert r["terminated_by"] == "budget" and r["steps_used"] == 2
    assert [c["tool"] for c in r["calls"]] == ["status", "status"]
    assert r["metrics"]["invalid_actions"] == 0
    assert r["usage"]["retries"] == 4 and r["usage"]["calls"] == 2
    assert r["usage"]["transient_errors"] == {
        "http_429": 1,
        "http_500": 1,
        "http_502": 1,
        "http_503": 1,
    }
    assert len(stub.requests) == 6


def test_timeouts_are_retried(stub, params):
    stub.push({"sleep": 1.5, **call("status")}, call("status"))
    r = episode("llm", params, budget=1, timeout=0.5)
    assert r["terminated_by"] == "budget" and r["usage"]["transient_errors"] == {"timeout": 1}


@pytest.mark.parametrize("policy", BACKENDS)
def test_permanent_error_ends_episode_as_error(stub, params, policy):
    stub.push(call("status"), {"status": 401, "message": "invalid api key"})
    r = episode(policy, params, budget=6)
    assert r["terminated_by"] == "error" and r["metrics"]["error"] is True
    assert r["error"]["type"] == "auth" and r["error"]["status"] == 401
    assert "invalid api key" in r["error"]["message"]
    assert r["steps_used"] == 1  # the step before the failure stands; nothing is charged after
    assert not r["metrics"]["budget_exhausted"] and not r["metrics"]["premature_stop"]
    assert len(stub.requests) == 2  # a 401 is not retried


def test_exhausted_retries_end_episode_as_error(stub, params):
    stub.push(*[{"status": 503}] * 3)
    r = episode("llm", params, budget=4, max_retries=2)
    assert r["terminated_by"] == "error" and r["error"]["type"] == "api_unavailable"
    assert r["error"]["retries"] == 2 and r["steps_used"] == 0


def test_unreachable_server_is_an_error_after_retries(params):
    from pushbench.policies.llm.stub import StubServer

    with StubServer() as dead:
        url = dead.url
    r = episode("llm", params, budget=3, base_url=url, max_retries=1)
    assert r["terminated_by"] == "error" and r["error"]["type"] == "api_unavailable"
    assert r["usage"]["transient_errors"] == {"connection": 2}


def test_missing_api_key_variable_fails_loudly(params, monkeypatch):
    from pushbench.policies import make_policy
    from pushbench.policies.errors import PolicyError

    monkeypatch.delenv("PUSHBENCH_TEST_NO_KEY", raising=False)
    with pytest.raises(PolicyError, match="PUSHBENCH_TEST_NO_KEY"):
        make_policy("llm", seed=0, **params("llm", api_key_env="PUSHBENCH_TEST_NO_KEY"))


# ----- context budget ------------------------------------------------------------------------
@pytest.mark.parametrize("policy", BACKENDS)
def test_context_trimming_keeps_system_and_objective(stub, params, policy):
    r = episode(policy, params, budget=8, context_tokens=2500)  # search pages are ~1100 tokens
    assert r["llm"]["dropped_turns"] > 0
    first = stub.requests[0]["messages"][:2]
    assert len(stub.requests[0]["messages"]) == 2 and len(stub.requests) == 8
    for req in stub.requests:
        msgs = req["messages"]
        assert msgs[:2] == first and msgs[0]["content"] == SYSTEM_PROMPT
        assert msgs[1]["role"] == "user" and msgs[1]["content"].startswith("Objective: ")
        open_ids: set[str] = set()
        for m in msgs[2:]:  # every tool result follows the assistant call it answers
            if m["role"] == "assistant":
                open_ids = {c["id"] for c in m.get("tool_calls") or ()}
            elif m["role"] == "tool":
                assert m["tool_call_id"] in open_ids
    # After the first request, history follows the objective and starts with a whole turn
    # (trimming drops turns, never half of one)...
    later = [req["messages"] for req in stub.requests[1:]]
    assert all(len(msgs) > 2 and msgs[2]["role"] == "assistant" for msgs in later)
    # ...and the trimming shows in what the model got: the first turn is gone from later views.
    first_turn = later[0][2]
    assert any(msgs[2] != first_turn for msgs in later[1:])
    assert r["llm"]["max_view_tokens_est"] <= 2500 + 1200


def test_both_backends_give_the_same_episode(params, tmp_path):
    records = {}
    for policy in BACKENDS:
        with StubServer() as server:
            p = params(policy, base_url=server.url, context_tokens=2500)
            records[policy] = run_episode(TASK, "stateqgp", policy, 3, budget=8, policy_params=p)
    a, b = records["llm"], records["llm-langgraph"]
    assert a["calls"] == b["calls"] and a["metrics"] == b["metrics"]
    assert a["llm"]["dropped_turns"] == b["llm"]["dropped_turns"]
    assert a["usage"]["calls"] == b["usage"]["calls"]


# ----- usage and cost ------------------------------------------------------------------------
def test_usage_and_cost_accounting(stub, params):
    stub.push(*[call("status", usage={"prompt_tokens": 1000, "completion_tokens": 50})] * 3)
    prices = {
        "stub-model": {"input_per_mtok": 2.5, "output_per_mtok": 10.0},
        "other": {"input_per_mtok": 99, "output_per_mtok": 99},
    }
    r = episode("llm", params, budget=3, prices=prices)
    u = r["usage"]
    assert (u["prompt_tokens"], u["completion_tokens"], u["calls"]) == (3000, 150, 3)
    assert u["cost_usd"] == pytest.approx(3000 * 2.5e-6 + 150 * 10e-6)
    assert u["price"] == {"input_per_mtok": 2.5, "output_per_mtok": 10.0}
    assert u["estimated_calls"] == 0


def test_usage_without_server_counts_is_estimated_and_unpriced_model_costs_none(stub, params):
    stub.push(call("status", usage=None), call("status"))
    r = episode(
        "llm", params, budget=2, prices={"gpt-x": {"input_per_mtok": 1, "output_per_mtok": 1}}
    )
    assert r["usage"]["estimated_calls"] == 1 and r["usage"]["prompt_tokens"] > 0
    assert r["usage"]["cost_usd"] is None


def test_flat_price_and_bad_params(params):
    from pydantic import ValidationError

    from pushbench.policies.llm.config import LLMConfig

    cfg = LLMConfig.model_validate(
        {"model": "m", "prices": {"input_per_mtok": 1, "output_per_mtok": 2}}
    )
    assert cfg.price().cost(10**6, 10**6) == 3.0
    with pytest.raises(ValidationError):
        LLMConfig.model_validate({"model": "m", "temprature": 0.5})


# ----- LangGraph specifics -------------------------------------------------------------------
def test_langgraph_resumes_an_interrupted_episode(stub, params):
    from pushbench.policies import make_policy

    p = params("llm-langgraph", context_tokens=3000)
    stub.push(
        call("search", {"query": "raise"}), call("status"), {"status": 401}
    )  # the first run dies here (a crash would leave the same state)
    first = run_episode(TASK, "standard", make_policy("llm-langgraph", seed=0, **p), 0, budget=6)
    assert first["terminated_by"] == "error" and first["steps_used"] == 2
    n_before = len(stub.requests)
    second = run_episode(TASK, "standard", "llm-langgraph", 0, budget=6, policy_params=p)
    check_record(second)
    assert second["terminated_by"] == "budget" and second["steps_used"] == 6
    assert second["llm"]["resumed_steps"] == 2
    assert second["calls"][:2] == first["calls"]
    assert len(stub.requests) - n_before == 4  # only the remaining four steps asked the model
    # the usage of the first run's successful calls is carried in the checkpoint
    assert second["usage"]["calls"] == 6
    # finished: the thread was deleted, so a rerun starts afresh
    third = run_episode(TASK, "standard", "llm-langgraph", 0, budget=6, policy_params=p)
    assert third["llm"]["resumed_steps"] == 0
    # one checkpoint file per episode thread, removed once the episode has finished
    from pathlib import Path

    assert not list(Path(p["checkpoint_dir"]).glob("*.sqlite*"))


def test_langgraph_recursion_limit_follows_budget(params):
    from pushbench.policies import make_policy

    pol = make_policy("llm-langgraph", seed=0, **params("llm-langgraph"))
    pol.reset(
        json.dumps(
            {
                "tool": "reset",
                "ok": True,
                "result": {"objective": "x", "target": 1, "budget": 7, "tools": []},
            }
        )
    )
    assert pol.recursion_limit() == 2 * 7 + 2
    mem = make_policy(
        "llm-langgraph-memory", seed=0, **params("llm-langgraph-memory", max_memory_turns=2)
    )
    mem.reset(
        json.dumps(
            {
                "tool": "reset",
                "ok": True,
                "result": {"objective": "x", "target": 1, "budget": 7, "tools": []},
            }
        )
    )
    assert mem.recursion_limit() == 2 * (7 * 3 + 2) + 2


# ----- memory baselines ----------------------------------------------------------------------
# The asyncio driver runs the graph's coroutine node, which calls the store inline.
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_langgraph_memory_remember_recall_are_free_and_counted(stub, params, driver):
    stub.push(
        call("remember", {"note": "searched raise page 1; submit pytest ids next"}),
        call("remember", {"note": "unrelated: weather"}),
        call("recall", {"query": "which page of raise did I search", "k": 1}),
        call("status"),
        call("status"),
    )
    if driver == "sync":
        r = episode("llm-langgraph-memory", params, budget=2)
    else:
        import asyncio

        from pushbench.runner.episode import arun_episode

        r = asyncio.run(
            arun_episode(
                TASK,
                "standard",
                "llm-langgraph-memory",
                0,
                budget=2,
                policy_params=params("llm-langgraph-memory"),
            )
        )
        check_record(r)
    assert r["steps_used"] == 2 and [c["tool"] for c in r["calls"]] == ["status", "status"]
    m = r["memory"]
    assert m["backend"] == "langgraph_store" and m["calls"] == 3 and m["notes"] == 2
    assert m["by_tool"] == {"recall": 1, "remember": 2} and m["charged_to_env"] == 0
    recalled = stub.requests[3]["messages"][-1]
    assert recalled["role"] == "tool" and "searched raise page 1" in recalled["content"]
    assert "weather" not in recalled["content"]  # k=1, the relevant note ranks first


def test_memory_only_turns_are_bounded_and_then_charged(stub, params):
    stub.push(*[call("archival_memory_search", {"query": "x"})] * 4, call("status"))
    r = episode("llm-memgpt", params, budget=2, max_memory_turns=3)
    assert r["memory"]["calls"] == 3 and r["memory"]["charged_to_env"] == 1
    assert r["calls"][0]["error_type"] == "unknown_tool" and r["calls"][1]["tool"] == "status"


def test_memgpt_core_memory_is_always_in_context(stub, params):
    stub.push(
        call("core_memory_append", {"content": "GOAL-NOTE: ten ids, 3 accepted"}),
        call("archival_memory_insert", {"content": "page 2 of raise was useful"}),
        call("core_memory_replace", {"old_content": "3 accepted", "new_content": "4 accepted"}),
        call("archival_memory_search", {"query": "raise page"}),
        call("core_memory_append", {"content": "x" * 5000}),  # too long: a free error
        *[call("search", {"query": "raise", "page": i}) for i in range(1, 5)],
    )
    r = episode("llm-memgpt", params, budget=4, context_tokens=1800, max_memory_turns=5)
    assert r["memory"]["by_tool"] == {
        "archival_memory_insert": 1,
        "archival_memory_search": 1,
        "core_memory_append": 2,
        "core_memory_replace": 1,
    }
    assert r["memory"]["errors"] == 1 and r["memory"]["archival_entries"] == 1
    assert r["llm"]["dropped_turns"] > 0
    for req in stub.requests[3:]:
        assert "GOAL-NOTE: ten ids, 4 accepted" in req["messages"][0]["content"]
    search_answer = stub.requests[4]["messages"][-1]["content"]
    assert "page 2 of raise was useful" in search_answer


# ----- concurrency ---------------------------------------------------------------------------
def test_async_driver_runs_episodes_concurrently(params, tmp_path):
    from pushbench.runner.episode import run_many

    async def main(url: str) -> list:
        eps = [
            dict(
                task_id=TASK,
                controller=c,
                policy=pol,
                seed=s,
                budget=4,
                policy_params=params(pol, base_url=url),
            )
            for pol in ("llm", "llm-langgraph", "llm-memgpt")
            for c in ("standard", "stateqgp")
            for s in (0, 1)
        ]
        return [x async for x in run_many(eps, concurrency=6)]

    with StubServer(latency=0.02) as server:
        out = asyncio.run(main(server.url))
    assert len(out) == 12
    for _, rec in out:
        assert isinstance(rec, dict), rec
        check_record(rec)
        assert rec["terminated_by"] == "budget" and rec["usage"]["calls"] == 4


def test_async_executor_through_the_runner(params, tmp_path):
    from pushbench.runner.experiment import validate
    from pushbench.runner.sweep import run_experiment

    with StubServer(latency=0.01) as server:
        exp = validate(
            {
                "name": "llm-smoke",
                "tasks": [TASK],
                "controllers": ["standard", "verifier_gated"],
                "policies": [
                    {"name": "llm", "params": params("llm", base_url=server.url)},
                    {
                        "name": "llm-langgraph",
                        "params": params("llm-langgraph", base_url=server.url),
                    },
                ],
                "seeds": [0, 1],
                "budget": 3,
                "executor": "async",
                "workers": 4,
            }
        )
        summary = run_experiment(exp, tmp_path / "run", progress=False)
    errors = tmp_path / "run" / "errors.jsonl"
    assert summary["errors"] == 0, errors.read_text() if errors.exists() else summary
    assert summary["total"] == 8 and summary["finished"] == 8
    lines = [json.loads(x) for x in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 8 and all(x["usage"]["calls"] == 3 for x in lines)


@pytest.mark.parametrize("name,episodes", [("llm_ablation", 3888), ("llm_memory_baselines", 1620)])
def test_llm_experiment_templates_load(name, episodes):
    from pathlib import Path

    from pushbench.policies.llm.config import LLMConfig
    from pushbench.runner.experiment import expand, load_experiment

    exp = load_experiment(Path(__file__).parent.parent / "experiments" / f"{name}.yaml")
    assert len(expand(exp)) == episodes and exp.executor == "async"
    for p in exp.policies:
        if p.name == "letta":  # a real Letta agent (tests/test_letta.py checks its rows)
            continue
        cfg = LLMConfig.model_validate(p.params)
        assert cfg.model and (cfg.price() is not None or cfg.model == "gpt-5.4")
    if name == "llm_memory_baselines":
        assert exp.controllers == ["standard"]
    if name == "llm_ablation":  # both context arms of every agent (context as a factor)
        contexts = {p.params["context_tokens"] for p in exp.policies}
        assert contexts == {16000, None}
        assert len({p.report_label for p in exp.policies}) == len(exp.policies)


def test_cli_concurrency_runs_the_async_executor(params, tmp_path):
    import yaml
    from typer.testing import CliRunner

    from pushbench.cli import app

    with StubServer(latency=0.01) as server:
        exp = {
            "name": "llm-cli",
            "tasks": [TASK],
            "controllers": ["standard"],
            "policies": [{"name": "llm", "params": params("llm", base_url=server.url)}],
            "seeds": [0, 1, 2],
            "budget": 2,
        }
        path = tmp_path / "exp.yaml"
        path.write_text(yaml.safe_dump(exp))
        res = CliRunner().invoke(
            app,
            [
                "run",
                str(path),
                "--out",
                str(tmp_path / "run"),
                "--concurrency",
                "3",
                "--no-progress",
                "--no-report",
                "--no-plot",
            ],
        )
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x)["usage"]["calls"] == 2 for x in lines)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    # --concurrency 3 is the async executor with 3 episodes in flight, and that is what ran
    assert (manifest["experiment"]["executor"], manifest["experiment"]["workers"]) == ("async", 3)
    summary = manifest["invocations"][-1]["summary"]
    assert (summary["executor"], summary["workers"], summary["ran"]) == ("async", 3, 3)


@pytest.mark.parametrize("policy", BACKENDS)
def test_full_context_arm_sends_everything_and_pairs_with_the_trimmed_one(stub, params, policy):
    """``context_tokens: null`` drops nothing; the record says so, the labels tell the arms
    apart and the report pairs them (trimmed - full) on matched episodes."""
    from pushbench.analysis.context_deltas import context_deltas

    full = episode(policy, params, budget=8, context_tokens=None)
    n_full = len(stub.requests)
    assert full["llm"]["context_tokens"] is None and full["llm"]["dropped_turns"] == 0
    sizes = [len(req["messages"]) for req in stub.requests]
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]  # the history only grows
    trimmed = episode(policy, params, budget=8, context_tokens=2500)
    assert trimmed["llm"]["context_tokens"] == 2500 and trimmed["llm"]["dropped_turns"] > 0
    assert max(len(req["messages"]) for req in stub.requests[n_full:]) < sizes[-1]
    assert full["policy"]["label"].endswith("context=full]")
    assert trimmed["policy"]["label"].endswith("context=2500]")
    rows = context_deltas([full, trimmed], n_resamples=99)
    drop = rows[(rows["metric"] == "dropped_turns")]
    assert (
        len(drop) == 1
        and drop.iloc[0]["context_a"] == "2500"
        and drop.iloc[0]["context_b"] == "full"
    )
    assert drop.iloc[0]["delta"] == trimmed["llm"]["dropped_turns"]


def test_report_writes_context_deltas(stub, params, tmp_path):
    from pushbench.analysis.output import write_report

    eps = [episode("llm", params, budget=8, context_tokens=c) for c in (None, 2500)]
    frames = write_report(eps, tmp_path / "rep", n_resamples=99)
    assert (tmp_path / "rep" / "context_deltas.csv").is_file()
    assert set(frames["context_deltas"]["context_b"]) == {"full"}
