"""A small real run folder for the viewer tests (shared by the fast and the browser tests).

The smoke experiment (2 tasks x standard/stateqgp x diligent/random x 2 seeds, real episodes)
plus one real episode of an agent whose ``final`` message is markup and two episodes of the
``llm`` policy against the stub chat server (a real HTTP server on 127.0.0.1 answering with a
deterministic agent; the second gets a 401, a backend error): all written through the runner's
own writer, as any finished episode is.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pushbench.policies.base import Policy

HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> & "quotes" </pre>'
)
HOSTILE_TASK = "RepoScan-requests-docstring-N10"
LLM_TASK = "RepoScan-flask-decorated-N10"
EXPERIMENT = Path(__file__).resolve().parents[1] / "experiments" / "smoke.yaml"


class MarkupInFinal(Policy):
    """Searches once, then ends with ``final`` claiming 10 and a message that is markup."""

    name = "markup-final"

    def reset(self, first_observation: str) -> None:
        self.n = 0

    def act(self, observation: str) -> dict:
        self.n += 1
        if self.n == 1:
            return {"tool": "search", "query": "", "page": 1}
        return {"tool": "final", "reported_count": 10, "message": HOSTILE}


def small_run(out: Path, report: bool = False) -> Path:
    """Run the smoke experiment into ``out`` and add the markup episode; return ``out``.

    ``report``: also write the figures, ``summary.csv`` and ``paired_deltas.csv`` as
    ``pushbench run`` does (without them the viewer computes the tables itself).
    """
    import io
    import json

    from rich.console import Console

    from pushbench.policies.llm.stub import StubServer
    from pushbench.records import encode_trace, episode_line
    from pushbench.runner.episode import run_episode
    from pushbench.runner.experiment import load_experiment
    from pushbench.runner.rundir import RunDir
    from pushbench.runner.spec import EpisodeResult
    from pushbench.runner.sweep import report_and_plot, run_experiment

    run_experiment(load_experiment(EXPERIMENT), out, progress=False)
    records = [run_episode(HOSTILE_TASK, "standard", MarkupInFinal(seed=0), seed=0)]
    with StubServer() as server:
        params = {"model": "stub-model", "base_url": server.url, "api_key_env": None, "timeout": 10}
        records.append(run_episode(LLM_TASK, "stateqgp", "llm", 0, budget=12, policy_params=params))
        server.push({"status": 401, "message": "invalid api key"})  # a permanent failure
        records.append(run_episode(LLM_TASK, "standard", "llm", 0, budget=12, policy_params=params))
    manifest = json.loads((out / "manifest.json").read_text())
    with RunDir(out).open(manifest["experiment"], manifest["result_fields"]) as rd:
        for record in records:
            rd.write(
                EpisodeResult(
                    spec=SimpleNamespace(key=record["key"]),
                    line=episode_line(record),
                    trace_gz=encode_trace(record),
                )
            )
    if report:
        quiet = Console(file=io.StringIO())
        report_and_plot(out, console=quiet, out=quiet, n_resamples=999)
    return out
