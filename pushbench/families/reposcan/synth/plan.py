"""Which definitions get which property, and where each definition lives.

Density semantics: for every atom ``a`` the generator makes exactly ``round(density[a] * defs)``
definitions satisfy ``a`` (round half up), so the realised fraction is within ``1 / (2 * defs)``
of the requested one. Which definitions get an atom is a weighted draw without replacement:
the weights only shape *where* the property lands (tests assert more often than library code,
fixtures yield more often) and never its count. Combinations Python or pytest forbid are never
drawn: an async generator cannot ``return`` a value, a test cannot be a generator (pytest refuses
it), a fixture is decorated and a custom decorator returns its wrapper. A density vector that
cannot be met under these rules raises :class:`DensityError` naming the atoms involved.

Roles: ``test`` (``test_*`` in ``tests/test_<module>.py``), ``fixture`` (``@pytest.fixture``
in ``tests/conftest.py``), ``decorator`` (a custom decorator defined at the top of the first
package module) and ``pkg`` (every other function or method of the package).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .vocab import Draw

# The atoms the generator controls, in the order they are allocated.
ATOMS = (
    "docstring",
    "assert",
    "returns",
    "raises",
    "decorated",
    "yields",
    "async",
    "method",
    "annotated",
    "test",
    "fixture",
)

DEFAULT_DENSITY: dict[str, float] = {
    "docstring": 0.45,
    "assert": 0.2,
    "returns": 0.5,
    "raises": 0.15,
    "decorated": 0.25,
    "yields": 0.06,
    "async": 0.1,
    "method": 0.45,
    "annotated": 0.4,
    "test": 0.3,
    "fixture": 0.08,
}


class DensityError(ValueError):
    """The requested densities (or sizes) cannot be realised together."""


@dataclass
class DefSpec:
    """One planned definition: its role, its atoms, and (after layout) where it lives."""

    idx: int
    role: str  # "pkg" | "test" | "fixture" | "decorator"
    flags: dict[str, bool] = field(default_factory=dict)
    module: int = 0  # package module (pkg, decorator) or the module a test file mirrors
    group: int = -1  # class number within the file, -1 for a module-level function

    def __getitem__(self, atom: str) -> bool:
        return self.flags[atom]


def target_count(p: float, n: int) -> int:
    """``round(p * n)``, halves rounded up (the count every atom is realised at)."""
    return int(math.floor(p * n + 0.5))


def normalise_density(density: Mapping[str, float] | None) -> dict[str, float]:
    """The defaults overridden by ``density``; unknown atoms and values outside [0, 1] raise."""
    out = dict(DEFAULT_DENSITY)
    density = density or {}
    for key in sorted(density):
        if key not in out:
            raise DensityError(f"unknown density atom {key!r}; known: {', '.join(ATOMS)}")
        value = density[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not 0.0 <= value <= 1.0
        ):
            raise DensityError(f"density[{key!r}] must be a number in [0, 1], got {value!r}")
        out[key] = float(value)
    return out


def parse_density(text: str) -> dict[str, float]:
    """``"docstring=0.3,raises=0.1"`` -> ``{"docstring": 0.3, "raises": 0.1}`` (for a command
    line). Blank text is ``{}``; a malformed item, an unknown or repeated atom or a value
    outside [0, 1] raises :class:`DensityError` naming it."""
    out: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item and not text.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise DensityError(
                f"density item {item!r} is not ATOM=FRACTION (for example docstring=0.3)"
            )
        if key in out:
            raise DensityError(f"density atom {key!r} is given twice")
        try:
            out[key] = float(value)
        except ValueError:
            raise DensityError(
                f"density[{key!r}] must be a number in [0, 1], got {value.strip()!r}"
            ) from None
    normalise_density(out)  # unknown atoms, NaN and out-of-range values
    return out


# Relative weights per role (0: never). Only where an atom lands, never how often.
_WEIGHTS: dict[str, dict[str, float]] = {
    "method": {"pkg": 1.0, "test": 0.35},
    "async": {"pkg": 1.0, "test": 0.25},
    "yields": {"pkg": 1.0, "fixture": 4.0},
    "decorated": {"pkg": 1.0, "test": 0.5},
    "returns": {"pkg": 1.0, "fixture": 1.5, "test": 0.08},
    "raises": {"pkg": 1.0, "test": 0.2, "fixture": 0.3, "decorator": 0.5},
    "assert": {"pkg": 1.0, "test": 4.0, "fixture": 0.5, "decorator": 0.5},
    "docstring": {"pkg": 1.0, "test": 0.4, "fixture": 1.0, "decorator": 1.0},
    "annotated": {"pkg": 1.0, "test": 0.5, "fixture": 1.0, "decorator": 1.0},
}
_FORCED = {"decorated": "fixture", "returns": "decorator"}


def _choose(
    draw: Draw, specs: list[DefSpec], atom: str, k: int, weight: Callable[[DefSpec], float]
) -> None:
    forced = [s for s in specs if s.role == _FORCED.get(atom)]
    free = [s for s in specs if s.role != _FORCED.get(atom)]
    weights = [weight(s) for s in free]
    room = sum(1 for w in weights if w > 0)
    if not len(forced) <= k <= len(forced) + room:
        raise DensityError(
            f"density of {atom!r} asks for {k} definitions but only {len(forced)} to "
            f"{len(forced) + room} can have it with the other densities (tests: "
            f"{sum(s.role == 'test' for s in specs)}); lower it or change the others"
        )
    chosen = {s.idx for s in forced}
    chosen.update(s.idx for s in draw.weighted_sample(free, weights, k - len(forced)))
    for s in specs:
        s.flags[atom] = s.idx in chosen


def _role_weight(atom: str) -> Callable[[DefSpec], float]:
    table = _WEIGHTS[atom]
    return lambda s: table.get(s.role, 0.0)


def _helper_counts(n: int, k: dict[str, int]) -> tuple[int, int]:
    """How many conftest fixtures and custom decorators to write (both optional helpers)."""
    non_tests = n - k["test"]
    n_fix = min(max(1, target_count(0.03, n)), 8) if k["test"] else 0
    n_dec = min(max(1, target_count(0.01, n)), 3) if k["decorated"] and n >= 10 else 0

    def ok(f: int, d: int) -> bool:
        return (
            f + d <= non_tests
            and f <= k["decorated"]
            and d <= k["returns"]
            and d <= n - k["decorated"]
            and k["async"] <= n - f - d
            and k["method"] <= n - f - d
            and k["yields"] <= n - k["test"] - d
        )

    while not ok(n_fix, n_dec) and n_dec:
        n_dec -= 1
    while not ok(n_fix, n_dec) and n_fix:
        n_fix -= 1
    return n_fix, n_dec


def allocate(draw: Draw, n: int, density: Mapping[str, float]) -> list[DefSpec]:
    """Roles and atoms of ``n`` definitions, every atom at exactly its target count."""
    k = {a: target_count(density[a], n) for a in ATOMS}
    if k["fixture"] > k["test"]:
        raise DensityError(
            f"density of 'fixture' ({density['fixture']}) exceeds that of "
            f"'test' ({density['test']}): only tests use fixtures"
        )
    n_fix, n_dec = _helper_counts(n, k)
    order = draw.shuffled(range(n))
    roles = {}
    for pos, idx in enumerate(order):
        if pos < k["test"]:
            roles[idx] = "test"
        elif pos < k["test"] + n_fix:
            roles[idx] = "fixture"
        elif pos < k["test"] + n_fix + n_dec:
            roles[idx] = "decorator"
        else:
            roles[idx] = "pkg"
    specs = [DefSpec(idx=i, role=roles[i]) for i in range(n)]

    _choose(draw, specs, "method", k["method"], _role_weight("method"))
    _choose(draw, specs, "async", k["async"], _role_weight("async"))
    yield_weight = _role_weight("yields")
    _choose(
        draw, specs, "yields", k["yields"], lambda s: yield_weight(s) * (0.5 if s["async"] else 1.0)
    )
    _limit_async_generators(draw, specs, n - k["returns"])
    _choose(draw, specs, "decorated", k["decorated"], _role_weight("decorated"))
    ret_weight = _role_weight("returns")
    _choose(
        draw,
        specs,
        "returns",
        k["returns"],
        lambda s: 0.0 if s["async"] and s["yields"] else ret_weight(s),
    )
    for atom in ("raises", "assert", "docstring", "annotated"):
        _choose(draw, specs, atom, k[atom], _role_weight(atom))
    _choose(draw, specs, "fixture", k["fixture"], lambda s: 1.0 if s.role == "test" else 0.0)
    for s in specs:
        s.flags["test"] = s.role == "test"
    return specs


def _limit_async_generators(draw: Draw, specs: list[DefSpec], cap: int) -> None:
    """Async generators cannot return a value: keep at most ``cap`` of them (``cap`` = the
    definitions that do not return) by moving ``yield`` to synchronous definitions."""
    both = [s for s in specs if s["async"] and s["yields"]]
    excess = len(both) - cap
    if excess <= 0:
        return
    spare = [
        s
        for s in specs
        if not s["async"] and not s["yields"] and _WEIGHTS["yields"].get(s.role, 0.0) > 0
    ]
    if len(spare) < excess:
        raise DensityError(
            "densities of 'async', 'yields' and 'returns' are too high "
            "together: an async generator cannot return a value"
        )
    for s in draw.weighted_sample(both, [1.0] * len(both), excess):
        s.flags["yields"] = False
    for s in draw.weighted_sample(spare, [1.0] * len(spare), excess):
        s.flags["yields"] = True


def layout(draw: Draw, specs: list[DefSpec], modules: int) -> None:
    """Assign package modules (tests mirror them) and group methods into classes."""
    for s in specs:
        s.module = 0 if s.role == "decorator" else draw.below(modules)
    for m in range(modules):
        for role in ("pkg", "test"):
            methods = [s for s in specs if s.module == m and s.role == role and s["method"]]
            methods = draw.shuffled(methods)
            group, left = 0, 0
            for s in methods:
                if left == 0:
                    group, left = group + 1, draw.between(2, 6)
                s.group = group - 1
                left -= 1
