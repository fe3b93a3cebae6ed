"""The component-effect population: prior validation, seeded draws, effects and the script."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pushbench.analysis.population import agent_effects, effect_summary
from pushbench.errors import ExperimentError
from pushbench.policies.mechanisms.policy import FAMILY_PARAMS
from pushbench.runner.population import draw_agents, load_prior, population_experiment

ROOT = Path(__file__).resolve().parents[1]
PRIOR = ROOT / "experiments" / "mechanism_population.yaml"


def _write(tmp_path: Path, data) -> Path:
    p = tmp_path / "prior.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _shipped() -> dict:
    return yaml.safe_load(PRIOR.read_text())


def test_the_shipped_prior_is_valid_and_states_every_mechanism_it_draws():
    prior = load_prior(PRIOR)
    assert prior.agents_per_family >= 40
    for fam, fp in prior.families.items():
        assert set(fp.prior) <= set(FAMILY_PARAMS[fam].model_fields)
        assert all(d.stands_for.strip() for d in fp.prior.values())
        exp = population_experiment(prior, fam)  # validates like an experiment file
        assert len(exp.policies) == prior.agents_per_family


def test_draws_are_seeded_in_range_and_independent_of_family_order(tmp_path):
    prior = load_prior(PRIOR)
    data = _shipped()
    data["families"] = dict(reversed(list(data["families"].items())))
    reordered = load_prior(_write(tmp_path, data))
    for fam, fp in prior.families.items():
        agents = draw_agents(prior, fam)
        assert agents == draw_agents(prior, fam) == draw_agents(reordered, fam)
        assert len({json.dumps(a["params"], sort_keys=True) for a in agents}) == len(agents)
        for a in agents:
            for name, value in a["params"].items():
                dose = fp.prior[name]
                if dose.int_uniform:
                    assert isinstance(value, int)
                    assert dose.int_uniform[0] <= value <= dose.int_uniform[1]
                elif dose.uniform:
                    assert dose.uniform[0] <= value <= dose.uniform[1]
                else:
                    _, lo, hi = dose.off_or_uniform
                    assert value == 0.0 or lo <= value <= hi
    data["seed"] += 1
    other = load_prior(_write(tmp_path, data))
    assert draw_agents(other, "reposcan") != draw_agents(prior, "reposcan")


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda d: d["families"]["reposcan"]["prior"].update(
                stuck={"uniform": [0, 1], "stands_for": "x"}
            ),
            "no mechanism ['stuck']",
        ),
        (
            lambda d: d["families"]["dataops"]["prior"]["drift"].update(int_uniform=[1, 2]),
            "exactly one",
        ),
        (
            lambda d: d["families"]["dataops"]["prior"]["drift"].update(uniform=[0.5, 0.1]),
            "inverted",
        ),
        (lambda d: d["families"]["dataops"]["controllers"].remove("standard"), "'standard'"),
        (lambda d: d.update(surprise=1), "surprise"),
        (lambda d: d["families"].update(swelite=d["families"]["dataops"]), "swelite"),
    ],
)
def test_a_bad_prior_is_one_clear_error_naming_the_file(tmp_path, edit, words):
    data = _shipped()
    edit(data)
    path = _write(tmp_path, data)
    with pytest.raises(ExperimentError) as err:
        load_prior(path)
    msg = str(err.value)
    assert str(path) in msg and words in msg and "\n" not in msg


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 50)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
)
_docs = st.recursive(
    _scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(doc=_docs, mutate=st.booleans())
def test_any_document_loads_or_fails_with_an_experiment_error(tmp_path_factory, doc, mutate):
    data = _shipped()
    if mutate:  # a plausible file with one part replaced by arbitrary data
        data["families"]["reposcan"]["prior"]["window"] = doc
    else:
        data = doc
    path = tmp_path_factory.mktemp("prior") / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_prior(path)
    except ExperimentError as err:
        assert "\n" not in str(err)


def test_summary_directions_and_shares_by_hand():
    eff = pd.DataFrame(
        {
            "family": "dataops",
            "controller": "c",
            "simulated": True,
            "cells": 1,
            "metric": ["success"] * 4 + ["steps_used"] * 4,
            "policy": list("abcd") * 2,
            "effect": [10.0, 0.0, -5.0, 20.0, -3.0, 0.0, 2.0, -1.0],
        }
    )
    s = effect_summary(eff).set_index("metric")
    assert s.loc["success", ["helped", "harmed", "unchanged"]].tolist() == [0.5, 0.25, 0.25]
    # fewer steps is better: -3 and -1 help, +2 harms
    assert s.loc["steps_used", ["helped", "harmed", "unchanged"]].tolist() == [0.5, 0.25, 0.25]
    assert s.loc["success", "median"] == 5.0 and s.loc["success", "agents"] == 4


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "mechanism_population", ROOT / "experiments" / "mechanism_population.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _small(tmp_path: Path) -> tuple[dict, Path]:
    data = _shipped()
    data["agents_per_family"] = 3
    data["families"]["reposcan"]["tasks"] = ["RepoScan-requests-docstring-N10"]
    data["families"]["dataops"]["tasks"] = ["DataOps-b0-N3", "DataOps-b1-N3"]
    return data, _write(tmp_path, data)


def test_the_script_runs_a_small_population_and_its_effects_recompute(tmp_path):
    data, prior = _small(tmp_path)
    out = tmp_path / "out"
    _load_script().main(["--prior", str(prior), "--out", str(out), "--workers", "1"])
    effects = pd.read_csv(out / "population_effects.csv")
    summary = pd.read_csv(out / "population_summary.csv")
    for name in ("population_success.png", "population_steps_used.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "SIMULATED" in (out / "population_summary.md").read_text()
    assert summary["simulated"].all() and effects["simulated"].all()
    for fam, fp in data["families"].items():
        got = set(summary.loc[summary["family"] == fam, "controller"])
        assert got == set(fp["controllers"]) - {"standard"}
    shares = summary[["helped", "harmed", "unchanged"]].sum(axis=1)
    assert shares.round(12).eq(1.0).all()
    # recompute success effects straight from the episode lines, independently of the module
    rows = []
    for fam in data["families"]:
        for line in (out / fam / "episodes.jsonl").read_text().splitlines():
            ep = json.loads(line)
            rows.append(
                {
                    "family": fam,
                    "policy": ep["policy"]["label"],
                    "controller": ep["controller"]["name"],
                    "task": ep["task_id"],
                    "success": float(ep["metrics"]["success"]),
                }
            )
    df = pd.DataFrame(rows)
    base = df[df["controller"] == "standard"].set_index(["family", "policy", "task"])["success"]
    for r in effects[effects["metric"] == "success"].itertuples():
        mine = df[
            (df["family"] == r.family)
            & (df["policy"] == r.policy)
            & (df["controller"] == r.controller)
        ].set_index(["family", "policy", "task"])["success"]
        assert r.effect == pytest.approx(100 * (mine - base.loc[mine.index]).mean())


@pytest.mark.slow
def test_the_population_run_is_deterministic_across_worker_counts(tmp_path):
    _, prior = _small(tmp_path)
    outs = [tmp_path / "one", tmp_path / "two"]
    for out, workers in zip(outs, ("1", "2"), strict=True):
        _load_script().main(["--prior", str(prior), "--out", str(out), "--workers", workers])
    for name in ("population_agents.csv", "population_effects.csv", "population_summary.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()


def test_no_episodes_give_empty_effects():
    assert agent_effects([]).empty
