"""Definitions of a snapshot, their identifiers and the facts the RepoScan predicates read.

Universe: every ``def`` / ``async def`` in a ``.py`` file under the snapshot root whose enclosing
scopes are only the module and classes (nested classes included). Definitions inside module- or
class-level ``if`` / ``try`` / ``with`` / ``for`` / ``while`` / ``match`` blocks count; anything
inside a function (or inside a class inside a function) does not. Files that Python 3.11's
``ast`` cannot parse are skipped.

Identifier: ``<path relative to the root, forward slashes>::<dotted qualified name>``. Several
definitions may share one identifier (conditional definitions); the verifier accepts an
identifier when any of them satisfies the predicate.

A function's *own body* excludes the bodies of nested functions, classes and lambdas.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import paths

INDEX_VERSION = 4
SNIPPET_LINES = 8
SNIPPET_WIDTH = 120


@dataclass
class Definition:
    """One ``def`` of the universe with its display fields and predicate facts."""

    ident: str
    path: str
    qualname: str
    name: str
    kind: str  # "function" | "method" | "async function" | "async method"
    line: int
    signature: str
    snippet: str
    # Predicate facts. Only the verifier reads these; search results never include them.
    docstring: bool = False
    has_assert: bool = False
    returns_value: bool = False
    raises: bool = False
    decorated: bool = False
    params: list[str] = field(default_factory=list)


class _OwnBody(ast.NodeVisitor):
    """Collects statement facts of one function body without entering nested scopes."""

    def __init__(self) -> None:
        self.has_assert = False
        self.returns_value = False
        self.raises = False

    def visit_FunctionDef(self, node):  # nested scopes are not the function's own body
        return

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_Assert(self, node):
        self.has_assert = True
        self.generic_visit(node)

    def visit_Return(self, node):
        if node.value is not None:
            self.returns_value = True
        self.generic_visit(node)

    def visit_Raise(self, node):
        self.raises = True
        self.generic_visit(node)


def _own_body_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> _OwnBody:
    v = _OwnBody()
    for stmt in fn.body:
        v.visit(stmt)
    return v


def _has_docstring(fn) -> bool:
    first = fn.body[0] if fn.body else None
    return (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str))


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


def definitions_in_source(source: str, relpath: str) -> list[Definition]:
    """Return the universe's definitions in one file's source (empty if it does not parse)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    out: list[Definition] = []

    def visit(fn, prefix, in_class):
        qual = ".".join(prefix + [fn.name])
        is_async = isinstance(fn, ast.AsyncFunctionDef)
        kind = ("async " if is_async else "") + ("method" if in_class else "function")
        start = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        end = fn.end_lineno or fn.lineno
        snippet_end = min(end, start + SNIPPET_LINES - 1)
        snippet = "\n".join(_clip(l) for l in lines[start - 1: snippet_end])
        facts = _own_body_facts(fn)
        a = fn.args
        out.append(Definition(
            ident=f"{relpath}::{qual}", path=relpath, qualname=qual, name=fn.name, kind=kind,
            line=fn.lineno, signature=_clip(lines[fn.lineno - 1].strip()), snippet=snippet,
            docstring=_has_docstring(fn), has_assert=facts.has_assert,
            returns_value=facts.returns_value, raises=facts.raises,
            decorated=bool(fn.decorator_list),
            params=[p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)],
        ))

    _walk_scope(tree.body, [], False, visit)
    return out


def index_tree(root: Path) -> list[Definition]:
    """Index every ``.py`` file under ``root`` in a deterministic order (sorted paths)."""
    root = Path(root)
    files = sorted(
        p for p in root.rglob("*.py")
        if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(root).parts
    )
    defs: list[Definition] = []
    for f in files:
        rel = f.relative_to(root).as_posix()
        try:
            source = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        defs.extend(definitions_in_source(source, rel))
    return defs


def _cache_path(name: str, sha256: str) -> Path:
    return paths.home() / "index" / f"{name}-{sha256[:16]}-v{INDEX_VERSION}.json.gz"


_MEMO: dict[str, list[Definition]] = {}


def load_index(name: str) -> list[Definition]:
    """Definitions of snapshot ``name``: memory, then disk cache, then build (and cache)."""
    from . import snapshots

    pin = snapshots.get_pin(name)
    key = f"{name}:{pin.sha256}"
    if key in _MEMO:
        return _MEMO[key]
    cache = _cache_path(name, pin.sha256)
    if cache.is_file():
        with gzip.open(cache, "rt", encoding="utf-8") as fh:
            defs = [Definition(**d) for d in json.load(fh)]
    else:
        root = snapshots.ensure(name)
        defs = index_tree(root)
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".tmp{os.getpid()}")
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=3) as fh:
            json.dump([asdict(d) for d in defs], fh)
        os.replace(tmp, cache)  # atomic: concurrent builders write the same bytes
    _MEMO[key] = defs
    return defs
