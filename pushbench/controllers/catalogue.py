"""The catalogue of named controller compositions (data: ``controllers/*.yaml``) and their scope.

Scope: each component declares the families it serves (:attr:`Component.families`; ``None``
for every family). A composition run on a family where one of its components would do nothing
is refused (:func:`check_scope`, called by the wrapper and by experiment validation) with a
:class:`~pushbench.errors.ControllerScopeError` naming the component and the family, unless the
composition declares ``family_independent: <reason>`` in its YAML entry; then it runs with the
components that serve the family, and the record lists only those.
"""

from __future__ import annotations

from functools import lru_cache

import yaml
from pydantic import BaseModel, ConfigDict, Field

from .. import paths
from ..errors import ControllerScopeError, unknown
from .registry import load_all



class Composition(BaseModel):
    """One named controller of the catalogue: its component names and what it ablates."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str
    components: tuple[str, ...]
    # the full controller this one is an ablation row of (reports and figures group by it)
    ablation_of: str | None = None
    # why running it on a family some component does not serve is meaningful (None: refused)
    family_independent: str | None = Field(default=None, min_length=10)


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
    """The component names of controller ``name``; an unknown name raises naming the known."""
    cat = catalogue()
    if name not in cat:
        raise unknown("controller", name, cat)
    return cat[name].components


def idle_components(components, family: str) -> list[str]:
    """The components of ``components`` that do not serve ``family`` (would do nothing there)."""
    reg = load_all()
    return [c for c in components
            if (fams := reg[c].families) is not None and family not in fams]


def scope_problem(name: str, components, family: str,
                  family_independent: bool = False) -> str | None:
    """One line saying why controller ``name`` cannot run on ``family`` (None if it can)."""
    idle = idle_components(components, family)
    if not idle or family_independent:
        return None
    served = ", ".join(load_all()[idle[0]].families or ())  # idle: families is set
    others = [n for n, c in catalogue().items() if c.components
              and not idle_components(c.components, family) and c.ablation_of is None]
    more = f" ({len(idle) - 1} more: {', '.join(idle[1:])})" if len(idle) > 1 else ""
    return (f"controller {name!r} cannot run on {family}: component {idle[0]!r} serves "
            f"{served} only and would do nothing there{more}; use a controller for {family} "
            f"({', '.join(others[:4])}) or declare the composition family_independent (with "
            "the reason) in controllers/*.yaml")


def serves(name: str, family: str) -> bool:
    """Whether the named composition may run on ``family`` (every component serves it, or it is
    declared family-independent)."""
    comp = catalogue().get(name)
    if comp is None:
        raise unknown("controller", name, catalogue())
    return scope_problem(name, comp.components, family, comp.family_independent is not None) \
        is None


def check_scope(name: str, components, family: str, family_independent: bool = False) -> None:
    """Raise :class:`ControllerScopeError` if a component of ``components`` does nothing on
    ``family`` (and the composition is not declared family-independent)."""
    problem = scope_problem(name, components, family, family_independent)
    if problem:
        raise ControllerScopeError(problem)
