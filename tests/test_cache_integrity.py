"""No answer key at rest (issue 11, section 1): nothing in the cache lets a filter rebuild a
valid set, and the cache is private to its user.

The cache is built from scratch in a temporary ``PUSHBENCH_HOME``: the three snapshots are
copied from the shared cache (no network; the copies keep world-readable modes, as a cache
built by an older version has), then every RepoScan instance is made and reset, which builds
the search index, computes the predicate facts (in memory) and checks every valid set against
its pinned sha256. Then every file under the home is parsed (gzip, JSON, JSON lines, YAML) and
every record with an identifier is grouped by each of its fields: truthiness (every boolean,
number, string, list, null), equality for low-cardinality values, membership of every list
element; each group, alone and restricted to test functions (as the ``fixture:X`` predicates
are), must not have the sha256 of any of the nine valid sets.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import stat
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

import pushbench
from pushbench import paths
from pushbench.families.reposcan import indexer, verifier
from pushbench.tasks import manifests

IDENT = re.compile(r"^[^\s:]+\.py::[A-Za-z_][A-Za-z0-9_.]*$")
DISPLAY_FIELDS = {"ident", "path", "qualname", "name", "kind", "line", "signature", "snippet"}
LOW_CARDINALITY = 64


# ----- turning any file into records ------------------------------------------------------------
def _decode(raw: bytes, name: str):
    """Every JSON/YAML document a file holds (after gunzip), or nothing."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError:
            return []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return []
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    docs = []
    for line in text.splitlines():  # JSON lines
        try:
            docs.append(json.loads(line))
        except ValueError:
            docs = []
            break
    if docs:
        return docs
    if name.endswith((".yaml", ".yml")):
        try:
            return [d for d in yaml.safe_load_all(text)]
        except yaml.YAMLError:
            return []
    return []


def _ident_of(rec: dict) -> str | None:
    for v in rec.values():
        if isinstance(v, str) and IDENT.match(v):
            return v
    for a, b in (("path", "qualname"), ("file", "function")):
        if isinstance(rec.get(a), str) and isinstance(rec.get(b), str):
            return f"{rec[a]}::{rec[b]}"
    return None


def _records(doc):
    """Every dict in ``doc`` (at any depth) that names a definition."""
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            ident = _ident_of(x)
            if ident:
                yield ident, x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def _flat(rec: dict, prefix: str = ""):
    for k, v in rec.items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def candidate_sets(records: list[tuple[str, dict]]) -> dict[str, set[str]]:
    """Identifier sets any single-field filter over ``records`` can produce."""
    groups: dict[str, set[str]] = defaultdict(set)
    values: dict[str, set] = defaultdict(set)
    for ident, rec in records:
        for key, v in _flat(rec):
            groups[f"{key} truthy={bool(v)}"].add(ident)
            if isinstance(v, list):
                for item in v:
                    if isinstance(item, (str, int, float, bool)) or item is None:
                        groups[f"{key} contains {item!r}"].add(ident)
            elif isinstance(v, (str, int, float, bool)) or v is None:
                values[key].add(v)
    for ident, rec in records:
        for key, v in _flat(rec):
            if key in values and len(values[key]) <= LOW_CARDINALITY:
                groups[f"{key} == {v!r}"].add(ident)
    tests = {i for i, _ in records if i.rsplit(".", 1)[-1].split("::")[-1].startswith("test")}
    for name, ids in list(groups.items()):
        groups[f"{name} and a test function"] = ids & tests
    return groups


def leaks(home: Path, pinned: dict[str, tuple[int, str]]) -> tuple[list[str], int, int]:
    """``(leaks found, files parsed, records seen)`` for every file under ``home``."""
    sizes = {n for n, _ in pinned.values()}
    digests = {d: inst for inst, (_, d) in pinned.items()}
    found, n_files, n_records = [], 0, 0
    for p in sorted(home.rglob("*")):
        if not p.is_file() or p.is_symlink() or ".git" in p.parts:
            continue  # git objects are the snapshot's source, zlib-compressed
        records = [r for doc in _decode(p.read_bytes(), p.name) for r in _records(doc)]
        n_files += 1
        if not records:
            continue
        n_records += len(records)
        for name, ids in candidate_sets(records).items():
            if len(ids) in sizes and verifier.digest(ids) in digests:
                found.append(
                    f"{p.relative_to(home)}: filter '{name}' gives the valid set of "
                    f"{digests[verifier.digest(ids)]}"
                )
    return found, n_files, n_records


# ----- the temporary home ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def temp_home(tmp_path_factory, snapshot_roots):
    """A PUSHBENCH_HOME built from scratch (snapshots copied world-readable, then used)."""
    from pushbench.families.reposcan import env as reposcan

    home = tmp_path_factory.mktemp("integrity") / "home"
    (home / "snapshots").mkdir(parents=True)
    for root in snapshot_roots.values():
        shutil.copytree(root, home / "snapshots" / root.name, symlinks=True)
    for p in [home, *home.rglob("*")]:  # as an older version built it: world-readable
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() or p.stat().st_mode & 0o100 else 0o644)
    saved = os.environ.get("PUSHBENCH_HOME")
    os.environ["PUSHBENCH_HOME"] = str(home)
    memos = (dict(indexer._MEMO), dict(indexer._FACTS))

    def forget():
        indexer._MEMO.clear()
        indexer._FACTS.clear()
        reposcan._search_index.cache_clear()
        reposcan._valid_set.cache_clear()

    forget()
    try:
        for inst in manifests()["reposcan"].instances:  # index, facts, pinned-digest check
            env = pushbench.make(f"RepoScan-{inst}-N10")
            env.reset(seed=0)
            env.step({"tool": "search", "query": "test", "page": 1})
            env.close()
        yield home
    finally:
        if saved is None:
            os.environ.pop("PUSHBENCH_HOME", None)
        else:
            os.environ["PUSHBENCH_HOME"] = saved
        forget()
        indexer._MEMO.update(memos[0])
        indexer._FACTS.update(memos[1])


def pinned_sets() -> dict[str, tuple[int, str]]:
    return {
        inst: (cfg["valid_count"], cfg["valid_sha256"])
        for inst, cfg in manifests()["reposcan"].instances.items()
    }


def test_no_file_in_the_cache_lets_a_filter_rebuild_a_valid_set(temp_home):
    index_files = sorted((temp_home / "index").glob("*.json.gz"))
    assert len(index_files) == 3 and all(
        f"-v{indexer.INDEX_VERSION}." in f.name for f in index_files
    )
    for f in index_files:  # the cache holds display fields only
        rows = json.loads(gzip.decompress(f.read_bytes()))
        assert rows and all(set(r) == DISPLAY_FIELDS for r in rows), f
    found, n_files, n_records = leaks(temp_home, pinned_sets())
    assert n_records >= 599 + 826 + 4965  # the walk did read every index record
    assert n_files > 100
    assert found == []


def test_the_filter_search_finds_a_planted_fact():
    """The detector is not blind: one predicate fact per record is enough for it."""
    from pushbench.families.reposcan.env import _valid_set

    inst = "requests-docstring"
    valid = _valid_set(inst)
    facts = indexer.load_facts("requests")
    planted = [(f.ident, {"ident": f.ident, "doc": f.docstring}) for f in facts]
    sets = candidate_sets(planted)
    assert any(verifier.digest(ids) == pinned_sets()[inst][1] for ids in sets.values())
    # fixture predicates: parameter names as a list, restricted to test functions
    flask = [
        (f.ident, {"ident": f.ident, "params": list(f.params)}) for f in indexer.load_facts("flask")
    ]
    sets = candidate_sets(flask)
    assert sets["params contains 'app' and a test function"] == set(_valid_set("flask-fixture-app"))
    assert len(valid) == pinned_sets()[inst][0]


def test_the_cache_is_private_to_its_user(temp_home):
    loose = [
        str(p.relative_to(temp_home))
        for p in [temp_home, *temp_home.rglob("*")]
        if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077
    ]
    assert loose == []  # the world-readable copies were tightened on first use
    assert stat.S_IMODE(temp_home.stat().st_mode) == 0o700
    for p in (temp_home / "index").iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    assert (temp_home / ".private-v1").is_file()


def test_stale_index_versions_are_removed_and_never_read(temp_home, monkeypatch):
    stale = temp_home / "index" / "requests-55365417734eb182-v4.json.gz"
    stale.write_bytes(gzip.compress(json.dumps([{"ident": "x.py::f", "docstring": True}]).encode()))
    current = next((temp_home / "index").glob(f"requests-*-v{indexer.INDEX_VERSION}.json.gz"))
    current.unlink()
    monkeypatch.setenv("PUSHBENCH_HOME", str(temp_home))
    monkeypatch.setattr(indexer, "_MEMO", {})
    defs = indexer.load_index("requests")  # rebuilds the current version ...
    assert len(defs) == 599 and current.is_file()
    assert not stale.exists()  # ... and deletes the earlier one


def test_new_cache_entries_are_created_private(tmp_path, monkeypatch):
    home = tmp_path / "fresh"
    monkeypatch.setenv("PUSHBENCH_HOME", str(home))
    assert paths.home() == home and stat.S_IMODE(home.stat().st_mode) == 0o700
    sub = paths.private_dir(home / "a" / "b")
    assert stat.S_IMODE(sub.stat().st_mode) == 0o700
    paths.write_private(sub / "f.json", b"{}")
    assert stat.S_IMODE((sub / "f.json").stat().st_mode) == 0o600
    fd = paths.open_private(sub / "g.log")
    os.close(fd)
    assert stat.S_IMODE((sub / "g.log").stat().st_mode) == 0o600
    (sub / "old.txt").write_text("x")
    (sub / "old.txt").chmod(0o644)
    os.close(paths.open_private(sub / "old.txt"))  # an existing file of ours is tightened
    assert stat.S_IMODE((sub / "old.txt").stat().st_mode) == 0o600
    assert paths.exposure(sub) is None
    sub.chmod(0o755)
    assert "readable by other users" in paths.exposure(sub)


def _loose(root: Path) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in [root, *root.rglob("*")]
        if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077
    ]


def test_runner_run_folders_are_private_and_tightened_on_resume(tmp_path):
    from pushbench.runner.executors import local as ex
    from pushbench.runner.experiment import validate
    from pushbench.runner.sweep import run_experiment

    exp = validate(
        {
            "schema_version": 1,
            "name": "privacy",
            "seeds": [0, 1],
            "tasks": ["RepoScan-requests-docstring-N10"],
            "controllers": ["standard"],
            "policies": ["random"],
        }
    )
    out = tmp_path / "runs" / "privacy"
    run_experiment(exp, out, executor=ex.InProcessExecutor(), progress=False, limit=1)
    names = {p.name for p in out.rglob("*")}
    assert {"episodes.jsonl", "errors.jsonl", "manifest.json", ".lock", "traces"} <= names
    assert len(list((out / "traces").glob("*.json.gz"))) == 1
    assert _loose(out) == []
    for p in [out, *out.rglob("*")]:  # exact modes: 0700 folders, 0600 files
        assert stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600), p
    # a folder written world-readable (an older version) is tightened when the run resumes
    for p in [out, out / "traces", *out.glob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    run_experiment(exp, out, executor=ex.InProcessExecutor(), progress=False)
    assert len(list((out / "traces").glob("*.json.gz"))) == 2
    assert _loose(out) == []
