"""Signed run folders (issue 24, section 3): the installation key, forged runs the signatures
catch, the killed-server tail, and run dirs another user could have written.

Runs are written by the real server session in a temporary ``PUSHBENCH_HOME`` (its own key),
then forged the ways the issue lists and read back with ``pushbench evaluate``'s reader; the
refusals of unsafe run dirs run the real ``pushbench mcp`` command.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP server needs the optional 'mcp' extra")

from conftest import temporary_home
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_audit import (
    DATAOPS,
    REPOSCAN,
    _flip_first,
    diligent_run,
    edit_record,
    edit_trace,
    evaluate,
    resummarise,
    scripted_run,
    search_ids,
)

from pushbench.blackbox import audit, signing
from pushbench.blackbox import evaluate as blackbox

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files another owner")


@pytest.fixture(scope="module", autouse=True)
def home(tmp_path_factory):
    """Every test here runs in its own PUSHBENCH_HOME: a key made for this module."""
    with temporary_home(tmp_path_factory.mktemp("home")) as h:
        yield h


@pytest.fixture(scope="module")
def honest(home, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("signed")
    diligent_run(root / "reposcan", REPOSCAN, agent="fake-agent")
    diligent_run(root / "dataops", DATAOPS)
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
    scripted_run(
        root / "open",
        [("search", {"query": "session"}), ("submit", {"ids": ids}), ("status", {})],
        seed=2,
    )  # closed before the episode ended
    return {p.name: p for p in root.iterdir()}


def copy_run(src: Path, tmp_path: Path, name: str = "forged") -> Path:
    dest = tmp_path / name
    shutil.copytree(src, dest)
    return dest


def edit_json(path: Path, fn) -> None:
    """What a forger without the key does: parse, edit, write back (the seal goes with it or
    stays as it was)."""
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data, indent=1))


def reasons_of(run_dir: Path) -> list[str]:
    rec = evaluate(run_dir)
    assert rec["tampered"] is True and rec["tamper_reasons"]
    return rec["tamper_reasons"]


def raw_json(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=True, indent=1).encode()


def rewrite_chain(
    run_dir: Path, lines: list[dict], record: dict, run: dict, key: bytes | None
) -> None:
    """Write a complete, self-consistent run folder from parsed parts: the chain recomputed from
    the configuration's genesis, the head put in the record, everything signed with ``key``
    (``None``: no signatures at all)."""
    head, out = signing.genesis(run), b""
    for ln in lines:
        ln.pop("sig", None)
        ln["prev"] = head
        body = json.dumps(ln, ensure_ascii=True, separators=(",", ":")).encode()
        data = signing.sign_line(key, body) if key else body + b"\n"
        head = audit.line_digest(data)
        out += data
    record["blackbox"].update(trace_head=head, trace_lines=len(lines))
    (run_dir / "trace.jsonl").write_bytes(out)
    for name, obj, domain in (
        ("run.json", run, signing.RUN),
        ("episode.json", record, signing.RECORD),
    ):
        obj.pop("signature", None)
        data = raw_json(obj)
        (run_dir / name).write_bytes(signing.seal_json(key, domain, data) if key else data)


def parts(run_dir: Path) -> tuple[list[dict], dict, dict]:
    lines = [json.loads(x) for x in (run_dir / "trace.jsonl").read_bytes().splitlines()]
    return (
        lines,
        json.loads((run_dir / "episode.json").read_text()),
        json.loads((run_dir / "run.json").read_text()),
    )


# ----- the key --------------------------------------------------------------------------------
def test_the_key_is_private_made_once_and_the_same_for_racing_processes(home):
    import multiprocessing

    path = signing.key_path()
    assert path.parent == home / "keys"
    got: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: got.append(signing.installation_key())) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with multiprocessing.get_context("fork").Pool(4) as pool:
        got += pool.starmap(signing.installation_key, [()] * 8)
    assert len(got) == 16 and len(set(got)) == 1 and len(got[0]) == signing.KEY_BYTES
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left
    assert signing.installation_key(create=False) == got[0]


def test_an_unsafe_or_broken_key_file_is_refused_with_the_fix(home, tmp_path):
    with temporary_home(tmp_path) as h:
        assert signing.installation_key(create=False) is None  # evaluate never makes one
        signing.installation_key()
        path = signing.key_path()
        path.chmod(0o644)
        with pytest.raises(signing.SigningKeyError, match=f"chmod 600 {path}"):
            signing.installation_key()
        path.chmod(0o600)
        path.write_text("not a key\n")
        with pytest.raises(signing.SigningKeyError, match="does not hold"):
            signing.installation_key()
        assert h == signing.key_path().parents[1]


def test_mcp_refuses_an_unsafe_key_in_one_line(tmp_path):
    with temporary_home(tmp_path / "h"):
        signing.installation_key()
        signing.key_path().chmod(0o640)
        out = _serve_once(tmp_path / "run")
        assert out.returncode == 2 and out.stdout == ""
        err = out.stderr.strip().splitlines()
        assert len(err) == 1 and f"chmod 600 {signing.key_path()}" in err[0], err


def test_the_key_never_lies_inside_a_run_dir_or_a_workspace(home):
    from pushbench.blackbox.session import BlackBoxSession, SetupError

    for run_dir, ws in ((home, None), (home / "keys" / "run", None), (home.parent / "run-x", home)):
        s = BlackBoxSession(REPOSCAN, run_dir, workspace=ws, argv=["test"])
        with pytest.raises(SetupError, match="signing key folder"):
            s.open()
        s.close()


# ----- honest runs ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["reposcan", "dataops", "mixed"])
def test_honest_signed_runs_verify_clean(honest, name):
    run = json.loads((honest[name] / "run.json").read_text())
    assert run["schema_version"] == blackbox.RUN_SCHEMA_VERSION == 3
    assert run["signing"] == {
        "alg": signing.ALG,
        "key_id": signing.key_id(signing.installation_key()),
    }
    assert set(run["family_versions"]) == {
        json.loads((honest[name] / "episode.json").read_text())["family"]
    }
    rec = evaluate(honest[name])
    assert rec["tampered"] is False, rec["tamper_reasons"]
    assert rec["blackbox"]["signature"] == "valid" and rec["blackbox"]["unsafe"] == []
    assert "signature" not in rec and "signature" not in blackbox.blackbox_line(rec)


def test_the_chain_starts_from_the_configuration(honest):
    lines, rec, run = parts(honest["mixed"])
    assert lines[0]["prev"] == signing.genesis(run) != audit.genesis(run["run_id"])
    for field in (*signing.CONFIG_FIELDS, "run_id"):  # each one changes the genesis
        assert signing.genesis({**run, field: "other"}) != signing.genesis(run), field
    other = {f: v + 1 for f, v in run["family_versions"].items()}  # any other version
    assert signing.genesis({**run, "family_versions": other}) != signing.genesis(run)
    assert signing.genesis({**run, "versions": {"pushbench": "0"}}) != signing.genesis(run)


def test_a_server_killed_before_its_trace_line_ends_at_the_last_signed_line(tmp_path):
    calls = [("search", {"query": "auth", "page": p}) for p in (1, 2)] + [
        ("final", {"reported_count": 9})
    ]
    s = scripted_run(tmp_path / "run", calls, close=False)
    try:
        edit_trace(tmp_path / "run", lambda ls: ls[:-1])  # killed before the 3rd line
        rec = evaluate(tmp_path / "run")
        assert not rec["tampered"], rec["tamper_reasons"]
        assert rec["blackbox"]["signature"] == "valid" and rec["blackbox"]["trace_missing_last"]
        assert rec["blackbox"]["dropped_unanswered"] == {"step": 3, "tool": "final"}
        assert rec["steps_used"] == 2 and len(rec["calls"]) == 2  # the final is not counted
        assert rec["terminated_by"] is None and rec["incomplete"]
        assert not rec["metrics"]["false_completion"]
    finally:
        s._closed = True  # do not write the closing record over the edited files
        s.close()


# ----- forgeries the signatures catch ---------------------------------------------------------
def _both(field, value):
    def fn(run_dir):
        edit_json(run_dir / "run.json", lambda r: r.update({field: value}))
        edit_json(run_dir / "episode.json", lambda r: r.update({field: value}))

    return fn


def _controller(run_dir):
    edit_json(run_dir / "run.json", lambda r: r.update(controller="stateqgp"))
    edit_json(run_dir / "episode.json", lambda r: r["controller"].update(name="stateqgp"))


LABEL_FORGERIES = {
    "condition in run.json": lambda d: edit_json(
        d / "run.json", lambda r: r.update(condition="checklist")
    ),
    "agent in run.json": lambda d: edit_json(d / "run.json", lambda r: r.update(agent="codex")),
    "controller in both files": _controller,
    "seed in both files (a copy counted twice)": _both("seed", 1),
    "budget 1000 in episode.json": lambda d: edit_json(
        d / "episode.json", lambda r: r.update(budget=1000)
    ),
    "budget in run.json": lambda d: edit_json(d / "run.json", lambda r: r.update(budget=1000)),
    "a re-indented but equal episode.json": lambda d: (d / "episode.json").write_text(
        json.dumps(json.loads((d / "episode.json").read_text()), indent=2)
    ),
}


@pytest.mark.parametrize("how", sorted(LABEL_FORGERIES))
def test_edited_labels_are_flagged_by_the_signature(honest, tmp_path, how):
    run = copy_run(honest["reposcan"], tmp_path)
    LABEL_FORGERIES[how](run)
    reasons = reasons_of(run)
    assert any("signature" in r for r in reasons), reasons
    assert all(len(r) < 200 for r in reasons)


def test_a_consistent_run_written_without_the_key_is_flagged(honest, tmp_path):
    """From scratch on this installation, without reading the key: ten valid ids 'accepted'
    in a fresh chain from the right genesis, every digest and summary recomputed."""
    from test_audit import fake_submit

    from pushbench.families.reposcan.env import _valid_set

    def forge(key):
        run_dir = copy_run(honest["mixed"], tmp_path, f"forged-{key.hex()[:8] if key else 0}")
        lines, rec, run = parts(run_dir)
        fake_submit(rec, sorted(_valid_set("requests-docstring"))[:10])
        rewrite_chain(run_dir, lines, rec, run, key)
        return run_dir

    unsigned = reasons_of(forge(None))
    assert (
        "run.json signature missing" in unsigned
        and "episode.json signature missing" in unsigned
        and "trace line 1 signature missing" in unsigned
    )
    own_key = reasons_of(forge(b"k" * 32))  # signed with a key of the forger's own
    assert {
        "run.json signature invalid",
        "episode.json signature invalid",
        "trace line 1 signature invalid",
    } <= set(own_key)
    # the same rewrite with this installation's key (a forger who can read it): the chain and
    # signatures pass; the trace, made from the calls really served, still disagrees
    signed = reasons_of(forge(signing.installation_key()))
    assert not any("signature" in r for r in signed)


def fabricate_tail(run_dir: Path) -> None:
    """The issue's forgery: one submit of ten valid ids 'accepted', appended to episode.json
    only, with ``closed: false`` and ``mcp_calls + 1`` (the trace and its head unchanged)."""
    from pushbench.families.reposcan.env import _valid_set

    def append(r):
        seen = {i for c in r["calls"] for i, _ in c.get("verdicts") or ()}
        ids = sorted(_valid_set("requests-docstring") - seen)[:10]
        n, prev = len(r["calls"]), r["calls"][-1]["valid_count"]
        r["calls"].append(
            {
                "step": n + 1,
                "tool": "submit",
                "args": {"ids": ids},
                "ok": True,
                "verdicts": [[i, "accepted"] for i in ids],
                "reward": 10,
                "valid_count": prev + 10,
            }
        )
        resummarise(r)
        r["blackbox"].update(closed=False, mcp_calls=r["blackbox"]["mcp_calls"] + 1)

    edit_json(run_dir / "episode.json", append)


def test_a_fabricated_tail_call_is_flagged_and_never_counted(honest, tmp_path):
    run = copy_run(honest["open"], tmp_path)
    before = evaluate(run)
    assert not before["tampered"] and not before["success"]
    fabricate_tail(run)
    rec = evaluate(run)
    assert rec["tampered"] and "episode.json signature invalid" in rec["tamper_reasons"]
    assert rec["blackbox"]["dropped_unanswered"]["tool"] == "submit"
    assert rec["valid_count"] == before["valid_count"] and not rec["success"]


def test_a_missing_or_changed_key_flags_every_signed_run(honest, tmp_path):
    path = signing.key_path()
    saved = path.read_bytes()
    try:
        path.unlink()
        assert any("no signing key" in r for r in reasons_of(honest["mixed"]))
        signing.installation_key()  # a new key: runs signed before no longer verify
        assert any("not this installation's key" in r for r in reasons_of(honest["mixed"]))
    finally:
        path.unlink(missing_ok=True)
        path.write_bytes(saved)
        path.chmod(0o600)
    assert evaluate(honest["mixed"])["tampered"] is False


# ----- unsigned (schema 2) runs -----------------------------------------------------------------
def unsign(run_dir: Path) -> None:
    """The run as a schema-2 server wrote it: no signatures, the run-id genesis."""
    lines, rec, run = parts(run_dir)
    run["schema_version"] = 2
    for k in ("signing", "family_versions", "signature"):
        run.pop(k, None)
    head, out = audit.genesis(run["run_id"]), b""
    for ln in lines:
        ln.pop("sig")
        ln["prev"] = head
        data = (json.dumps(ln, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        head, out = audit.line_digest(data), out + data
    rec.pop("signature")
    rec["blackbox"]["trace_head"] = head
    (run_dir / "trace.jsonl").write_bytes(out)
    (run_dir / "run.json").write_bytes(raw_json(run))
    (run_dir / "episode.json").write_bytes(raw_json(rec))


def test_unsigned_runs_are_reported_apart_and_still_replayed(honest, tmp_path):
    run = copy_run(honest["mixed"], tmp_path)
    unsign(run)
    rec, signed = evaluate(run), evaluate(honest["mixed"])
    assert rec["tampered"] is False, rec["tamper_reasons"]
    assert rec["blackbox"]["signature"] == "unsigned"
    assert rec["metrics"] == signed["metrics"]
    from typer.testing import CliRunner

    from pushbench.cli import app

    result = CliRunner().invoke(
        app, ["evaluate", str(run), "--out", str(tmp_path / "out"), "--resamples", "200"]
    )
    assert result.exit_code == 0, result.output
    assert "1 unsigned run" in result.output and "tampered run" not in result.output
    edit_record(run, _flip_first("accepted", "rejected"))
    assert any("replay" in r for r in reasons_of(run))  # still replayed


def test_a_signed_run_relabelled_as_unsigned_is_flagged(honest, tmp_path):
    """Schema 3 -> 2 and the chain recomputed from the old genesis, the signatures left in."""
    run = copy_run(honest["mixed"], tmp_path)
    lines, rec, meta = parts(run)
    meta["schema_version"] = 2
    head, out = audit.genesis(meta["run_id"]), b""
    for ln in lines:
        ln["prev"] = head
        data = (json.dumps(ln, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        head, out = audit.line_digest(data), out + data
    rec["blackbox"]["trace_head"] = head
    (run / "trace.jsonl").write_bytes(out)
    (run / "run.json").write_bytes(raw_json(meta))
    (run / "episode.json").write_bytes(raw_json(rec))
    assert any("carries signature fields" in r for r in reasons_of(run))


def test_unsigned_fabricated_tail_is_dropped_not_counted(honest, tmp_path):
    """The issue's case on a schema-2 run (no seal to break): 3 accepted must not become 10."""
    run = copy_run(honest["open"], tmp_path)
    unsign(run)
    before = evaluate(run)
    fabricate_tail(run)
    out = evaluate(run)
    assert out["blackbox"]["trace_missing_last"] and out["blackbox"]["signature"] == "unsigned"
    assert out["blackbox"]["dropped_unanswered"]["tool"] == "submit"
    assert out["valid_count"] == before["valid_count"] and not out["success"]
    assert out["steps_used"] == before["steps_used"]


# ----- any label edit, on a property basis -------------------------------------------------------
LABEL_VALUES = {
    "seed": st.integers(0, 10**6),
    "budget": st.integers(1, 10**4) | st.none(),
    "condition": st.sampled_from(["default", "checklist", "x"]),
    "agent": st.sampled_from(["codex", "claude-code", None, "a" * 64]),
    "controller": st.sampled_from(["standard", "stateqgp", "verifier_gated", "none"]),
    "instance": st.sampled_from(["requests-docstring", None, "flask-docstring"]),
    "task": st.sampled_from([REPOSCAN, "RepoScan-requests-docstring-N25"]),
    "run_id": st.text("0123456789abcdef", min_size=32, max_size=32),
}
BOTH = {"seed": "seed", "task": "task_id", "instance": "instance", "budget": "budget"}


def test_any_label_edit_is_flagged_and_nothing_raises(honest, tmp_path):
    run = copy_run(honest["reposcan"], tmp_path)
    base_run = json.loads((run / "run.json").read_text())
    base_rec = json.loads((run / "episode.json").read_text())

    @settings(
        max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(data=st.data())
    def check(data):
        field = data.draw(st.sampled_from(sorted(LABEL_VALUES)), label="field")
        new = data.draw(LABEL_VALUES[field].filter(lambda v: v != base_run.get(field)), label="new")
        where = data.draw(st.sampled_from(["run.json", "episode.json", "both"]), label="where")
        r, e = copy.deepcopy(base_run), copy.deepcopy(base_rec)
        if where != "episode.json":
            r[field] = new
        if where != "run.json":
            if field == "controller":
                e["controller"]["name"] = new
            elif field in ("condition", "agent", "run_id"):
                key = {
                    "condition": ("condition",),
                    "agent": ("policy", "params", "agent"),
                    "run_id": ("blackbox", "run_id"),
                }[field]
                target = e
                for k in key[:-1]:
                    target = target[k]
                target[key[-1]] = new
            else:
                e[BOTH.get(field, field)] = new
        assume(r != base_run or e != base_rec)  # the value may already be there
        (run / "run.json").write_text(json.dumps(r, indent=1))
        (run / "episode.json").write_text(json.dumps(e, indent=1))
        try:
            out = evaluate(run)
        except blackbox.RunDirError as err:  # the two files disagree: refused, file named
            assert "episode.json" in str(err) or "run.json" in str(err)
            return
        assert out["tampered"] is True, (field, new, where)
        assert any("signature" in x for x in out["tamper_reasons"]), out["tamper_reasons"]

    check()


# ----- run dirs another user could have written -------------------------------------------------
def _serve_once(run_dir: Path, *extra: str):
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
        env=dict(os.environ),
    )


def test_mcp_refuses_a_run_dir_under_a_folder_others_can_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    out = _serve_once(shared / "run")
    assert out.returncode == 2 and out.stdout == ""
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "unsafe run dir" in err[0] and "writable by other users" in err[0]
    assert f"chmod go-w {shared}" in err[0]
    assert not (shared / "run").exists()  # refused before anything was made
    out = _serve_once(shared / "run", "--allow-shared-cache")  # not overridable
    assert out.returncode == 2 and "unsafe run dir" in out.stderr
    shared.chmod(0o1777)  # sticky, like /tmp: others cannot rename what is yours
    ok = _serve_once(shared / "run")
    assert ok.returncode == 0, ok.stderr
    assert evaluate(shared / "run")["tampered"] is False


@ROOT_ONLY
def test_mcp_refuses_a_run_dir_of_another_user_in_a_shared_folder(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "run").mkdir(mode=0o700)
    os.chown(shared / "run", 65534, 65534)  # planted by someone else before the server started
    out = _serve_once(shared / "run")
    assert out.returncode == 2 and "belongs to another user" in out.stderr
    os.chown(shared, 65534, 65534)  # a folder above of another user
    out = _serve_once(tmp_path / "shared" / "x" / "run")
    assert out.returncode == 2 and "belongs to another user" in out.stderr


def test_evaluate_names_unsafe_run_dirs(honest, tmp_path):
    from typer.testing import CliRunner

    from pushbench.cli import app

    shared = tmp_path / "shared"
    shared.mkdir()
    run = copy_run(honest["mixed"], shared, "run")
    shared.chmod(0o777)
    rec = evaluate(run)
    assert rec["tampered"] and rec["blackbox"]["unsafe"]
    assert any(
        r.startswith("unsafe run dir:") and "writable by other users" in r
        for r in rec["tamper_reasons"]
    )
    result = CliRunner().invoke(
        app,
        [
            "evaluate",
            str(run),
            str(honest["reposcan"]),
            "--out",
            str(tmp_path / "out"),
            "--resamples",
            "200",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "1 unsafe run dir" in result.output and str(run) in result.output
    shared.chmod(0o755)
    assert evaluate(run)["tampered"] is False
    (run / "episode.json").chmod(0o666)
    assert any("episode.json" in r and "writable" in r for r in reasons_of(run))
    (run / "episode.json").chmod(0o600)
    if os.geteuid() == 0:
        os.chown(run / "trace.jsonl", 65534, 65534)
        assert any("trace.jsonl" in r and "another user" in r for r in reasons_of(run))


# ----- re-attach continues only what this installation signed ----------------------------------
def test_reattach_refuses_runs_it_did_not_sign(honest, tmp_path):
    from pushbench.blackbox.session import BlackBoxSession, SetupError

    def reopen(run_dir):
        s = BlackBoxSession(REPOSCAN, run_dir, seed=1, argv=["test"], controller="standard")
        try:
            with pytest.raises(SetupError) as e:
                s.open()
        finally:
            s.close()
        return str(e.value)

    unsigned = copy_run(honest["mixed"], tmp_path, "unsigned")
    unsign(unsigned)
    assert "unsigned run written by an older PushBench" in reopen(unsigned)
    edited = copy_run(honest["mixed"], tmp_path, "edited")
    lines, rec, run = parts(edited)
    edit_trace(edited, lambda ls: [ls[0].replace(b'"index":1', b'"index":1 '), *ls[1:]])
    assert "trace line 1 is not signed by this installation" in reopen(edited)
    rewrite_chain(edited, lines, rec, run, b"k" * 32)  # consistent, but not our key
    assert "run.json is not signed by this installation" in reopen(edited)
    edit_json(edited / "run.json", lambda r: r["signing"].update(key_id="0" * 16))
    assert "signed with another key" in reopen(edited)
