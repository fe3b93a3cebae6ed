"""Snapshot pins, builds and their errors (issue 2, section 2)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from pushbench import snapshots
from pushbench.families.reposcan import indexer
from pushbench.snapshots import SnapshotError


@pytest.fixture
def temp_home(tmp_path, monkeypatch) -> Path:
    """An empty PUSHBENCH_HOME, no sdist folder, and pip unable to reach any index."""
    home = tmp_path / "home"
    monkeypatch.setenv("PUSHBENCH_HOME", str(home))
    monkeypatch.delenv("PUSHBENCH_SDIST_DIR", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline pip: fails fast, no network
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # ignore configured find-links folders
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setattr(indexer, "_MEMO", {})  # forget in-process indexes of the real cache
    return home


def fake_sdist(folder: Path, pin) -> Path:
    """A well-formed tar.gz with the pinned file name but the wrong content (so wrong hash)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / pin.sdist_name
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (
            (f"{pin.package}-{pin.version}/pyproject.toml", b"[project]\n"),
            (f"{pin.package}-{pin.version}/src/evil.py", b"def f(): pass\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def assert_nothing_used(home: Path, name: str) -> None:
    pin = snapshots.get_pin(name)
    assert not snapshots.snapshot_dir(pin).exists()
    assert snapshots.info(name) is None
    leftovers = list((home / "snapshots").iterdir()) if (home / "snapshots").exists() else []
    assert leftovers == []  # the temporary build folder is gone too
    assert not list(home.glob("index/*"))


def test_pins_match_the_issue():
    pins = snapshots.builtin_pins()
    assert {n: (p.package, p.version, p.sha256) for n, p in pins.items()} == {
        "requests": (
            "requests",
            "2.32.3",
            "55365417734eb18255590a9ff9eb97e9e1da868d4ccd6402399eaf68af20a760",
        ),
        "flask": (
            "flask",
            "3.0.3",
            "ceb27b0af3823ea2737928a4d99d125a06175b8512c445cbd9a9ce200ef76842",
        ),
        "pytest": (
            "pytest",
            "8.3.3",
            "70b98107bd648308a7952b06e6ca9a50bc660be218d53c257cc1fc94fda10181",
        ),
    }
    assert all(p.commit and len(p.commit) == 40 for p in pins.values())
    with pytest.raises(SnapshotError, match="unknown snapshot"):
        snapshots.get_pin("django")


@pytest.mark.parametrize("via", ["file", "folder", "env"])
def test_sha256_mismatch_is_an_error_and_nothing_is_used(temp_home, tmp_path, monkeypatch, via):
    pin = snapshots.get_pin("flask")
    bad = fake_sdist(tmp_path / "sdists", pin)
    source = {"file": bad, "folder": bad.parent, "env": None}[via]
    if via == "env":
        monkeypatch.setenv("PUSHBENCH_SDIST_DIR", str(bad.parent))
    with pytest.raises(SnapshotError) as err:
        snapshots.build("flask", source=source)
    msg = str(err.value)
    assert "sha256 mismatch" in msg and pin.sha256 in msg and snapshots.sha256_file(bad) in msg
    assert "not used" in msg
    assert_nothing_used(temp_home, "flask")
    assert bad.is_file()  # the user's file is left alone


def test_missing_local_sdist_says_where_it_looked(temp_home, tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(SnapshotError) as err:
        snapshots.build("requests", source=missing)
    assert "requests-2.32.3.tar.gz" in str(err.value) and str(missing) in str(err.value)
    assert_nothing_used(temp_home, "requests")


def test_offline_and_uncached_says_so_and_how_to_supply_the_sdist(temp_home):
    with pytest.raises(SnapshotError) as err:
        snapshots.build("requests")
    msg = str(err.value)
    assert "not cached" in msg and "offline" in msg
    assert "requests-2.32.3.tar.gz" in msg and snapshots.get_pin("requests").sha256 in msg
    assert "--from" in msg and "PUSHBENCH_SDIST_DIR" in msg
    assert_nothing_used(temp_home, "requests")


def test_first_use_offline_gives_the_same_actionable_error(temp_home, capsys):
    # load_index -> ensure -> build: lazy first use prints progress, then fails clearly.
    with pytest.raises(SnapshotError, match="PUSHBENCH_SDIST_DIR"):
        indexer.load_index("flask")
    assert "flask" in capsys.readouterr().err
    assert_nothing_used(temp_home, "flask")


def _local_sdist(pin, tmp_path: Path) -> Path:
    """The pinned sdist from a local folder if one is known, else downloaded with pip."""
    for folder in (os.environ.get("PUSHBENCH_SDIST_DIR"), "/tmp/sd"):
        if folder and (Path(folder) / pin.sdist_name).is_file():
            return Path(folder) / pin.sdist_name
    try:
        return snapshots._download(pin, tmp_path / "download")
    except SnapshotError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no local {pin.sdist_name} and no network: {e}")


def test_build_from_local_sdist_gives_the_pinned_commit(tmp_path, monkeypatch):
    pin = snapshots.get_pin("flask")
    sdist = _local_sdist(pin, tmp_path)  # before switching home: may use the network
    home = tmp_path / "home"
    monkeypatch.setenv("PUSHBENCH_HOME", str(home))
    monkeypatch.delenv("PUSHBENCH_SDIST_DIR", raising=False)
    monkeypatch.setattr(indexer, "_MEMO", {})
    messages = []
    root = snapshots.build("flask", source=sdist, log=messages.append)
    assert root == home / "snapshots" / "flask-3.0.3" and (root / "pyproject.toml").is_file()
    assert messages  # progress was reported
    meta = snapshots.info("flask")
    assert meta["commit"] == pin.commit and meta["sha256"] == pin.sha256
    assert snapshots.verify("flask") == []
    import git

    repo = git.Repo(root)
    head = repo.head.commit
    assert head.hexsha == pin.commit
    assert head.author.name == head.committer.name == "PushBench"
    assert not repo.is_dirty(untracked_files=True)  # the marker file is excluded
    # building again is a no-op; the index built from it matches the manifest
    assert snapshots.build("flask", source=sdist) == root
    defs = indexer.load_index("flask")
    assert [d.ident for d in defs] == [d.ident for d in indexer.index_tree(root)]
    assert list(home.glob("index/flask-*.json.gz"))
    # private to the user: no group/other bit anywhere (tar, git and the index writer alike)
    import stat

    loose = [
        p
        for p in [home, *home.rglob("*")]
        if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077
    ]
    assert loose == []


def test_verify_reports_tampering(tmp_path, monkeypatch):
    pin = snapshots.get_pin("requests")
    sdist = _local_sdist(pin, tmp_path)
    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))
    root = snapshots.build("requests", source=sdist)
    assert snapshots.verify("requests") == []
    (root / "src" / "requests" / "api.py").write_text("# changed\n")
    problems = snapshots.verify("requests")
    assert len(problems) == 1 and "differs" in problems[0]


def test_verify_not_built(temp_home):
    assert snapshots.verify("pytest") == [
        "pytest: not built (run `pushbench snapshots build pytest`)"
    ]


@pytest.mark.parametrize("name", ["requests", "flask", "pytest"])
def test_verify_built_snapshots(name, snapshot_roots):
    assert snapshots.verify(name) == []
    assert snapshots.info(name)["commit"] == snapshots.get_pin(name).commit
    assert snapshot_roots[name] == snapshots.snapshot_dir(snapshots.get_pin(name))
