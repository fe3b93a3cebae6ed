"""Aider on SWE-lite (issue 28): the baseline installer, the oracle-edit answers, Aider's edits as
``edit_file`` calls, the step charge and backend errors of the harness.

The fast tests drive the harness with small stand-in programs in Aider's place (real
processes that write Aider's LLM-history format, edit a file, crash or hang), so the accounting
and the outcomes are checked without the 690 MB install; ``test_aider_oracle_episodes`` (slow)
installs the pinned Aider and runs it for real against the ``oracle-edit`` model server.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pushbench.baselines import installer as B
from pushbench.families.swelite import units as U
from pushbench.modelserver import build_app
from pushbench.modelserver.oracle_edit import OracleEditBackend, known_units
from pushbench.policies.aider import edits as E
from pushbench.policies.aider.policy import AiderPolicy
from pushbench.policies.aider.process import count_requests
from pushbench.runner.episode import run_episode

pytestmark = pytest.mark.timeout(900)
TINY = str(Path(__file__).parent / "data" / "swelite_tiny.yaml")


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setenv(U.RECIPE_ENV, TINY)
    return TINY


# ----- the pin file and the installer ---------------------------------------------------------
def test_shipped_pin_is_one_exact_aider_version():
    pin = B.read_pin("aider")
    assert pin.requirements == ("aider-chat==0.86.2",)
    assert pin.version_of("aider_chat") == "0.86.2"


@pytest.mark.parametrize(
    "text,why",
    [
        ("aider-chat>=0.86\n", "not an exact pin"),
        ("# nothing\n\n", "pins nothing"),
        ("aider-chat==1\naider_chat==2\n", "twice"),
        ("-e .\n", "not an exact pin"),
        ("https://x/y.whl\n", "not an exact pin"),
    ],
)
def test_pin_file_errors_name_the_problem(text, why):
    with pytest.raises(B.BaselineError, match=why):
        B.parse_pin("aider", text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_pin_text_parses_to_exact_pins_or_one_clear_error(text):
    try:
        pin = B.parse_pin("aider", text)
    except B.BaselineError as e:
        assert "\n" not in str(e)
        return
    assert pin.requirements and all(
        re.fullmatch(r"[^=\s#]+==[^=\s#]+", r) for r in pin.requirements
    )


def _fake_runner(calls):
    """Does what ``python -m venv`` + pip leave behind (the program), recording each call."""

    def run(cmd, **kw):
        calls.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
        else:
            prog = Path(cmd[0]).parent / "aider"
            prog.write_text("#!/bin/sh\n")
        import subprocess

        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def test_install_is_idempotent_by_the_pins_digest(tmp_path, monkeypatch):
    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))
    calls: list = []
    first = B.install("aider", run=_fake_runner(calls))
    assert not first["kept"] and first["version"] == "0.86.2" and len(calls) == 2
    assert "aider-chat==0.86.2" in calls[1]
    assert B.installed("aider")["pin_digest"] == B.read_pin("aider").digest
    again = B.install("aider", run=_fake_runner(calls))
    assert again["kept"] and len(calls) == 2  # nothing run the second time
    # another pin: the marker no longer matches, the venv is rebuilt
    pins = tmp_path / "pins"
    pins.mkdir()
    (pins / "aider.txt").write_text("aider-chat==0.86.1\n")
    monkeypatch.setattr(B, "_PIN_DIR", pins)
    assert B.installed("aider") is None
    assert B.list_baselines()[0]["state"].startswith("stale")
    third = B.install("aider", run=_fake_runner(calls))
    assert not third["kept"] and third["version"] == "0.86.1" and len(calls) == 4


def test_pip_failure_is_one_line_quoting_pips_error(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))

    def run(cmd, **kw):
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return subprocess.CompletedProcess(
            cmd,
            1,
            "",
            "Looking in indexes: x\nERROR: Could not "
            "find a version that satisfies the requirement "
            "aider-chat==0.86.2\nhint: offline?\n",
        )

    with pytest.raises(B.BaselineError) as e:
        B.install("aider", run=run)
    assert str(e.value).endswith(
        "ERROR: Could not find a version that satisfies the requirement aider-chat==0.86.2"
    )
    assert "\n" not in str(e.value) and not B.venv_dir("aider").exists()


@pytest.mark.slow
def test_install_failure_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """Real venv + real pip against an empty wheel folder and no index: pip cannot serve it."""
    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))
    pins, wheels = tmp_path / "pins", tmp_path / "wheels"
    pins.mkdir()
    wheels.mkdir()
    (pins / "aider.txt").write_text("aider-chat==0.0.1\n")
    monkeypatch.setattr(B, "_PIN_DIR", pins)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    with pytest.raises(B.BaselineError) as e:
        B.install("aider")
    msg = str(e.value)
    assert "\n" not in msg and "aider-chat==0.0.1" in msg and "ERROR:" in msg
    assert not B.venv_dir("aider").exists() and B.installed("aider") is None


def test_cli_baselines_errors_are_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pushbench.cli import app

    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path))
    res = CliRunner().invoke(app, ["baselines", "install", "nosuch"])
    assert res.exit_code == 2 and "unknown baseline 'nosuch'" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(app, ["baselines", "list"])
    assert res.exit_code == 0 and "pinned 0.86.2" in res.output and "missing" in res.output


# ----- oracle-edit ---------------------------------------------------------------------------
_BLOCK = re.compile(
    r"^(?P<path>[^\n`]+)\n```[^\n]*\n<<<<<<< SEARCH\n(?P<search>.*?)^=======\n"
    r"(?P<replace>.*?)^>>>>>>> REPLACE\n```",
    re.MULTILINE | re.DOTALL,
)


def parse_blocks(text: str) -> list[tuple[str, str, str]]:
    """A small SEARCH/REPLACE parser, independent of the module that writes them."""
    return [(m["path"].strip(), m["search"], m["replace"]) for m in _BLOCK.finditer(text)]


def _chat(client, last_user: str, stream: bool, system: str = "You are Aider.") -> str:
    body = {
        "model": "pushbench-policy",
        "stream": stream,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Example request"},
            {"role": "assistant", "content": "Example answer"},
            {"role": "user", "content": last_user},
        ],
    }
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["choices"][0]["message"]["content"]
    text = ""
    for line in r.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            delta = json.loads(line[6:])["choices"][0]["delta"]
            text += delta.get("content") or ""
    return text


@pytest.mark.parametrize("stream", [False, True])
def test_oracle_edit_answers_with_the_reference_fix(tiny, stream):
    from starlette.testclient import TestClient

    units = known_units()
    assert len(units) >= 2
    client = TestClient(build_app(OracleEditBackend()))
    a, b = units[0], units[1]
    text = _chat(client, f"Fix these:\n{b['issue']}\n\n{a['issue']}\n", stream)
    blocks = parse_blocks(text)
    assert [p for p, _, _ in blocks] == [b["file"], a["file"]]  # in the message's order
    for (_path, search, replace), u in zip(blocks, (b, a), strict=True):
        assert search == u["mutated_func"] and replace == u["original_func"]
    # The answer comes from the last user message only (Aider's examples come first).
    assert parse_blocks(_chat(client, "Nothing here", stream)) == []
    commit = _chat(client, "diff --git ...", stream, system="Write a commit message for it")
    assert "oracle-edit" in commit and parse_blocks(commit) == []


def test_oracle_edit_on_the_cli_and_labelled_oracle():
    backend = OracleEditBackend()
    assert backend.describe()["oracle"] is True and "never a result" in backend.describe()["note"]


# ----- Aider's changes as edit_file calls ----------------------------------------------------
_lines = st.lists(
    st.sampled_from(["a\n", "b\n", "c\n", "    return x\n", "\n", "pass\n"]), max_size=25
)


@settings(max_examples=300, deadline=None)
@given(_lines.filter(bool), _lines)
def test_edit_calls_rebuild_the_new_text_with_unique_anchors(old, new):
    old_text, new_text = "".join(old), "".join(new)
    try:
        calls = E.edit_calls("f.py", old_text, new_text)
    except ValueError:
        assert not old_text  # only an empty file cannot anchor a change
        return
    cur = old_text
    for c in calls:  # applied as the environment's edit_file does it
        assert c["old"] and cur.count(c["old"]) == 1
        cur = cur.replace(c["old"], c["new"], 1)
    assert cur == new_text
    assert (calls == []) == (old_text == new_text)


def test_tree_and_changes_leave_out_aiders_files(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    before = E.tree(tmp_path)
    (tmp_path / "src" / "a.py").write_text("x = 2\n")
    (tmp_path / "src" / "b.py").write_text("new\n")
    (tmp_path / ".aider.tags.cache.v4").mkdir()
    (tmp_path / ".aider.chat.history.md").write_text("log")
    assert E.changes(before, E.tree(tmp_path)) == (["src/a.py"], ["src/b.py"], [])


# ----- the harness with stand-in programs ----------------------------------------------------
def _program(tmp_path: Path, body: str) -> str:
    """An executable in Aider's place: it gets Aider's argv and its cwd (the copy)."""
    p = tmp_path / "fake-aider"
    p.write_text(
        f"#!{sys.executable}\nimport sys, os, time, pathlib\n"
        "argv = sys.argv\n"
        "if '--version' in argv:\n    print('aider 0.0-standin'); sys.exit(0)\n"
        "hist = pathlib.Path(argv[argv.index('--llm-history-file') + 1])\n" + body
    )
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


_REQUESTS = (
    "for i in range({n}):\n"
    "    with open(hist, 'a') as f:\n"
    "        f.write(f'TO LLM 2026-01-01T00:00:0{{i}}\\nUSER hi\\n'\n"
    "                'LLM RESPONSE 2026-01-01T00:00:0{{i}}\\nASSISTANT ok\\n')\n"
)
_EDIT = (
    "f = pathlib.Path('src/requests/__version__.py')\n"
    "f.write_text(f.read_text() + '# touched by the stand-in\\n')\n"
)


def _episode(tmp_path, body, controller="standard", budget=None, **params):
    pol = AiderPolicy(
        seed=0, aider_bin=_program(tmp_path, body), base_url="http://127.0.0.1:9/v1", **params
    )
    return run_episode("SWELite-requests-N3", controller, pol, 0, budget=budget)


def test_count_requests_reads_aiders_llm_history():
    hist = (
        "TO LLM 2026-12-01T23:00:00\n-------\nSYSTEM x\nTO LLM is not a header here\n"
        "LLM RESPONSE 2026-12-01T23:00:01\nASSISTANT y\nTO LLM 2026-12-01T23:00:02\n"
    )
    assert count_requests(hist) == 2


def test_step_charge_one_step_per_request_or_edit(tiny, tmp_path):
    # list_units 1 + inspect 4 = 5 steps; then the turn: 3 requests, 1 edit -> 2 status + 1 edit
    rec = _episode(tmp_path, _REQUESTS.format(n=3) + _EDIT, budget=8)
    tools = [c["tool"] for c in rec["calls"]]
    assert tools == ["list_units"] + ["inspect"] * 4 + ["status", "status", "edit_file"]
    assert rec["steps_used"] == len(rec["calls"]) == 8
    edit = rec["calls"][-1]["proposed"] if "proposed" in rec["calls"][-1] else rec["calls"][-1]
    assert rec["aider"]["model_requests"] == 3 and rec["aider"]["edit_calls"] == 1
    assert rec["aider"]["status_charged"] == 2 and rec["aider"]["version"] == "0.0-standin"
    assert rec["aider"]["edit_format"] == "diff" and rec["policy"]["name"] == "aider"
    turn = rec["transcript"][0]
    assert turn["edits"][0]["path"] == "src/requests/__version__.py"
    assert turn["llm_history"].count("TO LLM 2026") == 3
    assert "## Issue u01" in turn["message"] and edit is not None


def test_more_edits_than_requests_costs_the_edits(tiny, tmp_path):
    rec = _episode(
        tmp_path,
        _REQUESTS.format(n=1)
        + _EDIT
        + (
            "g = pathlib.Path('src/requests/__init__.py')\n"
            "g.write_text('# head\\n' + g.read_text())\n"
        ),
        budget=7,
    )
    assert [c["tool"] for c in rec["calls"]][5:] == ["edit_file", "edit_file"]
    assert rec["aider"]["status_charged"] == 0


def test_crashed_aider_is_a_backend_error_with_the_record(tiny, tmp_path):
    rec = _episode(tmp_path, _REQUESTS.format(n=1) + "print('boom'); sys.exit(3)\n")
    assert rec["terminated_by"] == "error" and rec["error"]["type"] == "aider_crashed"
    assert "boom" in rec["error"]["message"] and rec["metrics"]["error"] is True
    assert rec["steps_used"] == len(rec["calls"]) == 6  # list, 4 inspects, 1 request charged


def test_aider_killed_mid_turn_is_a_backend_error_with_the_record(tiny, tmp_path):
    # a real SIGKILL of the process after its first request, as an OOM killer or a user would
    rec = _episode(
        tmp_path,
        _REQUESTS.format(n=1) + "import os, signal; os.kill(os.getpid(), signal.SIGKILL)\n",
    )
    assert rec["terminated_by"] == "error" and rec["error"]["type"] == "aider_crashed"
    assert rec["metrics"]["error"] is True and rec["steps_used"] == len(rec["calls"])


def test_hung_aider_is_killed_at_the_turn_timeout(tiny, tmp_path):
    rec = _episode(tmp_path, "time.sleep(600)\n", turn_timeout=2.0)
    assert rec["terminated_by"] == "error" and rec["error"]["type"] == "aider_timeout"
    assert rec["transcript"][0]["timed_out"] is True


def test_aider_refuses_other_families_and_two_endpoints():
    from pushbench.policies import validate_params
    from pushbench.policies.base import PolicyParamsError

    with pytest.raises(PolicyParamsError, match="SWE-lite"):
        validate_params("aider", {"model_server": "oracle-edit"}, families=["reposcan"])
    with pytest.raises(PolicyParamsError, match="exactly one"):
        validate_params("aider", {"model_server": "oracle-edit", "base_url": "http://x/v1"})
    assert AiderPolicy(model_server="oracle-edit").describe()["oracle"] is True


# ----- the real Aider (slow; CI installs it with `pushbench baselines install aider`) ---------
def _real_aider():
    try:
        return B.install("aider")["program"]  # kept in seconds when the marker matches
    except B.BaselineError as e:
        if os.environ.get("PUSHBENCH_REQUIRE_AIDER") == "1":
            pytest.fail(str(e))
        pytest.skip(str(e))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_aider_oracle_episodes_standard_and_unitqgp(tmp_path, monkeypatch):
    """The pinned Aider, driven by oracle-edit, on the shipped SWE-lite unit set at N=3: every
    unit passes under both controllers, the record holds every request and edit, and the run
    folder gives the report's rows (an oracle: labelled so, never a result)."""
    monkeypatch.delenv(U.RECIPE_ENV, raising=False)
    _real_aider()
    import subprocess

    exp = tmp_path / "exp.yaml"
    exp.write_text(
        "name: aider-oracle\ntasks: [SWELite-requests-N3]\n"
        "controllers: [standard, unitqgp]\nseeds: [0]\n"
        "policies:\n  - name: aider\n    params: {model_server: oracle-edit}\n"
    )
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "pushbench.cli", "run", str(exp), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert sorted(x["controller"]["name"] for x in lines) == ["standard", "unitqgp"]
    for line in lines:
        assert line["success"] and line["terminated_by"] == "final", line.get("error")
        assert line["aider"]["version"] == "0.86.2" and line["aider"]["edit_format"] == "diff"
        assert line["policy"]["oracle"] is True and line["simulated"] is True
        total = line["valid_count"]
        assert total == line["metrics"]["valid_count"] and total >= 3
        assert line["aider"]["model_requests"] >= 1
        assert "transcript" not in line
    import gzip

    for trace in (out / "traces").glob("*.json.gz"):
        rec = json.loads(gzip.decompress(trace.read_bytes()))
        turns = rec["transcript"]
        assert sum(t["model_requests"] for t in turns) == rec["aider"]["model_requests"]
        assert all(t["llm_history"].count("TO LLM ") >= t["model_requests"] for t in turns)
        edits = [c for c in rec["calls"] if c["tool"] == "edit_file"]
        assert len(edits) == sum(len(t["edits"]) for t in turns) >= rec["valid_count"]
        assert rec["steps_used"] == len(rec["calls"])
    summary = (out / "summary.csv").read_text()
    assert "aider" in summary and "unitqgp" in summary and "standard" in summary


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_aider_smollm2_episode_is_recorded(tmp_path, monkeypatch):
    """A real (tiny) model through Aider: the local SmolLM2 served by llama-cpp-python as plain
    chat (no tools). Its score is whatever it is; the episode must finish and be recorded."""
    monkeypatch.delenv(U.RECIPE_ENV, raising=False)
    from test_llm_local import require_local_llm, serve, smollm2_args

    require_local_llm()
    program = _real_aider()
    with serve(smollm2_args("chatml"), tmp_path / "llama.log") as url:
        pol = AiderPolicy(
            seed=0,
            aider_bin=program,
            base_url=url,
            model="SmolLM2-135M-Instruct",
            context=8192,
            max_tokens=256,
            turn_timeout=1800.0,
        )
        rec = run_episode("SWELite-requests-N3", "standard", pol, 0)
    assert rec["terminated_by"] in ("final", "budget"), rec.get("error")
    assert rec["steps_used"] == len(rec["calls"]) and rec["simulated"] is False
    assert rec["aider"]["model_requests"] >= 1 and rec["aider"]["version"] == "0.86.2"
    assert "oracle" not in rec["policy"]
    turn = rec["transcript"][0]
    assert turn["rc"] == 0 and turn["llm_history"].count("TO LLM ") >= 1
    print(
        json.dumps(
            {
                "valid_count": rec["valid_count"],
                "steps_used": rec["steps_used"],
                **{k: rec["aider"][k] for k in ("model_requests", "edit_calls", "aider_seconds")},
            }
        )
    )


def test_experiment_file_loads_and_the_estimate_bounds_requests_by_the_budget():
    from pushbench.runner.estimate import aider_bounds, estimate_rows
    from pushbench.runner.experiment import expand, load_experiment
    from pushbench.tasks import get_task

    exp = load_experiment(Path(__file__).parent.parent / "experiments" / "swelite_aider.yaml")
    specs = expand(exp)
    assert len(specs) == 9 * 2 and {s.controller for s in specs} == {"standard", "unitqgp"}
    total = estimate_rows(specs, {})[-1]
    budgets = sum(get_task(s.task_id).budget for s in specs)
    assert total["steps"][2] == budgets and total["cost_usd"] is None  # unpriced, not free
    assert total["prompt_tokens"][2] == budgets * 128000
    oracle = specs[0].model_copy(update={"policy_params": {"model_server": "oracle-edit"}})
    assert aider_bounds(oracle).cost == (0.0, 0.0, 0.0)


def test_missing_install_is_a_setup_error_not_an_episode(tiny, tmp_path, monkeypatch):
    """Without the baseline the episode raises (errors.jsonl, run again on resume) with the
    command that fixes it, instead of recording a backend error."""
    monkeypatch.setattr(B, "venv_dir", lambda name: tmp_path / "nothing-installed")
    pol = AiderPolicy(seed=0, model_server="oracle-edit")
    with pytest.raises(B.BaselineError, match="pushbench baselines install aider"):
        run_episode("SWELite-requests-N3", "standard", pol, 0)
