"""Issue 24, section 5: bundles that travel, and ``pushbench verify`` that re-judges them.

Real runs (the runner's sweep), real bundles (:func:`write_bundle`), the real replay engine.
Forged bundles are made the way a careful forger would (:func:`bundle_runs.repack`: edit a
member, recompute every sha256 in ``bundle.json``), so only replay and the registry can tell.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from bundle_runs import TASKS, bundle, make_blackbox_run, make_run, members_of, repack
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from pushbench import cli, paths, tasks
from pushbench.bundles import BundleError, extract_bundle, verify_bundles, write_bundle
from pushbench.bundles.archive import MANIFEST, read_manifest
from pushbench.runner import outdir

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("bundles") / "run")


@pytest.fixture(scope="module")
def the_bundle(run_dir) -> Path:
    return bundle([run_dir], run_dir.parent / "small.pushbench.tar.gz")


def quiet():
    from rich.console import Console

    return Console(file=io.StringIO())


def verify(bundles, out, **kw):
    return verify_bundles(bundles, out, n_resamples=200, console=quiet(), printer=quiet(), **kw)


# ----- writing ------------------------------------------------------------------------------------
def test_a_bundle_is_deterministic_and_its_manifest_names_every_member(
    run_dir, the_bundle, tmp_path
):
    again = bundle([run_dir], tmp_path / "again.pushbench.tar.gz")
    assert again.read_bytes() == the_bundle.read_bytes()
    with tarfile.open(the_bundle, "r:gz") as tar:
        infos = tar.getmembers()
    names = [m.name for m in infos]
    assert names == sorted(names) and names[0] == MANIFEST
    assert all(
        m.isfile() and m.uid == 0 and m.gid == 0 and m.uname == "" and m.mtime == infos[0].mtime
        for m in infos
    )
    members = members_of(the_bundle)
    manifest = json.loads(members[MANIFEST])
    import hashlib

    assert set(manifest["members"]) == set(members) - {MANIFEST}
    for name, entry in manifest["members"].items():
        assert entry["sha256"] == hashlib.sha256(members[name]).hexdigest()
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    records = [n for n in members if "/records/" in n]
    assert len(records) == len(lines) == 16
    run = json.loads(members["runs/000/run.json"])
    assert run["kind"] == "run" and run["experiment"]["name"] == "small"
    assert [e["key"] for e in run["episodes"]] == [json.loads(x)["key"] for x in lines]
    for tid in TASKS:
        spec = tasks.get_task(tid)
        assert manifest["tasks"][tid] == {
            "family": "reposcan",
            "family_version": tasks.family_version("reposcan"),
            "manifest_digest": tasks.task_manifest_digest(tid),
        }
        assert spec.family == "reposcan"
    assert manifest["date"] == outdir.read_manifest(run_dir)["created"]
    assert manifest["packages"]["pushbench"] and "git" in manifest


def test_no_valid_set_workspace_or_cache_file_goes_in(run_dir, the_bundle):
    members = members_of(the_bundle)
    assert set(members) == {
        MANIFEST,
        "runs/000/run.json",
        *(f"runs/000/records/{i:06d}.json" for i in range(16)),
    }
    text = b"".join(members.values()).decode()
    assert str(paths.home()) not in text and "valid_sha256" not in text
    for name, data in members.items():  # a record is the trace's record, nothing added
        if "/records/" in name:
            rec = json.loads(data)
            with gzip.open(run_dir / "traces" / f"{rec['key']}.json.gz", "rt") as f:
                assert json.load(f) == rec


def test_bundle_refuses_what_it_cannot_replay(run_dir, tmp_path):
    with pytest.raises(BundleError, match="ends in .pushbench.tar.gz"):
        write_bundle([run_dir], tmp_path / "x.tar.gz")
    with pytest.raises(BundleError, match="neither"):
        write_bundle([tmp_path], tmp_path / "x.pushbench.tar.gz")
    broken = tmp_path / "broken"
    import shutil

    shutil.copytree(run_dir, broken)
    next((broken / "traces").glob("*.json.gz")).unlink()
    with pytest.raises(BundleError, match="no trace file"):
        write_bundle([broken], tmp_path / "x.pushbench.tar.gz")
    assert not (tmp_path / "x.pushbench.tar.gz").exists()
    # an episode of another family version than this installation's
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    trace = next((other / "traces").glob("*.json.gz"))
    rec = json.loads(gzip.decompress(trace.read_bytes()))
    v = tasks.family_version(rec["family"])
    assert rec["family_version"] == v
    trace.write_bytes(gzip.compress(json.dumps({**rec, "family_version": v + 1}).encode()))
    with pytest.raises(
        BundleError,
        match=rf"ran under {rec['family']} v{v + 1}, this "
        rf"installation is v{v}",
    ):
        write_bundle([other], tmp_path / "x.pushbench.tar.gz")
    assert not (tmp_path / "x.pushbench.tar.gz").exists()


# ----- verify -------------------------------------------------------------------------------------
def _fresh_home(tmp_path: Path) -> dict:
    """A new, empty PUSHBENCH_HOME holding only the built snapshots (the index, user tasks,
    keys and every other cache file are rebuilt or absent)."""
    home = tmp_path / "fresh-home"
    home.mkdir(mode=0o700)
    (home / "snapshots").symlink_to(paths.home() / "snapshots")
    return {**os.environ, "PUSHBENCH_HOME": str(home), "PYTHONPATH": str(ROOT)}


def test_verify_in_a_fresh_home_reproduces_summary_and_deltas_byte_for_byte(
    run_dir, the_bundle, tmp_path
):
    out = tmp_path / "verified"
    proc = subprocess.run(
        [sys.executable, "-m", "pushbench.cli", "verify", str(the_bundle), "--out", str(out)],
        env=_fresh_home(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "16 episodes replayed, 0 flagged" in proc.stderr
    for name in ("summary.csv", "paired_deltas.csv"):
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
    assert outdir.read_manifest(out)["writer"] == "verify"
    assert (out / "report.md").is_file()
    verification = json.loads((out / "verification.json").read_text())
    assert verification["bundles"][0]["flagged"] == []


def test_a_dataops_run_verifies_to_the_same_report(tmp_path):
    """In-process DataOps records (workspace edits through write_file, the checker's runs)
    replay through a fresh workspace to the same lines and tables."""
    run = make_run(
        tmp_path / "dops",
        "dops",
        ("diligent",),
        controllers=("standard", "unitqgp"),
        seeds=(0,),
        tasks=("DataOps-b0-N3",),
    )
    [v] = verify([bundle([run], tmp_path / "d.pushbench.tar.gz")], tmp_path / "v")
    assert len(v.records) == 2 and v.flagged == []
    for name in ("episodes.jsonl", "summary.csv", "paired_deltas.csv"):
        assert (tmp_path / "v" / name).read_bytes() == (run / name).read_bytes(), name


def _first_submit(members: dict) -> tuple[str, dict, int]:
    for name in sorted(members):
        if "/records/" not in name:
            continue
        rec = json.loads(members[name])
        for i, c in enumerate(rec["calls"]):
            if c.get("tool") == "submit" and c.get("verdicts"):
                return name, rec, i
    raise AssertionError("no submit in the bundle")


def test_a_changed_verdict_is_flagged_and_left_out(the_bundle, tmp_path):
    def edit(members):
        name, rec, i = _first_submit(members)
        v = rec["calls"][i]["verdicts"][0]  # [id, verdict]
        v[-1] = "rejected" if v[-1] == "accepted" else "accepted"
        members[name] = json.dumps(rec).encode()

    forged = repack(the_bundle, tmp_path / "forged.pushbench.tar.gz", edit)
    [v] = verify([forged], tmp_path / "v")
    assert len(v.flagged) == 1 and "verdicts" in "; ".join(v.flagged[0]["reasons"])
    lines = [json.loads(x) for x in (tmp_path / "v" / "episodes.jsonl").read_text().splitlines()]
    bad = [x for x in lines if x.get("tampered")]
    assert [x["key"] for x in bad] == [v.flagged[0]["key"]]
    summary = (tmp_path / "v" / "summary.csv").read_text()
    assert ",1," in summary  # n_tampered of that cell
    res = runner.invoke(cli.app, ["verify", str(forged), "--out", str(tmp_path / "v2")])
    assert res.exit_code == 1 and "flagged" in res.output, res.output


def test_a_changed_target_is_flagged(the_bundle, tmp_path):
    def edit(members):
        name, rec, _ = _first_submit(members)
        rec["target"] = 1
        members[name] = json.dumps(rec).encode()

    [v] = verify([repack(the_bundle, tmp_path / "t.pushbench.tar.gz", edit)], tmp_path / "v")
    assert len(v.flagged) == 1
    assert any("target" in r for r in v.flagged[0]["reasons"]), v.flagged


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("manifest_digest", "0" * 64, "manifest digest differs"),
        ("family_version", 99, "version 99 in the bundle"),
    ],
)
def test_a_changed_task_fact_refuses_the_bundle(the_bundle, tmp_path, field, value, needle):
    def edit(members):
        manifest = json.loads(members[MANIFEST])
        manifest["tasks"][TASKS[0]][field] = value
        members[MANIFEST] = json.dumps(manifest).encode()

    forged = repack(the_bundle, tmp_path / "f.pushbench.tar.gz", edit)
    with pytest.raises(BundleError, match=needle):
        verify([forged], tmp_path / "v")
    assert not (tmp_path / "v").exists()
    res = runner.invoke(cli.app, ["verify", str(forged), "--out", str(tmp_path / "v")])
    assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output


def test_a_member_changed_after_bundling_is_refused(the_bundle, tmp_path):
    members = members_of(the_bundle)
    name = next(n for n in members if "/records/" in n)
    members[name] = members[name].replace(b'"seed":0', b'"seed":1', 1)
    from pushbench.bundles.archive import write_archive

    write_archive(members, tmp_path / "m.pushbench.tar.gz")
    with pytest.raises(BundleError, match="does not match its sha256"):
        verify([tmp_path / "m.pushbench.tar.gz"], tmp_path / "v")


def test_verify_refuses_a_run_folder_and_replaces_its_own(the_bundle, run_dir, tmp_path):
    with pytest.raises(outdir.OutputDirError, match="written by `pushbench run`"):
        verify([the_bundle], run_dir)
    verify([the_bundle], tmp_path / "v")
    verify([the_bundle], tmp_path / "v")  # the same bundle again: its own folder
    assert len(outdir.read_manifest(tmp_path / "v")["invocations"]) == 2


def test_a_black_box_run_travels_to_another_installation(tmp_path, monkeypatch):
    """A signed black-box run, bundled here, verifies clean under another PUSHBENCH_HOME (so
    another signing key): its signature is not checked there, its calls are replayed."""
    pytest.importorskip("mcp")
    from pushbench.blackbox.evaluate import record_from_run_dir

    bb = make_blackbox_run(tmp_path / "bb")
    b = bundle([bb], tmp_path / "bb.pushbench.tar.gz")
    names = set(members_of(b))
    assert {
        "runs/000/blackbox/run.json",
        "runs/000/blackbox/episode.json",
        "runs/000/blackbox/trace.jsonl",
    } <= names
    assert not any("server.log" in n for n in names)
    assert record_from_run_dir(bb)["tampered"] is False  # signed by this installation
    monkeypatch.setenv("PUSHBENCH_HOME", _fresh_home(tmp_path)["PUSHBENCH_HOME"])
    assert record_from_run_dir(bb)["tampered"] is True  # here its key is unknown
    [v] = verify([b], tmp_path / "v")
    assert len(v.records) == 1 and v.flagged == []
    line = json.loads((tmp_path / "v" / "episodes.jsonl").read_text())
    assert line["policy"]["name"] == "blackbox-mcp:fake-agent:default"
    assert line["blackbox"]["signature"] == "not checked (bundle)"
    assert line["family_version"] == tasks.family_version(line["family"])
    # under another version of its family the run is not bundled
    with (
        monkeypatch.context() as m,
        pytest.raises(BundleError, match=rf"ran under {line['family']} v{line['family_version']}"),
    ):
        m.setitem(tasks.FAMILY_VERSIONS, line["family"], line["family_version"] + 1)
        bundle([bb], tmp_path / "bb2.pushbench.tar.gz")

    def edit(members):  # a forged verdict in the bundled episode.json: the replay catches it
        rec = json.loads(members["runs/000/blackbox/episode.json"])
        call = next(c for c in rec["calls"] if c.get("verdicts"))
        call["verdicts"][0][-1] = "accepted"
        members["runs/000/blackbox/episode.json"] = json.dumps(rec).encode()

    [v] = verify([repack(b, tmp_path / "f.pushbench.tar.gz", edit)], tmp_path / "v2")
    assert len(v.flagged) == 1


# ----- hostile archives ---------------------------------------------------------------------------
def _tar(path: Path, add) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        add(tar)
    return path


def _file(tar, name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _link(kind):
    def add(tar):
        info = tarfile.TarInfo("runs/000/run.json")
        info.type, info.linkname = kind, "/etc/passwd"
        tar.addfile(info)

    return add


def _fifo(tar):
    info = tarfile.TarInfo("runs/000/run.json")
    info.type = tarfile.FIFOTYPE
    tar.addfile(info)


@pytest.mark.parametrize(
    "add,needle",
    [
        (lambda t: _file(t, "/tmp/pushbench-escape"), "absolute path"),
        (lambda t: _file(t, "runs/../../escape"), "'..'"),
        (_link(tarfile.SYMTYPE), "symbolic link"),
        (_link(tarfile.LNKTYPE), "hard link"),
        (_fifo, "device, FIFO"),
    ],
)
def test_hostile_members_are_refused_before_anything_is_written(tmp_path, add, needle):
    archive = _tar(tmp_path / "h.pushbench.tar.gz", add)
    with pytest.raises(BundleError, match=needle):
        extract_bundle(archive, tmp_path / "x")
    assert list((tmp_path / "x").iterdir()) == []
    assert not (tmp_path.parent / "escape").exists()
    with pytest.raises(BundleError):
        verify([archive], tmp_path / "v")


def test_caps_on_member_size_total_and_count(tmp_path, monkeypatch):
    from pushbench import archives
    from pushbench.bundles import archive as arch

    monkeypatch.setattr(arch, "LIMITS", archives.Limits(files=3, file_bytes=100, total_bytes=150))
    big = _tar(tmp_path / "big.pushbench.tar.gz", lambda t: _file(t, "a", b"x" * 101))
    with pytest.raises(BundleError, match="per member"):
        extract_bundle(big, tmp_path / "1")
    total = _tar(
        tmp_path / "t.pushbench.tar.gz", lambda t: [_file(t, n, b"x" * 80) for n in ("a", "b")]
    )
    with pytest.raises(BundleError, match="total"):
        extract_bundle(total, tmp_path / "2")
    many = _tar(tmp_path / "m.pushbench.tar.gz", lambda t: [_file(t, f"f{i}") for i in range(4)])
    with pytest.raises(BundleError, match="members"):
        extract_bundle(many, tmp_path / "3")
    bomb = tmp_path / "bomb.pushbench.tar.gz"  # 1 GB of zeros stated in one header
    with gzip.open(bomb, "wb") as gz:
        info = tarfile.TarInfo("a")
        info.size = 1 << 30
        gz.write(info.tobuf())
        gz.write(b"\0" * (1 << 16))
    with pytest.raises(BundleError, match="per member"):
        extract_bundle(bomb, tmp_path / "4")
    not_tar = tmp_path / "n.pushbench.tar.gz"
    not_tar.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(BundleError, match="not a readable"):
        extract_bundle(not_tar, tmp_path / "5")


NAMES = st.lists(
    st.text(st.sampled_from("ab./-_\\\x00:"), min_size=0, max_size=12), min_size=1, max_size=5
)


@given(names=NAMES, sizes=st.lists(st.integers(0, 300), min_size=5, max_size=5))
def test_any_archive_is_extracted_inside_its_target_or_refused(tmp_path_factory, names, sizes):
    from pushbench import archives
    from pushbench.bundles import archive as arch

    tmp = tmp_path_factory.mktemp("h")
    archive = tmp / "a.pushbench.tar.gz"
    try:
        # sizes has 5 entries for up to 5 names: one per name (strict: a ValueError here would
        # be taken for tarfile refusing a name below and end the example unchecked)
        _tar(
            archive,
            lambda t: [
                _file(t, n, b"y" * s) for n, s in zip(names, sizes[: len(names)], strict=True)
            ],
        )
    except (ValueError, UnicodeError, tarfile.TarError):
        return  # tarfile itself cannot write the name
    old = arch.LIMITS
    arch.LIMITS = archives.Limits(files=4, file_bytes=250, total_bytes=600)
    try:
        extract_bundle(archive, tmp / "x")
    except BundleError:
        pass
    finally:
        arch.LIMITS = old
    inside = (tmp / "x").resolve()
    for p in tmp.rglob("*"):
        assert p == archive or p.resolve() == inside or inside in p.resolve().parents, p


@given(
    edits=st.dictionaries(
        st.sampled_from(["kind", "schema_version", "members", "tasks", "runs", "date"]),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=5),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_any_edit_of_the_manifest_is_refused_or_read_never_raised(
    the_bundle, tmp_path_factory, edits
):
    from pushbench.bundles.verify import task_problems

    tmp = tmp_path_factory.mktemp("m")
    root = extract_bundle(the_bundle, tmp / "x")
    manifest = json.loads((root / MANIFEST).read_text())
    manifest.update(edits)
    (root / MANIFEST).write_text(json.dumps(manifest))
    try:
        got = read_manifest(root)
    except BundleError:
        return
    assert isinstance(task_problems(got), list)
    if "tasks" in edits:
        assert task_problems(got)  # any other task list is not this registry's


def test_cli_bundle_and_verify(run_dir, tmp_path):
    b = tmp_path / "cli.pushbench.tar.gz"
    res = runner.invoke(cli.app, ["bundle", str(run_dir), "--out", str(b)])
    assert res.exit_code == 0 and "16 episodes" in res.output, res.output
    res = runner.invoke(
        cli.app, ["verify", str(b), "--out", str(tmp_path / "v"), "--resamples", "200"]
    )
    assert res.exit_code == 0 and "0 flagged" in res.output, res.output
    res = runner.invoke(cli.app, ["bundle", str(tmp_path / "nope"), "--out", str(b)])
    assert res.exit_code == 2 and "not a folder" in res.output


def test_a_proposed_submit_clipped_in_the_trace_is_rebuilt_and_replays_clean():
    """simulated-weak under stateqgp proposes submits past the record's 2000-character clip
    (the controller ablation has 11 such episodes); the unclipped ``proposed_ids`` rebuild them,
    and a rebuild that does not clip to the stored text is not taken."""
    from pushbench.runner.episode import run_episode
    from pushbench.runner.replay import check_episode
    from pushbench.runner.replay_steps import _whole_submit, steps_from_record

    rec = run_episode("RepoScan-requests-assert-N25", "stateqgp", "simulated-weak", 0)
    clipped = [
        s
        for s in rec["controller"]["steps"]
        if isinstance(s.get("proposed"), str) and s["proposed"].endswith("...")
    ]
    assert clipped, "the episode no longer proposes a clipped submit: pick another"
    steps = steps_from_record(rec)
    assert steps.unverifiable == []
    checked = check_episode(rec, steps, task_id=rec["task_id"], controller="stateqgp", seed=0)
    assert checked.reasons == [] and checked.unverifiable == []
    s = clipped[0]
    assert _whole_submit(s["proposed"], s["proposed_ids"][1:]) is None  # not the stored text
    assert _whole_submit(s["proposed"], None) is None
    s["proposed_ids"] = s["proposed_ids"][:-1]  # an id past the clip lost: rebuilt, but the
    steps = steps_from_record(rec)  # replay then differs and the record is flagged
    assert steps.unverifiable == []
    assert check_episode(rec, steps, task_id=rec["task_id"], controller="stateqgp", seed=0).reasons
