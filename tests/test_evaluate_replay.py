"""``pushbench evaluate`` judges black-box runs by replay (issue 24, sections 1, 2 and 4).

Runs are written by the real server session (in-process :class:`BlackBoxSession`), then forged
the ways the issue lists: configuration relabelled (target, task, family with fabricated
verdicts), copies under another seed or folder, recorded out-of-band edits changed, and
malformed folders. Each is flagged with its reason or refused with one line; honest runs (with
out-of-band edits, a killed server) verify clean.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import warnings
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP server needs the optional 'mcp' extra")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_audit import (
    REPOSCAN,
    diligent_run,
    edit_record,
    edit_trace,
    scripted_run,
    search_ids,
    session,
)

from pushbench.blackbox import evaluate as blackbox
from pushbench.blackbox.files import SetupError
from pushbench.policies import make_policy

DATAOPS = "DataOps-b1-N3"
TINY = str(Path(__file__).parent / "data" / "swelite_tiny.yaml")


def evaluate(run_dir: Path) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return blackbox.record_from_run_dir(run_dir)


def batch(dirs) -> tuple[list[dict], list[tuple[str, str]]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return blackbox.evaluate_run_dirs(dirs)


def copy_run(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def edit_json(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    out = fn(data)
    path.write_text(json.dumps(data if out is None else out))


def rechain(run_dir: Path) -> None:
    """What a careful forger does after editing trace lines: recompute every digest and the
    record's head, so only replay can tell."""
    from pushbench.blackbox import audit

    run = json.loads((run_dir / "run.json").read_text())
    head, out = audit.genesis(run["run_id"]), []
    for raw in (run_dir / "trace.jsonl").read_bytes().splitlines():
        line = json.loads(raw)
        line["prev"] = head
        data = (json.dumps(line, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        head = hashlib.sha256(data).hexdigest()
        out.append(data)
    (run_dir / "trace.jsonl").write_bytes(b"".join(out))
    edit_record(run_dir, lambda r: r["blackbox"].update(trace_head=head, trace_lines=len(out)))


def play_out_of_band(run_dir: Path, task: str, policy: str, seed: int = 0, **kw) -> int:
    """``policy`` plays through the server, but makes its file edits itself, out of band, on
    the live workspace; the server then only gets a no-op ``edit_file`` (a text the edit left
    exactly once, replaced by itself), so the agent sees the result it expects and the verdicts
    depend on the out-of-band edits. Returns how many edits were made out of band."""
    pol = make_policy(policy, seed=seed)
    made = 0
    with session(run_dir, task, seed=seed, **kw) as s:
        root = Path(s.base._ws.root)
        obs = json.dumps({"tool": "reset", "ok": True, "result": s.reset_result})
        pol.reset(obs)
        while not s.over():
            action = pol.act(obs)
            call = json.loads(action) if isinstance(action, str) else dict(action)
            name = call.pop("tool")
            if name in ("edit_file", "write_file") and (root / call["path"]).is_file():
                path = root / call["path"]
                text = path.read_text()
                after = (
                    call["content"]
                    if name == "write_file"
                    else text.replace(call["old"], call["new"], 1)
                )
                marker = next(
                    (
                        ln
                        for ln in after.splitlines()
                        if ln.strip() and after.count(ln) == 1 and text.count(ln) == 0
                    ),
                    None,
                )
                if marker is not None and (name == "write_file" or text.count(call["old"]) == 1):
                    path.write_text(after)  # behind the server's back
                    name, call, made = (
                        "edit_file",
                        {"path": call["path"], "old": marker, "new": marker},
                        made + 1,
                    )
            obs, _ = s.call(name, call)
    return made


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    from pushbench.families.reposcan.env import _valid_set

    valid = sorted(_valid_set("requests-docstring"))[:3]
    wrong = [i for i in search_ids("session") if i not in _valid_set("requests-docstring")][:2]
    # 3 of 10 accepted, then a final: a failed run
    scripted_run(
        root / "three",
        [
            ("search", {"query": "session"}),
            ("submit", {"ids": valid + wrong}),
            ("status", {}),
            ("final", {"reported_count": 10}),
        ],
        seed=2,
    )
    diligent_run(root / "reposcan", REPOSCAN)
    ten = sorted(_valid_set("requests-docstring"))[:10]  # a failed N25 run with 10 accepted
    scripted_run(
        root / "n25",
        [("submit", {"ids": ten}), ("final", {"reported_count": 25})],
        task="RepoScan-requests-docstring-N25",
    )
    return {p.name: p for p in root.iterdir()}


# ----- honest runs --------------------------------------------------------------------------
def test_honest_runs_replay_clean(runs):
    for name in ("three", "reposcan", "n25"):
        rec = evaluate(runs[name])
        assert rec["tampered"] is False, (name, rec["tamper_reasons"])
        assert rec["unverifiable"] is False and "claimed" not in rec
    assert not evaluate(runs["three"])["success"] and evaluate(runs["reposcan"])["success"]


def test_a_run_carries_the_family_version_its_session_ran_under(runs, tmp_path, monkeypatch):
    from pushbench import tasks

    now = tasks.family_version("reposcan")
    assert evaluate(runs["three"])["family_version"] == now
    assert blackbox.blackbox_line(evaluate(runs["three"]))["family_version"] == now
    # a session under another version: its record says that version, not the evaluator's
    with monkeypatch.context() as m:
        m.setitem(tasks.FAMILY_VERSIONS, "reposcan", now + 4)
        scripted_run(tmp_path / "old", [("status", {}), ("final", {"reported_count": 0})])
    assert json.loads((tmp_path / "old" / "run.json").read_text())["family_versions"] == {
        "reposcan": now + 4
    }
    assert blackbox.blackbox_line(evaluate(tmp_path / "old"))["family_version"] == now + 4


def test_a_dataops_run_with_out_of_band_edits_replays_to_the_same_verdicts(tmp_path):
    run = tmp_path / "oob"
    made = play_out_of_band(run, DATAOPS, "diligent")
    assert made >= 1
    rec = evaluate(run)
    assert rec["blackbox"]["out_of_band_edits_count"] >= made
    assert rec["tampered"] is False, rec["tamper_reasons"]
    assert rec["success"]  # accepted only because of the edits the replay redid
    lines = (run / "trace.jsonl").read_bytes().splitlines()
    first = next(json.loads(x) for x in lines if b"out_of_band_edits" in x)
    assert first["out_of_band_edits"][0]["b64"]  # the content, not only the path

    # the edit content changed and the chain recomputed: the replay disagrees
    forged = copy_run(run, tmp_path / "forged")

    def blank(lines):
        out = []
        for raw in lines:
            line = json.loads(raw)
            for e in line.get("out_of_band_edits") or ():
                if e.get("b64"):
                    e.update(b64="", size=0, sha256=hashlib.sha256(b"").hexdigest())
            out.append((json.dumps(line, separators=(",", ":")) + "\n").encode())
        return out

    edit_trace(forged, blank)
    rechain(forged)
    bad = evaluate(forged)
    assert bad["tampered"] and any("replay" in r for r in bad["tamper_reasons"]), bad[
        "tamper_reasons"
    ]
    assert bad["success"] is False and bad["claimed"]["success"] is True

    # content dropped (as an older server wrote it): unverifiable, never counted
    bare = copy_run(run, tmp_path / "bare")
    edit_trace(
        bare,
        lambda ls: [
            (
                json.dumps(
                    {k: v for k, v in json.loads(x).items() if k != "out_of_band_edits"},
                    separators=(",", ":"),
                )
                + "\n"
            ).encode()
            for x in ls
        ],
    )
    rechain(bare)
    old = evaluate(bare)
    assert old["unverifiable"] and old["tampered"]
    assert any("without their content" in r for r in old["tamper_reasons"])


@pytest.mark.timeout(900)
def test_a_swelite_run_with_out_of_band_edits_replays_to_the_same_verdicts(tmp_path, monkeypatch):
    monkeypatch.setenv("PUSHBENCH_SWELITE_RECIPE", TINY)
    run = tmp_path / "swe"
    made = play_out_of_band(run, "SWELite-requests-N3", "diligent-oracle", controller="unitqgp")
    assert made >= 1
    rec = evaluate(run)
    assert rec["tampered"] is False, rec["tamper_reasons"]
    assert rec["success"]
    forged = copy_run(run, tmp_path / "forged")

    def undo_fix(lines):  # the recorded repair replaced by the file as it was (still broken)
        out = []
        for raw in lines:
            line = json.loads(raw)
            for e in line.get("out_of_band_edits") or ():
                data = e.get("b64") and __import__("base64").b64decode(e["b64"])
                if data:
                    data += b"\nraise RuntimeError('forged')\n"
                    e.update(
                        b64=__import__("base64").b64encode(data).decode(),
                        size=len(data),
                        sha256=hashlib.sha256(data).hexdigest(),
                    )
            out.append((json.dumps(line, separators=(",", ":")) + "\n").encode())
        return out

    edit_trace(forged, undo_fix)
    rechain(forged)
    bad = evaluate(forged)
    assert bad["tampered"] and not bad["success"], bad["tamper_reasons"]


def test_refused_and_unreadable_calls_replay_clean(tmp_path):
    from pushbench.envs.spaces import MAX_ACTION_BYTES

    s = session(tmp_path / "run", REPOSCAN, seed=3).open()
    try:
        s.call("search", {"query": "x" * (MAX_ACTION_BYTES + 10)})  # oversized: refused unparsed
        s.call("submit", {"ids": "not a list"})  # bad arguments
        for why, text in (
            ("too_deep", "[" * 50 + "]" * 50),
            ("number_too_large", '{"a": 1' + "0" * 2000 + "}"),
        ):
            token = s.stash_action(
                text,
                {"tool": "search", "unreadable": why, "wire_bytes": len(text), "head": text[:200]},
            )
            s.call("search", {s.sentinel: token})  # unreadable on the wire
        s.call("final", {"reported_count": 0})
    finally:
        s.close()
    rec = evaluate(tmp_path / "run")
    assert [c["error_type"] for c in rec["calls"][:4]] == [
        "too_large",
        "bad_arguments",
        "too_deep",
        "number_too_large",
    ]
    assert rec["tampered"] is False, rec["tamper_reasons"]


def test_a_killed_server_verifies_clean_without_its_unanswered_call(tmp_path):
    calls = [("search", {"query": "auth", "page": p}) for p in (1, 2, 3)]
    s = scripted_run(tmp_path / "run", calls, close=False)
    try:
        edit_trace(tmp_path / "run", lambda ls: ls[:-1])  # killed before the last trace line
        rec = evaluate(tmp_path / "run")
        assert not rec["tampered"], rec["tamper_reasons"]
        assert rec["steps_used"] == 2  # the unanswered call is not counted
    finally:
        s._closed = True
        s.close()


# ----- forgeries of section 1: configuration and copies ----------------------------------------
def test_target_relabel_is_tampered_and_scored_by_the_registry(runs, tmp_path):
    run = copy_run(runs["three"], tmp_path / "t")
    assert evaluate(run)["valid_count"] == 3

    def relabel(r):
        r["target"] = 3
        for k in ("success", "metrics", "valid_count"):
            r.pop(k, None)

    edit_record(run, relabel)
    rec = evaluate(run)
    assert rec["tampered"] and rec["success"] is False and rec["target"] == 10
    assert "target 3 differs from the registry's 10" in rec["tamper_reasons"]


def test_task_relabel_is_tampered(runs, tmp_path):
    run = copy_run(runs["n25"], tmp_path / "t")
    assert not evaluate(run)["success"] and evaluate(run)["valid_count"] == 10
    short = "RepoScan-requests-docstring-N10"
    edit_json(run / "run.json", lambda r: r.update(task=short))
    edit_record(run, lambda r: r.update(task_id=short))
    rec = evaluate(run)  # tampered, so excluded from every metric, whatever it replays to
    assert rec["tampered"] and rec["target"] == 10
    assert "target 25 differs from the registry's 10" in rec["tamper_reasons"]
    # the careful forger fixes target and budget too: what the agent was shown differs
    from pushbench.tasks import get_task

    edit_record(run, lambda r: r.update(target=10, budget=get_task(short).budget))
    rec = evaluate(run)
    assert rec["tampered"], rec["tamper_reasons"]  # excluded from every metric
    assert "step 1: the observation differs from the replay's" in rec["tamper_reasons"]


def test_family_relabel_with_fabricated_verdicts_is_tampered(runs, tmp_path):
    run = copy_run(runs["three"], tmp_path / "f")

    def fabricate(r):
        r["family"] = "dataops"
        for i in range(10):
            r["calls"].insert(
                -1,
                {
                    "step": 0,
                    "tool": "submit",
                    "args": {"unit_id": f"u{i}"},
                    "ok": True,
                    "verdicts": [[f"u{i}", "accepted"]],
                    "check": {"unit": f"u{i}", "passed": True},
                    "reward": 1,
                    "valid_count": 0,
                },
            )
        for i, c in enumerate(r["calls"], 1):
            c["step"] = i

    edit_record(run, fabricate)
    rec = evaluate(run)
    assert rec["tampered"] and not rec["success"] and rec["family"] == "reposcan"
    assert any(r.startswith('family "dataops" differs') for r in rec["tamper_reasons"]), rec[
        "tamper_reasons"
    ]


def test_copies_under_another_seed_or_folder_count_once(runs, tmp_path):
    renamed = copy_run(runs["reposcan"], tmp_path / "renamed")
    reseeded = copy_run(runs["reposcan"], tmp_path / "reseeded")
    edit_json(reseeded / "run.json", lambda r: r.update(seed=1))
    edit_record(reseeded, lambda r: r.update(seed=1))
    records, refused = batch([runs["reposcan"], renamed, reseeded, runs["three"]])
    assert [r["blackbox"]["run_dir"] for r in records] == [
        str(runs["reposcan"]),
        str(runs["three"]),
    ]
    assert [d for d, _ in refused] == [str(renamed), str(reseeded)]
    assert all(f"a copy of {runs['reposcan']}" in why for _, why in refused)


# ----- section 4: one bad folder never stops the batch ------------------------------------------
MALFORMED = {
    "seed 0.5": ("run.json", lambda r: r.update(seed=0.5), "seed"),
    "condition object": ("run.json", lambda r: r.update(condition={"a": 1}), "condition"),
    "agent 5": ("run.json", lambda r: r.update(agent=5), "agent"),
    "run.json a list": ("run.json", lambda r: [1], "run.json"),
    "budget text": ("run.json", lambda r: r.update(budget="10"), "budget"),
}


@pytest.mark.parametrize("how", sorted(MALFORMED))
def test_a_malformed_folder_is_one_line_and_the_batch_goes_on(runs, tmp_path, how):
    name, fn, field = MALFORMED[how]
    bad = copy_run(runs["three"], tmp_path / "bad")
    edit_json(bad / name, fn)
    records, refused = batch([bad, runs["reposcan"]])
    assert [r["blackbox"]["run_dir"] for r in records] == [str(runs["reposcan"])]
    ((d, why),) = refused
    assert d == str(bad) and str(bad) in why and field in why and "\n" not in why


def test_garbage_record_fields_are_tampered_not_crashes(runs, tmp_path):
    fam = copy_run(runs["three"], tmp_path / "fam")
    edit_record(fam, lambda r: r.update(family=["reposcan"]))
    trace = copy_run(runs["three"], tmp_path / "trace")
    edit_trace(trace, lambda ls: [b"[1,2]\n", *ls[1:]])
    records, refused = batch([fam])
    more, refused_too = batch([trace])
    records += more
    assert refused == refused_too == [] and all(r["tampered"] for r in records)
    assert records[0]["family"] == "reposcan"
    assert any(r.startswith("family") for r in records[0]["tamper_reasons"])
    assert any("trace line 1" in r for r in records[1]["tamper_reasons"])


def test_evaluate_cli_refuses_one_folder_and_writes_the_rest(runs, tmp_path):
    from typer.testing import CliRunner

    from pushbench.cli import app

    bad = copy_run(runs["three"], tmp_path / "bad")
    edit_json(bad / "run.json", lambda r: r.update(seed=0.5))
    out = tmp_path / "report"
    res = CliRunner().invoke(
        app, ["evaluate", str(bad), str(runs["reposcan"]), "--out", str(out), "--resamples", "200"]
    )
    assert res.exit_code == 1, res.output
    refusals = [ln for ln in res.output.splitlines() if ln.startswith("refused:")]
    assert len(refusals) == 1 and "seed" in refusals[0]
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["tampered"] is False


def test_a_tampered_line_reports_the_replay_and_keeps_the_claim(runs, tmp_path):
    run = copy_run(runs["three"], tmp_path / "t")

    def claim(r):
        r["calls"][1]["verdicts"] = [[i, "accepted"] for i, _ in r["calls"][1]["verdicts"]]
        r["success"] = True
        r["metrics"]["success"] = True

    edit_record(run, claim)
    line = blackbox.blackbox_line(evaluate(run))
    assert line["tampered"] and line["success"] is False and line["metrics"]["success"] is False
    assert line["claimed"]["success"] is True and line["claimed"]["metrics"]["success"] is True


# ----- re-attach on malformed run dirs ------------------------------------------------------------
@pytest.mark.parametrize("how", ["trace line [1,2]", "run.json [1]"])
def test_reattach_refuses_a_malformed_run_dir_with_one_line(runs, tmp_path, how):
    run = copy_run(runs["three"], tmp_path / "r")
    if how == "run.json [1]":
        (run / "run.json").write_text("[1]")
    else:
        edit_trace(run, lambda ls: [b"[1,2]\n", *ls[1:]])
    with pytest.raises(SetupError) as e:
        session(run, REPOSCAN).open()
    assert "\n" not in str(e.value) and str(run) in str(e.value)


# ----- any edit that changes a number is flagged ------------------------------------------------
NUMBERS = st.integers(-3, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
# Labels that change no verdict: bound by the trace signature (the signing part of issue 24),
# not by replay; their edits are left out here.
LABELS_FOR_SIGNING = {"condition", "agent"}


def _number_paths(obj, prefix=()):
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, float)):
        yield prefix
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _number_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _number_paths(v, prefix + (i,))


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def _scored(rec: dict) -> str:
    """Everything the report takes from an evaluated record."""
    line = blackbox.blackbox_line(rec)
    line.pop("blackbox")
    return json.dumps(line, sort_keys=True)


@pytest.mark.timeout(600)
def test_every_edit_that_changes_a_number_is_flagged(runs, tmp_path):
    run = copy_run(runs["three"], tmp_path / "h")
    honest_rec = json.loads((run / "episode.json").read_text())
    honest_run = json.loads((run / "run.json").read_text())
    honest = _scored(evaluate(run))
    files = {
        "episode.json": (honest_rec, list(_number_paths(honest_rec))),
        "run.json": (
            honest_run,
            [("seed",), ("budget",), ("instance",), ("schema_version",), ("pid",)],
        ),
    }

    @settings(
        max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(data=st.data())
    def check(data):
        name = data.draw(st.sampled_from(sorted(files)), label="file")
        base, paths = files[name]
        path = data.draw(st.sampled_from(paths), label="path")
        doc = copy.deepcopy(base)
        old = doc
        for k in path:
            old = old.get(k) if isinstance(old, dict) else old[k]
        new = data.draw((NUMBERS | st.text(max_size=8)).filter(lambda v: v != old), label="new")
        _set(doc, path, new)
        (run / name).write_text(json.dumps(doc))
        try:
            records, refused = batch([run])
        finally:
            (run / name).write_text(json.dumps(base))
        if refused:
            return  # refused with one line
        (rec,) = records
        assert rec["tampered"] or _scored(rec) == honest, (name, path, new)

    check()
