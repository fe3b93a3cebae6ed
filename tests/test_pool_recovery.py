"""The process pool when a worker dies mid-episode (OOM kill, segfault): no hang, nothing lost.

A worker is SIGKILLed from inside an episode (tests/pool_faults.py). Python then breaks the
whole pool: every episode in flight in it fails with ``BrokenProcessPool``, the innocent ones
included. The executor re-runs those alone, one at a time, in a fresh pool: the episode that
kills its worker again becomes an error (``errors.jsonl``), the others finish normally; a
resume then completes the run with exactly the episodes of an uninterrupted run.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from pool_faults import always_die, die_mid_episode

from pushbench.runner.executors.local import InProcessExecutor, LocalPoolExecutor
from pushbench.runner.experiment import expand, validate
from pushbench.runner.rundir import read_lines
from pushbench.runner.sweep import run_experiment

# 8 episodes; with 2 workers and a window of 4, seed 5 is submitted only after earlier episodes
# came back, so its death is not mistaken for workers that cannot start.
EXP = {
    "schema_version": 1,
    "name": "pool-recovery",
    "tasks": ["RepoScan-requests-docstring-N10"],
    "controllers": ["standard"],
    "policies": ["diligent"],
    "seeds": {"start": 0, "count": 8},
}
KILL_SEED, KILL_STEP = 5, 3

pytestmark = pytest.mark.timeout(240)  # a regression here would hang: fail instead


def _lines(run_dir: Path) -> dict[str, bytes]:
    """key -> the raw bytes of its episodes.jsonl line (compared byte for byte)."""
    raw = (run_dir / "episodes.jsonl").read_bytes().splitlines()
    keys = [json.loads(x)["key"] for x in raw]
    assert len(keys) == len(set(keys)), "a key was written twice"
    return dict(zip(keys, raw, strict=True))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The uninterrupted run's lines (in-process: no pool involved)."""
    out = tmp_path_factory.mktemp("reference")
    s = run_experiment(validate(EXP), out, executor=InProcessExecutor(), progress=False)
    assert s["ran"] == 8 and s["errors"] == 0
    return _lines(out)


def _key_of_seed(seed: int) -> str:
    (spec,) = [s for s in expand(validate(EXP)) if s.seed == seed]
    return spec.key


def test_a_worker_killed_once_loses_nothing(tmp_path, reference):
    marker = tmp_path / "killed"
    fn = functools.partial(die_mid_episode, seed=KILL_SEED, step=KILL_STEP, marker=str(marker))
    with LocalPoolExecutor(2, fn=fn) as pool:
        s = run_experiment(validate(EXP), tmp_path / "run", executor=pool, progress=False)
    pid, step = map(int, marker.read_text().split())  # the worker really died, mid-episode
    assert step == KILL_STEP and pid > 0
    # Every episode of the broken pool ran again; the killed one succeeded on its second try.
    assert (s["ran"], s["errors"], s["error_keys"]) == (8, 0, [])
    assert _lines(tmp_path / "run") == reference
    assert read_lines(tmp_path / "run" / "errors.jsonl") == []


def test_an_episode_that_always_kills_its_worker_is_an_error_and_resume_completes(
    tmp_path, reference
):
    out = tmp_path / "run"
    fn = functools.partial(die_mid_episode, seed=KILL_SEED, step=KILL_STEP)
    with LocalPoolExecutor(2, fn=fn) as pool:
        s = run_experiment(validate(EXP), out, executor=pool, progress=False)
    killer = _key_of_seed(KILL_SEED)
    # Only the episode that kills its worker is an error; the others it took down re-ran.
    assert (s["ran"], s["errors"], s["error_keys"]) == (7, 1, [killer])
    (err,) = read_lines(out / "errors.jsonl")
    assert err["key"] == killer and err["terminated_by"] == "error" and err["seed"] == KILL_SEED
    assert "worker process died" in err["error"]
    lines = _lines(out)
    assert killer not in lines
    assert lines == {k: v for k, v in reference.items() if k != killer}
    assert not (out / "traces" / f"{killer}.json.gz").exists()

    # Resume without the fault: only the failed episode runs; the run equals the reference.
    with LocalPoolExecutor(2) as pool:
        s = run_experiment(validate(EXP), out, executor=pool, progress=False)
    assert (s["skipped"], s["ran"], s["errors"]) == (7, 1, 0)
    assert _lines(out) == reference
    assert sorted(p.name for p in (out / "traces").iterdir()) == sorted(
        f"{k}.json.gz" for k in reference
    )


def test_workers_that_never_finish_an_episode_stop_the_sweep_with_a_clear_error(tmp_path):
    with (
        LocalPoolExecutor(2, fn=always_die) as pool,
        pytest.raises(
            RuntimeError, match="died before finishing any episode.*--executor inprocess"
        ),
    ):
        run_experiment(validate(EXP), tmp_path / "run", executor=pool, progress=False)
    assert read_lines(tmp_path / "run" / "episodes.jsonl") == []
