"""Issue 11, section 4: every CLI misuse is one ``error: ...`` line and exit code 2.

Each case is what a careless user might type; the check is the exit code, an ``error:`` line
that names the problem, and no traceback. Most run in-process (Typer's CliRunner); one runs the
real console entry point in a subprocess and checks that stderr is exactly one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pushbench import cli
from pushbench.runner.experiment import MAX_EPISODES, MAX_SEEDS, ExperimentError, load_experiment

runner = CliRunner()
TASK = "RepoScan-requests-docstring-N10"


def experiment(tmp_path: Path, name: str = "exp.yaml", **fields) -> Path:
    data = {
        "name": "t",
        "tasks": [TASK],
        "controllers": ["standard"],
        "policies": ["random"],
        "seeds": [0],
        **fields,
    }
    path = tmp_path / name
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def misuse(*args: str, needle: str) -> str:
    res = runner.invoke(cli.app, [str(a) for a in args])
    out = res.output
    assert res.exit_code == 2, (res.exit_code, out)
    assert "Traceback" not in out and not isinstance(res.exception, (TypeError, KeyError)), out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:") or "] error:" in ln]
    assert errors, out
    assert needle.lower() in out.lower(), out
    return out


@pytest.fixture
def files(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("x")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    return {"file": f, "binary": binary, "dir": tmp_path}


# ----- pushbench run -----------------------------------------------------------------------------
def test_run_binary_experiment_file(tmp_path, files):
    misuse("run", files["binary"], "--out", tmp_path / "o", needle="not a text file")


def test_run_out_is_a_file(tmp_path, files):
    misuse("run", experiment(tmp_path), "--out", files["file"], needle="is a file")


def test_run_out_below_a_file(tmp_path, files):
    misuse("run", experiment(tmp_path), "--out", files["file"] / "sub", needle="is a file")


def test_run_experiment_is_a_directory(tmp_path):
    misuse("run", tmp_path, "--out", tmp_path / "o", needle="is a directory")


def test_run_missing_experiment(tmp_path):
    misuse("run", tmp_path / "nope.yaml", "--out", tmp_path / "o", needle="not found")


def test_run_unreadable_experiment(tmp_path, monkeypatch):
    path = experiment(tmp_path)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == path else real(p, mode))
    misuse("run", path, "--out", tmp_path / "o", needle="not readable")


def test_load_experiment_unreadable_file(tmp_path, monkeypatch):
    path = experiment(tmp_path)

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(ExperimentError, match="cannot read"):
        load_experiment(path)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--workers", "-3"], "workers"),
        (["--workers", "100000"], "workers"),
        (["--seeds", "5-1"], "backwards"),
        (["--seeds", "-1"], "seed"),
        (["--seeds", "0-100000000"], f"more than {MAX_SEEDS}"),
        (["--seeds", "x"], "seed"),
        (["--limit", "0"], "--limit"),
        (["--budget", "0"], "budget"),
        (["--concurrency", "0"], "--concurrency"),
        (["--executor", "bogus"], "unknown executor"),
        (["--tasks", "Nope*"], "matches no task"),
        (["--policies", "simulated-weak", "--tasks", "SWELite-N3"], "no agent for swelite"),
        (["--workers", "abc"], "--workers"),
        (["--nope"], "no such option"),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(v),
)
def test_run_bad_overrides(tmp_path, args, needle):
    misuse("run", experiment(tmp_path), "--out", tmp_path / "o", *args, needle=needle)
    assert not (tmp_path / "o").exists()  # refused before anything was written


@pytest.mark.parametrize(
    "fields, needle",
    [
        ({"seeds": {"count": 1.0e8}}, f"less than or equal to {MAX_SEEDS}"),
        ({"seeds": {"count": "1e8"}}, "seeds"),
        ({"seeds": [-1]}, "greater than or equal to 0"),
        ({"seeds": {"start": -5, "count": 2}}, "greater than or equal to 0"),
        ({"policies": [{"name": "simulated-weak", "params": {"windw": 99}}]}, "'windw'"),
        ({"policies": [{"name": "simulated-weak", "params": {"window": -5}}]}, "'window'"),
        ({"policies": [{"name": "simulated-weak", "params": {"window": "4"}}]}, "'window'"),
        ({"policies": [{"name": "random", "params": {"stop_rate": 1.5}}]}, "'stop_rate'"),
        ({"policies": [{"name": "diligent", "params": {"care": 1}}]}, "'care'"),
        (
            {
                "policies": [{"name": "simulated-mid", "params": {"overbatch": 0.5}}],
                "tasks": ["DataOps-N3"],
            },
            "no effect on dataops",
        ),
        (
            {
                "policies": [{"name": "random", "params": {"stop_rate": 0.1}}],
                "tasks": ["DataOps-N3"],
            },
            "no effect on dataops",
        ),
        (
            {"policies": [{"name": "llm", "params": {"model": "m", "temprature": 0}}]},
            "'temprature'",
        ),
        (
            {
                "tasks": ["RepoScan-*"],
                "controllers": ["standard", "stateqgp"],
                "seeds": {"count": MAX_SEEDS},
            },
            f"the limit is {MAX_EPISODES}",
        ),
        ({"budget": 10**9}, "budget"),
        ({"controllers": ["unitqgp"]}, "component 'unit_tracker'"),
        ({"controllers": ["standard", "stateqgp"], "tasks": ["DataOps-N3"]}, "component 'dedupe'"),
    ],
    ids=lambda v: json.dumps(v)[:40] if isinstance(v, dict) else v,
)
def test_experiment_fields_are_validated_before_the_first_episode(tmp_path, fields, needle):
    out = misuse("run", experiment(tmp_path, **fields), "--out", tmp_path / "o", needle=needle)
    if "params" in json.dumps(fields):
        assert "policy '" in out  # the message names the policy (and the param: needle)
    assert not (tmp_path / "o").exists()


def test_yaml_alias_bomb_is_refused(tmp_path):
    rows = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 7):
        rows.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(rows) + "\n")
    misuse("run", path, "--out", tmp_path / "o", needle="more than")


def test_bad_params_do_not_grow_errors_jsonl_on_resume(tmp_path):
    """Bad params used to fail each episode at run time (errors.jsonl, again on every resume);
    now the experiment is refused before the first episode, every time."""
    out = tmp_path / "run"
    good = experiment(tmp_path, "good.yaml", policies=["simulated-weak"])
    res = runner.invoke(
        cli.app, ["run", str(good), "--out", str(out), "--no-progress", "--no-plot", "--no-report"]
    )
    assert res.exit_code == 0, res.output
    errors = out / "errors.jsonl"
    before = errors.read_text() if errors.exists() else ""
    bad = experiment(
        tmp_path, "good.yaml", policies=[{"name": "simulated-weak", "params": {"window": -5}}]
    )
    for _ in range(2):  # a resume of the same command
        misuse("run", bad, "--out", out, "--force", needle="'window'")
        assert (errors.read_text() if errors.exists() else "") == before
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 1  # nothing lost, nothing duplicated


# ----- report, plot, evaluate, mcp, tasks, swelite ------------------------------------------------
@pytest.mark.parametrize("cmd", ["report", "plot"])
def test_report_and_plot_on_missing_runs(tmp_path, cmd):
    misuse(cmd, tmp_path / "nope", needle="no episodes file")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    out = tmp / "run"
    res = runner.invoke(
        cli.app,
        [
            "run",
            str(experiment(tmp)),
            "--out",
            str(out),
            "--no-progress",
            "--no-plot",
            "--no-report",
        ],
    )
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("cmd", ["report", "plot"])
def test_report_and_plot_out_is_a_file(finished_run, files, cmd):
    misuse(cmd, finished_run, "--out", files["file"], needle="is a file")


def test_plot_target_not_in_the_run(finished_run):
    misuse("plot", finished_run, "--target", "7", needle="its targets are 10")
    misuse("plot", finished_run, "--target", "-1", needle="--target")


def test_evaluate_misuse(tmp_path, files, finished_run):
    misuse("evaluate", tmp_path / "nope", "--out", tmp_path / "e", needle="not found")
    misuse("evaluate", files["file"], "--out", tmp_path / "e", needle="a file")
    misuse("evaluate", finished_run, "--out", files["file"], needle="is a file")
    misuse("evaluate", finished_run, "--out", tmp_path / "e", needle="run.json")


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--agent", "../x"], "--agent '../x'"),
        (["--condition", "a b"], "--condition"),
        (["--seed", "-1"], "--seed"),
        (["--budget", "0"], "--budget"),
        (["--task", "Nope"], "unknown task"),
        (["--controller", "nope"], "unknown controller"),
        (["--instance", "nope"], "not part of"),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(v),
)
def test_mcp_misuse(tmp_path, extra, needle):
    pytest.importorskip("mcp")
    args = [
        "mcp",
        "--task",
        TASK if "--task" not in extra else extra[1],
        "--run-dir",
        str(tmp_path / "run"),
    ]
    if "--task" in extra:
        extra = []
    if "--instance" in extra:
        args[2] = "RepoScan-N10"
    misuse(*args, *extra, needle=needle)


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--tasks", ","], "--tasks: give at least one"),
        (["--tasks", TASK, "--seeds", " , "], "--seeds: give at least one"),
    ],
    ids=["no-task", "no-seed"],
)
def test_blackbox_run_empty_lists(tmp_path, extra, needle):
    # Found by mypy (issue 34): split() gave an empty or None list where Batch needs one, and
    # the batch then ran no episode and still reported success.
    misuse(
        "blackbox",
        "run",
        "--agent",
        "codex",
        "--out",
        tmp_path / "b",
        "--model-server",
        "random",
        *extra,
        needle=needle,
    )


def test_mcp_run_dir_is_a_file(files):
    misuse("mcp", "--task", TASK, "--run-dir", files["file"], needle="is a file")


def test_tasks_prefix_without_match():
    misuse("tasks", "RepoScn", needle="did you mean")


def test_unknown_command():
    misuse("bogus", needle="no such command")


def test_swelite_misuse(tmp_path, files):
    misuse("swelite", "build", "nope", needle="no units for snapshot")
    misuse("swelite", "list", "nope", needle="no units for snapshot")
    misuse("swelite", "build", "--recipe", tmp_path / "none.yaml", needle="no such file")
    misuse("swelite", "build", "--recipe", files["binary"], needle="not a valid")


def test_console_entry_prints_exactly_one_line(tmp_path, files):
    """The real command (not CliRunner): stderr is one ``error:`` line, exit code 2."""
    for args in (
        ["run", str(files["binary"]), "--out", str(tmp_path / "o")],
        ["run", str(experiment(tmp_path)), "--out", str(files["file"])],
        ["run", str(experiment(tmp_path)), "--out", str(tmp_path / "o"), "--limit", "0"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "pushbench.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "40"},
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
