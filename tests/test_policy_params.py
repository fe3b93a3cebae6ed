"""Policy parameters: each policy's own schema (``Params``), per family, and records that are true.

Unknown parameters and bad values fail with the policy and the parameter named; a parameter
that would have no effect on a family's tasks is refused for that family; what the record's
``policy.params`` says is what the agent used.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from pushbench.policies import (
    POLICIES,
    PolicyParamsError,
    UnsupportedFamily,
    make_policy,
    policy_class,
    validate_params,
)
from pushbench.policies.simulated import FAMILY_PRESETS
from pushbench.runner.episode import run_episode

DATAOPS_PRESETS, REPOSCAN_PRESETS = FAMILY_PRESETS["dataops"], FAMILY_PRESETS["reposcan"]


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_has_a_strict_params_model(name):
    try:
        cls = policy_class(name)
    except PolicyParamsError as e:  # an optional extra is missing
        pytest.skip(str(e))
    assert issubclass(cls.Params, BaseModel)
    assert cls.Params.model_config.get("extra") == "forbid"
    with pytest.raises(PolicyParamsError, match=rf"policy '{name}'.*'no_such_param'"):
        validate_params(name, {"no_such_param": 1, "model": "m"})


@pytest.mark.parametrize(
    "name, params, needle",
    [
        ("simulated-weak", {"windw": 99}, "'windw': unknown parameter"),
        ("simulated-weak", {"window": -5}, "'window'"),
        ("simulated-weak", {"window": 0}, "'window'"),
        ("simulated-weak", {"window": True}, "'window'"),
        ("simulated-weak", {"window": 4.5}, "'window'"),
        ("simulated-mid", {"misjudge": 1.5}, "'misjudge'"),
        ("simulated-mid", {"give_up": -0.1}, "'give_up'"),
        ("simulated-strong", {"stuck": -1}, "'stuck'"),
        ("random", {"stop_rate": "0.1"}, "'stop_rate'"),
        ("diligent", {"window": 4}, "'window'"),
        ("diligent-oracle", {"solve_all": "yes"}, "'solve_all'"),
    ],
)
def test_bad_params_name_policy_and_param(name, params, needle):
    with pytest.raises(PolicyParamsError, match=rf"policy '{name}'") as e:
        validate_params(name, params)
    assert needle in str(e.value)
    with pytest.raises(PolicyParamsError):  # make_policy validates too
        make_policy(name, seed=0, **params)


@pytest.mark.parametrize(
    "name, params, family, ok",
    [
        ("simulated-weak", {"window": 4}, "reposcan", True),
        ("simulated-weak", {"window": 4}, "dataops", True),
        ("simulated-weak", {"overbatch": 0.5}, "dataops", False),
        ("simulated-weak", {"skip_verify": 0.5}, "reposcan", False),
        ("simulated-weak", {"skip_verify": 0.5}, "dataops", True),
        ("simulated-weak", {}, "swelite", False),
        ("random", {"stop_rate": 0.1}, "reposcan", True),
        ("random", {"stop_rate": 0.1}, "dataops", False),
        ("random", {}, "swelite", True),
        ("diligent-oracle", {"solve_all": True}, "swelite", True),
        ("diligent-oracle", {"solve_all": True}, "reposcan", False),
    ],
)
def test_params_per_family(name, params, family, ok):
    if ok:
        assert validate_params(name, params, [family]) == params
    else:
        with pytest.raises(PolicyParamsError, match=rf"policy '{name}'.*{family}"):
            validate_params(name, params, [family])


def test_simulated_on_swelite_is_unsupported():
    with pytest.raises(UnsupportedFamily, match="no agent for swelite"):
        validate_params("simulated-mid", {}, ["swelite"])


def test_dataops_simulated_window_is_forwarded_for_real():
    """``params: {window: 4}`` used to be recorded but never reached the DataOps agent."""
    task = "DataOps-b1-N5"
    base = run_episode(task, "standard", "simulated-mid", 3)
    small = run_episode(task, "standard", "simulated-mid", 3, policy_params={"window": 2})
    assert base["policy"]["mechanisms"] == DATAOPS_PRESETS["mid"]  # what the DataOps agent used
    assert small["policy"]["mechanisms"] == {**DATAOPS_PRESETS["mid"], "window": 2}
    assert small["policy"]["params"] == {"window": 2}  # as given: the label's part
    assert small["calls"] != base["calls"]  # the override changed the behaviour


def test_dataops_agent_keeps_the_window_it_was_given():
    pol = make_policy("simulated-weak", seed=0, window=3)
    import pushbench

    env = pushbench.make("DataOps-b1-N3")
    obs, _ = env.reset(seed=0)
    pol.reset(obs)
    assert pol.agent.history.maxlen == 3 and pol.describe()["mechanisms"]["window"] == 3
    env.close()


def test_reposcan_records_keep_the_reposcan_preset():
    rec = run_episode("RepoScan-N10", "standard", "simulated-weak", 0, policy_params={"window": 6})
    assert rec["policy"]["mechanisms"] == {**REPOSCAN_PRESETS["weak"], "window": 6}


def test_random_on_dataops_records_no_params():
    rec = run_episode("DataOps-b1-N3", "standard", "random", 0)
    assert rec["policy"]["params"] == {}
    rec = run_episode("RepoScan-N10", "standard", "random", 0)
    assert rec["policy"]["params"] == {"stop_rate": 0.02}


def test_reset_refuses_a_param_without_effect_on_the_family():
    import pushbench

    pol = make_policy("simulated-weak", seed=0, overbatch=0.5)  # fine for RepoScan
    env = pushbench.make("DataOps-b1-N3")
    obs, _ = env.reset(seed=0)
    with pytest.raises(PolicyParamsError, match="'overbatch'.*dataops"):
        pol.reset(obs)
    env.close()
