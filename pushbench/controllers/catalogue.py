"""The catalogue of named controller compositions (data: ``controllers/*.yaml``)."""

from __future__ import annotations

import difflib
from functools import lru_cache

import yaml
from pydantic import BaseModel, ConfigDict

from .. import paths

KNOWN_COMPONENTS = ("progress_state", "dedupe", "page_memory", "buffered_submit",
                    "completion_gate", "unit_tracker", "unit_redirect", "placebo")


class Composition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str
    components: tuple[str, ...]


@lru_cache(maxsize=None)
def catalogue() -> dict[str, Composition]:
    """All named compositions from every YAML file under ``controllers/``."""
    out: dict[str, Composition] = {}
    for f in sorted(paths.data_dir("controllers").glob("*.yaml")):
        raw = yaml.safe_load(f.read_text())
        if raw.get("schema_version") != 1:
            raise ValueError(f"{f}: unsupported schema_version {raw.get('schema_version')!r}")
        for name, body in raw["controllers"].items():
            comp = Composition.model_validate(body)
            bad = [c for c in comp.components if c not in KNOWN_COMPONENTS]
            if bad:
                raise ValueError(f"{f}: controller {name!r} names unknown components {bad}")
            if name in out:
                raise ValueError(f"{f}: controller {name!r} defined twice")
            out[name] = comp
    return out


def components_of(name: str) -> tuple[str, ...]:
    cat = catalogue()
    if name not in cat:
        close = difflib.get_close_matches(name, list(cat), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown controller {name!r}.{hint} Known: {', '.join(cat)}")
    return cat[name].components
