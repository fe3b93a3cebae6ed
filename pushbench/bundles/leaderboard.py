"""``pushbench leaderboard BUNDLE... --out SITE``: a static page of verified bundles.

Every bundle is verified first (:func:`pushbench.bundles.verify.verify_bundles`, into
``SITE/bundles/<digest12>/run``: the replayed records and their report) and gets the run
viewer's pages (:func:`pushbench.viewer.build_site`, into ``SITE/bundles/<digest12>/view``).
A bundle that is refused (tasks that differ from this registry, a broken archive) is left off
the tables and listed with its reason. Only replayed numbers reach the page; episodes whose
replay disagreed are flagged, counted per row, and left out of every number as in any report.

The page is the viewer's own machinery: its ``viewer.js`` and ``viewer.css`` and a data file
(``data/leaderboard.js``, written by :func:`pushbench.viewer.site.js_payload`), opened from
disk or served; one sortable table per family and target, one row per bundle, policy label and
controller with: episodes, flagged episodes, success with its interval (over instances, the
report's cluster interval), pass^k (k the row's seed count), precision, false-claim rate, mean
steps, cost where the records hold one, the bundle's digest and date, and a link to the row's
episodes in that bundle's run pages.
"""

from __future__ import annotations

import io
import math
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlencode

from .. import paths
from ..analysis.frame import episodes_frame, load_episodes, scored
from ..analysis.stats import DEFAULT_METHOD, interval, row_rng
from ..analysis.summary import summary_table
from ..errors import PushBenchError
from ..sources import sha256_file
from ..viewer import build_site
from ..viewer.site import OutDirError, install_assets, js_payload, static_bytes
from .archive import BundleError
from .verify import verify_bundles

PAGE = "leaderboard.html"


def success_interval(df, seed: int = 0, n_resamples: int = 9999) -> tuple[float, float]:
    """The report's cluster interval for the success rate of scored rows ``df`` (instances
    are the clusters); NaN bounds when it is undefined (one instance, or no spread)."""
    means = df.groupby(["task_id", "instance"], dropna=False)["success"].mean().to_numpy(float)
    if len(means) == 0:
        return math.nan, math.nan
    key = tuple(sorted(map(str, df["key"])))[:1]
    low, high, _ = interval(
        means[None, :],
        rng=row_rng(seed, "leaderboard", *key),
        method=DEFAULT_METHOD,
        n_resamples=n_resamples,
        bounds=(0.0, 1.0),
    )
    return float(low[0]), float(high[0])


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def bundle_rows(
    run_dir: Path,
    digest: str,
    date: str | None,
    name: str,
    link: str,
    seed: int = 0,
    n_resamples: int = 9999,
) -> list[dict]:
    """The leaderboard rows of one verified bundle (its verify folder ``run_dir``)."""
    df = episodes_frame(load_episodes(run_dir))
    summary = summary_table(df)
    ok = scored(df)
    rows = []
    for cell in summary.to_dict("records"):
        sel = ok[
            (ok["family"] == cell["family"])
            & (ok["policy"] == cell["policy"])
            & (ok["controller"] == cell["controller"])
            & (ok["target"] == cell["target"])
        ]
        low, high = success_interval(sel, seed, n_resamples) if len(sel) else (math.nan,) * 2
        ks = [c for c in summary.columns if c.startswith("pass^") and _num(cell[c]) is not None]
        k = max((int(c.split("^")[1]) for c in ks), default=None)
        cost = _num(cell.get("total_cost_usd"))
        query = urlencode(
            {
                "family": cell["family"],
                "policy": cell["policy"],
                "controller": cell["controller"],
                "target": cell["target"],
            }
        )
        rows.append(
            {
                "family": cell["family"],
                "target": int(cell["target"]),
                "policy": cell["policy"],
                "simulated": bool(cell.get("simulated")),
                "controller": cell["controller"],
                "n": int(cell["n_episodes"]),
                "flagged": int(cell.get("n_tampered") or 0),
                "success": _num(cell["success_rate"]),
                "success_low": _num(low),
                "success_high": _num(high),
                "pass_k": _num(cell[f"pass^{k}"]) if k else None,
                "k": k,
                "precision": _num(cell.get("precision")),
                "false_claim_rate": _num(cell.get("false_claim_rate")),
                "steps": _num(cell.get("mean_steps_used")),
                "cost_usd": cost if cost else None,
                "bundle": digest[:12],
                "sha256": digest,
                "bundle_name": name,
                "date": date,
                "link": f"{link}/index.html#/episodes?{query}",
            }
        )
    return rows


def build_leaderboard(
    bundles: Sequence[str | Path],
    site: str | Path,
    seed: int = 0,
    n_resamples: int = 9999,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Build the leaderboard of ``bundles`` into ``site``; return ``{"site", "rows",
    "refused"}`` (``refused``: ``{"bundle", "reason"}`` per bundle left off)."""
    from rich.console import Console

    say = log or (lambda _m: None)
    site = Path(site)
    if (site / "episodes.jsonl").exists() or (site / "traces").exists():
        raise OutDirError(f"{site} holds a run folder; give the leaderboard its own --out")
    quiet = Console(file=io.StringIO())
    rows, refused, seen = [], [], set()
    for b in bundles:
        b = Path(b)
        try:
            digest = sha256_file(b) if b.is_file() else None
            if digest is None:
                raise BundleError(f"bundle {b} not found")
            if digest in seen:
                raise BundleError(f"bundle {b.name} is given twice")
            seen.add(digest)
            home = site / "bundles" / digest[:12]
            results = verify_bundles(
                [b],
                home / "run",
                overwrite=True,
                seed=seed,
                n_resamples=n_resamples,
                console=quiet,
                printer=quiet,
            )
            build_site(home / "run", home / "view")
        except (PushBenchError, OSError) as e:
            refused.append({"bundle": b.name, "reason": str(e)})
            say(f"refused {b}: {e}")
            continue
        flagged = sum(len(v.flagged) for v in results)
        say(
            f"verified {b.name} ({digest[:12]}): {sum(len(v.records) for v in results)} "
            f"episodes, {flagged} flagged"
        )
        rows += bundle_rows(
            home / "run",
            digest,
            results[0].bundle.date,
            b.name,
            f"bundles/{digest[:12]}/view",
            seed,
            n_resamples,
        )
    keep = {r["bundle"] for r in rows}
    for old in sorted((site / "bundles").glob("*")) if (site / "bundles").is_dir() else []:
        if (
            old.is_dir() and not old.is_symlink() and len(old.name) == 12 and old.name not in keep
        ):  # a bundle of an earlier build, no longer listed
            shutil.rmtree(old)
    tables: dict[tuple, list] = {}
    for r in rows:
        tables.setdefault((r["family"], r["target"]), []).append(r)
    data = {
        "tables": [{"family": f, "target": t, "rows": tables[(f, t)]} for f, t in sorted(tables)],
        "refused": refused,
    }
    paths.private_dir(site, tighten=False)
    install_assets(site)
    paths.private_dir(site / "data")
    paths.write_private(site / "data" / "leaderboard.js", js_payload("leaderboard", data))
    paths.write_private(site / "index.html", static_bytes(PAGE))
    return {"site": site, "rows": rows, "refused": refused, "tables": len(tables)}
