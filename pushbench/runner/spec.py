"""What one episode is (:class:`EpisodeSpec`) and what comes back from running it
(:class:`EpisodeResult`): the values that travel between the experiment, the executors and the
run folder. Nothing here imports the rest of the runner, so every runner module can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EpisodeSpec(_Strict):
    """Everything a worker needs to run one episode (picklable, JSON-able)."""

    task_id: str
    instance: str | None = None
    controller: str
    policy: str
    policy_params: dict[str, Any] = Field(default_factory=dict)
    policy_label: str | None = None
    seed: int
    budget: int | None = None
    key: str
    # the experiment's per-episode token cap (pushbench/spend.py); not part of the key
    max_episode_tokens: int | None = None


@dataclass(frozen=True)
class EpisodeResult:
    """What comes back from running one spec: ``line`` + ``trace_gz``, or ``error``."""

    spec: EpisodeSpec
    line: dict | None = None
    trace_gz: bytes | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
