"""Feedback that explains (issue 27, item 5; family version 2): RepoScan search says which query
terms it ignored and why, a DataOps answer of the wrong shape gets the expected form with an
example (and a JSON array is a list answer), ``list_tasks`` filters by kind."""

from __future__ import annotations

import json
import keyword
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pushbench
from pushbench import tasks
from pushbench.envs.sandbox import Workspace
from pushbench.families.dataops import answers as A
from pushbench.families.dataops import units as U
from pushbench.families.reposcan import search as S

REPOSCAN = "RepoScan-pytest-raises-N10"
OTHER = "RepoScan-requests-docstring-N10"  # another snapshot and valid set
KEYWORDS = sorted({k.lower() for k in keyword.kwlist + keyword.softkwlist})
WORDS = KEYWORDS + [
    "session",
    "Error",
    "assertRaises",
    "raise_for_status",
    "::",
    "()",
    "_",
    "x9",
    "None",
    "TYPE",
    "fixture",
    "café",
    "日本",
]
# Free text as agents type it: anything but the control characters the env refuses first.
QUERY_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=120)
QUERIES = st.one_of(
    QUERY_TEXT,
    st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join),
    st.tuples(QUERY_TEXT, st.lists(st.sampled_from(WORDS), max_size=4)).map(
        lambda t: " ".join([t[0], *t[1]])
    ),
)
ENVS: dict = {}


def env_for(task: str):
    if task not in ENVS:
        ENVS[task] = pushbench.make(task, budget=5000)
        ENVS[task].reset(seed=0)
    if ENVS[task].unwrapped.steps_used > 4000:  # a long hypothesis run: start a new episode
        ENVS[task].reset(seed=0)
    return ENVS[task]


def search(task: str, query: str, page: int = 1) -> dict:
    obs = json.loads(env_for(task).step({"tool": "search", "query": query, "page": page})[0])
    assert obs["ok"], obs
    return obs["result"]


def expected_ignored(query: str) -> list[str]:
    """The oracle: the query's tokens that are Python 3.11 keywords, first occurrence first."""
    out: list[str] = []
    for t in S.tokenize(query):
        if t in KEYWORDS and t not in out:
            out.append(t)
    return out


# ----- RepoScan search ----------------------------------------------------------------------
def test_the_stop_words_are_pinned_to_python_3_11():
    # The index must not change with the interpreter: 3.12 adds the soft keyword "type".
    assert "type" not in S._STOP
    if sys.version_info[:2] == (3, 11):
        assert S._STOP == frozenset(KEYWORDS)
    else:
        assert S._STOP <= {k.lower() for k in keyword.kwlist + keyword.softkwlist}


def test_a_keyword_query_says_what_was_ignored_and_why():
    res = search(REPOSCAN, "raise return assert")
    assert res["ignored"] == {"terms": ["raise", "return", "assert"], "reason": S.KEYWORD_REASON}
    assert "not indexed in code" in res["ignored"]["reason"]
    mixed = search(REPOSCAN, "Error raise_for_status")
    assert mixed["ignored"]["terms"] == ["raise", "for"]
    assert "ignored" not in search(REPOSCAN, "session fixture")
    assert "ignored" not in search(REPOSCAN, "   ")  # blank is the empty query: nothing lost
    browse = search(REPOSCAN, "")
    symbols = search(REPOSCAN, ":: ()")
    assert symbols["ignored"] == {"terms": [":: ()"], "reason": S.NO_WORDS_REASON}
    assert symbols["total_matches"] == browse["total_matches"]
    assert symbols["results"] == browse["results"]


def test_keywords_match_only_paths_and_names():
    # What the reason says: every hit of a keyword-only query has the keyword in its identifier.
    for word in ("raise", "return", "assert", "yield"):
        for page in (1, 2, 3):
            res = search(REPOSCAN, word, page)
            for hit in res["results"]:
                assert word in S.tokenize(hit["id"]), (word, hit["id"])
            if not res["has_more"]:
                break


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=QUERIES)
def test_search_feedback_is_exact_and_a_function_of_the_query(query):
    block = S.search_feedback(query)  # never raises
    terms = expected_ignored(query)
    if terms:
        assert block == {"terms": terms, "reason": S.KEYWORD_REASON}
    elif query.strip() and not S.tokenize(query):
        assert block["reason"] == S.NO_WORDS_REASON and query.strip().startswith(
            block["terms"][0].removesuffix("...")
        )
    else:
        assert block is None
    # No leak: the same block on another snapshot and valid set, built from the query alone.
    query = query[:500]
    a, b = search(REPOSCAN, query), search(OTHER, query)
    assert a.get("ignored") == b.get("ignored") == S.search_feedback(query)
    for term in (a.get("ignored") or {}).get("terms", []):
        assert term.removesuffix("...").lower() in query.lower()


# ----- DataOps answers -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def generated_units():
    """Every unit of every built-in backlog at two targets (files in throwaway workspaces)."""
    out = []
    for cfg in tasks.manifests()["dataops"].instances.values():
        for target in (5, 20):
            ws = Workspace.create()
            try:
                out += U.generate(cfg, target, ws)
            finally:
                Workspace.remove(ws)
    return out


def test_every_right_list_answer_has_the_item_shape(generated_units):
    # The shape check must never refuse a right answer: every expected item is one ITEM.
    lists = [u for u in generated_units if u.answer_type == "list"]
    assert len(lists) > 50
    for u in lists:
        items = U.list_items(u.secret["answer"])
        assert all(A.ITEM.fullmatch(i) for i in items), (u.id, u.secret["answer"])
        right = A.read_answer(u.secret["answer"], "list")
        as_array = A.read_answer(sorted(items), "list")
        as_text = A.read_answer(json.dumps(sorted(items)), "list")
        for value in (right, as_array, as_text):
            assert U._normalise(value, "list") == items


def _odd_values():
    scalars = st.one_of(
        st.integers(-(10**6), 10**6),
        st.text(max_size=12),
        st.booleans(),
        st.none(),
        st.floats(allow_nan=False, allow_infinity=False),
    )
    return st.one_of(
        st.text(max_size=60),
        st.lists(
            st.sampled_from(
                [
                    "4",
                    "17",
                    "ACC-104",
                    "part-0012.csv.gz",
                    "none",
                    " 7 ",
                    ",",
                    "[",
                    "]",
                    '"',
                    ";",
                    " ",
                    "x y",
                ]
            ),
            max_size=8,
        ).map("".join),
        st.lists(scalars, max_size=6),
        st.lists(scalars, max_size=6).map(json.dumps),
        scalars,
        st.dictionaries(st.text(max_size=3), scalars, max_size=2),
        st.lists(st.lists(scalars, max_size=2), max_size=2),
    )


@settings(max_examples=400, deadline=None)
@given(value=_odd_values(), atype=st.sampled_from(["list", "text", "integer"]))
def test_read_answer_records_or_states_the_form(value, atype):
    try:
        got = A.read_answer(value, atype)
    except A.AnswerShapeError as e:
        msg = str(e)
        assert msg.startswith("the value ") and A.FORMS[atype] in msg and "e.g." in msg
        if atype == "list" and isinstance(value, str):
            # exactness: a refused text could never have been right in version 1 either
            v1 = U._normalise(value.strip(), "list")
            assert v1 is None or not all(A.ITEM.fullmatch(i) for i in v1) or not v1
        return
    assert isinstance(got, (str, int)) and not isinstance(got, bool)
    if isinstance(value, str) and not (atype == "list" and value.lstrip().startswith("[")):
        assert got == value.strip()  # what version 1 recorded
    if atype == "list" and isinstance(value, list):
        assert U._normalise(got, "list") == U._normalise(
            ",".join(str(i).strip() for i in value), "list"
        )


def _dataops_env():
    env = pushbench.make("DataOps-b0-N10", budget=5000)
    env.reset(seed=0)
    units = env.unwrapped._units.values()
    lst = next(u for u in units if u.answer_type == "list")
    text = next((u for u in units if u.answer_type == "text"), None)
    return env, lst, text


def step(env, call: dict) -> dict:
    return json.loads(env.step(call)[0])


def test_a_json_array_is_the_same_list_answer_and_passes():
    env, unit, _ = _dataops_env()
    items = sorted(U.list_items(unit.secret["answer"]))
    numbers = [int(i) if i.isdigit() else i for i in items]
    for value in (
        unit.secret["answer"],
        items,
        numbers,
        json.dumps(items),
        " " + json.dumps(items) + " ",
    ):
        obs = step(env, {"tool": "answer", "unit_id": unit.id, "value": value})
        assert obs["ok"], obs
        assert U.list_items(obs["result"]["recorded"]) == frozenset(items)
        assert step(env, {"tool": "run_verifier", "unit_id": unit.id})["result"]["passed"]
    env.close()


def test_a_wrong_shape_is_an_error_quoting_the_form_and_records_nothing():
    env, unit, text_unit = _dataops_env()
    step(env, {"tool": "answer", "unit_id": unit.id, "value": unit.secret["answer"]})
    for bad in ('"4","17"', "4;17", "[4, 17", [[4]], [True], None, {"rows": [4]}, 4.5, True):
        used = env.unwrapped.steps_used
        obs = step(env, {"tool": "answer", "unit_id": unit.id, "value": bad})
        assert not obs["ok"] and obs["error_type"] == "answer_shape", obs
        assert 'e.g. "4,17,102"' in obs["error"] and "JSON array" in obs["error"]
        assert env.unwrapped.steps_used == used + 1
    # the earlier (right) answer is still the recorded one
    assert step(env, {"tool": "run_verifier", "unit_id": unit.id})["result"]["passed"]
    if text_unit is not None:
        obs = step(env, {"tool": "answer", "unit_id": text_unit.id, "value": ["a", "b"]})
        assert obs["error_type"] == "answer_shape" and "one value" in obs["error"]
    env.close()


def test_the_answer_schema_offers_the_array():
    env, _, _ = _dataops_env()
    schema = env.unwrapped.tool_schemas()
    [answer] = [t["function"] for t in schema if t["function"]["name"] == "answer"]
    forms = answer["parameters"]["properties"]["value"]["anyOf"]
    assert {"type": "string"} in forms and {"type": "integer"} in forms
    assert any(f.get("type") == "array" for f in forms)
    env.close()


DATAOPS: dict = {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.one_of(st.text(max_size=80), _odd_values()))
def test_any_answer_string_gets_a_verdict_or_the_shape_error(value):
    if not DATAOPS or DATAOPS["env"].unwrapped.steps_used > 4000:
        DATAOPS.update(zip(("env", "unit", "text"), _dataops_env(), strict=True))
    env, unit = DATAOPS["env"], DATAOPS["unit"]
    used = env.unwrapped.steps_used
    obs = step(env, {"tool": "answer", "unit_id": unit.id, "value": value})
    assert obs["ok"] or obs["error_type"] in ("answer_shape", "control_chars"), obs
    check = step(env, {"tool": "run_verifier", "unit_id": unit.id})
    assert check["ok"] and isinstance(check["result"]["passed"], bool)
    sub = step(env, {"tool": "submit", "unit_id": unit.id})
    verdict = sub["result"]["verdicts"][0]["verdict"]
    assert verdict == (
        "rejected"
        if not check["result"]["passed"]
        else "duplicate"
        if unit.id in env.unwrapped._accepted and verdict != "accepted"
        else "accepted"
    )
    assert env.unwrapped.steps_used == used + 3


# ----- list_tasks(kind) -----------------------------------------------------------------------
def test_list_tasks_kinds_partition_the_tasks():
    everything = pushbench.list_tasks()
    by_kind = {k: pushbench.list_tasks(kind=k) for k in tasks.TASK_KINDS}
    assert sorted(sum(by_kind.values(), [])) == sorted(everything)  # disjoint and complete
    assert by_kind["suite"] and by_kind["instance"] and by_kind["synthetic"]
    specs = tasks.all_tasks()
    for tid in by_kind["instance"]:
        assert len(specs[tid].instances) == 1 and "synth" not in tid
    prefixes = {m.prefix for m in tasks.manifests().values()}  # DataOps-public has a dash
    for tid in by_kind["suite"]:
        prefix, _, last = specs[tid].task_id.rpartition("-")
        assert prefix in prefixes and last.startswith("N")  # <Prefix>-N<k>
    assert all(t.startswith("RepoScan-synth-") for t in by_kind["synthetic"])
    assert pushbench.list_tasks("RepoScan", kind="suite") == [
        t for t in pushbench.list_tasks("RepoScan") if t in by_kind["suite"]
    ]


def test_a_user_task_is_of_kind_user():
    synth = tasks.user_instances()["synth-s1-docstring"][0]
    with tasks.staged("mine-docstring", synth.model_copy(update={"targets": [10]})):
        user = pushbench.list_tasks(kind="user")
        assert user == ["RepoScan-mine-docstring-N10", "RepoScan-user-N10"]
        assert "RepoScan-mine-docstring-N10" not in pushbench.list_tasks(kind="synthetic")
    assert pushbench.list_tasks(kind="user") == []


def test_an_unknown_kind_names_the_kinds(capsys):
    with pytest.raises(tasks.UnknownTaskKindError) as e:
        pushbench.list_tasks(kind="suites")
    assert all(k in str(e.value) for k in tasks.TASK_KINDS)
    from typer.testing import CliRunner

    from pushbench.cli import app

    res = CliRunner().invoke(app, ["tasks", "--kind", "bogus"])
    assert res.exit_code == 2 and "unknown task kind 'bogus'" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(app, ["tasks", "SWELite", "--kind", "suite"])
    assert res.exit_code == 0 and "SWELite-N10" in res.output and "SWELite-flask" not in res.output
