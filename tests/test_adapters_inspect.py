"""The Inspect AI adapter (pushbench.adapters.inspect_tasks) with Inspect's mock model provider.

The mock model is driven by a PushBench offline policy (simulated: it reads the tool messages,
i.e. the environment's observations, as any agent would), so an Inspect run and ``run_episode``
see the same actions: the record, the scorer's values and Inspect's metrics must equal the
runner's numbers exactly. No network: every ModelOutput carries its own usage (mockllm would
otherwise count tokens with tiktoken, which downloads its encoding).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

# The extra is in `test`: under CI a missing package fails the module instead of skipping it.
if os.environ.get("CI", "").lower() == "true":
    import inspect_ai  # noqa: F401
else:
    pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessageAssistant,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.solver._task_state import sample_state
from inspect_ai.tool import ToolCall

import pushbench
from pushbench import metrics
from pushbench.adapters import inspect_tasks as it
from pushbench.policies import make_policy
from pushbench.runner.episode import run_episode

NO_USAGE = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)


def _output(calls: list[dict] | None = None, text: str = "") -> ModelOutput:
    tool_calls = [
        ToolCall(
            id=f"call_{i}",
            function=c["tool"],
            arguments={k: v for k, v in c.items() if k != "tool"},
        )
        for i, c in enumerate(calls or [])
    ]
    msg = ChatMessageAssistant(content=text, tool_calls=tool_calls or None, model="mockllm")
    return ModelOutput(
        model="mockllm/model", choices=[ChatCompletionChoice(message=msg)], usage=NO_USAGE
    )


class PolicyModel:
    """mockllm ``custom_outputs``: an offline PushBench policy plays the model, one tool call
    per reply; one policy per (sample, epoch), built and reset as ``run_episode`` does."""

    def __init__(self, policy: str = "diligent") -> None:
        self.policy = policy
        self.policies: dict = {}

    def __call__(self, input, tools, tool_choice, config) -> ModelOutput:
        state = sample_state()
        key = (state.sample_id, state.epoch)
        if key not in self.policies:
            meta = state.metadata
            env = pushbench.make(
                meta["task_id"],
                controller=meta["controller"],
                **({"budget": meta["budget_override"]} if meta["budget_override"] else {}),
            )
            opts = (
                {env.unwrapped._instance_option: meta["instance"]}
                if meta["pinned_instance"]
                else None
            )
            first, _ = env.reset(seed=meta["seed"], options=opts)
            env.close()
            pol = make_policy(self.policy, seed=meta["seed"])
            pol.reset(first)
            self.policies[key] = pol
            obs = first  # run_episode: act on the reset observation first
        else:
            obs = input[-1].text  # the tool message: the environment's answer
        action = self.policies[key].act(obs)
        return _output([json.loads(action) if isinstance(action, str) else dict(action)])


def _run(task, model_outputs, tmp_path, **kw):
    model = get_model("mockllm/model", custom_outputs=model_outputs)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none", **kw)
    assert log.status == "success", log.error
    return read_eval_log(log.location)  # what was written to disk, read back


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize(
    "family,target,instance,controller,seed",
    [
        ("reposcan", 10, "requests-assert", "stateqgp", 3),
        ("reposcan", 10, "flask-decorated", "standard", 1),
        ("dataops", 3, "b1", "unitqgp", 0),
        ("swelite", 3, "flask", "verifier_gated", 0),
    ],
)
def test_inspect_numbers_equal_the_runner(family, target, instance, controller, seed, tmp_path):
    task = getattr(it, family)(target=target, instance=instance, controller=controller, seeds=seed)
    log = _run(task, PolicyModel(), tmp_path)
    [sample] = log.samples
    rec = sample.metadata["record"]
    ref = run_episode(sample.metadata["task_id"], controller, "diligent", seed, instance=instance)
    # the same episode: every call, every verdict, every metric
    assert rec["calls"] == ref["calls"] and rec["instance"] == ref["instance"] == instance
    assert rec["metrics"] == ref["metrics"] == metrics.episode_metrics(rec)
    assert rec["steps_used"] == len(rec["calls"]) and rec["controller"]["name"] == controller
    # the sample carries task id, instance, target, seed
    meta = sample.metadata
    assert (meta["task_id"], meta["instance"], meta["target"], meta["seed"]) == (
        ref["task_id"],
        instance,
        target,
        seed,
    )
    # scorer values and Inspect's metrics equal episode_metrics of the runner's record
    values = sample.scores["qgp_scorer"].value
    expected = it.score_values(ref)
    assert set(values) == set(it.SCORE_KEYS)
    assert all(_same(values[k], expected[k]) for k in it.SCORE_KEYS)
    reported = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert all(_same(reported[k], expected[k]) for k in it.SCORE_KEYS)
    assert reported["success"] == float(ref["success"])
    assert reported["valid_count"] == ref["valid_count"]


def test_suite_mode_seed_picks_the_instance(tmp_path):
    seeds = [0, 1, 2]
    task = it.reposcan(target=10, instance="suite", controller="stateqgp", seeds=seeds)
    log = _run(task, PolicyModel(), tmp_path)
    by_seed = {s.metadata["seed"]: s for s in log.samples}
    assert sorted(by_seed) == seeds
    refs = {seed: run_episode("RepoScan-N10", "stateqgp", "diligent", seed) for seed in seeds}
    for seed, sample in by_seed.items():
        assert sample.metadata["instance"] == refs[seed]["instance"]  # filled in at reset
        assert sample.metadata["record"]["metrics"] == refs[seed]["metrics"]
    reported = {s.name: s.metrics["mean"].value for s in log.results.scores}
    for key in ("success", "valid_count", "steps_used", "precision"):
        mean = sum(float(refs[s]["metrics"][key]) for s in seeds) / len(seeds)
        assert reported[key] == pytest.approx(mean, rel=1e-12)


def test_every_instance_by_default_and_lists():
    n = len(pushbench.tasks.get_task("DataOps-N5").instances)
    assert len(it.dataops(target=5, seeds=[0, 1]).dataset) == 2 * n
    ids = [
        s.metadata["instance"]
        for s in it.reposcan(instance="requests-assert,flask-decorated").dataset
    ]
    assert ids == ["requests-assert", "flask-decorated"]
    assert [s.metadata["instance"] for s in it.swelite(instance=["flask"]).dataset] == ["flask"]


def test_plain_text_reply_costs_one_step(tmp_path):
    outputs = iter(
        [_output(text="I think I am done."), _output([{"tool": "final", "reported_count": 0}])]
    )
    log = _run(it.reposcan(instance="requests-assert"), outputs, tmp_path)
    rec = log.samples[0].metadata["record"]
    assert rec["steps_used"] == 2 and rec["calls"][0]["error_type"] == "not_object"
    assert rec["terminated_by"] == "final"
    assert log.samples[0].scores["qgp_scorer"].value["false_completion"] == 1.0


def test_calls_after_the_end_are_not_executed(tmp_path):
    outputs = iter([_output([{"tool": "final", "reported_count": 5}, {"tool": "status"}])])
    log = _run(it.reposcan(instance="requests-assert", controller="standard"), outputs, tmp_path)
    sample = log.samples[0]
    rec = sample.metadata["record"]
    assert rec["steps_used"] == 1 and rec["reported_count"] == 5
    tool_msgs = [m for m in sample.messages if m.role == "tool"]
    assert [m.function for m in tool_msgs] == ["final", "status"]
    assert tool_msgs[1].text == it.EPISODE_OVER_NOTE
    assert sample.scores["qgp_scorer"].value["false_claim"] == 0.0  # 5 < 10: an honest stop
    assert sample.scores["qgp_scorer"].value["honest_stop"] == 1.0


def test_budget_override_truncates(tmp_path):
    outputs = iter([_output([{"tool": "status"}])] * 3)
    log = _run(it.reposcan(instance="requests-assert", budget=3), outputs, tmp_path)
    rec = log.samples[0].metadata["record"]
    assert (rec["budget"], rec["steps_used"], rec["terminated_by"]) == (3, 3, "budget")
    assert log.samples[0].scores["qgp_scorer"].value["budget_exhausted"] == 1.0


def test_unparseable_arguments_are_refused_with_one_step():
    env = pushbench.make("RepoScan-N10")
    env.reset(seed=0)
    action = it._action(
        ToolCall(
            id="c",
            function="submit",
            arguments={},
            parse_error="Error parsing the following tool call arguments",
        )
    )
    obs, *_ = env.step(action)
    assert json.loads(obs)["ok"] is False and env.unwrapped.steps_used == 1


def test_tools_come_from_the_environment_schemas():
    for task_id in ("RepoScan-N10", "DataOps-N3", "SWELite-N3"):
        schemas = pushbench.make(task_id).unwrapped.tool_schemas()
        infos = [it.tool_info(s) for s in schemas]
        for s, info in zip(schemas, infos, strict=True):
            params = s["function"]["parameters"]
            assert info.name == s["function"]["name"]
            assert set(info.parameters.properties) == set(params.get("properties", {}))
            assert info.parameters.required == params.get("required", [])
            for name, prop in params.get("properties", {}).items():
                for key in ("maxItems", "minItems"):
                    if key in prop:  # not in Inspect's schema model: stated in the description
                        assert f"{key} {prop[key]}" in info.parameters.properties[name].description


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"target": 7}, "target"),
        ({"instance": "nope"}, "nope"),
        ({"controller": "stateqpg"}, "stateqgp"),
        ({"seeds": "1,x"}, "seeds"),
        ({"seeds": -1}, "seeds"),
        ({"seeds": []}, "seeds"),
        ({"budget": 0}, "budget"),
        ({"budget": "10"}, "budget"),
    ],
)
def test_bad_task_parameters_fail_before_any_model_call(kwargs, match):
    with pytest.raises((ValueError, KeyError), match=match):
        it.reposcan(**kwargs)


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=8))
def test_seed_lists_round_trip(seeds):
    assert it._seeds(",".join(map(str, seeds))) == seeds
    assert it._seeds(seeds) == seeds


@given(st.text(max_size=30))
def test_any_seed_text_parses_or_is_refused(text):
    try:
        out = it._seeds(text)
    except ValueError as e:
        assert "seed" in str(e)
    else:
        assert out and all(isinstance(s, int) and s >= 0 for s in out)


def test_tasks_register_through_the_entry_point():
    code = (
        "from inspect_ai._util.registry import registry_lookup\n"
        "print([registry_lookup('task', f'pushbench/{n}') is not None "
        "for n in ('reposcan', 'dataops', 'dataops_public', 'swelite')])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[True, True, True, True]"
