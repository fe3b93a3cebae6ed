"""Controllers: Gymnasium wrappers composed of optional components (catalogue in ``controllers/``).

``wrap(env, name)`` wraps an environment by a named composition; ``catalogue()`` lists them.
"""

from __future__ import annotations

from .catalogue import catalogue, components_of
from .wrapper import Controller


def wrap(env, name: str) -> Controller:
    """Wrap ``env`` by the named composition (every run is wrapped, ``standard`` included)."""
    return Controller(env, name=name, components=components_of(name))


__all__ = ["Controller", "wrap", "catalogue", "components_of"]
