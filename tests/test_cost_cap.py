"""Spend limits against the local stub server with fixed token counts (docs/llm.md
"Cost: estimate, cap, bill"): the estimate's stated formula, the cost cap (admission, the
per-call cut, resume), the episode token cap, unpriced models, and the bill.

Every run here is a real sweep (``run_experiment`` with a real executor, real environments and
the real ``openai`` client over HTTP to :class:`~pushbench.policies.llm.stub.StubServer`).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

pytest.importorskip("openai")

from pushbench import (
    cli,
    make,
)
from pushbench.analysis.bill import bill_table, totals
from pushbench.analysis.report import episodes_frame, summary_table
from pushbench.errors import ExperimentError
from pushbench.policies.llm.config import LLMConfig
from pushbench.policies.llm.core import AgentCore
from pushbench.policies.llm.stub import StubServer
from pushbench.records import read_lines
from pushbench.runner.estimate import estimate_rows
from pushbench.runner.experiment import expand, validate
from pushbench.runner.sweep import run_experiment

TASK = "RepoScan-N10"
P_TOK, C_TOK = 1000, 50  # what the stub reports for every call
PRICE_IN, PRICE_OUT = 1.0, 10.0  # USD per million tokens
CALL_COST = (P_TOK * PRICE_IN + C_TOK * PRICE_OUT) / 1e6


@pytest.fixture
def stub():
    with StubServer(fixed_usage={"prompt_tokens": P_TOK, "completion_tokens": C_TOK}) as s:
        yield s


def llm_params(stub, **extra) -> dict:
    p = {
        "model": "stub",
        "base_url": stub.url,
        "api_key_env": None,
        "context_tokens": 2000,
        "max_tokens": 100,
        "backoff_base": 0.001,
        "backoff_max": 0.01,
        "timeout": 10,
        "prices": {"stub": {"input_per_mtok": PRICE_IN, "output_per_mtok": PRICE_OUT}},
    }
    p.update(extra)
    return p


def experiment(
    stub, seeds=(0, 1), controllers=("standard", "stateqgp"), budget=3, policies=None, **extra
):
    return validate(
        {
            "name": "cost",
            "tasks": [TASK],
            "controllers": list(controllers),
            "policies": policies or [{"name": "llm", "params": llm_params(stub)}],
            "seeds": list(seeds),
            "budget": budget,
            **extra,
        }
    )


def lines(out: Path, name: str = "episodes.jsonl") -> list[dict]:
    return read_lines(out / name)


def canonical(ls: list[dict]) -> set[str]:
    return {json.dumps(x, sort_keys=True) for x in ls}


# ----- the estimate --------------------------------------------------------------------------
def _est(text: str) -> int:
    return math.ceil(len(text) / 4)


def formula(spec, max_tokens: int, context: int, k: int = 0, memory_tools=()) -> tuple:
    """The documented no-pilot formula, from the environment's own first observation."""
    env = make(spec.task_id, controller=spec.controller, budget=spec.budget)
    obs, _ = env.reset(seed=spec.seed, options=env.unwrapped.reset_options(spec.instance))
    env.close()
    first = json.loads(obs)["result"]
    B, T = first["budget"], first["target"]
    tools = first["tools"] + list(memory_tools)
    D = _est(json.dumps(tools))
    pinned = AgentCore(LLMConfig(model="x")).start(obs)
    S = sum(4 + _est(m["content"]) for m in pinned)
    lo = min(T, B)
    calls_hi = B * (1 + k) + k
    prompt = (lo * (S + D), B * (context + D), calls_hi * (context + D))
    completion = (lo * min(max_tokens, 30), B * min(max_tokens, 150), calls_hi * max_tokens)
    cost = tuple(
        (p * PRICE_IN + c * PRICE_OUT) / 1e6 for p, c in zip(prompt, completion, strict=True)
    )
    return (lo, B, B), prompt, completion, cost


def test_estimate_without_pilot_is_the_stated_formula_and_spends_nothing(stub, tmp_path):
    from pushbench.policies.llm.memory import MemGPTMemory

    exp = experiment(
        stub,
        budget=7,
        policies=[
            {"name": "llm", "params": llm_params(stub)},
            {
                "name": "llm-memgpt",
                "params": llm_params(stub, context_tokens=3000, max_tokens=40, max_memory_turns=2),
            },
        ],
    )
    specs = expand(exp)
    rows = estimate_rows(specs, {})
    assert [r["label"] for r in rows][-1] == "TOTAL" and len(rows) == 3
    want = {}
    for s in specs:
        if s.policy == "llm":
            f = formula(s, 100, 2000)
        else:
            f = formula(s, 40, 3000, k=2, memory_tools=MemGPTMemory.tools)
        want.setdefault(s.policy, []).append(f)
    for row, name in zip(rows[:2], ("llm", "llm-memgpt"), strict=True):  # rows[2]: TOTAL
        parts = list(zip(*want[name], strict=True))
        for col, i in (
            ("steps", 0),
            ("prompt_tokens", 1),
            ("completion_tokens", 2),
            ("cost_usd", 3),
        ):
            expect = tuple(sum(p[j] for p in parts[i]) for j in range(3))
            assert row[col] == pytest.approx(expect), (name, col)
        assert row["planned"] == 4 and row["finished"] == 0 and row["basis"] == "assumptions"
    assert rows[-1]["cost_usd"] == pytest.approx(
        tuple(a + b for a, b in zip(rows[0]["cost_usd"], rows[1]["cost_usd"], strict=True))
    )
    # the CLI prints it and calls no model
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(exp.model_dump(mode="json")))
    res = CliRunner().invoke(cli.app, ["run", str(path), "--estimate"])
    assert res.exit_code == 0, res.output
    assert "TOTAL" in res.output and "Assumptions" in res.output
    from rich.console import Console

    from pushbench.runner.estimate import print_estimate

    wide = Console(width=400, record=True)
    print_estimate(rows, wide, pilot=False)
    assert "llm-memgpt[model=stub" in wide.export_text()  # labels are text, not markup
    assert stub.requests == []


def test_pilot_runs_k_per_label_into_the_run_and_extrapolates(stub, tmp_path):
    exp = experiment(stub, seeds=(0, 1, 2), controllers=("standard",), budget=3)
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(exp.model_dump(mode="json")))
    out = tmp_path / "run"
    res = CliRunner().invoke(
        cli.app,
        ["run", str(path), "--out", str(out), "--estimate", "--pilot", "1", "--no-progress"],
    )
    assert res.exit_code == 0, res.output
    done = lines(out)
    assert len(done) == 1 and done[0]["seed"] == 0  # the first episode of the label
    steps, calls = done[0]["steps_used"], done[0]["usage"]["calls"]
    assert calls == steps == 3
    specs = expand(exp)
    rows = estimate_rows(specs, {done[0]["key"]: done[0]}, pilot=True)
    per_episode = calls * CALL_COST
    assert rows[0]["cost_usd"] == pytest.approx((3 * per_episode,) * 3)
    assert rows[0]["basis"] == "pilot (1 episodes)" and "pilot" in res.output
    # the pilot counts toward the run: the full run only runs the other two
    s = run_experiment(exp, out, progress=False)
    assert (s["skipped"], s["ran"]) == (1, 2)


# ----- the cost cap --------------------------------------------------------------------------
def reservation(spec, context=2000, max_tokens=100) -> float:
    return formula(spec, max_tokens, context)[3][2]


def test_cap_stops_at_the_right_episode_and_resume_ends_as_uncapped(stub, tmp_path):
    exp = experiment(stub)
    specs = expand(exp)
    full = run_experiment(exp, tmp_path / "uncapped", progress=False)
    uncapped = lines(tmp_path / "uncapped")
    assert full["ran"] == 4
    cost = {x["key"]: x["usage"]["cost_usd"] for x in uncapped}
    assert all(
        c == pytest.approx(x["usage"]["calls"] * CALL_COST)
        for x, c in zip(uncapped, cost.values(), strict=True)
    )
    # a cap that lets exactly two episodes start: spent(0, 1) + worst(2) passes it
    worst = [reservation(s) for s in specs]
    cap = cost[specs[0].key] + cost[specs[1].key] + worst[2] - 1e-6
    assert cost[specs[0].key] + worst[1] <= cap and worst[0] <= cap
    out = tmp_path / "capped"
    s = run_experiment(exp, out, progress=False, max_cost_usd=cap)
    assert [x["key"] for x in lines(out)] == [specs[0].key, specs[1].key]
    assert s["not_run"] == 2 and s["capped"] == 0 and s["spent_usd"] <= cap
    assert s["stopped_by_cap"] and not full["stopped_by_cap"]
    assert s["resume_cap_usd"] == pytest.approx(
        math.ceil((cost[specs[0].key] + cost[specs[1].key] + worst[2] + worst[3]) * 100) / 100
    )
    # resume with the suggested cap: exactly the uncapped run's episodes
    s2 = run_experiment(exp, out, progress=False, max_cost_usd=s["resume_cap_usd"])
    assert s2["ran"] == 2 and s2["not_run"] == 0 and s2["resume_cap_usd"] is None
    assert not s2["stopped_by_cap"]
    assert canonical(lines(out)) == canonical(uncapped)


@pytest.mark.parametrize("executor,workers", [("process", 2), ("async", 3)])
def test_cap_and_resume_under_parallel_executors(stub, tmp_path, executor, workers):
    exp = experiment(stub, executor=executor, workers=workers)
    specs = expand(exp)
    run_experiment(exp, tmp_path / "uncapped", progress=False)
    uncapped = lines(tmp_path / "uncapped")
    worst = max(reservation(s) for s in specs)
    cap = 2.5 * worst  # at most two worst cases in flight at once
    out = tmp_path / "capped"
    s = run_experiment(exp, out, progress=False, max_cost_usd=cap)
    assert 2 <= s["ran"] < 4 and s["spent_usd"] <= cap and s["not_run"] == 4 - s["ran"]
    s2 = run_experiment(exp, out, progress=False, max_cost_usd=100.0)
    assert s2["not_run"] == 0
    assert canonical(lines(out)) == canonical(uncapped)


def test_an_episode_over_its_worst_case_is_cut_at_the_cap_and_reruns_on_resume(tmp_path):
    # the server counts far more prompt tokens than the chars/4 worst case reserved for them
    with StubServer(fixed_usage={"prompt_tokens": 20000, "completion_tokens": C_TOK}) as big:
        exp = experiment(
            big,
            seeds=(0,),
            controllers=("standard",),
            budget=4,
            policies=[{"name": "llm", "params": llm_params(big, context_tokens=256)}],
        )
        out = tmp_path / "run"
        per_call = (20000 * PRICE_IN + C_TOK * PRICE_OUT) / 1e6
        cap = 1.5 * per_call
        s = run_experiment(exp, out, progress=False, max_cost_usd=cap)
        assert lines(out) == [] and s["capped"] == 1 and s["not_run"] == 1
        cut = lines(out, "capped.jsonl")
        assert len(cut) == 1 and cut[0]["terminated_by"] == "cost_cap"
        assert cut[0]["usage"]["calls"] == 1  # the second call's worst case passed it
        assert cut[0]["metrics"]["error"] is True and cut[0]["error"]["type"] == "cost_cap"
        assert s["spent_usd"] == pytest.approx(per_call) and s["spent_usd"] <= cap
        assert (out / "traces" / "capped" / f"{cut[0]['key']}.json.gz").is_file()
        s2 = run_experiment(exp, out, progress=False, max_cost_usd=1.0)
        done = lines(out)
        assert len(done) == 1 and done[0]["terminated_by"] == "budget"
        assert s2["spent_usd"] == pytest.approx(per_call + done[0]["usage"]["cost_usd"])
        bill = totals(
            bill_table(episodes_frame(done)),
            {"capped_cost_usd": per_call, "capped_episodes": 1, "cap_usd": 1.0},
        )
        assert bill["total_cost_usd"] == pytest.approx(s2["spent_usd"])


def test_episode_token_cap_ends_a_runaway_episode(tmp_path):
    # 5000 prompt tokens per call: more than any estimate of a 2000-token view plus tools, so
    # the check's prompt is the last real count. Call 1: estimate + 100 <= 12000; call 2:
    # 5050 + 5000 + 100 <= 12000; call 3: 10100 + 5000 + 100 > 12000: the episode ends.
    with StubServer(fixed_usage={"prompt_tokens": 5000, "completion_tokens": C_TOK}) as big:
        exp = experiment(
            big, seeds=(0,), controllers=("standard",), budget=6, max_episode_tokens=12000
        )
        out = tmp_path / "run"
        run_experiment(exp, out, progress=False)
        (line,) = lines(out)
        assert line["terminated_by"] == "token_cap" and line["usage"]["calls"] == 2
        assert line["steps_used"] == 2 and line["metrics"]["error"] is True
        assert line["error"]["type"] == "token_cap" and len(big.requests) == 2
        s = summary_table(episodes_frame([line]), steps_reference=False).iloc[0]
        assert s["n_episodes"] == 0 and s["n_spend_cut"] == 1
        assert s["total_cost_usd"] == pytest.approx(2 * (5000 * PRICE_IN + C_TOK * PRICE_OUT) / 1e6)
        # a token cap decides outcomes: changing it is another experiment
        with pytest.raises(Exception, match="different experiment"):
            run_experiment(
                experiment(
                    big, seeds=(0,), controllers=("standard",), budget=6, max_episode_tokens=9000
                ),
                out,
                progress=False,
            )


def test_unpriced_model_refuses_the_cap_unless_allowed(stub, tmp_path):
    params = llm_params(stub)
    del params["prices"]
    exp = experiment(
        stub, seeds=(0,), controllers=("standard",), policies=[{"name": "llm", "params": params}]
    )
    with pytest.raises(ExperimentError, match="allow-unpriced"):
        run_experiment(exp, tmp_path / "a", progress=False, max_cost_usd=1.0)
    assert stub.requests == [] and lines(tmp_path / "a") == []
    s = run_experiment(exp, tmp_path / "b", progress=False, max_cost_usd=1.0, allow_unpriced=True)
    assert s["ran"] == 1 and s["spent_usd"] == 0.0
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(exp.model_dump(mode="json")))
    res = CliRunner().invoke(
        cli.app,
        ["run", str(path), "--out", str(tmp_path / "c"), "--max-cost-usd", "1", "--no-progress"],
    )
    assert res.exit_code == 2 and "--allow-unpriced" in res.output


def test_full_context_needs_a_token_cap_under_a_cost_cap(stub, tmp_path):
    exp = experiment(
        stub,
        seeds=(0,),
        controllers=("standard",),
        policies=[{"name": "llm", "params": llm_params(stub, context_tokens=None)}],
    )
    with pytest.raises(ExperimentError, match="max_episode_tokens"):
        run_experiment(exp, tmp_path / "a", progress=False, max_cost_usd=1.0)
    capped = experiment(
        stub,
        seeds=(0,),
        controllers=("standard",),
        max_episode_tokens=5000,
        policies=[{"name": "llm", "params": llm_params(stub, context_tokens=None)}],
    )
    s = run_experiment(capped, tmp_path / "b", progress=False, max_cost_usd=1.0)
    assert s["ran"] == 1


# ----- the bill ------------------------------------------------------------------------------
def test_bill_equals_the_sum_of_the_records(stub, tmp_path):
    exp = experiment(stub, max_cost_usd=5.0)
    out = tmp_path / "run"
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(exp.model_dump(mode="json")))
    res = CliRunner().invoke(
        cli.app, ["run", str(path), "--out", str(out), "--no-progress", "--no-plot"]
    )
    assert res.exit_code == 0, res.output
    done = lines(out)
    bill = bill_table(episodes_frame(done))
    for r in bill.itertuples():
        mine = [x for x in done if x["controller"]["name"] == r.controller]
        assert r.n_episodes == len(mine)
        assert r.prompt_tokens == sum(x["usage"]["prompt_tokens"] for x in mine)
        assert r.completion_tokens == sum(x["usage"]["completion_tokens"] for x in mine)
        assert r.cost_usd == pytest.approx(sum(x["usage"]["cost_usd"] for x in mine))
    total = sum(x["usage"]["cost_usd"] for x in done)
    with open(out / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2
    assert sum(float(r["total_cost_usd"]) for r in rows) == pytest.approx(total, abs=1e-5)
    assert sum(int(float(r["total_prompt_tokens"])) for r in rows) == sum(
        x["usage"]["prompt_tokens"] for x in done
    )
    report = (out / "report.md").read_text()
    assert "## Bill" in report and f"Total ${total:,.4f}" in report and "cap $5.00" in report
    assert f"Total ${total:,.4f}" in res.output


def test_cli_prints_the_resume_command_with_a_higher_cap(stub, tmp_path):
    exp = experiment(stub)
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(exp.model_dump(mode="json")))
    out = tmp_path / "run"
    worst = reservation(expand(exp)[0])
    res = CliRunner().invoke(
        cli.app,
        [
            "run",
            str(path),
            "--out",
            str(out),
            "--no-progress",
            "--no-plot",
            "--max-cost-usd",
            f"{1.5 * worst:.6f}",
        ],
    )
    assert res.exit_code == 3, res.output
    text = " ".join(res.output.split())
    assert "cost cap" in text and "reached" in text and "--max-cost-usd" in text
    suggested = float(text.split("--max-cost-usd ")[-1].split()[0])
    res2 = CliRunner().invoke(
        cli.app,
        [
            "run",
            str(path),
            "--out",
            str(out),
            "--no-progress",
            "--no-plot",
            "--max-cost-usd",
            str(suggested),
        ],
    )
    assert res2.exit_code == 0, res2.output
    assert len(lines(out)) == 4


# ----- the experiment-file fields ------------------------------------------------------------
BASE = {
    "name": "x",
    "tasks": [TASK],
    "controllers": ["standard"],
    "policies": ["random"],
    "seeds": [0],
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-10, 10**8),
        st.text(max_size=5),
        st.none(),
        st.booleans(),
        st.lists(st.integers(), max_size=2),
    )
)
def test_max_cost_usd_field_accepts_exactly_positive_finite_amounts(value):
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= 1e7
    )
    if value is None:
        assert validate({**BASE, "max_cost_usd": value}).max_cost_usd is None
        return
    if ok:
        assert validate({**BASE, "max_cost_usd": value}).max_cost_usd == pytest.approx(value)
    else:
        try:
            exp = validate({**BASE, "max_cost_usd": value})
        except ExperimentError as e:
            assert "max_cost_usd" in str(e)
        else:  # pydantic's lax mode: a numeric string or a bool is still a positive amount
            assert isinstance(value, (str, bool)) and 0 < exp.max_cost_usd <= 1e7


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(st.integers(-5, 10**11), st.floats(allow_nan=True, allow_infinity=True), st.none())
)
def test_max_episode_tokens_field_accepts_exactly_positive_whole_counts(value):
    whole = isinstance(value, int) or (
        isinstance(value, float) and math.isfinite(value) and value == int(value)
    )
    ok = value is None or (whole and 1 <= value <= 10**10)
    if ok:
        exp = validate({**BASE, "max_episode_tokens": value})
        assert exp.max_episode_tokens == value
        assert ("max_episode_tokens" in exp.result_fields()) == (value is not None)
        assert all(s.max_episode_tokens == value for s in expand(exp))
    else:
        with pytest.raises(ExperimentError, match="max_episode_tokens"):
            validate({**BASE, "max_episode_tokens": value})


@pytest.mark.parametrize("policy", ["llm-langgraph", "llm-memgpt"])
def test_token_cap_holds_for_every_backend_sync_and_async(policy, tmp_path):
    import asyncio

    from pushbench.runner.episode import arun_episode, run_episode

    pytest.importorskip("langgraph")
    with StubServer(fixed_usage={"prompt_tokens": 5000, "completion_tokens": C_TOK}) as big:
        params = llm_params(big)
        if "langgraph" in policy:
            params["checkpoint_dir"] = str(tmp_path / "ckpt")
        sync = run_episode(
            TASK, "standard", policy, 0, budget=6, policy_params=params, max_episode_tokens=12000
        )
        asy = asyncio.run(
            arun_episode(
                TASK,
                "standard",
                policy,
                1,
                budget=6,
                policy_params=params,
                max_episode_tokens=12000,
            )
        )
    for rec in (sync, asy):
        assert rec["terminated_by"] == "token_cap" and rec["usage"]["calls"] == 2
        assert rec["usage"]["prompt_tokens"] + rec["usage"]["completion_tokens"] <= 12000


def test_a_reused_process_pool_takes_the_new_cap_and_drops_it(stub, tmp_path):
    from pushbench.runner.executors.local import LocalPoolExecutor

    exp = experiment(stub)
    worst = max(reservation(s) for s in expand(exp))
    with LocalPoolExecutor(workers=2) as pool:
        s = run_experiment(
            exp, tmp_path / "a", executor=pool, progress=False, max_cost_usd=1.5 * worst
        )
        assert s["stopped_by_cap"] and s["ran"] == 1
        again = run_experiment(exp, tmp_path / "a", executor=pool, progress=False)
        assert again["ran"] == 3 and again["not_run"] == 0 and not again["stopped_by_cap"]
