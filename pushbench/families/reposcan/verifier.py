"""The hidden verifier: the only holder of a task instance's valid set.

Callers get verdicts, never the set, its size or any membership hint beyond the verdict of an
identifier they submitted. Identifiers are matched as strings and never used as file paths.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Set as AbstractSet
from typing import TypeGuard

ACCEPTED, DUPLICATE, REJECTED, MALFORMED = "accepted", "duplicate", "rejected", "malformed"

# <relative path with forward slashes ending in .py>::<dotted python names>
# (control characters are C0, DEL and C1: \x00-\x1f and \x7f-\x9f)
_IDENT = re.compile(
    r"^[^/\\\x00-\x1f\x7f-\x9f][^\\\x00-\x1f\x7f-\x9f]*\.py::"
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
)
MAX_IDENT_LEN = 512


def is_well_formed(ident: object) -> TypeGuard[str]:
    """True if ``ident`` is a ``str`` of at most :data:`MAX_IDENT_LEN` characters with the
    identifier form, no control character (C0, DEL, C1) and no path trick (``..`` anywhere, a
    leading ``/``, any ``\\``)."""
    return (
        isinstance(ident, str)
        and len(ident) <= MAX_IDENT_LEN
        and ".." not in ident
        and _IDENT.fullmatch(ident) is not None
    )


def digest(valid: AbstractSet[str]) -> str:
    """sha256 of the newline-joined sorted identifiers: what task manifests pin."""
    return hashlib.sha256("\n".join(sorted(valid)).encode()).hexdigest()


class Verifier:
    """Judges submissions against a hidden valid set, remembering what was submitted."""

    __slots__ = ("_valid", "_submitted", "_accepted")

    def __init__(self, valid: frozenset[str]) -> None:
        self._valid = valid
        self._submitted: set[str] = set()
        self._accepted: set[str] = set()

    @property
    def valid_count(self) -> int:
        return len(self._accepted)

    def judge(self, ident: object) -> str:
        """Verdict for one identifier; records it as submitted unless malformed."""
        if not is_well_formed(ident):
            return MALFORMED
        if ident in self._submitted:
            return DUPLICATE
        self._submitted.add(ident)
        if ident in self._valid:
            self._accepted.add(ident)
            return ACCEPTED
        return REJECTED

    def __repr__(self) -> str:  # never show the set, even in a debugger or a traceback
        return f"Verifier(accepted={len(self._accepted)}, submitted={len(self._submitted)})"
