"""Seeded synthetic Python repositories for RepoScan (issue 15, section 4).

:func:`generate` writes a realistic-looking package (modules with dataclasses, methods, module
functions, async functions, generators, custom decorators) and a ``tests/`` folder (pytest tests
using fixtures from ``tests/conftest.py``), named from a domain vocabulary. Such a repository is
held out by construction: a fresh seed gives code no model has seen.

Contract:

* **Density**: for each atom in :data:`ATOMS` exactly ``round(density[atom] * defs)`` (halves
  up) definitions satisfy it, as the RepoScan indexer and predicates read them; see
  :mod:`.plan` for the rules and :class:`DensityError` for impossible combinations.
* **Size**: exactly ``defs`` definitions in RepoScan's universe, in ``modules`` package modules
  (plus ``tests/test_<module>.py`` for each module that has tests and ``tests/conftest.py``).
* **Determinism**: the output is a pure function of the arguments: every draw comes from one
  ``random.Random(seed)`` through its ``random()`` method only (whose sequence Python guarantees
  across versions); nothing depends on set or hash order, time or the environment. Same
  arguments, byte-identical files (``SynthStats.tree_sha256``).
* Every file parses with :mod:`ast`; the package imports without cycles.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .package import plan_package, render_init, render_module
from .plan import (
    ATOMS,
    DEFAULT_DENSITY,
    DensityError,
    allocate,
    layout,
    normalise_density,
    parse_density,
)
from .sigs import Namer
from .testsuite import plan_tests, render_conftest, render_test_module
from .vocab import DOMAINS, GENERIC_NOUNS, Draw

__all__ = [
    "ATOMS",
    "DEFAULT_DENSITY",
    "DEFAULT_DEFS",
    "DEFAULT_MODULES",
    "GENERATOR_VERSION",
    "MAX_DEFS",
    "DensityError",
    "SynthStats",
    "atom_spec",
    "generate",
    "parse_density",
    "render",
    "tree_sha256",
]

# Bump whenever the bytes written for some arguments change (vocabulary, templates, draw order):
# a pinned synthetic snapshot records it next to its seed and sizes.
GENERATOR_VERSION = 1
DEFAULT_MODULES = 8
DEFAULT_DEFS = 300
MAX_DEFS = 200_000


@dataclass(frozen=True)
class SynthStats:
    """What :func:`generate` wrote.

    ``counts[atom]`` is the number of definitions written with the atom (the RepoScan predicate
    :func:`atom_spec` names it: ``fixture`` counts ``fixture:<primary_fixture>``); ``density``
    the requested fractions after defaults; ``roles`` how many definitions are tests, conftest
    fixtures, custom decorators and library code.
    """

    package: str
    seed: int
    defs: int
    modules: int
    density: Mapping[str, float]
    counts: Mapping[str, int]
    roles: Mapping[str, int]
    primary_fixture: str
    files: tuple[str, ...]
    tree_sha256: str
    generator_version: int = GENERATOR_VERSION

    def fraction(self, atom: str) -> float:
        """Realised fraction of definitions with ``atom``."""
        return self.counts[atom] / self.defs

    def spec(self, atom: str) -> str:
        return atom_spec(atom, self.primary_fixture)


def atom_spec(atom: str, primary_fixture: str) -> str:
    """The RepoScan predicate text of a density atom (``fixture`` -> ``fixture:<name>``)."""
    if atom not in ATOMS:
        raise DensityError(f"unknown atom {atom!r}; known: {', '.join(ATOMS)}")
    return f"fixture:{primary_fixture}" if atom == "fixture" else atom


def _check_int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def render(
    *,
    seed: int,
    modules: int = DEFAULT_MODULES,
    defs: int = DEFAULT_DEFS,
    density: Mapping[str, float] | None = None,
) -> tuple[dict[str, str], SynthStats]:
    """The repository as ``{relative path: text}`` (sorted paths) and its stats, in memory."""
    _check_int("seed", seed, 0, 2**63 - 1)
    _check_int("modules", modules, 1, 1000)
    _check_int("defs", defs, 1, MAX_DEFS)
    dens = normalise_density(density)
    draw = Draw(seed)
    domain = draw.pick(tuple(DOMAINS))
    namer = Namer(draw, DOMAINS[domain] + GENERIC_NOUNS)
    specs = allocate(draw, defs, dens)
    layout(draw, specs, modules)
    pkg = plan_package(draw, namer, specs, modules)
    tests = plan_tests(draw, namer, specs, pkg)
    files: dict[str, str] = {f"{pkg.name}/__init__.py": render_init(pkg)}
    for mod in pkg.modules:
        files[f"{pkg.name}/{mod.name}.py"] = render_module(draw, namer, pkg, mod)
    if tests.fixtures:
        files["tests/conftest.py"] = render_conftest(draw, namer, tests, pkg)
    for m, mod in enumerate(pkg.modules):
        if tests.modules.get(m):
            files[f"tests/test_{mod.name}.py"] = render_test_module(draw, namer, tests, pkg, m)
    files["pyproject.toml"] = (
        f'[project]\nname = "{pkg.name}"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n\n'
        f'[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
        f'markers = ["slow: long-running tests"]\n'
    )
    files = dict(sorted(files.items()))
    roles = {r: sum(s.role == r for s in specs) for r in ("pkg", "test", "fixture", "decorator")}
    stats = SynthStats(
        package=pkg.name,
        seed=seed,
        defs=defs,
        modules=modules,
        density=dens,
        counts={a: sum(s.flags[a] for s in specs) for a in ATOMS},
        roles=roles,
        primary_fixture=tests.primary,
        files=tuple(files),
        tree_sha256=tree_sha256(files),
    )
    return files, stats


def tree_sha256(files: Mapping[str, str]) -> str:
    """sha256 over the sorted ``(path, content)`` pairs of a file tree."""
    digest = hashlib.sha256()
    for path in sorted(files):
        data = files[path].encode("utf-8")
        digest.update(f"{path}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def generate(
    dest: Path,
    *,
    seed: int,
    modules: int = DEFAULT_MODULES,
    defs: int = DEFAULT_DEFS,
    density: Mapping[str, float] | None = None,
) -> SynthStats:
    """Write a synthetic repository into ``dest`` (absent or an empty folder) and return its stats.

    All checks run before anything is written; the tree is written into a temporary sibling
    folder and renamed into place, so ``dest`` is either complete or untouched. An existing
    non-empty ``dest`` raises ``FileExistsError``; bad sizes or densities raise ``ValueError``
    (:class:`DensityError` for densities).
    """
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise FileExistsError(f"{dest} exists and is not an empty folder; nothing was written")
    files, stats = render(seed=seed, modules=modules, defs=defs, density=density)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
        os.chmod(tmp, 0o755)
        if dest.exists():
            dest.rmdir()
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return stats
