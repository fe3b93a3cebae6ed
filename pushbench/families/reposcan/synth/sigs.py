"""Names, decorators and signatures of the planned definitions (the first rendering pass).

Everything a caller needs to call a definition is fixed here, before any body is written, so
bodies can call functions defined later in the same module or imported from earlier modules.
Names come from :mod:`.vocab` through draws that never look at the definition's atoms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import vocab
from .plan import DefSpec
from .vocab import Draw, camel, snake


@dataclass
class Param:
    name: str
    kind: str  # a vocab.KINDS entry, or "obj" for fixture values
    ann: str
    default: str | None = None


@dataclass
class Sig:
    """How one definition is declared and called."""

    spec: DefSpec
    name: str
    owner: str = ""  # class name for methods
    decorators: list[str] = field(default_factory=list)
    first: str | None = None  # "self", "cls" or None
    params: list[Param] = field(default_factory=list)
    ret_kind: str = "str"
    access: str = "call"  # "call", "attr" (property) or "ctx" (context manager)
    ann_mode: str = "all"  # "all", "none", "params", "partial"


@dataclass
class ClassPlan:
    name: str
    fields: list[Param]
    methods: list[Sig] = field(default_factory=list)


class Scope:
    """Names taken in one module or class (membership only, never iterated)."""

    def __init__(self, taken=()) -> None:
        self._taken = set(taken)

    def claim(self, make) -> str:
        """The first free identifier ``make(attempt)`` proposes (attempts 0, 1, ...)."""
        for attempt in range(60):
            name = make(attempt)
            if name.isidentifier() and name not in self._taken:
                self._taken.add(name)
                return name
        raise RuntimeError("vocabulary exhausted")  # not reached: millions of combinations

    def add(self, name: str) -> None:
        self._taken.add(name)

    def __contains__(self, name: str) -> bool:
        return name in self._taken


LITERALS = {
    "int": ("0", "1", "3", "10", "25", "100"),
    "float": ("0.0", "1.5", "2.25", "10.0"),
    "str": ('"default"', '"pending"', '"EUR"', '"north"', '""'),
    "bool": ("False", "True"),
}
FIELD_DEFAULTS = {"seq": "field(default_factory=list)", "map": "field(default_factory=dict)"}


class Namer:
    def __init__(self, draw: Draw, nouns: tuple[str, ...]) -> None:
        self.draw = draw
        self.nouns = nouns

    def noun(self) -> str:
        return self.draw.pick(self.nouns)

    def func_name(self, attempt: int) -> str:
        d = self.draw
        if attempt < 20 and d.chance(0.7):
            return snake(d.pick(vocab.VERBS), self.noun())
        if attempt < 40:
            return snake(d.pick(vocab.VERBS), d.pick(vocab.QUALIFIERS), self.noun())
        return snake(d.pick(vocab.VERBS), d.pick(vocab.QUALIFIERS), self.noun(), self.noun())

    def var_name(self, attempt: int) -> str:
        d = self.draw
        if attempt < 10 and d.chance(0.6):
            return self.noun()
        if attempt < 40:
            return snake(d.pick(vocab.QUALIFIERS), self.noun())
        return snake(d.pick(vocab.QUALIFIERS), self.noun(), self.noun())

    def class_name(self, attempt: int) -> str:
        d = self.draw
        words = [self.noun(), d.pick(vocab.GENERIC_NOUNS)]
        if attempt >= 20:
            words.insert(0, d.pick(vocab.QUALIFIERS))
        return camel(*words)

    def params(self, scope: Scope, count: int) -> list[Param]:
        out = []
        for _ in range(count):
            name = scope.claim(self.var_name)
            kind = self.draw.pick(vocab.KINDS)
            out.append(Param(name, kind, self.draw.pick(vocab.KIND_TYPES[kind])))
        if out and out[-1].kind in LITERALS and self.draw.chance(0.3):
            out[-1].default = self.draw.pick(LITERALS[out[-1].kind])
        return out


def choose_ann_mode(draw: Draw, spec: DefSpec, has_params: bool) -> str:
    """``all`` for annotated definitions; otherwise at least one annotation is missing."""
    if spec["annotated"]:
        return "all"
    r = draw.random()
    if r < 0.5:
        return "none"
    if r < 0.8 or not has_params:
        return "params"  # parameters annotated, return not
    return "partial"  # return annotated, one parameter not


def pkg_signature(
    draw: Draw, namer: Namer, spec: DefSpec, scope: Scope, owner: str, custom: list[str]
) -> Sig:
    """Signature of a library function or method; ``custom`` lists custom decorator names."""
    sig = Sig(
        spec=spec, name=scope.claim(namer.func_name), owner=owner, ret_kind=draw.pick(vocab.KINDS)
    )
    is_method, is_async, yields = spec["method"], spec["async"], spec["yields"]
    sig.first = "self" if is_method else None
    if spec["decorated"]:
        opts: list[str] = []
        if is_method and spec["returns"] and not is_async and not yields:
            opts += ["property", "property", "functools.cached_property"]
        if is_method:
            opts += ["staticmethod", "classmethod"]
        if not is_async and not yields:
            opts += ["functools.lru_cache(maxsize=128)", "functools.cache"]
        if yields:
            opts += ["contextlib.asynccontextmanager" if is_async else "contextlib.contextmanager"]
        opts += [draw.pick(custom) for _ in range(2)] if custom else []
        if not opts:
            opts = ["typing.no_type_check"]
        first = draw.pick(opts)
        sig.decorators = [first]
        if first in ("staticmethod", "classmethod") and custom and draw.chance(0.3):
            sig.decorators.append(draw.pick(custom))
        if first == "staticmethod":
            sig.first = None
        elif first == "classmethod":
            sig.first = "cls"
        elif first.endswith("property"):
            sig.access = "attr"
        elif first.endswith("contextmanager"):
            sig.access = "ctx"
    local = Scope(["self", "cls"])
    count = 0 if sig.access == "attr" else draw.pick((0, 1, 1, 1, 2, 2, 2, 3))
    sig.params = namer.params(local, count)
    sig.ann_mode = choose_ann_mode(draw, spec, bool(sig.params))
    return sig


def return_annotation(sig: Sig) -> str:
    spec = sig.spec
    if spec.role == "decorator":
        return "Callable[..., Any]"
    if spec["yields"]:
        if spec["async"]:
            return "AsyncIterator[str]"
        return "Generator[str, None, int]" if spec["returns"] else "Iterator[str]"
    if spec["returns"]:
        return vocab.KIND_TYPES[sig.ret_kind][0] if sig.ret_kind != "obj" else "Any"
    return "None"


def render_signature(sig: Sig, indent: str) -> list[str]:
    """Decorator lines and the ``def`` line (annotations per ``sig.ann_mode``)."""
    lines = [f"{indent}@{d}" for d in sig.decorators]
    parts = [sig.first] if sig.first else []
    missing = sig.params[-1].name if sig.ann_mode == "partial" and sig.params else None
    for p in sig.params:
        annotate = sig.ann_mode in ("all", "params") or (
            sig.ann_mode == "partial" and p.name != missing
        )
        if annotate:
            parts.append(f"{p.name}: {p.ann}" + (f" = {p.default}" if p.default else ""))
        else:
            parts.append(p.name + (f"={p.default}" if p.default else ""))
    ret = f" -> {return_annotation(sig)}" if sig.ann_mode in ("all", "partial") else ""
    prefix = "async def" if sig.spec["async"] else "def"
    lines.append(f"{indent}{prefix} {sig.name}({', '.join(parts)}){ret}:")
    return lines
