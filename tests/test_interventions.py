"""Interventions stated in full: for every controller in controllers/*.yaml that can block,
replace or filter a call, each intervention its components make is provoked, and the
observation's ``controller`` block and the trace must state what was sent, what ran instead,
the ids filtered out and why."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pushbench
from pushbench.controllers import catalogue, serves
from pushbench.controllers.components import MAX_BUFFERED_IDS, MAX_IDS
from pushbench.controllers.intervention import ARGS_LIMIT, MAX_LISTED, describe, filtered_ids

REPO = "RepoScan-flask-decorated-N10"
DATA = "DataOps-b0-N5"


def _hits(obs: dict) -> list[str]:
    return [h["id"] for h in obs["result"]["results"]]


# Each provocation: (component, label, family, script). A script drives a reset environment
# with ``go(call)`` and returns (the call that must be changed, the ids it must lose).
def gate(go, env):
    return {"tool": "final", "reported_count": 10, "message": "done"}, []


def dedupe_filter(go, env):
    ids = _hits(go({"tool": "search", "query": "app"}))
    go({"tool": "submit", "ids": ids[:3]})
    return {"tool": "submit", "ids": ids[:3] + [ids[3]]}, ids[:3]


def dedupe_redirect(go, env):
    ids = _hits(go({"tool": "search", "query": "app"}))
    go({"tool": "submit", "ids": ids[:2]})
    return {"tool": "submit", "ids": ids[:2]}, ids[:2]


def page_memory(go, env):
    go({"tool": "search", "query": "app", "page": 1})
    return {"tool": "search", "query": "APP", "page": 1}, []


def _two_pages(go):
    return _hits(go({"tool": "search", "query": "", "page": 1})) + _hits(
        go({"tool": "search", "query": "", "page": 2})
    )


def overflow(go, env):
    ids = _two_pages(go)
    return {"tool": "submit", "ids": ids[:14]}, ids[MAX_IDS:14]


def flush(go, env):
    ids = _two_pages(go)
    go({"tool": "submit", "ids": ids[:14]}, clean=False)  # queues 4 ids
    return {"tool": "submit", "ids": ids[14:16]}, []


def outside(go, env):
    ids = _two_pages(go)
    return {"tool": "status", "ids": ids[:3]}, ids[:3]


def full(go, env):
    ids = [f"src/flask/m{i}.py::f" for i in range(MAX_BUFFERED_IDS + 60)]
    return {"tool": "submit", "ids": ids}, ids[MAX_IDS:]


def _units(env):
    units = list(env.unwrapped._units.values())
    return units[0], [u for u in units[1:] if u.answer_type is not None][0]


def stale(go, env):
    a, _ = _units(env)
    go({"tool": "list_units"})
    go({"tool": "inspect", "unit_id": a.id})
    for _ in range(3):
        go({"tool": "read_file", "path": a.files[0]})
    return {"tool": "read_file", "path": a.files[0]}, []


def verify(go, env):
    a, b = _units(env)
    go({"tool": "list_units"})
    go({"tool": "answer", "unit_id": b.id, "value": b.secret["answer"]})
    return {"tool": "inspect", "unit_id": a.id}, []


def submit_passed(go, env):
    _, b = _units(env)
    go({"tool": "list_units"})
    go({"tool": "answer", "unit_id": b.id, "value": b.secret["answer"]})
    go({"tool": "run_verifier", "unit_id": b.id})
    return {"tool": "list_units"}, []


def duplicate(go, env):
    _, b = _units(env)
    go({"tool": "list_units"})
    go({"tool": "answer", "unit_id": b.id, "value": b.secret["answer"]})
    go({"tool": "run_verifier", "unit_id": b.id})
    go({"tool": "submit", "unit_id": b.id})
    return {"tool": "submit", "unit_id": b.id}, []


PROVOCATIONS = [
    ("completion_gate", "completion_gate", "reposcan", gate),
    ("completion_gate", "completion_gate", "dataops", gate),
    ("dedupe", "dedupe", "reposcan", dedupe_filter),
    ("dedupe", "dedupe_redirect", "reposcan", dedupe_redirect),
    ("page_memory", "page_memory", "reposcan", page_memory),
    ("buffered_submit", "buffer_overflow", "reposcan", overflow),
    ("buffered_submit", "buffer_flush", "reposcan", flush),
    ("buffered_submit", "buffer_ids_outside_submit", "reposcan", outside),
    ("buffered_submit", "buffer_full", "reposcan", full),
    ("unit_redirect", "unit_redirect_stale", "dataops", stale),
    ("unit_redirect", "unit_redirect_verify", "dataops", verify),
    ("unit_redirect", "unit_redirect_submit", "dataops", submit_passed),
    ("unit_redirect", "unit_redirect_duplicate", "dataops", duplicate),
]
TASK = {"reposcan": REPO, "dataops": DATA}
CASES = [
    (name, label, family, script)
    for name, comp in catalogue().items()
    for component, label, family, script in PROVOCATIONS
    if component in comp.components and serves(name, family)
]
# A gate-free composition cannot see a below-target final; the gate cases need the gate.


def test_every_intervening_component_is_provoked():
    """Every controller with a repairing component has a case for each label that component
    makes (the gate and the unit redirects on the families they serve)."""
    repairing = {p[0] for p in PROVOCATIONS}
    for name, comp in catalogue().items():
        for c in set(comp.components) & repairing:
            labels = {p[1] for p in PROVOCATIONS if p[0] == c and serves(name, p[2])}
            assert labels, (name, c)
            assert labels == {lab for n, lab, *_ in CASES if n == name and lab in labels}


@pytest.mark.parametrize(
    "name, label, family, script", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES]
)
def test_the_intervention_is_stated_in_full(name, label, family, script):
    env = pushbench.make(TASK[family], controller=name)
    env.reset(seed=0)

    def go(call, clean=True):
        obs, _, _, _, info = env.step(call)
        assert not clean or info["controller"]["interventions"] == [], info["controller"]
        return json.loads(obs)

    try:
        call, lost = script(go, env)
        obs, _, _, _, info = env.step(call)
    finally:
        record = env.get_wrapper_attr("episode_record")()
        env.close()
    obs, trace = json.loads(obs), info["controller"]
    assert label in trace["interventions"]
    block = obs["controller"]
    executed = trace["executed"]
    assert isinstance(executed, dict) and executed != call
    # What was sent, what ran instead (the observation is that call's result), which ids were
    # filtered out, and why.
    sent_args = {k: v for k, v in call.items() if k != "tool"}
    if len(json.dumps(sent_args)) <= 2000:
        assert block["sent"] == {"tool": call["tool"], "args": sent_args}
    else:
        assert block["sent"]["tool"] == call["tool"] and block["sent"]["args"].endswith("...")
    assert block["executed"] == {
        "tool": executed["tool"],
        "args": {k: v for k, v in executed.items() if k != "tool"},
    }
    assert obs["tool"] == executed["tool"]
    assert block["interventions"] == trace["interventions"]
    assert block["filtered"] == lost[:MAX_LISTED] and block["filtered_count"] == len(lost)
    assert trace["filtered"] == lost
    assert block["reason"] and block["reason"] == trace["reason"]
    # The sentence an LLM reads says the same.
    msg = block["message"]
    assert label in msg and f"You sent: {call['tool']}" in msg and block["reason"] in msg
    assert executed["tool"] in msg.split("You sent:")[1]
    assert all(json.dumps(i) in msg for i in lost[:MAX_LISTED])
    if executed["tool"] != call["tool"]:
        assert f"Your {call['tool']} call was not executed" in msg
    # The kept step of the record carries the same fields.
    kept = record["controller"]["steps"][-1]
    assert kept["filtered"] == lost and kept["reason"] == block["reason"]
    assert kept["executed"] == executed


ids_ = st.lists(st.one_of(st.text(max_size=30), st.integers(), st.none()), max_size=40)


@given(
    sent=ids_,
    kept=ids_,
    tool=st.sampled_from(["submit", "status", "search"]),
    extra=st.dictionaries(st.text(max_size=10), st.text(max_size=3000), max_size=3),
)
def test_the_statement_is_bounded_and_exact_for_any_call(sent, kept, tool, extra):
    """Whatever the agent sent: ``filtered`` is the multiset difference sent - executed, and
    the block is plain JSON whose argument parts stay within their limits."""
    call = {
        **{k: v for k, v in extra.items() if k not in ("tool", "ids")},
        "tool": tool,
        "ids": sent,
    }
    executed = {"tool": "submit", "ids": kept}
    lost = filtered_ids(call, executed)
    left = Counter(map(repr, kept))
    expect = []
    for i in sent:
        if left[repr(i)]:
            left[repr(i)] -= 1
        else:
            expect.append(i)
    assert lost == expect
    block = describe(["x"], call, executed, lost, "because")
    text = json.dumps(block, ensure_ascii=True)
    for part in ("sent", "executed"):
        args = block[part]["args"]
        size = len(args) if isinstance(args, str) else len(json.dumps(args, separators=(",", ":")))
        assert size <= ARGS_LIMIT + 3
    assert block["filtered_count"] == len(lost) and len(block["filtered"]) <= MAX_LISTED
    assert json.loads(text) == json.loads(json.dumps(block))
