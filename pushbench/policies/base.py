"""The policy interface: anything with ``reset(first_observation)`` and ``act(observation)``.

Observations and actions are the environment's JSON text (actions may also be dicts).
Offline policies are deterministic given their seed: all randomness comes from
``numpy.random.default_rng(seed)`` created in :meth:`Policy.__init__`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import PushBenchError


class NoParams(BaseModel):
    """Parameter schema of a policy that takes none; base of every policy's ``Params``.

    ``extra="forbid"``: an unknown parameter is an error, never silently ignored; ``strict``:
    no coercion (``"4"`` is not a window, ``true`` is not a rate).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PolicyParamsError(PushBenchError, ValueError):
    """Parameters a policy does not take (or bad values); the message names policy and param."""


class UnsupportedFamily(PolicyParamsError):
    """The policy has no agent for a task family (e.g. no simulated SWE-lite agent)."""


def describe_validation(policy: str, err: ValidationError, where: str = "") -> str:
    """One line naming the first (at most four) invalid parameters of ``policy``'s params."""
    parts = []
    for e in err.errors()[:4]:
        loc = ".".join(str(x) for x in e["loc"]) or "params"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = (
                f"no effect {where} (not a parameter of its agent there)"
                if where
                else "unknown parameter"
            )
        parts.append(f"param {loc!r}: {msg}")
    return f"policy {policy!r}: {'; '.join(parts)}"


class Policy:
    """Base class of offline policies; ``simulated`` marks numbers that are not from a model.

    ``Params`` (a pydantic model, ``extra="forbid"``) is the schema of the keyword parameters;
    :meth:`params_for` narrows it per task family (a delegating policy takes its family
    agent's parameters there). Both are checked when an experiment is loaded
    (:func:`pushbench.policies.validate_params`) and again when a policy is built.
    """

    name: ClassVar[str] = "policy"
    simulated: bool = False  # a class default; a policy may set it per instance (Aider)
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, seed: int | None = None, **params: Any) -> None:
        try:
            type(self).Params.model_validate(params)
        except ValidationError as e:
            raise PolicyParamsError(describe_validation(self.name, e)) from None
        self.seed = seed
        self.params = params
        self.rng = np.random.default_rng(seed)

    @classmethod
    def params_for(cls, family: str) -> type[BaseModel]:
        """The parameter schema on ``family`` tasks (raise :class:`UnsupportedFamily` if none)."""
        return cls.Params

    def check_family(self, family: str) -> None:
        """Raise :class:`PolicyParamsError` unless every given parameter acts on ``family``."""
        try:
            type(self).params_for(family).model_validate(self.given_params())
        except ValidationError as e:
            raise PolicyParamsError(
                describe_validation(self.name, e, f"on {family} tasks")
            ) from None

    def given_params(self) -> dict:
        """The parameters as the caller gave them (``params`` may add resolved defaults)."""
        return dict(self.params)

    def describe(self) -> dict:
        """What the episode record stores about this policy."""
        return {
            "name": self.name,
            "simulated": self.simulated,
            "seed": self.seed,
            "params": dict(self.params),
        }

    def reset(self, first_observation: str) -> None:
        """Start an episode from the environment's first observation (JSON text)."""
        raise NotImplementedError

    def act(self, observation: str) -> str | dict:
        """The next tool call for ``observation``: one JSON object, as text or as a dict."""
        raise NotImplementedError


class FamilyAgent(Policy):
    """The agent of one task family that a named offline policy (:mod:`.offline`) plays there.

    It shares that policy's generator (``rng``) instead of seeding its own, so one seed drives
    the whole episode, and validates its keyword parameters against ``Params`` like any policy
    (an unknown one is an error, never silently dropped).
    """

    def __init__(self, rng: np.random.Generator | None = None, **params: Any) -> None:
        super().__init__(seed=None, **params)
        self.rng = rng if rng is not None else np.random.default_rng()


def parse_observation(observation: str) -> dict:
    """Decode an observation; policies only ever see this JSON."""
    return json.loads(observation)
