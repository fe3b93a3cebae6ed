"""What DataOps-lite reuses across episodes in one process: built backlogs, artifact checks and
the simulated agent's artifact fix (issue 27, the population's cost). Reuse must be invisible:
every episode gets the same files and fresh units, and a memoised result never depends on an
earlier call."""

from __future__ import annotations

import hashlib
import os

import pytest

from pushbench.envs.sandbox import Workspace
from pushbench.families.dataops import artifacts
from pushbench.families.dataops import units as U
from pushbench.policies.dataops import solvers as S
from pushbench.tasks import instance_config, manifests


def _tree(root: str) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _generate(cfg: dict, target: int):
    ws = Workspace.create()
    try:
        return U.generate(cfg, target, ws), _tree(ws.root)
    finally:
        ws.remove()


@pytest.mark.parametrize("instance", sorted(manifests()["dataops"].instances)[:2])
def test_every_episode_gets_the_backlog_a_fresh_build_gives(instance):
    cfg = instance_config("dataops", instance)
    U._BLUEPRINTS.clear()
    fresh_units, fresh_tree = _generate(cfg, 10)  # built now
    assert len(U._BLUEPRINTS) == 1
    # An episode that mutates everything it holds must not reach the next one.
    for u in fresh_units:
        u.files.append("u99/x.csv")
        u.rules[0]["op"] = "changed"
        u.secret.clear()
    units, tree = _generate(cfg, 10)  # from the kept blueprint
    U._BLUEPRINTS.clear()
    again_units, again_tree = _generate(cfg, 10)  # built anew
    assert units == again_units and tree == again_tree == fresh_tree
    assert all(u.secret and u.rules[0].get("op") != "changed" for u in units)
    assert len(tree) == len({f for u in units for f in u.files}) > len(units)
    other, _ = _generate(cfg, 3)  # another target: another backlog
    assert [u.id for u in other] != [u.id for u in units]


def test_the_blueprint_cache_is_bounded(monkeypatch):
    cfg = instance_config("dataops", sorted(manifests()["dataops"].instances)[0])
    monkeypatch.setattr(U, "_MAX_BLUEPRINTS", 2)
    U._BLUEPRINTS.clear()
    for target in (1, 2, 3, 4):
        U.generate(cfg, target, _Discard())
        assert 1 <= len(U._BLUEPRINTS) <= 2
    U._BLUEPRINTS.clear()


class _Discard:
    def setup_write(self, rel: str, text: str) -> None:
        pass


@pytest.fixture(scope="module")
def artifact_units():
    """Every artifact unit of three built-in backlogs at N20, with its files' texts."""
    out = []
    for instance in sorted(manifests()["dataops"].instances)[:3]:
        ws = Workspace.create()
        try:
            units = U.generate(instance_config("dataops", instance), 20, ws)
            out += [
                (u, {f: ws.read_text(f) for f in u.files}) for u in units if u.kind == "artifact"
            ]
        finally:
            ws.remove()
    return out


def test_the_memoised_artifact_check_keys_on_every_argument(artifact_units):
    pairs = artifact_units
    assert {u.secret["format"] for u, _ in pairs} == {"json", "yaml"}
    for unit, files in pairs:
        fmt, kind, valid = unit.secret["format"], unit.secret["kind"], unit.secret["valid"]
        original = files[unit.secret["target"]]
        fixed = artifacts.dump(fmt, unit.secret["fixed_doc"])
        assert artifacts.check(fmt, original, kind, valid)[0] == "records_valid"
        assert artifacts.check(fmt, fixed, kind, valid) is None
        # the same text against other originally valid records: another verdict, not the memo
        assert artifacts.check(fmt, fixed, kind, valid + [{"x": 1}])[0] == "kept_valid"
        assert artifacts.check(fmt, fixed, kind, valid) is None
        other = next(k for k in artifacts.SCHEMAS if k != kind)
        assert artifacts.check(fmt, fixed, other, valid)[0] == "unchanged"
        assert artifacts.check(fmt, fixed + "records: [\n", kind, valid)[0] == "parses"


def test_the_memoised_artifact_fix_is_a_function_of_the_texts(artifact_units):
    for unit, files in artifact_units:
        public = unit.public()
        good = S.artifact_fix(public, files)
        bad = S.artifact_fix(public, files, "drop_good")
        S._fixed_text.cache_clear()
        assert S.artifact_fix(public, files) == good != bad
        assert S.artifact_fix(public, files, "drop_good") == bad
        assert (
            artifacts.check(
                unit.secret["format"], good[1], unit.secret["kind"], unit.secret["valid"]
            )
            is None
        )
