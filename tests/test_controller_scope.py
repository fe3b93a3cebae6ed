"""Controller scope: a composition whose component does nothing on a family is refused (at
``make``, at controller construction and at experiment validation), naming the component and
the family, unless the composition is declared family-independent; the record lists only the
components that ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import pushbench
from pushbench.controllers import Controller, catalogue
from pushbench.controllers.catalogue import Composition, idle_components
from pushbench.controllers.registry import load_all
from pushbench.errors import ControllerScopeError, ExperimentError, PushBenchError
from pushbench.runner.experiment import load_experiment, validate

ROOT = Path(__file__).resolve().parent.parent
TASKS = {
    "reposcan": "RepoScan-requests-docstring-N10",
    "dataops": "DataOps-b0-N5",
    "swelite": "SWELite-requests-N3",
}
CASES = [(name, family) for name in catalogue() for family in TASKS]


@pytest.mark.parametrize("name, family", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_every_controller_composes_or_names_the_idle_component(name, family):
    comp = catalogue()[name]
    idle = idle_components(comp.components, family)
    if idle and comp.family_independent is None:
        with pytest.raises(ControllerScopeError) as err:
            pushbench.make(TASKS[family], controller=name)
        msg = str(err.value)
        assert "\n" not in msg and f"component {idle[0]!r}" in msg and family in msg
        assert f"{name!r}" in msg
        return
    env = pushbench.make(TASKS[family], controller=name)
    try:
        env.reset(seed=0)
        env.step({"tool": "status"})
        ran = env.get_wrapper_attr("episode_record")()["controller"]["components"]
        assert set(ran) == set(comp.components) - set(idle)
        for c in ran:  # every listed component serves the family
            fams = load_all()[c].families
            assert fams is None or family in fams
    finally:
        env.close()


def test_the_issue_cases_are_refused():
    """The two silent degradations the issue names: UNITQGP on RepoScan is only the gate,
    STATEQGP on DataOps a count block plus the gate."""
    with pytest.raises(ControllerScopeError, match="component 'unit_tracker'.*unit_redirect"):
        pushbench.make(TASKS["reposcan"], controller="unitqgp")
    with pytest.raises(ControllerScopeError, match="'stateqgp' cannot run on dataops"):
        pushbench.make(TASKS["dataops"], controller="stateqgp")
    with pytest.raises(ControllerScopeError, match="component 'unit_redirect'"):
        pushbench.make(TASKS["reposcan"], controller="only_unit_redirect_gated")
    # Family-wide components compose everywhere.
    for family in ("reposcan", "dataops"):
        pushbench.make(TASKS[family], controller="verifier_gated").close()
        pushbench.make(TASKS[family], controller="only_progress_state").close()
    assert issubclass(ControllerScopeError, PushBenchError)


def test_a_family_independent_composition_runs_what_serves_and_records_only_that():
    env = pushbench.make(TASKS["reposcan"])
    with pytest.raises(ControllerScopeError):
        Controller(env, "mixed", ("unit_tracker", "completion_gate"))
    ctl = Controller(env, "mixed", ("unit_tracker", "completion_gate"), family_independent=True)
    obs, _ = ctl.reset(seed=0)
    assert "progress" not in json.loads(obs)  # the tracker did not run
    obs, *_ = ctl.step({"tool": "final", "reported_count": 1})
    assert json.loads(obs)["controller"]["interventions"] == ["completion_gate"]
    assert ctl.episode_record()["controller"]["components"] == ["completion_gate"]
    ctl.close()


def test_family_independent_needs_a_reason():
    base = {"description": "d", "components": ["completion_gate"]}
    assert Composition.model_validate(base).family_independent is None
    ok = Composition.model_validate({**base, "family_independent": "the gate is all we compare"})
    assert ok.family_independent
    for bad in (True, "", "short"):
        with pytest.raises(ValueError):
            Composition.model_validate({**base, "family_independent": bad})


@pytest.mark.parametrize(
    "tasks, controllers, needle",
    [
        (["RepoScan-requests-docstring-N10"], ["standard", "unitqgp"], "component 'unit_tracker'"),
        (["DataOps-N3"], ["stateqgp_nogate"], "component 'dedupe'"),
        (
            ["RepoScan-requests-docstring-N10", "DataOps-b0-N3"],
            ["verifier_gated", "only_dedupe"],
            "'only_dedupe' cannot run on dataops",
        ),
    ],
)
def test_experiment_validation_refuses_out_of_scope_controllers(tasks, controllers, needle):
    data = {
        "schema_version": 1,
        "name": "t",
        "tasks": tasks,
        "controllers": controllers,
        "policies": ["random"],
        "seeds": [0],
    }
    with pytest.raises(ExperimentError, match=needle):
        validate(data)


def _experiment_files():
    for f in sorted((ROOT / "experiments").glob("*.yaml")):
        raw = yaml.safe_load(f.read_text())
        if isinstance(raw, dict) and "controllers" in raw:
            yield f


@pytest.mark.parametrize("path", list(_experiment_files()), ids=lambda p: p.name)
def test_shipped_experiments_validate(path):
    exp = load_experiment(path)
    assert exp.controllers
