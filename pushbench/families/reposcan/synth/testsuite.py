"""The tests half of a synthetic repository: ``tests/conftest.py`` and ``tests/test_<module>.py``.

Fixtures are ``@pytest.fixture`` functions in conftest.py (each may use a built-in fixture or
an earlier one). The *primary* fixture is the one the ``fixture`` density counts
(``fixture:<primary>``): exactly the tests with the ``fixture`` atom take it as a parameter, no
other test does. It is a conftest fixture, or a built-in one when the densities leave no room
for conftest fixtures. Other tests take other fixtures, so fixture use alone tells nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import vocab
from .bodies import Body, words
from .package import PackagePlan
from .plan import DefSpec
from .sigs import Namer, Param, Scope, Sig, choose_ann_mode, render_signature
from .vocab import Draw, camel, snake

_BUILTIN_ANN = {
    "tmp_path": "Path",
    "monkeypatch": "pytest.MonkeyPatch",
    "capsys": "pytest.CaptureFixture[str]",
    "caplog": "pytest.LogCaptureFixture",
}
_FIXTURE_VALUES = ('{"code": "A1", "quantity": 3}', '["A1", "B2"]', '"north"', '{"limit": 10}')
_EMPTY = ("0", "[]", '""')
_PARAM_VALUES = {
    "int": ("[0, 1, 7]", "[2, 5]", "[10, 100, 1000]"),
    "str": ('["north", "south"]', '["EUR", "USD", "GBP"]', '["", "a1", "B-2"]'),
}


@dataclass
class SuitePlan:
    fixtures: list[Sig]
    primary: str
    modules: dict[int, list[tuple[str, list[Sig]]]] = field(default_factory=dict)
    # module -> [(class name or "", tests)] in source order
    targets: dict[int, tuple[Sig, str, str] | None] = field(default_factory=dict)  # by idx


def plan_tests(draw: Draw, namer: Namer, specs: list[DefSpec], pkg: PackagePlan) -> SuitePlan:
    """Names, targets and parameters of the fixtures and tests."""
    fscope = Scope(vocab.BUILTIN_FIXTURES)
    fixtures: list[Sig] = []
    for s in specs:
        if s.role != "fixture":
            continue
        sig = Sig(spec=s, name=fscope.claim(namer.var_name), ret_kind="obj")
        pool = list(vocab.BUILTIN_FIXTURES) + [f.name for f in fixtures]
        if draw.chance(0.5):
            dep = draw.pick(pool)
            sig.params = [Param(dep, "obj", _BUILTIN_ANN.get(dep, "Any"))]
        sig.decorators = [
            draw.pick(("pytest.fixture", "pytest.fixture()", 'pytest.fixture(scope="function")'))
        ]
        sig.ann_mode = choose_ann_mode(draw, s, bool(sig.params))
        fixtures.append(sig)
    primary = draw.pick([f.name for f in fixtures] or list(vocab.BUILTIN_FIXTURES))
    others = [f.name for f in fixtures if f.name != primary] + [
        b for b in vocab.BUILTIN_FIXTURES if b != primary
    ]
    plan = SuitePlan(fixtures, primary)
    every = [c for m in range(len(pkg.modules)) for c in pkg.callables(m)]
    for m in range(len(pkg.modules)):
        tests = [s for s in specs if s.role == "test" and s.module == m]
        scope = Scope()
        mine = pkg.callables(m) or every
        groups: dict[int, list[Sig]] = {}
        group_scopes: dict[int, Scope] = {}
        out: list[tuple[str, list[Sig]]] = []
        for s in tests:
            target = draw.pick(mine) if mine else None
            plan.targets[s.idx] = target
            base = target[0].name if target else namer.noun()
            cscope = scope if s.group < 0 else group_scopes.setdefault(s.group, Scope())
            # claim() calls the namer at once; base is bound as a default all the same (B023)
            name = cscope.claim(
                lambda a, base=base: (
                    snake("test", base)
                    if a == 0 and draw.chance(0.4)
                    else snake("test", base, draw.pick(vocab.SCENARIOS))
                    if a < 30
                    else snake("test", base, draw.pick(vocab.SCENARIOS), draw.pick(vocab.SCENARIOS))
                )
            )
            sig = Sig(spec=s, name=name, first="self" if s["method"] else None, ret_kind="obj")
            names = [primary] if s["fixture"] else []
            names += draw.shuffled(others)[: draw.pick((0, 0, 1, 1, 2))]
            sig.params = [Param(n, "obj", _BUILTIN_ANN.get(n, "Any")) for n in names]
            if s["decorated"]:
                r = draw.random()
                if r < 0.6:
                    kind = draw.pick(("int", "str"))
                    arg = Scope([primary, *names]).claim(namer.var_name)
                    sig.decorators = [
                        f'pytest.mark.parametrize("{arg}", {draw.pick(_PARAM_VALUES[kind])})'
                    ]
                    sig.params.append(Param(arg, kind, kind))
                elif r < 0.8:
                    sig.decorators = ["pytest.mark.slow"]
                else:
                    sig.decorators = ['pytest.mark.filterwarnings("ignore::DeprecationWarning")']
            sig.ann_mode = choose_ann_mode(draw, s, bool(sig.params))
            if s.group < 0:
                out.append(("", [sig]))
            else:
                groups.setdefault(s.group, []).append(sig)
        cls_scope = Scope()
        for g in sorted(groups):
            tests_in = groups[g]
            first = plan.targets[tests_in[0].spec.idx]
            stem = first[1] or camel(first[0].name) if first else camel(namer.noun())
            out.append(
                (
                    cls_scope.claim(
                        lambda a, stem=stem: (
                            "Test" + stem
                            if a == 0
                            else "Test" + stem + camel(draw.pick(vocab.SCENARIOS))
                        )
                    ),
                    tests_in,
                )
            )
        plan.modules[m] = draw.shuffled(out)
    return plan


def format_imports(imports: list[str], package: str) -> str:
    """Import lines grouped (standard library, pytest, the package), one line per module."""
    plain: set[str] = set()
    froms: dict[str, set[str]] = {}
    for line in imports:
        if line.startswith("from "):
            module, _, names = line[5:].partition(" import ")
            froms.setdefault(module, set()).update(n.strip() for n in names.split(","))
        else:
            plain.add(line)
    groups: list[list[str]] = [[], [], []]
    for line in sorted(plain):
        groups[1 if line == "import pytest" else 0].append(line)
    for module in sorted(froms):
        text = vocab.from_import(module, sorted(froms[module]))
        groups[2 if module.split(".")[0] == package else 0].append(text)
    groups[0].sort(key=lambda line: (line.startswith("from "), line))
    return "\n\n".join("\n".join(g) for g in groups if g) + "\n"


def _fixture_body(b: Body, sig: Sig, pkg: PackagePlan, imports: list[str]) -> None:
    spec, d = sig.spec, b.draw
    if spec["docstring"]:
        b.docstring(f"provide {b.phrase()} for the tests")
    value = b.new_var()
    classes = [(c.name, m.name) for m in pkg.modules for c in m.classes]
    if classes and d.chance(0.5):
        cls, mod = d.pick(classes)
        imports.append(f"from {pkg.name}.{mod} import {cls}")
        b.add(f"{value} = {cls}()")
    else:
        b.add(f"{value} = {d.pick(_FIXTURE_VALUES)}")
    b.vars = [(value, "obj")] + [(p.name, "obj") for p in sig.params]
    if spec["assert"]:
        b.guard_assert()
    if spec["raises"]:
        b.guard_raise(pkg.error)
    if not spec["yields"] and not spec["returns"]:
        if sig.params and sig.params[0].name == "monkeypatch":
            b.add(f'monkeypatch.setenv("{pkg.name.upper()}_MODE", "test")')
        else:
            imports.append("import os")
            b.add(f'os.environ.setdefault("{pkg.name.upper()}_MODE", repr({value}))')
    if spec["yields"]:
        b.add(f"yield {value}")
        if not spec["returns"]:
            b.add(f"del {value}")
    if spec["returns"]:
        b.add(f"return {value}")


def _test_body(b: Body, sig: Sig, target, imports: list[str]) -> None:
    spec, d = sig.spec, b.draw
    if spec["docstring"]:
        what = words(target[0].name) if target else words(sig.name[5:])
        b.docstring(f"{what} handles {d.pick(vocab.SCENARIOS).replace('_', ' ')} input")
    b.vars = [(p.name, p.kind) for p in sig.params] or [(repr(d.pick(("A1", "north"))), "str")]
    result = b.new_var() if d.chance(0.5) else "result"
    b.scope.add(result)
    if target is None:
        call = b.pick()[0]
    else:
        t, owner, mod = target
        imports.append(f"from {{pkg}}.{mod} import {owner or t.name}")
        args = ", ".join(b.pick(p.kind)[0] for p in t.params if not p.default)
        if owner and t.first == "self":
            obj = b.new_var()
            b.add(f"{obj} = {owner}()")
            head = f"{obj}.{t.name}"
        else:
            head = f"{owner}.{t.name}" if owner else t.name
        call = head if t.access == "attr" else f"{head}({args})"
        if t.spec["async"] and not t.spec["yields"]:
            if spec["async"]:
                call, b.awaited = f"await {call}", True
            else:
                call = f"asyncio.run({call})"
        elif t.spec["async"] and spec["async"]:
            call = f"[item async for item in {call}]"
        elif t.spec["yields"] and t.access != "ctx":
            call = f"list({call})"
    if not spec["assert"] and target is not None and d.chance(0.35):
        b.add(f"with pytest.raises({d.pick(('ValueError', 'KeyError', 'TypeError'))}):")
        b.add(call, 1)
        if spec["raises"] or spec["returns"]:
            b.add(f"{result} = None")
    elif target is not None and target[0].access == "ctx":
        managed = b.new_var()
        b.add(f"with {call} as {managed}:")
        b.add(f"{result} = {managed}", 1)
    else:
        b.add(f"{result} = {call}")
    if spec["assert"]:
        b.add(
            d.pick(
                (
                    f"assert {result} is not None",
                    f"assert {result} == {result}",
                    f"assert {result}",
                    f"assert {result} != {d.pick(_EMPTY)}",
                )
            )
        )
    if spec["raises"]:
        b.add(f"if {result} is None:")
        b.add(f'raise AssertionError("no result from {sig.name}")', 1)
    if spec["async"]:
        b.ensure_await()
    if spec["returns"]:
        b.add(f"return {result}")


def render_conftest(draw: Draw, namer: Namer, plan: SuitePlan, pkg: PackagePlan) -> str:
    imports = [
        "import pytest",
        "from pathlib import Path",
        "from typing import Any",
        "from typing import Generator",
        "from typing import Iterator",
    ]
    chunks = []
    for sig in plan.fixtures:
        b = Body(draw, namer, "    ", [p.name for p in sig.params])
        _fixture_body(b, sig, pkg, imports)
        chunks.append("\n".join(render_signature(sig, "") + b.lines) + "\n")
    head = (
        f'"""Shared fixtures for the {pkg.name} tests."""\n\nfrom __future__ import annotations\n\n'
    )
    return head + format_imports(imports, pkg.name) + "\n\n" + "\n\n".join(chunks)


def render_test_module(draw: Draw, namer: Namer, plan: SuitePlan, pkg: PackagePlan, m: int) -> str:
    imports = [
        "import asyncio",
        "import pytest",
        "from pathlib import Path",
        "from typing import Any",
    ]
    chunks = []
    for owner, tests in plan.modules.get(m, []):
        indent = "    " if owner else ""
        lines = [f"class {owner}:"] if owner else []
        if owner and draw.chance(0.5):
            lines += [f'    """Tests of {words(namer.noun())} handling."""', ""]
        for i, sig in enumerate(tests):
            if i and owner:
                lines.append("")
            b = Body(draw, namer, indent + "    ", [p.name for p in sig.params])
            _test_body(b, sig, plan.targets[sig.spec.idx], imports)
            lines += render_signature(sig, indent) + b.lines
        chunks.append("\n".join(lines) + "\n")
    imports = [i.replace("{pkg}", pkg.name) for i in imports]
    head = (
        f'"""Tests of {pkg.name}.{pkg.modules[m].name}."""\n\n'
        f"from __future__ import annotations\n\n"
    )
    return head + format_imports(imports, pkg.name) + "\n\n" + "\n\n".join(chunks)
