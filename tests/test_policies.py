"""Offline policies: the reference agent solves the suite; simulated agents are deterministic."""

from __future__ import annotations

import json

import pytest

from pushbench.families.reposcan.predicates import parse_predicate
from pushbench.policies import OFFLINE_POLICIES, make_policy
from pushbench.policies.reposcan.judge import judge, property_from_objective
from pushbench.runner.episode import run_episode
from pushbench.tasks import builtin_tasks

SINGLE_TASKS = sorted(t for t in builtin_tasks() if t.startswith("RepoScan-") and t.count("-") >= 3)


def test_diligent_solves_at_least_35_of_36_tasks():
    assert len(SINGLE_TASKS) == 36
    records = [run_episode(t, "standard", "diligent", 0) for t in SINGLE_TASKS]
    solved = [r["task_id"] for r in records if r["success"]]
    assert len(solved) >= 35, sorted(set(SINGLE_TASKS) - set(solved))
    for r in records:
        # Perfect books: no duplicate, never over-claims, never stops early.
        assert r["metrics"]["duplicate_submit_rate"] in (0.0, None)
        if r["terminated_by"] == "final":
            assert r["reported_count"] == r["valid_count"]
        assert not r["metrics"]["premature_stop"]


def test_diligent_reads_only_observations():
    # The policy never receives the environment: its whole input is the observation text.
    pol = make_policy("diligent", seed=0)
    first = json.dumps(
        {
            "tool": "reset",
            "ok": True,
            "result": {
                "family": "reposcan",
                "objective": "find definitions that has a docstring (its first statement is a "
                "string literal). at least 3",
                "target": 3,
                "budget": 10,
                "tools": [],
            },
        }
    )
    pol.reset(first)
    assert pol.act(first) == {"tool": "search", "query": "", "page": 1}


@pytest.mark.parametrize("name", OFFLINE_POLICIES)
def test_same_seed_same_trajectory(name):
    a = run_episode("RepoScan-requests-returns-N25", "standard", name, 7)
    b = run_episode("RepoScan-requests-returns-N25", "standard", name, 7)
    assert a["calls"] == b["calls"] and a["metrics"] == b["metrics"]


def test_different_seeds_differ_for_simulated_agents():
    runs = {
        json.dumps(
            run_episode("RepoScan-pytest-raises-N50", "standard", "simulated-weak", s)["calls"]
        )
        for s in range(4)
    }
    assert len(runs) > 1


def test_simulated_records_are_labelled():
    rec = run_episode("RepoScan-N10", "standard", "simulated-mid", 0)
    assert rec["simulated"] is True and rec["policy"]["simulated"] is True
    assert rec["policy"]["mechanisms"]["window"] == 8
    assert run_episode("RepoScan-N10", "standard", "diligent", 0)["simulated"] is False


def test_simulated_presets_order_by_strength_under_standard():
    """Mechanisms, not rules: weaker presets over-claim more often at a large target."""

    def false_completions(name):
        return sum(
            run_episode(t, "standard", name, s)["metrics"]["false_completion"]
            for t in SINGLE_TASKS
            if t.endswith("-N100")
            for s in range(2)
        )

    assert false_completions("simulated-weak") > false_completions("simulated-strong")


@pytest.mark.parametrize(
    "spec", ["docstring", "assert", "returns", "raises", "decorated", "fixture:client"]
)
def test_property_from_objective(spec):
    # exact: the atom's full description, word for word (see tests/test_judge.py for the rest)
    objective = f"... that {parse_predicate(spec).description}. ..."
    assert property_from_objective(objective) == spec
    with pytest.raises(ValueError, match="cannot tell the property"):
        property_from_objective(
            objective.replace(
                parse_predicate(spec).description, parse_predicate(spec).description[:20]
            )
        )


def test_judge_reads_snippets():
    hit = {"id": "a.py::f", "snippet": 'def f(x):\n    """Doc."""\n    return x'}
    assert judge("docstring", hit) == "yes"
    assert judge("returns", hit) == "yes"
    assert judge("raises", hit) == "no"  # whole function visible, no raise
    long_fn = {"id": "a.py::g", "snippet": "\n".join(["def g():"] + ["    x = 1"] * 7)}
    assert judge("raises", long_fn) == "maybe"  # cut snippet: cannot rule it out
    test_fn = {"id": "t.py::test_x", "snippet": "def test_x(app, client):\n    pass"}
    assert judge("fixture:client", test_fn) == "yes"
    assert judge("fixture:monkeypatch", test_fn) == "no"
