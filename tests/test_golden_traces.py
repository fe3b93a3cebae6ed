"""Golden traces: every observation of fixed episodes pinned per family version (issue 27).

The goldens live in tests/golden/<family>-v<version>/ (:mod:`pushbench.runner.golden`). A
change to what an agent sees fails here with a message that says to bump the family's version;
the writer (experiments/golden_traces.py) refuses to overwrite the goldens of an existing
version. SWE-lite's episodes run the units' tests (about 90 s): that case is slow.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from pushbench import tasks
from pushbench.runner import golden

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "family",
    ["reposcan", "dataops", "dataops_public", pytest.param("swelite", marks=pytest.mark.slow)],
)
def test_observations_match_the_goldens_of_the_current_version(family):
    problem = golden.compare(family)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


def test_every_family_has_a_plan_and_goldens_for_its_current_version():
    assert set(golden.PLANS) == set(tasks.FAMILY_VERSIONS)
    for family in golden.PLANS:
        folder = golden.golden_dir(family)
        assert folder.is_dir(), f"no goldens at {folder}: run `{golden.WRITER}`"
        names = sorted(p.name for p in folder.iterdir())
        assert names == sorted(
            ["tools.json"] + [f"{e.name}.txt" for e in golden.episodes(family)]
        ), family
        # two policies x standard and the full controller x two seeds
        assert len(golden.episodes(family)) == 8


def _copy(tmp_path: Path, family: str) -> Path:
    root = tmp_path / "golden"
    shutil.copytree(golden.golden_dir(family), golden.golden_dir(family, root=root))
    return root


def test_a_one_word_change_fails_naming_family_observation_and_the_bump(tmp_path):
    root = _copy(tmp_path, "dataops")
    ep = golden.episodes("dataops")[0]
    file = golden.golden_dir("dataops", root=root) / f"{ep.name}.txt"
    lines = file.read_text().splitlines()
    assert '"ok":true' in lines[1]
    lines[1] = lines[1].replace('"ok":true', '"ok":false', 1)  # one word of observation 1
    file.write_text("".join(x + "\n" for x in lines))
    msg = golden.compare("dataops", root=root)
    v = tasks.family_version("dataops")
    assert msg is not None
    assert f"golden traces of dataops v{v} differ" in msg
    assert f"episode {ep.name}" in msg and "observation 1 (after action" in msg
    assert '"ok":false' in msg.split("current:")[0] and '"ok":true' in msg.split("current:")[1]
    assert f"bump FAMILY_VERSIONS['dataops'] in pushbench/tasks.py ({v} -> {v + 1})" in msg
    assert golden.WRITER in msg


def test_changed_tool_schemas_fail_too(tmp_path):
    root = _copy(tmp_path, "reposcan")
    tools = golden.golden_dir("reposcan", root=root) / "tools.json"
    tools.write_text(tools.read_text().replace('"search"', '"find"', 1))
    msg = golden.compare("reposcan", root=root)
    assert msg is not None and "tool schemas (tools.json) differ" in msg
    assert "bump FAMILY_VERSIONS['reposcan']" in msg


def test_a_bumped_version_without_goldens_fails_with_the_writer_command(tmp_path, monkeypatch):
    monkeypatch.setitem(tasks.FAMILY_VERSIONS, "swelite", tasks.FAMILY_VERSIONS["swelite"] + 1)
    v = tasks.family_version("swelite")
    msg = golden.compare("swelite")  # the real folder: the bumped version has none
    assert msg is not None and f"no golden traces of swelite v{v}" in msg
    assert f"swelite-v{v}" in msg and golden.WRITER in msg


def test_the_writer_refuses_an_existing_version(tmp_path):
    root = _copy(tmp_path, "reposcan")
    before = {p.name: p.read_bytes() for p in golden.golden_dir("reposcan", root=root).iterdir()}
    with pytest.raises(golden.GoldenExistsError, match=r"bump FAMILY_VERSIONS\['reposcan'\]"):
        golden.write("reposcan", root=root)
    after = {p.name: p.read_bytes() for p in golden.golden_dir("reposcan", root=root).iterdir()}
    assert after == before


def test_the_script_refuses_to_record_a_change_without_a_bump(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "experiments"))
    try:
        import golden_traces
    finally:
        sys.path.remove(str(ROOT / "experiments"))
    root = _copy(tmp_path, "dataops")
    ep = golden.episodes("dataops")[0]
    file = golden.golden_dir("dataops", root=root) / f"{ep.name}.txt"
    changed = file.read_text().replace('"ok":true', '"ok":false', 1)
    file.write_text(changed)
    assert golden_traces.main(["--write", "--family", "dataops", "--root", str(root)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert file.read_text() == changed  # nothing recorded
    # --force overwrites, with a warning, and the goldens match again
    assert (
        golden_traces.main(["--write", "--force", "--family", "dataops", "--root", str(root)]) == 0
    )
    assert "warning: overwriting" in capsys.readouterr().err
    assert golden.compare("dataops", root=root) is None


def test_a_new_version_is_written_into_its_own_folder(tmp_path, monkeypatch):
    now = golden.golden_dir("dataops")  # the current version's goldens (unchanged behaviour)
    monkeypatch.setitem(tasks.FAMILY_VERSIONS, "dataops", tasks.FAMILY_VERSIONS["dataops"] + 1)
    out = golden.write("dataops", root=tmp_path)
    assert out == tmp_path / f"dataops-v{tasks.family_version('dataops')}"
    assert golden.compare("dataops", root=tmp_path) is None
    # the same behaviour records the same bytes: writing is deterministic
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        p.name: p.read_bytes() for p in now.iterdir()
    }
