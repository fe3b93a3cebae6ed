"""Issue 11, section 2: the adversarial cases as fixed regression tests.

Each case of the issue (and each found beside it) is stepped through the bare environment and
through every controller, with the invariants of the property tests: no exception, one recorded
step per call (``steps_used == len(calls)``), the verifier unchanged by a refused call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import pushbench
from pushbench.controllers import catalogue, serves
from pushbench.controllers.components import MAX_BUFFERED_IDS
from pushbench.envs import actions as A
from pushbench.envs.base import MAX_BUDGET, BudgetError
from pushbench.families.dataops import artifacts, metadata
from pushbench.families.dataops import units as U

REPOSCAN = "RepoScan-requests-docstring-N10"
DATAOPS = "DataOps-b1-N3"
ROOT = Path(__file__).resolve().parent.parent


def _cycle() -> dict:
    d: dict = {"tool": "status"}
    d["me"] = d
    return d


def _deep_text(n: int) -> str:
    return '{"tool":"status","x":' + "[" * n + "]" * n + "}"


# (label, action, error_type)
ISSUE_CASES = [
    (
        "int-past-str-limit",
        '{"tool":"search","query":"x","page":' + "1" * 4301 + "}",
        "number_too_large",
    ),
    (
        "int-past-str-limit-in-ids",
        '{"tool":"submit","ids":["a.py::f",' + "2" * 5000 + "]}",
        "number_too_large",
    ),
    ("huge-int-object", {"tool": "search", "query": "x", "page": 10**5000}, "number_too_large"),
    ("deep-text", _deep_text(100_00), "too_deep"),
    ("deep-text-recursion", _deep_text(3000), "too_deep"),
    ("deep-dict", {"tool": "status", "x": json.loads("[" * 900 + "]" * 900)}, "too_deep"),
    ("set-in-dict", {"tool": "submit", "ids": {"src/a.py::f"}}, "bad_value"),
    ("cycle", _cycle(), "bad_value"),
    ("nan", {"tool": "final", "reported_count": float("nan")}, "bad_value"),
    ("infinity-text", '{"tool":"final","reported_count":1e999}', "number_too_large"),
    ("bytes-in-dict", {"tool": "search", "query": b"x"}, "bad_value"),
    ("non-str-key", {"tool": "status", 3: 4}, "bad_value"),
    ("surrogate-dict", {"tool": "search", "query": "\ud800"}, "bad_encoding"),
    ("surrogate-text", '{"tool":"search","query":"\\udfff"}', "bad_encoding"),
    ("surrogate-tool-name", {"tool": "search\udc00"}, "bad_encoding"),
    (
        "bulk-dict-submit",
        {"tool": "submit", "ids": [f"src/m{i}.py::f" for i in range(40_000)]},
        "too_large",
    ),
]


def _check(env, action, error_type):
    u = env.unwrapped
    steps, valid = u.steps_used, u._valid_count()
    obs, reward, term, trunc, info = env.step(action)
    d = json.loads(obs)
    assert d["ok"] is False and d["error_type"] == error_type, d
    assert reward == 0 and u._valid_count() == valid
    assert u.steps_used == steps + 1 == len(u.ledger) == info["qgp"]["steps_used"]
    assert u.ledger[-1]["error_type"] == error_type and u.ledger[-1]["args"] is None
    rec = env.get_wrapper_attr("episode_record")()
    assert rec["steps_used"] == len(rec["calls"])
    json.dumps(rec, allow_nan=False)


@pytest.mark.parametrize("controller", [None, *(c for c in catalogue() if serves(c, "reposcan"))])
def test_issue_cases_under_every_controller(controller):
    env = pushbench.make(REPOSCAN, controller=controller)
    env.reset(seed=0)
    for _label, action, error_type in ISSUE_CASES:
        _check(env, action, error_type)
    env.close()


@pytest.mark.parametrize("controller", [None, "unitqgp", "verifier_gated"])
def test_issue_cases_on_dataops(controller):
    env = pushbench.make(DATAOPS, controller=controller)
    env.reset(seed=0)
    for _label, action, error_type in ISSUE_CASES:
        _check(env, action, error_type)
    env.close()


# ----- one size limit on every path ---------------------------------------------------------------
def test_bulk_submit_is_refused_the_same_as_dict_text_and_bytes_under_buffered_submit():
    ids = [f"src/requests/m{i}.py::f" for i in range(40_000)]
    call = {"tool": "submit", "ids": ids}
    for form in (call, json.dumps(call), json.dumps(call).encode()):
        env = pushbench.make(REPOSCAN, controller="stateqgp")
        env.reset(seed=0)
        obs, _, _, _, info = env.step(form)
        d = json.loads(obs)
        assert d["error_type"] == "too_large" and info["controller"]["interventions"] == []
        assert env.get_wrapper_attr("state").buffer == []  # nothing was queued
        env.close()


def test_buffered_queue_is_bounded():
    env = pushbench.make(REPOSCAN, controller="stateqgp")
    env.reset(seed=0)
    ids = [f"src/requests/m{i}.py::f" for i in range(MAX_BUFFERED_IDS + 60)]  # fits 64 KiB
    assert len(json.dumps({"tool": "submit", "ids": ids})) < A.MAX_ACTION_BYTES
    obs, _, _, _, info = env.step({"tool": "submit", "ids": ids})
    d = json.loads(obs)
    assert d["ok"] and len(d["result"]["verdicts"]) == 10
    assert len(env.get_wrapper_attr("state").buffer) == MAX_BUFFERED_IDS
    assert "buffer_full" in info["controller"]["interventions"]
    assert "50 id(s) were not queued" in d["controller"]["message"]
    env.close()


# ----- budgets, closed environments, harness bugs -------------------------------------------------
@pytest.mark.parametrize("budget", [0, -1, True, False, "5", 2.0, MAX_BUDGET + 1, None.__class__])
def test_bad_budgets_are_refused_at_make_time(budget):
    with pytest.raises(BudgetError, match="budget"):
        pushbench.make(REPOSCAN, budget=budget)
    assert issubclass(BudgetError, ValueError)


def test_budget_one_is_the_smallest():
    env = pushbench.make(REPOSCAN, budget=1)
    env.reset(seed=0)
    _, _, term, trunc, _ = env.step({"tool": "status"})
    assert trunc and not term


@pytest.mark.parametrize("task", [REPOSCAN, DATAOPS])
def test_step_after_close_raises_and_reset_reopens(task):
    env = pushbench.make(task)
    env.reset(seed=0)
    env.step({"tool": "status"})
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step({"tool": "status"})
    env.reset(seed=0)  # a new episode after close works
    assert json.loads(
        env.step({"tool": "list_units"} if task == DATAOPS else {"tool": "status"})[0]
    )["ok"]
    env.close()


def test_a_raising_tool_is_recorded_then_raised(monkeypatch):
    env = pushbench.make(REPOSCAN)
    env.reset(seed=0)
    u = env.unwrapped

    def broken(args):
        raise KeyError("harness bug")

    monkeypatch.setattr(u, "_tool_status", broken)
    with pytest.raises(KeyError):
        env.step({"tool": "status"})
    assert u.steps_used == len(u.ledger) == 1 and u.ledger[0]["error_type"] == "internal"
    assert env.unwrapped.episode_record()["steps_used"] == 1


# ----- DataOps answers and checkers are total -----------------------------------------------------
def _answer_unit(env):
    u = env.unwrapped
    # answer units hold list answers since answers were made unguessable; the checker must be
    # total for whatever value type a unit expects
    return next(x for x in u._units.values() if x.answer_type is not None)


@pytest.mark.parametrize(
    "value",
    [
        "²",
        "--5",
        "-",
        "٣",
        "1_000",
        "3.0",
        "+-1",
        "9" * 150,
        "𝟙",
        " -0 ",
        "1," + "9" * 1500,
        ", ,",
        "none,none",
    ],
)
def test_dataops_odd_integer_answers_are_judged_not_raised(value):
    env = pushbench.make("DataOps-N10")
    env.reset(seed=0)
    unit = _answer_unit(env)
    for call in (
        {"tool": "answer", "unit_id": unit.id, "value": value},
        {"tool": "run_verifier", "unit_id": unit.id},
        {"tool": "submit", "unit_id": unit.id},
    ):
        d = json.loads(env.step(call)[0])
        # version 2: an item outside [A-Za-z0-9._-] is a shape error (nothing is recorded)
        assert d["ok"] or (call["tool"] == "answer" and d["error_type"] == "answer_shape"), d
    assert d["result"]["verdicts"][0]["verdict"] in ("accepted", "rejected")
    assert env.unwrapped.steps_used == 3 == len(env.unwrapped.ledger)
    env.close()


def test_integer_answer_rules():
    assert U._normalise(" -12 ", "integer") == -12 and U._normalise(7, "integer") == 7
    assert U._normalise("0012", "integer") == 12
    for bad in ("²", "--5", "+5", "1_000", "٣", "3.0", "", True):
        assert U._normalise(bad, "integer") is None


DEEP_JSON = '{"records": ' + "[" * 50_000 + "]" * 50_000 + "}"


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("json", DEEP_JSON),
        ("json", '{"records": [' + "1" * 5000 + "]}"),
        (
            "json",
            '{"schema": "stations/v1", "generated": "2024-06-30", "records": [{"station_id": 1,'
            ' "name": "x", "latitude": NaN, "longitude": 0, "elevation_m": 0, "active": true}]}',
        ),
        ("yaml", "records: " + "[" * 20_000 + "]" * 20_000),
        ("yaml", "records: [" + "1" * 5000 + "]"),
        (
            "yaml",
            "schema: stations/v1\ngenerated: '2024-06-30'\nrecords:\n- {station_id: 1, name: x, "
            "latitude: .nan, longitude: .inf, elevation_m: 0, active: true}",
        ),
        ("yaml", "&a [*a]"),
        ("yaml", "\x00\xff binary"),
    ],
    ids=[
        "json-deep",
        "json-bigint",
        "json-nan",
        "yaml-deep",
        "yaml-bigint",
        "yaml-nan",
        "yaml-cycle",
        "yaml-binary",
    ],
)
def test_artifact_checker_is_total(fmt, text):
    bad = artifacts.check(fmt, text, "stations", [])
    assert bad is not None and bad[0] in ("parses", "records_valid", "unchanged"), bad


@pytest.mark.parametrize(
    "text",
    [
        "[project]\nname = " + "[" * 50_000 + "]" * 50_000,
        "[project]\nname = " + "1" * 5000,
        "[project]\nname = nan",
        "\x00\x01",
    ],
    ids=["toml-deep", "toml-bigint", "toml-nan", "binary"],
)
def test_metadata_checker_is_total(text):
    expected = {f: "x" for f in metadata.FIELDS}
    assert metadata.check("toml", text, expected, {}) is not None
    assert metadata.check("meta", text, expected, {}) is not None


def test_deep_artifact_through_the_env_is_a_failed_check():
    env = pushbench.make("DataOps-N10")
    env.reset(seed=0)
    u = env.unwrapped
    unit = next(x for x in u._units.values() if x.kind == "artifact")
    target = unit.secret["target"]
    deep = "[" * 30_000 + "]" * 30_000 if target.endswith(".json") else "a: " + "[" * 30_000
    for call in (
        {"tool": "write_file", "path": target, "content": deep},
        {"tool": "run_verifier", "unit_id": unit.id},
        {"tool": "submit", "unit_id": unit.id},
    ):
        d = json.loads(env.step(call)[0])
        assert d["ok"], d
    assert d["result"]["verdicts"][0]["verdict"] == "rejected"
    assert u.steps_used == len(u.ledger) == 3
    env.close()


# ----- the documented codes -----------------------------------------------------------------------
def test_every_error_type_in_the_code_is_documented():
    """Scan the sources for codes given to ActionError/SandboxError; each is in ERROR_TYPES."""
    codes = set()
    call = re.compile(
        r"(?:ActionError|SandboxError)\(\s*"
        r"(\"[a-z_]+\"(?:\s+if .*? else\s+\"[a-z_]+\")?)",
        re.S,
    )
    for path in (ROOT / "pushbench").rglob("*.py"):
        for m in call.finditer(path.read_text()):
            codes.update(re.findall(r'"([a-z_]+)"', m.group(1)))
    assert codes >= {"bad_json", "unknown_tool", "outside_workspace", "no_match", "ambiguous"}
    assert codes <= set(A.ERROR_TYPES), codes - set(A.ERROR_TYPES)
    with pytest.raises(ValueError, match="undocumented"):
        A.ActionError("made_up_code", "x")


def test_integrity_page_lists_every_error_type():
    readme = (ROOT / "docs" / "integrity.md").read_text()
    section = readme[readme.index("## Every input is answered") :]
    for code in A.ERROR_TYPES:
        assert f"`{code}`" in section, code


def test_every_shipped_experiment_still_loads():
    """The up-front validation accepts the experiments in experiments/ (LLM ones included)."""
    from pushbench.runner.experiment import load_experiment

    for path in sorted((ROOT / "experiments").glob("*.yaml")):
        # the mutation script's list and the population's dose prior (tests/test_population.py
        # validates it, and every experiment it expands into) are not experiment files
        if path.name in ("mutation_equivalents.yaml", "mechanism_population.yaml"):
            continue
        if "llm" in path.name:
            pytest.importorskip("openai")
            pytest.importorskip("langgraph")
        assert load_experiment(path).policies, path


def test_swelite_step_after_close_raises(monkeypatch):
    """SWE-lite inherits the rule (tiny unit recipe, no pytest run)."""
    from pushbench.families.swelite import units as SU

    monkeypatch.setenv(SU.RECIPE_ENV, str(ROOT / "tests" / "data" / "swelite_tiny.yaml"))
    env = pushbench.make("SWELite-requests-N3")
    env.reset(seed=0)
    assert json.loads(env.step({"tool": "status"})[0])["ok"]
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step({"tool": "status"})
