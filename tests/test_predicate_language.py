"""The RepoScan predicate language (issue 15, section 2): each atom on hand-written sources with
its edge cases, operator precedence and parentheses, column-pointing errors, and properties
(never crashes but with ValueError, double negation, De Morgan, canonical round trip)."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pushbench.families.reposcan.indexer import Definition, Facts, facts_in_source
from pushbench.families.reposcan.predicates import (
    MAX_DEPTH,
    Predicate,
    PredicateError,
    parse_predicate,
)

PATH = "pkg/mod.py"


def valid(source: str, spec: str) -> set[str]:
    """Qualified names in ``source`` that satisfy ``spec``."""
    pred = parse_predicate(spec)
    return {f.qualname for f in facts_in_source(textwrap.dedent(source), PATH) if pred.test(f)}


# ----- yields ------------------------------------------------------------------------------------
YIELDS_SRC = """
def gen():
    yield 1
def gen_from():
    yield from range(3)
def receives():
    x = yield
    return x
async def agen():
    yield 1
def conditional(flag):
    if flag:
        for i in ():
            yield i
def nested_only():
    def inner():
        yield 1
    return inner
def lambda_only():
    return lambda: (yield)
def genexp_only():
    return list(x for x in range(3))
def class_body_only():
    class K:
        def m(self):
            yield 1
    return K
def yield_in_nested_decorator():
    @(yield)
    def inner(): pass
class C:
    def meth(self):
        yield self
if FLAG:
    def cond_def():
        yield 0
"""


def test_yields():
    assert valid(YIELDS_SRC, "yields") == {
        "gen",
        "gen_from",
        "receives",
        "agen",
        "conditional",
        "yield_in_nested_decorator",
        "C.meth",
        "cond_def",
    }


# ----- async, method, test -----------------------------------------------------------------------
KINDS_SRC = """
async def a(): pass
def b():
    async def nested(): pass
class C:
    async def am(self): pass
    def m(self): pass
    @staticmethod
    def sm(): pass
    @classmethod
    def cm(cls): pass
    if X:
        def cond(self): pass
    class Inner:
        def deep(self): pass
        class Innermost:
            async def test_deepest(self): pass
def test_module(): pass
def testing(): pass
def Test_upper(): pass
def _test_private(): pass
try:
    def test_in_try(): pass
except ImportError:
    pass
"""


def test_async():
    assert valid(KINDS_SRC, "async") == {"a", "C.am", "C.Inner.Innermost.test_deepest"}


def test_method_is_directly_in_a_class_body_at_any_class_depth():
    assert valid(KINDS_SRC, "method") == {
        "C.am",
        "C.m",
        "C.sm",
        "C.cm",
        "C.cond",
        "C.Inner.deep",
        "C.Inner.Innermost.test_deepest",
    }
    assert valid(KINDS_SRC, "not method") == {
        "a",
        "b",
        "test_module",
        "testing",
        "Test_upper",
        "_test_private",
        "test_in_try",
    }


def test_test_is_a_case_sensitive_name_prefix():
    assert valid(KINDS_SRC, "test") == {
        "C.Inner.Innermost.test_deepest",
        "test_module",
        "testing",
        "test_in_try",
    }


# ----- param:X -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, expected",
    [
        ("x", True),
        ("x, /", True),
        ("a, /, x", True),
        ("*, x", True),
        ("*args, x", True),
        ("*x", True),
        ("**x", True),
        ("a, *x, **kw", True),
        ("x=1", True),
        ("x: int = 0", True),
        ("a, b=x", False),  # a default value is not a parameter name
        ("a: x", False),  # nor is an annotation
        ("xx", False),
        ("X", False),
        ("", False),
        ("*, _x", False),
    ],
)
def test_param_every_kind(params, expected):
    assert (valid(f"def f({params}): pass\n", "param:x") == {"f"}) is expected


def test_param_ignores_nested_defs_and_lambdas():
    src = """
    def f(a):
        def g(x): pass
        h = lambda x: x
    class C:
        def m(self, x): pass
    """
    assert valid(src, "param:x") == {"C.m"}
    assert valid(src, "param:self") == {"C.m"}


def test_fixture_keeps_its_narrower_meaning():
    src = "def test_a(*app): pass\ndef test_b(app): pass\ndef helper(app): pass\n"
    assert valid(src, "fixture:app") == {"test_b"}  # *app is no fixture
    assert valid(src, "param:app") == {"test_a", "test_b", "helper"}
    assert valid(src, "test and param:app") == {"test_a", "test_b"}


# ----- decorator:X -------------------------------------------------------------------------------
DECO_SRC = """
@X
def plain(): pass
@a.b.X
def dotted(): pass
@X(1, k=2)
def called(): pass
@a.X()
def dotted_called(): pass
@a.b(X)
def argument_only(): pass
@X.other
def prefix_only(): pass
@X()()
def called_twice(): pass
@deco[X]
def subscript(): pass
@(lambda f: f)
def lam(): pass
def undecorated():
    @X
    def inner(): pass
@X
class K:
    def in_decorated_class(self): pass
    @functools.X
    def meth(self): pass
@first
@pytest.mark.X(reason="r")
async def stacked(): pass
"""


def test_decorator_last_dotted_name_called_or_not():
    assert valid(DECO_SRC, "decorator:X") == {
        "plain",
        "dotted",
        "called",
        "dotted_called",
        "K.meth",
        "stacked",
    }
    assert valid(DECO_SRC, "decorator:b") == {"argument_only"}  # @a.b(X) is a `b` decorator
    assert valid(DECO_SRC, "decorator:a") == set()  # a prefix is not the last name
    assert valid(DECO_SRC, "decorator:other") == {"prefix_only"}
    assert valid(DECO_SRC, "decorator:deco") == set()
    # every decorated def is `decorated`, named decorator or not
    assert valid(DECO_SRC, "decorated and not decorator:X") == {
        "argument_only",
        "prefix_only",
        "called_twice",
        "subscript",
        "lam",
    }


def test_staticmethod_and_classmethod_are_decorators():
    assert valid(KINDS_SRC, "decorator:staticmethod") == {"C.sm"}
    assert valid(KINDS_SRC, "decorator:classmethod and method") == {"C.cm"}


# ----- calls:X -----------------------------------------------------------------------------------
CALLS_SRC = """
def direct():
    X()
def dotted():
    return a.b.X(1)
def on_result():
    return make().X
def method_on_result():
    make().X()
def reference_only():
    return X
def string_only():
    return "X()"
def nested_def_body():
    def inner():
        X()
def nested_async_body():
    async def inner():
        await X()
def lambda_body():
    return lambda: X()
def lambda_default():
    return lambda v=X(): v
def nested_class_body():
    class K:
        y = X()
def nested_class_base():
    class K(X()):
        pass
def nested_decorator_called():
    @X(1)
    def inner(): pass
def nested_decorator_bare():
    @X
    def inner(): pass
def nested_default():
    def inner(v=X()): pass
def comprehension():
    return [X(i) for i in range(3)]
def fstring():
    return f"{X()}"
def conditional(flag):
    if flag:
        try:
            pass
        except E:
            X()
def call_of_call():
    X()()
def getattr_call(o):
    getattr(o, "X")()
def local_annotation():
    y: X() = 1
    z: list[X()]
def own_default(v=X()):
    pass
@X()
def own_decorator():
    pass
class C:
    def meth(self):
        self.X()
    async def ameth(self):
        async with X() as c:
            pass
"""


def test_calls_own_body_only():
    assert valid(CALLS_SRC, "calls:X") == {
        "direct",
        "dotted",
        "method_on_result",
        "lambda_default",
        "nested_class_base",
        "nested_decorator_called",
        "nested_default",
        "comprehension",
        "fstring",
        "conditional",
        "call_of_call",
        "C.meth",
        "C.ameth",
    }
    assert valid(CALLS_SRC, "calls:make") == {"on_result", "method_on_result"}
    assert valid(CALLS_SRC, "calls:getattr") == {"getattr_call"}
    assert valid(CALLS_SRC, "calls:b") == set()  # a.b.X(1) calls X, not b


# ----- annotated ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "src, expected",
    [
        ("def f(a: int) -> int: pass", True),
        ("def f() -> None: pass", True),
        ("def f(): pass", False),
        ("def f(a: int): pass", False),  # no return annotation
        ("def f(a, b: int) -> int: pass", False),
        ("def f(a: int, /, b: int, *, c: int) -> int: pass", True),
        ("def f(a, /, b: int) -> int: pass", False),  # positional-only counts
        ("def f(*, c) -> int: pass", False),  # keyword-only counts
        ("def f(*args: int, **kw: str) -> int: pass", True),
        ("def f(*args, **kw: str) -> int: pass", False),  # *args counts
        ("def f(*args: int, **kw) -> int: pass", False),  # **kwargs counts
        ("def f(self) -> int: pass", False),  # a function's `self` is an ordinary parameter
        ("async def f(a: 'int') -> 'int': pass", True),  # string annotations count
        ("def f(a: int = 1) -> int:\n    g = lambda x: x\n    def h(y): pass", True),
    ],
)
def test_annotated_functions(src, expected):
    assert (valid(src + "\n", "annotated") == {"f"}) is expected


@pytest.mark.parametrize(
    "body, expected",
    [
        ("def m(self, a: int) -> int: pass", True),
        ("def m(self: 'C', a: int) -> int: pass", True),
        ("@classmethod\n    def m(cls, a: int) -> int: pass", True),
        ("@staticmethod\n    def m(a: int) -> int: pass", True),
        ("@staticmethod\n    def m(a) -> int: pass", False),  # the first parameter is no self
        ("def m(this, a: int) -> int: pass", False),  # only self/cls are exempt
        ("def m(a: int, self) -> int: pass", False),  # only as the first parameter
        ("def m(self, /, a: int) -> int: pass", True),
        ("def m(*, self) -> int: pass", False),  # keyword-only self is not the first positional
        ("def m(self) -> None: pass", True),
        ("def m(self): pass", False),
    ],
)
def test_annotated_methods(body, expected):
    src = f"class C:\n    {body}\n"
    assert (valid(src, "annotated") == {"C.m"}) is expected


# ----- lines>=K ----------------------------------------------------------------------------------
LINES_SRC = '''
def one(): pass
@deco
@deco2
def two():
    return 1
def three(
    a,
):
    pass
    # a trailing comment is not part of the body
def six():
    """Doc

    string."""

    return 1


class C:
    def m(self):
        def inner():
            pass
'''


@pytest.mark.parametrize(
    "k, expected",
    [
        (0, {"one", "two", "three", "six", "C.m"}),
        (1, {"one", "two", "three", "six", "C.m"}),
        (2, {"two", "three", "six", "C.m"}),
        (3, {"three", "six", "C.m"}),  # decorators are not counted
        (4, {"three", "six"}),
        (5, {"six"}),
        (6, {"six"}),  # blank lines inside the body count
        (7, set()),
        (10**8, set()),
    ],
)
def test_lines_from_def_line_to_last_body_line(k, expected):
    assert valid(LINES_SRC, f"lines>={k}") == expected


def test_line_count_is_end_minus_start_plus_one():
    facts = {f.qualname: f.lines for f in facts_in_source(textwrap.dedent(LINES_SRC), PATH)}
    assert facts == {"one": 1, "two": 2, "three": 4, "six": 6, "C.m": 3}


# ----- conditional definitions share an identifier across the new atoms -------------------------
def test_conditional_definitions_any_satisfies():
    src = """
    if PY311:
        async def f(x: int) -> int:
            return await g(x)
    else:
        def f(x):
            yield x
    """
    for spec in (
        "async",
        "yields",
        "annotated",
        "calls:g",
        "param:x",
        "not async",
        "async and not yields",
        "yields and not async",
    ):
        assert valid(src, spec) == {"f"}, spec
    assert valid(src, "async and yields") == set()  # no single definition has both


# ----- parsing: precedence, parentheses, canonical spelling --------------------------------------
def fact(**kw) -> Facts:
    base = dict(
        ident="a.py::f",
        qualname="f",
        name="f",
        docstring=False,
        has_assert=False,
        returns_value=False,
        raises=False,
        decorated=False,
        params=(),
    )
    return Facts(**{**base, **kw})


# every boolean-valued fact, with the atom that reads it
BOOL_ATOMS = {
    "docstring": "docstring",
    "assert": "has_assert",
    "returns": "returns_value",
    "raises": "raises",
    "decorated": "decorated",
    "yields": "yields",
    "async": "is_async",
    "method": "in_class",
    "annotated": "annotated",
}


@pytest.mark.parametrize(
    "spec, truth",
    [
        ("docstring or raises and returns", lambda d, r, t: d or (r and t)),
        ("docstring and raises or returns", lambda d, r, t: (d and r) or t),
        ("not docstring and raises", lambda d, r, t: (not d) and r),
        ("not docstring or raises", lambda d, r, t: (not d) or r),
        ("not (docstring or raises)", lambda d, r, t: not (d or r)),
        ("(docstring or raises) and returns", lambda d, r, t: (d or r) and t),
        ("docstring and not not raises", lambda d, r, t: d and r),
        ("not docstring and not raises or returns", lambda d, r, t: (not d and not r) or t),
        ("((docstring))and(raises)", lambda d, r, t: d and r),
        ("docstring or raises or returns", lambda d, r, t: d or r or t),
    ],
)
def test_precedence_not_and_or(spec, truth):
    pred = parse_predicate(spec)
    for d in (False, True):
        for r in (False, True):
            for t in (False, True):
                f = fact(docstring=d, raises=r, returns_value=t)
                assert pred.test(f) is truth(d, r, t), (spec, d, r, t)


def test_predicate_keeps_its_spec_and_signature():
    p = parse_predicate("  docstring  and not raises ")
    assert isinstance(p, Predicate)
    assert p.spec == "  docstring  and not raises "
    assert p.canonical == "docstring and not raises"
    assert {f.name for f in fields(Predicate)} >= {"spec", "test", "description"}


@pytest.mark.parametrize(
    "spec, canonical",
    [
        ("docstring or raises and returns", "docstring or (raises and returns)"),
        ("(docstring or raises) and returns", "(docstring or raises) and returns"),
        ("a_or_b" and "fixture : app", "fixture:app"),
        ("lines >= 007", "lines>=7"),
        ("docstring and (raises and returns)", "docstring and raises and returns"),
        ("not(not(docstring))", "not not docstring"),
        ("decorator:X or calls:Y", "decorator:X or calls:Y"),
    ],
)
def test_canonical_spelling(spec, canonical):
    assert parse_predicate(spec).canonical == canonical


def test_single_atom_descriptions_are_unchanged_for_the_pinned_instances():
    # these words are the objective the nine built-in instances show; changing them changes
    # every recorded observation
    assert parse_predicate("docstring").description == (
        "has a docstring (its first statement is a string literal)"
    )
    assert parse_predicate("fixture:app").description == (
        "is a test function (name starts with `test`) that takes a parameter named `app` "
        "(the `app` fixture)"
    )


def test_compound_descriptions_are_plain_words():
    d = parse_predicate("docstring and not (raises or test)").description
    # negation is pushed onto the atoms (De Morgan): three conditions, all required
    assert d.startswith("meets all of these conditions: (1) has a docstring")
    assert "(2) contains no `raise` statement" in d
    assert "(3) has a name that does not start with `test`" in d
    nested = parse_predicate("docstring or (raises and lines>=10)").description
    assert nested.startswith("meets at least one of these conditions: (1) has a docstring")
    assert "(2) meets all of these conditions: (2.1) contains a `raise`" in nested
    assert "(2.2) spans at least 10 lines" in nested


# ----- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, column, words",
    [
        ("(docstring and raises", 22, "expected ')' to close the '(' at column 1"),
        ("docstring and (raises or", 25, "expected a property"),
        ("docstring raises", 11, "expected 'and', 'or' or the end"),
        ("docstring)", 10, "unbalanced ')'"),
        ("docstring AND raises", 11, "operators are lower case"),
        ("", 1, "the predicate is empty"),
        ("   ", 4, "the predicate is empty"),
        ("and docstring", 1, "expected a property before 'and'"),
        ("not", 4, "expected a property"),
        ("docstring and or raises", 15, "expected a property before 'or'"),
        ("nope", 1, "unknown property 'nope'"),
        ("Docstring", 1, "did you mean 'docstring'?"),
        ("docstring and raise", 15, "did you mean 'raises'?"),
        ("fixture", 8, "'fixture' needs a name"),
        ("fixture:", 9, "expected a Python name after 'fixture:'"),
        ("fixture:1x", 9, "expected a Python name"),
        ("param:class", 7, "Python keyword"),
        ("decorator:pytest.fixture", 17, "takes one name"),
        ("docstring:x", 10, "'docstring' takes no argument"),
        ("lines", 6, "expected '>='"),
        ("lines>5", 6, "expected '>='"),
        ("lines<=5", 6, "expected '>='"),
        ("lines>=", 8, "expected a whole number"),
        ("lines>=-1", 8, "unexpected character '-'"),
        ("lines>=x", 8, "expected a whole number"),
        ("lines>=1234567890", 8, "too large"),
        ("docstring & raises", 11, "unexpected character '&'"),
        ("docstring\tand\nraises!", 21, "unexpected character '!'"),
    ],
)
def test_errors_point_at_the_column(spec, column, words):
    with pytest.raises(PredicateError) as info:
        parse_predicate(spec)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.column == column, str(err)
    assert words in str(err)
    first, shown, caret = str(err).split("\n")
    assert first.startswith(f"predicate error at column {column}: ")
    assert caret == "  " + " " * (column - 1) + "^"
    assert len(shown) == len(spec) + 2  # control characters shown as spaces keep the caret true


def test_unknown_atoms_list_every_known_atom():
    with pytest.raises(PredicateError) as info:
        parse_predicate("docstring or zzz")
    for known in (
        "docstring",
        "assert",
        "returns",
        "raises",
        "decorated",
        "fixture:X",
        "yields",
        "async",
        "method",
        "test",
        "param:X",
        "decorator:X",
        "calls:X",
        "annotated",
        "lines>=K",
    ):
        assert known in str(info.value)


@pytest.mark.parametrize(
    "spec",
    [
        "(" * 400 + "docstring" + ")" * 400,
        "not " * 240 + "docstring",
        "(not " * 150 + "docstring" + ")" * 150,
        "(" * 900,
    ],
)
def test_deep_nesting_is_refused_not_a_recursion_error(spec):
    with pytest.raises(PredicateError, match=f"deeper than {MAX_DEPTH}"):
        parse_predicate(spec)


def test_nesting_up_to_the_limit_parses():
    p = parse_predicate("(" * (MAX_DEPTH - 1) + "docstring" + ")" * (MAX_DEPTH - 1))
    assert p.test(fact(docstring=True)) and not p.test(fact())


@pytest.mark.parametrize("bad", [None, 3, b"docstring", ["docstring"], "x" * 5000])
def test_non_text_and_over_long_input(bad):
    with pytest.raises(PredicateError):
        parse_predicate(bad)


# ----- properties --------------------------------------------------------------------------------
NAMES = st.sampled_from(["x", "app", "self", "fixture", "X"])
ATOM = st.one_of(
    st.sampled_from(list(BOOL_ATOMS) + ["test"]),
    st.builds(
        lambda k, x: f"{k}:{x}", st.sampled_from(["fixture", "param", "decorator", "calls"]), NAMES
    ),
    st.builds(lambda k: f"lines>={k}", st.integers(0, 12)),
)


def _expr(children):
    return st.one_of(
        st.builds(lambda e: f"not {e}", children),
        st.builds(lambda e: f"({e})", children),
        st.builds(
            lambda a, op, b: f"{a} {op} {b}", children, st.sampled_from(["and", "or"]), children
        ),
    )


EXPR = st.recursive(ATOM, _expr, max_leaves=12)
NAME_SETS = st.frozensets(NAMES, max_size=3)
FACTS = st.builds(
    lambda b, name, params, star, decos, calls, lines: fact(
        name=name,
        params=tuple(params),
        star_params=tuple(star),
        decorators=tuple(decos),
        calls=calls,
        lines=lines,
        **{f: v for f, v in zip(BOOL_ATOMS.values(), b, strict=True)},
    ),
    st.lists(st.booleans(), min_size=len(BOOL_ATOMS), max_size=len(BOOL_ATOMS)),
    st.sampled_from(["f", "test_f", "testing", "Test"]),
    NAME_SETS,
    NAME_SETS,
    NAME_SETS,
    NAME_SETS,
    st.integers(0, 15),
)


def _python_eval(spec: str, f: Facts) -> bool:
    """Oracle: the same expression as Python, whose `not`/`and`/`or` have the precedence the
    language states; each atom replaced by its value evaluated on its own."""
    import re

    def value(m):
        return str(parse_predicate(m.group(0)).test(f))

    return eval(re.sub(r"lines>=\d+|\w+:\w+|(?<![\w:])(?!and\b|or\b|not\b)\w+", value, spec))


@settings(max_examples=300, deadline=None)
@given(EXPR, FACTS)
def test_agrees_with_python_boolean_semantics(spec, f):
    assert parse_predicate(spec).test(f) is _python_eval(spec, f)


@settings(max_examples=200, deadline=None)
@given(EXPR, FACTS)
def test_double_negation(spec, f):
    assert parse_predicate(f"not not ({spec})").test(f) is parse_predicate(spec).test(f)
    # unparenthesised, `not not` binds to the first operand only, which changes nothing either
    assert parse_predicate(f"not not {spec}").test(f) is parse_predicate(spec).test(f)


@settings(max_examples=200, deadline=None)
@given(EXPR, EXPR, FACTS)
def test_de_morgan(a, b, f):
    assert parse_predicate(f"not (({a}) and ({b}))").test(f) is parse_predicate(
        f"not ({a}) or not ({b})"
    ).test(f)
    assert parse_predicate(f"not (({a}) or ({b}))").test(f) is parse_predicate(
        f"not ({a}) and not ({b})"
    ).test(f)


@settings(max_examples=200, deadline=None)
@given(EXPR, FACTS)
def test_canonical_round_trip_and_description(spec, f):
    p = parse_predicate(spec)
    again = parse_predicate(p.canonical)
    assert again.canonical == p.canonical
    assert again.test(f) is p.test(f)
    assert p.description and "::" not in p.description


TOKENS = st.sampled_from(
    [
        "docstring",
        "and",
        "or",
        "not",
        "(",
        ")",
        "fixture",
        ":",
        "app",
        "lines",
        ">=",
        "5",
        " ",
        "calls",
        ".",
        "x",
        "\t",
        ">",
        "-1",
        "é",
    ]
)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.text(max_size=80),
        st.lists(TOKENS, max_size=25).map("".join),
        st.lists(TOKENS, max_size=25).map(" ".join),
    )
)
def test_never_crashes_only_value_errors(text):
    try:
        p = parse_predicate(text)
    except PredicateError as e:
        assert isinstance(e, ValueError)
        assert 1 <= e.column <= len(text) + 1
        return
    assert isinstance(p.test(fact()), bool)


# ----- facts: in memory only, and the own-body walk against an independent reference ----------
def test_new_facts_are_not_display_fields():
    """The on-disk index persists :class:`Definition` rows only (tests/test_cache_integrity.py
    reads every file); no predicate fact may become a display field."""
    shared = {f.name for f in fields(Definition)} & {f.name for f in fields(Facts)}
    assert shared == {"ident", "qualname", "name"}


class _Reference(ast.NodeVisitor):
    """Calls and yields of an own body, written independently with ``ast.NodeVisitor``."""

    def __init__(self):
        self.calls, self.yields = set(), False

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name):
            self.calls.add(node.func.id)
        elif isinstance(node.func, ast.Attribute):
            self.calls.add(node.func.attr)
        self.generic_visit(node)

    def visit_Yield(self, node):
        self.yields = True
        self.generic_visit(node)

    visit_YieldFrom = visit_Yield

    def _definition(self, node):
        for n in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if n is not None:
                self.visit(n)

    visit_FunctionDef = visit_AsyncFunctionDef = _definition

    def visit_Lambda(self, node):
        for n in [*node.args.defaults, *node.args.kw_defaults]:
            if n is not None:
                self.visit(n)

    def visit_AnnAssign(self, node):  # a local annotation is never evaluated
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_ClassDef(self, node):
        for n in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(n)


def test_own_body_walk_matches_reference_on_the_pinned_snapshots(snapshot_roots):
    from pushbench.families.reposcan.indexer import _qualname_walk, _sources

    checked = 0
    for root in snapshot_roots.values():
        for rel, src in _sources(root):
            got = facts_in_source(src, rel)
            ref = []
            tree = ast.parse(src) if got else None

            def visit(fn, qual, in_class, ref=ref, rel=rel):  # bound now (B023)
                r = _Reference()
                for stmt in fn.body:
                    r.visit(stmt)
                ref.append((f"{rel}::{qual}", frozenset(r.calls), r.yields))

            if tree is not None:
                _qualname_walk(tree, visit)
            assert [(f.ident, f.calls, f.yields) for f in got] == ref
            checked += len(ref)
    assert checked > 5000
