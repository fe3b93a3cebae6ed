"""The LangGraph backend's checkpoints after issue 31: segments of ``checkpoint_every`` steps
under ``durability="exit"`` (runs without a checkpointer; the policy writes each segment's
state), the lazy :class:`EpisodeSaver`. A process killed mid-episode
(SIGKILL: nothing runs at exit) resumes from its last segment and ends with the record of an
uninterrupted run; a finished episode leaves no file; an absent file is "no checkpoint"."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from pushbench.policies.llm.checkpoints import EpisodeSaver
from pushbench.policies.llm.stub import StubServer
from pushbench.runner.episode import run_episode

TASK = "RepoScan-N10"

# Runs one LangGraph episode and SIGKILLs its own process during environment step KILL_AT.
CHILD = textwrap.dedent("""
    import json, os, signal, sys
    from pushbench.envs.base import QGPEnv
    from pushbench.runner.episode import run_episode
    params, kill_at, budget = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    # _step: where step() and the controller wrapper's step_decoded() both go
    step, n = QGPEnv._step, [0]
    def killing_step(self, action, call):
        n[0] += 1
        if n[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return step(self, action, call)
    QGPEnv._step = killing_step
    run_episode(sys.argv[4], "standard", "llm-langgraph", 0, budget=budget, policy_params=params)
""")


def _same_episode(a: dict, b: dict) -> None:
    for key in ("calls", "metrics", "terminated_by", "steps_used", "progress"):
        assert a[key] == b[key], key
    # The stub numbers tool-call ids over its lifetime (call_<request>_<i>), so ids and the
    # token counts they feed differ between any two runs against one stub; the rest is equal.
    ids = re.compile(r"call_\d+_\d+")

    def plain(transcript):
        return ids.sub(
            "ID",
            json.dumps(
                [
                    {k: v for k, v in e.items() if k not in ("prompt_tokens", "completion_tokens")}
                    for e in transcript
                ]
            ),
        )

    assert plain(a["transcript"]) == plain(b["transcript"])
    assert a["llm"]["model_calls"] == b["llm"]["model_calls"]


@pytest.mark.parametrize("every,kill_at", [(3, 8), (4, 5)])
def test_a_killed_episode_resumes_to_the_same_record(tmp_path, every, kill_at):
    budget = 10
    with StubServer() as stub:  # the deterministic fallback agent answers every call
        params = {
            "model": "stub-model",
            "base_url": stub.url,
            "api_key_env": None,
            "timeout": 10,
            "checkpoint_dir": str(tmp_path / "ck"),
            "checkpoint_every": every,
        }
        reference = run_episode(
            TASK, "standard", "llm-langgraph", 0, budget=budget, policy_params=params
        )
        assert reference["llm"]["resumed_steps"] == 0 and reference["steps_used"] == budget
        assert not list((tmp_path / "ck").glob("*"))  # finished: nothing left behind
        child = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(params), str(kill_at), str(budget), TASK],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert child.returncode == -9, child.stderr[-2000:]
        assert list((tmp_path / "ck").glob("*.sqlite"))  # the last segment's checkpoint
        resumed = run_episode(
            TASK, "standard", "llm-langgraph", 0, budget=budget, policy_params=params
        )
    done_before_kill = kill_at - 1
    assert resumed["llm"]["resumed_steps"] == done_before_kill // every * every > 0
    _same_episode(resumed, reference)
    assert not list((tmp_path / "ck").glob("*.sqlite*"))


def test_sync_durability_still_checkpoints_every_superstep(tmp_path):
    with StubServer() as stub:
        params = {
            "model": "stub-model",
            "base_url": stub.url,
            "api_key_env": None,
            "timeout": 10,
            "checkpoint_dir": str(tmp_path / "ck"),
            "durability": "sync",
            "keep_checkpoints": True,
        }
        rec = run_episode(TASK, "standard", "llm-langgraph", 0, budget=4, policy_params=params)
    (db,) = (tmp_path / "ck").glob("*.sqlite")
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("select count(*) from checkpoints").fetchone()
    # One per superstep: the input, the start, and one per agent turn (one step each here).
    assert rec["steps_used"] == 4 and rec["llm"]["model_calls"] == 4 and count == 2 + 4


def test_episode_saver_is_lazy_and_discards_after_the_end(tmp_path):
    from langgraph.checkpoint.base import empty_checkpoint

    path = tmp_path / "t.sqlite"
    done = [False]
    saver = EpisodeSaver(path, discard=lambda: done[0])
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    assert saver.get_tuple(cfg) is None and list(saver.list(cfg)) == []
    assert not path.exists()  # reading an absent checkpoint creates nothing
    done[0] = True
    ck = empty_checkpoint()
    out = saver.put(cfg, ck, {}, {})
    assert out["configurable"]["checkpoint_id"] == ck["id"] and not path.exists()
    done[0] = False
    saver.put(cfg, ck, {"step": 1}, {})
    assert path.exists() and saver.get_tuple(cfg).checkpoint["id"] == ck["id"]
    saver.close()
    again = EpisodeSaver(path)
    assert again.get_tuple(cfg).metadata["step"] == 1
    again.close()


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_checkpoint_every_is_checked(bad):
    from pushbench.policies import make_policy

    with pytest.raises(ValueError, match="checkpoint_every"):
        make_policy("llm-langgraph", seed=0, model="m", checkpoint_every=bad)


def _stub_params(stub, tmp_path, **extra) -> dict:
    return {
        "model": "stub-model",
        "base_url": stub.url,
        "api_key_env": None,
        "timeout": 10,
        "checkpoint_dir": str(tmp_path / "ck"),
        **extra,
    }


def _thread_values(db):
    """The latest checkpoint's state and the number of checkpoints in a kept thread file."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from pushbench.policies.llm.graph import build_graph

    with sqlite3.connect(db, check_same_thread=False) as conn:
        (count,) = conn.execute("select count(*) from checkpoints").fetchone()
        (thread,) = conn.execute("select distinct thread_id from checkpoints").fetchone()
        graph = build_graph(False).copy(update={"checkpointer": SqliteSaver(conn)})
        snapshot = graph.get_state({"configurable": {"thread_id": thread}})
    return snapshot.values, count


def test_exit_writes_one_checkpoint_per_segment_and_none_at_the_end(tmp_path):
    """durability exit: runs carry no checkpointer; the policy writes the state at each
    segment's end (after steps 3, 6, 9 here), and nothing once the episode has ended."""
    with StubServer() as stub:
        params = _stub_params(stub, tmp_path, checkpoint_every=3, keep_checkpoints=True)
        rec = run_episode(TASK, "standard", "llm-langgraph", 0, budget=10, policy_params=params)
    (db,) = (tmp_path / "ck").glob("*.sqlite")
    values, count = _thread_values(db)
    assert rec["steps_used"] == 10 and count == 3
    ep = values["episode"]
    assert len(ep["env_actions"]) == 9 and ep["pause"] and not ep["done"]
    assert ep["transcript"] == rec["transcript"][: len(ep["transcript"])]


def test_the_policy_state_is_the_graph_state(tmp_path):
    """Runs stream nothing (stream_mode=[]): the policy's state after a run, built from the
    turn's writes, is the state LangGraph holds (read back from the sync checkpoint)."""
    from pushbench.policies import make_policy

    with StubServer() as stub:
        params = _stub_params(stub, tmp_path, durability="sync", keep_checkpoints=True)
        pol = make_policy("llm-langgraph", seed=0, **params)
        rec = run_episode(TASK, "standard", pol, 0, budget=5)
    (db,) = (tmp_path / "ck").glob("*.sqlite")
    values, _ = _thread_values(db)
    assert rec["steps_used"] == 5 and values["episode"]["done"]
    assert json.dumps(values, sort_keys=True) == json.dumps(pol._values, sort_keys=True)


def test_episode_saver_opens_one_connection_for_concurrent_writers(tmp_path, monkeypatch):
    """sync/async: LangGraph writes from several executor threads at once. Each opening its own
    connection would leave one dropped and the file locked ("database is locked" 60 s later)."""
    import threading

    from langgraph.checkpoint.base import empty_checkpoint

    from pushbench.policies.llm import checkpoints

    connect, opened = sqlite3.connect, []

    def slow_connect(*args, **kwargs):  # widens the window two unguarded openers would share
        opened.append(1)
        threading.Event().wait(0.05)
        return connect(*args, **kwargs)

    monkeypatch.setattr(checkpoints.sqlite3, "connect", slow_connect)
    saver = EpisodeSaver(tmp_path / "t.sqlite")
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "x"}}
    start = threading.Barrier(4)

    def write(i: int) -> None:
        start.wait()
        if i % 2:
            saver.put(cfg, empty_checkpoint(), {"step": i}, {})
        else:
            saver.put_writes(cfg, [("ch", i)], f"task{i}")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    saver.close()
    assert len(opened) == 1
