"""The atoms of the RepoScan predicate language: what each tests on one definition's
:class:`~pushbench.families.reposcan.indexer.Facts` and how it reads in the agent's objective.

Exact semantics (also in docs/families.md, "Semantics of the verifier"); *own body* means the
function's body without the bodies of nested functions, classes and lambdas:

``docstring``    first statement is a string literal (not an f-string or bytes).
``assert``       an ``assert`` statement in its own body.
``returns``      ``return <expression>`` in its own body (``return None`` counts, bare ``return``
                 does not).
``raises``       a ``raise`` statement in its own body (bare ``raise`` counts).
``decorated``    at least one decorator.
``fixture:X``    name starts with ``test`` and a positional-only, positional or keyword-only
                 parameter is named ``X`` (``*X`` / ``**X`` do not count: pytest injects
                 fixtures by those kinds only).
``yields``       ``yield`` or ``yield from`` in its own body (a generator or async generator).
``async``        an ``async def``.
``method``       its innermost enclosing scope is a class (class-level ``if``/``try``/... count,
                 as for the kind search shows); static and class methods included.
``test``         name starts with ``test`` (case-sensitive, as pytest collects by default).
``param:X``      any parameter is named ``X``: positional-only, positional, keyword-only, or the
                 ``*X`` / ``**X`` catch-alls.
``decorator:X``  a decorator whose last dotted name is ``X``, called or not: ``@X``, ``@a.b.X``,
                 ``@X(...)``, ``@a.X(...)`` (one call stripped; ``@d[0]`` and ``@f()()`` have no
                 name).
``calls:X``      its own body calls something whose last dotted name is ``X`` (``X(...)``,
                 ``obj.X(...)``, ``a.b.X(...)``). What a nested ``def``/``class``/``lambda``
                 evaluates when the function runs (decorators, default values, base classes)
                 counts; the nested bodies do not. Only call expressions count: a decorator
                 written without parentheses (``@X``) is not one, and a call in a local
                 variable's annotation (``x: X() = 1``, never evaluated) does not count.
``annotated``    a return annotation and an annotation on every parameter (``*args`` and
                 ``**kwargs`` included), except a method's first positional parameter when it
                 is named ``self`` or ``cls``.
``lines>=K``     ``end_lineno - lineno + 1 >= K``: lines from the ``def`` line to the last line
                 of its body (decorators not counted; blank and comment lines inside count).
"""

from __future__ import annotations

from collections.abc import Callable

from .indexer import Facts

LINES = "lines"

_PLAIN: dict[str, tuple[Callable[[Facts], bool], str, str]] = {
    "docstring": (
        lambda f: f.docstring,
        "has a docstring (its first statement is a string literal)",
        "has no docstring (its first statement is not a string literal)",
    ),
    "assert": (
        lambda f: f.has_assert,
        "contains an `assert` statement in its own body (not in nested functions)",
        "contains no `assert` statement in its own body (ones in nested functions do not count)",
    ),
    "returns": (
        lambda f: f.returns_value,
        "contains a `return <expression>` statement in its own body "
        "(`return None` counts, a bare `return` does not)",
        "contains no `return <expression>` statement in its own body (a bare `return` "
        "is allowed, `return None` is not)",
    ),
    "raises": (
        lambda f: f.raises,
        "contains a `raise` statement in its own body (a bare `raise` counts)",
        "contains no `raise` statement in its own body (a bare `raise` counts as one)",
    ),
    "decorated": (lambda f: f.decorated, "has at least one decorator", "has no decorator"),
    "yields": (
        lambda f: f.yields,
        "contains a `yield` or `yield from` expression in its own body (it is a generator)",
        "contains no `yield` or `yield from` expression in its own body",
    ),
    "async": (
        lambda f: f.is_async,
        "is defined with `async def`",
        "is defined with a plain `def` (not `async def`)",
    ),
    "method": (
        lambda f: f.in_class,
        "is defined directly in a class body (a method)",
        "is not defined directly in a class body (a module-level function)",
    ),
    "test": (
        lambda f: f.name.startswith("test"),
        "has a name starting with `test`",
        "has a name that does not start with `test`",
    ),
    "annotated": (
        lambda f: f.annotated,
        "has a return annotation and an annotation on every parameter (a method's "
        "`self` or `cls` excepted)",
        "lacks a return annotation or an annotation on some parameter (a method's "
        "`self` or `cls` excepted)",
    ),
}

_WITH_ARG: dict[str, tuple[Callable[[Facts, str], bool], str, str]] = {
    "fixture": (
        lambda f, x: f.name.startswith("test") and x in f.params,
        "is a test function (name starts with `test`) that takes a parameter named "
        "`{x}` (the `{x}` fixture)",
        "is not a test function taking the `{x}` fixture (its name does not start with "
        "`test`, or no parameter other than `*{x}`/`**{x}` is named `{x}`)",
    ),
    "param": (
        lambda f, x: x in f.params or x in f.star_params,
        "has a parameter named `{x}` (of any kind, `*{x}` and `**{x}` included)",
        "has no parameter named `{x}` (of any kind, `*{x}` and `**{x}` included)",
    ),
    "decorator": (
        lambda f, x: x in f.decorators,
        "has a decorator whose last dotted name is `{x}`, called or not (`@{x}`, "
        "`@module.{x}`, `@{x}(...)`)",
        "has no decorator whose last dotted name is `{x}` (`@{x}`, `@module.{x}`, `@{x}(...)`)",
    ),
    "calls": (
        lambda f, x: x in f.calls,
        "calls something named `{x}` in its own body (`{x}(...)` or `obj.{x}(...)`; "
        "calls inside nested functions, classes and lambdas do not count)",
        "makes no call to something named `{x}` in its own body (`{x}(...)` or "
        "`obj.{x}(...)`; calls inside nested functions, classes and lambdas do not count)",
    ),
}

PLAIN = frozenset(_PLAIN)
WITH_ARG = frozenset(_WITH_ARG)
KNOWN = (*_PLAIN, *(f"{n}:X" for n in _WITH_ARG), f"{LINES}>=K")


def test(name: str, arg: str | int | None) -> Callable[[Facts], bool]:
    """The test of atom ``name`` (``arg``: the X of ``name:X`` or the K of ``lines>=K``)."""
    if name == LINES:
        if arg is None:
            raise ValueError(f"{LINES}>=K needs its K")
        k = int(arg)
        return lambda f: f.lines >= k
    if name in _WITH_ARG:
        if not isinstance(arg, str):
            raise ValueError(f"{name}:X needs its X (a string), got {arg!r}")
        fn, x = _WITH_ARG[name][0], arg
        return lambda f: fn(f, x)
    return _PLAIN[name][0]


def describe(name: str, arg: str | int | None, negated: bool = False) -> str:
    """Plain words for the objective (``negated``: the words for ``not name``)."""
    if name == LINES:
        return (
            f"spans {'fewer than' if negated else 'at least'} {arg} lines from its `def` "
            "line to the last line of its body (decorators not counted)"
        )
    if name in _WITH_ARG:
        _, says, denies = _WITH_ARG[name]
        return (denies if negated else says).format(x=arg)
    _, says, denies = _PLAIN[name]
    return denies if negated else says
