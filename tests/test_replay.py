"""The replay engine (issue 24): every family's record rebuilt from its calls through a fresh
environment of the registry's task, and judged by it.

In-process records come from the real episode loop (:func:`pushbench.runner.episode.run_episode`)
with offline policies; they must replay to themselves call for call, and forged copies of them
must be flagged naming the step or field.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from pushbench.runner import replay as R
from pushbench.runner.episode import run_episode
from pushbench.runner.replay_steps import (
    STAND_IN,
    Edit,
    Step,
    Steps,
    decode_edit,
    record_edit,
    steps_from_record,
)

REPOSCAN = "RepoScan-requests-docstring-N10"
DATAOPS = "DataOps-b1-N3"
TINY = str(Path(__file__).parent / "data" / "swelite_tiny.yaml")


def check(rec: dict, **kw) -> R.Checked:
    return R.check_episode(
        rec,
        steps_from_record(rec),
        task_id=rec["task_id"],
        controller=rec["controller"]["name"],
        seed=rec["seed"],
        **kw,
    )


@pytest.mark.parametrize(
    "task, controller, policy",
    [
        (REPOSCAN, "standard", "diligent"),
        (REPOSCAN, "stateqgp", "simulated-weak"),
        (REPOSCAN, "verifier_gated", "simulated-mid"),
        ("RepoScan-N10", "stateqgp", "random"),
        (DATAOPS, "standard", "diligent"),
        (DATAOPS, "unitqgp", "random"),
        ("DataOps-N3", "unitqgp_tracker_only", "exhaustive"),
    ],
)
def test_in_process_records_replay_to_themselves(task, controller, policy):
    rec = run_episode(task, controller, policy, seed=1)
    checked = check(rec)
    assert checked.reasons == [] and checked.unverifiable == [], (
        checked.reasons,
        checked.unverifiable,
    )
    assert checked.replay.record["calls"] == rec["calls"]
    adopted = R.adopt(rec, checked)
    assert adopted["metrics"] == rec["metrics"] and "claimed" not in adopted


def test_a_swelite_record_replays_by_rerunning_the_tests(monkeypatch):
    monkeypatch.setenv("PUSHBENCH_SWELITE_RECIPE", TINY)
    rec = run_episode("SWELite-requests-N3", "unitqgp", "diligent-oracle", seed=0)
    assert rec["success"]  # accepted verdicts to replay, each a real pytest run
    checked = check(rec)
    assert checked.reasons == [] and checked.unverifiable == []
    forged = copy.deepcopy(rec)
    sub = next(
        c
        for c in forged["calls"]
        if c.get("tool") == "submit" and c["verdicts"][0][1] == "accepted"
    )
    sub["check"]["passed"] = False
    assert any("check" in r for r in check(forged).reasons)


@pytest.fixture(scope="module")
def reposcan_record() -> dict:
    return run_episode(REPOSCAN, "standard", "simulated-mid", seed=0)


def test_relabelled_configuration_is_named(reposcan_record):
    for field, value in (
        ("target", 3),
        ("budget", 1000),
        ("family", "dataops"),
        ("family", ["reposcan"]),
        ("instance", "requests-auth"),
    ):
        rec = copy.deepcopy(reposcan_record)
        rec[field] = value
        reasons = check(rec).reasons
        assert reasons and reasons[0].startswith(field), (field, reasons)


def test_forged_verdicts_and_counts_name_the_step(reposcan_record):
    rec = copy.deepcopy(reposcan_record)
    sub = next(c for c in rec["calls"] if c.get("verdicts"))
    sub["verdicts"][0][1] = "accepted" if sub["verdicts"][0][1] != "accepted" else "rejected"
    reasons = check(rec).reasons
    assert reasons[0].startswith(f"step {sub['step']}: verdicts"), reasons
    rec = copy.deepcopy(reposcan_record)
    rec["metrics"]["precision"] = 1.0
    assert check(rec).reasons == ["stored metrics differ from the replay"]
    rec = copy.deepcopy(reposcan_record)
    rec["calls"].pop()  # the in-process record is its own account: its summary disagrees
    assert any(r.startswith("stored steps_used") for r in check(rec).reasons)


def test_adopt_keeps_the_claim_and_reports_the_replay(reposcan_record):
    rec = copy.deepcopy(reposcan_record)
    for c in rec["calls"]:
        for v in c.get("verdicts") or ():
            v[1] = "accepted"
    rec["success"], rec["valid_count"] = True, 99
    checked = check(rec)
    out = R.adopt(rec, checked)
    assert checked.reasons
    assert out["success"] == reposcan_record["success"]
    assert out["valid_count"] == reposcan_record["valid_count"]
    assert out["calls"] == reposcan_record["calls"]
    assert out["claimed"]["success"] is True and out["claimed"]["valid_count"] == 99
    nothing = R.adopt(rec, R.Checked(None, ["task: unknown"]))
    assert nothing["success"] is False and nothing["valid_count"] == 0
    assert nothing["claimed"]["valid_count"] == 99


def test_clipped_arguments_make_a_record_unverifiable_not_tampered():
    rec = run_episode(DATAOPS, "standard", "diligent", seed=0)
    clipped = copy.deepcopy(rec)
    call = next(c for c in clipped["calls"] if c.get("tool") == "inspect")
    call["args"]["unit_id"] = "u" + "1" * 200 + "...[204 chars]"
    steps = steps_from_record(clipped)
    assert any("clipped" in u for u in steps.unverifiable)


def test_refused_calls_replay_as_stand_ins():
    steps = [
        Step({"tool": "search", "query": "auth"}),
        Step(STAND_IN, stand_in=True),
        Step({"tool": "nope"}),
        Step({"tool": "final", "reported_count": 0}),
    ]
    rep = R.replay(REPOSCAN, "standard", 0, steps)
    calls = rep.record["calls"]
    assert [c["ok"] for c in calls] == [True, False, False, True]
    assert rep.record["terminated_by"] == "final" and rep.problems == []
    more = R.replay(REPOSCAN, "standard", 0, steps + [Step({"tool": "status"})])
    assert more.problems and "after the episode ended" in more.problems[0]


# ----- recorded edits ----------------------------------------------------------------------
def test_recorded_edits_round_trip_and_are_checked(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"x,y\n1,2\n")
    os.symlink("a.csv", tmp_path / "l")
    entry = record_edit(str(tmp_path), "a.csv", "modified")
    assert decode_edit(entry) == (Edit("a.csv", "modified", data=b"x,y\n1,2\n"), None)
    assert decode_edit(record_edit(str(tmp_path), "l", "created"))[0].link == "a.csv"
    assert decode_edit(record_edit(str(tmp_path), "gone", "deleted"))[0].kind == "deleted"
    big = record_edit(str(tmp_path), "a.csv", "modified", room=3)
    assert "unrecorded" in big and decode_edit(big)[0] is None
    forged = {**entry, "b64": "eCx5CjEsMwo="}  # other bytes, the old digest
    assert "differs from its digest" in decode_edit(forged)[1]
    for junk in (None, [], {"path": 1}, {"path": "a", "kind": "moved"}, {**entry, "b64": "!"}):
        assert decode_edit(junk)[0] is None


@pytest.mark.parametrize(
    "path", ["../out.txt", "/etc/passwd", "a/../../out.txt", "~x", "", "link/inside.txt", "a\\b"]
)
def test_edits_never_land_outside_the_workspace(tmp_path, path):
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, root / "link")
    why = R.apply_edit(str(root), Edit(path, "created", data=b"pwned"))
    assert why is not None
    assert list(outside.iterdir()) == [] and not (tmp_path / "out.txt").exists()


def test_edits_apply_to_the_fresh_workspace():
    env_files = R.replay(
        DATAOPS,
        "standard",
        0,
        [
            Step(
                {"tool": "read_file", "path": "u01/new.txt"},
                (Edit("u01/new.txt", "created", data=b"hello\n"),),
            )
        ],
    )
    obs = env_files.observations[0]
    assert '"ok":true' in obs and "hello" in obs
    none = R.replay(
        REPOSCAN, "standard", 0, [Step({"tool": "status"}, (Edit("x", "created", data=b"1"),))]
    )
    assert any("without a workspace" in p for p in none.problems)


def test_steps_of_a_record_without_calls_are_unverifiable():
    assert steps_from_record({"calls": "x"}).unverifiable
    assert isinstance(steps_from_record({"calls": []}), Steps)


# ----- any edit of a number in an in-process record -----------------------------------------
# Labels no verdict depends on (seed of a single-instance task, the policy's description, the
# key) are bound by the run folder's signature and the bundle's manifest, not by replay.
LABELS = ("seed", "policy", "key")


def _numbers(obj, prefix=()):
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, float)):
        yield prefix
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, prefix + (i,))


@pytest.mark.parametrize(
    "task, controller, policy",
    [(REPOSCAN, "stateqgp", "simulated-weak"), (DATAOPS, "unitqgp", "diligent")],
)
def test_every_edit_of_a_number_in_a_record_is_flagged(task, controller, policy):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from pushbench.records import episode_line

    rec = run_episode(task, controller, policy, seed=0)
    honest = episode_line(R.adopt(rec, check(rec)))  # every number a report takes
    paths = [p for p in _numbers(rec) if p[0] not in LABELS]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        path=st.sampled_from(paths),
        new=st.integers(-3, 10**6)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=6)
        | st.none(),
    )
    def edit(path, new):
        forged = copy.deepcopy(rec)
        holder = forged
        for k in path[:-1]:
            holder = holder[k]
        if holder[path[-1]] == new and type(holder[path[-1]]) is type(new):
            return
        holder[path[-1]] = new
        checked = check(forged)  # never raises
        # replay proves the numbers follow from the calls; an edit of a call that changes no
        # number (a read offset) stays in the calls, which only a signature binds
        assert (
            checked.reasons
            or checked.unverifiable
            or episode_line(R.adopt(forged, checked)) == honest
        ), (path, new)

    edit()


@pytest.mark.parametrize("reason", [["too_deep"], {"a": 1}, 7, None])
def test_trace_action_with_an_odd_unreadable_reason_is_a_stand_in(reason):
    # Found by mypy (issue 34): a recorded "unreadable" reason that is not a string (an edited
    # or corrupt trace) reached dict.get, so a list or dict raised TypeError mid-replay.
    from pushbench.runner.replay_steps import trace_action

    assert trace_action({"tool": "search", "unreadable": reason}) == (STAND_IN, False)
