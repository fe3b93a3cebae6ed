"""Every metric in :mod:`pushbench.metrics` on small hand-built records, answers by hand."""

from __future__ import annotations

import copy
import json

import pytest

from pushbench import metrics as m


def _submit(step: int, *verdicts: tuple[str, str]) -> dict:
    return {
        "step": step,
        "tool": "submit",
        "args": {"ids": [i for i, _ in verdicts]},
        "ok": True,
        "verdicts": [[i, v] for i, v in verdicts],
        "reward": 0,
        "valid_count": 0,
    }


def _call(step: int, tool: str, ok: bool = True, **extra) -> dict:
    entry = {"step": step, "tool": tool, "args": {}, "ok": ok, "reward": 0, "valid_count": 0}
    if not ok:
        entry["error_type"] = "bad_arguments"
    entry.update(extra)
    return entry


def _record(
    calls: list[dict],
    target: int = 3,
    budget: int = 10,
    terminated_by: str = "final",
    reported_count: int | None = None,
    controller: dict | None = None,
) -> dict:
    rec = {
        "target": target,
        "budget": budget,
        "terminated_by": terminated_by,
        "reported_count": reported_count,
        "calls": calls,
    }
    if controller is not None:
        rec["controller"] = controller
    return rec


# A 6-call episode: 8 submissions, 2 of them duplicates, 4 distinct accepted, target 3, final.
#   step 1 search; step 2 submit a(acc) b(acc) c(rej); step 3 submit a(dup) d(acc) f(rej);
#   step 4 submit c(dup) e(acc) + one malformed; step 5 bad call; step 6 final(reported 5).
SIX = _record(
    [
        _call(1, "search"),
        _submit(2, ("a", "accepted"), ("b", "accepted"), ("c", "rejected")),
        _submit(3, ("a", "duplicate"), ("d", "accepted"), ("f", "rejected")),
        _submit(4, ("c", "duplicate"), ("e", "accepted"), ("x/..", "malformed")),
        _call(5, None, ok=False),
        _call(6, "final"),
    ],
    target=3,
    budget=10,
    terminated_by="final",
    reported_count=5,
)


def test_valid_count_counts_distinct_accepted_ids():
    assert m.valid_count(SIX) == 4
    # The same id accepted twice in the ledger (cannot happen with the real verifier) counts once.
    rec = _record([_submit(1, ("a", "accepted")), _submit(2, ("a", "accepted"))])
    assert m.valid_count(rec) == 1
    assert m.valid_count(_record([_call(1, "status")])) == 0
    assert m.valid_count(_record([])) == 0


def test_success_is_valid_count_at_least_target():
    assert m.success(SIX) is True  # 4 >= 3
    assert m.success({**SIX, "target": 4}) is True  # boundary: equal counts
    assert m.success({**SIX, "target": 5}) is False


def test_submissions_excludes_malformed():
    assert m.submissions(SIX) == 8  # 3 + 3 + 2 (+1 malformed not counted)
    assert m.submissions(_record([_submit(1, ("??", "malformed"))])) == 0


def test_duplicate_submit_rate():
    assert m.duplicate_submit_rate(SIX) == pytest.approx(2 / 8) == 0.25
    no_dups = _record([_submit(1, ("a", "accepted"), ("b", "rejected"))])
    assert m.duplicate_submit_rate(no_dups) == 0.0
    # All resubmissions of one rejected id: 1 first submission + 3 duplicates -> 0.75
    spam = _record([_submit(s, ("z", "rejected" if s == 1 else "duplicate")) for s in (1, 2, 3, 4)])
    assert m.duplicate_submit_rate(spam) == 0.75


def test_duplicate_submit_rate_none_without_submissions():
    assert m.duplicate_submit_rate(_record([_call(1, "search"), _call(2, "final")])) is None
    # only malformed ids -> still no submissions
    assert m.duplicate_submit_rate(_record([_submit(1, ("!!", "malformed"))])) is None


def test_valid_per_step():
    assert m.valid_per_step(SIX) == pytest.approx(4 / 6)
    assert m.valid_per_step(_record([])) == 0.0
    assert m.valid_per_step(_record([_call(1, "status"), _call(2, "status")])) == 0.0


def test_false_completion():
    assert m.false_completion(SIX) is False  # final at 4 >= 3
    below = {**SIX, "target": 5}
    assert m.false_completion(below) is True  # final at 4 < 5
    assert m.false_completion({**below, "terminated_by": "ask_user"}) is False
    assert m.false_completion({**below, "terminated_by": "budget"}) is False


def test_premature_stop():
    below = {**SIX, "target": 5}  # 6 calls < budget 10
    assert m.premature_stop(below) is True
    assert m.premature_stop({**below, "terminated_by": "ask_user"}) is True
    assert m.premature_stop(SIX) is False  # reached the target
    assert m.premature_stop({**below, "terminated_by": "budget"}) is False
    # final on the very last step of the budget: no budget was left, so not premature
    assert m.premature_stop({**below, "budget": 6}) is False


def test_budget_exhausted():
    rec = _record(
        [_submit(1, ("a", "accepted")), _call(2, "search")],
        target=2,
        budget=2,
        terminated_by="budget",
    )
    assert m.budget_exhausted(rec) is True
    assert m.false_completion(rec) is False and m.premature_stop(rec) is False
    # budget ran out but the target was already met: not counted
    assert m.budget_exhausted({**rec, "target": 1}) is False
    assert m.budget_exhausted({**SIX, "target": 5}) is False  # ended by final


def test_reported_count_error_and_over_claim():
    assert m.over_claim(SIX) == 1  # reported 5, verified 4
    assert m.reported_count_error(SIX) == 1
    under = {**SIX, "reported_count": 1}
    assert m.over_claim(under) == -3
    assert m.reported_count_error(under) == 3
    exact = {**SIX, "reported_count": 4}
    assert m.over_claim(exact) == 0 and m.reported_count_error(exact) == 0


def test_reported_count_error_none_unless_final():
    for how in ("ask_user", "budget"):
        rec = {**SIX, "terminated_by": how}
        assert m.over_claim(rec) is None and m.reported_count_error(rec) is None
    missing = {**SIX, "reported_count": None}
    assert m.over_claim(missing) is None and m.reported_count_error(missing) is None


def test_invalid_actions():
    assert m.invalid_actions(SIX) == 1
    rec = _record([_call(1, None, ok=False), _call(2, "search", ok=False), _call(3, "status")])
    assert m.invalid_actions(rec) == 2


def test_verifier_recoveries():
    def run(step, unit, passed):
        return _call(step, "run_tests", check={"unit": unit, "passed": passed})

    rec = _record(
        [
            run(1, "u1", False),
            run(2, "u2", True),
            run(3, "u3", False),
            _call(4, "edit"),
            run(5, "u1", True),  # u1: fail -> pass  (recovered)
            run(6, "u3", False),  # u3: fails only
            run(7, "u1", True),  # u1 counted once
            run(8, "u2", False),  # u2: pass then fail: not a recovery
            run(9, "u4", True),
            run(10, "u4", False),
            run(11, "u4", True),  # u4: pass,fail,pass -> yes
        ],
        terminated_by="budget",
        budget=11,
    )
    assert m.verifier_recoveries(rec) == 2
    assert m.verifier_recoveries(SIX) == 0  # no verifier runs at all

    # Asymmetric cases: "passed after failing" differs from "failed after passing" and from
    # "passed without failing first" (the data above counts 2 for each of those readings).
    def count(*runs):
        return m.verifier_recoveries(
            _record(
                [run(i, u, ok) for i, (u, ok) in enumerate(runs, 1)],
                terminated_by="budget",
                budget=len(runs),
            )
        )

    assert count(("u1", False), ("u1", True)) == 1
    assert count(("u1", True)) == 0  # passed, never failed
    assert count(("u1", True), ("u1", False)) == 0  # failed after passing
    assert count(("u1", True), ("u2", True), ("u3", False)) == 0
    assert count(("u1", False), ("u1", False), ("u1", True), ("u1", True)) == 1
    assert count(("u1", False), ("u2", True), ("u1", True), ("u3", False), ("u3", True)) == 2


def test_interventions_and_blocked_completions():
    controller = {
        "name": "stateqgp",
        "components": ["dedupe", "completion_gate"],
        "steps": [
            {"step": 1, "proposed": {}, "executed": {}, "interventions": ["dedupe"]},
            {"step": 2, "proposed": {}, "executed": {}, "interventions": []},
            {"step": 3, "proposed": {}, "executed": {}, "interventions": ["page_memory", "dedupe"]},
            {"step": 4, "proposed": {}, "executed": {}, "interventions": ["completion_gate"]},
            {"step": 5, "proposed": {}, "executed": {}},
            {"step": 6, "proposed": {}, "executed": {}, "interventions": ["completion_gate"]},
        ],
    }
    rec = {**SIX, "controller": controller}
    counts = m.interventions(rec)
    assert counts == {"completion_gate": 2, "dedupe": 2, "page_memory": 1}
    assert list(counts) == sorted(counts)  # stable key order
    assert m.blocked_completions(rec) == 2
    assert m.interventions(SIX) == {} and m.blocked_completions(SIX) == 0
    # a summarised controller section (runner's JSONL line) has no steps: nothing to count
    assert m.interventions({**SIX, "controller": {"name": "standard", "components": []}}) == {}


def test_precision_and_rejected():
    # SIX: distinct well-formed ids a b c d f e (6), accepted a b d e (4); rejected c, f.
    assert m.precision(SIX) == pytest.approx(4 / 6)
    assert m.rejected(SIX) == 2
    assert m.precision(_record([_call(1, "search")])) is None
    assert m.precision(_record([_submit(1, ("!!", "malformed"))])) is None
    assert m.precision(_record([_submit(1, ("z", "rejected"), ("z", "duplicate"))])) == 0.0


# DataOps: a unit rejected then accepted after a fix counts once in the denominator and once in
# the numerator; a duplicate is a resubmission of an *accepted* unit.
#   1 u1 rejected; 2 u1 accepted; 3 u2 rejected; 4 u2 rejected; 5 u2 accepted; 6 u2 duplicate;
#   7 u7 rejected (unknown unit); 8 "x" malformed; 9 u3 accepted.  target 4, budget 9.
DATAOPS = {
    **_record(
        [
            _submit(1, ("u1", "rejected")),
            _submit(2, ("u1", "accepted")),
            _submit(3, ("u2", "rejected")),
            _submit(4, ("u2", "rejected")),
            _submit(5, ("u2", "accepted")),
            _submit(6, ("u2", "duplicate")),
            _submit(7, ("u7", "rejected")),
            _submit(8, ("x", "malformed")),
            _submit(9, ("u3", "accepted")),
        ],
        target=4,
        budget=9,
        terminated_by="budget",
    ),
    "family": "dataops",
}


def test_precision_and_rejected_on_work_units():
    assert m.valid_count(DATAOPS) == 3  # u1 u2 u3
    assert m.precision(DATAOPS) == pytest.approx(3 / 4)  # distinct u1 u2 u7 u3
    assert m.rejected(DATAOPS) == 4  # u1, u2 twice, u7
    assert m.submissions(DATAOPS) == 8
    assert m.duplicate_submit_rate(DATAOPS) == pytest.approx(1 / 8)
    assert m.proposed_duplicate_rate(DATAOPS) == pytest.approx(1 / 8)  # no controller


# A STATEQGP-style RepoScan episode, target 7, budget 10; kept controller steps are 3,4,5,7,9,10.
#   2 submit a(acc) b(rej)                          proposed a b
#   3 proposed [a, c], dedupe -> c(acc)             proposed a(dup) c
#   4 proposed [b, a], all dropped -> search        proposed b(dup) a(dup)
#   5 proposed [d, e, d, h] -> d(rej) e(acc)        proposed d e d(dup) h   (h not executed)
#   6 submit h(acc) f(acc)                          proposed h(dup: proposed at 5) f
#   7 final(reported 9) blocked -> status           verified then: a c e h f = 5 -> over +4
#   8 submit g(acc)                                 proposed g
#   9 final(reported 6) blocked -> status           verified 6 -> over 0
#  10 ask_user blocked -> status (no count)         budget ends
def _kept(step, labels, proposed_ids=(), **extra):
    return {
        "step": step,
        "proposed": {},
        "executed": {},
        "interventions": list(labels),
        "proposed_ids": list(proposed_ids),
        **extra,
    }


GATED = _record(
    [
        _call(1, "search"),
        _submit(2, ("a", "accepted"), ("b", "rejected")),
        _submit(3, ("c", "accepted")),
        _call(4, "search"),
        _submit(5, ("d", "rejected"), ("e", "accepted")),
        _submit(6, ("h", "accepted"), ("f", "accepted")),
        _call(7, "status"),
        _submit(8, ("g", "accepted")),
        _call(9, "status"),
        _call(10, "status"),
    ],
    target=7,
    budget=10,
    terminated_by="budget",
    controller={
        "name": "stateqgp",
        "components": ["dedupe", "buffered_submit", "completion_gate"],
        "steps": [
            _kept(3, ["dedupe"], ["a", "c"]),
            _kept(4, ["dedupe", "dedupe_redirect"], ["b", "a"]),
            _kept(5, ["dedupe", "buffer_overflow"], ["d", "e", "d", "h"]),
            _kept(7, ["completion_gate"], proposed_reported_count=9),
            _kept(9, ["completion_gate"], proposed_reported_count=6),
            _kept(10, ["completion_gate"]),
        ],
    },
)


def test_proposed_duplicate_rate_sees_what_the_controller_filtered():
    assert m.duplicate_submit_rate(GATED) == 0.0  # 8 executed, none repeated
    # proposed: 2 + 2 + 2 + 4 + 2 + 1 = 13, duplicates a, b, a, d, h = 5
    assert m.proposed_duplicate_rate(GATED) == pytest.approx(5 / 13)
    # Without a controller, proposed == executed.
    assert m.proposed_duplicate_rate(SIX) == m.duplicate_submit_rate(SIX) == 0.25
    # A kept step without proposed_ids (a record from before the field existed): undefined.
    old = copy.deepcopy(GATED)
    del old["controller"]["steps"][0]["proposed_ids"]
    assert m.proposed_duplicate_rate(old) is None
    # A policy that proposed no submission at all.
    assert m.proposed_duplicate_rate(_record([_call(1, "search")])) is None


def test_proposed_duplicate_rate_on_work_units_follows_acceptance():
    rec = copy.deepcopy(DATAOPS)
    # step 10: the policy proposed u1 (accepted at 2) and the redirect ran inspect instead;
    # step 11: it proposed u9 (never accepted) and a redirect ran run_verifier instead.
    rec["calls"] += [_call(10, "inspect"), _call(11, "run_verifier")]
    rec["budget"] = 11
    rec["controller"] = {
        "name": "unitqgp",
        "components": ["unit_redirect"],
        "steps": [_kept(10, ["unit_redirect"], ["u1"]), _kept(11, ["unit_redirect"], ["u9"])],
    }
    # 8 executed submissions (1 duplicate) + u1 (duplicate: accepted before) + u9 (fresh)
    assert m.proposed_duplicate_rate(rec) == pytest.approx(2 / 10)
    assert m.duplicate_submit_rate(rec) == pytest.approx(1 / 8)
    # The same ledger read with id semantics would count every resubmission: not for units.
    as_ids = {**rec, "family": "reposcan"}
    assert m.proposed_duplicate_rate(as_ids) == pytest.approx(5 / 10)


def test_gated_over_claim_and_blocked_reported_counts():
    assert m.blocked_reported_counts(GATED) == [9, 6]
    assert m.blocked_completions(GATED) == 3  # the ask_user has no count
    assert m.gated_over_claim(GATED) == pytest.approx(((9 - 5) + (6 - 6)) / 2)
    assert m.over_claim(GATED) is None  # never ended by final
    assert m.gated_over_claim(SIX) is None and m.blocked_reported_counts(SIX) == []


def test_proposed_duplicate_rate_counts_ids_a_controller_submitted_for_the_policy():
    # Step 1: the policy proposed a search, the controller executed a submit of q (a flush of
    # ids the policy never proposed here). Step 2: the policy submits q itself: a duplicate of
    # a submission made by anyone earlier in the episode (RepoScan ids).
    rec = _record(
        [
            _submit(1, ("q", "accepted"), ("bad id", "malformed")),
            _submit(2, ("q", "duplicate"), ("r", "accepted")),
        ],
        controller={
            "name": "stateqgp",
            "components": ["buffered_submit"],
            "steps": [_kept(1, ["buffer_flush"], [])],
        },
    )
    assert m.proposed_duplicate_rate(rec) == pytest.approx(1 / 2)  # q of {q, r}
    assert m.duplicate_submit_rate(rec) == pytest.approx(1 / 3)  # executed: q, q, r


def test_proposed_duplicate_rate_reads_positions_when_calls_carry_no_step():
    rec = copy.deepcopy(GATED)
    for call in rec["calls"]:
        del call["step"]
    assert m.proposed_duplicate_rate(rec) == pytest.approx(5 / 13)


def test_gated_over_claim_reads_positions_when_calls_carry_no_step():
    # A ledger whose calls carry no "step" (the field is optional in a record): a call's step
    # is its 1-based position, so the verified counts after steps 7 and 9 are still 5 and 6.
    rec = copy.deepcopy(GATED)
    for call in rec["calls"]:
        del call["step"]
    assert m.gated_over_claim(rec) == pytest.approx(((9 - 5) + (6 - 6)) / 2)
    # only the later blocked final left: 6 reported, 6 verified after step 9
    rec["controller"]["steps"] = rec["controller"]["steps"][4:]
    assert m.gated_over_claim(rec) == 0.0


def test_kept_steps_without_intervention_labels_are_not_gated_finals():
    # A kept step that names no intervention (an older or hand-edited record) is no blocked
    # final: it neither counts nor breaks the other metrics.
    rec = copy.deepcopy(GATED)
    del rec["controller"]["steps"][3]["interventions"]  # the final blocked at step 7
    assert m.blocked_reported_counts(rec) == [6]
    assert m.gated_over_claim(rec) == 0.0  # 6 reported, 6 verified at step 9


def test_false_claim_and_honest_stop_split_false_completion():
    below = {**SIX, "target": 5}  # verified 4, reported 5
    assert m.false_claim(below) and not m.honest_stop(below)
    low = {**below, "reported_count": 4}
    assert m.honest_stop(low) and not m.false_claim(low)
    assert m.honest_stop({**below, "reported_count": None})  # no claim made
    assert m.false_claim({**below, "reported_count": 50})
    for rec in (SIX, {**below, "terminated_by": "ask_user"}, {**below, "terminated_by": "budget"}):
        assert not m.false_claim(rec) and not m.honest_stop(rec)
    for rec in (below, low, SIX):
        assert m.false_claim(rec) + m.honest_stop(rec) == m.false_completion(rec)


def test_anytime_steps():
    # SIX, target 3: counts after each step 0 2 3 4 4 4; thresholds 1 2 3 3
    assert m.anytime_steps(SIX) == [2, 2, 3, 3]
    # GATED, target 7: counts 0 1 2 2 3 5 5 6 6 6; thresholds 2 4 6 7
    assert m.anytime_steps(GATED) == [3, 6, 8, None]
    # target 10 reached by one id at a time: thresholds 3 5 8 10
    one_by_one = _record([_submit(s, (f"i{s}", "accepted")) for s in range(1, 11)], target=10)
    assert m.anytime_steps(one_by_one) == [3, 5, 8, 10]
    # a duplicate verdict does not add to the count
    rec = _record(
        [
            _submit(1, ("a", "accepted")),
            _submit(2, ("a", "duplicate")),
            _submit(3, ("b", "accepted")),
        ],
        target=2,
    )
    assert m.anytime_steps(rec) == [1, 1, 3, 3]
    assert m.anytime_steps(_record([], target=4)) == [None] * 4
    # a target of 0 is reached before the first call: step 0 for every quarter
    assert m.anytime_steps({**SIX, "target": 0}) == [0, 0, 0, 0]


def test_episode_metrics_bundles_every_metric_and_is_json_stable():
    got = m.episode_metrics(SIX)
    assert got == {
        "valid_count": 4,
        "success": True,
        "steps_used": 6,
        "submissions": 8,
        "duplicate_submit_rate": 0.25,
        "proposed_duplicate_rate": 0.25,
        "precision": pytest.approx(4 / 6),
        "rejected": 2,
        "valid_per_step": pytest.approx(4 / 6),
        "false_completion": False,
        "false_claim": False,
        "honest_stop": False,
        "premature_stop": False,
        "budget_exhausted": False,
        "reported_count_error": 1,
        "over_claim": 1,
        "invalid_actions": 1,
        "verifier_recoveries": 0,
        "interventions": {},
        "blocked_completions": 0,
        "blocked_reported_counts": [],
        "gated_over_claim": None,
        "anytime_steps": [2, 2, 3, 3],
    }
    assert json.dumps(got, sort_keys=True) == json.dumps(m.episode_metrics(SIX), sort_keys=True)
