"""``pushbench blackbox run`` pieces that need no real client: client configuration, offline
environment, the in-process pairing, the per-episode timeout and the command's input errors.
The real clients run in tests/test_blackbox_clients.py (slow)."""

from __future__ import annotations

import json
import os
import stat
import sys
import tomllib

import pytest
from typer.testing import CliRunner

from pushbench import blackbox_run
from pushbench.blackbox import clients as bc
from pushbench.cli import app

TASK = "RepoScan-requests-docstring-N10"


def _executable(path, text: str):
    """``path`` written with ``text`` and made executable: a fake client."""
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _batch(out, client_bin: str, timeout: float, agent: str = "claude-code"):
    """One episode of ``TASK`` (seed 0, condition default) through ``client_bin``, the offline
    ``diligent`` policy behind the model server."""
    return blackbox_run.Batch(
        agent=agent,
        tasks=[TASK],
        seeds=[0],
        condition="default",
        out=out,
        policy="diligent",
        timeout=timeout,
        client_bin=client_bin,
    )


def test_client_configs_are_written_the_documented_way(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-real-key-must-not-leak")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-key-must-not-leak")
    ep = tmp_path / "ep"
    (ep / "agent").mkdir(parents=True)
    cmd = bc.server_command(
        TASK, 3, "checklist", "codex", ep / "run", ep / "agent" / "repo", "standard", 40
    )
    end = bc.Endpoint(base_url="http://127.0.0.1:5555")
    cc = bc.claude_code("/bin/true", ep, "PROMPT", cmd, end)
    mcp = json.loads((ep / "agent" / ".mcp.json").read_text())["mcpServers"]["pushbench"]
    assert [mcp["command"], *mcp["args"]] == cmd and mcp["env"]["PUSHBENCH_HOME"]
    assert cc.argv[cc.argv.index("--mcp-config") + 2] == "--strict-mcp-config"
    assert cc.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:5555"
    assert cc.env["ENABLE_TOOL_SEARCH"] == "false" and cc.env["HOME"].startswith(str(ep))
    assert cc.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    cx = bc.codex("/bin/true", ep, "PROMPT", cmd, end)
    cfg = tomllib.loads((ep / "client-home" / ".codex" / "config.toml").read_text())
    assert cfg["model_providers"]["pushbench"]["base_url"] == "http://127.0.0.1:5555/v1"
    assert cfg["model_providers"]["pushbench"]["wire_api"] == "responses"
    srv = cfg["mcp_servers"]["pushbench"]
    assert [srv["command"], *srv["args"]] == cmd and srv["required"] is True
    assert srv["startup_readiness"] == "catalog" and srv["env"]["PUSHBENCH_HOME"]
    assert cfg["features"]["incremental_tools"] is False and cfg["analytics"]["enabled"] is False
    assert cx.env["CODEX_HOME"] == str(ep / "client-home" / ".codex")
    for launch in (cc, cx):  # offline: no inherited keys, every non-loopback route closed
        assert "sk-real-key-must-not-leak" not in json.dumps(launch.env)
        assert launch.env["HTTPS_PROXY"] == bc.DEAD_PROXY and "127.0.0.1" in launch.env["NO_PROXY"]
    real = bc.Endpoint(base_url="https://models.invalid", api_key="k", model="m", offline=False)
    assert "HTTPS_PROXY" not in bc.claude_code("/bin/true", ep, "P", cmd, real).env


def test_compare_names_the_first_difference():
    a = {
        "calls": [
            {"tool": "search", "args": {"q": 1}, "ok": True, "valid_count": 0},
            {"tool": "final", "args": {}, "ok": True, "valid_count": 0},
        ],
        "success": False,
        "valid_count": 0,
        "terminated_by": "final",
    }
    assert blackbox_run.compare(a, a)["calls_equal"]
    b = json.loads(json.dumps(a))
    b["calls"][1]["tool"] = "status"
    assert blackbox_run.compare(a, b)["first_difference"] == 2
    c = {**a, "calls": a["calls"][:1], "terminated_by": None}
    row = blackbox_run.compare(a, c)
    assert row["first_difference"] == 2 and row["steps_harness"] == 1
    assert row["ended_harness"] is None


def test_a_client_that_hangs_is_killed_at_the_timeout(tmp_path):
    script = _executable(tmp_path / "claude", "#!/bin/sh\necho started\nsleep 300 &\nwait\n")
    b = _batch(tmp_path / "out", str(script), timeout=2)
    summary = blackbox_run.run_batch(b, log=lambda m: None)
    ep = blackbox_run.episode_dir(b, TASK, 0)
    client = json.loads((ep / "client.json").read_text())
    assert client["timed_out"] and client["rc"] != 0 and client["seconds"] < 60
    assert (ep / "client.out").read_text() == "started\n"
    assert summary["recorded"] == 0 and summary["never_started"]  # the client never started it
    assert (ep / "prompt.txt").read_text().count('"tool":"reset"') == 1


# A client that starts the episode server in a session of its own, as the MCP SDK does, keeps
# its stdin open from another detached process (what a killed Letta server's surviving
# children amount to) and exits: the server would wait for input forever.
ORPHANING_CLIENT = """#!{python}
import json, os, subprocess, sys
cfg = json.load(open(sys.argv[sys.argv.index("--mcp-config") + 1]))["mcpServers"]["pushbench"]
r, w = os.pipe()
holder = subprocess.Popen(["sleep", "600"], pass_fds=(w,), start_new_session=True)
server = subprocess.Popen(
    [cfg["command"], *cfg["args"]], stdin=r, stdout=subprocess.DEVNULL,
    env={{**os.environ, **cfg["env"]}}, start_new_session=True,
)
open("pids.json", "w").write(json.dumps({{"holder": holder.pid, "server": server.pid,
    "argv": [cfg["command"], *cfg["args"]]}}))
"""


def test_an_episode_server_that_outlives_its_client_is_stopped(tmp_path, monkeypatch):
    # CI once found a `pushbench mcp` left running after a Letta server was killed mid-episode
    # (tests/test_letta.py): the MCP SDK starts stdio servers in a session of their own, out of
    # the reach of the client's process group.
    from pushbench.processes import running_with_argv

    script = _executable(tmp_path / "claude", ORPHANING_CLIENT.format(python=sys.executable))
    monkeypatch.setattr(blackbox_run, "ORPHAN_GRACE", 1.0)
    b = _batch(tmp_path / "out", str(script), timeout=120)
    lines: list[str] = []
    ep = blackbox_run.episode_dir(b, TASK, 0)
    try:
        summary = blackbox_run.run_batch(b, log=lines.append)
        pids = json.loads((ep / "agent" / "pids.json").read_text())
        client = json.loads((ep / "client.json").read_text())
        assert client["rc"] == 0, (ep / "client.err").read_text()
        assert [o["pid"] for o in client["orphan_servers"]] == [pids["server"]]
        assert client["orphan_servers"][0]["stopped_by"] in ("SIGTERM", "SIGKILL")
        assert running_with_argv([pids["argv"]]) == {}
        assert summary["orphan_servers"] == []  # nothing was left for the batch's last sweep
        assert any(f"pid {pids['server']}) outlived its client" in ln for ln in lines), lines
    finally:
        if (ep / "agent" / "pids.json").exists():
            os.kill(json.loads((ep / "agent" / "pids.json").read_text())["holder"], 9)


def test_a_client_given_by_a_relative_path_starts_from_the_workspace(tmp_path, monkeypatch):
    # The client runs with the episode workspace as its working folder; CI once passed
    # `.venv/npm-clients/...` and every client failed to start with FileNotFoundError.
    (tmp_path / "bin").mkdir()
    script = _executable(tmp_path / "bin" / "claude", "#!/bin/sh\necho started\n")
    monkeypatch.chdir(tmp_path)
    assert bc.find_binary("claude-code", "bin/claude") == str(script)
    b = _batch(tmp_path / "out", "bin/claude", timeout=60)
    blackbox_run.run_batch(b, log=lambda m: None)
    ep = blackbox_run.episode_dir(b, TASK, 0)
    assert (ep / "client.out").read_text() == "started\n"
    assert json.loads((ep / "client.json").read_text())["rc"] == 0


FAKE_CLIENTS = {  # each prints "config found" when the paths it was given exist where it runs
    "claude-code": (
        'while [ $# -gt 0 ]; do [ "$1" = --mcp-config ] && cfg=$2; shift; done\n'
        'test -f "$cfg" && echo "config found"\n'
    ),
    "codex": (
        'test -f "$CODEX_HOME/config.toml" || exit 3\n'
        'while [ $# -gt 0 ]; do [ "$1" = --cd ] && test -d "$2" && echo "config found"; '
        "shift; done\n"
    ),
}


@pytest.mark.parametrize("agent", sorted(FAKE_CLIENTS))
def test_a_relative_out_folder_still_names_the_client_config(agent, tmp_path, monkeypatch):
    # `pushbench blackbox run --out runs/x` as the docs write it: the client starts in the
    # episode's agent folder, where relative config paths named nothing (found by the
    # black-box tutorial, docs/tutorials/blackbox-client.md).
    script = _executable(tmp_path / "client", "#!/bin/sh\n" + FAKE_CLIENTS[agent])
    monkeypatch.chdir(tmp_path)
    b = _batch("runs/rel", str(script), timeout=60, agent=agent)
    blackbox_run.run_batch(b, log=lambda m: None)
    ep = tmp_path / "runs" / "rel" / agent / TASK / "default" / "seed0"
    client = json.loads((ep / "client.json").read_text())
    assert (client["rc"], (ep / "client.out").read_text()) == (0, "config found\n")
    assert client["cwd"] == str(ep / "agent")


def test_blackbox_run_exits_1_when_an_episode_has_no_record(tmp_path):
    """A client that exits without starting the episode (bad key, bad config, crash) leaves
    no record: the command says so and fails instead of printing a clean summary."""
    script = _executable(tmp_path / "claude", "#!/bin/sh\necho 'no model' >&2\nexit 0\n")
    r = CliRunner().invoke(
        app,
        [
            "blackbox",
            "run",
            "--agent",
            "claude-code",
            "--tasks",
            TASK,
            "--out",
            str(tmp_path / "out"),
            "--model-server",
            "diligent",
            "--client-bin",
            str(script),
        ],
    )
    assert r.exit_code == 1, r.output
    assert "1 episode(s) without a record" in r.output and "client.err" in r.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--agent", "cursor"], "choose claude-code, codex or letta"),
        (["--agent", "codex", "--condition", "nagging"], "--condition 'nagging'"),
        (["--agent", "codex"], "exactly one of --model-server"),
        (["--agent", "codex", "--model-server", "llm"], "not an offline policy"),
        (
            ["--agent", "codex", "--model-server", "diligent", "--params", '{"x": 1}'],
            "unknown parameter",
        ),
        (["--agent", "codex", "--model-server", "diligent", "--seeds", "a"], "integers"),
        (
            ["--agent", "codex", "--base-url", "http://x", "--api-key-env", "PB_UNSET_KEY_VAR"],
            "not set",
        ),
    ],
)
def test_blackbox_run_input_errors(tmp_path, args, message):
    os.environ.pop("PB_UNSET_KEY_VAR", None)
    r = CliRunner().invoke(app, ["blackbox", "run", "--tasks", TASK, "--out", str(tmp_path), *args])
    assert r.exit_code == 2 and message in r.output, r.output


def test_mcp_prompt_with_task_ends_with_the_first_observation():
    r = CliRunner().invoke(app, ["mcp-prompt", "checklist", "--task", TASK, "--seed", "1"])
    assert r.exit_code == 0
    first = r.output.split("```json\n", 1)[1].split("\n```", 1)[0]
    obs = json.loads(first)
    assert obs["tool"] == "reset" and obs["result"]["target"] == 10
    assert r.output.startswith("You are connected") and "Keep this checklist" in r.output
    bad = CliRunner().invoke(app, ["mcp-prompt", "default", "--task", "RepoScan-nope-N10"])
    assert bad.exit_code == 2 and "RepoScan-nope-N10" in bad.output


def test_a_batch_needs_exactly_one_of_policy_and_endpoint(tmp_path):
    # Found by mypy (issue 34): a Batch with neither handed endpoint=None to the client
    # launcher, which failed only when the first episode started.
    from pushbench.blackbox import clients

    common = dict(agent="codex", tasks=[TASK], seeds=[0], condition="default", out=tmp_path / "out")
    with pytest.raises(ValueError, match="exactly one of policy and endpoint"):
        blackbox_run.Batch(**common)
    with pytest.raises(ValueError, match="exactly one of policy and endpoint"):
        blackbox_run.Batch(
            **common, policy="diligent", endpoint=clients.Endpoint(base_url="http://127.0.0.1:1")
        )
    assert blackbox_run.Batch(**common, policy="diligent").policy == "diligent"
