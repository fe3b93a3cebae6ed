"""The mechanism contract: one small class, one documented parameter, one real LLM behaviour.

A :class:`Mechanism` is switched on by giving its parameter a value (off: absent). It only acts
through the hook methods below, which a base agent calls at fixed points of its loop; every hook
has a neutral default, so an agent with no mechanism is exactly its competent base. Each
mechanism draws from its own generator (seeded from the policy seed and the mechanism's key), so
switching one mechanism on never changes another's random draws.
"""

from __future__ import annotations

import zlib
from typing import ClassVar

import numpy as np


class Mechanism:
    """Base class. ``key`` names the parameter; ``families`` the task families it acts on."""

    key: ClassVar[str] = ""
    families: ClassVar[tuple[str, ...]] = ("reposcan", "dataops", "dataops_public")
    integer: ClassVar[bool] = False  # the parameter is a count (else a rate in [0, 1])
    minimum: ClassVar[float] = 0.0

    def __init__(self, value, seed: int | None) -> None:
        self.value = value
        entropy = None if seed is None else int(seed)
        self.rng = np.random.default_rng(
            np.random.SeedSequence(entropy, spawn_key=(zlib.crc32(self.key.encode()),))
        )

    def fires(self) -> bool:
        """One Bernoulli draw with probability ``value`` (rates only)."""
        return bool(self.rng.random() < self.value)

    # ----- hooks (neutral defaults) ---------------------------------------------------------
    def memory(self) -> int | None:
        """Observations the agent keeps in view (None: all)."""
        return None

    def quit_now(self, agent) -> dict | None:
        """An ending action to take instead of working on, or None."""
        return None

    def after_refusal(self, agent, refused: dict) -> dict | None:
        """What to do when a ``final``/``ask_user`` was refused (None: read the count, go on)."""
        return None

    def checks_status(self) -> bool:
        """Whether the agent confirms an unverified belief with ``status`` before ``final``."""
        return True

    def read_submit(self, agent, sent: int, verdicts: list[dict]) -> int | None:
        """A tally increment replacing the reading of a submit result's count (None: read it)."""
        return None

    def read_verdict(self, verdict: str) -> str:
        """The verdict as the agent reads it."""
        return verdict

    # RepoScan hooks
    def hold_batch(self, agent, result: dict) -> bool | None:
        """True: keep collecting after this search page instead of submitting."""
        return None

    def batch_size(self, agent) -> int | None:
        """Ids named in one submit call (None: the tool's limit)."""
        return None

    def drop_rest(self, agent, rest: list[str]) -> list[str] | None:
        """Ids kept after a refused over-long submit (None: keep them all)."""
        return None

    def fabricate(self, agent, ids: list[str]) -> str | None:
        """An id to add to a submit call, or None."""
        return None

    def misjudge(self, agent, plausible: bool) -> bool | None:
        """A judgement replacing the agent's own, or None."""
        return None

    def repeat_search(self, agent, query: str) -> dict | None:
        """A search to run instead of the next one, or None."""
        return None

    # DataOps hooks
    def keep_note(self, uid: str) -> bool:
        """Whether a unit the agent believes done is written to its notes."""
        return True

    def forget_submit(self, agent, uid: str) -> bool | None:
        """True: count a unit that passed its verifier as done without submitting it."""
        return None

    def skip_verify(self, agent, uid: str) -> bool | None:
        """True: submit a changed unit without running its verifier."""
        return None

    def stale_loop(self, agent, uid: str) -> int | None:
        """Extra repeated looks at a unit just chosen (None: none)."""
        return None

    def wrong_answer(self, agent) -> bool | None:
        """True: the next computed answer or edit is a plausible mistake."""
        return None


REGISTRY: dict[str, type[Mechanism]] = {}


def register(cls: type[Mechanism]) -> type[Mechanism]:
    if cls.key in REGISTRY:
        raise ValueError(f"mechanism parameter {cls.key!r} registered twice")
    REGISTRY[cls.key] = cls
    return cls


class Hooks:
    """The mechanisms an agent runs with, and the combined answer of each hook."""

    def __init__(self, mechanisms: list[Mechanism]) -> None:
        self.all = list(mechanisms)
        self.by_key = {m.key: m for m in self.all}

    def get(self, key: str) -> Mechanism | None:
        return self.by_key.get(key)

    def need(self, key: str) -> Mechanism:
        """The mechanism ``key``, where the caller's state says it is attached (KeyError if not)."""
        return self.by_key[key]

    def first(self, hook: str, *args):
        for m in self.all:
            out = getattr(m, hook)(*args)
            if out is not None:
                return out
        return None

    def memory(self) -> int | None:
        sizes = [s for m in self.all if (s := m.memory()) is not None]
        return min(sizes) if sizes else None

    def checks_status(self) -> bool:
        return all(m.checks_status() for m in self.all)

    def read_verdict(self, verdict: str) -> str:
        for m in self.all:
            verdict = m.read_verdict(verdict)
        return verdict


# ----- mechanisms shared by both families ----------------------------------------------------
@register
class ContextWindow(Mechanism):
    """Context-window loss: a chat model only sees the turns its context still holds.

    ``window`` = W: only the last W observations (with the calls that produced them) are in
    view; what the agent submitted, which pages it read and which units it finished are
    re-derived from that view, so anything older is forgotten unless an observation shows it
    again (a status result, a controller block) or it was written to notes (DataOps).
    """

    key = "window"
    integer = True
    minimum = 1

    def memory(self) -> int | None:
        return int(self.value)


@register
class TallyDrift(Mechanism):
    """Progress-tally drift: the model keeps a running count of what it "sent", not what the
    verifier accepted (a chat model's self-reported progress drifts upward).

    ``drift`` = p: reading a submit result, with probability p it adds every id it sent to its
    tally instead of reading the verified count. A count shown later (status, a controller block)
    resets the tally.
    """

    key = "drift"

    def read_submit(self, agent, sent, verdicts):
        return sent if self.fires() else None


@register
class VerdictMisreading(Mechanism):
    """Verdict misreading: the model reads a per-id verdict wrongly (an LLM skims a JSON list).

    ``misread`` = p: each verdict is read as its opposite with probability p: ``accepted`` as not
    accepted (the agent sends it again later: a duplicate) and ``duplicate``/``rejected`` as
    ``accepted`` (counted as progress). A misread result's count is then taken from the verdicts
    as read, not from the shown count.
    """

    key = "misread"

    def read_verdict(self, verdict):
        if verdict == "malformed" or not self.fires():
            return verdict
        return "rejected" if verdict == "accepted" else "accepted"


@register
class PrematureQuitting(Mechanism):
    """Premature quitting: the model stops a long task early ("I have found many; shall I stop?").

    ``give_up`` = h: a per-step hazard; when it fires the agent ends with ``ask_user`` or
    ``final`` (its current tally), half each.
    """

    key = "give_up"

    def quit_now(self, agent):
        if not self.fires():
            return None
        if self.rng.random() < 0.5:
            return {"tool": "ask_user", "message": "I have done a lot of this; shall I stop?"}
        return {"tool": "final", "reported_count": int(agent.tally), "message": "done"}


@register
class StatusBlindness(Mechanism):
    """Status blindness: the model trusts its own count, never asks for status, and repeats its
    claim of completion when told it is not done.

    ``insist`` = p: the agent never calls ``status`` to confirm its belief before ``final``;
    when a ``final``/``ask_user`` is refused (the episode goes on), it sends the same call again
    with probability p instead of reading the count it was shown.
    """

    key = "insist"

    def checks_status(self):
        return False

    def after_refusal(self, agent, refused):
        return dict(refused) if self.fires() else None
