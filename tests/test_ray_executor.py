"""The ``ray`` executor on a local Ray instance (2 CPUs): same records, lost workers, caps.

Slow (Ray start-up takes a few seconds); skipped when Ray is not installed
(``pip install "pushbench[ray]"``). Crashes are injected through the executor's ``fn`` hook
(what each task runs instead of ``run_spec``): closures defined in a test travel to the workers
by value, so the workers need nothing from this file.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from pushbench.runner.executors.local import InProcessExecutor  # noqa: E402
from pushbench.runner.executors.ray import RayExecutor  # noqa: E402
from pushbench.runner.experiment import EpisodeSpec, expand, validate  # noqa: E402
from pushbench.runner.registry import make_executor  # noqa: E402
from pushbench.runner.sweep import run_experiment  # noqa: E402

pytestmark = pytest.mark.slow

SMALL = {
    "schema_version": 1,
    "name": "ray-test",
    "tasks": ["RepoScan-requests-docstring-N10", "RepoScan-flask-decorated-N10"],
    "controllers": ["standard", "stateqgp"],
    "policies": ["diligent", "random"],
    "seeds": [0, 1],
}


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module (the executor joins it rather than starting one)."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=128 * 1024**2,
        log_to_driver=False,
        namespace="pushbench-tests",
    )
    yield
    ray.shutdown()


def lines(run_dir: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for raw in (run_dir / "episodes.jsonl").read_text().splitlines():
        d = json.loads(raw)
        assert d["key"] not in out, f"episode {d['key']} recorded twice"
        out[d["key"]] = d
    return out


def errors(run_dir: Path) -> list[dict]:
    path = run_dir / "errors.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def trace(run_dir: Path, key: str) -> dict:
    return json.loads(gzip.decompress((run_dir / "traces" / f"{key}.json.gz").read_bytes()))


def test_ray_records_equal_in_process_records_and_resume(local_ray, tmp_path):
    exp = validate(SMALL)
    a = run_experiment(exp, tmp_path / "inprocess", executor=InProcessExecutor(), progress=False)
    with RayExecutor() as ex:
        b = run_experiment(exp, tmp_path / "ray", executor=ex, progress=False)
    assert a["errors"] == b["errors"] == 0 and a["finished"] == b["finished"] == 16
    assert b["executor"] == "ray" and b["workers"] == 2
    la, lb = lines(tmp_path / "inprocess"), lines(tmp_path / "ray")
    assert la == lb  # line by line, compared by key
    for key in la:  # and the full traces
        assert trace(tmp_path / "inprocess", key) == trace(tmp_path / "ray", key)
    # a restarted driver skips every finished episode
    with RayExecutor() as ex:
        again = run_experiment(exp, tmp_path / "ray", executor=ex, progress=False)
    assert again["skipped"] == 16 and again["ran"] == 0
    assert lines(tmp_path / "ray") == lb


def test_killed_worker_is_retried_once_and_recorded_once(local_ray, tmp_path):
    exp = validate(SMALL)
    specs = expand(exp)
    target = specs[5].key
    marks = tmp_path / "attempts"
    marks.mkdir()
    pid_file = tmp_path / "victim.pid"

    def slow_first_attempt(spec):
        import os as _os
        import time as _time

        from pushbench.runner.executors.base import run_spec

        if spec.key == target:
            n = len(_os.listdir(marks))
            (marks / f"{n}-{_os.getpid()}").touch()
            if n == 0:  # first attempt: announce the pid, then wait to be killed mid-task
                pid_file.write_text(str(_os.getpid()))
                _time.sleep(120)
        return run_spec(spec)

    def killer() -> None:
        deadline = time.monotonic() + 120
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    with RayExecutor(fn=slow_first_attempt) as ex:
        summary = run_experiment(exp, tmp_path / "run", executor=ex, progress=False)
    thread.join(timeout=5)
    attempts = sorted(p.name for p in marks.iterdir())
    assert len(attempts) == 2, attempts  # killed once, retried once
    assert attempts[0].split("-")[1] != attempts[1].split("-")[1]  # on another worker process
    assert summary["errors"] == 0 and summary["finished"] == len(specs)
    got = lines(tmp_path / "run")  # asserts that no key is recorded twice
    assert target in got and len(got) == len(specs)
    assert errors(tmp_path / "run") == []
    ref = run_experiment(exp, tmp_path / "ref", executor=InProcessExecutor(), progress=False)
    assert ref["finished"] == len(specs) and lines(tmp_path / "ref") == got


def test_worker_dying_on_every_attempt_becomes_an_error_then_resumes(local_ray, tmp_path):
    exp = validate(SMALL)
    target = expand(exp)[2].key
    marks = tmp_path / "attempts"
    marks.mkdir()

    def always_dies(spec):
        import os as _os

        from pushbench.runner.executors.base import run_spec

        if spec.key == target:
            (marks / f"{len(_os.listdir(marks))}").touch()
            _os._exit(1)
        return run_spec(spec)

    with RayExecutor(fn=always_dies) as ex:
        summary = run_experiment(exp, tmp_path / "run", executor=ex, progress=False)
    assert len(list(marks.iterdir())) == 2  # first attempt + max_retries=1
    assert summary["errors"] == 1 and summary["error_keys"] == [target]
    assert summary["finished"] == 15 and target not in lines(tmp_path / "run")
    (err,) = errors(tmp_path / "run")
    assert err["key"] == target and "infrastructure failure" in err["error"]
    # errors run again on resume, and the episode is then recorded once
    with RayExecutor() as ex:
        again = run_experiment(exp, tmp_path / "run", executor=ex, progress=False)
    assert again["ran"] == 1 and again["skipped"] == 15 and again["errors"] == 0
    assert target in lines(tmp_path / "run")


def test_episode_exceptions_are_not_retried(local_ray, tmp_path):
    exp = validate(SMALL)
    target = expand(exp)[0].key
    marks = tmp_path / "attempts"
    marks.mkdir()

    def raises(spec):
        import os as _os

        from pushbench.runner.executors.base import run_spec

        if spec.key == target:
            (marks / f"{len(_os.listdir(marks))}").touch()
            raise RuntimeError("agent blew up")
        return run_spec(spec)

    with RayExecutor(fn=raises) as ex:
        summary = run_experiment(exp, tmp_path / "run", executor=ex, progress=False)
    assert len(list(marks.iterdir())) == 1
    assert summary["errors"] == 1 and summary["finished"] == 15
    (err,) = errors(tmp_path / "run")
    assert "agent blew up" in err["error"]
    # an exception inside the episode itself (the real path: run_spec in the worker) comes
    # back as an error result carrying the traceback, once
    spec = EpisodeSpec(
        task_id="RepoScan-N10",
        instance="no-such-instance",
        controller="standard",
        policy="diligent",
        seed=0,
        key="bad-instance",
    )
    with RayExecutor() as ex:
        (result,) = list(ex.run([spec]))
    assert result.spec == spec and result.line is None
    assert "Traceback" in result.error and "no-such-instance" in result.error


@pytest.mark.timeout(300)
def test_a_worker_dying_while_holding_a_model_call_slot_does_not_leak_it(local_ray, tmp_path):
    """Cap 1; the target dies inside its slot on every attempt. The retry's begin() and then the
    driver's end() hand the slot back, so the other episodes still finish (a leak would hang)."""
    from pushbench import limits

    exp = validate({**SMALL, "max_inflight_per_endpoint": {"http://fake/v1": 1}})
    target = expand(exp)[1].key
    marks = tmp_path / "attempts"
    marks.mkdir()

    def dies_in_slot(spec):
        import os as _os

        from pushbench import limits as _limits
        from pushbench.runner.executors.base import run_spec

        with _limits.model_call("http://fake/v1"):
            if spec.key == target:
                (marks / f"{len(_os.listdir(marks))}").touch()
                _os._exit(1)
        return run_spec(spec)

    ex = RayExecutor(fn=dies_in_slot)
    with ex:
        summary = run_experiment(exp, tmp_path / "run", executor=ex, progress=False)
    assert len(list(marks.iterdir())) == 2
    assert summary["errors"] == 1 and summary["finished"] == 15
    stats = ex.limiter_stats[limits.endpoint_key("http://fake/v1")]
    assert stats["peak"] == 1 and stats["in_flight"] == 0 and stats["calls"] == 17


def test_endpoint_cap_holds_across_ray_workers(local_ray, tmp_path):
    """LLM episodes (real client, stub server) packed 8 to the 2 CPUs; the cap is 2."""
    pytest.importorskip("openai")
    from test_limits import CountingStub

    from pushbench import limits

    with CountingStub(latency=0.05) as server:
        params = {"model": "stub", "base_url": server.url, "api_key_env": None}
        exp = validate(
            {
                **SMALL,
                "tasks": ["RepoScan-N10"],
                "controllers": ["standard"],
                "policies": [{"name": "llm", "params": params}],
                "seeds": list(range(8)),
                "budget": 4,
                "executor": "ray",
                "executor_options": {"ray": {"task_cpus": 0.25}},
                "max_inflight_per_endpoint": {server.url: 2},
            }
        )
        ex = make_executor("ray", **exp.options_for_executor())
        with ex:
            summary = run_experiment(exp, tmp_path / "capped", executor=ex, progress=False)
        assert summary["errors"] == 0 and summary["finished"] == 8
        assert server.calls == 32 and server.peak == 2
        stats = ex.limiter_stats[limits.endpoint_key(server.url)]
        assert stats["cap"] == 2 and stats["peak"] == 2 and stats["calls"] == 32
        assert stats["in_flight"] == 0

        # the same sweep without the cap really does overlap more calls (the test can fail)
        server.probe.peak = 0
        free = validate({**exp.model_dump(), "max_inflight_per_endpoint": {}})
        with make_executor("ray", **exp.options_for_executor()) as ex2:
            s2 = run_experiment(free, tmp_path / "free", executor=ex2, progress=False)
        assert s2["errors"] == 0 and server.peak > 2


def test_async_model_calls_inside_a_ray_task_share_the_cap(local_ray, tmp_path):
    """The limiter's async path (``amodel_call`` awaiting the actor) under Ray."""
    from pushbench import limits

    exp = validate(
        {
            **SMALL,
            "seeds": [0],
            "controllers": ["standard"],
            "max_inflight_per_endpoint": {"http://fake/v1": 2},
        }
    )
    peaks = tmp_path / "peaks"
    peaks.mkdir()

    def async_calls(spec):
        import asyncio

        from pushbench import limits as _limits
        from pushbench.runner.executors.base import run_spec

        state = {"now": 0, "peak": 0}

        async def call() -> None:
            async with _limits.amodel_call("http://fake/v1"):
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
                await asyncio.sleep(0.02)
                state["now"] -= 1

        async def main() -> None:
            await asyncio.gather(*(call() for _ in range(5)))

        asyncio.run(main())
        (peaks / spec.key).write_text(str(state["peak"]))
        return run_spec(spec)

    ex = RayExecutor(fn=async_calls)
    with ex:
        summary = run_experiment(exp, tmp_path / "run", executor=ex, progress=False)
    assert summary["errors"] == 0 and summary["finished"] == 4
    assert all(int(p.read_text()) <= 2 for p in peaks.iterdir())
    stats = ex.limiter_stats[limits.endpoint_key("http://fake/v1")]
    assert stats["peak"] == 2 and stats["calls"] == 20 and stats["in_flight"] == 0


def test_cost_cap_admission_and_resume_on_ray(local_ray, tmp_path):
    """Admission runs in the driver, so the cap holds on Ray; a capped run resumed with a
    higher cap ends with exactly the episodes of an uncapped run (the per-call cut is not
    shared across a cluster: docs/llm.md)."""
    pytest.importorskip("openai")
    from pushbench.policies.llm.stub import StubServer
    from pushbench.runner.costcap import worst_cases

    with StubServer(fixed_usage={"prompt_tokens": 1000, "completion_tokens": 50}) as stub:
        params = {
            "model": "stub",
            "base_url": stub.url,
            "api_key_env": None,
            "context_tokens": 2000,
            "max_tokens": 100,
            "timeout": 30,
            "prices": {"stub": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}},
        }
        exp = validate(
            {
                "name": "ray-cost",
                "tasks": ["RepoScan-N10"],
                "controllers": ["standard", "stateqgp"],
                "policies": [{"name": "llm", "params": params}],
                "seeds": [0, 1],
                "budget": 3,
            }
        )
        run_experiment(exp, tmp_path / "uncapped", executor=InProcessExecutor(), progress=False)
        cap = 2.5 * max(worst_cases(expand(exp), allow_unpriced=False).values())
        with RayExecutor() as ex:
            s = run_experiment(
                exp, tmp_path / "capped", executor=ex, progress=False, max_cost_usd=cap
            )
        assert 2 <= s["ran"] < 4 and s["spent_usd"] <= cap and s["stopped_by_cap"]
        with RayExecutor() as ex:
            s2 = run_experiment(
                exp, tmp_path / "capped", executor=ex, progress=False, max_cost_usd=100.0
            )
        assert s2["not_run"] == 0
        assert lines(tmp_path / "capped") == lines(tmp_path / "uncapped")
