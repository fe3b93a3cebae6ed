"""Predicate semantics on small hand-written sources (issue 2, section 3)."""

from __future__ import annotations

import textwrap

import pytest

from pushbench.families.reposcan.indexer import definitions_in_source, facts_in_source
from pushbench.families.reposcan.predicates import parse_predicate
from pushbench.families.reposcan.verifier import is_well_formed

PATH = "pkg/mod.py"


def defs(source: str, relpath: str = PATH):
    return definitions_in_source(textwrap.dedent(source), relpath)


def facts(source: str, relpath: str = PATH):
    return facts_in_source(textwrap.dedent(source), relpath)


def quals(source: str) -> list[str]:
    return [d.qualname for d in defs(source)]


def valid(source: str, spec: str) -> set[str]:
    """Identifiers of ``source`` that satisfy ``spec`` (any definition sharing the id counts)."""
    pred = parse_predicate(spec)
    return {f.ident for f in facts(source) if pred.test(f)}


def only(source: str):
    found = defs(source)
    assert len(found) == 1, [d.qualname for d in found]
    return found[0]


# ----- the universe ---------------------------------------------------------------------------


def test_identifier_form_and_kinds():
    src = """
    def f(): pass
    async def g(): pass
    class C:
        def m(self): pass
        async def am(self): pass
    """
    found = {d.qualname: d for d in defs(src, "src/a/b.py")}
    assert set(found) == {"f", "g", "C.m", "C.am"}
    assert found["C.m"].ident == "src/a/b.py::C.m"
    assert found["f"].kind == "function"
    assert found["g"].kind == "async function"
    assert found["C.m"].kind == "method"
    assert found["C.am"].kind == "async method"
    assert found["C.m"].path == "src/a/b.py" and found["C.m"].name == "m"
    assert found["f"].line == 2


def test_nested_functions_are_excluded():
    src = """
    def outer():
        def inner():
            def innermost(): pass
        async def ainner(): pass
        return inner
    """
    assert quals(src) == ["outer"]


def test_classes_inside_functions_are_excluded():
    src = """
    def factory():
        class Local:
            def method(self): pass
            class Deeper:
                def deep(self): pass
        return Local

    class K:
        def m(self):
            class InMethod:
                def x(self): pass
    """
    assert quals(src) == ["factory", "K.m"]


def test_nested_classes_qualnames():
    src = """
    class A:
        def a(self): pass
        class B:
            def b(self): pass
            class C:
                async def c(self): pass
    class D:
        pass
    """
    assert quals(src) == ["A.a", "A.B.b", "A.B.C.c"]
    assert defs(src)[2].kind == "async method"


def test_class_without_defs_contributes_nothing():
    assert quals("class Empty:\n    x = 1\n") == []


@pytest.mark.parametrize(
    "src, expected",
    [
        (
            "if X:\n    def f(): pass\nelif Y:\n    def g(): pass\nelse:\n    def h(): pass\n",
            ["f", "g", "h"],
        ),
        (
            "try:\n    def a(): pass\nexcept ImportError:\n    def b(): pass\n"
            "except Exception:\n    def b2(): pass\nelse:\n    def c(): pass\nfinally:\n"
            "    def d(): pass\n",
            ["a", "b", "b2", "c", "d"],
        ),
        ("try:\n    pass\nexcept* ValueError:\n    def star(): pass\n", ["star"]),
        ("with ctx():\n    def w(): pass\n", ["w"]),
        ("for i in range(2):\n    def lf(): pass\nelse:\n    def lfe(): pass\n", ["lf", "lfe"]),
        ("while cond:\n    def wl(): pass\nelse:\n    def wle(): pass\n", ["wl", "wle"]),
        (
            "match v:\n    case 1:\n        def m1(): pass\n    case _:\n        def m2(): pass\n",
            ["m1", "m2"],
        ),
        (
            "if A:\n    if B:\n        with c:\n            try:\n"
            "                def deep(): pass\n"
            "            finally:\n                pass\n",
            ["deep"],
        ),
        ("if A:\n    class C:\n        def m(self): pass\n", ["C.m"]),
    ],
)
def test_module_level_compound_statements_are_included(src, expected):
    assert sorted(quals(src)) == sorted(expected)  # order within a file is not the contract


def test_class_level_compound_statements_are_included():
    src = """
    class C:
        if sys.version_info >= (3, 12):
            def v(self): pass
        else:
            def v(self): pass
        try:
            def t(self): pass
        except Exception:
            def e(self): pass
        finally:
            def fin(self): pass
        with ctx:
            def w(self): pass
        for _ in ():
            def lf(self): pass
        while False:
            def wl(self): pass
        match X:
            case None:
                def mt(self): pass
    """
    assert sorted(quals(src)) == sorted(
        ["C.v", "C.v", "C.t", "C.e", "C.fin", "C.w", "C.lf", "C.wl", "C.mt"]
    )
    assert all(d.kind == "method" for d in defs(src))


def test_compound_statements_inside_functions_are_still_excluded():
    src = """
    def f():
        if True:
            def g(): pass
        try:
            class H:
                def h(self): pass
        except Exception:
            pass
    """
    assert quals(src) == ["f"]


@pytest.mark.parametrize(
    "source",
    [
        "def broken(:\n    pass\n",
        "def f():\n  return 1\n   x = 2\n",  # bad indentation
        "print 'python 2'\n",
        "def f(): pass\x00\n",  # NUL byte: ast raises ValueError on some versions
        "x = (\n",
    ],
)
def test_files_that_fail_to_parse_are_skipped(source):
    assert definitions_in_source(source, PATH) == []


def test_a_bad_file_does_not_hide_good_ones(tmp_path):
    from pushbench.families.reposcan.indexer import index_tree

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text("def broken(:\n")
    (tmp_path / "pkg" / "latin1.py").write_bytes(b"# \xe9\ndef f(): pass\n")  # not UTF-8
    (tmp_path / "pkg" / "good.py").write_text("async def a():\n    async with x:\n        pass\n")
    (tmp_path / "notes.txt").write_text("def not_python(): pass\n")
    assert [d.ident for d in index_tree(tmp_path)] == ["pkg/good.py::a"]


# ----- predicates: own body -------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, expected",
    [
        ("return 1", True),
        ("return None", True),
        ("return", False),
        ("pass", False),
        ("if x:\n        return\n    return x", True),
        ("if x:\n        return", False),
        ("for i in y:\n        return i", True),
        ("try:\n        return f()\n    except E:\n        pass", True),
        ("with c:\n        return 0", True),
        ("yield 1", False),
        ("def inner():\n        return 1", False),
        ("async def inner():\n        return 1", False),
        ("cb = lambda: 1", False),
        ("class Inner:\n        def m(self):\n            return 1", False),
        ("def inner():\n        return 1\n    return inner", True),
        ("match v:\n        case 1:\n            return v", True),
    ],
)
def test_returns_own_body(body, expected):
    src = f"def f(x=None, y=(), c=None, v=None):\n    {body}\n"
    assert (valid(src, "returns") == {f"{PATH}::f"}) is expected


@pytest.mark.parametrize(
    "body, expected",
    [
        ("raise ValueError('x')", True),
        ("raise", True),  # bare raise counts
        ("try:\n        pass\n    except Exception:\n        raise", True),
        ("raise ValueError from None", True),
        ("pass", False),
        ("def inner():\n        raise KeyError", False),
        ("class Inner:\n        def m(self):\n            raise KeyError", False),
        ("class Inner:\n        raise KeyError", False),
        ("cb = lambda: (_ for _ in ()).throw(KeyError())", False),
        ("if x:\n        raise RuntimeError", True),
    ],
)
def test_raises_own_body(body, expected):
    src = f"def f(x=None):\n    {body}\n"
    assert (valid(src, "raises") == {f"{PATH}::f"}) is expected


@pytest.mark.parametrize(
    "body, expected",
    [
        ("assert x", True),
        ("assert x, 'message'", True),
        ("while x:\n        assert x", True),
        ("def inner():\n        assert x", False),
        ("async def inner():\n        assert x", False),
        ("class Inner:\n        assert x", False),
        ("check = lambda: x", False),
        ("x = 'assert'", False),
        ("# assert x\n    pass", False),
    ],
)
def test_assert_own_body(body, expected):
    src = f"def f(x=None):\n    {body}\n"
    assert (valid(src, "assert") == {f"{PATH}::f"}) is expected


def test_nested_facts_do_not_leak_to_outer_or_class_methods():
    src = """
    class C:
        def outer(self):
            def inner():
                assert True
                raise ValueError
                return 1
            lam = lambda: 1
            class Inner:
                def m(self):
                    return 2
        def other(self):
            return
    """
    found = {f.qualname: f for f in facts(src)}
    assert set(found) == {"C.outer", "C.other"}
    for d in found.values():
        assert not (d.has_assert or d.raises or d.returns_value)


def test_async_functions_have_facts():
    src = """
    async def a():
        '''doc'''
        assert await x()
        raise E
    async def b():
        return await y()
    """
    assert valid(src, "docstring") == {f"{PATH}::a"}
    assert valid(src, "assert") == {f"{PATH}::a"}
    assert valid(src, "raises") == {f"{PATH}::a"}
    assert valid(src, "returns") == {f"{PATH}::b"}


# ----- predicates: docstring and decorators ---------------------------------------------------


@pytest.mark.parametrize(
    "first, expected",
    [
        ('"""Docstring."""', True),
        ("'single quotes'", True),
        ('"implicit" "concatenation"', True),
        ('r"""raw"""', True),
        ('f"""not a docstring {1}"""', False),
        ('b"bytes are not a docstring"', False),
        ("42", False),
        ("None", False),
        ("...", False),
        ("x = 'assigned string'", False),
        ("pass\n    '''too late'''", False),
        ("('parenthesised')", True),
    ],
)
def test_docstring(first, expected):
    src = f"def f():\n    {first}\n"
    assert (valid(src, "docstring") == {f"{PATH}::f"}) is expected


def test_docstring_on_one_line_def_and_class_docstring_does_not_count():
    src = """
    class C:
        '''class docstring'''
        def m(self): 'inline docstring'
        def n(self): pass
    """
    assert valid(src, "docstring") == {f"{PATH}::C.m"}


def test_decorated():
    src = """
    import functools
    @staticmethod
    def a(): pass
    @functools.lru_cache(maxsize=None)
    @other
    async def b(): pass
    def c(): pass
    class K:
        @property
        def p(self): pass
        def q(self): pass
    @decorated_class
    class D:
        def r(self): pass
    """
    assert valid(src, "decorated") == {f"{PATH}::a", f"{PATH}::b", f"{PATH}::K.p"}


def test_snippet_starts_at_first_decorator_and_is_clipped():
    body = "\n".join(f"    x{i} = {i}" for i in range(20))
    src = f"@deco\n@deco2\ndef f():\n{body}\n"
    d = only(src)
    assert d.line == 3  # the def line
    assert d.snippet.splitlines()[0] == "@deco"
    assert len(d.snippet.splitlines()) == 8
    assert d.signature == "def f():"


# ----- predicates: fixture:X ------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, expected",
    [
        ("app", True),
        ("app, /", True),  # positional-only
        ("self, app", True),
        ("x, app=None", True),
        ("*, app", True),  # keyword-only
        ("*args, app", True),  # keyword-only after *args
        ("x, /, y, *, app", True),
        ("*app", False),  # *args named app
        ("**app", False),  # **kwargs named app
        ("application", False),
        ("my_app", False),
        ("App", False),
        ("", False),
        ("x: 'app'", False),  # annotation is not a name
        ("x=app", False),  # default value is not a name
    ],
)
def test_fixture_parameter_kinds(params, expected):
    src = f"def test_something({params}): pass\n"
    assert (valid(src, "fixture:app") == {f"{PATH}::test_something"}) is expected


@pytest.mark.parametrize(
    "name, expected",
    [
        ("test_x", True),
        ("test", True),
        ("testing_helper", True),  # starts with "test"
        ("Test_x", False),
        ("x_test", False),
        ("helper", False),
        ("_test_x", False),
    ],
)
def test_fixture_requires_name_starting_with_test(name, expected):
    src = f"def {name}(client): pass\n"
    assert (valid(src, "fixture:client") == {f"{PATH}::{name}"}) is expected


def test_fixture_in_test_methods_and_async_tests():
    src = """
    class TestThing:
        def test_a(self, monkeypatch): pass
        async def test_b(self, *, monkeypatch): pass
        def helper(self, monkeypatch): pass
        def test_c(self, tmp_path): pass
    """
    assert valid(src, "fixture:monkeypatch") == {
        f"{PATH}::TestThing.test_a",
        f"{PATH}::TestThing.test_b",
    }


def test_fixture_in_nested_test_function_does_not_count():
    src = """
    def test_outer():
        def test_inner(app): pass
    """
    assert valid(src, "fixture:app") == set()


# ----- shared identifiers and predicate parsing -----------------------------------------------


def test_conditional_definitions_share_one_identifier_valid_if_any_satisfies():
    src = """
    if PY2:
        def f():
            return
    else:
        def f():
            return 1
    try:
        def g(): pass
    except ImportError:
        def g(): pass
    class C:
        if X:
            def m(self):
                '''doc'''
        else:
            def m(self): pass
    """
    found = defs(src)
    assert [d.ident for d in found].count(f"{PATH}::f") == 2
    assert valid(src, "returns") == {f"{PATH}::f"}
    assert valid(src, "docstring") == {f"{PATH}::C.m"}
    assert valid(src, "raises") == set()


def test_parse_predicate():
    for spec in (
        "docstring",
        "assert",
        "returns",
        "raises",
        "decorated",
        "fixture:app",
        "fixture:tmp_path",
    ):
        p = parse_predicate(spec)
        assert p.spec == spec and p.description
        assert "::" not in p.description  # describes the property, never lists identifiers
    for bad in ("", "nope", "fixture:", "fixture:1x", "fixture:a b", "Docstring", "fixture"):
        with pytest.raises(ValueError):
            parse_predicate(bad)


def test_predicate_descriptions_mention_the_property():
    assert "docstring" in parse_predicate("docstring").description
    assert "assert" in parse_predicate("assert").description
    assert "raise" in parse_predicate("raises").description
    assert "decorator" in parse_predicate("decorated").description
    assert "`pytester`" in parse_predicate("fixture:pytester").description


def test_indexed_identifiers_are_well_formed():
    src = """
    class C:
        def m(self): pass
    def _private(): pass
    """
    for d in defs(src, "tests/sub_dir/test_x.py"):
        assert is_well_formed(d.ident), d.ident


# ----- identifier well-formedness ------------------------------------------------------------


@pytest.mark.parametrize(
    "ident",
    [
        "a.py::f",
        "src/requests/models.py::Response.raise_for_status",
        "tests/test_x.py::TestA.test_b",
        "a.py::_private",
        "a.py::C.__init__",
        "dir with space/x.py::f",
        "a.b/c.py::f",
        "caf\u00e9/a.py::f",  # non-ASCII printable paths are fine
    ],
)
def test_well_formed(ident):
    assert is_well_formed(ident)


@pytest.mark.parametrize(
    "ident",
    [
        "../a.py::f",
        "a/../b.py::f",
        "src/..hidden.py::f",  # '..' anywhere
        "/etc/passwd.py::f",
        "/a.py::f",
        "a\\b.py::f",
        "a.py::f\\",
        "a\x00.py::f",
        "a.py::f\x00",
        "a.py::f\n",
        "\na.py::f",
        "a.py\t::f",
        "a.py::f\r",
        "a.py::f\x1b",
        "a.py::f\x7f",
        "a\x7f.py::f",
        "a\x85.py::f",  # C1 control characters (NEL) are control characters too
        "src\x9b/a.py::f",
        "a.py::f.",
        "a.py::.f",
        "a.py::1f",
        "a.py::f-g",
        "a.py::f g",
        "a.py::",
        "::f",
        ".py::f",
        "a.py:f",
        "a.py::f::g",
        "a.txt::f",
        "a.py",
        "",
        "a.py::" + "x" * 600,
        None,
        7,
        ["a.py::f"],
    ],
)
def test_malformed(ident):
    assert not is_well_formed(ident)
