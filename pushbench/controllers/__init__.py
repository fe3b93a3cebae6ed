"""Controllers: Gymnasium wrappers composed of optional components (catalogue in ``controllers/``).

``wrap(env, name)`` wraps an environment by a named composition; ``catalogue()`` lists them.
"""

from __future__ import annotations

from .catalogue import catalogue, check_scope, components_of, serves
from .wrapper import Controller


def wrap(env, name: str) -> Controller:
    """Wrap ``env`` by the named composition (every run is wrapped, ``standard`` included).

    Raises :class:`~pushbench.errors.ControllerScopeError` when a component of the composition
    does nothing on ``env``'s family and the composition is not declared family-independent."""
    independent = catalogue()[name].family_independent is not None if name in catalogue() \
        else False
    return Controller(env, name=name, components=components_of(name),
                      family_independent=independent)


__all__ = ["Controller", "wrap", "catalogue", "components_of", "check_scope", "serves"]
