"""Records are evidence (issue 11, section 3): forged black-box runs are flagged as tampered,
honest ones are not, and out-of-band workspace edits are recorded.

Runs are written by the real server session (:class:`pushbench.blackbox.session.BlackBoxSession`,
in-process here; the out-of-band test drives the real server over stdio with the SDK client),
then edited the ways a forger would, and read back with ``pushbench evaluate``'s reader.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP server needs the optional 'mcp' extra")

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters

import pushbench
from pushbench.blackbox import evaluate as blackbox
from pushbench.policies import make_policy

REPOSCAN = "RepoScan-requests-docstring-N10"
DATAOPS = "DataOps-b1-N3"


# ----- making runs ---------------------------------------------------------------------------
def session(run_dir: Path, task: str, **kw):
    from pushbench.blackbox.session import BlackBoxSession

    kw.setdefault("controller", "standard")
    return BlackBoxSession(task, run_dir, argv=["test"], **kw)


def call_action(s, action) -> None:
    call = json.loads(action) if isinstance(action, str) else dict(action)
    name = call.pop("tool")
    s.call(name, call)


def diligent_run(run_dir: Path, task: str, seed: int = 0, **kw) -> None:
    """The scripted diligent agent plays one whole episode through the server session."""
    pol = make_policy("diligent", seed=seed)
    with session(run_dir, task, seed=seed, **kw) as s:
        obs = json.dumps({"tool": "reset", "ok": True, "result": s.reset_result})
        pol.reset(obs)
        while not s.over():
            action = pol.act(obs)
            call = json.loads(action) if isinstance(action, str) else dict(action)
            name = call.pop("tool")
            obs, _ = s.call(name, call)


def scripted_run(run_dir: Path, calls, task: str = REPOSCAN, close: bool = True, **kw):
    s = session(run_dir, task, **kw).open()
    for name, args in calls:
        s.call(name, args)
    if close:
        s.close()
    return s


def search_ids(query: str, task: str = REPOSCAN) -> list[str]:
    env = pushbench.make(task)
    env.reset(seed=0)
    res = json.loads(env.step({"tool": "search", "query": query})[0])
    return [h["id"] for h in res["result"]["results"]]


def evaluate(run_dir: Path) -> dict:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return blackbox.record_from_run_dir(run_dir)


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> dict[str, Path]:
    """Honest runs: diligent agents to success, and a 0-valid RepoScan run."""
    root = tmp_path_factory.mktemp("honest")
    diligent_run(root / "reposcan", REPOSCAN)
    diligent_run(root / "reposcan-stateqgp", REPOSCAN, controller="stateqgp")
    diligent_run(root / "dataops", DATAOPS)
    zero = [("search", {"query": "session", "page": p}) for p in (1, 2)] + [("status", {})]
    scripted_run(root / "zero", zero + [("final", {"reported_count": 0})])
    ids = search_ids("session")
    scripted_run(
        root / "mixed",
        [
            ("search", {"query": "session"}),
            ("submit", {"ids": ids}),
            ("status", {}),
            ("submit", {"ids": ids[:3]}),
            ("final", {"reported_count": 4}),
        ],
        seed=1,
    )
    return {p.name: p for p in root.iterdir()}


def forged(honest_dir: Path, tmp_path: Path) -> Path:
    dest = tmp_path / f"forged-{honest_dir.name}"
    shutil.copytree(honest_dir, dest)
    return dest


def edit_record(run_dir: Path, fn) -> None:
    path = run_dir / "episode.json"
    rec = json.loads(path.read_text())
    fn(rec)
    path.write_text(json.dumps(rec, indent=1))


def edit_trace(run_dir: Path, fn) -> None:
    path = run_dir / "trace.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(fn(lines)))


def resummarise(rec: dict) -> None:
    """What a careful forger does after editing calls: fix every stored summary field."""
    from pushbench import metrics

    for i, c in enumerate(rec["calls"], 1):
        c["step"] = i
    accepted: set[str] = set()
    for c in rec["calls"]:
        accepted |= {i for i, v in c.get("verdicts") or () if v == "accepted"}
        c["valid_count"] = len(accepted)
    rec["progress"] = [c["valid_count"] for c in rec["calls"]]
    rec["steps_used"] = len(rec["calls"])
    rec["metrics"] = metrics.episode_metrics(rec)
    rec["valid_count"], rec["success"] = rec["metrics"]["valid_count"], rec["metrics"]["success"]


# ----- honest runs -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["reposcan", "reposcan-stateqgp", "dataops", "zero", "mixed"])
def test_honest_runs_are_not_tampered(honest, name):
    rec = evaluate(honest[name])
    assert rec["tampered"] is False and rec["tamper_reasons"] == []
    bb = rec["blackbox"]
    assert bb["closed"] and bb["trace_lines"] == bb["trace_lines_found"] == bb["mcp_calls"]
    assert not bb["trace_missing_last"] and not bb["trace_partial_line"]
    if name not in ("zero", "mixed"):
        assert rec["success"]  # the diligent agent finished: there were verdicts to replay
    if name == "mixed":  # accepted, rejected and duplicate verdicts all replayed
        verdicts = {v for c in rec["calls"] for _, v in c.get("verdicts") or ()}
        assert verdicts == {"accepted", "rejected", "duplicate"}
    line = blackbox.blackbox_line(rec)
    assert line["tampered"] is False and "calls" not in line


def test_trace_lines_form_a_digest_chain(honest):
    from pushbench.blackbox import audit

    run = json.loads((honest["reposcan"] / "run.json").read_text())
    rec = json.loads((honest["reposcan"] / "episode.json").read_text())
    head = audit.chain_start(run)  # a signed run: the genesis of its configuration
    for raw in (honest["reposcan"] / "trace.jsonl").read_bytes().splitlines(keepends=True):
        assert json.loads(raw)["prev"] == head
        head = audit.line_digest(raw)
    assert rec["blackbox"]["trace_head"] == head


# ----- forgeries -------------------------------------------------------------------------------
def fake_submit(rec: dict, ids: list[str]) -> None:
    """Insert a submit whose every id is 'accepted' before the last call."""
    fake = {
        "step": 0,
        "tool": "submit",
        "args": {"ids": ids},
        "ok": True,
        "verdicts": [[i, "accepted"] for i in ids],
        "reward": len(ids),
        "valid_count": 0,
    }
    rec["calls"].insert(len(rec["calls"]) - 1, fake)
    resummarise(rec)


def test_a_fake_submit_of_ten_accepted_ids_is_flagged(honest, tmp_path):
    run = forged(honest["zero"], tmp_path)
    assert evaluate(run)["valid_count"] == 0
    ids = sorted({*search_ids("session"), *search_ids("get")})[:10]
    edit_record(run, lambda rec: fake_submit(rec, ids))
    rec = evaluate(run)
    assert rec["tampered"] is True
    assert any("differ from the replay" in r for r in rec["tamper_reasons"])
    # even with ids that really are valid (an answer key from elsewhere) the trace disagrees
    from pushbench.families.reposcan.env import _valid_set

    run2 = forged(honest["zero"], tmp_path / "b")
    edit_record(run2, lambda rec: fake_submit(rec, sorted(_valid_set("requests-docstring"))[:10]))
    rec2 = evaluate(run2)
    # the success is not trusted: the line reports the replay of the trace's calls
    assert rec2["tampered"] is True and not rec2["success"]
    assert rec2["claimed"]["success"] is True
    assert any("trace" in r for r in rec2["tamper_reasons"])


def _flip_first(verdict_from: str, verdict_to: str):
    def fn(rec):
        for c in rec["calls"]:
            for v in c.get("verdicts") or ():
                if v[1] == verdict_from:
                    v[1] = verdict_to
                    resummarise(rec)
                    return
        raise AssertionError(f"no {verdict_from} verdict to edit")

    return fn


FORGERIES = {
    "edit a verdict": lambda run: edit_record(run, _flip_first("rejected", "accepted")),
    "change steps_used": lambda run: edit_record(run, lambda r: r.update(steps_used=3)),
    "edit the stored valid_count": lambda run: edit_record(
        run, lambda r: r.update(valid_count=99, success=True)
    ),
    "drop a call": lambda run: edit_record(run, lambda r: (r["calls"].pop(1), resummarise(r))),
    "delete a trace line": lambda run: edit_trace(run, lambda ls: ls[:2] + ls[3:]),
    "edit a trace line": lambda run: edit_trace(
        run, lambda ls: ls[:1] + [ls[1].replace(b'"ok":true', b'"ok":false', 1)] + ls[2:]
    ),
    "edit the last trace line": lambda run: edit_trace(
        run, lambda ls: ls[:-1] + [re.sub(rb'"server_ms":[0-9.]+', b'"server_ms":1.0', ls[-1])]
    ),
    "truncate the trace": lambda run: edit_trace(run, lambda ls: ls[:-2]),
    "drop the last trace line of a closed run": lambda run: edit_trace(run, lambda ls: ls[:-1]),
    "swap two trace lines": lambda run: edit_trace(run, lambda ls: [ls[1], ls[0], *ls[2:]]),
}


@pytest.mark.parametrize("how", sorted(FORGERIES))
def test_forged_reposcan_runs_are_flagged(honest, tmp_path, how):
    run = forged(honest["mixed"], tmp_path)
    FORGERIES[how](run)
    rec = evaluate(run)
    assert rec["tampered"] is True, how
    assert rec["tamper_reasons"] and all(
        isinstance(r, str) and len(r) < 120 for r in rec["tamper_reasons"]
    )


@pytest.mark.parametrize(
    "src, dst, reason",
    [
        ("duplicate", "accepted", "accepted after it was accepted"),  # a unit accepted twice
        ("accepted", "duplicate", "duplicate of a unit never accepted"),  # before any accept
        ("rejected", "accepted", "accepted without a passing check"),
    ],
)
def test_forged_unit_verdicts_are_flagged(honest, tmp_path, src, dst, reason):
    run = forged(honest["dataops"], tmp_path)
    rec0 = json.loads((run / "episode.json").read_text())
    have = {v for c in rec0["calls"] for _, v in c.get("verdicts") or ()}
    if src not in have:  # add the honest verdict the forgery then edits
        edit_record(run, _append_resubmit if src == "duplicate" else _append_rejected)
        assert not any(reason in r for r in evaluate(run)["tamper_reasons"])
    edit_record(run, _flip_first(src, dst))
    rec = evaluate(run)
    assert rec["tampered"] is True
    assert any(reason in r for r in rec["tamper_reasons"]), rec["tamper_reasons"]


def _accepted_units(rec):
    return [
        c["args"]["unit_id"]
        for c in rec["calls"]
        if any(v == "accepted" for _, v in c.get("verdicts") or ())
    ]


def _append_resubmit(rec):
    uid = _accepted_units(rec)[0]
    rec["calls"].insert(
        len(rec["calls"]) - 1,
        {
            "step": 0,
            "tool": "submit",
            "args": {"unit_id": uid},
            "ok": True,
            "verdicts": [[uid, "duplicate"]],
            "reward": 0,
            "valid_count": 0,
        },
    )
    resummarise(rec)


def _append_rejected(rec):
    uid = next(u for u in (f"u{i:02d}" for i in range(1, 100)) if u not in _accepted_units(rec))
    rec["calls"].insert(
        len(rec["calls"]) - 1,
        {
            "step": 0,
            "tool": "submit",
            "args": {"unit_id": uid},
            "ok": True,
            "verdicts": [[uid, "rejected"]],
            "check": {"unit": uid, "passed": False},
            "reward": 0,
            "valid_count": 0,
        },
    )
    resummarise(rec)


# ----- any edit of a checked field, and any garbage, on a property-based basis ------------------
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 10**6)
    | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _checked_paths(rec: dict) -> list[tuple]:
    """Fields the audit re-derives: changing any of them must mark the run tampered."""
    out = [
        ("steps_used",),
        ("valid_count",),
        ("success",),
        ("progress",),
        ("terminated_by",),
        ("blackbox", "trace_head"),
        ("blackbox", "trace_lines"),
        ("blackbox", "mcp_calls"),
        ("blackbox", "after_end_calls"),
        ("blackbox", "out_of_band_edits_count"),
    ]
    for i, c in enumerate(rec["calls"]):
        out += [("calls", i, k) for k in ("step", "ok", "tool", "valid_count", "reward")]
        if c.get("tool") == "submit":
            out += [("calls", i, "verdicts"), ("calls", i, "args")]
    return out


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _set(obj, path, value):
    _get(obj, path[:-1])[path[-1]] = value


def test_any_change_to_a_checked_field_is_flagged(honest, tmp_path):
    run = forged(honest["mixed"], tmp_path)
    base = json.loads((run / "episode.json").read_text())
    paths = _checked_paths(base)

    @settings(
        max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(data=st.data())
    def check(data):
        path = data.draw(st.sampled_from(paths), label="path")
        old = _get(base, path)
        new = data.draw(JSON_VALUES.filter(lambda v: v != old), label="new")
        rec = copy.deepcopy(base)
        _set(rec, path, new)
        (run / "episode.json").write_text(json.dumps(rec))
        out = evaluate(run)  # never raises: a changed field is evidence, not a crash
        assert out["tampered"] is True, (path, new)

    check()


def test_garbage_anywhere_in_a_record_never_crashes_evaluate(honest, tmp_path):
    run = forged(honest["mixed"], tmp_path)
    base = json.loads((run / "episode.json").read_text())

    def paths(obj, prefix=()):
        yield prefix
        if isinstance(obj, dict):
            for k, v in obj.items():
                yield from paths(v, prefix + (k,))
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                yield from paths(v, prefix + (i,))

    every = [p for p in paths(base) if p]

    @settings(
        max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(path=st.sampled_from(every), new=JSON_VALUES)
    def check(path, new):
        rec = copy.deepcopy(base)
        _set(rec, path, new)
        (run / "episode.json").write_text(json.dumps(rec))
        try:
            out = evaluate(run)
        except blackbox.RunDirError as e:  # a clear refusal names the file
            assert "episode.json" in str(e) or "run.json" in str(e)
            return
        assert isinstance(out["tampered"], bool) and isinstance(out["tamper_reasons"], list)

    check()


def test_a_kill_between_record_and_trace_line_is_benign(tmp_path):
    calls = [("search", {"query": "auth", "page": p}) for p in (1, 2, 3)]
    s = scripted_run(tmp_path / "run", calls, close=False)  # as if killed after the 3rd call
    try:
        rec = evaluate(tmp_path / "run")  # killed after the trace line: complete and consistent
        assert not rec["tampered"] and not rec["blackbox"]["trace_missing_last"]
        edit_trace(tmp_path / "run", lambda ls: ls[:-1])  # killed before the trace line
        rec = evaluate(tmp_path / "run")
        assert not rec["tampered"], rec["tamper_reasons"]
        # the run ends at the last trace line: the unanswered 3rd call is dropped, and noted
        assert rec["blackbox"]["trace_missing_last"] and rec["steps_used"] == 2
        assert rec["blackbox"]["dropped_unanswered"] == {"step": 3, "tool": "search"}
        edit_trace(tmp_path / "run", lambda ls: ls[:-1])  # two lines short: not a kill
        assert evaluate(tmp_path / "run")["tampered"]
    finally:
        s._closed = True  # do not write the closing record over the edited files
        s.close()


def test_a_torn_last_trace_line_is_benign(tmp_path):
    s = scripted_run(tmp_path / "run", [("status", {}), ("status", {})], close=False)
    try:
        edit_trace(tmp_path / "run", lambda ls: ls[:-1] + [ls[-1][:25]])  # killed mid-write
        rec = evaluate(tmp_path / "run")
        assert not rec["tampered"], rec["tamper_reasons"]
        assert rec["blackbox"]["trace_partial_line"] and rec["blackbox"]["trace_missing_last"]
        assert rec["steps_used"] == 1  # the torn line's call was never answered
    finally:
        s._closed = True
        s.close()


def test_evaluate_prints_and_marks_tampered_runs(honest, tmp_path):
    from typer.testing import CliRunner

    from pushbench.cli import app

    run = forged(honest["mixed"], tmp_path)
    FORGERIES["edit a verdict"](run)
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app, ["evaluate", str(honest["zero"]), str(run), "--out", str(out), "--resamples", "200"]
    )
    assert result.exit_code == 0, result.output
    assert "1 tampered run" in result.output and str(run) in result.output
    lines = {
        json.loads(x)["blackbox"]["run_dir"]: json.loads(x)
        for x in (out / "episodes.jsonl").read_text().splitlines()
    }
    assert lines[str(run)]["tampered"] is True and lines[str(run)]["tamper_reasons"]
    assert lines[str(honest["zero"])]["tampered"] is False
    for p in [out, *out.rglob("*")]:  # evaluation output holds full records: private too
        if p.name in ("episodes.jsonl", "traces") or p.parent.name == "traces" or p == out:
            assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, p


# ----- out-of-band workspace edits over real MCP -------------------------------------------------
def server_params(run_dir: Path, *extra: str, task: str = DATAOPS) -> StdioServerParameters:
    env = {k: os.environ[k] for k in ("PUSHBENCH_HOME", "PYTHONPATH") if k in os.environ}
    return StdioServerParameters(
        command=sys.executable,
        env=env,
        args=["-m", "pushbench.cli", "mcp", "--task", task, "--run-dir", str(run_dir), *extra],
    )


def _obs(result) -> dict:
    return json.loads(result.content[0].text)


@pytest.mark.timeout(120)
def test_out_of_band_edits_between_mcp_calls_are_recorded(tmp_path):
    run_dir = tmp_path / "run"
    seen: dict = {}

    async def main():
        async with Client(server_params(run_dir)) as c:
            await c.call_tool("list_units", {})
            unit = _obs(await c.call_tool("inspect", {"unit_id": "u01"}))["result"]
            log = (run_dir / "server.log").read_text()
            ws = Path(re.search(r"watching the live workspace (\S+)", log).group(1))
            target = ws / unit["files"][0]
            seen["ws"], seen["target"] = ws, unit["files"][0]
            # the agent's own file tools, behind the server's back:
            target.write_text(target.read_text() + "\nforged,row\n")
            (ws / "u01" / "notes.txt").write_text("an answer key, perhaps")
            other = next(
                p
                for p in sorted(ws.rglob("*"))
                if p.is_file() and p != target and p.parent.name != "u01"
            )
            seen["deleted"] = other.relative_to(ws).as_posix()
            other.unlink()
            await c.call_tool("status", {})  # step 3
            # the server's own edits are not out of band
            for path in (seen["target"], "u01/by_the_server.txt"):
                res = await c.call_tool("write_file", {"path": path, "content": "a,b\n1,2\n"})
                assert _obs(res)["ok"], _obs(res)
            await c.call_tool("status", {})
            await c.call_tool("final", {"reported_count": 0})

    anyio.run(main)
    rec = json.loads((run_dir / "episode.json").read_text())
    edits = rec["blackbox"]["out_of_band_edits"]
    assert sorted((e["kind"], e["path"]) for e in edits) == sorted(
        [("modified", seen["target"]), ("created", "u01/notes.txt"), ("deleted", seen["deleted"])]
    )
    assert {e["step_before"] for e in edits} == {3}
    assert rec["blackbox"]["out_of_band_edits_count"] == 3
    line = blackbox.records_from_run_dirs([run_dir])[0]
    assert line["blackbox"]["out_of_band_edits_count"] == 3
    assert "out_of_band_edits" not in line["blackbox"]  # the list stays in the full record
    assert line["tampered"] is False  # the record itself is honest
    assert not seen["ws"].exists()  # the live workspace is gone with the server
    # the edits are in the chained trace too: a record that hides them is flagged
    edit_record(
        run_dir, lambda r: r["blackbox"].update(out_of_band_edits=[], out_of_band_edits_count=0)
    )
    hidden = evaluate(run_dir)
    assert hidden["tampered"] and any("out-of-band" in r for r in hidden["tamper_reasons"])


# ----- permissions of run dirs and the refusal to serve from readable folders --------------------
def test_mcp_run_dir_and_files_are_private(honest):
    run = honest["reposcan"]
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    for p in run.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def _serve_once(run_dir: Path, *extra: str, env: dict | None = None):
    """Start the server with stdin already closed: it sets up, serves nothing and exits."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "mcp",
            "--task",
            REPOSCAN,
            "--run-dir",
            str(run_dir),
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_mcp_refuses_a_run_dir_other_users_can_read(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_dir.chmod(0o755)
    out = _serve_once(run_dir)
    assert out.returncode == 2 and out.stdout == ""
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "other users can read the run dir" in err[0]
    assert f"chmod 700 {run_dir}" in err[0] and "--allow-shared-cache" in err[0]
    assert list(run_dir.iterdir()) == []  # nothing was written
    ok = _serve_once(run_dir, "--allow-shared-cache")  # downgraded to a warning
    assert ok.returncode == 0, ok.stderr
    assert "WARNING" in ok.stderr and "other users can read the run dir" in ok.stderr
    assert (run_dir / "episode.json").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the cache another owner")
def test_mcp_refuses_a_cache_of_another_user_that_others_can_read(tmp_path):
    home = tmp_path / "shared-cache"
    home.mkdir()
    home.chmod(0o755)
    os.chown(home, 65534, 65534)  # a team cache owned by someone else: not ours to tighten
    out = _serve_once(tmp_path / "run", env={"PUSHBENCH_HOME": str(home)})
    assert out.returncode == 2
    assert "other users can read the cache" in out.stderr and f"chmod 700 {home}" in out.stderr
    assert not (tmp_path / "run").exists()
