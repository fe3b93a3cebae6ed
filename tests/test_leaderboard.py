"""Issue 24, section 5: ``pushbench leaderboard`` over real bundles.

Three bundles of real runs (two in-process experiments, one black-box run) and one forged
bundle that must be refused. The fast tests read the page's data file; the browser test (slow)
opens the page in headless Chromium like the viewer's, counts rows, sorts, and follows a link
into a bundle's run pages. Without Chromium the browser test is skipped, unless
``PUSHBENCH_REQUIRE_BROWSER=1`` turns the absence into a failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bundle_runs import TASKS, bundle, make_blackbox_run, make_run, repack
from typer.testing import CliRunner

from pushbench import cli
from pushbench.analysis.frame import episodes_frame, load_episodes, scored
from pushbench.bundles import build_leaderboard
from pushbench.bundles.archive import MANIFEST

runner = CliRunner()


def _payload(path: Path) -> dict:
    text = path.read_text()
    assert text.startswith('PB.loaded("leaderboard",') and text.endswith(");\n")
    return json.loads(text[len('PB.loaded("leaderboard",') : -3])


@pytest.fixture(scope="module")
def boards(tmp_path_factory):
    pytest.importorskip("mcp")
    tmp = tmp_path_factory.mktemp("board")
    a = make_run(tmp / "a", "first", ("diligent", "random"))
    b = make_run(tmp / "b", "second", ("exhaustive",), controllers=("standard",), seeds=(0,))
    c = make_blackbox_run(tmp / "c")
    bundles = [
        bundle([a], tmp / "a.pushbench.tar.gz"),
        bundle([b], tmp / "b.pushbench.tar.gz"),
        bundle([c], tmp / "c.pushbench.tar.gz"),
    ]

    def edit(members):
        manifest = json.loads(members[MANIFEST])
        manifest["tasks"][TASKS[0]]["manifest_digest"] = "f" * 64
        members[MANIFEST] = json.dumps(manifest).encode()

    forged = repack(bundles[0], tmp / "forged.pushbench.tar.gz", edit)
    made = build_leaderboard([*bundles, forged], tmp / "site", n_resamples=200)
    return {"runs": [a, b, c], "bundles": bundles, "made": made, "site": tmp / "site"}


def _expected_cells(runs) -> set[tuple]:
    """(family, target, policy label, controller) of every run's scored episodes."""
    cells = set()
    for run in runs[:2]:
        df = scored(episodes_frame(load_episodes(run)))
        cells |= set(zip(df["family"], df["target"], df["policy"], df["controller"], strict=True))
    cells.add(("reposcan", 10, "blackbox-mcp:fake-agent:default", "standard"))
    return cells


def test_one_table_per_family_and_target_with_a_row_per_bundle_label_and_controller(boards):
    data = _payload(boards["site"] / "data" / "leaderboard.js")
    rows = [r for t in data["tables"] for r in t["rows"]]
    assert {
        (r["family"], r["target"], r["policy"], r["controller"]) for r in rows
    } == _expected_cells(boards["runs"])
    assert [(t["family"], t["target"]) for t in data["tables"]] == [("reposcan", 10)]
    assert len({r["sha256"] for r in rows}) == 3
    for r in rows:
        assert 0 <= r["success"] <= 1 and r["flagged"] == 0
        assert r["link"].startswith(f"bundles/{r['bundle']}/view/index.html#/episodes?")
        assert (boards["site"] / r["link"].split("#")[0]).is_file()
        assert r["date"]
        if r["success_low"] is not None:
            assert r["success_low"] <= r["success"] <= r["success_high"]
    [refused] = data["refused"]
    assert refused["bundle"] == "forged.pushbench.tar.gz"
    assert "manifest digest differs" in refused["reason"]


def test_the_numbers_are_the_verified_reports(boards):
    data = _payload(boards["site"] / "data" / "leaderboard.js")
    import pandas as pd

    for r in (r for t in data["tables"] for r in t["rows"]):
        summary = pd.read_csv(boards["site"] / "bundles" / r["bundle"] / "run" / "summary.csv")
        cell = summary[
            (summary["policy"] == r["policy"])
            & (summary["controller"] == r["controller"])
            & (summary["target"] == r["target"])
        ].iloc[0]
        assert r["n"] == cell["n_episodes"]
        assert r["success"] == pytest.approx(cell["success_rate"], abs=1e-6)
        assert r["steps"] == pytest.approx(cell["mean_steps_used"], abs=1e-6)


def test_cli_exit_code_says_a_bundle_was_refused(boards, tmp_path):
    res = runner.invoke(
        cli.app,
        [
            "leaderboard",
            *map(str, boards["bundles"]),
            "--out",
            str(tmp_path / "s"),
            "--resamples",
            "200",
        ],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        cli.app,
        [
            "leaderboard",
            str(boards["bundles"][0]),
            str(tmp_path / "missing.pushbench.tar.gz"),
            "--out",
            str(tmp_path / "s2"),
            "--resamples",
            "200",
        ],
    )
    assert res.exit_code == 1 and "refused" in res.output, res.output


@pytest.mark.slow
def test_the_page_renders_sorts_and_links_in_headless_chromium(boards, tmp_path):
    from pushbench.viewer.browser import chromium_path, headless_chromium

    if os.environ.get("PUSHBENCH_REQUIRE_BROWSER") != "1":
        if chromium_path() is None:
            pytest.skip("no Chromium executable (apt-get install -y chromium)")
        pytest.importorskip("playwright", reason="pip install 'pushbench[viewer]'")
    data = _payload(boards["site"] / "data" / "leaderboard.js")
    [table] = data["tables"]
    errors: list[str] = []
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((boards["site"] / "index.html").resolve().as_uri())
        page.wait_for_selector("body[data-ready='/']", timeout=30_000)
        rows = page.locator("section.board[data-target='10'] tr[data-testid=board-row]")
        assert rows.count() == len(table["rows"]) == len(_expected_cells(boards["runs"]))
        assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.bundle)")) == sorted(
            r["bundle"] for r in table["rows"]
        )
        assert page.locator("[data-testid=refused]").count() == 1
        page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
        page.click("section.board th:has-text('success')")
        page.click("section.board th:has-text('success')")  # descending
        shown = rows.locator("td:nth-child(5)").all_inner_texts()
        want = sorted((r["success"] for r in table["rows"]), reverse=True)
        assert [float(s.split("%")[0]) for s in shown] == [round(100 * w, 1) for w in want]
        best = rows.first
        best.locator("a[data-testid=run-link]").click()
        page.wait_for_selector("body[data-ready^='/episodes']", timeout=30_000)
        count = page.locator("[data-testid=episode-count]").inner_text()
        top = max(table["rows"], key=lambda r: r["success"])
        assert count.startswith(f"{top['n'] + top['flagged']} of ") or count.startswith(
            f"{top['n']} of "
        ), count
    assert errors == []
