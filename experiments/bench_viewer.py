"""Viewer load times on a real 10,000-episode run folder, in headless Chromium.

    python experiments/bench_viewer.py [--run DIR] [--episodes 30] [--overviews 5] [--seed 0]

Builds the run folder if DIR has no episodes.jsonl (``pushbench run
experiments/viewer_10k.yaml --out DIR --limit 10000``: real offline episodes, about 1.5 min on
2 cores), builds the viewer (``pushbench view``), then opens it in the system Chromium
(Playwright, ``pushbench[viewer]``) both as a local file and through the loopback server, and
prints per view the median and maximum time until the view is rendered (the page's
``data-ready-ms``: from navigation start for a fresh page load, from the click for an in-page
navigation) and their ratio to the targets: overview 2 s, episode page 0.5 s (ratio < 1 is
within target). Episodes are drawn with a seeded generator. The 1-minute load average is printed
because these machines are shared.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from pushbench.viewer import build_site
from pushbench.viewer.browser import headless_chromium
from pushbench.viewer.data import file_stem
from pushbench.viewer.serve import make_server

HERE = Path(__file__).resolve().parent
TARGETS = {
    "overview": 2.0,
    "episode list": None,
    "episode (fresh load)": 0.5,
    "episode (from list)": 0.5,
    "paired view": None,
}


def _ensure_run(run: Path) -> None:
    if (run / "episodes.jsonl").is_file():
        return
    print(f"building the run folder {run} (10,000 offline episodes) ...", flush=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "run",
            str(HERE / "viewer_10k.yaml"),
            "--out",
            str(run),
            "--limit",
            "10000",
            "--no-progress",
        ],
        check=True,
    )


def _ready_ms(page, fragment: str, prefix: bool = False) -> float:
    op = "^=" if prefix else "="
    page.wait_for_selector(f"body[data-ready{op}'{fragment}']", timeout=60_000)
    return float(page.get_attribute("body", "data-ready-ms"))


def _measure(browser, base: str, keys: list[str], overviews: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in TARGETS}
    for _ in range(overviews):  # a fresh page (cold cache) per load
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(f"{base}/index.html")
        times["overview"].append(_ready_ms(page, "/"))
        page.click("nav a[href='#/episodes']")
        times["episode list"].append(_ready_ms(page, "/episodes"))
        ctx.close()
    for key in keys:
        ctx = browser.new_context()
        page = ctx.new_page()
        frag = f"/episode/{file_stem(key)}"
        page.goto(f"{base}/index.html#{frag}")
        times["episode (fresh load)"].append(_ready_ms(page, frag))
        link = page.locator("[data-testid=pair-link]").first
        if link.count():
            href = link.get_attribute("href")
            link.click()
            times["paired view"].append(_ready_ms(page, href[1:]))
        ctx.close()
    ctx = browser.new_context()  # in-page navigation: the list, then one episode after another
    page = ctx.new_page()
    page.goto(f"{base}/index.html#/episodes")
    _ready_ms(page, "/episodes")
    for key in keys:
        page.fill("input[type=search]", key)
        page.wait_for_selector(f"tr[data-key='{key}']")
        page.click(f"tr[data-key='{key}'] a")
        times["episode (from list)"].append(_ready_ms(page, f"/episode/{file_stem(key)}"))
        page.go_back()
        _ready_ms(page, "/episodes", prefix=True)
    ctx.close()
    return times


def _print(mode: str, times: dict[str, list[float]]) -> None:
    print(f"\n{mode}:")
    print(
        f"  {'view':22} {'n':>3} {'median ms':>10} {'max ms':>9} {'target':>7} "
        f"{'median/target':>14} {'max/target':>11}"
    )
    for view, xs in times.items():
        if not xs:
            continue
        med, worst, target = statistics.median(xs), max(xs), TARGETS[view]
        ratio = (
            f"{med / 1000 / target:14.3f} {worst / 1000 / target:11.3f}"
            if target
            else f"{'-':>14} {'-':>11}"
        )
        print(
            f"  {view:22} {len(xs):3d} {med:10.1f} {worst:9.1f} "
            f"{(f'{target:.1f} s' if target else '-'):>7} {ratio}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default=str(HERE.parent / "runs" / "viewer_10k"))
    ap.add_argument("--episodes", type=int, default=30, help="episodes opened per mode")
    ap.add_argument("--overviews", type=int, default=5, help="fresh overview loads per mode")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    run = Path(args.run)
    _ensure_run(run)
    t0 = time.perf_counter()
    site = build_site(run)
    build_s = time.perf_counter() - t0
    from pushbench.analysis.frame import load_episodes

    keys = sorted(ep["key"] for ep in load_episodes(run))
    print(
        f"run folder: {run} ({len(keys)} episodes); viewer built in {build_s:.1f} s "
        f"({len(keys) / build_s:.0f} episodes/s) into {site}"
    )
    print(f"load average (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    sample = random.Random(args.seed).sample(keys, min(args.episodes, len(keys)))
    server = make_server(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with headless_chromium() as browser:
            _print(
                "opened as a local file (file://)",
                _measure(browser, site.resolve().as_uri(), sample, args.overviews),
            )
            _print(
                f"through the loopback server (http://127.0.0.1:{server.server_address[1]})",
                _measure(
                    browser, f"http://127.0.0.1:{server.server_address[1]}", sample, args.overviews
                ),
            )
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
