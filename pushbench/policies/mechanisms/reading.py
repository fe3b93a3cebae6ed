"""How a simulated agent reads an observation: the rendered JSON text, as any agent sees it.

Every function here takes the decoded observation (``json.loads`` of the text the environment or
a controller rendered) and reads it by the words it shows, the way a model reads a tool result:
a number labelled ``valid_count``, a list of unit ids labelled ``submitted``/``accepted``, a
page number mentioned next to the query it sent. Nothing here knows how a controller stores or
normalises its state (no controller module is imported; tests check it), so a controller that
renders the same facts in other words or another nesting is read the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

UNIT_ID = re.compile(r"^u\d+$")
RESULT_KEYS = ("ok", "tool", "result", "error", "error_type")  # what the environment itself renders


def decode(text) -> dict:
    """The observation as an agent sees it; only text is accepted (never a Python object)."""
    if not isinstance(text, str):
        raise TypeError(
            f"simulated agents read the rendered observation text only, got {type(text).__name__}"
        )
    return json.loads(text)


def extra_blocks(obs: dict) -> dict:
    """Everything a wrapper added to the observation beyond the environment's own fields."""
    return {k: v for k, v in obs.items() if k not in RESULT_KEYS}


def _walk(value, path=()) -> Iterator[tuple[tuple, object]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, path + (str(k),))
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, path)


def _same_words(a: str, b: str) -> bool:
    """How a reader compares a query it wrote with one it sees: case and spacing aside."""
    return a.split() == b.split() or a.casefold().split() == b.casefold().split()


def count_in(value) -> int | None:
    """The last integer labelled ``valid_count`` anywhere in ``value`` (None if none shown)."""
    found = None
    for path, v in _walk(value):
        if path and path[-1] == "valid_count" and isinstance(v, int) and not isinstance(v, bool):
            found = v
    return found


def pages_mentioned(obs: dict, query: str) -> tuple[set[int], int | None]:
    """Pages an added block says were seen for ``query`` and the next page it names, if any.

    A block mentions a query either as a mapping key or as a ``query`` field; within that
    mapping, integers under a word with ``seen`` are seen pages, an integer under a word with
    ``next`` is the next page to fetch.
    """
    seen: set[int] = set()
    nxt: int | None = None
    for _, v in _walk(extra_blocks(obs)):
        if not isinstance(v, dict):
            continue
        scopes = [sub for k, sub in v.items() if isinstance(sub, dict) and _same_words(k, query)]
        if isinstance(v.get("query"), str) and _same_words(v["query"], query):
            scopes.append(v)
        for scope in scopes:
            for k, x in scope.items():
                if "seen" in k and isinstance(x, list):
                    seen.update(i for i in x if isinstance(i, int) and not isinstance(i, bool))
                if "next" in k and isinstance(x, int) and not isinstance(x, bool):
                    nxt = x if nxt is None else max(nxt, x)
    return seen, nxt


def units_under(obs: dict, words: tuple[str, ...]) -> set[str]:
    """Unit ids listed in an added block under a label containing one of ``words``."""
    out: set[str] = set()
    for path, v in _walk(extra_blocks(obs)):
        if isinstance(v, str) and UNIT_ID.match(v) and path and any(w in path[-1] for w in words):
            out.add(v)
    return out


def units_mentioned(obs: dict) -> set[str]:
    """Every unit id an added block lists (a reader learns that these units exist)."""
    return {v for _, v in _walk(extra_blocks(obs)) if isinstance(v, str) and UNIT_ID.match(v)}
