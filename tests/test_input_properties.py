"""Every input is answered and costs exactly one recorded step (hypothesis property tests).

Random and adversarial actions (tests/adversarial.py: huge ints, lone surrogates, deep nesting,
wrong types, NaN, cycles, sets, bytes, bulk ids, truncated JSON, mixed with well-formed calls)
drive the bare environment of each family and every controller of controllers/catalogue.yaml.
After every step: no exception escaped, the observation is in the observation space and says
``ok``, exactly one step was charged and recorded (none after the end: ``episode_over``), and the
verifier's state changed only through accepted submissions (reward == newly accepted). The LLM
policies get the same kinds of model output through a real HTTP stub server.
"""

from __future__ import annotations

import json
from functools import cache

import pytest
from adversarial import Resolve, actions, resolve, text_fragments, texts
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import pushbench
from pushbench.controllers import catalogue, serves
from pushbench.envs import actions as A
from pushbench.families.dataops import artifacts

REPOSCAN = "RepoScan-requests-docstring-N10"
DATAOPS = "DataOps-b1-N3"
SWELITE = "SWELite-requests-N3"
CONTROLLERS = list(catalogue())
# the controllers that may run on each family (the others are refused: controller scope)
REPOSCAN_CONTROLLERS = [c for c in CONTROLLERS if serves(c, "reposcan")]
DATAOPS_CONTROLLERS = [c for c in CONTROLLERS if serves(c, "dataops")]
SLOW = settings(
    max_examples=max(10, settings.default.max_examples // 4),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NORMAL = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ----- well-formed calls per family ---------------------------------------------------------------
@cache
def reposcan_pool() -> tuple[str, ...]:
    from pushbench.families.reposcan import indexer
    from pushbench.families.reposcan.env import _valid_set

    valid = sorted(_valid_set("requests-docstring"))
    others = sorted({d.ident for d in indexer.load_index("requests")} - set(valid))
    return tuple(valid[:12] + others[:12] + ["not an id", "src/x.py::nope"])


def reposcan_valid() -> st.SearchStrategy:
    pool = st.sampled_from(reposcan_pool())
    return st.one_of(
        st.builds(
            lambda q, p: {"tool": "search", "query": q, "page": p},
            st.sampled_from(["", "session", "request", "get", "auth"]),
            st.integers(1, 4),
        ),
        st.builds(
            lambda ids: {"tool": "submit", "ids": ids}, st.lists(pool, min_size=1, max_size=12)
        ),
        st.builds(
            lambda ids: {"tool": "submit", "ids": ids}, st.lists(pool, min_size=1, max_size=10)
        ),
        st.just({"tool": "status"}),
        st.builds(lambda n: {"tool": "final", "reported_count": n}, st.integers(0, 12)),
        st.just({"tool": "ask_user", "message": "stop?"}),
    )


def _fix(u, uid: str):
    """The call that makes unit ``uid`` pass (tests may read the secret; agents never can)."""
    unit = u._units.get(uid)
    if unit is None:
        return {"tool": "status"}
    if unit.answer_type is not None:
        return {"tool": "answer", "unit_id": uid, "value": unit.secret["answer"]}
    text = (
        unit.secret["fixed_text"]
        if unit.kind == "metadata_repair"
        else artifacts.dump(unit.secret["format"], unit.secret["fixed_doc"])
    )
    return {"tool": "write_file", "path": unit.secret["target"], "content": text}


def _read(u, uid: str):
    unit = u._units.get(uid)
    if unit is None:
        return {"tool": "read_file", "path": f"{uid}/x.csv"}
    path = unit["file"] if isinstance(unit, dict) else unit.files[0]  # SWE-lite units: dicts
    return {"tool": "read_file", "path": path}


def unit_valid(verifier_tools: bool = True) -> st.SearchStrategy:
    uid = st.sampled_from(["u01", "u02", "u03", "u04", "u05", "u99"])
    calls = [
        st.builds(lambda p: {"tool": "list_units", "page": p}, st.integers(1, 2)),
        st.builds(lambda i: {"tool": "inspect", "unit_id": i}, uid),
        st.builds(lambda i: Resolve(f"read {i}", lambda u: _read(u, i)), uid),
        st.builds(
            lambda i, v: {"tool": "answer", "unit_id": i, "value": v},
            uid,
            st.one_of(st.integers(-3, 50), texts),
        ),
        st.just({"tool": "status"}),
        st.builds(lambda n: {"tool": "final", "reported_count": n}, st.integers(0, 5)),
    ]
    if verifier_tools:
        calls += [
            st.builds(lambda i: Resolve(f"fix {i}", lambda u: _fix(u, i)), uid),
            st.builds(lambda i: {"tool": "run_verifier", "unit_id": i}, uid),
            st.builds(lambda i: {"tool": "submit", "unit_id": i}, uid),
            st.builds(lambda i: {"tool": "submit", "unit_id": i}, uid),
        ]
    return st.one_of(*calls)


# ----- the invariants -----------------------------------------------------------------------------
def _submitted(u) -> int:
    if u.family == "reposcan":
        return len(u._verifier._submitted)
    return u.counts["submitted"] + u.counts["malformed"]


def drive(env, steps: list) -> dict:
    """Step every action, checking the invariants after each; return the final record."""
    u = env.unwrapped
    for action in steps:
        action = resolve(action, env)
        over = u.terminated_by is not None
        steps0, valid0, sub0 = u.steps_used, u._valid_count(), _submitted(u)
        obs, reward, terminated, truncated, info = env.step(action)  # nothing may escape
        assert env.observation_space.contains(obs), obs[:300]
        d = json.loads(obs)
        assert isinstance(d["ok"], bool) and (("result" in d) == d["ok"])
        if not d["ok"]:
            assert d["error_type"] in A.ERROR_TYPES, d
        if over:
            assert d["error_type"] == "episode_over" and u.steps_used == steps0 and reward == 0
        else:
            assert u.steps_used == steps0 + 1
        assert u.steps_used == len(u.ledger) == info["qgp"]["steps_used"]
        accepted = (
            sum(v["verdict"] == "accepted" for v in (d.get("result") or {}).get("verdicts", ()))
            if d["ok"]
            else 0
        )
        assert reward == accepted == u._valid_count() - valid0
        if not (d["ok"] and d["tool"] == "submit"):
            assert _submitted(u) == sub0, "the verifier changed outside an accepted submit"
        assert terminated or truncated or u.terminated_by is None
    record = env.get_wrapper_attr("episode_record")()
    assert record["steps_used"] == len(record["calls"])
    json.dumps(record, allow_nan=False)  # strict JSON: nothing odd was stored
    return record


_ENVS: dict = {}


def fresh(task: str, controller: str | None = None, budget: int = 40):
    key = (task, controller, budget)
    if key not in _ENVS:
        _ENVS[key] = pushbench.make(task, controller=controller, budget=budget)
    env = _ENVS[key]
    env.reset(seed=0)
    return env


@pytest.fixture(scope="module", autouse=True)
def _close_envs():
    yield
    for env in _ENVS.values():
        env.close()
    _ENVS.clear()


# ----- bare environments -------------------------------------------------------------------------
@NORMAL
@given(st.lists(actions(reposcan_valid()), min_size=1, max_size=15))
def test_reposcan_env_answers_every_input(steps):
    drive(fresh(REPOSCAN), steps)


@NORMAL
@given(st.lists(actions(unit_valid()), min_size=1, max_size=15))
def test_dataops_env_answers_every_input(steps):
    drive(fresh(DATAOPS), steps)


@pytest.mark.slow
@SLOW
@given(st.lists(actions(unit_valid(verifier_tools=False)), min_size=1, max_size=10))
def test_swelite_env_answers_every_input(steps):
    # No well-formed run_verifier/submit (they run pytest); refused ones are still drawn.
    drive(fresh(SWELITE), steps)


# ----- every controller ---------------------------------------------------------------------------
@pytest.mark.parametrize("controller", REPOSCAN_CONTROLLERS)
@SLOW
@given(steps=st.lists(actions(reposcan_valid()), min_size=1, max_size=12))
def test_every_controller_answers_every_input_reposcan(controller, steps):
    drive(fresh(REPOSCAN, controller), steps)


@pytest.mark.parametrize("controller", DATAOPS_CONTROLLERS)
@SLOW
@given(steps=st.lists(actions(unit_valid()), min_size=1, max_size=12))
def test_every_controller_answers_every_input_dataops(controller, steps):
    drive(fresh(DATAOPS, controller), steps)


# ----- the normaliser itself ----------------------------------------------------------------------
@NORMAL
@given(actions(reposcan_valid()))
def test_decode_is_total_and_bounded(action):
    """decode never raises anything but ActionError; what it returns is plain bounded JSON."""
    try:
        call = A.decode(action)
    except A.ActionError as e:
        assert e.error_type in A.ERROR_TYPES
        return
    text = json.dumps(call, ensure_ascii=False, allow_nan=False)
    assert len(text.encode("utf-8")) <= A.MAX_ACTION_BYTES
    assert A.decode(text) == call == A.decode(call)  # text and dict forms agree
    assert A.preview(call) is not None


class _Str(str):
    def __str__(self):
        return "changed"


class _Int(int):
    def __int__(self):
        return 7


_flat_scalars = st.one_of(
    st.text(max_size=5),
    st.sampled_from(["\ud800", "a\udfff", "x" * 70_000]),
    st.integers(),
    st.sampled_from([10**1000, -(10**1000), 10**1000 - 1, 2**3400]),
    st.floats(),  # NaN and infinities included
    st.booleans(),
    st.none(),
    st.builds(_Str, st.text(max_size=3)),
    st.builds(_Int, st.integers(-3, 3)),
)
_flat_dicts = st.dictionaries(
    st.one_of(st.text(max_size=4), st.sampled_from(["\udc00", 1, None])),
    st.one_of(
        _flat_scalars,
        st.lists(_flat_scalars, max_size=4),
        st.tuples(_flat_scalars),
        st.lists(st.lists(_flat_scalars, max_size=2), max_size=2),
        st.dictionaries(st.text(max_size=2), _flat_scalars, max_size=2),
    ),
    max_size=5,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(actions(reposcan_valid()), _flat_dicts, _flat_dicts))
@example({"a": float("inf")})
@example({"ids": ["a", float("nan")]})
@example({"n": 10**1000})
@example({"n": [-(10**1000)]})
@example({"q": "\ud800"})
@example({"\udc00": 1})
@example({"q": _Str("x")})
@example({"n": _Int(3)})
@example({"ids": ["a", "b"]})
@example({"ids": ("a",)})
@example({"tool": "submit", "ids": ["x" * 70_000]})
def test_flat_calls_decode_as_the_full_copy_does(action):
    """The flat-call shortcut of dict decoding changes nothing: same call (types included) or
    the same refusal (code and message) as the full copy alone."""
    if not isinstance(action, dict):
        return
    fast = _outcome(action)
    real = A._flat_copy
    A._flat_copy = lambda _action: None  # the full copy only
    try:
        slow = _outcome(action)
    finally:
        A._flat_copy = real
    if isinstance(slow, A.ActionError):
        assert isinstance(fast, A.ActionError)
        assert (fast.error_type, fast.message) == (slow.error_type, slow.message)
    else:
        assert fast == slow and json.dumps(fast) == json.dumps(slow)
        assert _types(fast) == _types(slow)  # plain types only, no subclass kept
        assert not _shared(fast, action)  # fresh containers, as the full copy makes


def _types(value):
    if isinstance(value, dict):
        return [(type(k), _types(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value)


def _shared(copy, original) -> bool:
    """Whether a container of ``copy`` is an object of ``original``."""
    seen, stack = set(), [original]
    while stack:
        v = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            seen.add(id(v))
            stack.extend(v.values() if isinstance(v, dict) else v)
    stack = [copy]
    while stack:
        v = stack.pop()
        if isinstance(v, (dict, list)):
            if id(v) in seen:
                return True
            stack.extend(v.values() if isinstance(v, dict) else v)
    return False


@NORMAL
@given(actions(reposcan_valid()))
def test_preview_is_total_and_bounded(action):
    out = A.preview(action, 300)
    json.dumps(out, allow_nan=False).encode("utf-8")
    assert len(json.dumps(out)) < 3000


def _outcome(action):
    try:
        return A.decode(action)
    except A.ActionError as e:
        return e


@NORMAL
@given(actions(reposcan_valid()), st.sampled_from([20, 300, 2000]))
def test_preview_decoded_equals_preview(action, limit):
    """The controller previews a call it decoded already: same value, same types, and a dict
    result shares nothing with the decoded call (mutating one leaves the other alone)."""
    outcome = _outcome(action)
    want = A.preview(action, limit)
    got = A.preview_decoded(action, outcome, limit)
    assert got == want and type(got) is type(want)
    assert json.dumps(got) == json.dumps(want)
    if isinstance(got, dict):
        assert got is not outcome
        got.clear()
        assert A.preview(action, limit) == want  # the decoded call was not touched


@SLOW
@given(st.lists(actions(reposcan_valid()), min_size=1, max_size=12))
def test_step_and_proposal_decoded_equal_their_plain_forms(steps):
    """``step_decoded``/``proposal_decoded`` on a decoded call equal ``step``/``proposal`` on the
    action itself: observation, reward, flags, info and the ledger entry."""
    plain, fast = fresh(REPOSCAN), pushbench.make(REPOSCAN, budget=40)
    try:
        fast.reset(seed=0)
        for raw in steps:
            action = resolve(raw, plain)
            outcome = _outcome(action)
            if isinstance(outcome, dict):
                u = plain.unwrapped
                assert fast.unwrapped.proposal_decoded(outcome) == u.proposal(action)
                got = fast.unwrapped.step_decoded(outcome)
            else:
                got = fast.step(action)
            want = plain.step(action)
            assert got == want
            assert fast.unwrapped.ledger == plain.unwrapped.ledger
    finally:
        fast.close()


@NORMAL
@given(st.one_of(texts, text_fragments, st.integers(), st.builds(lambda s: "--" + s, texts)))
def test_dataops_integer_answers_never_raise(value):
    from pushbench.families.dataops.units import _normalise

    out = _normalise(value, "integer")
    assert out is None or isinstance(out, int)


# ----- LLM policies: adversarial model output -----------------------------------------------------
reply_args = st.one_of(
    text_fragments,
    texts,
    st.builds(
        lambda k, v: "{" + json.dumps(k) + ":" + v + "}",
        st.sampled_from(["query", "ids", "page", "tool"]),
        text_fragments,
    ),
)
replies = st.one_of(
    st.builds(
        lambda n, a: {"tool_calls": [{"name": n, "arguments": a}]},
        st.one_of(st.sampled_from(["search", "submit", "status", "remember", "recall"]), texts),
        reply_args,
    ),
    st.builds(lambda c: {"content": c}, texts),
    st.builds(
        lambda a, b: {
            "tool_calls": [{"name": "status", "arguments": a}, {"name": "search", "arguments": b}]
        },
        reply_args,
        reply_args,
    ),
)
LLM_CASES = [("llm", c) for c in REPOSCAN_CONTROLLERS] + [
    ("llm-langgraph", "standard"),
    ("llm-langgraph-memory", "stateqgp"),
    ("llm-memgpt", "standard"),
]


@pytest.mark.parametrize("policy, controller", LLM_CASES)
@settings(
    max_examples=max(3, settings.default.max_examples // 15),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(script=st.lists(replies, min_size=1, max_size=6))
def test_llm_policies_survive_adversarial_model_output(policy, controller, script, tmp_path):
    pytest.importorskip("openai", reason="LLM policies need the optional 'llm' extra")
    from pushbench.policies.llm.stub import StubServer
    from pushbench.runner.episode import run_episode

    with StubServer(script=script) as server:
        params = {
            "model": "stub",
            "base_url": server.url,
            "api_key_env": None,
            "backoff_base": 0.001,
            "backoff_max": 0.01,
            "timeout": 10,
        }
        if "langgraph" in policy:
            params["checkpoint_dir"] = str(tmp_path / f"ck{len(server.script)}{id(script)}")
        record = run_episode(
            REPOSCAN, controller, policy, 0, budget=len(script) + 2, policy_params=params
        )
    assert record["terminated_by"] in ("budget", "final", "ask_user")
    assert record["steps_used"] == len(record["calls"])
    json.dumps(record, allow_nan=False).encode("utf-8")
    for c in record["calls"]:
        assert c["ok"] or c["error_type"] in A.ERROR_TYPES


def test_raw_del_decodes_like_its_dict_form_and_is_refused_in_free_text():
    """DEL is legal raw JSON: text, escape and dict forms agree; free-text arguments refuse it."""
    import pushbench

    key = {"\x7f": None}
    assert A.decode(json.dumps(key, ensure_ascii=False)) == A.decode(key) == key
    assert A.decode(json.dumps(key)) == key  # the \\u007f escape
    env = pushbench.make("RepoScan-requests-docstring-N10")
    env.reset(seed=0)
    for form in ('{"tool":"search","query":"a\x7fb"}', {"tool": "search", "query": "a\x7fb"}):
        obs, *_ = env.step(form)
        assert json.loads(obs)["error_type"] == "control_chars"
