"""The OpenEnv adapter (pushbench.adapters.openenv_env): scripted clients, no model.

Rollouts of offline policies (simulated) through the environment class and through a real
OpenEnv server (uvicorn in a thread, WebSocket client): the episode record equals
``run_episode``'s, each step's ``accepted`` part equals the ledger's reward, and the return
equals the one recomputed from the record's metrics.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

# The extra is in `test`: under CI a missing package fails the module instead of skipping it.
if os.environ.get("CI", "").lower() == "true":
    import openenv  # noqa: F401
else:
    pytest.importorskip("openenv")

from pushbench import metrics
from pushbench.adapters.openenv_env import (
    PushBenchAction,
    PushBenchClient,
    PushBenchEnvironment,
    RewardWeights,
    create_pushbench_app,
    episode_return,
)
from pushbench.adapters.openenv_rollout import policy_rollout
from pushbench.runner.episode import run_episode

WEIGHTS = {"accepted": 0.1, "success": 1.0, "verified_fraction": 0.5, "duplicate": 0.25}


class LocalSession:
    """The environment class driven in-process with the client's calling convention."""

    def __init__(self) -> None:
        self.env = PushBenchEnvironment()

    def reset(self, **kw):
        return _Result(self.env.reset(**kw))

    def step(self, action):
        return _Result(self.env.step(action))


class _Result:
    def __init__(self, obs) -> None:
        self.observation, self.reward, self.done = obs, obs.reward, obs.done


def _expected_return(record: dict, w: dict) -> float:
    """The return from the record's metrics (not from the adapter's own helper)."""
    m = metrics.episode_metrics(record)
    dups = round((m["duplicate_submit_rate"] or 0.0) * m["submissions"])
    return (
        w["accepted"] * m["valid_count"]
        - w["duplicate"] * dups
        + w["success"] * float(m["success"])
        + w["verified_fraction"] * min(m["valid_count"] / record["target"], 1.0)
    )


@pytest.mark.parametrize(
    "task,controller,policy,seed",
    [
        ("RepoScan-N10", "stateqgp", "diligent", 0),
        ("RepoScan-N10", "standard", "simulated-weak", 1),
        ("DataOps-N3", "standard", "random", 2),
        ("SWELite-N3", "verifier_gated", "diligent", 0),
    ],
)
def test_rollout_rewards_equal_metrics_from_the_record(task, controller, policy, seed):
    out = policy_rollout(
        LocalSession(), policy, task, seed, controller=controller, reward_weights=WEIGHTS
    )
    ref = run_episode(task, controller, policy, seed)
    rec = out.record
    assert rec is not None and rec["calls"] == ref["calls"]
    assert rec["metrics"] == ref["metrics"] == metrics.episode_metrics(rec)
    assert len(out.rewards) == rec["steps_used"] == len(rec["calls"])
    # newly accepted per step is the ledger's reward, step by step
    assert [p["accepted"] for p in out.reward_parts] == [c["reward"] for c in rec["calls"]]
    assert out.total == pytest.approx(_expected_return(rec, WEIGHTS), abs=1e-12)
    assert out.total == pytest.approx(episode_return(rec, WEIGHTS), abs=1e-12)
    assert out.reward_parts[-1]["success"] == float(ref["success"])


def test_duplicate_penalty_counts_duplicate_verdicts():
    env = PushBenchEnvironment()
    obs = env.reset(
        task="RepoScan-N10",
        seed=0,
        instance="requests-assert",
        reward_weights={"accepted": 0.0, "duplicate": 1.0},
    )
    assert obs.tools and obs.qgp["valid_count"] == 0
    ident = "requests/api.py::request"
    first = env.step(PushBenchAction(tool="submit", arguments={"ids": [ident]}))
    again = env.step(PushBenchAction(tool="submit", arguments={"ids": [ident, ident]}))
    assert first.reward_parts["duplicates"] == 0.0
    assert again.reward_parts["duplicates"] == 2.0 and again.reward == -2.0
    final = env.step(PushBenchAction(tool="final", arguments='{"reported_count": 0}'))
    assert final.done and final.record["metrics"]["duplicate_submit_rate"] == pytest.approx(2 / 3)
    assert episode_return(final.record, {"accepted": 0.0, "duplicate": 1.0}) == -2.0


def test_text_replies_and_bad_argument_text_cost_one_step_each():
    env = PushBenchEnvironment()
    env.reset(task="DataOps-N3", seed=0)
    a = env.step(PushBenchAction(text="I will now list the units"))
    b = env.step(PushBenchAction(tool="list_units", arguments="{not json"))
    assert '"not_object"' in a.text and '"ok":false' in b.text
    assert env.state.step_count == 2 and not b.done


def test_reset_errors_are_clear_and_keep_the_previous_episode():
    env = PushBenchEnvironment()
    env.reset(task="RepoScan-N10", seed=0)
    with pytest.raises(KeyError, match="RepoScan-N10"):
        env.reset(task="RepoScan-N1O", seed=0)
    with pytest.raises(ValueError, match="budget"):
        env.reset(task="RepoScan-N10", seed=0, budget=0)
    with pytest.raises(ValueError, match="RewardWeights"):
        env.reset(task="RepoScan-N10", seed=0, reward_weights={"acceptd": 1.0})
    with pytest.raises(ValueError, match="unknown reset arguments"):
        env.reset(task="RepoScan-N10", seed=0, target=5)
    assert env.step(PushBenchAction(tool="status")).qgp["steps_used"] == 1
    with pytest.raises(RuntimeError, match="reset"):
        PushBenchEnvironment().step(PushBenchAction(tool="status"))


@given(
    tool=st.one_of(st.none(), st.text(max_size=20)),
    text=st.one_of(st.none(), st.text()),
    arguments=st.one_of(
        st.text(max_size=200), st.dictionaries(st.text(max_size=8), st.integers(), max_size=3)
    ),
)
def test_any_action_is_one_step_or_refused_at_validation(tool, text, arguments):
    try:
        action = PushBenchAction(tool=tool, text=text, arguments=arguments)
    except ValueError:
        assert (tool is None) == (text is None)
        return
    env = PushBenchEnvironment()
    env.reset(task="RepoScan-N10", seed=0, budget=5)
    obs = env.step(action)
    assert env.state.step_count == 1 and obs.qgp["steps_used"] == 1
    assert obs.text.isascii()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def start_server(max_concurrent: int = 4):
    """A real PushBench OpenEnv server (uvicorn in a thread) on a free port; yields its URL."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_pushbench_app(max_concurrent), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def server_url():
    with start_server() as url:
        yield url


def test_rollouts_over_the_server_equal_the_runner(server_url):
    with PushBenchClient(base_url=server_url).sync() as env:
        for seed in (0, 1):
            out = policy_rollout(
                env, "diligent", "RepoScan-N10", seed, controller="stateqgp", reward_weights=WEIGHTS
            )
            ref = run_episode("RepoScan-N10", "stateqgp", "diligent", seed)
            assert out.record["metrics"] == ref["metrics"]
            assert out.record["calls"] == ref["calls"]
            assert out.total == pytest.approx(_expected_return(out.record, WEIGHTS), abs=1e-12)
        state = env.state()
        assert state.task_id == "RepoScan-N10" and state.seed == 1 and state.done


def test_two_sessions_are_independent(server_url):
    with (
        PushBenchClient(base_url=server_url).sync() as a,
        PushBenchClient(base_url=server_url).sync() as b,
    ):
        a.reset(task="RepoScan-N10", seed=0)
        b.reset(task="DataOps-N3", seed=0)
        a.step(PushBenchAction(tool="status"))
        assert a.state().step_count == 1 and b.state().step_count == 0
        assert b.state().task_id == "DataOps-N3"


def test_reward_weights_model_rejects_negative_penalty():
    with pytest.raises(ValueError):
        RewardWeights(duplicate=-1.0)


def test_server_reports_a_bad_reset_and_the_session_survives(server_url):
    with PushBenchClient(base_url=server_url).sync() as env:
        with pytest.raises(Exception, match="RepoScan-N10"):
            env.reset(task="RepoScan-N1O", seed=0)
        result = env.reset(task="RepoScan-N10", seed=0)
        assert result.observation.tools and not result.done
