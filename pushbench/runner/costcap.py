"""The cost cap of a sweep: which episodes may start, and what each may still spend.

Two halves (docs/llm.md "Spend limits"):

* **admission** (:class:`CostGate`, in the process that schedules): an episode starts only if
  the run folder's recorded spend, plus the worst case reserved for every episode in flight,
  plus its own worst case (:meth:`.estimate.Planner.bounds`, ``cost_high``) stays within the
  cap. The first episode refused stops all scheduling (the order of the expansion is kept, so a
  capped run is a prefix of the plan plus whatever was in flight). Executors call
  :meth:`CostGate.admit` before they start an episode and :meth:`CostGate.settle` when it
  comes back, so the reservation is replaced by the episode's real cost.
* **the live check** (:mod:`pushbench.spend`): the meter installed where episodes run counts
  every call's real cost; before each call the episode is cut (``terminated_by: "cost_cap"``)
  if the call's worst case would pass the cap. With worst cases that hold this never fires;
  it is the hard stop when an estimate was wrong (another tokenizer, ``context_tokens: null``
  bounded only by ``max_episode_tokens``).

Cut episodes are written to ``capped.jsonl`` (not ``episodes.jsonl``) and run again on resume,
so a capped run resumed with a higher cap ends with exactly the episodes of an uncapped run.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from ..errors import ExperimentError
from ..policies.identity import policy_label
from .estimate import Planner, llm_config
from .spec import EpisodeResult, EpisodeSpec


def line_cost(line: dict | None) -> float:
    """The recorded model cost of an episode line (0 without usage or price)."""
    usage = (line or {}).get("usage") or {}
    return float(usage.get("cost_usd") or 0.0)


def worst_cases(
    specs: Iterable[EpisodeSpec], allow_unpriced: bool, planner: Planner | None = None
) -> dict[str, float]:
    """Each spec's reserved worst case in USD (key -> USD); raise :class:`ExperimentError`
    for a model without a price (unless ``allow_unpriced``: it is reserved and counted at $0)
    or an unbounded worst case (``context_tokens: null`` without ``max_episode_tokens``)."""
    planner = planner or Planner()
    out: dict[str, float] = {}
    unpriced: set[str] = set()
    unbounded: set[str] = set()
    for spec in specs:
        cfg = llm_config(spec)
        if cfg is None:
            out[spec.key] = 0.0
            continue
        if cfg.price() is None:
            if not allow_unpriced:
                unpriced.add(
                    f"{policy_label(spec.policy, spec.policy_params, spec.policy_label)}"
                    f" (model {cfg.model!r})"
                )
            out[spec.key] = 0.0
            continue
        high = planner.bounds(spec).cost_high
        if high is None or math.isinf(high):
            unbounded.add(policy_label(spec.policy, spec.policy_params, spec.policy_label))
            continue
        out[spec.key] = high
    problems = []
    if unpriced:
        problems.append(
            f"a cost cap needs a price for every model; no `prices` entry for "
            f"{', '.join(sorted(unpriced))}. Add one (docs/llm.md) or pass "
            "--allow-unpriced to run them uncounted ($0)"
        )
    if unbounded:
        problems.append(
            f"{', '.join(sorted(unbounded))} run(s) with context_tokens: null, whose "
            "worst case has no bound: set max_episode_tokens in the experiment file "
            "to run them under a cost cap"
        )
    if problems:
        raise ExperimentError("; ".join(problems))
    return out


class CostGate:
    """Admission under a cap (thread-safe: the async executor admits from its loop thread)."""

    def __init__(self, cap_usd: float, spent_usd: float, worst: dict[str, float]) -> None:
        self.cap_usd = float(cap_usd)
        self.spent_usd = float(spent_usd)  # recorded spend (before and during this sweep)
        self.worst = worst
        self.reserved: dict[str, float] = {}
        self.stopped_at: str | None = None  # key of the first episode refused
        self._lock = threading.Lock()

    def admit(self, spec: EpisodeSpec) -> bool:
        """Reserve ``spec``'s worst case and return ``True``, or stop scheduling for good."""
        with self._lock:
            if self.stopped_at is not None:
                return False
            if spec.key in self.reserved:  # re-submitted (a broken pool): already reserved
                return True
            need = self.worst.get(spec.key, 0.0)
            if self.spent_usd + sum(self.reserved.values()) + need > self.cap_usd + 1e-12:
                self.stopped_at = spec.key
                return False
            self.reserved[spec.key] = need
            return True

    def settle(self, result: EpisodeResult) -> None:
        """Release ``result``'s reservation and book its real cost."""
        with self._lock:
            self.reserved.pop(result.spec.key, None)
            if result.ok:
                self.spent_usd += line_cost(result.line)

    def resume_cap(self, not_run: Iterable[EpisodeSpec]) -> float:
        """A cap that lets every episode in ``not_run`` start: recorded spend plus their worst
        cases, rounded up to the cent."""
        need = self.spent_usd + sum(self.worst.get(s.key, 0.0) for s in not_run)
        return math.ceil(need * 100 + 1e-9) / 100
