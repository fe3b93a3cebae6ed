"""Each simulated failure mechanism in isolation: present when on, absent when off (fixed seed),
and read from the rendered observation text only (never a controller's internals)."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest

import pushbench
from pushbench.policies import make_policy
from pushbench.policies.mechanisms import MECHANISMS
from pushbench.policies.mechanisms.policy import PRESETS
from pushbench.runner.episode import run_episode

REPO = "RepoScan-pytest-raises-N50"
DATA = "DataOps-b1-N10"
SEED = 3


def drive(task, controller, params, seed=SEED, name="simulated-base"):
    """Run one episode by hand; return (record, observations the policy saw, policy)."""
    env = pushbench.make(task, controller=controller)
    pol = make_policy(name, seed=seed, **params)
    obs, _ = env.reset(seed=seed)
    pol.reset(obs)
    seen, done = [obs], False
    while not done:
        obs, _, term, trunc, _ = env.step(pol.act(obs))
        seen.append(obs)
        done = term or trunc
    rec = env.get_wrapper_attr("episode_record")()
    env.close()
    return rec, [json.loads(o) for o in seen], pol


def tools(rec):
    return [c["tool"] for c in rec["calls"]]


def verdicts(rec):
    return Counter(v for c in rec["calls"] for _, v in c.get("verdicts") or ())


@pytest.fixture(scope="module")
def repo_base():
    return drive(REPO, "standard", {})


@pytest.fixture(scope="module")
def data_base():
    return drive(DATA, "standard", {})


def test_every_mechanism_is_one_documented_parameter():
    assert len(MECHANISMS) >= 14
    for key, cls in MECHANISMS.items():
        assert cls.key == key and cls.__doc__ and f"``{key}``" in cls.__doc__
        assert set(cls.families) <= {"reposcan", "dataops", "dataops_public"}
        # a DataOps mechanism acts on both DataOps families (one agent model)
        assert ("dataops" in cls.families) == ("dataops_public" in cls.families)


def test_base_is_competent_and_deterministic(repo_base, data_base):
    for rec, _, _ in (repo_base, data_base):
        assert rec["success"] and verdicts(rec)["duplicate"] == 0
        assert rec["terminated_by"] == "final" and rec["reported_count"] == rec["valid_count"]
        assert "status" not in tools(rec)  # every tally it ended on was a shown count
    again, _, _ = drive(REPO, "standard", {}, seed=SEED + 1)
    assert tools(again) == tools(repo_base[0])  # no randomness without a mechanism


# ----- shared mechanisms ----------------------------------------------------------------------
@pytest.mark.parametrize("task,fixture", [(REPO, "repo_base"), (DATA, "data_base")])
def test_window_forgets_what_it_sent(task, fixture, request):
    base = request.getfixturevalue(fixture)[0]
    rec, _, pol = drive(task, "standard", {"window": 1})
    assert pol.agent.history.maxlen == 1
    if task == REPO:
        assert verdicts(rec)["duplicate"] > 0 == verdicts(base)["duplicate"]
    else:  # what it inspected fell out of view before it could act: it looks again
        assert tools(rec).count("inspect") > tools(base).count("inspect")


@pytest.mark.parametrize("task", [REPO, DATA])
def test_drift_counts_sent_and_needs_a_status_check(task):
    rec, _, _ = drive(task, "standard", {"drift": 1.0})
    assert "status" in tools(rec)  # its tally was not a shown count


@pytest.mark.parametrize("task", [REPO, DATA])
def test_misread_resends_what_was_accepted(task):
    rec, _, _ = drive(task, "standard", {"misread": 1.0})
    assert verdicts(rec)["duplicate"] > 0


@pytest.mark.parametrize("task", [REPO, DATA])
def test_give_up_ends_early(task):
    rec, _, _ = drive(task, "standard", {"give_up": 1.0})
    assert rec["steps_used"] == 1 and rec["terminated_by"] in ("final", "ask_user")
    assert not rec["success"]


@pytest.mark.parametrize("task", [REPO, DATA])
def test_insist_repeats_a_refused_final(task):
    """Status blindness, on the real observation a completion gate returns after a refusal."""
    for params, expect in (({"insist": 1.0}, True), ({}, False)):
        env = pushbench.make(task, controller="verifier_gated")
        pol = make_policy("simulated-base", seed=SEED, **params)
        obs, _ = env.reset(seed=SEED)
        pol.reset(obs)
        claim = {"tool": "final", "reported_count": 99, "message": "done"}
        obs, *_ = env.step(claim)
        assert json.loads(obs)["controller"]["interventions"] == ["completion_gate"]
        pol.agent.last_action = claim
        assert (pol.act(obs) == claim) is expect
        env.close()


# ----- RepoScan mechanisms --------------------------------------------------------------------
def test_overbatch_names_too_many_ids_then_drops_the_rest(repo_base):
    rec, _, _ = drive(REPO, "standard", {"overbatch": 1.0})
    refused = [c for c in rec["calls"] if c["tool"] == "submit" and not c["ok"]]
    assert refused and not [c for c in repo_base[0]["calls"] if not c["ok"]]
    after = [rec["calls"][c["step"]] for c in refused]  # the call right after each refusal
    assert all(c["tool"] == "submit" and len(c["args"]["ids"]) == 10 for c in after)
    buffered, _, _ = drive(REPO, "only_buffered_submit", {"overbatch": 1.0})
    assert all(c["ok"] for c in buffered["calls"])  # the component cuts and queues instead


def test_repeat_search_reruns_a_page(repo_base):
    def repeats(rec):
        pages = [
            (c["args"]["query"], c["args"]["page"]) for c in rec["calls"] if c["tool"] == "search"
        ]
        return len(pages) - len(set(pages))

    rec, _, _ = drive(REPO, "standard", {"repeat_search": 0.5})
    assert repeats(rec) > 0 == repeats(repo_base[0])


def test_misjudge_flips_judgements(repo_base):
    def first(rec):
        return set(next(c["args"]["ids"] for c in rec["calls"] if c["tool"] == "submit"))

    rec, _, _ = drive(REPO, "standard", {"misjudge": 1.0})
    assert first(rec).isdisjoint(first(repo_base[0]))


def test_fabricate_submits_ids_never_shown(repo_base):
    def unseen(rec, observations):
        shown = {
            h["id"]
            for o in observations
            if o.get("tool") == "search" and o.get("ok")
            for h in o["result"]["results"]
        }
        return {
            i for c in rec["calls"] if c["tool"] == "submit" and c["ok"] for i in c["args"]["ids"]
        } - shown

    rec, obs, _ = drive(REPO, "standard", {"fabricate": 1.0})
    assert unseen(rec, obs) and not unseen(repo_base[0], repo_base[1])


# ----- DataOps mechanisms ---------------------------------------------------------------------
def test_skip_verify(data_base):
    rec, _, _ = drive(DATA, "standard", {"skip_verify": 1.0})
    assert "run_verifier" not in tools(rec) and "run_verifier" in tools(data_base[0])


def test_forget_submit(data_base):
    rec, _, _ = drive(DATA, "standard", {"forget_submit": 1.0})
    assert "submit" not in tools(rec) and "submit" in tools(data_base[0])


def test_stuck_reinspects(data_base):
    rec, _, _ = drive(DATA, "standard", {"stuck": 1.0})
    assert tools(rec).count("inspect") > tools(data_base[0]).count("inspect")


def test_answer_error_fails_checks(data_base):
    def fails(rec):
        return sum(
            c["tool"] == "run_verifier"
            and c.get("check", {}).get("passed") is False
            or c["tool"] == "run_verifier"
            and c.get("passed") is False
            for c in rec["calls"]
        )

    rec, obs, _ = drive(DATA, "standard", {"answer_error": 1.0})
    failed = [o for o in obs if o.get("tool") == "run_verifier" and not o["result"]["passed"]]
    base_failed = [
        o for o in data_base[1] if o.get("tool") == "run_verifier" and not o["result"]["passed"]
    ]
    assert len(failed) > len(base_failed)


def test_notes_loss(data_base):
    _, _, pol = drive(DATA, "standard", {"notes_loss": 1.0})
    assert not pol.agent.notes and data_base[2].agent.notes


# ----- reading only the rendered text ---------------------------------------------------------
def test_mechanism_code_never_touches_controller_internals():
    root = Path(pushbench.__file__).parent / "policies" / "mechanisms"
    for f in root.glob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert "controllers" not in (node.module or ""), f
            if isinstance(node, ast.Import):
                assert not any("controllers" in a.name for a in node.names), f
            if isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                assert name not in ("TrackerState", "query_key", "UnitBook", "book_of"), f


def test_agents_take_text_only():
    pol = make_policy("simulated-base", seed=0)
    env = pushbench.make(REPO, controller="stateqgp")
    obs, _ = env.reset(seed=0)
    with pytest.raises(TypeError, match="text"):
        pol.reset(json.loads(obs))
    env.close()


def test_a_count_is_read_in_any_wording():
    """The count comes from the words shown, wherever a wrapper puts them."""
    pol = make_policy("simulated-base", seed=0, drift=1.0)
    env = pushbench.make(REPO, controller="standard")
    obs, _ = env.reset(seed=0)
    pol.reset(obs)
    obs, *_ = env.step({"tool": "search", "query": "raise", "page": 1})
    o = json.loads(obs)
    o["some_wrapper"] = {"state": [{"verified": {"valid_count": 7}}]}
    pol.act(json.dumps(o))
    assert pol.agent.tally == 7 and pol.agent.verified
    env.close()


@pytest.mark.parametrize("task", [REPO, DATA])
def test_simulated_agents_ignore_the_placebo(task):
    """No mechanism reads the placebo: the same calls as under standard, same seed."""
    a = run_episode(task, "standard", "simulated-mid", SEED)
    b = run_episode(task, "placebo", "simulated-mid", SEED)
    assert [(c["tool"], c["args"]) for c in a["calls"]] == [
        (c["tool"], c["args"]) for c in b["calls"]
    ]


def test_presets_are_documented_combinations():
    for family, presets in PRESETS.items():
        for values in presets.values():
            assert set(values) <= set(MECHANISMS)
            assert all(family in MECHANISMS[k].families for k in values)
    rec = run_episode(DATA, "standard", "simulated-weak", 0)
    assert rec["policy"]["mechanisms"] == PRESETS["dataops"]["weak"]
    assert rec["policy"]["label"] == "simulated-weak" and rec["simulated"]
    rec = run_episode(REPO, "standard", "simulated-base", 0, policy_params={"window": 4})
    assert rec["policy"]["label"] == "simulated-base[window=4]"


def test_dataops_window_forgets_finished_units_unless_noted():
    """A finished unit is known from its verdict while that is in view, and from notes after."""
    full, _, _ = drive(DATA, "standard", {"notes_loss": 1.0})
    assert verdicts(full)["duplicate"] == 0  # no notes, but every verdict is still in view
    short, _, _ = drive(DATA, "standard", {"notes_loss": 1.0, "window": 6})
    assert verdicts(short)["duplicate"] > 0  # no notes and the verdicts fell out of view
