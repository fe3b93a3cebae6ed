"""A population of SIMULATED agents drawn from a committed prior over mechanism doses.

The single-dose mechanism map runs each mechanism at one strength. The prior file
(``experiments/mechanism_population.yaml``) states, per family, a dose range for every mechanism
(with the LLM behaviour it stands for), a seed and the population size; every drawn agent has
all of its family's mechanisms on at its drawn doses. The analysis of the runs is
:mod:`pushbench.analysis.population`.

Contracts:

- :func:`load_prior` validates the prior file (unknown keys, a mechanism the family's simulated
  agent does not have, a form other than exactly one of the three, an inverted range: one
  :class:`~pushbench.errors.ExperimentError` line naming the file and the key).
- :func:`draw_agents` is a pure function of the prior: family ``f`` draws from
  ``SeedSequence(seed, spawn_key=(crc32(f),))``, mechanisms in file order, floats
  rounded to 4 decimals, so the same file gives the same agents (labels ``pop-<family>-NN``).
- :func:`population_experiment` is the ordinary, validated experiment of one family (agents x
  the family's controllers x its tasks x seeds), run by the ordinary runner (resumable).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import ExperimentError
from ..policies.mechanisms.policy import FAMILY_PARAMS
from .experiment import Experiment, validate
from .yamlfile import Refused, strict_yaml

BASELINE = "standard"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dose(_Strict):
    """One mechanism's prior: exactly one of the three forms, and the behaviour it stands for."""

    uniform: tuple[float, float] | None = None
    int_uniform: tuple[int, int] | None = None
    off_or_uniform: tuple[float, float, float] | None = None
    stands_for: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_form(self):
        forms = [f for f in ("uniform", "int_uniform", "off_or_uniform") if getattr(self, f)]
        if len(forms) != 1:
            raise ValueError(
                f"give exactly one of uniform, int_uniform, off_or_uniform (got {forms or 'none'})"
            )
        pair = self.off_or_uniform[1:] if self.off_or_uniform else self.uniform or self.int_uniform
        assert pair is not None  # exactly one form is set (checked above)
        lo, hi = pair
        if not lo <= hi:
            raise ValueError(f"range [{lo}, {hi}] is inverted")
        if self.off_or_uniform and not 0.0 <= self.off_or_uniform[0] <= 1.0:
            raise ValueError("p_off must lie in [0, 1]")
        return self

    def draw(self, rng: np.random.Generator) -> float | int:
        if self.int_uniform:
            return int(rng.integers(self.int_uniform[0], self.int_uniform[1] + 1))
        if self.uniform:
            return round(float(rng.uniform(*self.uniform)), 4)
        assert self.off_or_uniform is not None  # the one form left (the validator)
        p_off, lo, hi = self.off_or_uniform
        off = rng.random() < p_off
        value = rng.uniform(lo, hi)  # drawn either way, so one dose never shifts the next one
        return 0.0 if off else round(float(value), 4)


class FamilyPrior(_Strict):
    tasks: list[str] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    controllers: list[str] = Field(min_length=2)
    prior: dict[str, Dose] = Field(min_length=1)


class Prior(_Strict):
    schema_version: Literal[1]
    seed: int = Field(ge=0)
    agents_per_family: int = Field(ge=1, le=10_000)
    families: dict[Literal["reposcan", "dataops"], FamilyPrior] = Field(min_length=1)

    @model_validator(mode="after")
    def _known(self):
        for fam, fp in self.families.items():
            unknown = sorted(set(fp.prior) - set(FAMILY_PARAMS[fam].model_fields))
            if unknown:
                raise ValueError(f"{fam}: the simulated agent has no mechanism {unknown}")
            if BASELINE not in fp.controllers:
                raise ValueError(f"{fam}: controllers must include {BASELINE!r}, the reference")
        return self


def load_prior(path: str | Path) -> Prior:
    """The validated prior of ``path`` (one clear error naming the file on any problem)."""
    try:
        data = strict_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, Refused) as err:
        raise ExperimentError(f"{path}: {err}") from None
    try:
        return Prior.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ExperimentError(f"{path}: {where}: {first['msg']}") from None


def _family_prior(prior: Prior, family: str) -> FamilyPrior:
    """``prior.families[family]`` for a family name given as text (KeyError if absent)."""
    for name, fp in prior.families.items():
        if name == family:
            return fp
    raise KeyError(family)


def draw_agents(prior: Prior, family: str) -> list[dict]:
    """The population of ``family``: experiment policy entries (see the module docstring)."""
    fp = _family_prior(prior, family)
    # keyed by the family's name, not its place in the file: reordering families keeps draws
    rng = np.random.default_rng(
        np.random.SeedSequence(prior.seed, spawn_key=(zlib.crc32(family.encode()),))
    )
    agents = []
    for i in range(prior.agents_per_family):
        params = {name: dose.draw(rng) for name, dose in fp.prior.items()}
        agents.append(
            {"name": "simulated-base", "params": params, "label": f"pop-{family}-{i:02d}"}
        )
    return agents


def population_experiment(prior: Prior, family: str, workers: int | None = None) -> Experiment:
    """The experiment of ``family``'s population (validated like any experiment file)."""
    fp = _family_prior(prior, family)
    data = {
        "schema_version": 1,
        "name": f"mechanism_population_{family}",
        "description": f"SIMULATED agents: {prior.agents_per_family} agents drawn from the "
        f"dose prior (seed {prior.seed}) x {', '.join(fp.controllers)}",
        "tasks": list(fp.tasks),
        "controllers": list(fp.controllers),
        "policies": draw_agents(prior, family),
        "seeds": list(fp.seeds),
    }
    if workers:
        data["workers"] = workers
    return validate(data, source=f"population prior ({family})")
