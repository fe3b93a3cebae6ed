"""The experiment runner: validation, expansion, executors, the resumable writer, the CLI."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pushbench.runner.executors import base
from pushbench.runner.executors import local as ex
from pushbench.runner.experiment import (
    ExperimentError,
    expand,
    load_experiment,
    parse_seeds,
    validate,
)
from pushbench.runner.rundir import RunDir, RunDirError, read_lines
from pushbench.runner.sweep import SweepInterrupted, run_experiment

ROOT = Path(__file__).resolve().parents[1]

SMALL = {
    "schema_version": 1,
    "name": "runner-test",
    "tasks": ["RepoScan-requests-docstring-N10", "RepoScan-flask-decorated-N10"],
    "controllers": ["standard", "stateqgp"],
    "policies": ["diligent", "random"],
    "seeds": [0, 1],
}
# Enough short episodes (9 tasks x 2 controllers x 2 policies x 6 seeds = 216) that a kill lands
# mid-run, each a few milliseconds.
RESUMABLE = {
    **SMALL,
    "name": "resume-test",
    "tasks": ["RepoScan-*-N10"],
    "seeds": {"start": 0, "count": 6},
}


def _lines(run_dir: Path) -> list[dict]:
    with open(run_dir / "episodes.jsonl") as f:
        return [json.loads(x) for x in f]


def _by_key(run_dir: Path) -> dict[str, dict]:
    return {d["key"]: d for d in _lines(run_dir)}


def _write_exp(tmp_path: Path, data: dict, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(*args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pushbench.cli",
        "run",
        *args,
        "--no-report",
        "--no-plot",
        "--no-progress",
    ]


# ----- experiments ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "field,value,expect",
    [
        ("tasks", ["RepoScan-requests-docstrin-N10"], "RepoScan-requests-docstring-N10"),
        ("tasks", ["RepoScn-*-N10"], "matches no task id"),
        ("controllers", ["stateqpg"], "stateqgp"),
        ("policies", ["diligant"], "diligent"),
        ("executor", "proces", "process"),
    ],
)
def test_unknown_names_fail_with_close_matches(field, value, expect):
    with pytest.raises(ExperimentError) as err:
        validate({**SMALL, field: value})
    msg = str(err.value)
    assert expect in msg and str(value if isinstance(value, str) else value[0]) in msg
    if "matches no" not in expect:
        assert "Did you mean" in msg


def test_several_problems_reported_at_once_and_schema_checked():
    with pytest.raises(ExperimentError) as err:
        validate({**SMALL, "controllers": ["nope"], "policies": ["nada"], "extra": 1})
    assert "extra" in str(err.value)
    with pytest.raises(ExperimentError, match="nope.*nada|nada.*nope"):
        validate({**SMALL, "controllers": ["nope"], "policies": ["nada"]})
    with pytest.raises(ExperimentError, match="schema_version"):
        validate({**SMALL, "schema_version": 2})


def test_suite_instances_and_seed_forms():
    e = validate(
        {
            **SMALL,
            "tasks": [{"suite": "RepoScan-N10", "instances": "all"}],
            "seeds": {"start": 3, "count": 2},
            "policies": [{"name": "random"}],
            "controllers": "standard",
        }
    )
    specs = expand(e)
    assert e.seeds == [3, 4]
    assert {s.task_id for s in specs} == {"RepoScan-N10"}
    assert len({s.instance for s in specs}) == 9 and len(specs) == 18
    with pytest.raises(ExperimentError, match="not a suite"):
        validate({**SMALL, "tasks": [{"suite": "RepoScan-flask-decorated-N10"}]})
    with pytest.raises(ExperimentError, match="no instance"):
        validate({**SMALL, "tasks": [{"suite": "RepoScan-N10", "instances": ["flask-decoratd"]}]})
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    with pytest.raises(ExperimentError):
        parse_seeds("x")


def test_expansion_order_is_deterministic_and_pairs_controllers():
    e = validate(RESUMABLE)
    a, b = expand(e), expand(validate(json.loads(json.dumps(RESUMABLE))))
    assert [s.key for s in a] == [s.key for s in b]
    assert len(a) == len({s.key for s in a}) == 9 * 2 * 2 * 6
    # controllers of one (task, policy, seed) cell are adjacent; seeds are the outer loop
    assert [s.controller for s in a[:4]] == ["standard", "stateqgp"] * 2
    assert a[0].seed == 0 and a[-1].seed == 5
    assert [s.key for s in expand(e, limit=7)] == [s.key for s in a[:7]]
    # overlapping globs run a cell once
    overlapping = {**RESUMABLE, "tasks": ["RepoScan-*-N10", "RepoScan-flask-*-N10"]}
    assert len(expand(validate(overlapping))) == len(a)


def test_shipped_experiments_validate():
    sizes = {
        "controller_ablation": 1296,
        "component_ablation": 1620,
        "target_scaling": 540,
        "dataops_ablation": 1728,
    }
    for name, n in sizes.items():
        assert len(expand(load_experiment(ROOT / "experiments" / f"{name}.yaml"))) == n
    # the DataOps ablation: 864 episodes of each DataOps family (issue 30)
    specs = expand(load_experiment(ROOT / "experiments" / "dataops_ablation.yaml"))
    assert sum(s.task_id.startswith("DataOps-public-") for s in specs) == 864
    assert 0 < len(expand(load_experiment(ROOT / "experiments" / "smoke.yaml"))) <= 32


# ----- sweeps and executors --------------------------------------------------------------
def test_inprocess_and_two_workers_give_identical_records(tmp_path):
    e = validate(SMALL)
    a = run_experiment(e, tmp_path / "a", executor=ex.InProcessExecutor(), progress=False)
    with ex.LocalPoolExecutor(2) as pool:
        b = run_experiment(e, tmp_path / "b", executor=pool, progress=False)
    assert a["ran"] == b["ran"] == 16 and a["errors"] == b["errors"] == 0
    la, lb = _by_key(tmp_path / "a"), _by_key(tmp_path / "b")
    assert la == lb  # every field, metrics included: no wall-clock time in records
    line = next(iter(la.values()))
    assert "calls" not in line and set(line["controller"]) == {"name", "components"}
    trace_path = tmp_path / "a" / "traces" / f"{line['key']}.json.gz"
    trace = json.loads(gzip.decompress(trace_path.read_bytes()))
    assert trace["calls"] and "steps" in trace["controller"] and trace["metrics"] == line["metrics"]
    # traces are byte-identical too (gzip mtime 0)
    for k in la:
        assert (tmp_path / "a" / "traces" / f"{k}.json.gz").read_bytes() == (
            tmp_path / "b" / "traces" / f"{k}.json.gz"
        ).read_bytes()


def test_rerun_skips_finished_and_limit_extends(tmp_path):
    e = validate(SMALL)
    s1 = run_experiment(e, tmp_path, progress=False, limit=5)
    s2 = run_experiment(e, tmp_path, progress=False)
    s3 = run_experiment(e, tmp_path, progress=False)
    assert (s1["ran"], s2["skipped"], s2["ran"], s3["ran"], s3["skipped"]) == (5, 5, 11, 0, 16)
    keys = [d["key"] for d in _lines(tmp_path)]
    assert len(keys) == len(set(keys)) == 16


def test_episode_exception_is_an_error_line_not_a_crash(tmp_path, monkeypatch):
    from pushbench.runner import episode

    real = episode.run_episode

    def flaky(task_id, controller, policy, seed, **kw):
        if policy == "random" and seed == 1:
            raise RuntimeError("boom in the harness")
        return real(task_id, controller, policy, seed, **kw)

    monkeypatch.setattr(episode, "run_episode", flaky)
    s = run_experiment(validate(SMALL), tmp_path, executor=ex.InProcessExecutor(), progress=False)
    assert (s["ran"], s["errors"]) == (12, 4)
    errs = read_lines(tmp_path / "errors.jsonl")
    assert len(errs) == 4 and all(x["terminated_by"] == "error" for x in errs)
    assert "boom in the harness" in errs[0]["error"] and "Traceback" in errs[0]["error"]
    monkeypatch.setattr(episode, "run_episode", real)
    s = run_experiment(validate(SMALL), tmp_path, executor=ex.InProcessExecutor(), progress=False)
    assert (s["ran"], s["errors"], s["skipped"]) == (4, 0, 12)  # a resume retries errors


def test_truncated_last_line_is_repaired(tmp_path):
    e = validate(SMALL)
    run_experiment(e, tmp_path, progress=False, limit=6)
    path = tmp_path / "episodes.jsonl"
    data = path.read_bytes()
    cut = data[: len(data) - 40]  # tear the 6th line
    path.write_bytes(cut)
    with pytest.warns(UserWarning, match="truncated last line"):
        s = run_experiment(e, tmp_path, progress=False)
    assert s["skipped"] == 5 and s["ran"] == 11
    text = path.read_bytes()
    assert text.startswith(cut[: cut.rfind(b"\n") + 1]) and text.endswith(b"\n")
    keys = [d["key"] for d in _lines(tmp_path)]
    assert len(keys) == len(set(keys)) == 16


def test_manifest_and_refusal_of_a_different_experiment(tmp_path):
    e = validate(SMALL)
    run_experiment(e, tmp_path, progress=False, limit=2, arguments={"out": str(tmp_path), "x": 1})
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["schema_version"] == 1
    assert {"pushbench", "gymnasium", "numpy", "python"} <= set(m["packages"])
    assert m["packages"]["numpy"] and m["packages"]["python"]
    assert "git" in m and (m["git"] is None or len(m["git"]["commit"]) == 40)
    assert m["arguments"] == {"out": str(tmp_path), "x": 1}
    assert m["experiment"]["controllers"] == ["standard", "stateqgp"]
    assert m["invocations"][0]["summary"]["ran"] == 2
    other = validate({**SMALL, "seeds": [0, 1, 2]})
    with pytest.raises(RunDirError, match="different experiment.*seeds"):
        run_experiment(other, tmp_path, progress=False)
    # workers/executor do not change results: a resume with other workers is fine
    run_experiment(
        validate({**SMALL, "workers": 2, "executor": "inprocess"}),
        tmp_path,
        progress=False,
        limit=3,
    )
    with pytest.warns(UserWarning, match="different experiment"):
        run_experiment(other, tmp_path, progress=False, limit=3, force=True)
    assert len(json.loads((tmp_path / "manifest.json").read_text())["invocations"]) == 3


def test_second_sweep_on_same_dir_is_refused(tmp_path):
    with RunDir(tmp_path).open({}, {"a": 1}):
        with pytest.raises(RunDirError, match="another sweep"):
            RunDir(tmp_path).open({}, {"a": 1})


def test_keyboard_interrupt_keeps_finished_work(tmp_path):
    class Interrupting(ex.InProcessExecutor):
        def run(self, specs):
            for i, spec in enumerate(specs):
                if i == 5:
                    raise KeyboardInterrupt
                yield base.run_spec(spec)

    e = validate(SMALL)
    with pytest.raises(SweepInterrupted) as err:
        run_experiment(e, tmp_path, executor=Interrupting(), progress=False)
    assert err.value.summary["interrupted"] and err.value.summary["ran"] == 5
    assert len(_lines(tmp_path)) == 5
    assert run_experiment(e, tmp_path, progress=False)["ran"] == 11


# ----- the CLI, killed and resumed ----------------------------------------------------------
def _default_sigint() -> None:
    # A job started with `&` by a non-interactive shell (CI in the background) has SIGINT
    # ignored, and a child inherits that: give the CLI the default, as at a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _kill_midway(cmd: list[str], out: Path, at_least: int, sig: int) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    path = out / "episodes.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= at_least:
            proc.send_signal(sig)
            break
        time.sleep(0.005)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_cli_killed_midway_then_rerun_matches_uninterrupted_run(tmp_path, workers):
    exp = _write_exp(tmp_path, RESUMABLE)
    out = tmp_path / "killed"
    cmd = _cli(str(exp), "--out", str(out), "--workers", str(workers))
    first = _kill_midway(cmd, out, at_least=10, sig=signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL, first.stderr  # killed, not finished
    n_before = len(read_lines(out / "episodes.jsonl"))
    total = len(expand(validate(RESUMABLE)))
    assert 10 <= n_before < total
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"{total - n_before} run now" in " ".join(second.stderr.split())

    ref = tmp_path / "reference"
    run_experiment(validate(RESUMABLE), ref, executor=ex.InProcessExecutor(), progress=False)
    resumed, expected = _lines(out), _lines(ref)
    keys = [d["key"] for d in resumed]
    assert len(keys) == len(set(keys)) == total  # nothing lost, nothing duplicated
    got = {d["key"]: d for d in resumed}
    for d in expected:
        assert got[d["key"]]["metrics"] == d["metrics"]
        assert got[d["key"]]["progress"] == d["progress"]
        assert got[d["key"]] == d
    assert all((out / "traces" / f"{k}.json.gz").exists() for k in keys)
    m = json.loads((out / "manifest.json").read_text())
    assert len(m["invocations"]) == 2 and m["invocations"][1]["resumed_with"] == n_before
    assert m["arguments"]["workers"] == workers and m["packages"]["gymnasium"]


def test_cli_ctrl_c_exits_nonzero_with_resume_hint(tmp_path):
    exp = _write_exp(tmp_path, RESUMABLE)
    out = tmp_path / "run"
    res = _kill_midway(_cli(str(exp), "--out", str(out)), out, at_least=5, sig=signal.SIGINT)
    assert res.returncode == 130, res.stderr
    err = " ".join(res.stderr.split())
    assert "interrupted" in err and "re-running the same command" in err and "pushbench run" in err
    lines = read_lines(out / "episodes.jsonl")
    assert len(lines) >= 5 and len({d["key"] for d in lines}) == len(lines)


def test_cli_reports_bad_experiment(tmp_path):
    exp = _write_exp(tmp_path, {**SMALL, "controllers": ["stateqgpp"]})
    res = subprocess.run(
        _cli(str(exp), "--out", str(tmp_path / "o")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "stateqgp" in res.stderr and "Did you mean" in res.stderr


def test_cli_overrides(tmp_path):
    out = tmp_path / "o"
    res = subprocess.run(
        _cli(
            str(ROOT / "experiments" / "smoke.yaml"),
            "--out",
            str(out),
            "--controllers",
            "verifier_gated",
            "--policies",
            "diligent",
            "--seeds",
            "3-4",
            "--tasks",
            "RepoScan-pytest-raises-N10",
            "--limit",
            "1",
            "--executor",
            "inprocess",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    (line,) = _lines(out)
    assert (line["task_id"], line["controller"]["name"], line["policy"]["name"], line["seed"]) == (
        "RepoScan-pytest-raises-N10",
        "verifier_gated",
        "diligent",
        3,
    )
    m = json.loads((out / "manifest.json").read_text())
    assert m["arguments"]["controllers"] == ["verifier_gated"] and m["arguments"]["limit"] == 1
    assert m["experiment"]["seeds"] == [3, 4]


def _report(run_dir: Path, out: Path, seed: int, *extra: str) -> dict[str, bytes]:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "report",
            str(run_dir),
            "--seed",
            str(seed),
            "--out",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return {f: (out / f).read_bytes() for f in ("summary.csv", "paired_deltas.csv")}


@pytest.mark.timeout(600)
def test_whole_report_is_byte_identical_for_a_fixed_seed(tmp_path):
    """The report files depend on the episodes and the seed only: not on the executor, the order
    of the lines or hash randomisation; and the seed really reaches the bootstrap."""
    import os

    # nine instances: enough clusters that the bootstrap interval depends on its seed
    exp = _write_exp(
        tmp_path,
        {
            **SMALL,
            "name": "report-determinism",
            "tasks": ["RepoScan-*-N10"],
            "policies": ["random"],
        },
    )
    outputs = []
    for name, how, hash_seed in (
        ("a", ["--executor", "inprocess"], "1"),
        ("b", ["--executor", "process", "--workers", "2"], "2"),
    ):
        out = tmp_path / name
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pushbench.cli",
                "run",
                str(exp),
                "--out",
                str(out),
                "--no-progress",
                "--no-plot",
                *how,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert run.returncode == 0, run.stderr
        outputs.append({f: (out / f).read_bytes() for f in ("summary.csv", "paired_deltas.csv")})
    a, b = outputs
    assert a == b  # separate sweeps, different executors and hash seeds
    assert a["paired_deltas.csv"].count(b"\n") > 1  # the comparison is not empty
    # The same run reported again, and with its lines in reverse order: same bytes.
    assert _report(tmp_path / "a", tmp_path / "again", seed=0) == a
    shuffled = tmp_path / "reversed"
    shuffled.mkdir()
    lines = (tmp_path / "a" / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    (shuffled / "episodes.jsonl").write_bytes(b"".join(reversed(lines)))
    assert _report(shuffled, shuffled, seed=0) == a
    # The default interval enumerates all 2^9 sign assignments: no draw, so another seed gives
    # the same bytes. A resampling method takes the seed: two seeds move its intervals (so the
    # equalities above are not vacuous for it) and nothing else.
    assert _report(tmp_path / "a", tmp_path / "seed1", seed=1) == a
    boot = [
        _report(tmp_path / "a", tmp_path / f"boot{s}", s, "--ci-method", "studentized")
        for s in (0, 1)
    ]
    assert boot[0]["summary.csv"] == boot[1]["summary.csv"] == a["summary.csv"]
    assert boot[0]["paired_deltas.csv"] != boot[1]["paired_deltas.csv"]


def test_make_executor_names_close_matches_for_an_unknown_name():
    from pushbench.errors import UnknownNameError
    from pushbench.runner.registry import make_executor

    with pytest.raises(
        UnknownNameError, match=r"unknown executor 'procss'\. Did you mean: process"
    ):
        make_executor("procss")
