"""Property tests: metric invariants on random well-formed records built from random ledgers.

The ledgers come from a small verifier simulation that follows each family's verdict rules
(RepoScan: a resubmission is a ``duplicate``; work units: only a resubmission of an accepted
unit is, a rejected unit may be accepted after a fix), so every generated record is one the
environments could have written.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

import pushbench
from pushbench import metrics as m

IDS = [f"u{i}" for i in range(1, 9)]


@st.composite
def records(draw, with_controller: bool | None = None):
    family = draw(st.sampled_from(["reposcan", "dataops"]))
    valid = set(draw(st.lists(st.sampled_from(IDS), unique=True)))
    target = draw(st.integers(1, 8))
    n_steps = draw(st.integers(0, 30))
    submitted, accepted, calls = set(), set(), []
    for step in range(1, n_steps + 1):
        kind = draw(st.sampled_from(["submit", "submit", "search", "status", "bad"]))
        entry = {
            "step": step,
            "tool": kind if kind != "bad" else None,
            "args": {},
            "ok": kind != "bad",
            "reward": 0,
        }
        if kind == "submit":
            size = 1 if family == "dataops" else draw(st.integers(1, 4))
            ids = draw(st.lists(st.sampled_from(IDS + ["bad id"]), min_size=size, max_size=size))
            verdicts = []
            for ident in ids:
                if ident == "bad id":
                    verdicts.append([ident, "malformed"])
                elif ident in accepted or (family == "reposcan" and ident in submitted):
                    verdicts.append([ident, "duplicate"])
                else:
                    fixed = family == "reposcan" or draw(st.booleans())
                    ok = ident in valid and fixed
                    submitted.add(ident)
                    if ok:
                        accepted.add(ident)
                    verdicts.append([ident, "accepted" if ok else "rejected"])
            entry["verdicts"] = verdicts
        entry["valid_count"] = len(accepted)
        calls.append(entry)
    ends = ["budget"] + (["final", "ask_user"] if calls else [])
    terminated_by = draw(st.sampled_from(ends))
    reported = draw(st.integers(0, 12)) if terminated_by == "final" else None
    budget = n_steps if terminated_by == "budget" else n_steps + draw(st.integers(0, 5))
    rec = {
        "family": family,
        "target": target,
        "budget": budget,
        "calls": calls,
        "terminated_by": terminated_by,
        "reported_count": reported,
        "progress": [c["valid_count"] for c in calls],
    }
    use_ctrl = draw(st.booleans()) if with_controller is None else with_controller
    if use_ctrl and calls:
        kept = draw(st.lists(st.integers(1, n_steps), unique=True))
        steps = []
        for s in sorted(kept):
            labels = draw(
                st.lists(
                    st.sampled_from(["dedupe", "completion_gate", "unit_redirect"]),
                    min_size=1,
                    max_size=2,
                )
            )
            entry = {
                "step": s,
                "proposed": {},
                "executed": {},
                "interventions": labels,
                "proposed_ids": draw(st.lists(st.sampled_from(IDS), max_size=4)),
            }
            if "completion_gate" in labels and draw(st.booleans()):
                entry["proposed_reported_count"] = draw(st.integers(0, 12))
            steps.append(entry)
        rec["controller"] = {"name": "c", "components": [], "steps": steps}
    return rec


@settings(max_examples=200, deadline=None)
@given(records())
def test_metric_invariants(rec):
    got = m.episode_metrics(rec)
    if got["precision"] is not None:
        assert 0.0 <= got["precision"] <= 1.0
    assert got["rejected"] <= got["submissions"]
    assert got["false_claim"] + got["honest_stop"] == got["false_completion"]
    for rate in ("duplicate_submit_rate", "proposed_duplicate_rate"):
        assert got[rate] is None or 0.0 <= got[rate] <= 1.0
    steps = got["anytime_steps"]
    assert len(steps) == 4
    reached = [s for s in steps if s is not None]
    # once a quartile is missed, so are later ones
    assert steps[: len(reached)] == reached
    assert reached == sorted(reached)  # non-decreasing
    assert all(1 <= s <= got["steps_used"] for s in reached)
    assert (steps[-1] is not None) == got["success"]
    assert (got["gated_over_claim"] is None) == (not got["blocked_reported_counts"])
    # the environment's own running count agrees with the verdict-based curve
    if got["valid_count"]:
        assert rec["progress"][-1] == got["valid_count"]


@settings(max_examples=200, deadline=None)
@given(records(with_controller=False))
def test_proposed_rate_equals_executed_rate_without_interventions(rec):
    assert m.proposed_duplicate_rate(rec) == m.duplicate_submit_rate(rec)
    # an empty controller section (a passive controller such as standard) changes nothing
    passive = {**rec, "controller": {"name": "standard", "components": [], "steps": []}}
    assert m.proposed_duplicate_rate(passive) == m.duplicate_submit_rate(rec)


# ----- QGPEnv.proposal: outside input, judged without executing it -------------------------

_WELL = st.sampled_from(
    [
        "src/requests/models.py::Response.json",
        "src/requests/api.py::get",
        "src/requests/sessions.py::Session.request",
    ]
)
_ID = st.one_of(_WELL, st.text(max_size=12), st.integers(), st.none())
_ACTION = st.one_of(
    st.fixed_dictionaries(
        {"tool": st.just("submit"), "ids": st.one_of(st.lists(_ID, max_size=12), _ID)}
    ),
    st.fixed_dictionaries(
        {
            "tool": st.just("final"),
            "reported_count": st.one_of(st.integers(-3, 50), st.booleans(), st.text(max_size=3)),
        }
    ),
    st.fixed_dictionaries({"tool": st.sampled_from(["status", "search", "nope", 7])}),
    st.text(max_size=40),
)


@st.composite
def actions(draw):
    action = draw(_ACTION)
    return json.dumps(action) if isinstance(action, dict) and draw(st.booleans()) else action


@settings(max_examples=100, deadline=None)
@given(actions())
def test_proposal_is_pure_and_names_what_execution_submits(action):
    env = pushbench.make("RepoScan-requests-docstring-N10")
    env.reset(seed=0)
    inner = env.unwrapped
    prop = inner.proposal(action)
    assert inner.steps_used == 0 and inner.ledger == []  # nothing was executed
    assert isinstance(prop["valid"], bool)
    ids = prop.get("ids")
    assert ids is None or all(isinstance(i, str) for i in ids)
    _, _, _, _, info = env.step(action)
    entry = inner.ledger[-1]
    assert entry["ok"] == prop["valid"]
    if prop["valid"] and prop["tool"] == "submit":
        # executed as proposed, the env judged exactly these ids as submissions, in order
        assert [i for i, v in entry["verdicts"] if v != "malformed"] == ids
    if prop["valid"] and prop["tool"] == "final":
        assert inner.reported_count == prop["reported_count"]
    env.close()
