"""The package half of a synthetic repository: modules, classes, functions, custom decorators.

Module ``k`` imports only from modules ``0..k-1`` (custom decorators and the package error class
live in module 0), so the package imports without cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import vocab
from .bodies import Body, pkg_body, words
from .plan import DefSpec
from .sigs import (
    FIELD_DEFAULTS,
    LITERALS,
    ClassPlan,
    Namer,
    Param,
    Scope,
    Sig,
    pkg_signature,
    render_signature,
)
from .vocab import Draw, camel, snake

HEADER = """from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import typing
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping, Sequence
"""
CONSTANTS = ("_DEFAULT_LIMIT", "int"), ("_SEPARATOR", "str"), ("_KNOWN_CODES", "seq")


@dataclass
class ModulePlan:
    index: int
    name: str
    classes: list[ClassPlan] = field(default_factory=list)
    functions: list[Sig] = field(default_factory=list)
    order: list[ClassPlan | Sig] = field(default_factory=list)  # source order


@dataclass
class PackagePlan:
    name: str
    error: str
    decorators: list[Sig]
    modules: list[ModulePlan]

    def callables(self, module: int) -> list[tuple[Sig, str, str]]:
        """``(sig, owner, module name)`` of every library definition in ``module``."""
        out = [(s, "", self.modules[module].name) for s in self.modules[module].functions]
        for c in self.modules[module].classes:
            out += [(s, c.name, self.modules[module].name) for s in c.methods]
        return out


def _decorator_sig(draw: Draw, spec: DefSpec, scope: Scope) -> Sig:
    name = scope.claim(
        lambda a: (
            draw.pick(vocab.DECORATOR_NAMES)
            if a < 30
            else snake(draw.pick(vocab.QUALIFIERS), draw.pick(vocab.DECORATOR_NAMES))
        )
    )
    sig = Sig(spec=spec, name=name, params=[Param("func", "obj", "Callable[..., Any]")])
    sig.ann_mode = "all" if spec["annotated"] else draw.pick(("none", "params"))
    return sig


def plan_package(draw: Draw, namer: Namer, specs: list[DefSpec], modules: int) -> PackagePlan:
    """Names and signatures of the package's definitions (bodies come later)."""
    top = Scope(
        [
            "logger",
            "asyncio",
            "contextlib",
            "functools",
            "logging",
            "typing",
            "dataclass",
            "field",
            "Decimal",
            *(c for c, _ in CONSTANTS),
        ]
    )
    name = snake(namer.noun().replace("_", ""), draw.pick(vocab.PACKAGE_SUFFIXES)).replace("_", "")
    error = top.claim(
        lambda a: (
            camel(namer.noun(), "error")
            if a < 30
            else camel(draw.pick(vocab.QUALIFIERS), namer.noun(), "error")
        )
    )
    mod_scope = Scope(["conftest", "tests", name])
    mods = [ModulePlan(i, mod_scope.claim(namer.var_name)) for i in range(modules)]
    decorators = [_decorator_sig(draw, s, top) for s in specs if s.role == "decorator"]
    custom = [d.name for d in decorators]
    for mod in mods:
        mine = [s for s in specs if s.role == "pkg" and s.module == mod.index]
        groups = sorted({s.group for s in mine if s.group >= 0})
        for g in groups:
            cscope = Scope()
            fields = namer.params(cscope, draw.between(1, 3))
            for f in fields:
                f.default = FIELD_DEFAULTS.get(f.kind) or draw.pick(LITERALS[f.kind])
            cls = ClassPlan(top.claim(namer.class_name), fields)
            for s in mine:
                if s.group == g:
                    cls.methods.append(pkg_signature(draw, namer, s, cscope, cls.name, custom))
            mod.classes.append(cls)
        for s in mine:
            if s.group < 0:
                mod.functions.append(pkg_signature(draw, namer, s, top, "", custom))
        mod.order = draw.shuffled([*mod.classes, *mod.functions])
    return PackagePlan(name, error, decorators, mods)


def _decorator_body(b: Body, sig: Sig, package_error: str) -> None:
    spec = sig.spec
    if spec["docstring"]:
        b.docstring(f"wrap ``func`` so that each call is {words(sig.name)} at debug level")
    if spec["assert"]:
        b.add(f'assert callable(func), "{sig.name} expects a callable"')
    if spec["raises"]:
        b.add("if not callable(func):")
        b.add(f'raise TypeError(f"{sig.name} expects a callable, got {{func!r}}")', 1)
    b.add("")
    b.add("@functools.wraps(func)")
    b.add("def wrapper(*args, **kwargs):")
    b.add(f'logger.debug("%s: {words(sig.name)} call", func.__qualname__)', 1)
    b.add("return func(*args, **kwargs)", 1)
    b.add("")
    b.add("return wrapper")


def _method_callees(pkg: PackagePlan, cls: ClassPlan, sig: Sig) -> list[tuple[Sig, str]]:
    out = []
    for other in cls.methods:
        if other is sig:
            continue
        if sig.first == "self":
            out.append((other, f"self.{other.name}"))
        elif other.first != "self":
            out.append((other, f"{'cls' if sig.first == 'cls' else cls.name}.{other.name}"))
    return out


def render_module(draw: Draw, namer: Namer, pkg: PackagePlan, mod: ModulePlan) -> str:
    """Source text of one package module."""
    imported: dict[str, int] = {}  # name -> module it comes from (earlier modules only)
    for earlier in pkg.modules[: mod.index]:
        for f in earlier.functions:
            imported[f.name] = earlier.index
    if mod.index:
        imported[pkg.error] = 0
        imported.update({d.name: 0 for d in pkg.decorators})
    foreign = [f for m in pkg.modules[: mod.index] for f in m.functions]
    foreign = draw.shuffled(foreign)[:8]
    local_funcs = list(mod.functions)
    needs: list[str] = []
    chunks: list[str] = []

    def body_of(sig: Sig, indent: str, fields: list[Param], callees) -> list[str]:
        b = Body(draw, namer, indent + "    ", [p.name for p in sig.params])
        b.vars = [(p.name, p.kind) for p in sig.params]
        if sig.first == "self":
            b.vars += [(f"self.{f.name}", f.kind) for f in fields]
        b.vars += list(CONSTANTS)
        if sig.spec.role == "decorator":
            _decorator_body(b, sig, pkg.error)
        else:
            pkg_body(b, sig, callees, pkg.error)
        needs.extend(b.needs)
        needs.extend(d for d in sig.decorators if d in imported)
        return render_signature(sig, indent) + b.lines

    if mod.index == 0:
        chunks.append(
            f"class {pkg.error}(Exception):\n"
            f'    """Raised when {words(namer.noun())} data cannot be '
            'processed."""\n'
        )
        for d in pkg.decorators:
            chunks.append("\n".join(body_of(d, "", [], [])) + "\n")
    shared = [(f, f.name) for f in [*local_funcs, *foreign]]
    for item in mod.order:
        if isinstance(item, Sig):
            chunks.append("\n".join(body_of(item, "", [], shared)) + "\n")
            continue
        lines = [
            "@dataclass",
            f"class {item.name}:",
            f'    """{words(namer.noun()).capitalize()} {words(namer.noun())} records."""',
            "",
        ]
        lines += [f"    {f.name}: {f.ann} = {f.default}" for f in item.fields]
        for m in item.methods:
            lines.append("")
            callees = _method_callees(pkg, item, m) + shared
            lines += body_of(m, "    ", item.fields, callees)
        chunks.append("\n".join(lines) + "\n")
    wanted = {n for n in needs if n in imported and imported[n] != mod.index}
    by_module: dict[int, list[str]] = {}
    for n in sorted(wanted):
        by_module.setdefault(imported[n], []).append(n)
    imports = "".join(
        vocab.from_import(f".{pkg.modules[i].name}", names) + "\n"
        for i, names in sorted(by_module.items())
    )
    doc = (
        f'"""{words(mod.name).capitalize()}: {draw.pick(vocab.VERBS)} and '
        f'{draw.pick(vocab.VERBS)} {words(namer.noun())} data."""\n\n'
    )
    limit, sep = draw.between(5, 500), draw.pick((",", ";", "|", ":"))
    codes = ", ".join(repr(c) for c in draw.shuffled(("A1", "B2", "C3", "D4", "E5"))[:3])
    consts = (
        f"logger = logging.getLogger(__name__)\n\n_DEFAULT_LIMIT = {limit}\n"
        f"_SEPARATOR = {sep!r}\n_KNOWN_CODES = ({codes})\n"
    )
    return (
        doc
        + HEADER
        + ("\n" + imports if imports else "")
        + "\n"
        + consts
        + "\n\n"
        + "\n\n".join(chunks)
    )


def render_init(pkg: PackagePlan) -> str:
    names = ", ".join(m.name for m in pkg.modules)
    return (
        f'"""{pkg.name}: {words(pkg.modules[0].name)} and related helpers."""\n\n'
        f'from . import {names}\n\n__version__ = "0.1.0"\n'
    )
