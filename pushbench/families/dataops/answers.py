"""The shape of a DataOps-lite answer: what ``answer(unit_id, value)`` records, or why not.

Contract (family version 2): :func:`read_answer` takes any JSON value and a unit's
``answer_type`` and returns the value to record, or raises :class:`AnswerShapeError` whose
message names what is wrong and quotes the expected form with an example. It never raises
anything else and never looks at the unit's expected answer: the shape of an answer is the
same for every unit of a type, so the error says nothing about which answer is right.

Forms:

* ``list``: text of items separated by commas (white space between items does not matter),
  each item ASCII letters, digits, ``.``, ``_`` or ``-`` (row numbers, account ids and file
  names all are); ``none`` (any case) or the empty text is the empty list. **A JSON array is
  accepted as the same answer** (decision of version 2, for agents whose tool call carries a
  list): an array of strings and integers, given as the value itself or as text starting with
  ``[``, is recorded as its items joined by commas, so ``["4", "17"]``, ``[4, 17]`` and
  ``"4,17"`` are one answer. The checker's semantics are unchanged: a list answer is compared
  as a set (:func:`pushbench.families.dataops.units.list_items`), so every value recorded in
  version 1 is recorded and judged the same way in version 2; values that version 1 recorded
  but could never be right (an item with a quote, bracket or ``;``) are refused as a shape error.
* ``text``: a string (an integer is recorded as it is, as in version 1).
* ``integer``: an integer, or text of an optional ``-`` and ASCII digits.

A shape error costs a step and records nothing (the previous answer stays), like every invalid
call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...envs.actions import echo
from .units import _INTEGER  # the checker's integer text: one definition

MAX_ANSWER_CHARS = 2000  # a list answer of every row of the largest table fits
ITEM = re.compile(r"[A-Za-z0-9._-]+")
_SPLIT = re.compile(r"[,\s]+")

FORMS = {
    "list": (
        "items separated by commas (spaces do not matter), each item made of letters, "
        'digits, ".", "_" or "-", e.g. "4,17,102" or "ACC-104,ACC-377"; "none" for an '
        "empty list. A JSON array of strings or integers is read the same way, e.g. "
        '["4", "17", "102"] or [4, 17, 102]'
    ),
    "text": 'one value as a string, exactly as the file writes it, e.g. "value": "<the value>"',
    "integer": 'an integer, or text of an optional "-" and digits, e.g. 42 or "-7"',
}


class AnswerShapeError(ValueError):
    """``value`` does not have its unit's answer form; the message says why and quotes it."""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        float: "a number with a fraction or exponent",
        dict: "an object",
        list: "an array",
        str: "text",
        int: "an integer",
    }.get(type(value), type(value).__name__)


def _refuse(atype: str, why: str) -> AnswerShapeError:
    form = FORMS.get(atype, "text")
    return AnswerShapeError(f"the value {why}; a {atype} answer is {form}")


def _list_items(value: Any) -> list[str]:
    """The items of a list answer in the order given (shape checked), else refuse."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # "[[[[..." nests past the parser's recursion
            raise _refuse("list", "starts with '[' but is not a JSON array") from None
        if not isinstance(value, list):
            raise _refuse("list", "starts with '[' but is not a JSON array")
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            if type(item) is int:
                items.append(str(item))
            elif isinstance(item, str):
                items.append(item.strip())
            else:
                raise _refuse(
                    "list",
                    f"is an array whose item {i} is {_kind(item)}, not a string or an integer",
                )
        if [p.lower() for p in items] == ["none"]:
            return []
        for item in items:
            if not ITEM.fullmatch(item):
                raise _refuse(
                    "list",
                    f"has the array item {echo(item)}, which is not one item of "
                    "letters, digits, '.', '_' and '-'",
                )
        return items
    if type(value) is int:
        return [str(value)]
    if not isinstance(value, str):
        raise _refuse("list", f"is {_kind(value)}")
    parts = [p for p in _SPLIT.split(value.strip()) if p]
    for p in parts:
        if not ITEM.fullmatch(p):
            raise _refuse(
                "list",
                f"has the item {echo(p)}, with a character other than "
                "letters, digits, '.', '_' and '-'",
            )
    return parts


def read_answer(value: Any, atype: str) -> str | int:
    """The value to record for an answer of type ``atype`` (module docstring), or raise
    :class:`AnswerShapeError`. A string is recorded stripped; an array as comma-joined text."""
    if isinstance(value, str) and len(value.strip()) > MAX_ANSWER_CHARS:
        raise _refuse(atype, f"is longer than {MAX_ANSWER_CHARS} characters")
    if atype == "list":
        items = _list_items(value)
        if isinstance(value, str) and not value.lstrip().startswith("["):
            return value.strip()  # as version 1 recorded it
        if type(value) is int:
            return value
        text = ",".join(items) or "none"
        if len(text) > MAX_ANSWER_CHARS:
            raise _refuse(atype, f"is longer than {MAX_ANSWER_CHARS} characters as a list")
        return text
    if atype == "integer":
        if type(value) is int:
            return value
        if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            return value.strip()
        raise _refuse(
            atype, f"is {_kind(value)}" + (f" {echo(value)}" if isinstance(value, str) else "")
        )
    if type(value) is int:
        return value
    if isinstance(value, str):
        return value.strip()
    raise _refuse(atype, f"is {_kind(value)}, not one value")
