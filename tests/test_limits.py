"""Endpoint caps (pushbench.limits): the local limiter and how sweeps apply caps (fast)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from pushbench import limits
from pushbench.runner.executors.local import InProcessExecutor, LocalPoolExecutor
from pushbench.runner.experiment import ExperimentError, validate

BASE = {
    "name": "caps",
    "tasks": ["RepoScan-requests-docstring-N10"],
    "controllers": ["standard"],
    "policies": ["diligent"],
    "seeds": [0],
}


class Probe:
    """Counts how many holders are inside at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = self.total = 0

    def enter(self) -> None:
        with self.lock:
            self.total += 1
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


def test_endpoint_key_and_cap_lookup(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert limits.endpoint_key("http://h:1/v1/") == "http://h:1/v1"
    assert limits.endpoint_key(None) == limits.OPENAI_DEFAULT_BASE_URL
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy/v1")
    assert limits.endpoint_key(None) == "http://proxy/v1"
    caps = {"http://h:1/v1/": 3, "*": 5}
    assert limits.cap_for(caps, "http://h:1/v1") == 3
    assert limits.cap_for(caps, "http://other/v1") == 5
    assert limits.cap_for({"http://h:1/v1": 3}, "http://other/v1") is None


def test_model_call_is_a_noop_without_a_limiter():
    assert limits.installed() is None
    with limits.model_call("http://x/v1"):
        pass
    asyncio.run(_noop_async())


async def _noop_async() -> None:
    async with limits.amodel_call(None):
        pass


def test_local_limiter_caps_threads():
    lim = limits.LocalLimiter({"http://a/v1": 2})
    probe = Probe()

    def call() -> None:
        with lim.slot("http://a/v1"):
            probe.enter()
            time.sleep(0.02)
            probe.leave()

    threads = [threading.Thread(target=call) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert probe.peak == 2
    assert lim.stats()["http://a/v1"] == {"cap": 2, "in_flight": 0, "peak": 2, "calls": 10}


def test_local_limiter_caps_asyncio_and_survives_cancellation():
    lim = limits.LocalLimiter({"*": 3})
    probe = Probe()

    async def call() -> None:
        async with lim.aslot("http://b/v1"):
            probe.enter()
            await asyncio.sleep(0.01)
            probe.leave()

    async def main() -> None:
        waiting = [asyncio.ensure_future(call()) for _ in range(6)]
        await asyncio.sleep(0.001)
        for t in waiting[3:]:  # cancel some while they wait for a slot
            t.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await asyncio.gather(*(call() for _ in range(20)))

    asyncio.run(main())
    assert probe.peak == 3
    assert lim.stats()["http://b/v1"]["in_flight"] == 0  # no slot leaked by the cancellations


def test_uncapped_endpoints_are_not_limited():
    lim = limits.LocalLimiter({"http://a/v1": 1})
    inside = threading.Event()

    def nested() -> None:  # two slots at once on an endpoint without a cap
        with lim.slot("http://other/v1"), lim.slot("http://other/v1"):
            inside.set()

    t = threading.Thread(target=nested, daemon=True)  # a regression blocks here, not the suite
    t.start()
    t.join(timeout=10)
    assert inside.is_set() and not t.is_alive(), "an uncapped endpoint was limited"
    assert lim.stats()["http://other/v1"] == {"cap": None, "in_flight": 0, "peak": 2, "calls": 2}


def test_apply_installs_a_local_limiter_for_in_process_executors():
    undo = InProcessExecutor().enforce_caps({"*": 2})
    try:
        assert isinstance(limits.installed(), limits.LocalLimiter)
    finally:
        undo()
    assert limits.installed() is None
    assert InProcessExecutor().enforce_caps({})() is None


def test_process_pool_refuses_caps_below_its_worker_count():
    with pytest.raises(ValueError, match="process pool"):
        LocalPoolExecutor(workers=3).enforce_caps({"*": 2})
    LocalPoolExecutor(workers=2).enforce_caps({"*": 2})()  # one call per worker: fine
    with pytest.raises(ExperimentError, match="process pool"):
        validate({**BASE, "workers": 4, "max_inflight_per_endpoint": {"*": 1}})


def test_experiment_validates_caps_and_executor_options():
    exp = validate(
        {
            **BASE,
            "executor": "ray",
            "max_inflight_per_endpoint": {"http://x/v1": 4},
            "executor_options": {"ray": {"address": "auto"}},
        }
    )
    assert exp.options_for_executor() == {"address": "auto"}
    assert "executor_options" not in exp.result_fields()
    assert (
        validate({**BASE, "executor_options": {"ray": {"address": "auto"}}}).options_for_executor()
        == {}
    )  # options of an executor not in use
    with pytest.raises(ExperimentError, match="integer >= 1"):
        validate({**BASE, "max_inflight_per_endpoint": {"http://x/v1": 0}})
    with pytest.raises(ExperimentError, match="not executors"):
        validate({**BASE, "executor_options": {"rayy": {"address": "auto"}}})
    with pytest.raises(ExperimentError, match="not options of that executor"):
        validate(
            {
                **BASE,
                "executor": "process",
                "workers": 2,
                "executor_options": {"process": {"address": "auto"}},
            }
        )


def test_async_sweep_respects_the_cap_through_the_model_client(tmp_path):
    """The real client path: LLM episodes on the async executor, server-side concurrency."""
    pytest.importorskip("openai")
    from pushbench.runner.sweep import run_experiment

    with CountingStub(latency=0.02) as server:
        params = {"model": "stub", "base_url": server.url, "api_key_env": None}
        exp = validate(
            {
                **BASE,
                "tasks": ["RepoScan-N10"],
                "policies": [{"name": "llm", "params": params}],
                "seeds": list(range(6)),
                "budget": 3,
                "executor": "async",
                "workers": 6,
                "max_inflight_per_endpoint": {server.url: 2},
            }
        )
        summary = run_experiment(exp, tmp_path / "run", progress=False)
    assert summary["errors"] == 0 and summary["finished"] == 6
    assert server.peak == 2 and server.calls == 18
    assert limits.installed() is None  # the sweep removed its limiter


def _counting_stub():
    from pushbench.policies.llm.stub import StubServer

    class _CountingStub(StubServer):
        """The test stub server, also counting requests being answered at once."""

        def __init__(self, **kw) -> None:
            super().__init__(**kw)
            self.probe = Probe()

        @property
        def peak(self) -> int:
            return self.probe.peak

        @property
        def calls(self) -> int:
            return self.probe.total

        def answer(self, path, body):
            self.probe.enter()
            try:
                return super().answer(path, body)
            finally:
                self.probe.leave()

    return _CountingStub


def CountingStub(**kw):  # reads like the class it builds
    return _counting_stub()(**kw)
