"""The committed excerpts of published data sets and their provenance manifest.

``tasks/dataops/public/`` holds small CSV excerpts of openly licensed data shipped inside PyPI
packages (:file:`manifest.yaml`: package, version, file, rows and columns kept, sha256, licence,
citation; ``experiments/dataops_public_excerpts.py`` re-derives them from the packages). This
module reads them as text tables (every cell exactly as the file writes it, ``NA`` included)
and refuses an excerpt whose sha256 differs from the manifest, so a unit is never built from
data whose provenance the manifest does not state.
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from .... import paths
from ....errors import PushBenchError

ALLOWED_LICENCES = frozenset({"CC0-1.0", "public-domain"})  # no attribution or share-alike


class ExcerptError(PushBenchError):
    """An excerpt is missing, or its sha256 or licence is not what the manifest allows."""


@dataclass(frozen=True)
class Table:
    name: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def column(self, name: str) -> int:
        return self.header.index(name)


def folder() -> Path:
    return paths.data_dir("tasks") / "dataops" / "public"


@cache
def manifest() -> dict:
    """The provenance manifest: ``{"schema_version": 1, "excerpts": {name: entry}}``."""
    return yaml.safe_load((folder() / "manifest.yaml").read_text(encoding="utf-8"))


@cache
def table(name: str) -> Table:
    """Excerpt ``name`` (``flights.csv``) as a text table, after its digest and licence check."""
    entry = manifest()["excerpts"].get(name)
    if entry is None:
        raise ExcerptError(f"excerpt {name!r} is not in the DataOps-public manifest")
    if entry["licence"] not in ALLOWED_LICENCES:
        raise ExcerptError(
            f"excerpt {name!r} has licence {entry['licence']!r}, not one of "
            f"{', '.join(sorted(ALLOWED_LICENCES))}"
        )
    try:
        data = (folder() / name).read_bytes()
    except OSError as e:
        raise ExcerptError(f"excerpt {name!r} cannot be read ({e.strerror})") from None
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ExcerptError(
            f"excerpt {name!r} does not match the sha256 in the manifest; "
            "re-derive it: python experiments/dataops_public_excerpts.py"
        )
    header, *rows = csv.reader(io.StringIO(data.decode("utf-8")))
    return Table(name, tuple(header), tuple(tuple(r) for r in rows))


def source_text(name: str) -> str:
    """The provenance lines of excerpt ``name`` as a unit's SOURCE.txt shows them."""
    e = manifest()["excerpts"][name]
    return (
        f"dataset: {name}\npackage: {e['package']}\nversion: {e['version']}\n"
        f"file: {e['file']}\nlicence: {e['licence']}\nsource: {e['source']}\n"
        f"citation: {e['citation']}\n"
    )
