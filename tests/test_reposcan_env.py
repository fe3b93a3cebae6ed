"""RepoScan environment contract (issue 2, sections 4 to 6 and 8).

Tests may read the private valid sets (``_valid_set``) to judge the environment; agents never can.
"""

from __future__ import annotations

import json
import types
import warnings

import gymnasium as gym
import jsonschema
import pytest
from gymnasium.utils.env_checker import check_env

import pushbench
from pushbench.envs import actions
from pushbench.envs.spaces import MAX_ACTION_BYTES
from pushbench.families.reposcan import indexer
from pushbench.families.reposcan.env import _search_index, _valid_set
from pushbench.families.reposcan.search import tokenize
from pushbench.families.reposcan.verifier import digest
from pushbench.registration import gym_id, sample_calls
from pushbench.tasks import UnknownTaskError, builtin_tasks, instance_config, manifests

INSTANCES = list(manifests()["reposcan"].instances)
GYM_IDS = [i for i in gym.registry if i.startswith("PushBench/")]
QGP_KEYS = {
    "valid_count",
    "target",
    "steps_used",
    "budget",
    "submitted",
    "duplicates",
    "rejected",
    "malformed",
    "success",
    "terminated_by",
}
HIT_KEYS = {"id", "kind", "signature", "location", "snippet"}
TASK = "RepoScan-flask-decorated-N10"  # single-instance task used by most tests
INSTANCE = "flask-decorated"


def run(env, action):
    """One step; the observation decoded (and checked against the observation space)."""
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and env.observation_space.contains(obs), obs[:200]
    return json.loads(obs), reward, terminated, truncated, info


def fresh(task=TASK, seed=0, **kwargs):
    env = pushbench.make(task, **kwargs)
    obs, info = env.reset(seed=seed)
    return env, json.loads(obs), info


def valid_ids(instance=INSTANCE) -> list[str]:
    return sorted(_valid_set(instance))


def invalid_ids(instance=INSTANCE) -> list[str]:
    """Real definitions of the instance's snapshot that do not satisfy its predicate."""
    snap = instance_config("reposcan", instance)["snapshot"]
    valid = _valid_set(instance)
    return sorted({d.ident for d in indexer.load_index(snap)} - valid)


def state(env) -> dict:
    u = env.unwrapped
    return {
        "steps": u.steps_used,
        "ledger": len(u.ledger),
        "counts": dict(u.counts),
        "valid": u._valid_count(),
        "terminated_by": u.terminated_by,
        "progress": list(u.progress),
    }


# ----- registration and check_env -------------------------------------------------------------


def test_every_task_is_registered():
    assert sorted(GYM_IDS) == sorted(gym_id(t) for t in pushbench.list_tasks())
    reposcan = [t for t in pushbench.list_tasks("RepoScan-") if t in builtin_tasks()]
    assert len(reposcan) == 40  # 9 instances x 4 targets + 4 suites
    # the shipped synthetic family (tasks/synth) registers beside them, with its own suites
    synth = pushbench.list_tasks("RepoScan-synth-")
    assert {f"RepoScan-synth-N{n}" for n in (10, 25, 50, 100)} <= set(synth)
    assert not set(synth) & set(reposcan)
    assert {f"RepoScan-{i}-N{n}" for i in INSTANCES for n in (10, 25, 50, 100)} | {
        f"RepoScan-N{n}" for n in (10, 25, 50, 100)
    } == set(reposcan)
    assert len(pushbench.list_tasks("RepoScan-pytest-raises")) == 4


def test_unknown_task_suggests_close_matches():
    with pytest.raises(UnknownTaskError) as err:
        pushbench.make("RepoScan-pytest-raise-N50")
    assert "RepoScan-pytest-raises-N50" in str(err.value)


@pytest.mark.parametrize(
    "gid",
    [
        # other families' checks take seconds each: `slow` so `-m "not slow"` stays quick; on a cold
        # cache the first SWE-lite one also builds the per-snapshot test venvs (minutes)
        pytest.param(
            g,
            marks=()
            if g.startswith("PushBench/RepoScan-")
            else (pytest.mark.slow, pytest.mark.timeout(900)),
        )
        for g in GYM_IDS
    ],
)
def test_check_env(gid):
    env = gym.make(gid)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=False)
    gym_warnings = [str(w.message) for w in caught if "WARN" in str(w.message)]
    assert not gym_warnings
    env.close()


# ----- manifests vs built snapshots -----------------------------------------------------------


@pytest.mark.parametrize("instance", INSTANCES)
def test_manifest_matches_built_snapshot(instance):
    cfg = instance_config("reposcan", instance)
    valid = _valid_set(instance)  # raises RepoScanIntegrityError on a mismatch
    assert len(valid) == cfg["valid_count"] >= 170
    assert digest(valid) == cfg["valid_sha256"]


@pytest.mark.parametrize("snapshot", ["requests", "flask", "pytest"])
def test_cached_index_equals_a_fresh_index_of_the_snapshot(snapshot, snapshot_roots):
    from dataclasses import asdict

    fresh_defs = indexer.index_tree(snapshot_roots[snapshot])
    assert [asdict(d) for d in fresh_defs] == [asdict(d) for d in indexer.load_index(snapshot)]


# ----- reset observation and tool schemas -----------------------------------------------------


def test_reset_observation_and_info():
    env, obs, info = fresh()
    assert obs["tool"] == "reset" and obs["ok"] is True
    res = obs["result"]
    assert res["target"] == 10 and res["budget"] == env.unwrapped.task.budget
    assert res["instance"] == INSTANCE and res["task_id"] == TASK
    assert "10" in res["objective"] and "decorator" in res["objective"]
    assert "::" not in res["objective"].replace(
        "<path relative to the repository root>::<Qualified.name>", ""
    )
    assert set(info["qgp"]) == QGP_KEYS
    assert info["qgp"]["steps_used"] == 0 and info["qgp"]["terminated_by"] is None


def test_tool_schemas_are_openai_function_definitions():
    _, obs, _ = fresh()
    tools = obs["result"]["tools"]
    assert [t["function"]["name"] for t in tools] == [
        "search",
        "submit",
        "status",
        "final",
        "ask_user",
    ]
    for t in tools:
        assert set(t) == {"type", "function"} and t["type"] == "function"
        fn = t["function"]
        assert isinstance(fn["name"], str) and fn["name"].isidentifier()
        assert isinstance(fn["description"], str) and fn["description"]
        params = fn["parameters"]
        assert params["type"] == "object" and isinstance(params["properties"], dict)
        assert set(params.get("required", [])) <= set(params["properties"])
        for prop in params["properties"].values():
            assert "type" in prop or "anyOf" in prop
        json.dumps(t)
    for t in tools:
        jsonschema.Draft202012Validator.check_schema(t["function"]["parameters"])


@pytest.mark.parametrize("task", ["RepoScan-N10", "DataOps-b0-N3", "SWELite-requests-N3"])
def test_tool_schemas_keep_long_bounds_out_of_grammars(task):
    """No declared maxLength a local server's grammar builder refuses; the bound is still said."""
    from pushbench.envs.base import GRAMMAR_SAFE_MAX_LENGTH

    env = pushbench.make(task)
    try:
        tools, models = env.unwrapped.tool_schemas(), type(env.unwrapped).TOOLS
    finally:
        env.close()
    for t in tools:
        name, props = t["function"]["name"], t["function"]["parameters"]["properties"]
        declared = models[name][0].model_json_schema().get("properties", {})
        for key, prop in props.items():
            bound = declared[key].get("maxLength")
            if bound is not None and bound > GRAMMAR_SAFE_MAX_LENGTH:
                assert (
                    "maxLength" not in prop
                    and f"at most {bound:,} characters" in prop["description"]
                ), (name, key)
            else:
                assert prop.get("maxLength") == bound, (name, key)


def test_sampled_actions_match_the_tool_schemas():
    env, obs, _ = fresh()
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in obs["result"]["tools"]}
    env.action_space.seed(3)
    for _ in range(60):
        call = json.loads(env.action_space.sample())
        tool = call.pop("tool")
        jsonschema.validate(call, schemas[tool])


def test_sample_calls_is_a_seeded_non_terminal_sample_of_the_action_space():
    # the benchmarks' fixed action streams (bench_vector's stream actor, the env server's load)
    a = sample_calls(TASK, 3, 60)
    assert a == sample_calls(TASK, 3, 60) and a != sample_calls(TASK, 4, 60)
    assert not {c["tool"] for c in a} & {"final", "ask_user"}
    env = pushbench.make(TASK)
    env.action_space.seed(3)  # a fresh space with the same seed samples the same calls
    fresh = (json.loads(env.action_space.sample()) for _ in range(1000))
    assert a == [c for c in fresh if c["tool"] not in ("final", "ask_user")][:60]


# ----- determinism ----------------------------------------------------------------------------


def scripted(env, seed):
    """A fixed policy that reads only observations (ids from search results)."""
    obs, info = env.reset(seed=seed)
    traj = [(obs, None, info)]
    plan = [
        {"tool": "search", "query": "app route"},
        {"tool": "search", "query": "app route", "page": 2},
        "submit-from-last",
        "submit-from-last",
        {"tool": "status"},
        "not json",
        {"tool": "search", "query": "test", "page": 3},
        "submit-from-last",
        {"tool": "final", "reported_count": 3, "message": "done"},
    ]
    last_ids: list[str] = []
    for item in plan:
        action = (
            {"tool": "submit", "ids": last_ids[:4] or ["x.py::f"]}
            if item == "submit-from-last"
            else item
        )
        o, r, term, trunc, info = env.step(action)
        d = json.loads(o)
        if d["tool"] == "search" and d["ok"]:
            last_ids = [h["id"] for h in d["result"]["results"]]
        traj.append((o, (r, term, trunc), info))
    return traj


def sampled(env, seed, steps=80):
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    traj = [(obs, None, info)]
    for _ in range(steps):
        action = env.action_space.sample()
        assert env.action_space.contains(action)
        o, r, term, trunc, info = env.step(action)
        traj.append((action, o, (r, term, trunc), info))
        if term or trunc:
            obs, info = env.reset(seed=seed + len(traj))
            traj.append((obs, None, info))
    return traj


@pytest.mark.parametrize("task", [TASK, "RepoScan-N25"])
def test_same_seed_same_trajectory_scripted(task):
    a = scripted(pushbench.make(task), 11)
    b = scripted(pushbench.make(task), 11)
    assert a == b
    env = pushbench.make(task)
    scripted(env, 5)
    assert scripted(env, 11) == a  # reset fully clears the previous episode


@pytest.mark.parametrize("task", [TASK, "RepoScan-pytest-raises-N10", "RepoScan-N10"])
def test_same_seed_same_trajectory_sampled(task):
    a = sampled(pushbench.make(task), 7)
    b = sampled(pushbench.make(task), 7)
    assert a == b
    assert any(json.loads(step[1])["tool"] == "submit" for step in a if len(step) == 4)
    c = sampled(pushbench.make(task), 8)
    assert c != a


_TRAJECTORY_SCRIPT = """
import hashlib, json, pushbench
env = pushbench.make("RepoScan-N25")
out = []
for seed in (3, 4):
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    out.append([obs, info])
    for _ in range(40):
        a = env.action_space.sample()
        o, r, term, trunc, info = env.step(a)
        out.append([a, o, r, term, trunc, info])
        if term or trunc:
            break
print(hashlib.sha256(json.dumps(out).encode()).hexdigest())
"""


def test_trajectory_does_not_depend_on_the_process_hash_seed():
    import os
    import subprocess
    import sys

    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run(
            [sys.executable, "-c", _TRAJECTORY_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(proc.stdout.strip())
    assert len(digests) == 1 and len(digests.pop()) == 64


def test_suite_picks_instance_from_seed_and_honours_option():
    chosen = {}
    for seed in range(120):
        env_a, obs_a, _ = fresh("RepoScan-N50", seed=seed)
        env_b, obs_b, _ = fresh("RepoScan-N50", seed=seed)
        assert obs_a == obs_b
        chosen[seed] = obs_a["result"]["instance"]
        assert env_a.unwrapped.instance == chosen[seed]
    assert set(chosen.values()) == set(INSTANCES)
    env = pushbench.make("RepoScan-N50")
    for seed in (0, 1, 2):
        for inst in ("pytest-raises", "requests-assert"):
            obs, _ = env.reset(seed=seed, options={"instance": inst})
            assert json.loads(obs)["result"]["instance"] == inst
    # the verifier follows the chosen instance
    env.reset(seed=0, options={"instance": "requests-assert"})
    d, r, *_ = run(env, {"tool": "submit", "ids": valid_ids("requests-assert")[:2]})
    assert r == 2.0 and [v["verdict"] for v in d["result"]["verdicts"]] == ["accepted"] * 2
    with pytest.raises(ValueError, match="not part of"):
        env.reset(seed=0, options={"instance": "no-such-instance"})
    with pytest.raises(ValueError):
        pushbench.make(TASK).reset(seed=0, options={"instance": "pytest-raises"})


# ----- verdicts, reward, counts ---------------------------------------------------------------


def test_verdicts_reward_and_counts():
    env, _, _ = fresh()
    v, inv = valid_ids(), invalid_ids()
    d, r, term, trunc, info = run(env, {"tool": "submit", "ids": [v[0], v[1], inv[0]]})
    assert [x["verdict"] for x in d["result"]["verdicts"]] == ["accepted", "accepted", "rejected"]
    assert [x["id"] for x in d["result"]["verdicts"]] == [v[0], v[1], inv[0]]
    assert r == 2.0 and not term and not trunc
    assert d["result"]["accepted_now"] == 2 and d["result"]["valid_count"] == 2

    # duplicates: a previously accepted id, a previously rejected id, the same id twice in a call
    d, r, *_, info = run(env, {"tool": "submit", "ids": [v[0], inv[0], v[2], v[2], "zz.py::nope"]})
    assert [x["verdict"] for x in d["result"]["verdicts"]] == [
        "duplicate",
        "duplicate",
        "accepted",
        "duplicate",
        "rejected",
    ]
    assert r == 1.0

    malformed = [
        "../flask/app.py::Flask.route",
        "/src/flask/app.py::Flask.route",
        "src\\flask\\app.py::Flask.route",
        "src/flask/app.py::Flask.route\x00",
        "src/flask/app.py::Flask.route\n",
        "src/flask\x85/app.py::Flask.route",
        "src/flask/app.py",
        "Flask.route",
        "src/flask/app.py::Flask..route",
        "src/flask/app.py::",
    ]
    d, r, *_, info = run(env, {"tool": "submit", "ids": malformed})
    assert [x["verdict"] for x in d["result"]["verdicts"]] == ["malformed"] * len(malformed)
    assert r == 0.0
    d, r, *_, info = run(env, {"tool": "submit", "ids": malformed[:1]})  # malformed again, not dup
    assert d["result"]["verdicts"][0]["verdict"] == "malformed"

    q = info["qgp"]
    assert q["valid_count"] == 3
    assert q["submitted"] == 8 and q["duplicates"] == 3 and q["rejected"] == 2
    assert q["malformed"] == len(malformed) + 1 and q["steps_used"] == 4
    d, *_ = run(env, {"tool": "status"})
    assert d["result"] == {
        "valid_count": 3,
        "target": 10,
        "steps_used": 5,
        "steps_left": env.unwrapped.task.budget - 5,
        "submitted": 8,
        "duplicates": 3,
        "rejected": 2,
        "malformed": len(malformed) + 1,
    }
    rec = env.unwrapped.episode_record()
    assert rec["metrics"]["submissions"] == 8
    assert rec["metrics"]["duplicate_submit_rate"] == pytest.approx(3 / 8)


def test_reaching_the_target_and_final():
    env, _, _ = fresh()
    v = valid_ids()
    total = 0.0
    for i in range(0, 10, 5):
        _, r, term, trunc, info = run(env, {"tool": "submit", "ids": v[i : i + 5]})
        total += r
    assert total == 10.0 and info["qgp"]["success"] is True and not term and not trunc
    d, r, term, trunc, info = run(env, {"tool": "final", "reported_count": 10, "message": "ok"})
    assert d["ok"] and term and not trunc and r == 0.0
    assert info["qgp"]["terminated_by"] == "final" and info["qgp"]["success"]
    m = env.unwrapped.episode_record()["metrics"]
    assert m["success"] and not m["false_completion"] and m["reported_count_error"] == 0


@pytest.mark.parametrize(
    "ending",
    [
        {"tool": "final", "reported_count": 50, "message": "all done"},
        {"tool": "ask_user", "message": "Should I go on?"},
    ],
)
def test_early_end_is_terminated_and_later_calls_change_nothing(ending):
    env, _, _ = fresh()
    run(env, {"tool": "submit", "ids": valid_ids()[:1]})
    d, r, term, trunc, info = run(env, ending)
    assert d["ok"] and term and not trunc
    assert info["qgp"]["terminated_by"] == ending["tool"] and not info["qgp"]["success"]
    before = state(env)
    for action in ({"tool": "status"}, {"tool": "submit", "ids": valid_ids()[1:3]}, "garbage"):
        d, r, term2, trunc2, info2 = run(env, action)
        assert d["ok"] is False and d["error_type"] == "episode_over"
        assert "over" in d["error"] and "reset" in d["error"]
        assert r == 0.0 and term2 and not trunc2
        assert state(env) == before and info2 == info
    m = env.unwrapped.episode_record()["metrics"]
    assert m["premature_stop"]
    assert m["false_completion"] is (ending["tool"] == "final")


def test_budget_exhaustion_truncates():
    env, obs, _ = fresh(budget=3)
    assert obs["result"]["budget"] == 3
    _, _, term, trunc, _ = run(env, {"tool": "status"})
    assert not term and not trunc
    _, _, term, trunc, _ = run(env, {"tool": "search", "query": "route"})
    assert not term and not trunc
    d, _, term, trunc, info = run(env, "{bad json")  # an invalid last call still costs the step
    assert d["ok"] is False and not term and trunc
    assert info["qgp"]["terminated_by"] == "budget" and info["qgp"]["steps_used"] == 3
    before = state(env)
    d, r, term, trunc, info2 = run(env, {"tool": "status"})
    assert d["error_type"] == "episode_over" and "budget" in d["error"]
    assert not term and trunc and state(env) == before
    m = env.unwrapped.episode_record()["metrics"]
    assert m["budget_exhausted"] and not m["premature_stop"]


def test_final_on_the_last_step_is_terminated_not_truncated():
    env, _, _ = fresh(budget=1)
    _, _, term, trunc, info = run(env, {"tool": "final", "reported_count": 0})
    assert term and not trunc and info["qgp"]["terminated_by"] == "final"


def test_step_before_reset_is_a_harness_error():
    with pytest.raises(RuntimeError, match="reset"):
        pushbench.make(TASK).step({"tool": "status"})


# ----- bad input (section 6) ------------------------------------------------------------------

_BIG = MAX_ACTION_BYTES + 1
BAD_INPUTS = [
    ("non-json", "search for app", "bad_json", "JSON"),
    ("truncated-json", '{"tool": "status"', "bad_json", "JSON"),
    ("empty-string", "", "bad_json", "JSON"),
    ("deeply-nested-json", "[" * 50_000, "too_deep", "nested"),
    (
        "deeply-nested-args",
        '{"tool":"status","x":' + "[" * 5000 + "]" * 5000 + "}",
        "too_deep",
        "nested",
    ),
    ("json-array", '["status"]', "not_object", "object"),
    ("json-string", '"status"', "not_object", "object"),
    ("json-number", "42", "not_object", "object"),
    ("json-null", "null", "not_object", "object"),
    ("python-int", 42, "bad_json", "JSON"),
    ("python-none", None, "bad_json", "JSON"),
    ("python-list", [{"tool": "status"}], "bad_json", "JSON"),
    ("dict-not-serialisable", {"tool": "status", "x": object()}, "bad_value", "JSON"),
    # the adversarial classes of issue 11: none of these may raise or skip the ledger
    (
        "int-over-str-limit-text",
        '{"tool":"search","query":"x","page":' + "1" * 5000 + "}",
        "number_too_large",
        "digits",
    ),
    (
        "int-over-str-limit-in-ids",
        '{"tool":"submit","ids":[' + "9" * 4400 + "]}",
        "number_too_large",
        "digits",
    ),
    (
        "int-over-limit-dict",
        {"tool": "search", "query": "x", "page": 10**5000},
        "number_too_large",
        "digits",
    ),
    (
        "int-just-over-limit",
        '{"tool":"status","x":' + "1" * 1001 + "}",
        "number_too_large",
        "digits",
    ),
    (
        "float-overflow-text",
        '{"tool":"search","query":"x","page":1e999}',
        "number_too_large",
        "overflow",
    ),
    ("nan-text", '{"tool":"search","query":"x","page":NaN}', "bad_json", "NaN"),
    ("infinity-text", '{"tool":"status","x":-Infinity}', "bad_json", "Infinity"),
    ("nan-dict", {"tool": "search", "query": "x", "page": float("nan")}, "bad_value", "nan"),
    ("inf-dict", {"tool": "status", "x": [float("inf")]}, "bad_value", "inf"),
    ("set-in-dict", {"tool": "submit", "ids": {"a.py::f"}}, "bad_value", "set"),
    ("bytes-in-dict", {"tool": "search", "query": b"x"}, "bad_value", "bytes"),
    ("non-str-key", {"tool": "status", 1: "x"}, "bad_value", "keys"),
    ("tuple-key", {"tool": "status", (1, 2): "x"}, "bad_value", "keys"),
    (
        "cycle-dict",
        (lambda d: (d.__setitem__("self", d), d)[1])({"tool": "status"}),
        "bad_value",
        "cycle",
    ),
    (
        "cycle-list",
        (lambda lst: (lst.append(lst), {"tool": "submit", "ids": lst})[1])([]),
        "bad_value",
        "cycle",
    ),
    (
        "deep-dict",
        (
            lambda: (lambda f: f(f, 40))(
                lambda f, n: {"tool": "status", "x": f(f, n - 1)} if n else 1
            )
        )(),
        "too_deep",
        "nested",
    ),
    (
        "deep-list-text-32",
        '{"tool":"status","x":' + "[" * 31 + "]" * 31 + "}",
        "bad_arguments",
        "x",
    ),
    (
        "deep-list-text-33",
        '{"tool":"status","x":' + "[" * 32 + "]" * 32 + "}",
        "too_deep",
        "nested",
    ),
    (
        "bulk-ids-dict",
        {"tool": "submit", "ids": [f"src/a{i}.py::f" for i in range(40_000)]},
        "too_large",
        "limit",
    ),
    ("bulk-nulls-dict", {"tool": "status", "x": [None] * 10_000_000}, "too_large", "limit"),
    ("python-set", {"tool"}, "bad_json", "JSON"),
    ("python-float", 1.5, "bad_json", "JSON"),
    ("missing-tool", {"query": "x"}, "missing_tool", "tool"),
    ("tool-not-string", {"tool": 3}, "missing_tool", "tool"),
    ("unknown-tool", {"tool": "delete_everything"}, "unknown_tool", "unknown tool"),
    ("unknown-tool-text", '{"tool": "Search", "query": "x"}', "unknown_tool", "unknown tool"),
    ("search-missing-query", {"tool": "search"}, "bad_arguments", "query"),
    ("search-query-int", {"tool": "search", "query": 5}, "bad_arguments", "query"),
    ("search-query-too-long", {"tool": "search", "query": "a " * 300}, "bad_arguments", "query"),
    ("page-str", {"tool": "search", "query": "x", "page": "2"}, "bad_arguments", "page"),
    ("page-bool", {"tool": "search", "query": "x", "page": True}, "bad_arguments", "page"),
    ("page-float", {"tool": "search", "query": "x", "page": 2.0}, "bad_arguments", "page"),
    ("page-null", {"tool": "search", "query": "x", "page": None}, "bad_arguments", "page"),
    ("page-zero", {"tool": "search", "query": "x", "page": 0}, "bad_arguments", "page"),
    ("page-negative", {"tool": "search", "query": "x", "page": -3}, "bad_arguments", "page"),
    ("page-huge", {"tool": "search", "query": "x", "page": 10**12}, "bad_arguments", "page"),
    (
        "page-huge-text",
        '{"tool":"search","query":"x","page":1' + "0" * 400 + "}",
        "bad_arguments",
        "page",
    ),
    ("unexpected-argument", {"tool": "status", "verbose": True}, "bad_arguments", "verbose"),
    ("submit-missing-ids", {"tool": "submit"}, "bad_arguments", "ids"),
    (
        "ids-not-list",
        {"tool": "submit", "ids": "src/flask/app.py::Flask.route"},
        "bad_arguments",
        "ids",
    ),
    (
        "ids-with-int",
        {"tool": "submit", "ids": ["src/flask/app.py::Flask.route", 7]},
        "bad_arguments",
        "ids",
    ),
    ("ids-empty", {"tool": "submit", "ids": []}, "bad_arguments", "ids"),
    (
        "ids-eleven",
        {"tool": "submit", "ids": [f"a{i}.py::f" for i in range(11)]},
        "bad_arguments",
        "ids",
    ),
    (
        "final-missing-count",
        {"tool": "final", "message": "done"},
        "bad_arguments",
        "reported_count",
    ),
    (
        "final-count-str",
        {"tool": "final", "reported_count": "10"},
        "bad_arguments",
        "reported_count",
    ),
    (
        "final-count-negative",
        {"tool": "final", "reported_count": -1},
        "bad_arguments",
        "reported_count",
    ),
    ("ask-user-no-message", {"tool": "ask_user"}, "bad_arguments", "message"),
    ("too-large-str", '{"tool":"search","query":"' + "a" * _BIG + '"}', "too_large", "limit"),
    (
        "too-large-str-multibyte",
        '{"tool":"search","query":"' + "\u20ac" * 30_000 + '"}',
        "too_large",
        "limit",
    ),
    ("too-large-bytes", b'{"tool":"search","query":"' + b"a" * _BIG + b'"}', "too_large", "limit"),
    ("too-large-dict", {"tool": "submit", "ids": ["a" * _BIG]}, "too_large", "limit"),
    (
        "too-large-dict-multibyte",
        {"tool": "search", "query": "\u20ac" * 30_000},
        "too_large",
        "limit",
    ),
    ("non-utf8-bytes", b'{"tool": "status", "x": "\xff\xfe"}', "bad_encoding", "UTF-8"),
    ("utf16-bytes", '{"tool": "status"}'.encode("utf-16"), "bad_encoding", "UTF-8"),
    (
        "encoded-surrogate-bytes",
        b'{"tool":"search","query":"\xed\xa0\x80"}',
        "bad_encoding",
        "UTF-8",
    ),
    ("control-char-raw", '{"tool": "status"}\x01', "control_chars", "control"),
    ("control-char-nul-raw", '{"tool":"search","query":"a\x00b"}', "control_chars", "control"),
    (
        "control-char-escaped-query",
        '{"tool":"search","query":"a\\u0007b"}',
        "control_chars",
        "control",
    ),
    ("control-char-dict-query", {"tool": "search", "query": "a\x1bb"}, "control_chars", "control"),
    ("control-char-message", {"tool": "ask_user", "message": "hi\x00"}, "control_chars", "control"),
    ("lone-surrogate-escaped", '{"tool":"search","query":"\\ud800"}', "bad_encoding", "surrogate"),
    (
        "lone-surrogate-escaped-upper",
        '{"tool":"search","query":"ok \\uDFFF"}',
        "bad_encoding",
        "surrogate",
    ),
    (
        "lone-surrogate-escaped-in-ids",
        '{"tool":"submit","ids":["a.py::f\\udbff"]}',
        "bad_encoding",
        "surrogate",
    ),
    ("lone-surrogate-str", '{"tool":"search","query":"\ud800x"}', "bad_encoding", "surrogate"),
    ("lone-surrogate-dict", {"tool": "search", "query": "\udfff"}, "bad_encoding", "surrogate"),
    (
        "lone-surrogate-in-ids",
        {"tool": "submit", "ids": ["a\udc80.py::f"]},
        "bad_encoding",
        "surrogate",
    ),
]


@pytest.mark.parametrize(
    "label, action, error_type, needle", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS]
)
def test_bad_input_costs_one_step_and_changes_nothing_else(label, action, error_type, needle):
    env, _, _ = fresh()
    run(env, {"tool": "submit", "ids": valid_ids()[:1] + invalid_ids()[:1]})
    before = state(env)
    d, r, term, trunc, info = run(env, action)
    assert d["ok"] is False and "result" not in d
    assert d["error_type"] == error_type, d
    assert isinstance(d["error"], str) and needle.lower() in d["error"].lower(), d["error"]
    assert r == 0.0 and not term and not trunc
    after = state(env)
    assert after["steps"] == before["steps"] + 1 == info["qgp"]["steps_used"]
    assert after["ledger"] == before["ledger"] + 1 == after["steps"]
    assert after["counts"] == before["counts"] and after["valid"] == before["valid"] == 1
    assert after["progress"] == before["progress"] + [1]
    entry = env.unwrapped.ledger[-1]
    assert entry["ok"] is False and entry["error_type"] == error_type and entry["reward"] == 0
    assert len(json.dumps(entry)) < 2000  # the ledger never stores a huge payload
    # the env still works afterwards
    d, *_ = run(env, {"tool": "status"})
    assert d["ok"] and d["result"]["steps_used"] == before["steps"] + 2
    assert d["result"]["submitted"] == 2


@pytest.mark.parametrize(
    "action",
    [
        "x" * (MAX_ACTION_BYTES + 1),
        '{"tool":"status","pad":"' + "x" * MAX_ACTION_BYTES + '"}',
        b"[" * (MAX_ACTION_BYTES + 1),
        "[" * (10 * MAX_ACTION_BYTES),
    ],
    ids=["str", "valid-json-str", "bytes", "very-large-str"],
)
def test_oversized_actions_are_rejected_without_parsing(action, monkeypatch):
    def must_not_parse(*a, **k):
        raise AssertionError("an oversized action was parsed")

    stub = types.SimpleNamespace(
        loads=must_not_parse, dumps=json.dumps, JSONDecodeError=json.JSONDecodeError
    )
    env, _, _ = fresh()
    monkeypatch.setattr(actions, "json", stub)
    d, *_ = run(env, action)
    assert d["error_type"] == "too_large"


def test_action_size_limit_is_inclusive():
    env, _, _ = fresh()
    head = '{"tool":"status"}'
    d, *_ = run(env, head + " " * (MAX_ACTION_BYTES - len(head)))
    assert d["ok"] is True
    d, *_ = run(env, head + " " * (MAX_ACTION_BYTES - len(head) + 1))
    assert d["error_type"] == "too_large"


def test_text_and_bytes_and_dict_actions_are_equivalent():
    call = {"tool": "search", "query": "route decorator", "page": 2}
    outs = []
    for action in (
        call,
        json.dumps(call),
        json.dumps(call).encode(),
        bytearray(json.dumps(call).encode()),
    ):
        env, _, _ = fresh()
        outs.append(env.step(action))
    assert all(o == outs[0] for o in outs)
    assert json.loads(outs[0][0])["ok"]


def test_newlines_and_unicode_in_queries_are_fine():
    env, _, _ = fresh()
    d, *_ = run(env, '{\n\t"tool": "search",\r\n "query": "caf\u00e9 route\\n"\n}')
    assert d["ok"] and d["result"]["query"] == "caf\u00e9 route\n"
    d, *_ = run(env, '{"tool": "search", "query": "\\ud83d\\ude00 \\u00e9 \\\\ud800"}')
    assert d["ok"] and d["result"]["query"] == "\U0001f600 \u00e9 \\ud800"  # pair, escaped \\


# ----- search results and hidden information --------------------------------------------------


def test_search_result_shape():
    env, _, _ = fresh("RepoScan-pytest-raises-N10")
    d, r, *_ = run(env, {"tool": "search", "query": "raise error"})
    res = d["result"]
    assert r == 0.0
    assert set(res) == {
        "query",
        "ignored",
        "page",
        "page_size",
        "total_matches",
        "has_more",
        "results",
    }  # "raise" is a keyword: version 2 says it was ignored
    assert res["ignored"]["terms"] == ["raise"]
    assert len(res["results"]) == 10 and res["has_more"] is True
    for h in res["results"]:
        assert set(h) == HIT_KEYS
        assert h["location"].startswith(h["id"].split("::")[0] + ":")
        assert len(h["snippet"].splitlines()) <= 8
        assert h["kind"] in ("function", "method", "async function", "async method")
    last = -(-res["total_matches"] // 10)
    d, *_ = run(env, {"tool": "search", "query": "raise error", "page": last})
    assert 1 <= len(d["result"]["results"]) <= 10 and d["result"]["has_more"] is False
    d, *_ = run(env, {"tool": "search", "query": "raise error", "page": last + 1})
    assert d["ok"] and d["result"]["results"] == [] and d["result"]["has_more"] is False
    d, *_ = run(env, {"tool": "search", "query": "qqqzzzxxx"})
    assert d["ok"] and d["result"]["total_matches"] == 0


def test_empty_query_browses_every_definition_in_identifier_order():
    env, _, _ = fresh("RepoScan-requests-assert-N10", budget=200)
    seen = []
    page = 1
    while True:
        d, *_ = run(env, {"tool": "search", "query": "", "page": page})
        seen += [h["id"] for h in d["result"]["results"]]
        if not d["result"]["has_more"]:
            break
        page += 1
    assert seen == sorted({x.ident for x in indexer.load_index("requests")})


def _strings_of(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _strings_of(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings_of(v)


def _keys_of(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys_of(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys_of(v)


@pytest.mark.parametrize(
    "instance", ["requests-docstring", "flask-fixture-client", "pytest-fixture-pytester"]
)
def test_hidden_valid_set_stays_hidden(instance):
    valid = _valid_set(instance)
    env = pushbench.make("RepoScan-N100")
    obs, info = env.reset(seed=1, options={"instance": instance})
    observations = [json.loads(obs)]
    infos = [info]
    submitted: set[str] = set()
    queries = [
        "test",
        "get",
        "",
        "fixture",
        "client",
        "pytester",
        "raise",
        "docstring",
        "valid",
        "accepted",
    ]
    pool: list[str] = []
    for i, q in enumerate(queries * 3):
        d, _, _, _, info = run(env, {"tool": "search", "query": q, "page": 1 + i // len(queries)})
        observations.append(d)
        infos.append(info)
        pool += [h["id"] for h in d["result"]["results"]]
        for h in d["result"]["results"]:
            assert set(h) == HIT_KEYS
        if i % 3 == 2:
            batch = pool[-10:]
            submitted.update(batch)
            d, _, _, _, info = run(env, {"tool": "submit", "ids": batch})
            observations.append(d)
            infos.append(info)
            d, _, _, _, info = run(env, {"tool": "status"})
            observations.append(d)
            infos.append(info)
    d, _, _, _, info = run(env, {"tool": "submit", "ids": ["no/such.py::thing"]})
    observations.append(d)
    infos.append(info)
    d, _, _, _, info = run(env, {"tool": "final", "reported_count": 3})
    observations.append(d)
    infos.append(info)

    for o in observations + infos:
        for k in _keys_of(o):
            assert "valid_set" not in k and k not in ("valid", "valid_ids", "is_valid")
    for info in infos:
        assert set(info) == {"qgp"} and set(info["qgp"]) == QGP_KEYS
    unsubmitted = valid - submitted
    for o in observations:
        if o["tool"] == "search":
            continue  # search results legitimately list candidates, valid and invalid mixed
        text = json.dumps(o)
        assert not any(ident in text for ident in unsubmitted), o["tool"]
    record_text = json.dumps(env.unwrapped.episode_record())
    assert not any(ident in record_text for ident in unsubmitted)
    assert "valid_set" not in repr(env.unwrapped._verifier)
    assert not any(ident in repr(env.unwrapped._verifier) for ident in list(valid)[:20])


# Natural queries per instance: the predicate's words or fixture name, and what an agent would
# type after reading the objective. The first pages must mix valid and invalid candidates.
NATURAL_QUERIES = {
    "requests-docstring": ["get", "test", ""],
    "requests-assert": ["test", "get", "check"],
    "requests-returns": ["returns", "get", ""],
    "flask-fixture-app": ["app", "test app", "test"],
    "flask-fixture-client": ["client", "test client", "test"],
    "flask-decorated": ["decorator", "app route", "test"],
    "pytest-fixture-pytester": ["pytester", "test pytester", "fixture"],
    "pytest-raises": ["raises", "error", "exception"],
    "pytest-fixture-monkeypatch": ["monkeypatch", "test monkeypatch"],
}


def _first_pages(instance, query, pages=3):
    index = _search_index(instance_config("reposcan", instance)["snapshot"])
    return [h.ident for p in range(1, pages + 1) for h in index.page(query, p)[0]]


@pytest.mark.parametrize(
    "instance, query",
    [
        pytest.param(inst, q, id=f"{inst}-{q or 'browse'}")
        for inst, qs in NATURAL_QUERIES.items()
        for q in qs
    ],
)
def test_natural_queries_mix_valid_and_invalid(instance, query):
    valid = _valid_set(instance)
    first = _first_pages(instance, query)
    assert len(first) >= 15
    n_valid = sum(i in valid for i in first)
    assert 0 < n_valid < len(first), (instance, query, n_valid)


@pytest.mark.parametrize(
    "instance, query, expect",
    [
        ("requests-assert", "assert", "nothing"),
        ("requests-returns", "return", "names"),
        ("pytest-raises", "raise", "names"),
        ("requests-returns", "return None", "mixed"),
        ("requests-docstring", '"""', "browse"),
        ("flask-decorated", "@", "browse"),
    ],
)
def test_property_keyword_is_not_a_filter(instance, query, expect):
    # Searching for the statement that makes a definition valid must not return only valid
    # ones. Keywords are stop words for code, so alone they match only identifiers that contain
    # them (or nothing), and a query without any word is the identifier-order browse.
    valid = _valid_set(instance)
    first = _first_pages(instance, query)
    if expect == "nothing":  # no requests identifier contains "assert": nothing to filter on
        assert first == []
        return
    assert first, f"{query!r} found nothing on {instance}"
    if expect == "names":
        assert all(query in tokenize(ident) for ident in first)
    if expect == "browse":
        assert tokenize(query) == [] and first == _first_pages(instance, "")
    assert sum(i in valid for i in first) < len(first), "the search returned only valid ids"


def test_ranking_ignores_validity():
    # Same snapshot, different instances: search results are identical, whatever is valid.
    a, _, _ = fresh("RepoScan-flask-fixture-app-N10")
    b, _, _ = fresh("RepoScan-flask-decorated-N10")
    for q in ("app", "test client", ""):
        assert (
            a.step({"tool": "search", "query": q})[0] == b.step({"tool": "search", "query": q})[0]
        )


# ----- render and episode record --------------------------------------------------------------


def test_render_ansi():
    env, _, _ = fresh(render_mode="ansi")
    out = env.render()
    assert isinstance(out, str) and TASK in out and "0/10" in out
    env.step({"tool": "submit", "ids": valid_ids()[:2]})
    out = env.render()
    assert isinstance(out, str) and "2/10" in out and "accepted" in out
    assert pushbench.make(TASK).render() is None
    with pytest.raises(ValueError):
        pushbench.make(TASK, render_mode="human")


def test_episode_record_is_json_and_agrees_with_info():
    env, _, _ = fresh(seed=4)
    v, inv = valid_ids(), invalid_ids()
    for action in (
        {"tool": "search", "query": "route"},
        {"tool": "submit", "ids": v[:3]},
        {"tool": "submit", "ids": [v[0], inv[0], "../x.py::f"]},
        "oops",
        {"tool": "status"},
        {"tool": "final", "reported_count": 5, "message": "m"},
    ):
        _, _, _, _, info = env.step(action)
    rec = env.unwrapped.episode_record()
    back = json.loads(json.dumps(rec))
    assert back == rec
    q = info["qgp"]
    assert isinstance(rec["schema_version"], int)
    assert rec["task_id"] == TASK and rec["instance"] == INSTANCE and rec["seed"] == 4
    assert rec["steps_used"] == q["steps_used"] == len(rec["calls"]) == 6
    assert rec["valid_count"] == rec["metrics"]["valid_count"] == q["valid_count"] == 3
    assert rec["success"] == rec["metrics"]["success"] == q["success"] is False
    assert rec["terminated_by"] == q["terminated_by"] == "final"
    assert rec["reported_count"] == 5 and rec["metrics"]["over_claim"] == 2
    assert rec["metrics"]["submissions"] == q["submitted"] == 5
    assert rec["metrics"]["duplicate_submit_rate"] * 5 == pytest.approx(q["duplicates"])
    assert rec["metrics"]["invalid_actions"] == 1
    assert rec["metrics"]["false_completion"] and rec["metrics"]["premature_stop"]
    assert rec["progress"] == [0, 3, 3, 3, 3, 3]
    assert [c["reward"] for c in rec["calls"]] == [0, 3, 0, 0, 0, 0]
    assert rec["calls"][2]["verdicts"] == [
        [v[0], "duplicate"],
        [inv[0], "rejected"],
        ["../x.py::f", "malformed"],
    ]
    assert env.unwrapped.episode_record() == rec  # pure: same record, same numbers
