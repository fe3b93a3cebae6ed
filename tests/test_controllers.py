"""Controller compositions: Gymnasium compliance when wrapped, and each component's repair."""

from __future__ import annotations

import json
import types
import warnings
from collections import deque

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import pushbench
from pushbench.controllers import catalogue, components_of, serves
from pushbench.families.reposcan.verifier import Verifier
from pushbench.runner.episode import run_episode
from pushbench.tasks import builtin_tasks

REPOSCAN_CONTROLLERS = [n for n in catalogue() if serves(n, "reposcan")]


def step(env, call):
    obs, reward, term, trunc, info = env.step(call)
    return json.loads(obs), reward, term, trunc, info


# check_env on a wrapped env always says it is "different from the unwrapped version" and
# recommends checking env.unwrapped. Here the wrapper *is* the subject (its observations are
# what agents see; the unwrapped envs are checked in their own families' tests), so that one
# warning is expected. Every other warning fails the test.
_EXPECTED_WRAPPER_WARNING = "is different from the unwrapped version"


@pytest.mark.parametrize("name", REPOSCAN_CONTROLLERS)
def test_every_composition_passes_check_env(name):
    env = pushbench.make("RepoScan-N10", controller=name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    others = [str(w.message) for w in caught if _EXPECTED_WRAPPER_WARNING not in str(w.message)]
    assert others == []
    assert len(caught) == 1, "the wrapper warning was expected (is this still a wrapper?)"


def test_unknown_controller_suggests_close_names():
    with pytest.raises(KeyError, match="stateqgp"):
        components_of("stateqpg")


def test_catalogue_has_the_paper_rows():
    cat = catalogue()
    assert cat["standard"].components == ()
    assert cat["verifier_gated"].components == ("completion_gate",)
    assert set(cat["stateqgp"].components) == {
        "progress_state",
        "dedupe",
        "page_memory",
        "buffered_submit",
        "completion_gate",
    }
    for row in (
        "stateqgp_dedupe_only",
        "stateqgp_page_memory_only",
        "stateqgp_dedupe_page_nobuffer",
    ):
        assert set(cat[row].components) < set(cat["stateqgp"].components)


def test_completion_gate_blocks_final_below_target_and_lets_it_pass_at_target():
    env = pushbench.make("RepoScan-flask-decorated-N10", controller="verifier_gated")
    env.reset(seed=0)
    obs, _, term, _, info = step(env, {"tool": "final", "reported_count": 10})
    assert not term and obs["tool"] == "status" and "not done" in obs["controller"]["message"]
    assert info["controller"]["interventions"] == ["completion_gate"]
    obs, _, term, _, _ = step(env, {"tool": "ask_user", "message": "stop?"})
    assert not term and obs["tool"] == "status"
    # Reach the target with a diligent run under the gate: final then passes through.
    rec = run_episode("RepoScan-flask-decorated-N10", "verifier_gated", "diligent", 0)
    assert rec["terminated_by"] == "final" and rec["success"]
    assert rec["metrics"]["blocked_completions"] == 0


def test_gate_does_not_extend_the_budget():
    env = pushbench.make("RepoScan-flask-decorated-N10", controller="verifier_gated", budget=3)
    env.reset(seed=0)
    for _ in range(2):
        assert not step(env, {"tool": "final", "reported_count": 1})[3]
    *_, trunc, info = step(env, {"tool": "final", "reported_count": 1})
    assert trunc and info["qgp"]["terminated_by"] == "budget"


def test_dedupe_filters_and_redirects_to_next_unseen_page():
    env = pushbench.make("RepoScan-flask-decorated-N10", controller="stateqgp")
    env.reset(seed=0)
    obs, *_ = step(env, {"tool": "search", "query": "app"})
    ids = [h["id"] for h in obs["result"]["results"][:3]]
    obs, *_ = step(env, {"tool": "submit", "ids": ids + ids[:1]})
    assert [v["id"] for v in obs["result"]["verdicts"]] == ids  # in-call repeat removed
    obs, _, _, _, info = step(env, {"tool": "submit", "ids": ids})
    assert obs["tool"] == "search" and obs["result"]["page"] == 2
    assert info["controller"]["interventions"] == ["dedupe", "dedupe_redirect"]
    assert info["qgp"]["duplicates"] == 0


def test_page_memory_advances_repeated_search_case_insensitively():
    env = pushbench.make("RepoScan-flask-decorated-N10", controller="stateqgp_page_memory_only")
    env.reset(seed=0)
    step(env, {"tool": "search", "query": "app", "page": 1})
    step(env, {"tool": "search", "query": "app", "page": 2})
    obs, _, _, _, info = step(env, {"tool": "search", "query": "  APP ", "page": 1})
    assert obs["result"]["page"] == 3 and info["controller"]["interventions"] == ["page_memory"]
    assert obs["progress"]["searches"]["app"]["pages_seen"] == [1, 2, 3]


def test_buffered_submit_splits_oversized_submits():
    env = pushbench.make("RepoScan-flask-decorated-N10", controller="stateqgp")
    env.reset(seed=0)
    ids = []
    for page in (1, 2):
        obs, *_ = step(env, {"tool": "search", "query": "", "page": page})
        ids += [h["id"] for h in obs["result"]["results"]]
    obs, _, _, _, info = step(env, {"tool": "submit", "ids": ids[:14]})
    assert obs["ok"] and len(obs["result"]["verdicts"]) == 10
    assert (
        obs["progress"]["buffered_ids"] == 4
        and "buffer_overflow" in info["controller"]["interventions"]
    )
    obs, *_ = step(env, {"tool": "submit", "ids": ids[14:16]})
    assert [v["id"] for v in obs["result"]["verdicts"]] == ids[14:16] + ids[10:14]
    # Without the buffer the oversized call is refused by the environment (and costs a step).
    env = pushbench.make("RepoScan-flask-decorated-N10", controller="stateqgp_dedupe_only")
    env.reset(seed=0)
    obs, _, _, _, info = step(env, {"tool": "submit", "ids": ids[:14]})
    assert not obs["ok"] and info["qgp"]["steps_used"] == 1


def test_malformed_actions_pass_through_untouched():
    env = pushbench.make("RepoScan-N10", controller="stateqgp")
    env.reset(seed=0)
    obs, _, _, _, info = step(env, "not json")
    assert obs["ok"] is False and obs["error_type"] == "bad_json"
    assert info["controller"]["interventions"] == []
    assert "progress" in obs


def _reachable(root, skip) -> list:
    """Objects reachable from ``root`` through attributes, slots, containers, bound methods and
    closures, without entering ``skip`` (the wrapped environment, which holds the verifier).
    Classes, modules and plain functions' globals are not followed: they are code, not state."""
    seen, stack, out = set(), [root], []
    while stack:
        obj = stack.pop()
        if obj is skip or id(obj) in seen:
            continue
        seen.add(id(obj))
        out.append(obj)
        if isinstance(obj, (str, bytes, int, float, type(None), type, types.ModuleType)):
            continue
        if isinstance(obj, dict):
            stack += [*obj.keys(), *obj.values()]
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            stack += list(obj)
        elif isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
        elif isinstance(obj, types.FunctionType):
            stack += [c.cell_contents for c in obj.__closure__ or ()]
        else:
            stack += list(getattr(obj, "__dict__", {}).values())
            for cls in type(obj).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    if hasattr(obj, slot):
                        stack.append(getattr(obj, slot))
    return out


def _strings(obj) -> set[str]:
    if isinstance(obj, str):
        return {obj}
    if isinstance(obj, dict):
        return set().union(*map(_strings, obj.keys()), *map(_strings, obj.values()))
    if isinstance(obj, (list, tuple)):
        return set().union(*map(_strings, obj))
    return set()


@pytest.mark.parametrize("name", REPOSCAN_CONTROLLERS)
def test_controller_never_sees_the_valid_set(name):
    """Nothing the controller holds reveals validity beyond what the agent was shown."""
    env = pushbench.make("RepoScan-flask-decorated-N10", controller=name)
    obs, _ = env.reset(seed=0)
    shown = _strings(json.loads(obs))
    hit_ids: list[str] = []
    for call in (
        {"tool": "search", "query": "", "page": 1},
        {"tool": "search", "query": "test"},
        "submit",
        "submit",
        {"tool": "status"},
        {"tool": "search", "query": "app"},
        {"tool": "final", "reported_count": 99},
    ):
        if call == "submit":
            call, hit_ids = {"tool": "submit", "ids": hit_ids[:10]}, hit_ids[10:]
        obs, *_ = env.step(call)
        decoded = json.loads(obs)
        shown |= _strings(decoded)
        hit_ids += [h["id"] for h in (decoded.get("result") or {}).get("results", [])]
    inner = env.unwrapped
    valid = inner._verifier._valid
    reachable = _reachable(env, skip=inner)
    assert reachable[0] is env and env.env is inner  # the controller wraps the env directly
    assert not any(isinstance(o, (gym.Env, Verifier)) for o in reachable[1:]), (
        "a component holds the environment or its verifier"
    )
    assert not any(o is valid for o in reachable)
    held = {o for o in reachable if isinstance(o, str)}
    assert not (held & valid) - shown, "the controller holds valid ids the agent was never shown"
    for o in reachable:
        if isinstance(o, (set, frozenset, list, tuple, dict)) and len(o) >= len(valid):
            assert not valid <= {x for x in o if isinstance(x, str)}, (
                "a container holds the whole valid set"
            )
    # The episode accepted some ids but far from all: the checks above had something to find.
    assert 0 < inner._verifier.valid_count < len(valid) and len(held & valid) > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "policy", ["simulated-weak", "simulated-mid", "simulated-strong", "random"]
)
def test_stateqgp_duplicate_rate_is_exactly_zero_on_every_episode(policy):
    tasks = sorted(t for t in builtin_tasks() if t.startswith("RepoScan-") and t.count("-") >= 3)
    for task in tasks:
        for seed in range(2):
            rec = run_episode(task, "stateqgp", policy, seed)
            assert rec["metrics"]["duplicate_submit_rate"] in (0.0, None), (task, seed)


def test_a_gated_final_with_an_out_of_range_count_is_no_claim():
    """A ``final`` whose count the tool would refuse (here 10**300) is blocked like any final
    below target, but it is no claim: ``gated_over_claim`` ignores it instead of overflowing."""
    env = pushbench.make("RepoScan-requests-docstring-N10", controller="stateqgp")
    env.reset(seed=0)
    env.step({"tool": "final", "reported_count": 10**300})
    env.step({"tool": "final", "reported_count": 7})
    rec = env.episode_record()
    gated = [s for s in rec["controller"]["steps"] if "completion_gate" in s["interventions"]]
    assert len(gated) == 2
    assert "proposed_reported_count" not in gated[0]
    assert gated[1]["proposed_reported_count"] == 7
    assert rec["metrics"]["gated_over_claim"] == 7 - rec["valid_count"]
