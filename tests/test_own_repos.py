"""Issue 15, sections 1 and 3: your own repository as a snapshot, and new tasks on it.

Sources are real code: the standard library's ``json`` and ``email`` packages copied into temp
folders, archives made from them with tarfile/zipfile, and a real git repository (gitpython).
Every test works in its own ``PUSHBENCH_HOME`` and uses its own snapshot names (the
environment's search index is memoised per process by snapshot name).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import git
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import pushbench
from pushbench import snapshots, sources, tasks, userdata
from pushbench.families.reposcan import indexer, verifier
from pushbench.families.reposcan.env import RepoScanIntegrityError
from pushbench.families.reposcan.predicates import parse_predicate
from pushbench.policies.reposcan.judge import property_from_objective
from pushbench.runner import calibration
from pushbench.runner.calibration import TaskCreationError, new_task

STDLIB = Path(json.__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh PUSHBENCH_HOME and no PUSHBENCH_TASKS; task lists re-read before and after."""
    h = tmp_path / "home"
    monkeypatch.setenv("PUSHBENCH_HOME", str(h))
    monkeypatch.delenv(userdata.ENV_VAR, raising=False)
    tasks.reload()
    yield h
    monkeypatch.undo()
    tasks.reload()


def copy_pkg(dest: Path, *names: str) -> Path:
    """A source folder holding copies of the named standard-library packages."""
    for n in names:
        shutil.copytree(STDLIB / n, dest / n, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def make_tar(path: Path, folder: Path, top: str = "proj-1.0") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname=top)
    return path


def assert_private(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        if p.is_symlink():
            continue
        assert not stat.S_IMODE(p.stat().st_mode) & 0o077, p


# ----- snapshots add -----------------------------------------------------------------------------
def test_add_folder_pins_freezes_indexes_and_keeps_it_private(home, tmp_path):
    src = copy_pkg(tmp_path / "src", "json")
    (src / "broken.py").write_text("def f(:\n")  # does not parse: skipped and counted
    (src / "latin1.py").write_bytes("def f():\n    return '\xe9'\n".encode("latin-1"))
    (src / "link.py").symlink_to(src / "json" / "decoder.py")  # never followed
    pin = snapshots.add_snapshot("j-folder", src)
    assert pin.kind == "folder" and pin.sha256 == pin.tree_sha256
    assert pin.skipped["symlinks"] == 1 and pin.origin == str(home / "user" / "pins.yaml")
    root = snapshots.ensure("j-folder")
    assert not (root / "link.py").exists()
    assert snapshots.verify("j-folder") == []
    assert git.Repo(root).head.commit.hexsha == pin.commit
    defs = indexer.load_index("j-folder")
    assert [d.ident for d in defs] == [
        d.ident for d in indexer.index_tree(src) if d.path != "link.py"
    ]
    assert (
        indexer.unparsable_files(root, defs)
        == indexer.unparsable_files(root)
        == ["broken.py", "latin1.py"]
    )
    # the pin file is the one schema load_pins reads back
    assert snapshots.load_pins()["j-folder"] == pin
    assert_private(home)


def test_fast_staging_freezes_to_the_same_commit_as_gitpython(tmp_path, monkeypatch):
    """The git-command staging path must give gitpython's commit id (built-in pins rely on
    it): raw bytes despite a .gitattributes asking for CRLF conversion, executable bits kept."""
    trees = []
    for i in range(2):
        root = copy_pkg(tmp_path / f"t{i}", "json")
        (root / ".gitattributes").write_text("* text eol=crlf\n*.py filter=nope\n")
        (root / ".gitignore").write_text("*.py\n")
        (root / "crlf.py").write_bytes(b"def f():\r\n    return 1\r\n")
        (root / "run.sh").write_text("#!/bin/sh\n")
        (root / "run.sh").chmod(0o700)
        trees.append(root)
    fast = snapshots._git_freeze(trees[0])
    monkeypatch.setattr(snapshots, "_stage_fast", lambda root, files: False)
    slow = snapshots._git_freeze(trees[1])
    assert fast == slow
    blob = git.Repo(trees[0]).head.commit.tree / "crlf.py"
    assert blob.data_stream.read() == b"def f():\r\n    return 1\r\n"
    assert (git.Repo(trees[0]).head.commit.tree / "run.sh").mode == 0o100755


def test_adding_the_same_source_twice_gives_the_same_pin(home, tmp_path, monkeypatch):
    src = copy_pkg(tmp_path / "src", "json")
    first = snapshots.add_snapshot("j-twice", src)
    again = snapshots.add_snapshot("j-twice", src)
    assert again == first
    # a different cache, a different copy of the same files: the same hash and commit
    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home2"))
    other = snapshots.add_snapshot("j-twice", copy_pkg(tmp_path / "src2", "json"))
    assert (other.sha256, other.commit, other.tree_sha256) == (
        first.sha256,
        first.commit,
        first.tree_sha256,
    )


def test_archives_and_folders_of_the_same_tree_freeze_alike(home, tmp_path):
    src = copy_pkg(tmp_path / "proj", "json")
    folder = snapshots.add_snapshot("j-f", src)
    tgz = make_tar(tmp_path / "proj-1.0.tar.gz", src)
    arch = snapshots.add_snapshot("j-tgz", tgz)
    assert arch.kind == "sdist" and arch.sha256 == sources.sha256_file(tgz)
    assert arch.tree_sha256 == folder.tree_sha256 and arch.commit == folder.commit
    zpath = tmp_path / "proj.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for p in sorted(src.rglob("*")):
            if p.is_file():
                zf.write(p, f"proj/{p.relative_to(src).as_posix()}")
    z = snapshots.add_snapshot("j-zip", zpath)
    assert z.tree_sha256 == folder.tree_sha256 and z.commit == folder.commit
    assert len(indexer.load_index("j-zip")) == len(indexer.load_index("j-f")) > 20


def test_git_revision_is_exported_and_rebuilt_at_that_commit(home, tmp_path):
    repo_dir = copy_pkg(tmp_path / "repo", "json")
    repo = git.Repo.init(repo_dir)
    repo.index.add([str(p.relative_to(repo_dir)) for p in repo_dir.rglob("*.py")])
    actor = git.Actor("t", "t@example.invalid")
    v1 = repo.index.commit("v1", author=actor, committer=actor)
    repo.create_tag("v1")
    (repo_dir / "json" / "extra.py").write_text("def added_later():\n    return 1\n")
    repo.index.add(["json/extra.py"])
    repo.index.commit("v2", author=actor, committer=actor)
    (repo_dir / "json" / "uncommitted.py").write_text("def dirty():\n    pass\n")

    at_v1 = snapshots.add_snapshot("j-git1", repo_dir, rev="v1")
    assert at_v1.kind == "git" and at_v1.source_commit == v1.hexsha and at_v1.rev == "v1"
    idents = {d.ident for d in indexer.load_index("j-git1")}
    assert "json/extra.py::added_later" not in idents
    head = snapshots.add_snapshot("j-git2", repo_dir)
    idents = {d.ident for d in indexer.load_index("j-git2")}
    assert "json/extra.py::added_later" in idents and "json/uncommitted.py::dirty" not in idents
    # the committed tree at v1 is the same tree as a plain copy of those files
    plain = copy_pkg(tmp_path / "plain", "json")
    assert snapshots.add_snapshot("j-plain", plain).tree_sha256 == at_v1.tree_sha256
    assert head.sha256 != at_v1.sha256
    # rebuilt from the recorded commit even after the tag moved
    repo.delete_tag("v1")
    repo.create_tag("v1")  # now at HEAD
    shutil.rmtree(snapshots.snapshot_dir(at_v1))
    assert snapshots.verify("j-git1") and snapshots.build("j-git1")
    assert snapshots.verify("j-git1") == []
    with pytest.raises(sources.SourceError, match="revision 'nope' not found"):
        snapshots.add_snapshot("j-git3", repo_dir, rev="nope")


def test_a_missing_cache_entry_is_rebuilt_from_the_source_or_refused_if_it_changed(home, tmp_path):
    src = copy_pkg(tmp_path / "src", "json")
    pin = snapshots.add_snapshot("j-re", src)
    shutil.rmtree(snapshots.snapshot_dir(pin))
    assert snapshots.ensure("j-re") == snapshots.snapshot_dir(pin)
    assert snapshots.verify("j-re") == []
    shutil.rmtree(snapshots.snapshot_dir(pin))
    (src / "json" / "tool.py").write_text("# changed\n")
    with pytest.raises(snapshots.SnapshotError, match="the source changed"):
        snapshots.ensure("j-re")
    assert not snapshots.snapshot_dir(pin).exists()


def test_synth_pins_are_rebuilt_by_their_registered_generator(home, tmp_path):
    def gen(dest: Path, *, seed: int, defs: int) -> dict:
        dest.mkdir(parents=True)
        body = "".join(f"def f{seed}_{i}(x):\n    return x + {i}\n\n" for i in range(defs))
        (dest / "gen.py").write_text(body)
        return {"defs": defs}

    snapshots.register_generator("test-gen", gen)
    params = {"seed": 3, "defs": 20}
    gen(tmp_path / "g", **params)
    pin = snapshots.add_snapshot(
        "j-synth", tmp_path / "g", kind="synth", generator_name="test-gen", params=params
    )
    assert (pin.kind, pin.generator, pin.params) == ("synth", "test-gen", params)
    entry = yaml.safe_load((home / "user" / "pins.yaml").read_text())["snapshots"]["j-synth"]
    assert entry["generator"] == "test-gen" and entry["params"] == params
    shutil.rmtree(tmp_path / "g")  # the folder is gone: rebuilding regenerates
    shutil.rmtree(snapshots.snapshot_dir(pin))
    snapshots.ensure("j-synth")
    assert snapshots.verify("j-synth") == []
    assert len(indexer.load_index("j-synth")) == 20
    with pytest.raises(snapshots.SnapshotError, match="unknown snapshot generator"):
        snapshots.add_snapshot("j-synth2", tmp_path, kind="synth", generator_name="nope", params={})


def test_name_collisions_are_errors(home, tmp_path):
    src = copy_pkg(tmp_path / "src", "json")
    with pytest.raises(snapshots.SnapshotError, match="built-in snapshot"):
        snapshots.add_snapshot("requests", src)
    with pytest.raises(snapshots.SnapshotError, match="not allowed"):
        snapshots.add_snapshot("../x", src)
    snapshots.add_snapshot("j-coll", src)
    other = copy_pkg(tmp_path / "other", "email")
    with pytest.raises(snapshots.SnapshotError, match="already pinned .* to other content"):
        snapshots.add_snapshot("j-coll", other)
    replaced = snapshots.add_snapshot("j-coll", other, replace=True)
    assert snapshots.get_pin("j-coll") == replaced
    # the same name in a second user folder: loading is an error naming both files
    team = tmp_path / "team"
    team.mkdir()
    (team / "pins.yaml").write_text(
        yaml.safe_dump({"schema_version": 1, "snapshots": {"j-coll": replaced.to_entry()}})
    )
    os.environ[userdata.ENV_VAR] = str(team)
    try:
        with pytest.raises(userdata.UserDataError, match="already defined in"):
            snapshots.load_pins()
    finally:
        del os.environ[userdata.ENV_VAR]


# ----- unsafe archives ---------------------------------------------------------------------------
def tar_with(path: Path, members: list[tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for m in members:
            data = b"def f():\n    return 1\n" if m.isfile() else None
            if data is not None:
                m.size = len(data)
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    "bad, needle",
    [
        (member("/etc/evil.py"), "absolute path"),
        (member("pkg/../../evil.py"), "'..'"),
        (member("pkg/link.py", tarfile.SYMTYPE, "/etc/passwd"), "symbolic link"),
        (member("pkg/hard.py", tarfile.LNKTYPE, "pkg/ok.py"), "hard link"),
        (member("pkg/dev", tarfile.CHRTYPE), "device"),
    ],
)
def test_unsafe_archive_members_are_refused_and_nothing_is_pinned(home, tmp_path, bad, needle):
    archive = tar_with(tmp_path / "evil.tar.gz", [member("pkg/ok.py"), bad])
    with pytest.raises(sources.UnsafeArchiveError, match=needle) as err:
        snapshots.add_snapshot("j-evil", archive)
    assert "nothing was kept" in str(err.value)
    assert "j-evil" not in snapshots.load_pins()
    assert not list((home / "snapshots").glob("j-evil*"))
    assert not list((home / "snapshots").glob(".add-*"))  # the temporary folder is gone


def test_zip_symlinks_and_escapes_are_refused(tmp_path):
    zpath = tmp_path / "evil.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("pkg/ok.py", "x = 1\n")
        info = zipfile.ZipInfo("pkg/link.py")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(sources.UnsafeArchiveError, match="symbolic link"):
        sources.safe_extract(zpath, tmp_path / "out")
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("../up.py", "x = 1\n")
    with pytest.raises(sources.UnsafeArchiveError, match="'..'"):
        sources.safe_extract(zpath, tmp_path / "out2")
    assert not (tmp_path / "up.py").exists()


PARTS = st.sampled_from(["..", ".", "", "pkg", "a.py", "sub", "..x", "x..", "\\", "C:"])


@given(
    st.lists(st.lists(PARTS, min_size=1, max_size=5).map("/".join), min_size=1, max_size=4),
    st.booleans(),
)
def test_any_member_name_is_either_refused_or_extracted_inside(tmp_path_factory, names, absolute):
    """Hypothesis: whatever the member names, nothing lands outside the target folder."""
    base = tmp_path_factory.mktemp("arch")
    target = base / "box" / "dest"
    target.mkdir(parents=True)
    names = [("/" + n) if absolute else n for n in names]
    members = []
    for n in names:
        m = member(n)
        members.append(m)
    archive = base / "a.tar.gz"
    try:
        tar_with(archive, members)
    except (ValueError, OSError):
        return  # tarfile itself cannot write this name
    unsafe = [n for n in names if sources.member_problem(n)]
    with tarfile.open(archive) as t:
        stored = [m.name for m in t.getmembers()]
    try:
        sources.safe_extract(archive, target)
    except sources.UnsafeArchiveError as e:
        # an unsafe name, or a clash (a file where a folder is, a name given twice)
        assert (
            any(sources.member_problem(n) for n in stored)
            or "folder" in str(e)
            or "twice" in str(e)
            or "names no file" in str(e)
        ), e
        assert list(target.iterdir()) == []  # whatever was written is gone again
    except sources.SourceError:
        assert list(target.iterdir()) == []
    else:
        assert not any(sources.member_problem(n) for n in stored), unsafe
    outside = [
        p
        for p in base.rglob("*")
        if p != archive and target not in (p, *p.parents) and p not in (base / "box", target)
    ]
    assert outside == []


# ----- tasks new ---------------------------------------------------------------------------------
@pytest.fixture
def email_snapshot(home, tmp_path) -> str:
    snapshots.add_snapshot("em", copy_pkg(tmp_path / "src", "email"))
    return "em"


def test_tasks_new_end_to_end(email_snapshot, home):
    made = new_task("em", "docstring", [10, 25, 50])
    assert made.name == "em-docstring" and made.valid_count > 100
    facts = indexer.load_facts("em")
    valid = {f.ident for f in facts if f.docstring}
    entry = yaml.safe_load(Path(made.path).read_text())["instances"]["em-docstring"]
    assert entry["valid_count"] == len(valid)
    assert entry["valid_sha256"] == verifier.digest(valid)
    assert entry["targets"] == [10, 25, 50]
    cal = entry["calibration"]
    assert cal["policy"] == "diligent" and cal["headroom_min"] == calibration.HEADROOM
    for r in made.rows:
        assert r.budget == round(10 + 1.5 * r.target) and r.headroom >= calibration.HEADROOM
        assert cal["per_target"][r.target]["steps"] == r.steps
    # registered like a built-in: make, Gymnasium id, the user suite
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    env = pushbench.make("RepoScan-em-docstring-N25")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()
    genv = gym.make("PushBench/RepoScan-em-docstring-N10-v0")
    obs, _ = genv.reset(seed=0)
    assert "em repository snapshot" in json.loads(obs)["result"]["objective"]
    genv.close()
    assert tasks.get_task("RepoScan-user-N50").instances == ("em-docstring",)
    # calibration is deterministic: the same numbers from the written task
    again = calibration.calibrate(made.task_ids)
    assert [(r.steps, r.floor_valid) for r in again] == [
        (r.steps, r.floor_valid) for r in made.rows
    ]
    # a second task with the same id is refused before anything runs
    with pytest.raises(TaskCreationError, match="already defined"):
        new_task("em", "returns", [10], name="em-docstring")


def test_a_mismatched_pinned_valid_set_is_an_error(email_snapshot, home):
    made = new_task("em", "returns", [10], name="em-ret")
    path = Path(made.path)
    raw = yaml.safe_load(path.read_text())
    raw["instances"]["em-ret"]["valid_sha256"] = "0" * 64
    path.write_text(yaml.safe_dump(raw))
    tasks.reload()
    from pushbench.families.reposcan import env as reposcan_env

    reposcan_env._valid_set.cache_clear()
    env = pushbench.make("RepoScan-em-ret-N10")
    with pytest.raises(RepoScanIntegrityError, match="does not match the manifest"):
        env.reset(seed=0)


def test_refusals_say_why(email_snapshot, home):
    with pytest.raises(TaskCreationError, match=r"bad predicate 'docstrnig'"):
        new_task("em", "docstrnig")
    with pytest.raises(TaskCreationError, match="a task needs at least 16"):
        new_task("em", "fixture:app")  # no test functions in email
    facts = indexer.load_facts("em")
    n_valid = len({f.ident for f in facts if f.docstring})
    big = int(n_valid / calibration.HEADROOM) + 1
    with pytest.raises(
        TaskCreationError,
        match=f"largest target it supports is {int(n_valid // calibration.HEADROOM)}",
    ):
        new_task("em", "docstring", [10, big])
    with pytest.raises(TaskCreationError, match="already defined in the built-in"):
        new_task("em", "docstring", name="requests-docstring")
    with pytest.raises(snapshots.SnapshotError, match="unknown snapshot"):
        new_task("nope", "docstring")
    # compound, negated and newer-atom predicates are read exactly, but still refused when
    # the valid set cannot support the target
    with pytest.raises(TaskCreationError, match="a task needs at least 16"):
        new_task("em", "yields and decorator:nonexistent_decorator", [10])
    assert not (home / "user" / "reposcan.yaml").exists()  # nothing was written


@pytest.mark.parametrize(
    "spec", ["docstring and not method", "not raises", "(returns or yields) and param:self"]
)
def test_tasks_new_calibrates_any_predicate(email_snapshot, home, spec):
    made = new_task("em", spec, [10, 25])
    facts = indexer.load_facts("em")
    test = parse_predicate(spec).test
    valid = {f.ident for f in facts if test(f)}
    entry = yaml.safe_load(Path(made.path).read_text())["instances"][made.name]
    assert entry["predicate"] == spec and entry["valid_count"] == len(valid)
    assert entry["valid_sha256"] == verifier.digest(valid)
    for r in made.rows:  # the diligent agent pursued exactly this predicate and reached targets
        assert r.success and r.headroom >= calibration.HEADROOM
    env = pushbench.make(made.task_ids[0])
    obs, _ = env.reset(seed=0)
    objective = json.loads(obs)["result"]["objective"]
    env.close()
    canonical = parse_predicate(spec).canonical
    assert f"(predicate: `{canonical}`)" in objective
    assert property_from_objective(objective) == canonical


def test_instance_defined_in_two_user_files_is_an_error(
    email_snapshot, home, tmp_path, monkeypatch
):
    made = new_task("em", "docstring", [10], name="em-dup")
    team = tmp_path / "team"
    team.mkdir()
    shutil.copy(made.path, team / "reposcan.yaml")
    monkeypatch.setenv(userdata.ENV_VAR, str(team))
    tasks.reload()
    with pytest.raises(userdata.UserDataError, match="already defined in"):
        tasks.all_tasks()
    assert tasks.builtin_tasks()  # the built-ins still load on their own


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pushbench.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_team_folder_to_pushbench_run_in_a_process_pool(tmp_path):
    """docs/own_repositories.md's path: a folder, a task in a team folder, run with 2 workers."""
    env = {**os.environ, "PUSHBENCH_HOME": str(tmp_path / "home")}
    env.pop(userdata.ENV_VAR, None)
    src = copy_pkg(tmp_path / "code", "email")
    team = tmp_path / "team"
    r = cli("snapshots", "add", "jsonlib", "--from", str(src), "--tasks-dir", str(team), env=env)
    assert r.returncode == 0, r.stderr
    assert "definitions" in r.stderr and (team / "pins.yaml").is_file()
    r = cli(
        "tasks",
        "new",
        "--snapshot",
        "jsonlib",
        "--predicate",
        "returns",
        "--targets",
        "10",
        "--tasks-dir",
        str(team),
        env=env,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    assert "exhaustive" in r.stdout and "RepoScan-jsonlib-returns-N10" in r.stdout
    r = cli(
        "tasks",
        "new",
        "--snapshot",
        "jsonlib",
        "--predicate",
        "not a predicate(",
        "--tasks-dir",
        str(team),
        env=env,
    )
    assert r.returncode == 2 and r.stderr.strip().startswith("error:")
    # one error line, then the predicate with a caret under the column it names
    err = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and len(err) == 3 and "at column 5" in err[0]
    assert err[1].strip() == "not a predicate(" and err[2].strip() == "^"
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "name": "own",
                "tasks": ["RepoScan-jsonlib-returns-N10"],
                "controllers": ["standard"],
                "policies": ["diligent", "exhaustive"],
                "seeds": [0, 1],
                "workers": 2,
                "executor": "process",
            }
        )
    )
    # without the team folder the task is unknown ...
    r = cli("run", str(exp), "--out", str(tmp_path / "run0"), "--no-plot", env=env)
    assert r.returncode == 2 and "RepoScan-jsonlib-returns-N10" in r.stderr
    # ... with it (option or variable) the pool's workers see it too
    r = cli(
        "run",
        str(exp),
        "--out",
        str(tmp_path / "run"),
        "--no-plot",
        "--tasks-dir",
        str(team),
        env=env,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert {x["task_id"] for x in lines} == {"RepoScan-jsonlib-returns-N10"}
    assert any(x["success"] for x in lines)
    r = cli("tasks", "RepoScan-user", env={**env, userdata.ENV_VAR: str(team)})
    assert r.returncode == 0 and "RepoScan-user-N10" in r.stdout


# ----- the built-ins are untouched ---------------------------------------------------------------
def test_builtin_instances_keep_their_pinned_sets_and_support_their_targets():
    from pushbench.families.reposcan.predicates import parse_predicate

    m = tasks.manifests()["reposcan"]
    assert len(m.instances) == 9
    for name, cfg in m.instances.items():
        pred = parse_predicate(cfg["predicate"])
        valid = {f.ident for f in indexer.load_facts(cfg["snapshot"]) if pred.test(f)}
        assert (len(valid), verifier.digest(valid)) == (cfg["valid_count"], cfg["valid_sha256"])
        # the support rule user tasks must meet holds for every built-in target
        assert calibration.support_problems(cfg["valid_count"], m.targets) == [], name
    for tid, spec in tasks.builtin_tasks().items():
        assert tasks.all_tasks()[tid] == spec


def test_snapshots_synth_pins_a_generated_repo_that_rebuilds_and_takes_tasks(home):
    """``pushbench snapshots synth``: generated, pinned as kind synth with its generator params
    (no dead source path), rebuilt byte-identically by regenerating, and usable by tasks new."""
    from typer.testing import CliRunner

    from pushbench.cli import app
    from pushbench.families.reposcan import synth

    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "snapshots",
            "synth",
            "syn-a",
            "--seed",
            "11",
            "--defs",
            "160",
            "--modules",
            "4",
            "--density",
            "docstring=0.25",
        ],
    )
    assert res.exit_code == 0, res.output
    pin = snapshots.load_pins()["syn-a"]
    assert (pin.kind, pin.generator, pin.source) == ("synth", "reposcan-synth", None)
    assert pin.params["seed"] == 11 and pin.params["defs"] == 160
    assert pin.params["density"]["docstring"] == 0.25
    facts = indexer.load_facts("syn-a")
    assert len(facts) == 160 and sum(f.docstring for f in facts) == 40  # exact: 0.25 * 160
    # the same files as the generator writes directly
    files, _ = synth.render(seed=11, modules=4, defs=160, density={"docstring": 0.25})
    root = snapshots.snapshot_dir(pin)
    built = {
        p.relative_to(root).as_posix(): p.read_text()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }
    assert {k: v for k, v in built.items() if k in files} == dict(files)
    # rebuilt from nothing but the pin: same commit
    shutil.rmtree(snapshots.snapshot_dir(pin))
    assert runner.invoke(app, ["snapshots", "build", "syn-a"]).exit_code == 0
    assert git.Repo(snapshots.snapshot_dir(pin)).head.commit.hexsha == pin.commit
    made = new_task("syn-a", "docstring", [10])
    assert made.valid_count == 40
    # bad densities are refused with the atom named, nothing pinned
    bad = runner.invoke(
        app, ["snapshots", "synth", "syn-b", "--seed", "1", "--density", "docstrings=0.3"]
    )
    assert bad.exit_code == 2 and "docstrings" in bad.output
    assert "syn-b" not in snapshots.load_pins()
