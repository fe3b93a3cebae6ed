"""Statement lists of the generated definitions.

Each body is built so the indexer's facts come out exactly as planned: a docstring only when
``docstring``, an ``assert`` / ``raise`` / ``return <expr>`` / ``yield`` / ``await`` in the own
body only when the atom says so. Some bodies carry the edge cases the RepoScan rules spell out
(a bare ``return``, a nested helper that returns or raises, a lambda), which do not count.
"""

from __future__ import annotations

from collections.abc import Sequence

from .sigs import Namer, Param, Scope, Sig
from .vocab import Draw

_EXPRS = {
    "int": (
        ("{x} * 2", "int"),
        ("{x} + 1", "int"),
        ("max({x}, 0)", "int"),
        ("str({x})", "str"),
        ("float({x})", "float"),
        ("min({x}, _DEFAULT_LIMIT)", "int"),
    ),
    "float": (
        ("round({x}, 2)", "float"),
        ("{x} * 1.2", "float"),
        ("int({x})", "int"),
        ("abs({x})", "float"),
    ),
    "str": (
        ("{x}.strip().lower()", "str"),
        ("{x}.split(_SEPARATOR)", "seq"),
        ("len({x})", "int"),
        ("{x}.upper()", "str"),
        ('{x}.startswith("x")', "bool"),
    ),
    "bool": (("not {x}", "bool"), ("int({x})", "int")),
    "seq": (
        ("sorted({x})", "seq"),
        ("len({x})", "int"),
        ("_SEPARATOR.join({x})", "str"),
        ("[value for value in {x} if value]", "seq"),
        ("dict.fromkeys({x}, 0)", "map"),
        ("list(reversed({x}))", "seq"),
        ("set({x})", "seq"),
    ),
    "map": (
        ("sorted({x})", "seq"),
        ("len({x})", "int"),
        ("dict({x})", "map"),
        ("{{key: value for key, value in {x}.items() if value}}", "map"),
        ("list({x}.values())", "seq"),
    ),
    "obj": (("{x} is not None", "bool"), ("repr({x})", "str")),
}
_CHECKS = {  # (holds, fails) conditions per kind
    "int": ("{x} >= 0", "{x} < 0"),
    "float": ("{x} >= 0", "{x} < 0"),
    "str": ("{x}", "not {x}"),
    "bool": ("isinstance({x}, bool)", "not isinstance({x}, bool)"),
    "seq": ("len({x}) > 0", "not {x}"),
    "map": ("{x} is not None", "{x} is None"),
    "obj": ("{x} is not None", "{x} is None"),
}
_EXCEPTIONS = ("ValueError", "KeyError", "TypeError", "LookupError", "RuntimeError")
_PHRASES = (
    "the {a} for each {b}",
    "every {a} in the {b}",
    "the {a} of the {b}",
    "{a} entries from the {b}",
    "the current {a}",
)
_MESSAGES = (
    "invalid {a}",
    "unknown {a}",
    "{a} out of range",
    "missing {a}",
    "{a} is empty",
    "unexpected {a}",
)


def words(name: str) -> str:
    return name.replace("_", " ").strip()


class Body:
    """Lines of one body at a fixed indent, with the values it can read and the names it needs
    imported (``needs``: "asyncio", the package error class, callee names)."""

    def __init__(self, draw: Draw, namer: Namer, indent: str, taken=()) -> None:
        self.draw, self.namer, self.indent = draw, namer, indent
        self.lines: list[str] = []
        self.scope = Scope(["self", "cls", "func", "wrapper", *taken])
        self.vars: list[tuple[str, str]] = []
        self.needs: list[str] = []
        self.awaited = False

    def add(self, text: str, depth: int = 0) -> None:
        self.lines.append(self.indent + "    " * depth + text if text else "")

    def new_var(self) -> str:
        return self.scope.claim(self.namer.var_name)

    def pick(self, kind: str | None = None, strict: bool = False) -> tuple[str, str]:
        """A readable value, of ``kind`` if there is one (always, if ``strict``; else mostly)."""
        if kind:
            same = [v for v in self.vars if v[1] == kind]
            if same and (strict or self.draw.chance(0.8)):
                return self.draw.pick(same)
        return self.draw.pick(self.vars)

    def phrase(self) -> str:
        return self.draw.pick(_PHRASES).format(
            a=words(self.namer.noun()), b=words(self.namer.noun())
        )

    def docstring(self, summary: str, params: Sequence[Param] = ()) -> None:
        summary = summary[0].upper() + summary[1:].rstrip(".") + "."
        if params and self.draw.chance(0.4):
            self.add(f'"""{summary}')
            self.add("")
            self.add("Args:")
            for p in params:
                self.add(f"    {p.name}: {self.phrase()}.")
            self.add('"""')
        else:
            self.add(f'"""{summary}"""')

    def comment(self) -> None:
        self.add(f"# {self.draw.pick(('Keep', 'Use', 'Prefer', 'Skip'))} {self.phrase()}.")

    def exception(self, package_error: str) -> str:
        if self.draw.chance(0.3):
            self.needs.append(package_error)
            return package_error
        return self.draw.pick(_EXCEPTIONS)

    def message(self) -> str:
        return self.draw.pick(_MESSAGES).format(a=words(self.namer.noun()))

    def guard_assert(self) -> None:
        x, kind = self.pick()
        self.add(f'assert {_CHECKS[kind][0].format(x=x)}, "{self.message()}"')

    def guard_raise(self, package_error: str) -> None:
        x, kind = self.pick()
        self.add(f"if {_CHECKS[kind][1].format(x=x)}:")
        self.add(f'raise {self.exception(package_error)}(f"{self.message()}: {{{x}!r}}")', 1)

    def assign(self) -> None:
        x, kind = self.pick()
        template, out = self.draw.pick(_EXPRS[kind])
        var = self.new_var()
        self.add(f"{var} = {template.format(x=x)}")
        self.vars.append((var, out))

    def loop(self) -> None:
        seq, _ = self.pick("seq", strict=True)
        acc, item = self.new_var(), self.new_var()
        self.add(f"{acc} = []")
        self.add(f"for {item} in {seq}:")
        self.add(f"if {item}:", 1)
        self.add(f"{acc}.append({item})", 2)
        self.vars.append((acc, "seq"))

    def call(self, callee: Sig, expr: str, in_async: bool) -> None:
        args = []
        for p in callee.params:
            if p.default and self.draw.chance(0.5):
                break
            args.append(self.pick(p.kind)[0])
        text = f"{expr}({', '.join(args)})"
        if callee.spec["async"]:
            text = f"await {text}"
            self.awaited = True
        if callee.spec["yields"]:
            var = self.new_var()
            self.add(f"{var} = list({text})")
            self.vars.append((var, "seq"))
        elif callee.spec["returns"]:
            var = self.new_var()
            self.add(f"{var} = {text}")
            self.vars.append((var, callee.ret_kind))
        else:
            self.add(text)

    def attribute(self, callee: Sig, expr: str) -> None:
        var = self.new_var()
        self.add(f"{var} = {expr}")
        self.vars.append((var, callee.ret_kind))

    def nested_helper(self, with_raise: bool) -> None:
        """A nested function: its ``return`` / ``raise`` belong to it, not to this body."""
        helper, arg = "_" + self.new_var(), self.new_var()
        seq, _ = self.pick("seq", strict=True)
        self.add(f"def {helper}({arg}):")
        if with_raise:
            self.add(f"if {arg} is None:", 1)
            self.add(f'raise ValueError("{self.message()}")', 2)
        self.add(f"return str({arg}).lower()", 1)
        var = self.new_var()
        self.add(f"{var} = sorted({seq}, key={helper})")
        self.vars.append((var, "seq"))

    def lambda_sort(self) -> None:
        seq, _ = self.pick("seq", strict=True)
        var = self.new_var()
        self.add(f"{var} = sorted({seq}, key=lambda value: str(value).lower())")
        self.vars.append((var, "seq"))

    def yield_values(self, is_async: bool) -> None:
        seq, _ = self.pick("seq", strict=True)
        if not is_async and self.draw.chance(0.3):
            self.add(f"yield from {seq}")
            return
        item = self.new_var()
        self.add(f"for {item} in {seq}:")
        if is_async:
            self.add("await asyncio.sleep(0)", 1)
            self.awaited = True
            self.needs.append("asyncio")
        self.add(f"yield {item}", 1)

    def ensure_await(self) -> None:
        if not self.awaited:
            self.add("await asyncio.sleep(0)")
            self.awaited = True
            self.needs.append("asyncio")

    def return_value(self, kind: str) -> None:
        self.add(f"return {self.pick(kind)[0]}")


def _pick_callee(d: Draw, sig: Sig, callees) -> tuple[Sig, str] | None:
    """A definition ``sig`` can call (not itself; no context managers; async ones only from
    async code, and never async generators): a few random tries, so cost stays constant."""
    for _ in range(4) if callees else ():
        c, e = d.pick(callees)
        if c is sig or c.access == "ctx":
            continue
        if c.spec["async"] and (c.spec["yields"] or not sig.spec["async"]):
            continue
        return c, e
    return None


def pkg_body(b: Body, sig: Sig, callees: list[tuple[Sig, str]], package_error: str) -> None:
    """Body of a library function or method (``callees``: what it may call, with the
    expression that names each)."""
    spec, d = sig.spec, b.draw
    if spec["docstring"]:
        b.docstring(f"{words(sig.name)} for {b.phrase()}", sig.params)
    elif d.chance(0.3):
        b.comment()
    guards = (["assert"] if spec["assert"] else []) + (["raise"] if spec["raises"] else [])
    if not spec["returns"] and d.chance(0.15):
        guards.append("bare")
    for g in d.shuffled(guards):
        if g == "assert":
            b.guard_assert()
        elif g == "raise":
            b.guard_raise(package_error)
        else:
            x, kind = b.pick()
            b.add(f"if {_CHECKS[kind][1].format(x=x)}:")
            b.add("return", 1)  # a bare return: not a `return <expression>`
    for _ in range(d.between(1, 3)):
        r = d.random()
        found = _pick_callee(d, sig, callees) if r < 0.3 else None
        if found:
            c, e = found
            b.attribute(c, e) if c.access == "attr" else b.call(c, e, spec["async"])
            b.needs.append(e)
        elif r < 0.45:
            b.loop()
        elif r < 0.52:
            b.nested_helper(with_raise=not spec["raises"] and d.chance(0.5))
        elif r < 0.58:
            b.lambda_sort()
        else:
            b.assign()
    if spec["async"]:
        b.ensure_await()
    if spec["yields"]:
        b.yield_values(spec["async"])
    if spec["returns"]:
        b.return_value(sig.ret_kind)
