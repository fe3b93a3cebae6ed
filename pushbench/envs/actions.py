"""One normalisation path from any input to a tool call, and the codes of refused actions.

Every caller that turns outside input into an environment action goes through :func:`decode`:
the environment itself (:meth:`pushbench.envs.base.QGPEnv._parse`), the controller wrapper
(before it steps, so a component only ever sees a bounded plain call), the LLM policies (model
output, :func:`pushbench.policies.llm.core.call_action`) and the MCP server (its wire screen,
:mod:`pushbench.blackbox.wire`). :func:`decode` is total: for any Python object it returns a fresh
plain ``dict`` (string keys; values ``str``, ``int``, finite ``float``, ``bool``, ``None``,
``list`` and ``dict``; at most :data:`MAX_DEPTH` levels, no integer over
:data:`MAX_INT_DIGITS` digits, no lone surrogate, at most :data:`MAX_ACTION_BYTES` as UTF-8
JSON) or raises :class:`ActionError` with a code from :data:`ERROR_TYPES`. It never raises
anything else, whatever it is given (cycles, sets, huge ints, deep nesting, bytes, NaN).

Each refused action costs exactly one recorded step (``steps_used == len(calls)`` in every
record); the one exception is ``episode_over``: calls after the episode ended are answered
but not run, recorded or counted.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .spaces import MAX_ACTION_BYTES

MAX_DEPTH = 32  # nesting of arrays/objects in one action (real calls need 3)
MAX_INT_DIGITS = 1000  # far below Python's 4300-digit int/str conversion limit

# Every ``error_type`` an observation can carry, with its meaning (docs/integrity.md).
ERROR_TYPES: dict[str, str] = {
    # -- the shape of the action (this module) ------------------------------------------------
    "bad_json": "the text is not valid JSON (NaN/Infinity included), or the action is neither "
    "text, bytes nor a dict",
    "bad_value": "a dict action holds what JSON cannot express: a set, bytes, an object, NaN or "
    "Infinity, a non-string key or a reference cycle",
    "not_object": "valid JSON, but not an object (an array, string, number or null)",
    "too_large": f"over the {MAX_ACTION_BYTES}-byte limit as UTF-8 JSON (refused unparsed); "
    "also a file over the sandbox's size limit",
    "too_deep": f"arrays/objects nested more than {MAX_DEPTH} levels deep",
    "number_too_large": f"an integer of more than {MAX_INT_DIGITS} digits, or a number that "
    "overflows to infinity",
    "bad_encoding": "bytes that are not UTF-8, or a string holding a lone surrogate",
    "control_chars": "raw control characters in the text (DEL is allowed there), or in a "
    "free-text argument (newlines and tabs are allowed inside arguments)",
    # -- the call ---------------------------------------------------------------------------
    "missing_tool": 'the object has no "tool" string',
    "unknown_tool": "the tool is not one of this environment's tools",
    "bad_arguments": "the arguments do not fit the tool's schema (missing, unknown, wrong "
    "type, out of range or too long)",
    "episode_over": "the episode already ended: the call was not run and costs no step",
    # -- work-unit families (DataOps-lite, SWE-lite) ------------------------------------------
    "unknown_unit": "no unit with this id in the backlog",
    "edit_unit": "answer() on an edit-mode unit",
    "answer_shape": "DataOps answer() whose value does not have the unit's answer form (the "
    "message quotes the form with an example; nothing is recorded)",
    "outside_workspace": "a path that leaves the workspace (absolute, '..')",
    "not_allowed": "a symlink, device, FIFO, hard link or other non-regular file",
    "not_found": "the file does not exist",
    "is_directory": "the path is a directory",
    "bad_path": "an empty or malformed path",
    "too_many_files": "the workspace holds too many files for another one",
    "no_match": "edit_file: `old` does not occur in the file",
    "ambiguous": "edit_file: `old` occurs more than once",
    "not_editable": "SWE-lite edit_file outside the library source",
    "bad_pattern": "SWE-lite search_code: the pattern is not a valid regular expression",
    "search_timeout": "SWE-lite search_code took longer than its time limit",
    # -- the harness ------------------------------------------------------------------------
    "internal": "a harness bug: the step is recorded, then the exception propagates (the MCP "
    "server answers it with this code and logs the traceback)",
}

# Free-text arguments (query, message, ...) refuse C0 controls other than tab/LF/CR, and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# The raw action text refuses the C0 controls JSON forbids raw, but not DEL: JSON may carry it
# raw, and its dict form and its "\u007f" escape decode, so a raw DEL must decode too (the
# text and dict forms of one action agree; found by test_decode_is_total_and_bounded). A DEL
# inside a free-text argument is still refused there, whichever form it came in.
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how ASCII JSON text spells a surrogate
_STRUCTURE = re.compile(r'\\.|["\[\]{}]', re.S)
_ECHO = 80
# an int needs more than MAX_INT_DIGITS digits when it has more bits than this
_INT_BITS = math.ceil((MAX_INT_DIGITS + 1) * math.log2(10))
_INT_LIMIT = 10**MAX_INT_DIGITS  # the smallest integer with more digits than allowed


class ActionError(Exception):
    """An invalid action: returned to the agent as an ``ok: false`` observation.

    ``error_type`` must be a key of :data:`ERROR_TYPES` (an undocumented code is a harness bug).
    """

    def __init__(self, error_type: str, message: str, tool: str | None = None) -> None:
        if error_type not in ERROR_TYPES:
            raise ValueError(f"undocumented error_type {error_type!r}: add it to ERROR_TYPES")
        super().__init__(message)
        self.error_type, self.message, self.tool = error_type, message, tool


def echo(text: str) -> str:
    """A short, ASCII-safe quotation of ``text`` for an error message."""
    text = text if len(text) <= _ECHO else text[:_ECHO] + "..."
    return json.dumps(text, ensure_ascii=True)


# ----- the one entry point ----------------------------------------------------------------------
def decode(action: Any) -> dict:
    """``action`` (JSON text, UTF-8 bytes or a dict) as a fresh plain JSON object.

    Raises :class:`ActionError` (and nothing else) when it cannot be one; see the module
    docstring for the guarantees of the result.
    """
    if isinstance(action, (bytes, bytearray, memoryview)):
        action = _text_of_bytes(bytes(action))
    if isinstance(action, str):
        return _from_text(action)
    if isinstance(action, dict):
        return _from_dict(action)
    raise ActionError(
        "bad_json", f"action must be JSON text or a dict, not {type(action).__name__}"
    )


def split_call(call: dict, tools) -> tuple[str, dict]:
    """``(tool, arguments)`` of a decoded call whose tool must be one of ``tools``."""
    tool = call.get("tool")
    if not isinstance(tool, str):
        raise ActionError("missing_tool", 'action has no "tool" string; tools: ' + ", ".join(tools))
    if tool not in tools:
        raise ActionError("unknown_tool", f"unknown tool {echo(tool)}; tools: " + ", ".join(tools))
    return tool, {k: v for k, v in call.items() if k != "tool"}


def mcp_call(tool: Any, arguments: Any) -> dict[str, Any]:
    """The action an MCP tool call stands for: ``{"tool": tool, **arguments}``.

    An argument named ``tool`` must not rename the call: it is kept as the unknown argument
    ``"tool (argument)"``. Arguments that are not a dict count as none. One place for the MCP
    server (:mod:`pushbench.blackbox.session`), the replay of its traces
    (:func:`pushbench.runner.replay_steps.trace_action`) and the Letta policy's replay.
    """
    call: dict[str, Any] = {"tool": tool}
    for k, v in arguments.items() if isinstance(arguments, dict) else ():
        call["tool (argument)" if k == "tool" else k] = v
    return call


def loads(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that cannot raise anything but :class:`ActionError`.

    Depth is checked before parsing (no ``RecursionError``), integers over
    :data:`MAX_INT_DIGITS` digits and overflowing floats are ``number_too_large`` (never
    Python's int/str conversion ``ValueError``), NaN and Infinity are ``bad_json``. Strings may
    still hold lone surrogates (checked by :func:`decode`).
    """
    if _depth_over(text, max_depth):
        raise ActionError(
            "too_deep", f"action JSON is nested too deeply (more than {max_depth} levels)"
        )
    try:
        return json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
        )
    except json.JSONDecodeError as e:
        raise ActionError(
            "bad_json", f"action is not valid JSON ({e.msg} at char {e.pos}): {echo(text)}"
        ) from None
    except RecursionError:  # unreachable after the depth check; kept as a guard
        raise ActionError("too_deep", "action JSON is nested too deeply") from None
    except ValueError as e:  # any other conversion failure inside the parser
        raise ActionError("bad_json", f"action is not valid JSON ({str(e)[:100]})") from None


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its JSON escape (``\\ud800``).

    For text that arrived through a JSON transport (model output, which can carry a surrogate
    escape): the result is valid Unicode, so it can be stored, logged and sent again, and inside
    a JSON string it still decodes to the same surrogate, which :func:`decode` refuses as
    ``bad_encoding``.
    """
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# ----- text ---------------------------------------------------------------------------------------
def _text_of_bytes(data: bytes) -> str:
    if len(data) > MAX_ACTION_BYTES:
        raise ActionError(
            "too_large",
            f"action is {len(data)} bytes; the limit is "
            f"{MAX_ACTION_BYTES} bytes (it was not parsed)",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ActionError(
            "bad_encoding", f"action is not valid UTF-8 ({e.reason} at byte {e.start})"
        ) from None


def _from_text(text: str) -> dict:
    # Check the length before encoding or parsing, so a huge payload costs O(1) here.
    if (
        len(text) > MAX_ACTION_BYTES
        or len(text.encode("utf-8", "surrogatepass")) > MAX_ACTION_BYTES
    ):
        raise ActionError(
            "too_large", f"action exceeds the {MAX_ACTION_BYTES}-byte limit (it was not parsed)"
        )
    if _RAW_CONTROL.search(text):
        raise ActionError("control_chars", "action contains control characters")
    call = loads(text)
    if not isinstance(call, dict):
        raise ActionError(
            "not_object",
            f'action must be a JSON object like {{"tool": "status"}}, got {_json_kind(call)}',
        )
    # Fast path: ASCII text without a surrogate escape cannot decode to a surrogate.
    if (not text.isascii() or _SURROGATE_ESCAPE.search(text)) and _has_surrogate(call):
        raise ActionError("bad_encoding", _surrogate_message(call))
    return call


def _depth_over(text: str, limit: int) -> bool:
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, in_string = 0, False
    for m in _STRUCTURE.finditer(text):
        tok = m.group()
        if tok[0] == "\\":  # an escape: skips the escaped character (a quote stays in a string)
            continue
        if tok == '"':
            in_string = not in_string
        elif not in_string:
            depth += 1 if tok in "[{" else -1
            if depth > limit:
                return True
    return False


def _parse_int(s: str) -> int:
    if len(s) - (s[0] == "-") > MAX_INT_DIGITS:
        raise ActionError(
            "number_too_large", f"an integer has {len(s)} digits; the limit is {MAX_INT_DIGITS}"
        )
    return int(s)


def _parse_float(s: str) -> float:
    f = float(s)
    if not math.isfinite(f):
        raise ActionError("number_too_large", f"the number {echo(s)} overflows")
    return f


def _parse_constant(name: str):
    raise ActionError("bad_json", f"{name} is not valid JSON")


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _has_surrogate(obj: Any) -> bool:
    stack = [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and _SURROGATE.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def _surrogate_message(call: dict) -> str:
    tool = call.get("tool")
    where = f"{tool}: " if isinstance(tool, str) and not _has_surrogate(tool) else ""
    return f"{where}a string holds a lone surrogate (not valid Unicode)"


# ----- dicts --------------------------------------------------------------------------------------
class _Budget:
    """A running lower bound of the action's UTF-8 JSON size, to stop early on bulk input."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_ACTION_BYTES

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise ActionError("too_large", f"action exceeds the {MAX_ACTION_BYTES}-byte limit")


def _from_dict(action: dict) -> dict:
    call = _flat_copy(action) if type(action) is dict else None
    if call is None:
        call = _copy(action, 0, set(), _Budget())
    try:
        size = len(_SIZE_ENCODER.encode(call).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):  # unreachable: _copy made it plain
        raise ActionError("bad_value", "action dict is not JSON-serialisable") from None
    if size > MAX_ACTION_BYTES:
        raise ActionError("too_large", f"action exceeds the {MAX_ACTION_BYTES}-byte limit")
    return call


# json.dumps(..., ensure_ascii=False, allow_nan=False) builds this encoder on every call
_SIZE_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _flat_copy(action: dict) -> dict | None:
    """``_copy(action)`` for the shape of nearly every call, or ``None`` (then ``_copy``
    decides, errors included): a plain dict of plain-string keys whose values are plain
    ``str``/``int``/``float``/``bool``/``None`` or plain lists of those, none of which
    ``_copy`` refuses. Such values ``_copy`` returns as they are (new dict, new lists), so the
    result is the same; its size budget is a lower bound of the JSON size, so a call that
    passes :func:`_from_dict`'s size check never ran out of it."""
    out = {}
    for k, v in action.items():
        if type(k) is not str or not _plain_scalar(k):
            return None
        if type(v) is list:
            for x in v:
                if not _plain_scalar(x):
                    return None
            v = list(v)
        elif not _plain_scalar(v):
            return None
        out[k] = v
    return out


def _plain_scalar(v: Any) -> bool:
    """``v`` is a plain JSON scalar ``_copy`` returns unchanged (its exact type, no subclass)."""
    t = type(v)
    if t is str:
        return v.isascii() or not _SURROGATE.search(v)
    if t is int:
        return v.bit_length() <= _INT_BITS and abs(v) < _INT_LIMIT
    if t is float:
        return math.isfinite(v)
    return v is None or t is bool


def _copy(value: Any, depth: int, path: set[int], budget: _Budget) -> Any:
    """A plain JSON copy of ``value`` (``path``: ids of the containers being copied)."""
    budget.spend(1)  # every value takes at least one character
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        value = str.__str__(value)  # a plain str, whatever the subclass does
        budget.spend(len(value))
        if not value.isascii() and _SURROGATE.search(value):
            raise ActionError("bad_encoding", "a string holds a lone surrogate (not valid Unicode)")
        return value
    if isinstance(value, int):
        value = int.__int__(value)
        if value.bit_length() > _INT_BITS or abs(value) >= _INT_LIMIT:
            raise ActionError(
                "number_too_large", f"an integer has more than {MAX_INT_DIGITS} digits"
            )
        return value
    if isinstance(value, float):
        value = float.__float__(value)
        if not math.isfinite(value):
            raise ActionError("bad_value", f"{value!r} is not a JSON number")
        return value
    if isinstance(value, (dict, list, tuple)):
        if id(value) in path:
            raise ActionError("bad_value", "action holds a reference cycle")
        if depth >= MAX_DEPTH:
            raise ActionError(
                "too_deep", f"action is nested too deeply (more than {MAX_DEPTH} levels)"
            )
        path.add(id(value))
        try:
            if isinstance(value, dict):
                out = {}
                for k, v in dict.items(value):
                    if not isinstance(k, str):
                        raise ActionError(
                            "bad_value", f"object keys must be strings, not {type(k).__name__}"
                        )
                    out[_copy(k, depth + 1, path, budget)] = _copy(v, depth + 1, path, budget)
                return out
            items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
            return [_copy(v, depth + 1, path, budget) for v in items]
        finally:
            path.discard(id(value))
    raise ActionError(
        "bad_value", f"action holds a {type(value).__name__}, which JSON cannot express"
    )


# ----- what records store about an action ---------------------------------------------------------
def preview(action: Any, limit: int = 2000) -> Any:
    """A bounded, JSON-serialisable stand-in of ``action`` for records (never raises).

    A decodable action whose JSON fits in ``limit`` characters is returned as its plain dict;
    anything else becomes a string of at most ``limit`` characters (plus ``...``).
    """
    try:
        call = decode(action) if isinstance(action, dict) else None
    except ActionError as e:
        return f"<unreadable dict action: {e.error_type}>"
    if call is not None:
        text = json.dumps(call, ensure_ascii=True)
        return call if len(text) <= limit else text[:limit] + "..."
    return _preview_other(action, limit)


def preview_decoded(action: Any, outcome: dict | ActionError, limit: int = 2000) -> Any:
    """``preview(action, limit)`` given what :func:`decode` made of ``action`` (the call it
    returned, or the :class:`ActionError` it raised): the same value without decoding again.

    A dict it returns is a fresh copy of ``outcome`` (it shares nothing with it), as
    :func:`preview`'s own decode would be. For a caller that decoded ``action`` already (the
    controller wrapper decodes each proposed call once).
    """
    if not isinstance(action, dict):  # preview decodes dicts only; text is quoted as text
        return _preview_other(action, limit)
    if isinstance(outcome, ActionError):
        return f"<unreadable dict action: {outcome.error_type}>"
    text = json.dumps(outcome, ensure_ascii=True)
    # json.loads of that text equals the decoded call exactly (plain str keys, str/int/finite
    # float/bool/None/list/dict values, no lone surrogates), and is a C-speed deep copy.
    return json.loads(text) if len(text) <= limit else text[:limit] + "..."


def _preview_other(action: Any, limit: int) -> Any:
    """:func:`preview` of an action that is not a dict."""
    if isinstance(action, (bytes, bytearray, memoryview)):
        action = bytes(action[:limit]).decode("utf-8", "replace")
    if isinstance(action, str):
        text = action[:limit]
        if _SURROGATE.search(text):  # keep records valid UTF-8
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        return text if len(action) <= limit else text + "..."
    return f"<{type(action).__name__} action>"
