"""The server's context window: discovered from its API, learned from its refusal, fitted.

Against the scripted server (:mod:`pushbench.policies.llm.stub`, a real HTTP server on
loopback) with ``window=W``: it refuses, as llama-cpp-python does, every request whose prompt
(counted denser than the policies' chars/4 estimate) plus ``max_tokens`` exceeds ``W``, and
with ``advertise_window`` reports ``max_model_len`` in ``/v1/models`` as vLLM does. Both
backends must trim to fit and retry once instead of ending the episode, and record it.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("openai")

from pushbench import metrics
from pushbench.analysis.outcomes import error_cause, outcome_lines
from pushbench.policies.errors import is_context_error
from pushbench.policies.llm import window as W
from pushbench.policies.llm.stub import StubServer
from pushbench.runner.episode import run_episode

TASK = "RepoScan-N10"
LLAMA_CPP_PYTHON = (
    "This model's maximum context length is 4096 tokens. However, you requested "
    "4608 tokens (4096 in the messages, 512 in the completion). Please reduce "
    "the length of the messages or completion."
)


def params(url: str, policy: str, tmp_path, **extra) -> dict:
    p = {
        "model": "stub-model",
        "base_url": url,
        "api_key_env": None,
        "max_tokens": 64,
        "backoff_base": 0.001,
        "backoff_max": 0.01,
        "timeout": 10,
    }
    if "langgraph" in policy:
        p["checkpoint_dir"] = str(tmp_path / "checkpoints")
    return {**p, **extra}


def sizes(stub: StubServer) -> list[int]:
    """The stub's count of each request's prompt (its own, denser tokenizer)."""
    return [
        len(json.dumps([*b.get("messages", ()), *b.get("tools", ())])) // 3 for b in stub.requests
    ]


@pytest.mark.parametrize("policy", ["llm", "llm-langgraph"])
def test_a_refused_call_is_trimmed_to_fit_and_retried_once(policy, tmp_path):
    window = 3000
    with StubServer(window=window) as stub:
        rec = run_episode(
            TASK, "standard", policy, 0, budget=14, policy_params=params(stub.url, policy, tmp_path)
        )
    assert rec["terminated_by"] != "error", rec.get("error")
    assert rec["steps_used"] == 14 and rec["metrics"] == metrics.episode_metrics(rec)
    llm = rec["llm"]
    assert llm["context_window"] == window  # learned from the refusal's message
    assert llm["context_retries"] == len(llm["context_retry"]) >= 1
    first = llm["context_retry"][0]
    assert first["window"] == window and first["prompt_tokens"] > 0
    assert first["budget"] < first["sent_est"]  # the retry sent less than the refusal
    assert llm["context_token_ratio"] > 1.0  # the stub counts denser than chars/4
    assert "maximum context length" in first["message"]
    n = sizes(stub)
    refused = [i for i, s in enumerate(n) if s + 64 > window]
    assert len(refused) == llm["context_retries"]  # each refusal was followed by a retry
    assert all(n[i + 1] + 64 <= window for i in refused)
    assert rec["usage"]["calls"] == len(n) - len(refused)  # refusals are not model calls


def test_the_window_advertised_by_the_server_is_fitted_before_any_call(tmp_path):
    window = 20000
    with StubServer(window=window, advertise_window=True) as stub:
        rec = run_episode(
            TASK,
            "standard",
            "llm",
            0,
            budget=3,
            policy_params=params(stub.url, "llm", tmp_path, context_tokens=None),
        )
    llm = rec["llm"]
    assert llm["context_window"] == window and llm["context_retries"] == 0
    # the full-context arm is held to the window too: (W - max_tokens - W/32) - tools
    assert llm["context_budget"] is not None and llm["context_budget"] < window - 64


def test_configured_window_needs_no_request_and_caps_the_budget(tmp_path):
    with StubServer() as stub:
        rec = run_episode(
            TASK,
            "standard",
            "llm",
            0,
            budget=2,
            policy_params=params(
                stub.url, "llm", tmp_path, context_window=2048, discover_window=False
            ),
        )
    assert rec["llm"]["context_window"] == 2048
    assert rec["llm"]["context_budget"] < 2048 - 64 and rec["llm"]["context_retries"] == 0


def test_without_a_window_nothing_changes(tmp_path):
    with StubServer() as stub:
        rec = run_episode(
            TASK,
            "standard",
            "llm",
            0,
            budget=2,
            policy_params=params(stub.url, "llm", tmp_path, context_tokens=1500),
        )
    llm = rec["llm"]
    assert llm["context_window"] is None and llm["context_budget"] == 1500
    assert llm["context_retries"] == 0 and llm["context_retry"] == []


def test_a_second_refusal_of_the_same_call_ends_the_episode_as_a_context_error(tmp_path):
    refusal = {"status": 400, "message": LLAMA_CPP_PYTHON}
    with StubServer(script=[refusal, refusal]) as stub:
        rec = run_episode(
            TASK, "standard", "llm", 0, budget=4, policy_params=params(stub.url, "llm", tmp_path)
        )
    assert rec["terminated_by"] == "error" and rec["error"]["type"] == "context_length"
    assert len(stub.requests) == 2  # one retry, no more
    assert rec["llm"]["context_retries"] == 1
    assert error_cause(rec["error"]) == "context length exceeded"
    assert outcome_lines([rec]) == [
        "1 episode ended with backend errors: context length exceeded (1); excluded from "
        "metrics; see report.md",
        "1 model call(s) in 1 episode exceeded the context window and were retried with a "
        "trimmed context (llm.context_retries)",
    ]


def test_other_bad_requests_are_not_retried(tmp_path):
    with StubServer(script=[{"status": 400, "message": "unsupported parameter: seed"}]) as stub:
        rec = run_episode(
            TASK, "standard", "llm", 0, budget=4, policy_params=params(stub.url, "llm", tmp_path)
        )
    assert rec["terminated_by"] == "error" and rec["error"]["type"] == "bad_request"
    assert len(stub.requests) == 1 and rec["llm"]["context_retries"] == 0
    assert error_cause(rec["error"]) == "bad request"


# ----- reading what servers say ---------------------------------------------------------------
def test_overflow_numbers_of_known_servers():
    assert W.overflow_numbers(LLAMA_CPP_PYTHON) == (4096, 4096)
    assert W.overflow_numbers(
        "This model's maximum context length is 8192 tokens. However, "
        "your messages resulted in 9000 tokens. Please reduce the "
        "length of the messages."
    ) == (8192, 9000)
    assert W.overflow_numbers(
        "the request exceeds the available context size, try increasing it"
    ) == (None, None)
    assert is_context_error(400, "the request exceeds the available context size")
    assert is_context_error(None, "whatever", "context_length_exceeded")
    assert not is_context_error(400, "unsupported parameter: seed")
    assert not is_context_error(500, LLAMA_CPP_PYTHON)  # a server error is transient


def test_window_fields_of_each_api():
    assert W._from_models({"data": [{"id": "m", "max_model_len": 32768}]}, "m") == 32768
    assert W._from_models({"data": [{"id": "a", "max_model_len": 1}, {"id": "b"}]}, "b") is None
    assert W._from_models({"data": [{"id": "only", "context_length": 4096}]}, "x") == 4096
    assert (
        W._from_models({"object": "list", "data": [{"id": "m", "owned_by": "me"}]}, "m") is None
    )  # llama-cpp-python: ids only
    assert W._from_props({"default_generation_settings": {"n_ctx": 8192}}) == 8192
    assert W._from_ollama({"parameters": 'stop "<|im_end|>"\nnum_ctx 16384'}) == 16384
    assert W._from_ollama({"parameters": "temperature 0.2"}) is None


def test_fitted_budget():
    # (window - max_tokens - window // 32) / ratio - tools, at least 1
    assert W.fitted_budget(4096, 512, 600, 1.0) == 4096 - 512 - 128 - 600
    assert W.fitted_budget(4096, 512, 600, 1.5) == int((4096 - 512 - 128) / 1.5 - 600)
    assert W.fitted_budget(1024, 1000, 600, 1.0) == 1


@given(
    st.text(max_size=400),
    st.one_of(st.none(), st.integers(-5, 700)),
    st.one_of(st.none(), st.text(max_size=30)),
)
def test_reading_any_refusal_never_raises(message, status, code):
    window, prompt = W.overflow_numbers(message)
    assert window is None or window > 0
    assert prompt is None or prompt >= 0
    assert isinstance(is_context_error(status, message, code), bool)
    assert isinstance(error_cause({"type": code, "status": status, "message": message}), str)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
        max_leaves=12,
    )
)
def test_any_api_payload_gives_a_window_or_none(payload):
    for got in (W._from_models(payload, "m"), W._from_props(payload), W._from_ollama(payload)):
        assert got is None or (isinstance(got, int) and got > 0)
