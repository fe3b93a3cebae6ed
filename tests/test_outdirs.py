"""Issue 24, section 4: output folders say what wrote them and are never mixed or overwritten.

Reproduced first on the old code: ``pushbench evaluate RUNS --out <a pushbench run folder>``
replaced that folder's ``episodes.jsonl`` (2 lines became 1), and ``pushbench run --out <an
evaluate folder>`` appended runner lines to black-box lines. Each case runs the real commands
(Typer's CliRunner) on real run folders and black-box sessions, then checks the refusal line,
the exit code, and that every byte of the folder is still there; ``--overwrite`` discards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pushbench import cli
from pushbench.runner import outdir

runner = CliRunner()
TASK = "RepoScan-requests-docstring-N10"


def experiment(tmp_path: Path, name: str = "exp", seeds=(0, 1)) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        json.dumps(
            {
                "name": name,
                "tasks": [TASK],
                "controllers": ["standard"],
                "policies": ["random"],
                "seeds": list(seeds),
            }
        )
    )
    return path


def run(*args) -> object:
    return runner.invoke(cli.app, [str(a) for a in args])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def blackbox_run(tmp_path) -> Path:
    pytest.importorskip("mcp")
    from pushbench.blackbox.session import BlackBoxSession

    with BlackBoxSession(
        TASK, tmp_path / "bb", argv=["test"], controller="standard", agent="fake-agent"
    ) as s:
        s.call("search", {"query": "", "page": 1})
        s.call("final", {"reported_count": 1})
    return tmp_path / "bb"


def _run_folder(tmp_path: Path) -> Path:
    res = run("run", experiment(tmp_path), "--out", tmp_path / "r", "--no-progress", "--no-plot")
    assert res.exit_code == 0, res.output
    return tmp_path / "r"


def test_evaluate_refuses_a_run_folder_and_keeps_every_byte(tmp_path, blackbox_run):
    folder = _run_folder(tmp_path)
    before = snapshot(folder)
    assert len((folder / "episodes.jsonl").read_text().splitlines()) == 2
    res = run("evaluate", blackbox_run, "--out", folder)
    assert res.exit_code == 2, res.output
    assert "written by `pushbench run`" in res.output and "--overwrite" in res.output
    assert "Traceback" not in res.output
    assert snapshot(folder) == before
    res = run("evaluate", blackbox_run, "--out", folder, "--overwrite")
    assert res.exit_code == 0, res.output
    assert len((folder / "episodes.jsonl").read_text().splitlines()) == 1
    assert not (folder / "errors.jsonl").exists()  # the run's files are discarded, not mixed
    assert outdir.read_manifest(folder)["writer"] == "evaluate"


def test_run_refuses_an_evaluate_folder_even_with_force(tmp_path, blackbox_run):
    ev = tmp_path / "ev"
    assert run("evaluate", blackbox_run, "--out", ev).exit_code == 0
    before = snapshot(ev)
    for extra in ([], ["--force"]):
        res = run("run", experiment(tmp_path), "--out", ev, "--no-progress", "--no-plot", *extra)
        assert res.exit_code == 2, res.output
        assert "written by `pushbench evaluate`" in res.output
        assert snapshot(ev) == before
    res = run("run", experiment(tmp_path), "--out", ev, "--no-progress", "--no-plot", "--overwrite")
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in (ev / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all("blackbox" not in x for x in lines)
    assert outdir.read_manifest(ev)["writer"] == "run"


def test_evaluate_reevaluates_its_own_folder_but_not_other_runs_without_overwrite(
    tmp_path, blackbox_run
):
    ev = tmp_path / "ev"
    assert run("evaluate", blackbox_run, "--out", ev).exit_code == 0
    first = (ev / "episodes.jsonl").read_bytes()
    assert run("evaluate", blackbox_run, "--out", ev).exit_code == 0  # same runs: replaced
    assert (ev / "episodes.jsonl").read_bytes() == first
    assert len(outdir.read_manifest(ev)["invocations"]) == 2
    other = tmp_path / "other"
    other.mkdir()
    (other / "run.json").write_bytes((blackbox_run / "run.json").read_bytes())
    res = run("evaluate", blackbox_run, other, "--out", ev)
    assert res.exit_code == 2 and "other run directories" in res.output, res.output
    assert (ev / "episodes.jsonl").read_bytes() == first


def test_unclaimed_outputs_are_refused_and_other_files_survive_overwrite(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "episodes.jsonl").write_text('{"key": "x"}\n')
    (folder / "notes.txt").write_text("mine")
    res = run("run", experiment(tmp_path), "--out", folder, "--no-progress", "--no-plot")
    assert res.exit_code == 2 and "no manifest.json" in res.output, res.output
    assert (folder / "episodes.jsonl").read_text() == '{"key": "x"}\n'
    res = run(
        "run", experiment(tmp_path), "--out", folder, "--no-progress", "--no-plot", "--overwrite"
    )
    assert res.exit_code == 0, res.output
    assert (folder / "notes.txt").read_text() == "mine"
    assert '"key": "x"' not in (folder / "episodes.jsonl").read_text()


def test_run_still_resumes_its_own_folder_and_refuses_another_experiment(tmp_path):
    folder = _run_folder(tmp_path)
    manifest = outdir.read_manifest(folder)
    assert manifest["writer"] == "run" and manifest["experiment"]["name"] == "exp"
    res = run("run", experiment(tmp_path), "--out", folder, "--no-progress", "--no-plot")
    assert res.exit_code == 0 and "(0 run now" in res.output, res.output
    res = run(
        "run",
        experiment(tmp_path, "other", seeds=(5,)),
        "--out",
        folder,
        "--no-progress",
        "--no-plot",
    )
    assert res.exit_code == 2 and "different experiment" in res.output, res.output


def test_a_legacy_run_manifest_without_writer_is_a_run(tmp_path):
    folder = _run_folder(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["writer"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert outdir.check(folder, "run") is not None
    with pytest.raises(outdir.OutputDirError, match="written by `pushbench run`"):
        outdir.check(folder, "evaluate")
