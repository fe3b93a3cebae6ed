"""Text spaces for JSON tool calls and JSON observations.

Observations are ASCII-escaped JSON, so the observation charset is printable ASCII; actions are
JSON text too. Gymnasium's default ``Text`` charset is alphanumeric only, hence the wide charset.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

PRINTABLE_ASCII = "".join(chr(c) for c in range(32, 127))
MAX_ACTION_BYTES = 64 * 1024
MAX_OBSERVATION_CHARS = 256 * 1024


def observation_space() -> spaces.Text:
    return spaces.Text(max_length=MAX_OBSERVATION_CHARS, min_length=2, charset=PRINTABLE_ASCII)


class ToolCallSpace(spaces.Text):
    """Text space of JSON tool calls whose :meth:`sample` returns a random well-formed call.

    ``sampler(rng) -> dict`` builds the call from the space's own seeded generator, so
    ``space.seed(s)`` makes the samples reproducible. ``contains`` accepts any printable-ASCII
    string up to the action size limit (the environment itself judges well-formedness).
    """

    def __init__(
        self,
        sampler: Callable[[np.random.Generator], dict[str, Any]],
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(
            max_length=MAX_ACTION_BYTES, min_length=2, charset=PRINTABLE_ASCII, seed=seed
        )
        self._sampler = sampler

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return json.dumps(self._sampler(self.np_random), ensure_ascii=True)


def random_word(rng: np.random.Generator, vocabulary: list[str]) -> str:
    return vocabulary[int(rng.integers(len(vocabulary)))]


LETTERS = string.ascii_lowercase
