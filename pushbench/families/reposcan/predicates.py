"""The RepoScan predicate language over :class:`~.indexer.Facts` (in memory, never on disk).

A predicate is a boolean expression over atoms (the properties in :mod:`.atoms`), parsed once by
:func:`parse_predicate` into a :class:`Predicate`: its spec, a test over one definition's facts,
and a plain-words description for the agent's objective. Grammar (precedence ``not`` > ``and``
> ``or``; ``and``/``or`` group left to right; whitespace separates tokens and is otherwise
ignored)::

    expr    := and_expr ("or" and_expr)*
    and_expr:= unary ("and" unary)*
    unary   := "not" unary | "(" expr ")" | atom
    atom    := NAME | NAME ":" NAME | "lines" ">=" DIGITS

``and``, ``or`` and ``not`` are reserved words (lower case only). Bad input raises
:class:`PredicateError` (a ``ValueError``) naming the 1-based column and echoing the spec with
a caret under it.
"""

from __future__ import annotations

import difflib
import keyword
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from . import atoms
from .indexer import Facts

MAX_SPEC_CHARS = 1000  # longer specs are refused: a predicate is a short formula
MAX_DEPTH = 32  # nesting of parentheses and `not`: deeper is refused, never a RecursionError
KEYWORDS = ("and", "or", "not")

_TOKEN = re.compile(r"\s*(?:(?P<word>\w+)|(?P<op>[<>=!]=|[<>=():.])|(?P<bad>\S))", re.UNICODE)


@dataclass(frozen=True)
class Predicate:
    spec: str  # the text as given
    test: Callable[[Facts], bool]
    description: str  # plain words for the objective; never lists identifiers
    canonical: str = ""  # normalised spelling: single spaces, same-operator groups merged,
    # parentheses around every group inside another group or under `not`


class PredicateError(ValueError):
    """A spec that does not parse; ``column`` is 1-based (``len(spec) + 1`` means at the end)."""

    def __init__(self, spec: str, column: int, message: str):
        self.spec, self.column, self.message = spec, column, message
        shown = "".join(c if c.isprintable() else " " for c in spec)  # keep the caret aligned
        super().__init__(
            f"predicate error at column {column}: {message}\n  {shown}\n  {' ' * (column - 1)}^"
        )


# ----- syntax tree -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Atom:
    name: str
    arg: str | int | None = None


@dataclass(frozen=True)
class Not:
    expr: Node


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    items: tuple[Node, ...]


Node = Atom | Not | BoolOp


# ----- tokens and parser -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tok:
    kind: str  # "word" | "op" | "end"
    text: str
    col: int  # 1-based


def _tokenize(spec: str) -> list[_Tok]:
    toks, pos = [], 0
    while True:
        m = _TOKEN.match(spec, pos)
        if m is None:  # only whitespace left
            toks.append(_Tok("end", "", len(spec) + 1))
            return toks
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        col = m.start(kind) + 1
        if kind == "bad":
            raise PredicateError(spec, col, f"unexpected character {m.group(kind)!r}")
        toks.append(_Tok(kind, m.group(kind), col))
        pos = m.end()


class _Parser:
    def __init__(self, spec: str):
        self.spec = spec
        self.toks = _tokenize(spec)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def fail(self, message: str, tok: _Tok | None = None) -> NoReturn:
        raise PredicateError(self.spec, (tok or self.tok).col, message)

    def take(self) -> _Tok:
        t = self.tok
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.kind != "end" and self.tok.text == text

    def parse(self) -> Node:
        node = self.expr(0)
        if self.tok.kind != "end":
            t = self.tok
            hint = (
                " (unbalanced ')')"
                if t.text == ")"
                else " (operators are lower case)"
                if t.text.lower() in KEYWORDS
                else ""
            )
            self.fail(f"expected 'and', 'or' or the end of the predicate, found {_show(t)}{hint}")
        return node

    def expr(self, depth: int) -> Node:
        items = [self.and_expr(depth)]
        while self.at("or"):
            self.take()
            items.append(self.and_expr(depth))
        return _group("or", items)

    def and_expr(self, depth: int) -> Node:
        items = [self.unary(depth)]
        while self.at("and"):
            self.take()
            items.append(self.unary(depth))
        return _group("and", items)

    def unary(self, depth: int) -> Node:
        if depth >= MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels of parentheses and 'not'")
        t = self.tok
        if self.at("not"):
            self.take()
            return Not(self.unary(depth + 1))
        if self.at("("):
            self.take()
            node = self.expr(depth + 1)
            if not self.at(")"):
                self.fail(
                    f"expected ')' to close the '(' at column {t.col}, found {_show(self.tok)}"
                )
            self.take()
            return node
        return self.atom()

    def atom(self) -> Atom:
        t = self.tok
        if t.kind != "word":
            empty = (
                " (the predicate is empty)"
                if t.kind == "end" and t.col == 1 + len(self.spec) and not self.spec.strip()
                else ""
            )
            self.fail(
                f"expected a property such as 'docstring', 'not' or '(', found {_show(t)}{empty}"
            )
        if t.text in KEYWORDS:  # `and`/`or` (a `not` here is read by `unary`)
            self.fail(f"expected a property before '{t.text}'")
        self.take()
        name = t.text
        if name == atoms.LINES:
            if not self.at(">="):
                self.fail(
                    f"expected '>=' after '{name}' (write {name}>=K for at least K lines, "
                    f"'not {name}>=K' for fewer)"
                )
            self.take()
            k = self.tok
            if k.kind != "word" or not (k.text.isascii() and k.text.isdigit()):
                self.fail(f"expected a whole number of lines after '>=', found {_show(k)}")
            if len(k.text) > 9:
                self.fail("line count too large (at most 9 digits)", k)
            self.take()
            return Atom(name, int(k.text))
        if name in atoms.WITH_ARG:
            if not self.at(":"):
                self.fail(f"'{name}' needs a name: write {name}:X")
            self.take()
            x = self.tok
            if x.kind != "word" or not x.text.isidentifier():
                self.fail(f"expected a Python name after '{name}:', found {_show(x)}")
            if keyword.iskeyword(x.text):
                self.fail(f"{x.text!r} is a Python keyword, never a name")
            self.take()
            if self.at(".") or self.at(":"):
                self.fail(
                    f"'{name}:' takes one name, the last part of a dotted name "
                    f"(write {name}:fixture for pytest.fixture)"
                )
            return Atom(name, unicodedata.normalize("NFKC", x.text))  # as Python reads names
        if name in atoms.PLAIN:
            if self.at(":"):
                self.fail(f"'{name}' takes no argument")
            return Atom(name)
        close = difflib.get_close_matches(name, [*atoms.PLAIN, *atoms.WITH_ARG, atoms.LINES], 1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        self.fail(f"unknown property {name!r}{hint}; known: {', '.join(atoms.KNOWN)}", t)


def _group(op: str, items: list[Node]) -> Node:
    """One operand alone, else a flat group (``a and (b and c)`` is ``a and b and c``)."""
    if len(items) == 1:
        return items[0]
    flat: list[Node] = []
    for n in items:
        flat.extend(n.items if isinstance(n, BoolOp) and n.op == op else [n])
    return BoolOp(op, tuple(flat))


def _show(t: _Tok) -> str:
    return "the end of the predicate" if t.kind == "end" else repr(t.text)


# ----- compiling, spelling and describing --------------------------------------------------------
def _compile(node: Node) -> Callable[[Facts], bool]:
    if isinstance(node, Atom):
        return atoms.test(node.name, node.arg)
    if isinstance(node, Not):
        inner = _compile(node.expr)
        return lambda f: not inner(f)
    parts = tuple(_compile(n) for n in node.items)
    if node.op == "and":
        return lambda f: all(p(f) for p in parts)
    return lambda f: any(p(f) for p in parts)


def _spell(node: Node, outer: int = 0) -> str:
    """Canonical text; every group inside another group or under ``not`` is parenthesised."""
    if isinstance(node, Atom):
        if node.arg is None:
            return node.name
        return f"{node.name}>={node.arg}" if node.name == atoms.LINES else f"{node.name}:{node.arg}"
    if isinstance(node, Not):
        return "not " + _spell(node.expr, 1)
    text = f" {node.op} ".join(_spell(n, 1) for n in node.items)
    return f"({text})" if outer else text


def _nnf(node: Node, negate: bool = False):
    """Negation pushed onto atoms (De Morgan), same-operator groups flattened: ``(atom, negated)``
    leaves and ``(op, [children])`` groups, for describing the expression in words."""
    if isinstance(node, Atom):
        return (node, negate)
    if isinstance(node, Not):
        return _nnf(node.expr, not negate)
    op = {"and": "or", "or": "and"}[node.op] if negate else node.op
    items: list[tuple] = []
    for n in node.items:
        sub = _nnf(n, negate)
        items.extend(sub[1] if sub[0] == op else [sub])
    return (op, items)


def _describe(nnf, label: str = "") -> str:
    if isinstance(nnf[0], Atom):
        return atoms.describe(nnf[0].name, nnf[0].arg, negated=nnf[1])
    op, items = nnf
    head = (
        "meets all of these conditions: "
        if op == "and"
        else "meets at least one of these conditions: "
    )
    parts = []
    for i, sub in enumerate(items, 1):
        mark = f"{label}.{i}" if label else str(i)
        parts.append(f"({mark}) {_describe(sub, mark)}")
    return head + "; ".join(parts)


def parse_predicate(spec: str) -> Predicate:
    """Parse ``spec`` (see the module docstring) into a :class:`Predicate`.

    Raises :class:`PredicateError` (a ``ValueError``) on anything that is not a predicate:
    non-strings, empty or over-long text, unknown properties (the message lists the known ones),
    misplaced operators, unbalanced parentheses, nesting deeper than :data:`MAX_DEPTH`.
    """
    if not isinstance(spec, str):
        raise PredicateError("", 1, f"a predicate is text, not {type(spec).__name__}")
    if len(spec) > MAX_SPEC_CHARS:
        raise PredicateError(
            spec[:60] + "...", 1, f"predicate longer than {MAX_SPEC_CHARS} characters"
        )
    node = _Parser(spec).parse()
    return Predicate(spec, _compile(node), _describe(_nnf(node)), _spell(node))


def parse_tree(spec: str) -> Node:
    """The syntax tree of ``spec`` (same errors as :func:`parse_predicate`), for readers such as
    the scripted judge that evaluate an expression atom by atom."""
    return _Parser(parse_predicate(spec).canonical).parse()


# The single atoms whose plain words alone name them in the objective (the built-in instances
# use these; their objectives must never change). Every other predicate also gets its canonical
# expression stated, so an agent that reads only the objective can recover it exactly.
WORDS_ONLY = frozenset({"docstring", "assert", "returns", "raises", "decorated", "fixture"})


def objective_words(pred: Predicate) -> str:
    """The words for the objective: the description, followed by `` (predicate: `<canonical>`)``
    unless the predicate is one positive atom of :data:`WORDS_ONLY`."""
    node = parse_tree(pred.canonical)
    if isinstance(node, Atom) and node.name in WORDS_ONLY:
        return pred.description
    return f"{pred.description} (predicate: `{pred.canonical}`)"
