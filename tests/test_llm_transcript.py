"""LLM records keep a transcript: every model reply with its token use and every answer sent back.

The stub chat server (:mod:`pushbench.policies.llm.stub`) is a real HTTP server on 127.0.0.1; the
run viewer renders the transcript per step (tests/test_viewer*.py).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from pushbench.policies.llm.stub import StubServer
from pushbench.records import episode_line
from pushbench.runner.episode import run_episode


def _episode(policy: str, tmp_path, budget: int = 8) -> dict:
    with StubServer() as server:
        params = {"model": "stub-model", "base_url": server.url, "api_key_env": None, "timeout": 10}
        if "langgraph" in policy:
            params["checkpoint_dir"] = str(tmp_path / "checkpoints")
        return run_episode(
            "RepoScan-N10", "stateqgp", policy, 3, budget=budget, policy_params=params
        )


@pytest.mark.parametrize("policy", ["llm", "llm-langgraph"])
def test_transcript_holds_each_reply_its_tokens_and_each_answer(policy, tmp_path):
    rec = _episode(policy, tmp_path)
    turns = [e for e in rec["transcript"] if "turn" in e]
    answers = [e for e in rec["transcript"] if "turn" not in e]
    assert [t["turn"] for t in turns] == list(range(1, rec["usage"]["calls"] + 1))
    assert sum(t["prompt_tokens"] for t in turns) == rec["usage"]["prompt_tokens"]
    assert sum(t["completion_tokens"] for t in turns) == rec["usage"]["completion_tokens"]
    assert all(t["message"]["role"] == "assistant" for t in turns)
    # Every step but the last was answered (the episode ended with the last one), in order.
    assert [a["step"] for a in answers] == list(range(1, rec["steps_used"]))
    # strict=False: the last step has no answer (the episode ended)
    for a, call in zip(answers, rec["calls"], strict=False):
        obs = json.loads(a["message"]["content"].splitlines()[-1])
        assert obs["tool"] == call["tool"] and obs["ok"] == call["ok"]
    assert "transcript" not in episode_line(rec)  # trace only: lines stay small


def test_both_backends_record_the_same_transcript(tmp_path):
    a, b = _episode("llm", tmp_path), _episode("llm-langgraph", tmp_path)
    assert a["transcript"] == b["transcript"]
