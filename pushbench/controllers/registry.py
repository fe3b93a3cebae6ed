"""Every controller component, loaded: the one place component names and order come from.

Components register themselves (:func:`~.components.register`) when their module is imported;
this module imports them all, so the catalogue (which names a YAML file may use) and the wrapper
(in which order components repair) read the same table.
"""

from __future__ import annotations

from . import placebo, units  # noqa: F401  (register the placebo and DataOps / SWE-lite components)
from .components import REGISTRY, Component


def load_all() -> dict[str, type[Component]]:
    """Component name -> class, every component module loaded."""
    return REGISTRY


def component_order() -> tuple[str, ...]:
    """Every registered component name in pipeline order (:attr:`Component.order`)."""
    return tuple(sorted(REGISTRY, key=lambda n: (REGISTRY[n].order, n)))
