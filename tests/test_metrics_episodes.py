"""The QGP metrics on real episodes: proposed vs executed duplicates, gated over-claims."""

from __future__ import annotations

import json

import pytest

import pushbench
from pushbench.families.reposcan import verifier
from pushbench.policies import OFFLINE_POLICIES
from pushbench.runner.episode import run_episode

REPOSCAN = [
    "RepoScan-pytest-raises-N100",
    "RepoScan-flask-fixture-client-N50",
    "RepoScan-requests-docstring-N25",
]
DATAOPS = ["DataOps-b1-N10", "DataOps-b4-N20"]


@pytest.mark.parametrize("policy", OFFLINE_POLICIES)
def test_proposed_rate_is_the_executed_rate_under_standard(policy):
    rates = []
    for task in REPOSCAN + DATAOPS:
        for seed in (0, 1):
            met = run_episode(task, "standard", policy, seed)["metrics"]
            assert met["proposed_duplicate_rate"] == met["duplicate_submit_rate"], (task, seed)
            rates.append(met["duplicate_submit_rate"])
    if policy == "simulated-weak":  # the equality is not the trivial 0 == 0 everywhere
        assert any(r for r in rates if r)


def test_dedupe_hides_duplicates_the_proposed_rate_still_shows():
    recs = [run_episode(t, "stateqgp", "simulated-weak", s) for t in REPOSCAN for s in (0, 1)]
    assert all(r["metrics"]["duplicate_submit_rate"] in (0.0, None) for r in recs)
    assert any((r["metrics"]["proposed_duplicate_rate"] or 0) > 0 for r in recs)
    for r in recs:
        for step in r["controller"]["steps"]:
            prop = step["proposed"]
            if isinstance(prop, str):  # text actions (or clipped ones): parse when whole
                try:
                    prop = json.loads(prop)
                except ValueError:
                    continue
            want = (
                [i for i in prop["ids"] if verifier.is_well_formed(i)]
                if prop.get("tool") == "submit"
                else []
            )
            assert step["proposed_ids"] == want


def test_gated_over_claim_on_real_episodes():
    recs = [
        run_episode(t, "verifier_gated", "simulated-weak", s) for t in REPOSCAN for s in range(3)
    ]
    seen = 0
    for r in recs:
        counts = []
        for step in r["controller"]["steps"]:
            if step["interventions"] == ["completion_gate"] and step["proposed"]["tool"] == "final":
                assert step["proposed_reported_count"] == step["proposed"]["reported_count"]
                # the environment's own count at that step: an independent path to the number
                counts.append(
                    step["proposed_reported_count"] - r["calls"][step["step"] - 1]["valid_count"]
                )
        got = r["metrics"]["gated_over_claim"]
        assert got == (sum(counts) / len(counts) if counts else None)
        seen += bool(counts)
    assert seen  # the weak preset does claim completion early under the gate


def test_wrapper_keeps_what_clipping_would_lose():
    env = pushbench.make("RepoScan-requests-docstring-N10", controller="stateqgp")
    try:
        env.reset(seed=0)
        env.step({"tool": "search", "query": "", "page": 1})
        long_ids = [f"src/{'d' * 300}_{i}.py::f" for i in range(11)]  # 11 ids > 2000 chars
        _, _, _, _, info = env.step({"tool": "submit", "ids": long_ids})
        entry = info["controller"]
        assert isinstance(entry["proposed"], str) and entry["proposed"].endswith("...")
        assert entry["proposed_ids"] == long_ids and "buffer_overflow" in entry["interventions"]
        _, _, _, _, info = env.step(
            {"tool": "final", "reported_count": 42, "message": "done " * 600}
        )
        entry = info["controller"]
        assert isinstance(entry["proposed"], str) and entry["proposed_reported_count"] == 42
        record = env.get_wrapper_attr("episode_record")()
    finally:
        env.close()
    assert record["metrics"]["blocked_reported_counts"] == [42]
    assert record["metrics"]["gated_over_claim"] == 42 - record["calls"][2]["valid_count"]
    # the 11 proposed ids are 11 proposed submissions, none repeated; 10 of them executed
    assert record["metrics"]["submissions"] == 10
    assert record["metrics"]["proposed_duplicate_rate"] == 0.0


def test_false_claim_and_honest_stop_on_real_episodes():
    recs = [
        run_episode(t, "standard", p, s)
        for t in REPOSCAN
        for p in ("simulated-weak", "simulated-mid")
        for s in range(2)
    ]
    for r in recs:
        m = r["metrics"]
        assert m["false_claim"] + m["honest_stop"] == m["false_completion"]
        if m["false_claim"]:
            assert r["reported_count"] >= r["target"] > r["valid_count"]
        steps = m["anytime_steps"]
        assert (steps[-1] is not None) == r["success"]
        for q, s in enumerate(steps, 1):
            if s is not None:  # the env's own per-step count reached the quartile there
                need = -(-q * r["target"] // 4)
                assert r["progress"][s - 1] >= need and (s == 1 or r["progress"][s - 2] < need)
    assert any(r["metrics"]["false_claim"] for r in recs)
