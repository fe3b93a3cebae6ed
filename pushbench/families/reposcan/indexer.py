"""Definitions of a snapshot, their identifiers and the facts the RepoScan predicates read.

Two views of the same definitions, from one walk of each file's ``ast``:

* :class:`Definition`: what search shows (identifier, kind, signature, location, snippet). This
  is the only thing written to disk (``$PUSHBENCH_HOME/index/*.json.gz``, private to the user).
* :class:`Facts`: what the predicates read (docstring, assert, return, raise, yield, calls,
  decorators, parameters, annotations, size). Facts are **never written to disk**: a cache of
  them would be an answer key (filtering it rebuilds every valid set). :func:`load_facts` re-parses
  the built snapshot's
  source the first time a process needs them and keeps them in memory only.

Universe: every ``def`` / ``async def`` in a ``.py`` file under the snapshot root whose enclosing
scopes are only the module and classes (nested classes included). Definitions inside module- or
class-level ``if`` / ``try`` / ``with`` / ``for`` / ``while`` / ``match`` blocks count; anything
inside a function (or inside a class inside a function) does not.

Files skipped, each with a reason (too large, too deep, not parseable, not UTF-8, unreadable:
:mod:`.pyfiles`), are listed by :func:`index_tree_report`; the index and the facts skip the same.

Identifier: ``<path relative to the root, forward slashes>::<dotted qualified name>``. Several
definitions may share one identifier (conditional definitions); the verifier accepts an
identifier when any of them satisfies the predicate.

A function's *own body* excludes the bodies of nested functions, classes and lambdas. What a
nested ``def``/``class``/``lambda`` evaluates when the enclosing function runs (its decorators,
default values, base classes and class keywords) is part of the own body for ``calls``.
"""

from __future__ import annotations

import ast
import gzip
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ... import paths
from .pyfiles import (  # noqa: F401 (re-exported)
    MAX_PY_BYTES,
    SKIP_REASONS,
    Skipped,
    parse_checked,
    py_files,
    read_bounded,
    skipped_summary,
)

# v5: display fields only (predicate facts moved to memory; see the module docstring).
INDEX_VERSION = 5
SNIPPET_LINES = 8
SNIPPET_WIDTH = 120


@dataclass
class Definition:
    """One ``def`` of the universe: the display fields search shows (and the disk cache holds)."""

    ident: str
    path: str
    qualname: str
    name: str
    kind: str  # "function" | "method" | "async function" | "async method"
    line: int
    signature: str
    snippet: str


@dataclass(frozen=True)
class Facts:
    """Predicate facts of one ``def``: kept in memory only, never cached on disk."""

    ident: str
    qualname: str
    name: str
    docstring: bool
    has_assert: bool
    returns_value: bool
    raises: bool
    decorated: bool
    params: tuple[str, ...]  # positional-only, positional and keyword-only parameter names
    # Added for the predicate language (defaults keep older constructors working).
    star_params: tuple[str, ...] = ()  # the names of ``*args`` and ``**kwargs``, if any
    is_async: bool = False
    in_class: bool = False  # innermost enclosing scope is a class (search shows kind "method")
    yields: bool = False  # ``yield`` / ``yield from`` in its own body
    decorators: tuple[str, ...] = ()  # last dotted name of each named decorator, calls stripped
    calls: frozenset[str] = frozenset()  # last dotted names of what its own body calls
    annotated: bool = False  # every parameter but a method's self/cls, and the return
    lines: int = 0  # end_lineno - lineno + 1 of the ``def`` (decorators not counted)


@dataclass
class _OwnBody:
    has_assert: bool = False
    returns_value: bool = False
    raises: bool = False
    yields: bool = False
    calls: set[str] = field(default_factory=set)


_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Fields that never hold a node that can contain a call or a yield (names, flags, contexts,
# operators): skipping them makes the walk over every expression cheaper.
_SCALAR_FIELDS = frozenset(
    {
        "ctx",
        "op",
        "id",
        "attr",
        "arg",
        "name",
        "asname",
        "module",
        "level",
        "names",
        "type_comment",
        "kind",
        "kwd_attrs",
        "rest",
        "is_async",
        "simple",
        "conversion",
    }
)
# AST class -> fields to walk. A local variable's annotation is never evaluated (PEP 526).
_CHILDREN: dict[type[ast.AST], tuple[str, ...]] = {
    ast.Constant: (),
    ast.AnnAssign: ("target", "value"),
}


def _children(kind: type[ast.AST]) -> tuple[str, ...]:
    names = _CHILDREN.get(kind)
    if names is None:
        names = _CHILDREN[kind] = tuple(f for f in kind._fields if f not in _SCALAR_FIELDS)
    return names


def _last_name(node) -> str | None:
    """``X`` for ``X`` or ``a.b.X``; None for anything else (subscripts, calls, lambdas)."""
    kind = type(node)
    if kind is ast.Name:
        return node.id
    if kind is ast.Attribute:
        return node.attr
    return None


def _evaluated_by_definition(node) -> list:
    """What running a nested ``def``/``class``/``lambda`` statement evaluates in the enclosing
    function: decorators, default values, bases and class keywords (never the nested body, and
    not annotations, which ``from __future__ import annotations`` leaves unevaluated)."""
    if type(node) is ast.ClassDef:
        return [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
    out = [] if type(node) is ast.Lambda else list(node.decorator_list)
    out += node.args.defaults
    out += [d for d in node.args.kw_defaults if d is not None]
    return out


def _own_body_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> _OwnBody:
    """Facts of one function's own body: every node but the bodies of nested scopes.

    Nested ``def``/``async def``/``class``/``lambda`` contribute only what their definition
    evaluates (:func:`_evaluated_by_definition`), which holds no statements, so ``assert``,
    ``return`` and ``raise`` are exactly the function's own statements.
    """
    facts = _OwnBody()
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if node is None:  # ``None`` entries of lists (dict ``**`` keys, keyword-only defaults)
            continue
        kind = type(node)
        if kind in _SCOPE_NODES or kind is ast.Lambda:
            stack.extend(_evaluated_by_definition(node))
            continue
        if kind is ast.Assert:
            facts.has_assert = True
        elif isinstance(node, ast.Return):
            facts.returns_value = facts.returns_value or node.value is not None
        elif kind is ast.Raise:
            facts.raises = True
        elif kind is ast.Yield or kind is ast.YieldFrom:
            facts.yields = True
        elif isinstance(node, ast.Call):
            name = _last_name(node.func)
            if name is not None:
                facts.calls.add(name)
        for name in _children(kind):
            sub = getattr(node, name, None)
            if type(sub) is list:
                stack.extend(sub)
            elif isinstance(sub, ast.AST):
                stack.append(sub)
    return facts


def _decorator_names(fn) -> tuple[str, ...]:
    """Last dotted name of each decorator, one call stripped: ``@X``, ``@a.b.X``, ``@X(...)``
    and ``@a.X(...)`` all give ``X``; other expressions (``@d[0]``, ``@f()()``) give none."""
    out = []
    for dec in fn.decorator_list:
        name = _last_name(dec.func if type(dec) is ast.Call else dec)
        if name is not None:
            out.append(name)
    return tuple(out)


def _fully_annotated(fn, in_class: bool) -> bool:
    """Return annotation present and every parameter annotated (``*args``/``**kwargs``
    included), except a method's first positional parameter when it is named self or cls."""
    if fn.returns is None:
        return False
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    if in_class and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    every = [*positional, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p is not None)]
    return all(p.annotation is not None for p in every)


def _has_docstring(fn) -> bool:
    first = fn.body[0] if fn.body else None
    return (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )


def _clip(line: str) -> str:
    line = line.rstrip().expandtabs(4)
    return line if len(line) <= SNIPPET_WIDTH else line[: SNIPPET_WIDTH - 3] + "..."


def _walk_scope(body, prefix: list[str], in_class: bool, visit) -> None:
    """Visit defs at module/class level, descending into compound statements but not functions."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node, prefix, in_class)
        elif isinstance(node, ast.ClassDef):
            _walk_scope(node.body, prefix + [node.name], True, visit)
        else:
            # Source order: try body, except handlers, match cases, else, finally.
            blocks = [getattr(node, "body", None)]
            blocks += [h.body for h in getattr(node, "handlers", None) or ()]
            blocks += [c.body for c in getattr(node, "cases", None) or ()]
            blocks += [getattr(node, "orelse", None), getattr(node, "finalbody", None)]
            for sub in blocks:
                if isinstance(sub, list):
                    _walk_scope(sub, prefix, in_class, visit)


def _parse(source: str):
    """The module's tree, or None when :func:`parse_checked` gives a reason."""
    return parse_checked(source)[0]


def _qualname_walk(tree, visit) -> None:
    def each(fn, prefix, in_class):
        visit(fn, ".".join(prefix + [fn.name]), in_class)

    _walk_scope(tree.body, [], False, each)


def definitions_in_source(source: str, relpath: str) -> list[Definition]:
    """Return the universe's definitions in one file's source (empty if it does not parse)."""
    tree = _parse(source)
    return [] if tree is None else _definitions(tree, source, relpath)


def _definitions(tree, source: str, relpath: str) -> list[Definition]:
    lines = source.splitlines()
    out: list[Definition] = []

    def visit(fn, qual, in_class):
        is_async = isinstance(fn, ast.AsyncFunctionDef)
        kind = ("async " if is_async else "") + ("method" if in_class else "function")
        start = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        end = fn.end_lineno or fn.lineno
        snippet_end = min(end, start + SNIPPET_LINES - 1)
        snippet = "\n".join(_clip(ln) for ln in lines[start - 1 : snippet_end])
        out.append(
            Definition(
                ident=f"{relpath}::{qual}",
                path=relpath,
                qualname=qual,
                name=fn.name,
                kind=kind,
                line=fn.lineno,
                signature=_clip(lines[fn.lineno - 1].strip()),
                snippet=snippet,
            )
        )

    _qualname_walk(tree, visit)
    return out


def facts_in_source(source: str, relpath: str) -> list[Facts]:
    """Predicate facts of the universe's definitions in one file, in the same order as
    :func:`definitions_in_source` (empty if the file does not parse)."""
    tree = _parse(source)
    if tree is None:
        return []
    out: list[Facts] = []

    def visit(fn, qual, in_class):
        own = _own_body_facts(fn)
        a = fn.args
        out.append(
            Facts(
                ident=f"{relpath}::{qual}",
                qualname=qual,
                name=fn.name,
                docstring=_has_docstring(fn),
                has_assert=own.has_assert,
                returns_value=own.returns_value,
                raises=own.raises,
                decorated=bool(fn.decorator_list),
                params=tuple(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)),
                star_params=tuple(p.arg for p in (a.vararg, a.kwarg) if p is not None),
                is_async=isinstance(fn, ast.AsyncFunctionDef),
                in_class=in_class,
                yields=own.yields,
                decorators=_decorator_names(fn),
                calls=frozenset(own.calls),
                annotated=_fully_annotated(fn, in_class),
                lines=(fn.end_lineno or fn.lineno) - fn.lineno + 1,
            )
        )

    _qualname_walk(tree, visit)
    return out


def _scan(root: Path):
    """``(relative path, tree or None, source or None, reason or None)`` of every ``.py``
    file under ``root`` in sorted order (the one place that decides what is skipped)."""
    root = Path(root)
    for f in py_files(root):
        rel = f.relative_to(root).as_posix()
        source, reason = read_bounded(f)
        tree = None
        if source is not None:
            tree, reason = parse_checked(source)
        yield rel, tree, source, reason


def _sources(root: Path):
    """``(relative path, source)`` of every ``.py`` file under ``root`` that indexing reads
    (readable, UTF-8, within :data:`MAX_PY_BYTES`), sorted."""
    for f in py_files(Path(root)):
        source, _ = read_bounded(f)
        if source is not None:
            yield f.relative_to(root).as_posix(), source


def unparsable_files(root: Path, definitions: list[Definition] | None = None) -> list[str]:
    """Relative paths of the ``.py`` files under ``root`` that indexing skips, sorted (see
    :func:`index_tree_report` for the reasons). ``definitions`` is accepted for callers of
    the older signature and not needed."""
    return [s.path for s in index_tree_report(root)[1]]


def index_tree_report(root: Path) -> tuple[list[Definition], list[Skipped]]:
    """:func:`index_tree` and the files it skipped, with their reasons (one parse per file)."""
    defs: list[Definition] = []
    skipped: list[Skipped] = []
    for rel, tree, source, reason in _scan(root):
        if reason is not None:
            skipped.append(Skipped(rel, reason))
        else:
            defs += _definitions(tree, source, rel)
    return defs, skipped


def index_tree(root: Path) -> list[Definition]:
    """Index every ``.py`` file under ``root`` in a deterministic order (sorted paths), skipping
    what :func:`index_tree_report` lists."""
    return index_tree_report(root)[0]


def facts_tree(root: Path) -> list[Facts]:
    """Predicate facts of every definition under ``root``, in :func:`index_tree` order."""
    return [f for rel, src in _sources(root) for f in facts_in_source(src, rel)]


def _cache_path(name: str, sha256: str) -> Path:
    return paths.home() / "index" / f"{name}-{sha256[:16]}-v{INDEX_VERSION}.json.gz"


_MEMO: dict[str, list[Definition]] = {}
_FACTS: dict[str, list[Facts]] = {}
_FIELDS = tuple(f.name for f in fields(Definition))


def _remove_stale_caches(folder: Path) -> None:
    """Delete index files of other versions: before v5 they held predicate facts."""
    keep = f"-v{INDEX_VERSION}.json.gz"
    for p in folder.glob("*.json.gz"):
        if not p.name.endswith(keep):
            p.unlink(missing_ok=True)
    for p in folder.glob("*.json.tmp*"):  # a killed writer's leftover (pre-v5 naming)
        p.unlink(missing_ok=True)


def load_index(name: str) -> list[Definition]:
    """Definitions of snapshot ``name``: memory, then disk cache, then build (and cache).

    The cache file holds the display fields only and is written private (0600 in a 0700
    folder); building it also deletes index files of earlier versions.
    """
    from ... import snapshots

    pin = snapshots.get_pin(name)
    key = f"{name}:{pin.sha256}"
    if key in _MEMO:
        return _MEMO[key]
    cache = _cache_path(name, pin.sha256)
    if cache.is_file():
        with gzip.open(cache, "rt", encoding="utf-8") as fh:
            defs = [Definition(**{k: d[k] for k in _FIELDS}) for d in json.load(fh)]
    else:
        defs = index_tree(snapshots.ensure(name))
        _store(cache, defs)
    _MEMO[key] = defs
    return defs


def _store(cache: Path, defs: list[Definition]) -> None:
    folder = paths.private_dir(cache.parent)
    _remove_stale_caches(folder)
    data = gzip.compress(json.dumps([asdict(d) for d in defs]).encode(), compresslevel=3, mtime=0)
    paths.write_private(cache, data)  # atomic: concurrent builders write the same bytes


def remember(name: str, sha256: str, defs: list[Definition]) -> None:
    """Cache ``defs`` as the index of snapshot ``name`` pinned at ``sha256`` (they were built
    from its tree before it was pinned, so :func:`load_index` need not parse it again)."""
    _store(_cache_path(name, sha256), defs)
    _MEMO[f"{name}:{sha256}"] = defs


def load_facts(name: str) -> list[Facts]:
    """Predicate facts of snapshot ``name``, computed in memory from its source (memoised).

    The first call in a process re-parses the built snapshot (about as long as indexing it);
    later calls are free. Raises ``RuntimeError`` if the facts and the search index disagree on
    the definitions (a stale index: rebuild the snapshot).
    """
    from ... import snapshots

    pin = snapshots.get_pin(name)
    key = f"{name}:{pin.sha256}"
    if key not in _FACTS:
        facts = facts_tree(snapshots.ensure(name))
        if [f.ident for f in facts] != [d.ident for d in load_index(name)]:
            raise RuntimeError(
                f"snapshot {name!r}: the cached search index and the source disagree on the "
                f"definitions; delete {_cache_path(name, pin.sha256)} and retry"
            )
        _FACTS[key] = facts
    return _FACTS[key]
