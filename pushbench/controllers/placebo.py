"""The placebo component: a block as large as the progress block, carrying no progress state.

A matched placebo (in the spirit of PAST-Bench) for the progress block: it separates "any extra
text in every observation" from "verified state in every observation". Each step the component
renders what the family's progress block (``progress_state`` on RepoScan, ``unit_tracker`` on
the unit families) would show, then :func:`blank` keeps only its shape: the same nesting of
objects and lists with the same lengths, every key replaced by a neutral ``f<i>`` and every
leaf by a neutral string of ``.`` characters, padded so the rendered block has the same length
as the real one. No count, id, page, query or unit appears in it; what it shares with the real
block is its size (which grows with the searches or units seen) and shape. It goes under the
observation key ``notes``, never ``progress``, and it repairs nothing.
"""

from __future__ import annotations

import json

from .components import Component, ProgressState, register
from .units import SHARED_FILE_FAMILIES, UnitBook, UnitTracker, book_of

KEY = "notes"
_FILL = "."


def _size(value) -> int:
    return len(json.dumps(value, ensure_ascii=True, separators=(",", ":")))


def _neutral(value):
    if isinstance(value, dict):
        return {f"f{i}": _neutral(v) for i, v in enumerate(value.values())}
    if isinstance(value, list):
        return [_neutral(v) for v in value]
    return _FILL * max(_size(value) - 2, 0)


def blank(block: dict) -> dict:
    """``block``'s shape with no content, padded to ``block``'s rendered length (or longer by
    at most the few characters of the pad field when the blank is already longer)."""
    out = _neutral(block)
    gap = _size(block) - _size(out) - len(',"pad":""')
    if gap >= 0:
        out["pad"] = _FILL * gap
    return out


@register
class Placebo(Component):
    """Add a content-free block the size and shape of the progress block (key ``notes``)."""

    name = "placebo"
    order = 80  # after progress_state (70): it shapes its block like the real one

    def on_reset(self, decoded_obs, st, family):
        if family in UnitTracker.families and "book" not in st.units:
            st.units["book"] = UnitBook(shared_files=family in SHARED_FILE_FAMILIES)

    def observe(self, executed_call, decoded_obs, st, family):
        # Keep the unit book current only to size the block like the tracker's; an enabled
        # unit component updates the same book (UnitBook.observe is idempotent per step).
        if family in UnitTracker.families:
            book_of(st).observe(executed_call, decoded_obs, st.steps_used)

    def extra_block(self, st, family) -> tuple[str, dict]:
        real: dict = {}
        shown = UnitTracker if family in UnitTracker.families else ProgressState
        shown().decorate(real, st, family)
        return KEY, blank(real)
