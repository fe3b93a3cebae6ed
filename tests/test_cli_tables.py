"""Every table a command prints fits an 80-column terminal and cuts no cell (issue 33, item 5).

Each command runs for real (typer's CliRunner, or the printing function with the frame the
command computes) on a console 80 columns wide: ``snapshots list``, ``snapshots synth`` (its
atom table), ``tasks``, ``tasks new`` (the calibration), ``swelite build`` / ``swelite list``
and ``evaluate``'s condition deltas. Names are long on purpose (a long snapshot name, a long
instance name, long agent names): every line is at most 80 cells, no cell ends in an ellipsis
(rich's cut), and the identifiers a user copies appear whole. The run tables (summary, deltas,
estimate, bill) are checked the same way in test_thin_data.py and test_llm_docs_example.py.
"""

from __future__ import annotations

import os
import sys
from io import StringIO
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from pushbench import tasks, terminal, userdata
from pushbench.cli import app, common

sys.path.insert(0, str(Path(__file__).parent))
from test_thin_data import episode  # one runner-format episode line

TINY = str(Path(__file__).parent / "data" / "swelite_tiny.yaml")
LONG_SNAPSHOT = "team-synthetic-repository"
LONG_NAME = "team-synthetic-repository-returns-and-more"


def fits(text: str, width: int = 80) -> None:
    """Every line at most ``width`` cells; nothing cut with an ellipsis."""
    assert text.strip(), "nothing printed"
    for line in text.splitlines():
        assert cell_len(line) <= width, line
    assert "…" not in text, text


@pytest.fixture
def eighty(monkeypatch):
    """The CLI's consoles (and any console made during the test) 80 columns wide."""
    monkeypatch.setenv("COLUMNS", "80")
    saved = [(c, c._width) for c in (common.out, common.console)]
    for c, _ in saved:
        c.width = 80
    yield
    for c, w in saved:
        c._width = w


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh PUSHBENCH_HOME and user tasks folder, the task lists re-read around the test."""
    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(userdata.ENV_VAR, str(tmp_path / "tasks"))
    tasks.reload()
    yield tmp_path
    monkeypatch.undo()
    tasks.reload()


def invoke(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_snapshot_and_task_tables_fit_80_columns(eighty, home):
    synth = invoke(
        "snapshots", "synth", LONG_SNAPSHOT, "--seed", "5", "--defs", "160", "--modules", "4"
    )
    fits(synth)
    assert "docstring" in synth and "fixture" in synth
    listed = invoke("snapshots", "list")
    fits(listed.split("\nbuilt in ")[0])  # the folder line is a path, never broken
    for name in ("flask", "requests", "synth-s1", LONG_SNAPSHOT):
        assert name in listed
    home_dir = str(Path(os.environ["PUSHBENCH_HOME"]) / "snapshots")
    assert f"built in {terminal.short_path(home_dir)}" in listed

    made = invoke(
        "tasks",
        "new",
        "--snapshot",
        LONG_SNAPSHOT,
        "--predicate",
        "returns",
        "--targets",
        "10,25",
        "--name",
        LONG_NAME,
    )
    table = made.split("steps: diligent")[0]
    fits(table)
    rows = [line.split() for line in table.splitlines()]
    assert [r[0] for r in rows if r and r[0].isdigit()] == ["10", "25"]  # one row per N
    assert f"calibration of {LONG_NAME}" in " ".join(table.split())
    for n in (10, 25):  # the ids in full (the line naming them wraps between ids)
        assert f"RepoScan-{LONG_NAME}-N{n}" in made

    listing = invoke("tasks")
    fits(listing)
    ids = {
        line.split()[0] for line in listing.splitlines() if line.startswith(("RepoScan", "DataOps"))
    }
    assert f"RepoScan-{LONG_NAME}-N25" in ids and "RepoScan-requests-docstring-N10" in ids
    assert ids == set(tasks.list_tasks()) & ids  # whole ids, none cut


@pytest.mark.timeout(900)  # a cold cache builds the SWE-lite test venvs first (minutes)
def test_swelite_tables_fit_80_columns(eighty):
    built = invoke("swelite", "build", "requests", "--recipe", TINY)
    fits(built.split("\nunit sets in ")[0])  # the folder line is a path, never broken
    from pushbench.families.swelite import units as U

    path = U.cache_file("requests", TINY)
    assert path.name in built and f"unit sets in {terminal.short_path(path.parent)}" in built
    listed = invoke("swelite", "list", "requests", "--recipe", TINY)
    fits(listed)
    for unit in U.load("requests", TINY, build_if_missing=False)["kept"]:
        assert unit["key"] in listed


def test_evaluate_condition_deltas_fit_80_columns():
    from pushbench.blackbox.evaluate import _print_condition_deltas, condition_deltas

    lines, i = [], 0
    for agent in ("claude-code-with-a-long-model-name", "codex"):
        for cond in ("default", "checklist"):
            for ctrl in ("standard", "verifier_gated"):
                for inst in range(7):
                    for target in (10, 25):
                        i += 1
                        line = episode(
                            i,
                            controller=ctrl,
                            target=target,
                            instance=f"i{inst}",
                            policy=f"blackbox-mcp:{agent}:{cond}",
                            metrics={"success": (i * 7919) % 3 == 0, "valid_count": (i * 31) % 12},
                        )
                        line["simulated"] = line["policy"]["simulated"] = False
                        lines.append(line)
    deltas = condition_deltas(lines, n_resamples=199)
    out = Console(file=StringIO(), width=80, record=True)
    _print_condition_deltas(deltas, out)
    text = out.export_text()
    fits(text)
    for agent in ("claude-code-with-a-long-model-name", "codex"):
        assert f"success | {agent}" in text
    assert "verifier_gated" in text and "checklist" in text


@given(
    st.lists(st.text(alphabet="abc/-_. ", min_size=1, max_size=12), min_size=1, max_size=4),
    st.booleans(),
)
def test_short_path_only_abbreviates_the_home_folder(parts, under_home):
    base = Path.home() if under_home else Path("/srv/data")
    path = base.joinpath(*parts)
    short = terminal.short_path(path)
    assert os.path.expanduser(short) == str(path)
    assert short.startswith("~") == (under_home and str(path).startswith(str(Path.home())))


@given(
    st.lists(st.text(alphabet="ab-", min_size=1, max_size=30), min_size=1, max_size=6),
    st.integers(40, 120),
)
def test_fit_caps_elastic_columns_so_the_table_fits(words, width):
    tab = terminal.table()
    terminal.ident_column(tab, "ID")
    tab.add_column("PATH")
    tab.add_column("N", justify="right", no_wrap=True)
    for k, w in enumerate(words):
        tab.add_row(f"x{k}", "/".join([w] * 3), str(k))
    terminal.fit(tab, width, ["PATH"])
    out = Console(file=StringIO(), width=width, record=True)
    out.print(tab)
    text = out.export_text()
    assert all(cell_len(line) <= width for line in text.splitlines())
    assert "…" not in text
    # folded, not lost: every path's characters are all there
    assert sum(c in "ab-/" for c in text) == sum(len("/".join([w] * 3)) for w in words)
