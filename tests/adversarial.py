"""Hypothesis strategies for random and adversarial actions (shared by the property tests).

``actions(valid)`` draws one action: a well-formed call from ``valid`` (weighted up, so episodes
also make progress), a dict with wrong types or values JSON cannot express (sets, bytes,
objects, NaN, cycles, non-string keys, huge ints, deep nesting, lone surrogates), JSON text
built from the same values (over-long integers, ``NaN``, deep brackets, surrogate escapes,
truncation), raw bytes, bulk id lists and other Python objects. ``Resolve`` wraps a call that
needs the live environment (e.g. the correct answer of a unit) and is resolved at step time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
ODD_CHARS = ["\x00", "\x1b", "\x7f", "\u2028", "\ufeff", "²", "٣", "𝟙", "\n", "\t", "é", "\u200b"]
ODD_STRINGS = ["--5", "1_000", " 7 ", "+3", "-0", "3.0", "٣٣", "²"]
TOOL_NAMES = [
    "search",
    "submit",
    "status",
    "final",
    "ask_user",
    "list_units",
    "inspect",
    "read_file",
    "edit_file",
    "write_file",
    "answer",
    "run_verifier",
    "search_code",
    "Search",
    "",
    "tool",
    "delete_everything",
]
ARG_NAMES = [
    "query",
    "page",
    "ids",
    "reported_count",
    "message",
    "unit_id",
    "path",
    "value",
    "offset",
    "limit",
    "old",
    "new",
    "content",
    "pattern",
    "path_glob",
    "tool",
    "x",
    "",
]


@dataclass(frozen=True)
class Resolve:
    """An action computed from the environment when it is stepped (``fn(env.unwrapped)``)."""

    label: str
    fn: Callable[[Any], Any]

    def __repr__(self) -> str:
        return f"Resolve({self.label})"


def resolve(action: Any, env) -> Any:
    return action.fn(env.unwrapped) if isinstance(action, Resolve) else action


# ----- values -------------------------------------------------------------------------------------
chars = st.one_of(st.characters(), st.sampled_from(SURROGATES + ODD_CHARS))
texts = st.one_of(st.text(alphabet=chars, max_size=24), st.sampled_from(ODD_STRINGS))


class HugeInt(int):
    """An int too long for ``repr`` (Python's int/str limit); shown by its size instead."""

    def __repr__(self) -> str:
        return f"HugeInt(~{int.bit_length(self) * 3 // 10} digits)"


huge_ints = st.builds(
    lambda e, sign: HugeInt(sign * 10**e),
    st.sampled_from([400, 1000, 4400, 5000]),
    st.sampled_from([1, -1]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    huge_ints,
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
not_json = st.one_of(
    st.sets(st.integers(), max_size=3),
    st.binary(max_size=12),
    st.tuples(st.integers(), st.text(max_size=3)),
    st.builds(object),
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),
    st.frozensets(st.text(max_size=3), max_size=2),
    st.just(Ellipsis),
    st.complex_numbers(max_magnitude=10),
)
odd_values = st.recursive(
    scalars | not_json,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def _nested(depth: int, kind: str) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def _cycle(kind: str) -> Any:
    if kind == "list":
        loop: list = []
        loop.append(loop)
        return loop
    d: dict = {"tool": "status"}
    d["again"] = {"inner": d}
    return d


deep_values = st.builds(_nested, st.integers(20, 3000), st.sampled_from(["list", "dict"]))
cycles = st.builds(_cycle, st.sampled_from(["list", "dict"]))
arg_values = st.one_of(json_values, odd_values, deep_values, cycles)


# ----- JSON text with adversarial pieces ----------------------------------------------------------
def _fragment(value: Any) -> str:
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return "null"


text_fragments = st.one_of(
    json_values.map(_fragment),
    st.integers(1, 6000).map(lambda n: "9" * n),  # past int/str limits
    st.integers(20, 5000).map(lambda n: "[" * n + "1" + "]" * n),  # deep nesting
    st.sampled_from(SURROGATES).map(lambda s: json.dumps(s)),  # "\ud800" escapes
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            "1e999",
            "-1e400",
            "0.1e-99999",
            "[1,",
            '"open',
            "{",
            "}",
            "tru",
            '"\\x"',
            "1_0",
            "01",
            "+1",
        ]
    ),
)


@st.composite
def text_actions(draw) -> str:
    tool = draw(st.sampled_from(TOOL_NAMES))
    pieces = draw(st.dictionaries(st.sampled_from(ARG_NAMES), text_fragments, max_size=3))
    body = ",".join(f"{json.dumps(k)}:{v}" for k, v in pieces.items())
    text = f'{{"tool":{json.dumps(tool)}{"," if body else ""}{body}}}'
    cut = draw(st.one_of(st.none(), st.integers(0, len(text))))
    return text if cut is None else text[:cut]


@st.composite
def dict_actions(draw) -> dict:
    call: dict = {}
    if draw(st.booleans()):
        call["tool"] = draw(st.one_of(st.sampled_from(TOOL_NAMES), arg_values))
    call.update(draw(st.dictionaries(st.sampled_from(ARG_NAMES), arg_values, max_size=3)))
    return call


bulk_ids = st.builds(
    lambda n, tool: {"tool": tool, "ids": [f"src/m{i}.py::f{i}" for i in range(n)]},
    st.sampled_from([11, 25, 300, 2_000, 40_000]),
    st.sampled_from(["submit", "search", "status"]),
)


def actions(valid: st.SearchStrategy) -> st.SearchStrategy:
    """One action: mostly well-formed (``valid``), the rest adversarial."""
    return st.one_of(
        valid,
        valid,
        valid,
        dict_actions(),
        text_actions(),
        text_actions().map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=64),
        bulk_ids,
        arg_values,  # not even a dict
        st.builds(lambda v: {"tool": "submit", "ids": v}, arg_values),
        st.builds(lambda v: {"tool": "search", "query": "x", "page": v}, arg_values),
    )
