"""Deterministic single-function mutations, located with :mod:`ast` and applied as text edits.

A mutation names a function by qualified name (``Class.method`` or ``function``), an operator
and ``k``, the index of the operator's target among its candidate nodes inside that function (in
source order). Only the tokens that change are rewritten (an operator, a literal, a swapped
argument, a removed statement), so the mutated line keeps the project's formatting and nothing
marks where the edit happened.

Operators (``value`` is Python source text where an operator needs one):

``compare_negate``  ``==``/``!=``, ``<``/``>=``, ``>``/``<=``, ``in``/``not in``, ``is``/``is not``
``compare_boundary`` ``<``/``<=`` and ``>``/``>=``
``int_delta``       an integer literal plus ``value`` (default 1): off-by-one
``bool_flip``       ``True``/``False``
``boolop_swap``     ``and``/``or`` (two-operand expressions)
``binop_swap``      ``+``/``-``
``negate_test``     the test of an ``if``/``while``/conditional expression gets (or loses) ``not``
``swap_args``       the first two positional arguments of a call
``drop_stmt``       remove a statement (``value`` names the statement type, e.g. ``If``, ``Expr``)
``return_value``    a ``return`` statement's value becomes ``value``
``default``         a parameter default becomes ``value``
``replace_const``   a string literal becomes ``value``
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

OPS = (
    "compare_negate",
    "compare_boundary",
    "int_delta",
    "bool_flip",
    "boolop_swap",
    "binop_swap",
    "negate_test",
    "swap_args",
    "drop_stmt",
    "return_value",
    "default",
    "replace_const",
)
_NEGATE = {
    ast.Eq: "!=",
    ast.NotEq: "==",
    ast.Lt: ">=",
    ast.GtE: "<",
    ast.Gt: "<=",
    ast.LtE: ">",
    ast.In: "not in",
    ast.NotIn: "in",
    ast.Is: "is not",
    ast.IsNot: "is",
}
_BOUNDARY = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}
_OP_TEXT = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: r"not\s+in",
    ast.Is: "is",
    ast.IsNot: r"is\s+not",
}


class MutationError(ValueError):
    """The mutation does not apply (no such function, too few targets, no change)."""


@dataclass(frozen=True)
class Mutation:
    file: str
    function: str
    op: str
    k: int = 0
    value: str | None = None


@dataclass(frozen=True)
class Applied:
    source: str  # the whole mutated file
    original_func: str  # the function's lines before (the reference fix puts these back)
    mutated_func: str  # the function's lines after
    changed_lines: tuple[str, ...]  # original lines (stripped) that the mutation removed/changed


def find_function(tree: ast.AST, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if name == qualname and not isinstance(child, ast.ClassDef):
                    return child
                found = walk(child, name + ".")
                if found is not None:
                    return found
        return None

    found = walk(tree, "")
    if found is None:
        raise MutationError(f"no function {qualname!r}")
    return found


def function_span(source: str, qualname: str) -> tuple[int, int]:
    """0-based [start, end) line span of the function, decorators included."""
    fn = find_function(ast.parse(source), qualname)
    start = min([fn.lineno] + [d.lineno for d in fn.decorator_list]) - 1
    assert fn.end_lineno is not None  # ast.parse sets it on every statement
    return start, fn.end_lineno


class _Text:
    """Source lines with (line, utf-8 column) <-> character offset conversion."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    def span(self, node) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset),
        )


def _targets(fn, op: str, value: str | None) -> list:
    nodes = [n for n in ast.walk(fn) if n is not fn]
    out: list[ast.AST]
    if op in ("compare_negate", "compare_boundary"):
        table = _NEGATE if op == "compare_negate" else _BOUNDARY
        out = [
            n
            for n in nodes
            if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in table
        ]
    elif op == "int_delta":
        out = [n for n in nodes if isinstance(n, ast.Constant) and type(n.value) is int]
    elif op == "bool_flip":
        out = [n for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, bool)]
    elif op == "boolop_swap":
        out = [n for n in nodes if isinstance(n, ast.BoolOp) and len(n.values) == 2]
    elif op == "binop_swap":
        out = [
            n for n in nodes if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub))
        ]
    elif op == "negate_test":
        out = [n for n in nodes if isinstance(n, (ast.If, ast.While, ast.IfExp))]
    elif op == "swap_args":
        out = [
            n
            for n in nodes
            if isinstance(n, ast.Call)
            and len(n.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in n.args[:2])
        ]
    elif op == "drop_stmt":
        out = [
            n
            for n in nodes
            if isinstance(n, ast.stmt) and (value is None or type(n).__name__ == value)
        ]
    elif op == "return_value":
        out = [n for n in nodes if isinstance(n, ast.Return)]
    elif op == "default":
        a = fn.args
        out = [d for d in list(a.defaults) + list(a.kw_defaults) if d is not None]
    elif op == "replace_const":
        out = [
            n
            for n in nodes
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and not _is_docstring(fn, n)
        ]
    else:
        raise MutationError(f"unknown operator {op!r}; known: {', '.join(OPS)}")
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _is_docstring(fn, node) -> bool:
    body = fn.body
    return bool(body) and isinstance(body[0], ast.Expr) and body[0].value is node


def _gap_replace(text: _Text, left, right, pattern: str, new: str) -> tuple[int, int, str]:
    a, b = text.span(left)[1], text.span(right)[0]
    gap = text.source[a:b]
    m = re.search(rf"(?<![\w=!<>])(?:{pattern})(?![\w=])", gap)
    if m is None:
        raise MutationError(f"operator not found between operands: {gap!r}")
    return a, b, gap[: m.start()] + new + gap[m.end() :]


def _edit(text: _Text, node, op: str, value: str | None) -> tuple[int, int, str]:
    """(start, end, replacement) character edit of the source."""
    src = text.source
    if op in ("compare_negate", "compare_boundary"):
        table = _NEGATE if op == "compare_negate" else _BOUNDARY
        kind = type(node.ops[0])
        return _gap_replace(text, node.left, node.comparators[0], _OP_TEXT[kind], table[kind])
    if op == "int_delta":
        a, b = text.span(node)
        return a, b, str(node.value + int(value or 1))
    if op == "bool_flip":
        a, b = text.span(node)
        return a, b, "False" if node.value else "True"
    if op == "boolop_swap":
        word = "and" if isinstance(node.op, ast.And) else "or"
        return _gap_replace(
            text, node.values[0], node.values[1], word, "or" if word == "and" else "and"
        )
    if op == "binop_swap":
        sym = "+" if isinstance(node.op, ast.Add) else "-"
        return _gap_replace(text, node.left, node.right, re.escape(sym), "-" if sym == "+" else "+")
    if op == "negate_test":
        test = node.test
        a, b = text.span(test)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            oa, ob = text.span(test.operand)
            inner = src[oa:ob]
            return a, b, f"({inner})" if src[a:oa].rstrip().endswith("(") else inner
        seg = src[a:b]
        wrap = isinstance(test, (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda))
        return a, b, f"not ({seg})" if wrap else f"not {seg}"
    if op == "swap_args":
        (a1, b1), (a2, b2) = text.span(node.args[0]), text.span(node.args[1])
        return a1, b2, src[a2:b2] + src[b1:a2] + src[a1:b1]
    if op == "drop_stmt":
        first, last = node.lineno - 1, node.end_lineno - 1
        line = text.lines[first]
        indent = line[: len(line) - len(line.lstrip())]
        if text.offset(node.lineno, node.col_offset) != text.starts[first] + len(
            indent
        ) or text.lines[last][
            len(text.lines[last].encode()[: node.end_col_offset].decode()) :
        ].strip() not in ("", "\\"):
            raise MutationError("statement does not occupy whole lines")
        return text.starts[first], text.starts[last + 1], ""
    if op in ("return_value", "default", "replace_const"):
        if value is None:
            raise MutationError(f"{op} needs a value")
        ast.parse(value, mode="eval")
        if op == "return_value":
            if node.value is None:
                a, b = text.span(node)
                return a, b, f"return {value}"
            node = node.value
        a, b = text.span(node)
        return a, b, value
    raise MutationError(f"unknown operator {op!r}")


def apply(source: str, m: Mutation) -> Applied:
    """Apply ``m`` to the file text ``source``; raise :class:`MutationError` if it cannot."""
    tree = ast.parse(source)
    fn = find_function(tree, m.function)
    targets = _targets(fn, m.op, m.value)
    if m.k >= len(targets):
        raise MutationError(f"{m.function}: only {len(targets)} target(s) for {m.op}, k={m.k}")
    text = _Text(source)
    a, b, new = _edit(text, targets[m.k], m.op, m.value)
    out = source[:a] + new + source[b:]
    if m.op == "drop_stmt":
        out = _pad_empty_block(out, m.function)
    try:
        new_tree = ast.parse(out)
    except SyntaxError as e:
        raise MutationError(f"mutation does not parse: {e}") from None
    if ast.dump(new_tree) == ast.dump(tree):
        raise MutationError("mutation changes nothing")
    s0, e0 = function_span(source, m.function)
    s1, e1 = function_span(out, m.function)
    old_lines = source.splitlines(keepends=True)
    new_lines = out.splitlines(keepends=True)
    orig_func, mut_func = "".join(old_lines[s0:e0]), "".join(new_lines[s1:e1])
    if old_lines[:s0] != new_lines[:s1] or old_lines[e0:] != new_lines[e1:]:
        raise MutationError("mutation leaked outside the function")
    changed = tuple(
        ln[2:].strip()
        for ln in difflib.ndiff(orig_func.splitlines(), mut_func.splitlines())
        if ln.startswith("- ") and ln[2:].strip()
    )
    return Applied(
        source=out, original_func=orig_func, mutated_func=mut_func, changed_lines=changed
    )


def _pad_empty_block(source: str, qualname: str) -> str:
    """After removing a block's only statement, put ``pass`` back so the file still parses."""
    try:
        ast.parse(source)
        return source
    except SyntaxError as e:
        lines = source.splitlines(keepends=True)
        i = (e.lineno or 1) - 1
        # the block header is the last non-blank line before the error ending with ':'
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j < 0 or not lines[j].rstrip().endswith(":"):
            raise MutationError(f"cannot repair the emptied block: {e}") from None
        indent = lines[j][: len(lines[j]) - len(lines[j].lstrip())] + "    "
        lines.insert(j + 1, indent + "pass\n")
        return "".join(lines)
