"""RepoScan predicates over :class:`~pushbench.families.reposcan.indexer.Facts` (in memory, never on disk).

Each predicate has a spec string (``docstring``, ``assert``, ``returns``, ``raises``,
``decorated``, ``fixture:X``) and a plain-words description shown to the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .indexer import Facts


@dataclass(frozen=True)
class Predicate:
    spec: str
    test: Callable[[Facts], bool]
    description: str  # plain words for the objective; never lists identifiers


def parse_predicate(spec: str) -> Predicate:
    """Return the predicate for ``spec``; unknown specs raise ValueError."""
    simple = {
        "docstring": (lambda d: d.docstring,
                      "has a docstring (its first statement is a string literal)"),
        "assert": (lambda d: d.has_assert,
                   "contains an `assert` statement in its own body (not in nested functions)"),
        "returns": (lambda d: d.returns_value,
                    "contains a `return <expression>` statement in its own body "
                    "(`return None` counts, a bare `return` does not)"),
        "raises": (lambda d: d.raises,
                   "contains a `raise` statement in its own body (a bare `raise` counts)"),
        "decorated": (lambda d: d.decorated, "has at least one decorator"),
    }
    if spec in simple:
        fn, text = simple[spec]
        return Predicate(spec, fn, text)
    if spec.startswith("fixture:") and spec[len("fixture:"):].isidentifier():
        fixture = spec[len("fixture:"):]
        return Predicate(
            spec,
            lambda d: d.name.startswith("test") and fixture in d.params,
            f"is a test function (name starts with `test`) that takes a parameter named "
            f"`{fixture}` (the `{fixture}` fixture)",
        )
    raise ValueError(f"unknown predicate {spec!r}")
