"""Spend limits checked before every model call: the run's cost cap and the episode token cap.

Two limits, both optional (``pushbench run --max-cost-usd`` / ``max_cost_usd:`` and
``max_episode_tokens:`` in the experiment file; see docs/llm.md "Spend limits"):

* **cost cap** (per run folder, all invocations): a :class:`Meter` holds the dollars spent so
  far and the cap. The runner installs one where episodes run (:func:`install`; in this process
  for the ``inprocess`` and ``async`` executors, a shared :class:`SharedMeter` in every worker
  of the ``process`` pool). Before each model call the client asks :func:`check` whether the
  meter's spend plus this call's worst case (its estimated prompt at the input price plus
  ``max_tokens`` at the output price) would pass the cap; if so the episode is cut
  (``terminated_by: "cost_cap"``) before the call is sent. After the call its real cost is
  charged (:func:`charge`).
* **episode token cap**: before each call, the episode's prompt + completion tokens so far plus
  this call's estimated prompt plus ``max_tokens`` must stay within ``max_episode_tokens``, else
  the episode ends as ``terminated_by: "token_cap"``. The cap is set per episode by the episode
  driver (:func:`episode_limits`, a context variable, so concurrent asyncio episodes keep
  their own).

A call's prompt is estimated as the larger of the chars/4 estimate of the context budget over
the request (tool definitions included) and the previous call's real prompt count; a real
tokenizer may count more than that, so a single call can pass a limit by the estimate's error.
Both checks are a few comparisons when no limit is set (measured in
``experiments/bench_cost_cap.py``). Only the standard library is used: every layer may import it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager

COST_CAP = "cost_cap"
TOKEN_CAP = "token_cap"


class Meter:
    """Dollars spent and the cap, shared by the episodes of one process (thread-safe)."""

    def __init__(self, cap_usd: float, spent_usd: float = 0.0) -> None:
        self.cap_usd = float(cap_usd)
        self._spent = float(spent_usd)
        self._lock = threading.Lock()

    @property
    def spent_usd(self) -> float:
        return self._spent

    def charge(self, usd: float) -> None:
        with self._lock:
            self._spent += usd

    def would_pass(self, usd: float) -> bool:
        """Whether spending ``usd`` more would pass the cap."""
        return self._spent + usd > self.cap_usd + 1e-12


class SharedMeter(Meter):
    """A :class:`Meter` over a ``multiprocessing.Value('d')`` shared by pool workers."""

    def __init__(self, cap_usd: float, value) -> None:  # value: mp.Value('d')
        self.cap_usd = float(cap_usd)
        self._value = value

    @property
    def spent_usd(self) -> float:
        return float(self._value.value)

    def charge(self, usd: float) -> None:
        with self._value.get_lock():
            self._value.value += usd

    def would_pass(self, usd: float) -> bool:
        return float(self._value.value) + usd > self.cap_usd + 1e-12


_meter: Meter | None = None
_episode_tokens: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "pushbench_max_episode_tokens", default=None
)


def install(meter: Meter | None) -> Meter | None:
    """Make ``meter`` the cost cap of this process; return the previous one."""
    global _meter
    previous, _meter = _meter, meter
    return previous


def installed() -> Meter | None:
    return _meter


@contextmanager
def episode_limits(max_episode_tokens: int | None) -> Iterator[None]:
    """Run one episode (in this thread or asyncio task) under ``max_episode_tokens``."""
    token = _episode_tokens.set(max_episode_tokens)
    try:
        yield
    finally:
        _episode_tokens.reset(token)


def active() -> bool:
    """Whether any limit applies to a call made here (else the caller skips estimating)."""
    return _meter is not None or _episode_tokens.get() is not None


def check(
    episode_tokens: int,
    prompt_est: int,
    max_completion: int,
    price_in: float | None,
    price_out: float | None,
) -> tuple[str, str] | None:
    """``(terminated_by, reason)`` when the next call must not be sent, else ``None``.

    ``episode_tokens``: the episode's prompt + completion tokens so far; ``prompt_est``: the
    estimated prompt of the next call; ``max_completion``: its completion cap; prices in USD per
    million tokens (``None``: an unpriced model, which the cost cap does not see).
    """
    cap = _episode_tokens.get()
    if cap is not None and episode_tokens + prompt_est + max_completion > cap:
        return TOKEN_CAP, (
            f"the next call (about {prompt_est} prompt + up to {max_completion} "
            f"completion tokens) would take the episode's {episode_tokens} tokens "
            f"past max_episode_tokens {cap}"
        )
    meter = _meter
    if meter is not None and price_in is not None and price_out is not None:  # priced: both
        worst = (prompt_est * price_in + max_completion * price_out) / 1e6
        if meter.would_pass(worst):
            return COST_CAP, (
                f"the next call's worst case ${worst:.6f} would take the run's "
                f"spend ${meter.spent_usd:.6f} past the cap ${meter.cap_usd:.6f}"
            )
    return None


def charge(usd: float | None) -> None:
    """Add a finished call's cost to this process's meter (no-op without one)."""
    meter = _meter
    if meter is not None and usd:
        meter.charge(usd)
