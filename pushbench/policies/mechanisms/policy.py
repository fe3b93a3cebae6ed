"""SIMULATED agents as policies: a competent base plus named mechanisms (numbers labelled
simulated wherever they appear).

``simulated-base`` is the competent base agent of each family (:mod:`.reposcan`,
:mod:`.dataops`) with no mechanism on; each keyword parameter switches one mechanism on with
that strength (``{"window": 8}``: context-window loss with 8 observations in view). The
presets ``simulated-weak`` / ``-mid`` / ``-strong`` are documented combinations of mechanisms
(:data:`PRESETS`, per family); keyword parameters override a preset's values, and a value of
``None`` switches that mechanism off. The record's ``params`` are the parameters as given (so
the label is the preset name plus what was changed: ``simulated-base[window=4]``); its
``mechanisms`` field holds every mechanism in effect on the episode's family.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, create_model

from ..base import NoParams, Policy, UnsupportedFamily
from . import dataops as _dataops  # noqa: F401  (registers the DataOps mechanisms)
from . import reading
from . import reposcan as _reposcan  # noqa: F401  (registers the RepoScan mechanisms)
from .core import REGISTRY, Hooks
from .dataops import DataOpsAgent
from .reposcan import RepoScanAgent

FAMILIES = ("reposcan", "dataops", "dataops_public")

# Chosen before the mechanism matrix was run (see experiments/mechanism_matrix.yaml); the
# RepoScan values of window, drift (1 - attention), overbatch, misjudge (1 - accuracy) and
# give_up, and the DataOps values of window, skip_verify, forget_submit, drift, stuck,
# answer_error (1 - accuracy), notes_loss (1 - notes) and give_up are the earlier presets'.
PRESETS: dict[str, dict[str, dict[str, float | int]]] = {
    "reposcan": {
        "weak": dict(
            window=4,
            drift=0.4,
            misread=0.1,
            give_up=0.006,
            insist=0.5,
            overbatch=0.3,
            repeat_search=0.2,
            misjudge=0.25,
            fabricate=0.1,
        ),
        "mid": dict(
            window=8,
            drift=0.2,
            misread=0.05,
            give_up=0.003,
            insist=0.25,
            overbatch=0.2,
            repeat_search=0.1,
            misjudge=0.15,
            fabricate=0.05,
        ),
        "strong": dict(
            window=16,
            drift=0.07,
            misread=0.02,
            give_up=0.0015,
            insist=0.1,
            overbatch=0.1,
            repeat_search=0.05,
            misjudge=0.08,
            fabricate=0.02,
        ),
    },
    "dataops": {
        "weak": dict(
            window=8,
            drift=0.5,
            misread=0.1,
            give_up=0.01,
            insist=0.5,
            skip_verify=0.4,
            forget_submit=0.3,
            stuck=0.35,
            answer_error=0.3,
            notes_loss=0.8,
        ),
        "mid": dict(
            window=12,
            drift=0.35,
            misread=0.05,
            give_up=0.006,
            insist=0.25,
            skip_verify=0.25,
            forget_submit=0.2,
            stuck=0.25,
            answer_error=0.2,
            notes_loss=0.55,
        ),
        "strong": dict(
            window=20,
            drift=0.2,
            misread=0.02,
            give_up=0.003,
            insist=0.1,
            skip_verify=0.1,
            forget_submit=0.1,
            stuck=0.15,
            answer_error=0.1,
            notes_loss=0.25,
        ),
    },
}
PRESETS["dataops_public"] = PRESETS["dataops"]  # one agent model for both DataOps families


def _field(cls):
    doc = (cls.__doc__ or "").strip().splitlines()[0]
    if cls.integer:
        return (int | None, Field(None, ge=int(cls.minimum), le=10_000, description=doc))
    return (Annotated[float, Field(ge=0.0, le=1.0)] | None, Field(None, description=doc))


def _params_model(name: str, families: tuple[str, ...]) -> type[NoParams]:
    fields = {
        k: _field(c) for k, c in sorted(REGISTRY.items()) if any(f in c.families for f in families)
    }
    return create_model(name, __base__=NoParams, **fields)


Params = _params_model("SimulatedParams", FAMILIES)
FAMILY_PARAMS = {f: _params_model(f"Simulated{f.title()}Params", (f,)) for f in FAMILIES}


def mechanisms_for(family: str, params: dict, seed: int | None) -> Hooks:
    """The mechanisms switched on by ``params`` (None values are off) on ``family``."""
    ms = [
        REGISTRY[k](v, seed)
        for k, v in sorted(params.items())
        if v is not None and family in REGISTRY[k].families
    ]
    return Hooks(ms)


class SimulatedPolicy(Policy):
    """Competent base + mechanisms; ``preset`` picks a documented combination (None: none)."""

    name: ClassVar[str] = "simulated-base"
    simulated = True
    preset: ClassVar[str | None] = None
    Params = Params

    def __init__(self, seed=None, **overrides) -> None:
        super().__init__(seed=seed, **overrides)
        self.overrides = dict(overrides)
        self.mechanisms: dict = {}

    def _in_effect(self, family: str) -> dict:
        preset = PRESETS[family][self.preset] if self.preset else {}
        keys = FAMILY_PARAMS[family].model_fields
        merged = {**preset, **{k: v for k, v in self.overrides.items() if k in keys}}
        return {k: v for k, v in sorted(merged.items()) if v is not None}

    @classmethod
    def params_for(cls, family: str):
        if family not in FAMILY_PARAMS:
            raise UnsupportedFamily(
                f"policy {cls.name!r} has no agent for {family} tasks (there is no simulated "
                "agent for that family; use diligent, random or an LLM policy)"
            )
        return FAMILY_PARAMS[family]

    def given_params(self) -> dict:
        return dict(self.overrides)

    def describe(self) -> dict:
        return {**super().describe(), "preset": self.preset, "mechanisms": dict(self.mechanisms)}

    def reset(self, first_observation: str) -> None:
        family = reading.decode(first_observation)["result"].get("family", "reposcan")
        self.check_family(family)
        self.mechanisms = self._in_effect(family)
        hooks = mechanisms_for(family, self.mechanisms, self.seed)
        self.agent = RepoScanAgent(hooks) if family == "reposcan" else DataOpsAgent(hooks)
        self.agent.reset(first_observation)

    def act(self, observation: str):
        return self.agent.act(observation)


class SimulatedWeak(SimulatedPolicy):
    name = "simulated-weak"
    preset = "weak"


class SimulatedMid(SimulatedPolicy):
    name = "simulated-mid"
    preset = "mid"


class SimulatedStrong(SimulatedPolicy):
    name = "simulated-strong"
    preset = "strong"
