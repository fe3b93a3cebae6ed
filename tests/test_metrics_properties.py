"""Property tests: metric invariants on random well-formed records built from random ledgers.

The ledgers come from a small verifier simulation that follows each family's verdict rules
(RepoScan: a resubmission is a ``duplicate``; work units: only a resubmission of an accepted
unit is, a rejected unit may be accepted after a fix), so every generated record is one the
environments could have written.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
        entry = {"step": step, "tool": kind if kind != "bad" else None, "args": {},
                 "ok": kind != "bad", "reward": 0}
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
    rec = {"family": family, "target": target, "budget": budget, "calls": calls,
           "terminated_by": terminated_by, "reported_count": reported,
           "progress": [c["valid_count"] for c in calls]}
    use_ctrl = draw(st.booleans()) if with_controller is None else with_controller
    if use_ctrl and calls:
        kept = draw(st.lists(st.integers(1, n_steps), unique=True))
        steps = []
        for s in sorted(kept):
            labels = draw(st.lists(st.sampled_from(["dedupe", "completion_gate",
                                                    "unit_redirect"]), min_size=1, max_size=2))
            entry = {"step": s, "proposed": {}, "executed": {}, "interventions": labels,
                     "proposed_ids": draw(st.lists(st.sampled_from(IDS), max_size=4))}
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
    assert steps[: len(reached)] == reached            # once a quartile is missed, so are later ones
    assert reached == sorted(reached)                  # non-decreasing
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
