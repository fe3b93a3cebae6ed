"""The policy interface: anything with ``reset(first_observation)`` and ``act(observation)``.

Observations and actions are the environment's JSON text (actions may also be dicts).
Offline policies are deterministic given their seed: all randomness comes from
``numpy.random.default_rng(seed)`` created in :meth:`Policy.__init__`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np


class Policy:
    """Base class of offline policies; ``simulated`` marks numbers that are not from a model."""

    name: ClassVar[str] = "policy"
    simulated: ClassVar[bool] = False

    def __init__(self, seed: int | None = None, **params: Any) -> None:
        self.seed = seed
        self.params = params
        self.rng = np.random.default_rng(seed)

    def describe(self) -> dict:
        """What the episode record stores about this policy."""
        return {"name": self.name, "simulated": self.simulated, "seed": self.seed,
                "params": dict(self.params)}

    def reset(self, first_observation: str) -> None:
        raise NotImplementedError

    def act(self, observation: str) -> str | dict:
        raise NotImplementedError


def parse_observation(observation: str) -> dict:
    """Decode an observation; policies only ever see this JSON."""
    return json.loads(observation)
