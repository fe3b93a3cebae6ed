"""The catalogue of named controller compositions (data: ``controllers/*.yaml``)."""

from __future__ import annotations

from functools import lru_cache

import yaml
from pydantic import BaseModel, ConfigDict

from .. import paths
from ..errors import unknown
from .registry import load_all



class Composition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str
    components: tuple[str, ...]
    # the full controller this one is an ablation row of (reports and figures group by it)
    ablation_of: str | None = None


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
            bad = [c for c in comp.components if c not in load_all()]
            if bad:
                raise ValueError(f"{f}: controller {name!r} names unknown components {bad}")
            if name in out:
                raise ValueError(f"{f}: controller {name!r} defined twice")
            out[name] = comp
    return out


def components_of(name: str) -> tuple[str, ...]:
    cat = catalogue()
    if name not in cat:
        raise unknown("controller", name, cat)
    return cat[name].components
