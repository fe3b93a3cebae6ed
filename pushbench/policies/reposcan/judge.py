"""How an offline agent reads a RepoScan objective and judges a search hit from its snippet.

This is observation-only reasoning: the property comes from the objective (its plain words, or
the expression it states) and the judgement from what a search hit shows (kind, identifier,
signature, and a snippet of at most 8 lines, so long functions are only partly visible).
``judge`` answers ``"yes"`` (evidence visible), ``"no"`` (the visible code rules it out) or
``"maybe"`` (the snippet may be cut before the evidence), per atom, and combines atoms with
three-valued (Kleene) logic.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap

from ...families.reposcan import indexer
from ...families.reposcan.predicates import Atom, Not, parse_tree

SNIPPET_LINES = 8

_PATTERNS = {
    "assert": re.compile(r"^\s*assert\b"),
    "returns": re.compile(r"\breturn\s+[^\s#;]"),
    "raises": re.compile(r"^\s*(?:[^#]*:\s*)?raise\b"),
}


JUDGED = ("docstring", "assert", "returns", "raises", "decorated")  # plus fixture:X
_STATED = re.compile(r"\(predicate: `([^`]+)`\)")


def property_from_objective(objective: str) -> str:
    """Predicate spec the objective describes (``docstring``, ``fixture:app``, ...).

    Exact: an objective stating `` (predicate: `<expression>`)`` (every predicate but one
    positive atom of :data:`JUDGED` or ``fixture:X``) gives that expression's canonical
    spelling; otherwise the objective must contain the description of one of those atoms, word
    for word. Anything else raises ``ValueError`` rather than being read as the nearest atom,
    so a calibration never measures an agent that pursued the wrong property.
    """
    from ...families.reposcan.predicates import parse_predicate

    stated = _STATED.search(objective)
    if stated:  # compound, negated and newer-atom predicates state their expression verbatim
        return parse_predicate(stated.group(1)).canonical
    if "of these conditions:" in objective:
        raise ValueError(
            "the objective combines several conditions without stating the "
            "expression as (predicate: `...`); the scripted judge reads such "
            "objectives only with the expression stated"
        )
    m = re.search(r"parameter named `([A-Za-z_][A-Za-z0-9_]*)`", objective)
    if m and parse_predicate(f"fixture:{m.group(1)}").description in objective:
        return f"fixture:{m.group(1)}"
    for spec in JUDGED:
        if parse_predicate(spec).description in objective:
            return spec
    raise ValueError(
        "cannot tell the property from the objective: it states no expression "
        "as (predicate: `...`) and describes none of the atoms "
        + ", ".join(JUDGED)
        + ", fixture:X in their words"
    )


def _atom_queries(name: str, arg) -> list[str]:
    if name == "fixture":
        return [f"test {arg}", arg, "test", ""]
    if name in ("param", "decorator", "calls"):
        return [arg, ""]
    return {
        "assert": ["assert", "test", ""],
        "returns": ["return", ""],
        "raises": ["raise", "error", "exception", "fail", "invalid", ""],
        "decorated": ["fixture", "property", "setupmethod", ""],
        "yields": ["yield", ""],
        "async": ["async", ""],
        "method": ["self", ""],
        "test": ["test", ""],
    }.get(name, [""])


def _positive_atoms(node, negated: bool = False):
    if isinstance(node, Atom):
        if not negated:
            yield node
    elif isinstance(node, Not):
        yield from _positive_atoms(node.expr, not negated)
    else:
        for sub in node.items:
            yield from _positive_atoms(sub, negated)


def queries_for(spec: str) -> list[str]:
    """Queries a sensible agent tries, most specific first; ``""`` browses everything.

    For an expression: the queries of its positive atoms (those under an even number of
    ``not``) in order of appearance, without repeats, then ``""``.
    """
    out: list[str] = []
    for atom in _positive_atoms(_tree(spec)):
        out += [q for q in _atom_queries(atom.name, atom.arg) if q and q not in out]
    return out + [""]


def _split(snippet: str) -> tuple[list[str], list[str], bool]:
    lines = snippet.split("\n")
    start = next(
        (i for i, ln in enumerate(lines) if ln.lstrip().startswith(("def ", "async def "))), 0
    )
    end = start
    while end < len(lines) - 1 and not lines[end].rstrip().endswith(":"):
        end += 1
    return lines[: end + 1], lines[end + 1 :], len(lines) >= SNIPPET_LINES


def _old_atom(spec: str, hit: dict) -> str:
    """The original judges of the single atoms of :data:`JUDGED` and ``fixture:X``."""
    head, body, maybe_cut = _split(hit.get("snippet", ""))
    if spec == "decorated":
        return "yes" if head and head[0].lstrip().startswith("@") else "no"
    if spec.startswith("fixture:"):
        name = spec.split(":", 1)[1]
        sig = " ".join(ln.strip() for ln in head)
        fn = hit.get("id", "").rsplit(".", 1)[-1].rsplit("::", 1)[-1]
        if not fn.startswith("test"):
            return "no"
        if re.search(rf"[(,]\s*{re.escape(name)}\s*[,:)=]", sig):
            return "yes"
        return "maybe" if not head[-1].rstrip().endswith(":") else "no"
    if spec == "docstring":
        first = next((ln.strip() for ln in body if ln.strip()), None)
        if first is None:
            return "maybe" if maybe_cut else "no"
        return "yes" if re.match(r"^[rRuUbBfF]{0,2}('''|\"\"\"|'|\")", first) else "no"
    pattern = _PATTERNS[spec]
    if any(pattern.search(ln) for ln in body):
        return "yes"
    return "maybe" if maybe_cut else "no"


# ----- any expression: Kleene logic over per-atom judgements --------------------------------------
_NOT = {"yes": "no", "no": "yes", "maybe": "maybe"}


def kleene_not(v: str) -> str:
    return _NOT[v]


def kleene_and(values) -> str:
    values = list(values)
    return "no" if "no" in values else "yes" if all(v == "yes" for v in values) else "maybe"


def kleene_or(values) -> str:
    values = list(values)
    return "yes" if "yes" in values else "no" if all(v == "no" for v in values) else "maybe"


def judge(spec: str, hit: dict) -> str:
    """``yes`` / ``no`` / ``maybe`` for one search hit under predicate ``spec`` (any expression):
    each atom judged from the hit, combined with three-valued (Kleene) logic."""
    return _evaluate(_tree(spec), hit)


@functools.lru_cache(maxsize=64)
def _tree(spec: str):
    return parse_tree(spec)


def _evaluate(node, hit: dict) -> str:
    if isinstance(node, Atom):
        return judge_atom(node.name, node.arg, hit)
    if isinstance(node, Not):
        return kleene_not(_evaluate(node.expr, hit))
    values = (_evaluate(n, hit) for n in node.items)
    return kleene_and(values) if node.op == "and" else kleene_or(values)


def judge_atom(name: str, arg, hit: dict) -> str:
    """One atom on one hit; the six original atoms keep their original judges."""
    if name in JUDGED:
        return _old_atom(name, hit)
    if name == "fixture":
        return _old_atom(f"fixture:{arg}", hit)
    kind = hit.get("kind")
    if name == "async":
        return "maybe" if not kind else "yes" if kind.startswith("async ") else "no"
    if name == "method":
        return "maybe" if not kind else "yes" if kind.endswith("method") else "no"
    if name == "test":
        ident = hit.get("id", "")
        if "::" not in ident:
            return "maybe"
        return "yes" if ident.rsplit("::", 1)[1].rsplit(".", 1)[-1].startswith("test") else "no"
    if name == "lines":
        return _judge_lines(int(arg), hit)
    fn, complete = _visible_function(hit)
    if fn is None:
        return "maybe"
    if name == "param":
        a = fn.args
        every = (
            *a.posonlyargs,
            *a.args,
            *a.kwonlyargs,
            *(p for p in (a.vararg, a.kwarg) if p is not None),
        )
        return "yes" if any(p.arg == arg for p in every) else "no"
    if name == "decorator":
        return "yes" if arg in indexer._decorator_names(fn) else "no"
    if name == "annotated":
        if not kind:
            return "maybe"
        return "yes" if indexer._fully_annotated(fn, kind.endswith("method")) else "no"
    own = indexer._own_body_facts(fn)
    found = own.yields if name == "yields" else arg in own.calls
    return "yes" if found else "no" if complete else "maybe"


def _def_index(lines: list[str], hit: dict) -> int | None:
    """Index of the ``def`` line in the snippet (decorators come first), matched to the
    signature search shows; ``None`` if the snippet does not show it."""
    sig = hit.get("signature", "").removesuffix("...")
    for i, line in enumerate(lines):
        text = line.strip()
        if (
            text.startswith(("def ", "async def "))
            and sig
            and (text.startswith(sig) or sig.startswith(text.removesuffix("...")))
        ):
            return i
    return None


def _clipped(line: str) -> bool:
    return len(line) >= indexer.SNIPPET_WIDTH and line.endswith("...")


def _visible_function(hit: dict):
    """``(fn, complete)``: the longest prefix of the snippet that parses as the function (its
    header complete) and whether that prefix is the whole function.

    The snippet is whole when it has fewer than :data:`SNIPPET_LINES` lines (search cuts only
    longer definitions) and no line was clipped for width; a clipped line and everything after
    it are never read, so every fact seen in the prefix is a fact of the real code.
    """
    lines = hit.get("snippet", "").split("\n")
    usable = next((i for i, ln in enumerate(lines) if _clipped(ln)), len(lines))
    whole = usable == len(lines) and len(lines) < SNIPPET_LINES
    for end in range(usable, 0, -1):
        part = lines[:end]
        indent = len(part[-1]) - len(part[-1].lstrip())
        for tail in ([], [" " * (indent + 4) + "pass"]):
            try:
                tree = ast.parse(textwrap.dedent("\n".join(part + tail)))
            except (SyntaxError, ValueError):
                continue
            if len(tree.body) == 1 and isinstance(
                tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                return tree.body[0], whole and end == len(lines) and not tail
    return None, False


def _judge_lines(k: int, hit: dict) -> str:
    """``lines>=K`` from the snippet's line count: search shows the lines from the first
    decorator to the end of the body, cut after :data:`SNIPPET_LINES` lines (location gives
    only the ``def`` line, no range)."""
    lines = hit.get("snippet", "").split("\n")
    at = _def_index(lines, hit)
    if at is None:
        return "maybe"
    visible = len(lines) - at  # from the def line
    if len(lines) < SNIPPET_LINES:  # the whole definition is shown
        return "yes" if visible >= k else "no"
    return "yes" if visible >= k else "maybe"
