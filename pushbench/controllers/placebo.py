"""The placebo component: a block as long as the progress block, carrying nothing else.

A matched placebo (in the spirit of PAST-Bench) for the progress block: it separates "any extra
text in every observation" from "verified state in every observation". Each step the component
renders what the family's progress block (``progress_state`` on RepoScan, ``unit_tracker`` on
the unit families) would show and measures its rendered length (compact JSON); :func:`blank`
turns that length, and only that length, into ``{"pad": "....."}`` of the same rendered length.

**Its only tie to the state is that length** (it grows with the searches or units seen and with
the digits of the counts). There are no lists whose lengths are counts, no keys per unit or
query, no nesting that follows the state: two states whose real blocks have the same length get
byte-identical placebo blocks (version 2 of the observations; version 1 copied the real block's
shape, so on DataOps the length of one of its lists was the accepted count). It goes under the
observation key ``notes``, never ``progress``, and it repairs nothing.
"""

from __future__ import annotations

import json

from .components import Component, ProgressState, register
from .units import SHARED_FILE_FAMILIES, UnitBook, UnitTracker, book_of

KEY = "notes"
_FILL = "."
_EMPTY = {"pad": ""}


def rendered_length(block: dict) -> int:
    """Characters of ``block`` rendered as compact JSON (how the observation renders it)."""
    return len(json.dumps(block, ensure_ascii=True, separators=(",", ":")))


def blank(length: int) -> dict:
    """A content-free block whose rendered length is ``length`` (or the shortest block,
    ``{"pad":""}``, when ``length`` is shorter than that): a function of ``length`` alone."""
    return {"pad": _FILL * max(length - rendered_length(_EMPTY), 0)}


def real_block(st, family: str) -> dict:
    """The progress block the family's progress component would show for ``st``."""
    real: dict = {}
    shown = UnitTracker if family in UnitTracker.families else ProgressState
    shown().decorate(real, st, family)
    return real


@register
class Placebo(Component):
    """Add a content-free block as long as the progress block (key ``notes``)."""

    name = "placebo"
    order = 80  # after progress_state (70); it only measures the real block

    def on_reset(self, decoded_obs, st, family):
        if family in UnitTracker.families and "book" not in st.units:
            st.units["book"] = UnitBook(shared_files=family in SHARED_FILE_FAMILIES)

    def observe(self, executed_call, decoded_obs, st, family):
        # Keep the unit book current only to size the block like the tracker's; an enabled
        # unit component updates the same book (UnitBook.observe is idempotent per step).
        if family in UnitTracker.families:
            book_of(st).observe(executed_call, decoded_obs, st.steps_used)

    def extra_block(self, st, family) -> tuple[str, dict]:
        return KEY, blank(rendered_length(real_block(st, family)))
