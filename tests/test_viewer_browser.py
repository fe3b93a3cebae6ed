"""The viewer as a person uses it: headless Chromium clicks through a small real run.

Needs the system Chromium (Debian's ``chromium``; ``.ci/run`` installs it) and Playwright (the
``viewer`` extra). Without Chromium the test is skipped, unless ``PUSHBENCH_REQUIRE_BROWSER=1``
(CI sets it) turns the absence into a failure. Screenshots go to the test's temporary folder;
with ``PUSHBENCH_DOCS_SCREENSHOTS=1`` the overview and the episode page are also written to
docs/viewer_overview.png and docs/viewer_episode.png, the pictures the documentation shows.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest
from viewer_runs import HOSTILE, small_run

from pushbench.analysis.frame import episodes_frame, load_episodes
from pushbench.viewer import build_site
from pushbench.viewer.browser import chromium_path, headless_chromium
from pushbench.viewer.data import file_stem
from pushbench.viewer.serve import make_server

pytestmark = pytest.mark.slow
DOCS = Path(__file__).resolve().parent.parent / "docs"


def _for_docs(page, name: str) -> None:
    """The documentation's screenshot ``name`` (first screenful), when asked to refresh them."""
    if os.environ.get("PUSHBENCH_DOCS_SCREENSHOTS") == "1":
        page.screenshot(path=str(DOCS / name))


if os.environ.get("PUSHBENCH_REQUIRE_BROWSER") != "1":
    if chromium_path() is None:
        pytest.skip("no Chromium executable (apt-get install -y chromium)", allow_module_level=True)
    pytest.importorskip("playwright", reason="pip install 'pushbench[viewer]'")


def _ready(page, fragment: str) -> None:
    page.wait_for_selector(f"body[data-ready='{fragment}']", timeout=30_000)


def test_a_person_filters_the_list_opens_an_episode_and_compares_controllers(tmp_path):
    run = small_run(tmp_path / "run", report=True)
    site = build_site(run, tmp_path / "site")
    lines = load_episodes(run)
    df = episodes_frame(lines)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    # The episode a person would look at: the one the controller changed most often.
    smoke = df[(df["controller"] == "stateqgp") & df["policy"].isin(["diligent", "random"])]
    pick = smoke.sort_values("interventions_total").iloc[-1]
    assert pick["interventions_total"] > 0
    with gzip.open(run / "traces" / f"{pick['key']}.json.gz", "rt") as f:
        record = json.load(f)
    ctl_steps = record["controller"]["steps"]
    errors: list[str] = []
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((site / "index.html").resolve().as_uri())
        _ready(page, "/")
        counts = page.locator("#counts").inner_text()
        assert f"finished episodes (lines)\t{len(lines)}" in counts
        summary_rows = page.locator("#summary tbody tr")
        n_cells = len(df.groupby(["family", "policy", "controller", "target"]))
        assert summary_rows.count() == n_cells
        page.select_option("#summary select[data-filter=controller]", "stateqgp")
        assert summary_rows.count() == len(
            df[df["controller"] == "stateqgp"].groupby(["family", "policy", "target"])
        )
        assert page.locator(".figs img").count() >= 1
        page.screenshot(path=str(shots / "overview.png"), full_page=True)
        _for_docs(page, "viewer_overview.png")

        page.click("nav a[href='#/episodes']")
        _ready(page, "/episodes")
        count = page.locator("[data-testid=episode-count]")
        assert count.inner_text() == f"{len(lines)} of {len(lines)} episodes"
        page.select_option("select[data-filter=controller]", "stateqgp")
        n_ctl = int((df["controller"] == "stateqgp").sum())
        assert count.inner_text() == f"{n_ctl} of {len(lines)} episodes"
        assert page.locator("tr[data-testid=episode-row]").count() == n_ctl
        page.fill("input[type=search]", pick["task_id"])
        n_task = int(((df["controller"] == "stateqgp") & (df["task_id"] == pick["task_id"])).sum())
        assert count.inner_text() == f"{n_task} of {len(lines)} episodes"
        page.screenshot(path=str(shots / "episodes.png"), full_page=True)

        page.click(f"tr[data-key='{pick['key']}'] a")
        _ready(page, f"/episode/{file_stem(pick['key'])}")
        assert (
            page.locator("tr[data-testid=step-row]").count()
            == record["steps_used"]
            == len(record["calls"])
        )
        assert page.locator("tr.intervened").count() == len(ctl_steps)
        labels = [lab for s in ctl_steps for lab in s["interventions"]]
        shown = page.locator("tr.intervened [data-testid=intervention]").all_inner_texts()
        assert shown == labels
        assert page.inner_text("[data-testid=final-verified]") == str(record["valid_count"])
        first = page.locator("tr.intervened").first
        first.locator("button.show-step").click()
        detail = page.locator("tr.step-detail:visible")
        assert detail.count() == 1 and '"proposed"' in detail.inner_text()
        page.screenshot(path=str(shots / "episode.png"), full_page=True)
        _for_docs(page, "viewer_episode.png")

        page.click("[data-testid=pair-link]")
        page.wait_for_selector("body[data-ready^='/pair/']")
        heads = page.locator(".pair > section > h2").all_inner_texts()
        assert [h.split()[0] for h in heads] == ["standard", "stateqgp"]
        page.screenshot(path=str(shots / "paired.png"), full_page=True)

        hostile = next(ln for ln in lines if ln["policy"]["name"] == "markup-final")
        page.goto(
            (site / "index.html").resolve().as_uri() + f"#/episode/{file_stem(hostile['key'])}"
        )
        _ready(page, f"/episode/{file_stem(hostile['key'])}")
        assert page.inner_text("[data-testid=final-message]") == HOSTILE
        assert page.evaluate("window.__pwned") is None
        assert page.locator("main script, main img").count() == 0
        page.screenshot(path=str(shots / "markup.png"), full_page=True)

        llm = next(
            ln for ln in lines if ln["policy"]["name"] == "llm" and ln["terminated_by"] != "error"
        )
        with gzip.open(run / "traces" / f"{llm['key']}.json.gz", "rt") as f:
            transcript = json.load(f)["transcript"]
        page.goto((site / "index.html").resolve().as_uri() + f"#/episode/{file_stem(llm['key'])}")
        _ready(page, f"/episode/{file_stem(llm['key'])}")
        tokens = [t for t in page.locator("[data-testid=step-tokens]").all_inner_texts() if t]
        assert len(tokens) == llm["usage"]["calls"]
        first_turn = next(e for e in transcript if "turn" in e)
        assert tokens[0] == (
            f"turn 1: {first_turn['prompt_tokens']} + {first_turn['completion_tokens']}"
        )
        page.locator("tr[data-step='1'] button.show-step").click()
        answer = next(e for e in transcript if e.get("step") == 1)
        assert (
            page.locator("tr.step-detail:visible [data-testid=observation]").inner_text()
            == answer["message"]["content"]
        )
        page.screenshot(path=str(shots / "llm.png"), full_page=True)

        server = make_server(site, 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html#/episodes")
            _ready(page, "/episodes")
            assert (
                page.locator("[data-testid=episode-count]").inner_text()
                == f"{len(lines)} of {len(lines)} episodes"
            )
        finally:
            server.shutdown()
            server.server_close()
    assert errors == []
    assert sorted(p.name for p in shots.iterdir()) == [
        "episode.png",
        "episodes.png",
        "llm.png",
        "markup.png",
        "overview.png",
        "paired.png",
    ]
