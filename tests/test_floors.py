"""The no-judgement floors: ``exhaustive`` on RepoScan, the guessing floor on DataOps-lite.

RepoScan's floor is predicted independently from the hidden valid set and the browse order;
DataOps' guessing floor must solve nothing, and no answer value may be common enough across
generated units for any guesser to profit.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict

import numpy as np
import pytest

import pushbench
from pushbench.envs.sandbox import Workspace
from pushbench.families.dataops import datasets
from pushbench.families.dataops import units as U
from pushbench.families.reposcan import env as reposcan
from pushbench.policies import OFFLINE_POLICIES, POLICIES, make_policy
from pushbench.policies import offline as family_agents
from pushbench.policies.dataops.floor import CHEAP_GUESSES
from pushbench.runner.episode import run_episode
from pushbench.tasks import builtin_tasks, get_task, instance_config, list_tasks

REPOSCAN = sorted(t for t in builtin_tasks() if t.startswith("RepoScan-") and t.count("-") >= 3)
DATAOPS = list_tasks("DataOps-b")


@pytest.fixture(scope="module")
def exhaustive_runs():
    return {t: run_episode(t, "standard", "exhaustive", 0) for t in REPOSCAN}


def _predicted_success(task_id: str) -> bool:
    """Success predicted from the valid set: N valid ids among the pages 2 steps each buy."""
    spec = get_task(task_id)
    [instance] = spec.instances
    index = reposcan._search_index(instance_config("reposcan", instance)["snapshot"])
    valid = reposcan._valid_set(instance)
    found, page = 0, 1
    while 2 * page <= spec.budget:  # one search + one submit per page of 10
        hits, has_more, _ = index.page("", page)
        found += sum(h.ident in valid for h in hits)
        if found >= spec.target or not has_more:
            break
        page += 1
    return found >= spec.target


def test_exhaustive_success_is_what_the_valid_set_predicts(exhaustive_runs):
    assert len(exhaustive_runs) == 36
    by_target = defaultdict(list)
    for task_id, rec in exhaustive_runs.items():
        assert rec["success"] == _predicted_success(task_id), task_id
        by_target[rec["target"]].append(rec["success"])
    solved = {n: sum(v) for n, v in sorted(by_target.items())}
    print(f"exhaustive floor (standard): {sum(solved.values())}/36 solved; per N {solved}")
    assert 0 < sum(solved.values()) < 36  # the floor separates instances: neither trivial nor 0


def test_exhaustive_keeps_perfect_books_and_never_judges(exhaustive_runs):
    rec = exhaustive_runs["RepoScan-pytest-raises-N25"]
    searches = [c["args"] for c in rec["calls"] if c["tool"] == "search"]
    assert [s["page"] for s in searches] == list(range(1, len(searches) + 1))
    assert all(s["query"] == "" for s in searches)
    index = reposcan._search_index("pytest")
    browse = [h.ident for p in range(1, len(searches) + 1) for h in index.page("", p)[0]]
    submitted = [i for c in rec["calls"] if c["tool"] == "submit" for i in c["args"]["ids"]]
    assert submitted == browse[: len(submitted)]  # every candidate, in order, no judgement
    for r in exhaustive_runs.values():
        assert r["metrics"]["duplicate_submit_rate"] in (0.0, None)
        if r["terminated_by"] == "final":
            assert r["reported_count"] == r["valid_count"]
        else:
            assert r["terminated_by"] == "budget" and not r["success"]


def test_exhaustive_is_a_labelled_deterministic_floor():
    pol = make_policy("exhaustive", seed=3)
    assert pol.describe()["floor"] is True and pol.describe()["simulated"] is False
    assert "exhaustive" in POLICIES and "exhaustive" in OFFLINE_POLICIES
    assert pol.Params.model_config["extra"] == "forbid"
    with pytest.raises(ValueError, match="judge"):  # PolicyParamsError, naming the param
        make_policy("exhaustive", seed=0, judge=True)
    a = run_episode("RepoScan-flask-decorated-N25", "stateqgp", "exhaustive", 0)
    b = run_episode("RepoScan-flask-decorated-N25", "stateqgp", "exhaustive", 5)
    assert a["calls"] == b["calls"]  # no randomness at all: the seed changes nothing
    with pytest.raises(NotImplementedError, match="SWE-lite"):
        family_agents.exhaustive_for("swelite", np.random.default_rng(0))


def test_precision_separates_judging_agents_from_the_floor(exhaustive_runs):
    def mean_precision(name):
        recs = (
            exhaustive_runs.values()
            if name == "exhaustive"
            else [run_episode(t, "standard", name, 0) for t in REPOSCAN]
        )
        return statistics.mean(r["metrics"]["precision"] for r in recs)

    got = {name: mean_precision(name) for name in ("exhaustive", "simulated-mid", "diligent")}
    print(
        "mean precision over 36 RepoScan tasks (standard, seed 0):",
        {k: round(v, 3) for k, v in got.items()},
    )
    assert got["exhaustive"] < got["simulated-mid"] < got["diligent"]


# ----- DataOps: the guessing floor ------------------------------------------------------------


def test_guessing_floor_solves_no_dataops_task():
    records = [run_episode(t, "standard", "exhaustive", 0) for t in DATAOPS]
    assert len(records) == 24
    solved = [r["task_id"] for r in records if r["success"]]
    print(
        f"DataOps guessing floor: {len(solved)}/24 solved, accepted units "
        f"{sum(r['valid_count'] for r in records)}"
    )
    assert solved == []
    for r in records:
        tools = Counter(c["tool"] for c in r["calls"])
        assert not tools.keys() & {"read_file", "write_file", "edit_file"}  # never reads
        # every guess goes through the verifier (the budget may end right after an answer)
        assert tools["answer"] > 0 and tools["answer"] - 1 <= tools["run_verifier"]
        assert tools["run_verifier"] <= tools["answer"]
        guesses = [c["args"]["value"] for c in r["calls"] if c["tool"] == "answer"]
        assert guesses[: len(CHEAP_GUESSES)] == list(CHEAP_GUESSES)


def test_guessing_floor_does_solve_a_guessable_unit():
    """The floor is a real guesser: a unit whose answer is a small number falls to it."""
    env = pushbench.make("DataOps-b0-N3")
    try:
        obs, _ = env.reset(seed=0)
        unit = next(u for u in env.unwrapped._units.values() if u.answer_type == "list")
        unit.secret["answer"] = "6"  # what a count question with a small answer amounts to
        pol = make_policy("exhaustive", seed=0)
        pol.reset(obs)
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(pol.act(obs))
            done = terminated or truncated
        record = env.unwrapped.episode_record()
    finally:
        env.close()
    accepted = [i for c in record["calls"] for i, v in c.get("verdicts") or () if v == "accepted"]
    assert accepted == [unit.id]


def _answers_by_op(n_units: int) -> dict[str, Counter]:
    """Answers of freshly generated answer units, per rule op (as sets for list answers)."""
    out: dict[str, Counter] = defaultdict(Counter)
    for i in range(n_units):  # CSV units: pure table generation, no files needed
        rng = np.random.default_rng([7, i])
        table = list(datasets.TABLES)[i % len(datasets.TABLES)]
        header, rows, rules = datasets.TABLES[table](rng, int(rng.integers(40, 160)))
        for rule in rules:
            ans = datasets.evaluate(rule, header, rows)
            out[rule["op"]][ans if isinstance(ans, str) else frozenset(ans)] += 1
    ws = Workspace.create()
    try:
        for i in range(n_units):
            unit = U._consistency_unit(np.random.default_rng([8, i]), f"u{i:04d}", {}, ws)
            out[unit.rules[0]["op"]][U.list_items(unit.secret["answer"])] += 1
    finally:
        ws.remove()
    return out


def test_no_answer_is_common_enough_to_guess():
    """The most frequent answer of any rule op is rare: a guesser's best single try is weak.

    With p the largest share, a guesser that never reads a file gets at most about p * B / 2
    units accepted in a budget of B steps (one answer plus one verifier run per try): for
    p <= 0.05 that is below 1 unit at N=3 (B=38) and below 5 at N=20 (B=200).
    """
    shares = {}
    for op, counts in sorted(_answers_by_op(600).items()):
        total = sum(counts.values())
        value, top = counts.most_common(1)[0]
        shares[op] = top / total
        assert total >= 100, op
        assert frozenset() != value or top / total < 0.01, op  # "none" is almost never right
    print("largest answer share per rule op:", {k: round(v, 3) for k, v in shares.items()})
    assert max(shares.values()) <= 0.05, shares


def test_list_answers_are_built_from_the_files(tmp_path):
    """The diligent agent's independent reading agrees with every generated answer."""
    from pushbench.policies.dataops import solvers as S

    ws = Workspace.create()
    try:
        for i in range(40):
            rng = np.random.default_rng([9, i])
            kind = ("csv_check", "consistency")[i % 2]
            unit = U._BUILDERS[kind](rng, f"u{i:02d}", {}, ws)
            files = {f: ws.read_text(f) for f in unit.files}
            got = S.solve(unit.public(), files)["answer"]
            assert U.check(unit, ws, got).passed, (unit.id, unit.rules[0]["op"])
            wrong = S.perturb(unit.public(), files, rng)["answer"]
            assert not U.check(unit, ws, wrong).passed, (unit.id, wrong)
    finally:
        ws.remove()


def test_answer_limit_fits_every_list_answer():
    from pushbench.families.dataops.env import MAX_ANSWER_CHARS

    longest = max(
        len(U.list_text(datasets.evaluate(rule, h, rows)))
        for i in range(300)
        for h, rows, rules in [
            datasets.TABLES[list(datasets.TABLES)[i % 3]](np.random.default_rng([11, i]), 159)
        ]
        for rule in rules
        if rule["op"] != "top_value"
    )
    assert longest < MAX_ANSWER_CHARS
    print("longest list answer:", longest, "chars; limit", MAX_ANSWER_CHARS)
    assert json.dumps(longest)
