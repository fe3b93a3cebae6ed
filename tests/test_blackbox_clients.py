"""The real black-box clients (Claude Code, Codex CLI from npm) driving PushBench episodes.

Each client runs headless in its own temporary home, with its MCP client starting
``pushbench mcp`` and its model requests going to the loopback model server running
``diligent`` (every other connection goes to a closed loopback proxy). The episode record must
equal the in-process ``diligent`` episode of the same task and seed, succeed, and evaluate to
the expected row. ``.ci/run`` installs pinned client versions and sets
``PUSHBENCH_REQUIRE_CLIENTS=1``, so a missing client fails there instead of skipping.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mcp", reason="needs the 'mcp' extra")
pytest.importorskip("starlette", reason="needs the 'modelserver' extra")

from pushbench import blackbox_run
from pushbench.blackbox import clients as blackbox_clients
from pushbench.runner.episode import run_episode

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
TASK, SEED = "RepoScan-N10", 0
CALL_FIELDS = ("tool", "args", "ok", "verdicts", "valid_count")


def binary(agent: str) -> str:
    try:
        return blackbox_clients.find_binary(agent)
    except FileNotFoundError as e:
        if os.environ.get("PUSHBENCH_REQUIRE_CLIENTS") == "1":
            pytest.fail(str(e))
        pytest.skip(str(e))


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_real_client_runs_diligent_like_in_process(agent, tmp_path):
    binary(agent)
    out = tmp_path / "batch"
    batch = blackbox_run.Batch(
        agent=agent,
        tasks=[TASK],
        seeds=[SEED],
        condition="default",
        out=out,
        policy="diligent",
        timeout=600,
    )
    summary = blackbox_run.run_batch(batch, log=lambda m: None)
    ep = blackbox_run.episode_dir(batch, TASK, SEED)
    client = json.loads((ep / "client.json").read_text())
    assert client["rc"] == 0 and not client["timed_out"], (ep / "client.err").read_text()[-2000:]
    assert client["offline"] and client["endpoint"].startswith("http://127.0.0.1:")
    rec = json.loads((ep / "run" / "episode.json").read_text())
    ref = run_episode(TASK, "standard", "diligent", SEED)
    strip = lambda r: [{k: c.get(k) for k in CALL_FIELDS} for c in r["calls"]]  # noqa: E731
    assert strip(rec) == strip(ref)  # the harness added and lost nothing
    assert rec["success"] and rec["terminated_by"] == "final"
    assert summary["harness"] == {
        "episodes": 1,
        "calls_equal": 1,
        "success_in_process": 1,
        "success_harness": 1,
    }
    # every model request was answered by the model server, none refused
    reqs = [json.loads(x) for x in (ep / "model-server.jsonl").read_text().splitlines()]
    assert reqs and all(r["status"] == 200 for r in reqs)
    assert reqs[-1]["decision"]["ended_by"] == "final"
    # `pushbench evaluate` gives the expected row
    report = tmp_path / "report"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "evaluate",
            str(ep / "run"),
            "--out",
            str(report),
            "--resamples",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in (report / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 1
    line = lines[0]
    assert line["policy"]["name"] == f"blackbox-mcp:{agent}:default"
    assert line["success"] and line["tampered"] is False and not line.get("incomplete")
    assert line["valid_count"] == ref["valid_count"] >= line["target"]
    assert line["metrics"]["steps_used"] == len(ref["calls"])
    rows = list(csv.DictReader(open(report / "summary.csv")))
    mine = [r for r in rows if r["policy"] == f"blackbox-mcp:{agent}:default"]
    assert len(mine) == 1 and float(mine[0]["success_rate"]) == 1.0, mine
    assert float(mine[0]["mean_valid_count"]) == ref["valid_count"]
    assert float(mine[0]["mean_steps_used"]) == len(ref["calls"])


def test_claude_mcp_list_health_checks_then_the_agent_run(tmp_path):
    """The issue's sequence: ``claude mcp add``, ``claude mcp list`` twice (each starts the
    server), then the headless run: the checks must not use up or refuse the episode."""
    from pushbench import modelserver
    from pushbench.blackbox.episode_prompt import episode_prompt

    claude = binary("claude-code")
    ep, task = tmp_path / "ep", "RepoScan-requests-docstring-N10"
    (ep / "agent").mkdir(parents=True)
    cmd = blackbox_clients.server_command(
        task, 0, "default", "claude-code", ep / "run", ep / "agent" / "repo", "standard", None
    )
    with modelserver.running(modelserver.PolicyBackend("diligent", None, 0)) as url:
        launch = blackbox_clients.claude_code(
            claude,
            ep,
            episode_prompt("default", task, 0),
            cmd,
            blackbox_clients.Endpoint(base_url=url),
        )
        env = {**launch.env, **blackbox_clients.server_env()}

        def run(*args):
            return subprocess.run(
                [claude, *args],
                cwd=ep / "agent",
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )

        added = run("mcp", "add", "--transport", "stdio", "pushbench", "--", *cmd)
        assert added.returncode == 0, added.stderr
        for _ in range(2):
            listed = run("mcp", "list")
            assert "pushbench" in listed.stdout and "Connected" in listed.stdout, listed.stdout
        i = launch.argv.index("--mcp-config")  # now the local-scope server `claude mcp add` wrote
        agent = run(*launch.argv[1:i], *launch.argv[i + 3 :])
    assert agent.returncode == 0, agent.stdout[-2000:] + agent.stderr[-2000:]
    rec = json.loads((ep / "run" / "episode.json").read_text())
    ref = run_episode(task, "standard", "diligent", 0)
    strip = lambda r: [{k: c.get(k) for k in CALL_FIELDS} for c in r["calls"]]  # noqa: E731
    assert strip(rec) == strip(ref) and rec["success"]
    run_json = json.loads((ep / "run" / "run.json").read_text())
    assert len(run_json["reattached"]) >= 2  # both health checks and the run share the episode
