"""The error hierarchy and the one "did you mean" helper.

Every error a user can fix (an unknown name, a bad experiment, parameters a policy does not
take, an unusable run folder) is a :class:`PushBenchError`; the CLI prints its message as one
``error: ...`` line and exits with status 2. Each subclass also keeps the builtin base its
callers have always caught (``KeyError`` for unknown names, ``ValueError`` for bad values), so
``except KeyError`` and ``except ValueError`` keep working.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PushBenchError(Exception):
    """Bad input or state the user can fix; the message says what to do (CLI exit 2)."""


class UnknownNameError(PushBenchError, KeyError):
    """An unknown task, controller, policy or executor name (message lists close matches)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ExperimentError(PushBenchError, ValueError):
    """An experiment that cannot be loaded or run as given; the message says what to fix."""


class ControllerScopeError(PushBenchError, ValueError):
    """A controller composed for a family where one of its components would do nothing (the
    message names the component and the family); a composition declared
    ``family_independent`` in ``controllers/*.yaml`` is exempt."""


class RunDirError(PushBenchError, ValueError, RuntimeError):
    """A run folder (sweep or black-box) that cannot be used or read as asked.

    One class for both kinds of run folder (it was a ``RuntimeError`` for sweeps and a
    ``ValueError`` for black-box runs; it is still both)."""


class NotResetError(PushBenchError, RuntimeError):
    """An environment used before its first ``reset()`` (or after ``close()``): ``step``,
    ``episode_record`` and the like need an episode; the message names the call."""


def did_you_mean(name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> str:
    """``" Did you mean: a, b?"`` for the known names closest to ``name`` (``""`` if none)."""
    close = difflib.get_close_matches(str(name), list(known), n=n, cutoff=cutoff)
    return f" Did you mean: {', '.join(close)}?" if close else ""


def unknown(
    kind: str, name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6
) -> UnknownNameError:
    """The :class:`UnknownNameError` for ``name`` of ``kind``: close matches, then all known."""
    known = list(known)
    return UnknownNameError(
        f"unknown {kind} {name!r}.{did_you_mean(name, known, n, cutoff)} Known: {', '.join(known)}"
    )
