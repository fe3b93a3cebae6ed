"""Words the synthetic repositories are named from, and the seeded draws that pick them.

Names are composed from a domain's nouns and a shared list of verbs and qualifiers, so they read
like a business code base (``parse_invoice_header``, ``InventoryLedger.reconcile``). Every name
is drawn **independently of the definition's properties**: no word here is reserved for, or more
likely on, a definition with a docstring, a decorator, a ``yield``... (the name-leak test checks
this). Lists are tuples in a fixed order; nothing iterates a set.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

DOMAINS: dict[str, tuple[str, ...]] = {
    "billing": (
        "invoice",
        "payment",
        "refund",
        "customer",
        "ledger",
        "receipt",
        "discount",
        "tax",
        "currency",
        "balance",
        "charge",
        "statement",
        "account",
        "credit",
        "subscription",
        "plan",
        "coupon",
        "line",
        "total",
        "due_date",
    ),
    "inventory": (
        "warehouse",
        "stock",
        "item",
        "sku",
        "shelf",
        "bin",
        "supplier",
        "order",
        "shipment",
        "pallet",
        "batch",
        "location",
        "count",
        "reorder",
        "vendor",
        "catalog",
        "unit",
        "quantity",
        "barcode",
        "transfer",
    ),
    "scheduling": (
        "shift",
        "slot",
        "calendar",
        "booking",
        "room",
        "attendee",
        "event",
        "reminder",
        "timezone",
        "window",
        "agenda",
        "session",
        "venue",
        "roster",
        "availability",
        "conflict",
        "recurrence",
        "deadline",
        "queue",
        "ticket",
    ),
    "logistics": (
        "route",
        "carrier",
        "parcel",
        "depot",
        "manifest",
        "stop",
        "driver",
        "vehicle",
        "zone",
        "tariff",
        "label",
        "tracking",
        "consignment",
        "dock",
        "freight",
        "waybill",
        "hub",
        "lane",
        "leg",
        "delivery",
    ),
    "payroll": (
        "employee",
        "salary",
        "timesheet",
        "bonus",
        "deduction",
        "payslip",
        "contract",
        "department",
        "allowance",
        "pension",
        "overtime",
        "leave",
        "grade",
        "period",
        "rate",
        "benefit",
        "claim",
        "approval",
        "expense",
        "budget",
    ),
}

GENERIC_NOUNS = (
    "record",
    "entry",
    "header",
    "summary",
    "report",
    "config",
    "registry",
    "cache",
    "index",
    "snapshot",
    "batch",
    "payload",
    "filter",
    "rule",
    "policy",
    "status",
    "history",
    "metadata",
    "settings",
    "profile",
)

VERBS = (
    "parse",
    "load",
    "build",
    "compute",
    "validate",
    "merge",
    "split",
    "format",
    "render",
    "reconcile",
    "apply",
    "resolve",
    "collect",
    "group",
    "normalize",
    "export",
    "import",
    "sync",
    "fetch",
    "update",
    "refresh",
    "archive",
    "match",
    "estimate",
    "allocate",
    "schedule",
    "assign",
    "cancel",
    "approve",
    "lookup",
    "compare",
    "serialize",
    "convert",
    "summarize",
    "filter",
    "rank",
    "encode",
    "decode",
    "check",
    "prepare",
    "register",
    "release",
    "reserve",
    "adjust",
    "round",
    "close",
    "open",
    "scan",
    "emit",
)

QUALIFIERS = (
    "pending",
    "active",
    "daily",
    "monthly",
    "raw",
    "partial",
    "draft",
    "final",
    "default",
    "current",
    "previous",
    "expired",
    "open",
    "closed",
    "local",
    "remote",
    "primary",
    "secondary",
    "bulk",
    "single",
)

SCENARIOS = (
    "basic",
    "empty",
    "single_item",
    "many_items",
    "roundtrip",
    "unicode",
    "zero",
    "large_values",
    "defaults",
    "sorted_output",
    "twice",
    "mixed_case",
    "boundary",
    "repeated",
    "missing_key",
    "nested",
    "negative",
    "whitespace",
    "order",
    "copy",
)

DECORATOR_NAMES = (
    "audited",
    "traced",
    "logged",
    "timed",
    "guarded",
    "retried",
    "profiled",
    "instrumented",
    "checked",
    "metered",
)

PACKAGE_SUFFIXES = ("kit", "desk", "hub", "works", "flow", "core", "base", "forge", "lab", "ops")

BUILTIN_FIXTURES = ("tmp_path", "monkeypatch", "capsys", "caplog")

# Annotation text per parameter kind (modules use ``from __future__ import annotations``, so
# nothing here is evaluated at import time).
KIND_TYPES = {
    "int": ("int",),
    "float": ("float", "Decimal"),
    "str": ("str",),
    "bool": ("bool",),
    "seq": ("list[str]", "Sequence[str]", "Iterable[str]", "tuple[str, ...]"),
    "map": ("dict[str, int]", "Mapping[str, float]", "dict[str, str]"),
}
KINDS = tuple(KIND_TYPES)


class Draw:
    """Seeded draws built on ``random.Random(seed).random()`` only.

    ``random()`` is the one method whose sequence Python guarantees across versions, so choice,
    shuffle and weighted sampling are written here on top of it instead of using
    ``randrange``/``sample`` (whose algorithms may change between Python versions).
    """

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def random(self) -> float:
        return self._r.random()

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)`` (``n`` >= 1)."""
        return min(int(self._r.random() * n), n - 1)

    def between(self, lo: int, hi: int) -> int:
        """A uniform integer in ``[lo, hi]``."""
        return lo + self.below(hi - lo + 1)

    def chance(self, p: float) -> bool:
        return self._r.random() < p

    def pick(self, seq: Sequence[T]) -> T:
        return seq[self.below(len(seq))]

    def shuffled(self, seq: Sequence[T]) -> list[T]:
        out = list(seq)
        for i in range(len(out) - 1, 0, -1):  # Fisher-Yates
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out

    def weighted_sample(self, items: Sequence[T], weights: Sequence[float], k: int) -> list[T]:
        """``k`` distinct items without replacement, each drawn with probability proportional
        to its weight among those left (Efraimidis-Spirakis keys ``u ** (1 / w)``).

        Items of weight 0 are never drawn; ``k`` must not exceed the number of positive weights.
        Ties in the key fall back to the item's position, so the result is a pure function of
        the draws.
        """
        keyed = []
        for pos, (item, w) in enumerate(zip(items, weights, strict=True)):
            u = self._r.random()
            if w > 0:
                keyed.append((u ** (1.0 / w), -pos, item))
        if k > len(keyed):
            raise ValueError(f"cannot draw {k} of {len(keyed)} items")
        keyed.sort(key=lambda t: (t[0], t[1]), reverse=True)
        return [t[2] for t in keyed[:k]]


def snake(*words: str) -> str:
    return "_".join(words)


def camel(*words: str) -> str:
    return "".join(part.capitalize() for w in words for part in w.split("_"))


def from_import(module: str, names: list[str]) -> str:
    """``from module import a, b`` (wrapped in parentheses, one name a line, past 99 columns)."""
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= 99:
        return line
    return f"from {module} import (\n" + "".join(f"    {n},\n" for n in names) + ")"
