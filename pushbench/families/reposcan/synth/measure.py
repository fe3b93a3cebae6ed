"""Realised atom counts of a generated tree, read with the real RepoScan indexer and predicates.

Used by the tests, the benchmark and the docs table to check :func:`generate`'s contract. Facts
come from :func:`..indexer.facts_tree` and each atom is judged by
:func:`..predicates.parse_predicate`.
Where this checkout's predicate language lacks an atom, ``async`` and ``method`` fall back to
the indexer's ``Definition.kind`` and ``test`` to the name rule; ``yields`` and ``annotated``
then have no independent measurement and are reported as ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .. import indexer
from ..predicates import parse_predicate
from . import ATOMS, atom_spec


def measure(root: Path, primary_fixture: str) -> dict[str, int | None]:
    """``{"defs": universe size, atom: definitions under root satisfying it}`` (``None``: this
    checkout cannot measure the atom), via :func:`indexer.facts_tree` /
    :func:`indexer.index_tree`."""
    root = Path(root)
    return _count(
        indexer.facts_tree(root), [d.kind for d in indexer.index_tree(root)], primary_fixture
    )


def measure_files(files: Mapping[str, str], primary_fixture: str) -> dict[str, int | None]:
    """:func:`measure` of an in-memory tree (``{relative path: text}``, as :func:`.render`
    returns), through the indexer's per-file functions."""
    facts, kinds = [], []
    for rel in sorted(p for p in files if p.endswith(".py")):
        facts += indexer.facts_in_source(files[rel], rel)
        kinds += [d.kind for d in indexer.definitions_in_source(files[rel], rel)]
    return _count(facts, kinds, primary_fixture)


def _count(facts, kinds: list[str], primary_fixture: str) -> dict[str, int | None]:
    out: dict[str, int | None] = {"defs": len(facts)}
    for atom in ATOMS:
        try:
            pred = parse_predicate(atom_spec(atom, primary_fixture))
        except ValueError:
            pred = None
        if pred is not None:
            out[atom] = sum(1 for f in facts if pred.test(f))
        elif atom == "async":
            out[atom] = sum(k.startswith("async") for k in kinds)
        elif atom == "method":
            out[atom] = sum(k.endswith("method") for k in kinds)
        elif atom == "test":
            out[atom] = sum(f.name.startswith("test") for f in facts)
        else:
            out[atom] = None
    return out
