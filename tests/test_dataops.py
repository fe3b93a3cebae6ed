"""DataOps-lite (issue 4): env contract, unit checkers, sandbox, determinism, agents, UNITQGP."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pushbench
from pushbench import metrics
from pushbench.envs.sandbox import MAX_FILE_BYTES, SandboxError, Workspace
from pushbench.families.dataops import artifacts, datasets, metadata
from pushbench.families.dataops import units as U
from pushbench.policies.dataops import solvers as S
from pushbench.policies.dataops.agents import DataOpsDiligent, for_family
from pushbench.tasks import instance_config

IDS = [t for t in pushbench.list_tasks("DataOps") if not t.startswith("DataOps-public")]
SINGLE = [t for t in IDS if t.startswith("DataOps-b")]


def run(task_id, agent, controller=None, seed=0, budget=None):
    env = pushbench.make(task_id, controller=controller, **({"budget": budget} if budget else {}))
    obs, _ = env.reset(seed=seed)
    agent.reset(obs)
    done = False
    while not done:
        obs, _, term, trunc, _ = env.step(agent.act(obs))
        done = term or trunc
    record = env.get_wrapper_attr("episode_record")()
    env.close()
    return record


def tree_digest(root: str) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


# ----- registration and the Gymnasium contract ------------------------------------------------


def test_task_ids_and_backlog_sizes():
    assert len(SINGLE) == 24 and len(IDS) == 28
    for tid in SINGLE:
        spec = pushbench.registration.get_task(tid)
        cfg = instance_config("dataops", spec.instances[0])
        assert U.backlog_size(spec.target, cfg) >= 1.5 * spec.target


@pytest.mark.parametrize("task_id", IDS)
def test_check_env(task_id):
    env = gym.make(pushbench.registration.gym_id(task_id)).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)
        check_env(env, skip_render_check=True)
    env.close()


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
@pytest.mark.parametrize(
    "controller", ["unitqgp", "unitqgp_tracker_only", "unitqgp_redirect_only", "unitqgp_nogate"]
)
def test_unitqgp_wraps_and_passes_check_env(controller):
    env = pushbench.make("DataOps-b1-N5", controller=controller)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    tracker = "unit_tracker" in env.component_names
    assert ("progress" in json.loads(obs)) == tracker
    env.close()


def test_suite_picks_backlog_from_seed_or_option():
    env = pushbench.make("DataOps-N3")
    picked = {json.loads(env.reset(seed=s)[0])["result"]["backlog"] for s in range(12)}
    assert len(picked) > 1
    obs, _ = env.reset(seed=0, options={"backlog": "b4"})
    assert json.loads(obs)["result"]["backlog"] == "b4"
    with pytest.raises(ValueError):
        env.reset(options={"backlog": "b9"})
    env.close()


# ----- checkers on hand-made workspaces -------------------------------------------------------


def test_csv_rules_on_a_hand_made_table():
    header = ["id", "station", "humidity", "start", "end", "event"]
    rows = [
        ["a", "S1", "50", "2024-01-01T10:00", "2024-01-01T11:00", "OK"],
        ["b", "S2", "101", "2024-01-01T10:00", "2024-01-01T09:00", "ERROR"],
        ["a", "S2", "", "2024-01-01T10:00", "bad", "ERROR"],
        ["c", "S1", "abc", "2024/01/01", "2024-01-01T09:00", "ERR"],
        ["d", "S3", "-1", "2024-01-01T10:00", "2024-01-01T10:00", "ERROR"],
        ["e", "S2", "100.0", "2024-01-01T10:00", "2024-01-01T10:30", ""],
    ]
    # Answers are the 1-based numbers of the selected data rows (the header is not a row).
    cases = [
        ({"op": "rows_invalid_number", "column": "humidity", "min": 0, "max": 100}, [2, 3, 4, 5]),
        ({"op": "rows_duplicate", "columns": ["id"]}, [3]),
        (
            {
                "op": "rows_pattern_mismatch",
                "column": "start",
                "pattern": datasets.TIMESTAMP.pattern,
            },
            [4],
        ),
        ({"op": "rows_order_violation", "start": "start", "end": "end"}, [2]),
        ({"op": "rows_not_in", "column": "event", "allowed": ["OK", "ERROR"]}, [4, 6]),
        ({"op": "rows_empty", "column": "event"}, [6]),
        ({"op": "rows_empty", "column": "station"}, []),
        (
            {"op": "top_value", "column": "station", "where_column": "event", "equals": "ERROR"},
            "S2",
        ),
    ]
    text = datasets.to_csv(header, rows)
    for rule, expected in cases:
        assert datasets.evaluate(rule, header, rows) == expected, rule
        # the agent's independent reading gives the same answer as text
        want = expected if isinstance(expected, str) else U.list_text(expected)
        assert S.csv_answer(rule, text) == want, rule
    unit = U.Unit(
        "u01", "csv_check", "t", "task", ["u01/t.csv"], [cases[0][0]], "list", {"answer": "2,3,4,5"}
    )
    for ok in ("2,3,4,5", " 5, 4,3 ,2 ", "2 3 4 05", "2,3,3,4,5"):
        assert U.check(unit, None, ok).passed, ok  # order, spacing, repeats do not matter
    for bad in ("2,3,4", "2,3,4,5,6", "3,4,5,6", "4", 4, "none", "", True):
        assert U.check(unit, None, bad) == U.CheckResult(
            False, "answer", "the recorded answer is not correct"
        ), bad
    assert U.check(unit, None, None).rule == "answer"
    empty = U.Unit(
        "u02",
        "csv_check",
        "t",
        "task",
        ["u02/t.csv"],
        [cases[6][0]],
        "list",
        {"answer": U.list_text([])},
    )
    assert U.check(empty, None, "none").passed and U.check(empty, None, "None").passed
    assert not U.check(empty, None, "0").passed


def test_consistency_answers_on_hand_made_files():
    files = {
        "l.csv": "txn_id,date,account,amount_cents\nT1,d,A,100\nT2,d,B,50\nT3,d,A,-30\nT4,d,C,5\n",
        "s.json": json.dumps({"totals_cents": {"A": 70, "B": 60, "C": 6}}),
        "m.json": json.dumps(
            {
                "files": [
                    {"name": "x", "bytes": 10},
                    {"name": "y", "bytes": 20},
                    {"name": "w", "bytes": 3},
                ]
            }
        ),
        "ls.txt": "total 3\n-rw-r--r-- 1 u g 10 2024-05-01 00:10 x\n"
        "-rw-r--r-- 1 u g 4 2024-05-01 00:10 w\n"
        "-rw-r--r-- 1 u g 5 2024-05-01 00:10 z\n",
    }
    assert (
        S.consistency_answer(
            {"op": "ledger_mismatch_accounts", "ledger": "l.csv", "summary": "s.json"}, files
        )
        == "B,C"
    )
    assert (
        S.consistency_answer(
            {"op": "manifest_mismatch_files", "manifest": "m.json", "listing": "ls.txt"}, files
        )
        == "w,y"
    )  # resized w, missing y
    assert (
        S.consistency_answer(
            {"op": "listing_extra", "manifest": "m.json", "listing": "ls.txt"}, files
        )
        == "z"
    )
    unit = U.Unit("u02", "consistency", "t", "task", [], [], "list", {"answer": "B,C"})
    assert U.check(unit, None, "C, B").passed and not U.check(unit, None, "B").passed
    top = U.Unit("u03", "csv_check", "t", "task", [], [], "text", {"answer": "PUMP-17"})
    assert U.check(top, None, " PUMP-17 ").passed and not U.check(top, None, "PUMP-1").passed


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "u01").mkdir(parents=True)
    return Workspace(str(root))


def _meta_unit(fmt: str) -> U.Unit:
    expected = {
        "name": "demo",
        "version": "1.2.3",
        "summary": "A demo.",
        "requires_python": ">=3.8",
        "license": "MIT",
    }
    keep = (
        {"readme": "README.md", "classifiers": ["X :: Y"]}
        if fmt == "toml"
        else {"Classifier": ["X :: Y"]}
    )
    target = "u01/pyproject.toml" if fmt == "toml" else "u01/METADATA"
    return U.Unit(
        "u01",
        "metadata_repair",
        "t",
        "task",
        [target],
        [],
        None,
        {"format": fmt, "target": target, "expected": expected, "keep": keep},
    )


GOOD_TOML = """[project]
name = "demo"
version = "1.2.3"
description = "A demo."
readme = "README.md"
requires-python = ">=3.8"
license = {text = "MIT"}
classifiers = ["X :: Y"]
"""


@pytest.mark.parametrize(
    "text, rule",
    [
        (GOOD_TOML, None),
        (GOOD_TOML.replace('"1.2.3"', '"1.2.4"'), "version"),
        (GOOD_TOML.replace('"1.2.3"', '"1.2.3'), "parses"),
        (GOOD_TOML.replace('{text = "MIT"}', '{text = "BSD"}'), "license"),
        (GOOD_TOML.replace('["X :: Y"]', '["X :: Z"]'), "unchanged"),
        (GOOD_TOML.replace("[project]", "[tool]"), "parses"),
    ],
)
def test_metadata_checker_toml(ws, text, rule):
    ws.write_text("u01/pyproject.toml", text)
    res = U.check(_meta_unit("toml"), ws)
    assert res.passed == (rule is None) and res.rule == rule


GOOD_META = (
    "Metadata-Version: 2.1\nName: demo\nVersion: 1.2.3\nSummary: A demo.\n"
    "Requires-Python: >=3.8\nLicense: MIT\nClassifier: X :: Y\n"
)


@pytest.mark.parametrize(
    "text, rule",
    [
        (GOOD_META, None),
        (GOOD_META.replace("Requires-Python: >=3.8", "Requires-Python: >=3.6"), "requires_python"),
        (GOOD_META.replace("Name: demo", "Name demo"), "parses"),
        (GOOD_META + "Name: other\n", "name"),
        (GOOD_META.replace("Classifier: X :: Y\n", ""), "unchanged"),
    ],
)
def test_metadata_checker_core_metadata(ws, text, rule):
    ws.write_text("u01/METADATA", text)
    res = U.check(_meta_unit("meta"), ws)
    assert res.passed == (rule is None) and res.rule == rule


def test_metadata_facts_come_from_the_snapshot():
    f = metadata.facts("requests")
    assert (f["name"], f["license"]) == ("requests", "Apache-2.0")
    assert f["version_file"][0] == "src/requests/__version__.py"
    assert metadata.facts("flask")["license"] == "BSD License"  # classifier fallback


def _artifact_doc(records):
    return {"schema": "orders/v1", "generated": "2024-06-30", "records": records}


GOOD = [
    {"order_id": 1, "customer": "C1234", "qty": 2, "status": "new", "total_cents": 10},
    {"order_id": 2, "customer": "C2345", "qty": 1, "status": "paid", "total_cents": 5},
]
BAD = [
    {"order_id": 3, "customer": "C1", "qty": 2, "status": "new", "total_cents": 10},
    {"order_id": 1, "customer": "C1111", "qty": 1, "status": "new", "total_cents": 1},
    {"order_id": 4, "customer": "C4444", "qty": "2", "status": "new", "total_cents": 1},
]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize(
    "records, rule",
    [
        (GOOD, None),
        (GOOD + [{**BAD[2], "qty": 2}], None),  # a repaired record may stay
        (GOOD + BAD[:1], "records_valid"),
        (GOOD + BAD[1:2], "records_valid"),  # repeats order_id 1
        (GOOD[:1], "kept_valid"),
        ([{**GOOD[0], "qty": 3}, GOOD[1]], "kept_valid"),
    ],
)
def test_artifact_checker(ws, fmt, records, rule):
    valid = artifacts.valid_mask(artifacts.SCHEMAS["orders"], GOOD + BAD)
    assert valid == [True, True, False, False, False]
    doc = _artifact_doc(records)
    text = json.dumps(doc) if fmt == "json" else artifacts.yaml.safe_dump(doc)
    ws.write_text(f"u01/orders.{fmt}", text)
    unit = U.Unit(
        "u01",
        "artifact",
        "t",
        "task",
        [],
        [],
        None,
        {"format": fmt, "target": f"u01/orders.{fmt}", "kind": "orders", "valid": GOOD},
    )
    res = U.check(unit, ws)
    assert res.passed == (rule is None) and res.rule == rule


def test_artifact_checker_refuses_changed_top_level_and_bad_syntax(ws):
    unit = U.Unit(
        "u01",
        "artifact",
        "t",
        "task",
        [],
        [],
        None,
        {"format": "json", "target": "u01/a.json", "kind": "orders", "valid": GOOD},
    )
    ws.write_text("u01/a.json", json.dumps({**_artifact_doc(GOOD), "generated": "2025"}))
    assert U.check(unit, ws).rule == "unchanged"
    ws.write_text("u01/a.json", "{not json")
    assert U.check(unit, ws).rule == "parses"
    (Path(ws.root) / "u01" / "a.json").unlink()
    assert U.check(unit, ws).rule == "parses"


# ----- the sandbox ---------------------------------------------------------------------------


@pytest.fixture
def caged(tmp_path):
    """A workspace with a canary file next to it; yields (workspace, canary path)."""
    canary = tmp_path / "canary.txt"
    canary.write_text("do not touch\n")
    root = tmp_path / "ws"
    (root / "u01").mkdir(parents=True)
    (root / "u01" / "ok.txt").write_text("fine\n")
    yield Workspace(str(root)), canary
    assert canary.read_text() == "do not touch\n"


def test_sandbox_refusals(caged):
    ws, canary = caged
    root = Path(ws.root)
    os.symlink(canary, root / "u01" / "link.txt")
    os.symlink(root.parent, root / "u01" / "up")
    os.symlink("/dev/zero", root / "u01" / "zero")
    os.mkfifo(root / "u01" / "pipe")
    (root / "u01" / "orig.txt").write_text("linked\n")
    os.link(root / "u01" / "orig.txt", root / "u01" / "hard.txt")
    before = canary.stat().st_mtime_ns
    refused = {
        str(canary): "outside_workspace",
        "../canary.txt": "outside_workspace",
        "u01/../../canary.txt": "outside_workspace",
        "~/x": "outside_workspace",
        "u01/link.txt": "outside_workspace",
        "u01/up/canary.txt": "outside_workspace",
        "u01/zero": "outside_workspace",
        "u01/pipe": "not_allowed",
        "u01/hard.txt": "not_allowed",
        "u01": "is_directory",
        "u01/none": "not_found",
        "": "bad_path",
        "u01/a\x00b": "bad_path",
    }
    for path, code in refused.items():
        with pytest.raises(SandboxError) as e:
            ws.read_text(path)
        assert e.value.code == code, path
        if code != "not_found":
            with pytest.raises(SandboxError):
                ws.write_text(path, "overwritten\n")
    with pytest.raises(SandboxError) as e:
        ws.write_text("u01/big.txt", "x" * (MAX_FILE_BYTES + 1))
    assert e.value.code == "too_large" and not (root / "u01" / "big.txt").exists()
    with pytest.raises(SandboxError) as e:
        ws.write_text("newdir/x.txt", "x")
    assert e.value.code == "not_found" and not (root / "newdir").exists()
    assert ws.read_text("./u01/ok.txt") == "fine\n"
    assert canary.stat().st_mtime_ns == before


def test_sandbox_refuses_a_symlink_inside_that_points_inside(caged):
    ws, _ = caged
    os.symlink("ok.txt", Path(ws.root) / "u01" / "alias.txt")
    with pytest.raises(SandboxError) as e:
        ws.read_text("u01/alias.txt")
    assert e.value.code == "not_allowed"


def test_env_file_tools_stay_in_the_workspace(tmp_path):
    env = pushbench.make("DataOps-b0-N3")
    env.reset(seed=0)
    root = Path(env.unwrapped._ws.root)
    canary = root.parent / f"{root.name}-canary.txt"
    canary.write_text("secret\n")
    try:
        os.symlink(canary, root / "u01" / "escape.txt")
        os.mkfifo(root / "u01" / "fifo")
        calls = [
            {"tool": "read_file", "path": str(canary)},
            {"tool": "read_file", "path": f"../{canary.name}"},
            {"tool": "read_file", "path": "u01/escape.txt"},
            {"tool": "write_file", "path": "u01/escape.txt", "content": "gotcha"},
            {"tool": "edit_file", "path": "u01/escape.txt", "old": "secret", "new": "x"},
            {"tool": "read_file", "path": "u01/fifo"},
            {"tool": "write_file", "path": "u01/huge.txt", "content": "x" * 60000 * 5},
        ]
        for call in calls[:-1]:
            obs = json.loads(env.step(call)[0])
            assert not obs["ok"] and "secret" not in json.dumps(obs), obs
        obs = json.loads(env.step(calls[-1])[0])
        assert not obs["ok"]  # over the action size limit before the sandbox even sees it
        env.step({"tool": "write_file", "path": "u01/grow.txt", "content": "X"})
        codes = [
            json.loads(
                env.step(
                    {
                        "tool": "edit_file",
                        "path": "u01/grow.txt",
                        "old": "X",
                        "new": "y" * 60000 + "X",
                    }
                )[0]
            ).get("error_type")
            for _ in range(5)
        ]
        assert codes == [None] * 4 + ["too_large"]  # the sandbox's per-file size cap
        assert canary.read_text() == "secret\n"
    finally:
        canary.unlink()
        env.close()
    assert not root.exists()


# ----- generation, determinism and reference solutions --------------------------------------


def test_same_seed_same_files_and_verdicts():
    def snapshot(task_id):
        env = pushbench.make(task_id)
        obs, _ = env.reset(seed=3)
        inner = env.unwrapped
        digest = tree_digest(inner._ws.root)
        verdicts = [U.check(u, inner._ws).passed for u in inner._units.values()]
        listing = [u.public() for u in inner._units.values()]
        env.close()
        return obs, digest, verdicts, listing

    a, b = snapshot("DataOps-b2-N10"), snapshot("DataOps-b2-N10")
    assert a == b
    assert snapshot("DataOps-b2-N5")[1] != a[1]


@pytest.mark.parametrize("task_id", SINGLE)
def test_reference_solution_passes_and_untouched_unit_fails(task_id):
    env = pushbench.make(task_id)
    env.reset(seed=0)
    inner = env.unwrapped
    kinds = set()
    for unit in inner._units.values():
        kinds.add(unit.kind)
        assert not U.check(unit, inner._ws).passed, unit.id
        answer = U.reference_solution(unit, inner._ws)
        assert U.check(unit, inner._ws, answer).passed, unit.id
    assert kinds == set(U.KINDS)
    env.close()


def test_workspace_removed_on_reset_and_close():
    env = pushbench.make("DataOps-b3-N3")
    env.reset(seed=0)
    first = env.unwrapped._ws.root
    env.reset(seed=0)
    second = env.unwrapped._ws.root
    assert not os.path.exists(first) and os.path.exists(second)
    env.close()
    assert not os.path.exists(second)


# ----- tools, verdicts and the ledger -----------------------------------------------------------


def _unit_of_kind(env, kind):
    return next(u for u in env.unwrapped._units.values() if u.kind == kind)


def test_submit_semantics_recoveries_and_qgp_counts():
    env = pushbench.make("DataOps-b0-N5")
    env.reset(seed=0)
    unit = _unit_of_kind(env, "csv_check")
    right = unit.secret["answer"]
    wrong = right + ",9999" if unit.answer_type == "list" else right + "x"
    steps = [
        ({"tool": "answer", "unit_id": unit.id, "value": wrong}, None),
        ({"tool": "run_verifier", "unit_id": unit.id}, False),
        ({"tool": "submit", "unit_id": unit.id}, "rejected"),
        ({"tool": "answer", "unit_id": unit.id, "value": right}, None),
        ({"tool": "submit", "unit_id": unit.id}, "accepted"),
        ({"tool": "submit", "unit_id": unit.id}, "duplicate"),
        ({"tool": "submit", "unit_id": "u999"}, "rejected"),
        ({"tool": "submit", "unit_id": "../etc"}, "malformed"),
    ]
    for call, expect in steps:
        obs, reward, *_, info = env.step(call)
        obs = json.loads(obs)
        assert obs["ok"], obs
        if call["tool"] == "run_verifier":
            assert obs["result"]["passed"] is expect and obs["result"]["failed_rule"] == "answer"
            assert str(right) not in obs["result"]["reason"]
        if call["tool"] == "submit":
            assert obs["result"]["verdicts"] == [{"id": call["unit_id"], "verdict": expect}]
            assert reward == (expect == "accepted")
    q = info["qgp"]
    assert q["valid_count"] == 1 and q["duplicates"] == 1 and q["rejected"] == 2
    assert q["units"]["accepted"] == 1 and q["units"]["untouched"] == q["units"]["total"] - 1
    record = env.unwrapped.episode_record()
    assert [c.get("check") for c in record["calls"][:5]] == [
        None,
        {"unit": unit.id, "passed": False},
        {"unit": unit.id, "passed": False},
        None,
        {"unit": unit.id, "passed": True},
    ]
    m = record["metrics"]
    assert m["verifier_recoveries"] == 1 and m["duplicate_submit_rate"] == 1 / 4
    assert "_ledger" not in json.dumps(record) and metrics.valid_count(record) == 1
    env.close()


def test_tool_errors_are_observations():
    env = pushbench.make("DataOps-b1-N3")
    env.reset(seed=0)
    meta = _unit_of_kind(env, "metadata_repair")
    target = meta.secret["target"]
    cases = [
        ({"tool": "answer", "unit_id": meta.id, "value": 1}, "edit_unit"),
        ({"tool": "inspect", "unit_id": "u77"}, "unknown_unit"),
        ({"tool": "edit_file", "path": target, "old": "no such text", "new": "x"}, "no_match"),
        ({"tool": "edit_file", "path": target, "old": "\n", "new": "\n"}, "ambiguous"),
        ({"tool": "read_file", "path": "u01"}, "is_directory"),
        ({"tool": "write_file", "path": "u01/x\x01", "content": ""}, "control_chars"),
    ]
    for call, code in cases:
        obs = json.loads(env.step(call)[0])
        assert not obs["ok"] and obs["error_type"] == code, obs
    version = json.loads(env.step({"tool": "read_file", "path": target, "limit": 3})[0])
    assert version["result"]["lines_returned"] == 3 and version["result"]["has_more"]
    env.close()


def test_long_reads_are_paged_inside_the_observation_space():
    env = pushbench.make("DataOps-b0-N3")
    env.reset(seed=0)
    env.unwrapped._ws.write_text("u01/wide.txt", ("\u00e9" * 1500 + "\n") * 80)
    text, lines = "", 0
    while True:
        obs = env.step(
            {"tool": "read_file", "path": "u01/wide.txt", "offset": lines, "limit": 400}
        )[0]
        assert env.observation_space.contains(obs)
        r = json.loads(obs)["result"]
        text, lines = text + r["content"] + "\n", lines + r["lines_returned"]
        if not r["has_more"]:
            break
    assert lines == 80 and text == ("\u00e9" * 1500 + "\n") * 80
    env.close()


def test_observations_hide_the_workspace_path_and_answers():
    env = pushbench.make("DataOps-b5-N3")
    obs, _ = env.reset(seed=0)
    root = env.unwrapped._ws.root
    seen = [obs]
    for uid in env.unwrapped._units:
        seen.append(env.step({"tool": "inspect", "unit_id": uid})[0])
    assert all(root not in o for o in seen)
    assert all("secret" not in o and "expected" not in o for o in seen)
    env.close()


# ----- agents -----------------------------------------------------------------------------------


def test_for_family():
    env = pushbench.make("DataOps-b0-N3")
    obs, _ = env.reset(seed=0)
    assert for_family(obs) and not for_family({"result": {"family": "reposcan"}})
    env.close()


def test_diligent_solves_at_least_23_of_24_within_budget():
    records = [run(tid, DataOpsDiligent(np.random.default_rng(0))) for tid in SINGLE]
    solved = [r for r in records if r["success"]]
    assert len(solved) >= 23
    for r in records:  # perfect books: never a duplicate, an over-claim or a gated final
        assert r["metrics"]["duplicate_submit_rate"] in (0, None)
        assert r["reported_count"] == r["valid_count"]


def test_simulated_policy_is_deterministic_and_labelled():
    """The named simulated policies play DataOps through the mechanism agents, seeded."""
    from pushbench.runner.episode import run_episode

    a = run_episode("DataOps-b4-N5", "standard", "simulated-weak", 1)
    b = run_episode("DataOps-b4-N5", "standard", "simulated-weak", 1)
    assert a["calls"] == b["calls"]
    assert a["simulated"] is True and a["policy"]["name"] == "simulated-weak"
    c = run_episode("DataOps-b4-N5", "standard", "simulated-weak", 2)
    assert c["calls"] != a["calls"]  # the seed reaches the agent's generator


# ----- UNITQGP redirects on a constructed stale loop ----------------------------------------------


def test_unit_redirects_fire_on_a_constructed_loop():
    env = pushbench.make("DataOps-b0-N5", controller="unitqgp")
    env.reset(seed=0)
    units = list(env.unwrapped._units.values())
    a = units[0]
    b, c = [u for u in units[1:] if u.answer_type is not None][:2]
    labels = []

    def step(call):
        obs, _, _, _, info = env.step(call)
        labels.append(info["controller"]["interventions"])
        return json.loads(obs), info

    step({"tool": "list_units"})
    step({"tool": "inspect", "unit_id": a.id})
    for _ in range(3):  # the same file again and again, no answer or edit
        step({"tool": "read_file", "path": a.files[0]})
    assert labels[-1] == []
    obs, info = step({"tool": "read_file", "path": a.files[0]})
    assert labels[-1] == ["unit_redirect_stale"]
    assert info["controller"]["executed"] == {"tool": "inspect", "unit_id": units[1].id}
    assert "controller" in obs and obs["result"]["unit_id"] == units[1].id

    # An answer that was not verified: moving on to another unit runs the verifier first.
    step({"tool": "answer", "unit_id": b.id, "value": b.secret["answer"]})
    obs, info = step({"tool": "inspect", "unit_id": a.id})
    assert labels[-1] == ["unit_redirect_verify"] and obs["result"]["passed"] is True

    # Passed but never submitted: the next unrelated call becomes the submit.
    obs, info = step({"tool": "list_units"})
    assert labels[-1] == ["unit_redirect_submit"]
    assert obs["result"]["verdicts"] == [{"id": b.id, "verdict": "accepted"}]

    # Resubmitting an accepted unit goes to the next pending unit instead.
    obs, info = step({"tool": "submit", "unit_id": b.id})
    assert labels[-1] == ["unit_redirect_duplicate"] and obs["tool"] == "inspect"
    assert obs["result"]["unit_id"] == a.id  # the first pending unit in list order
    book = obs["progress"]["units"]
    assert book["accepted"] == [b.id] and b.id not in book["pending"]
    assert "submitted" not in book  # version 2: the list is named for what it holds
    assert obs["progress"]["valid_count"] == 1

    # Verifier recoveries are counted by the book and by the metric.
    step({"tool": "answer", "unit_id": c.id, "value": "definitely wrong"})
    step({"tool": "run_verifier", "unit_id": c.id})
    step({"tool": "answer", "unit_id": c.id, "value": c.secret["answer"]})
    obs, _ = step({"tool": "run_verifier", "unit_id": c.id})
    assert obs["progress"]["verifier_recoveries"] == 1
    obs, _ = step({"tool": "final", "reported_count": 9})  # passed c is submitted first
    assert labels[-1] == ["unit_redirect_submit"]
    obs, _ = step({"tool": "final", "reported_count": 9})  # below target: the gate holds
    assert labels[-1] == ["completion_gate"]
    record = env.get_wrapper_attr("episode_record")()
    assert record["metrics"]["verifier_recoveries"] == 1
    assert record["metrics"]["interventions"]["unit_redirect_stale"] == 1
    env.close()
