"""Inspect AI tasks over PushBench: ``pushbench/reposcan``, ``pushbench/dataops``,
``pushbench/dataops_public``, ``pushbench/swelite``.

``pip install "pushbench[inspect]"`` registers them through the ``inspect_ai`` entry point, so

    inspect eval pushbench/reposcan -T target=50 -T controller=stateqgp --model <provider/model>

runs. Task parameters (``-T name=value``):

* ``target``: the family's target N (RepoScan 10/25/50/100, DataOps 3/5/10/20, SWE-lite 3/5/10).
* ``instance``: ``None`` (default) = every instance of the suite ``<Family>-N<target>``, one
  sample per instance and seed, each pinned by the reset options exactly as an experiment's
  ``{suite: ..., instances: all}`` entry pins it; an instance name, a comma-separated list or a
  list = those instances; ``"suite"`` = the suite as Gymnasium runs it, the reset seed choosing
  the instance (the sample's ``instance`` is filled in once the episode has started).
* ``controller``: a controller name (default ``standard``, as ``pushbench run``).
* ``seeds``: an int, a list or a comma-separated string (default ``0``).
* ``budget``: an optional step-budget override (``1..MAX_BUDGET``).

How an episode runs (the solver :func:`pushbench_agent`): the environment is
``pushbench.make(task_id, controller=controller, budget=budget)``, reset with the sample's seed;
the system and first user message are the ones the native LLM policy sends
(:class:`pushbench.policies.llm.core.AgentCore`), and the tools are the environment's own
``tool_schemas()`` as Inspect ``ToolInfo`` (JSON-schema keywords Inspect's model does not carry,
such as ``maxItems``, are added to the parameter's description; the environment enforces every
bound either way). Every tool call in a model reply is one environment step, in order; the
environment's JSON answer is the tool message. A reply without a tool call is one step too (the
environment refuses it as ``not_object``, as for the native policy); arguments Inspect could not
parse are passed on as text and refused with one step. Calls after the episode ended get a note
and cost nothing. The loop ends when the environment terminates or truncates; context trimming,
retries and limits are Inspect's (a ``message_limit`` or ``token_limit`` that stops the sample
first leaves an unfinished record, scored as it stands).

The scorer :func:`qgp_scorer` reads only the episode record the environment wrote (verifier
verdicts in the ledger) and reports :func:`pushbench.metrics.episode_metrics` of it, key by key
(:data:`SCORE_KEYS`; booleans as 0/1, undefined values as NaN, which Inspect leaves out of the
mean as the runner's averages leave out ``None``). The record itself is
``sample.metadata["record"]`` (with ``policy`` = the Inspect model), so the numbers equal
``pushbench run``'s on the same task, instance, controller, seed and actions.
"""

from __future__ import annotations

import functools
import json
import math

import anyio
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageTool, ChatMessageUser, get_model
from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolCall, ToolInfo, ToolParam, ToolParams

from .. import metrics
from ..controllers import components_of
from ..envs.base import check_budget
from ..policies.llm.config import LLMConfig
from ..policies.llm.core import PLAIN_TEXT_NOTE, AgentCore, call_action, text_action
from ..registration import make
from ..runner.episode import serialised
from ..tasks import get_task, manifests

# Metric keys reported as Inspect metrics (every scalar of episode_metrics).
SCORE_KEYS = (
    "success",
    "valid_count",
    "steps_used",
    "submissions",
    "duplicate_submit_rate",
    "proposed_duplicate_rate",
    "precision",
    "rejected",
    "valid_per_step",
    "false_completion",
    "false_claim",
    "honest_stop",
    "premature_stop",
    "budget_exhausted",
    "reported_count_error",
    "over_claim",
    "invalid_actions",
    "verifier_recoveries",
    "blocked_completions",
    "gated_over_claim",
)
SUITE = "suite"
EPISODE_OVER_NOTE = (
    "[harness] The episode had already ended; this call was not executed and cost nothing."
)
_PROMPT_CONFIG = LLMConfig(model="inspect")  # prompts only: AgentCore reads system_prompt


# ----- samples -------------------------------------------------------------------------------
def _seeds(seeds: int | str | list) -> list[int]:
    if isinstance(seeds, str):
        seeds = [s for s in seeds.replace(" ", "").split(",") if s]
    items = seeds if isinstance(seeds, (list, tuple)) else [seeds]
    out = []
    for s in items:
        try:
            value = int(s)
        except (TypeError, ValueError):
            raise ValueError(f"seeds must be integers, got {s!r}") from None
        if isinstance(s, bool) or value < 0 or str(value) != str(s).strip():
            raise ValueError(f"seeds must be whole numbers >= 0, got {s!r}")
        out.append(value)
    if not out:
        raise ValueError("seeds is empty: give at least one seed")
    return out


def _instances(spec, instance: str | list[str] | None) -> list[str | None]:
    if instance is None:
        return list(spec.instances)
    if instance == SUITE:
        return [None]
    names = (
        [i.strip() for i in instance.split(",")] if isinstance(instance, str) else list(instance)
    )
    bad = [i for i in names if i not in spec.instances]
    if bad or not names:
        raise ValueError(
            f"{spec.task_id} has no instance(s) {bad or names}; choose from "
            f"{', '.join(spec.instances)} or {SUITE!r}"
        )
    out: list[str | None] = list(names)
    return out


def pushbench_samples(
    family: str,
    target: int,
    instance: str | list[str] | None = None,
    controller: str = "standard",
    seeds: int | str | list = 0,
    budget: int | None = None,
) -> list[Sample]:
    """One :class:`Sample` per (instance, seed) of the suite ``<Family>-N<target>``.

    Every argument is checked here (unknown target, instance or controller, bad seeds or
    budget raise ``ValueError``/``KeyError`` with the valid choices), before any model call.
    """
    manifest = manifests()[family]
    if target not in manifest.targets:
        raise ValueError(f"{family} has no target {target!r}; choose from {manifest.targets}")
    spec = get_task(f"{manifest.prefix}-N{target}")
    components_of(controller)
    if budget is not None:
        budget = check_budget(budget)
    samples = []
    for inst in _instances(spec, instance):
        for seed in _seeds(seeds):
            meta = {
                "task_id": spec.task_id,
                "family": family,
                "instance": inst,
                "pinned_instance": inst is not None,
                "target": target,
                "budget": budget or spec.budget,
                "budget_override": budget,
                "controller": controller,
                "seed": seed,
            }
            samples.append(
                Sample(
                    id=f"{spec.task_id}/{inst or SUITE}/seed{seed}",
                    input=(
                        f"PushBench {spec.task_id} ({inst or 'instance chosen by the seed'}), "
                        f"controller {controller}, seed {seed}"
                    ),
                    target=str(target),
                    metadata=meta,
                )
            )
    return samples


# ----- tools ---------------------------------------------------------------------------------
_CARRIED = set(ToolParam.model_fields)


def tool_info(schema: dict) -> ToolInfo:
    """An OpenAI function schema (``env.tool_schemas()`` item) as an Inspect :class:`ToolInfo`.

    Keywords Inspect's JSON-schema model drops (``maxItems``, ``minItems``, ...) are stated in
    the property's description instead, so the model still sees every bound.
    """
    fn = schema["function"]
    params = json.loads(json.dumps(fn["parameters"]))
    for prop in params.get("properties", {}).values():
        dropped = {k: v for k, v in prop.items() if k not in _CARRIED}
        if dropped:
            note = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items()))
            prop["description"] = f"{prop.get('description', '')} ({note})".strip()
    return ToolInfo(
        name=fn["name"], description=fn["description"], parameters=ToolParams.model_validate(params)
    )


def _action(call: ToolCall) -> str | dict:
    """The environment action for an Inspect tool call (the native policy's normalisation)."""
    if call.parse_error is not None:  # Inspect keeps no raw text: pass its message as text
        return call_action(call.function, call.parse_error)
    return call_action(call.function, json.dumps(call.arguments, ensure_ascii=True))


# ----- solver --------------------------------------------------------------------------------
@solver
def pushbench_agent() -> Solver:
    """Run one PushBench episode with the task's model (see the module docstring)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        meta = state.metadata
        # Building and resetting fill shared caches on first use: off the event loop and one at
        # a time, as the runner's asyncio driver does it.
        env = await anyio.to_thread.run_sync(
            functools.partial(
                serialised,
                make,
                meta["task_id"],
                controller=meta["controller"],
                **({"budget": meta["budget_override"]} if meta["budget_override"] else {}),
            )
        )
        model = get_model()
        record: dict | None = None
        try:
            options = (
                {env.unwrapped._instance_option: meta["instance"]}
                if meta["pinned_instance"]
                else None
            )
            obs, _ = await anyio.to_thread.run_sync(
                functools.partial(serialised, env.reset, seed=meta["seed"], options=options)
            )
            meta["instance"] = env.unwrapped.instance
            core = AgentCore(_PROMPT_CONFIG)
            system, user = core.start(obs)
            tools = [tool_info(t) for t in core.env_tools]
            state.messages = [
                ChatMessageSystem(content=system["content"]),
                ChatMessageUser(content=user["content"]),
            ]
            done = False
            while not done:
                output = await model.generate(state.messages, tools=tools)
                state.output = output
                state.messages.append(output.message)
                calls = output.message.tool_calls or []
                if not calls:
                    obs, done = await _step(env, text_action(output.message.text))
                    state.messages.append(ChatMessageUser(content=f"{PLAIN_TEXT_NOTE}\n{obs}"))
                    continue
                for call in calls:
                    if done:
                        text = EPISODE_OVER_NOTE
                    else:
                        text, done = await _step(env, _action(call))
                    state.messages.append(
                        ChatMessageTool(content=text, tool_call_id=call.id, function=call.function)
                    )
        finally:
            if getattr(env.unwrapped, "_started", False):
                record = env.get_wrapper_attr("episode_record")()
            env.close()
            if record is not None:
                record["policy"] = {
                    "name": "inspect",
                    "model": str(model),
                    "label": f"inspect:{model}",
                }
                record["simulated"] = False
                meta["record"] = record
        state.completed = True
        return state

    return solve


async def _step(env, action) -> tuple[str, bool]:
    # A SWE-lite step may run pytest for seconds: keep Inspect's event loop (and the other
    # samples) going. Each sample steps only its own environment.
    obs, _, terminated, truncated, _ = await anyio.to_thread.run_sync(env.step, action)
    return obs, bool(terminated or truncated)


# ----- scorer --------------------------------------------------------------------------------
def score_values(record: dict) -> dict[str, float]:
    """:data:`SCORE_KEYS` of ``episode_metrics(record)`` as floats (bools 0/1, None NaN)."""
    m = metrics.episode_metrics(record)
    return {k: math.nan if m[k] is None else float(m[k]) for k in SCORE_KEYS}


@scorer(
    metrics={
        k: [mean(), stderr()] if k in ("success", "valid_count") else [mean()] for k in SCORE_KEYS
    }
)
def qgp_scorer():
    """Score a sample from its episode record only (the verifier's verdicts), never from the
    model's claims: ``episode_metrics`` of the record, key by key."""

    async def score(state: TaskState, target: Target) -> Score:
        record = state.metadata.get("record")
        if record is None:
            raise RuntimeError(
                "no PushBench episode record in the sample: the episode never "
                "started (see the sample's error)"
            )
        values = score_values(record)
        return Score(
            value=values,
            answer=None if record["reported_count"] is None else str(record["reported_count"]),
            explanation=(
                f"verifier accepted {record['valid_count']}/{record['target']} in "
                f"{record['steps_used']}/{record['budget']} steps; ended by "
                f"{record['terminated_by']}"
            ),
            metadata={
                k: record[k] for k in ("task_id", "instance", "target", "seed", "terminated_by")
            },
        )

    return score


# ----- the tasks -----------------------------------------------------------------------------
def _task(family: str, target: int, instance, controller: str, seeds, budget) -> Task:
    samples = pushbench_samples(family, target, instance, controller, seeds, budget)
    return Task(
        dataset=samples,
        solver=pushbench_agent(),
        scorer=qgp_scorer(),
        metadata={
            "pushbench_family": family,
            "target": target,
            "controller": controller,
            "instance": instance,
            "seeds": _seeds(seeds),
            "budget": budget,
        },
    )


@task
def reposcan(
    target: int = 10,
    instance: str | list[str] | None = None,
    controller: str = "standard",
    seeds: int | str | list[int] = 0,
    budget: int | None = None,
) -> Task:
    """QGP-RepoScan: find and submit N distinct identifiers that satisfy a hidden predicate."""
    return _task("reposcan", target, instance, controller, seeds, budget)


@task
def dataops(
    target: int = 3,
    instance: str | list[str] | None = None,
    controller: str = "standard",
    seeds: int | str | list[int] = 0,
    budget: int | None = None,
) -> Task:
    """QGP-DataOps-lite: complete N data-cleaning work units checked by a hidden checker."""
    return _task("dataops", target, instance, controller, seeds, budget)


@task
def dataops_public(
    target: int = 3,
    instance: str | list[str] | None = None,
    controller: str = "standard",
    seeds: int | str | list[int] = 0,
    budget: int | None = None,
) -> Task:
    """QGP-DataOps-public: complete N work units on excerpts of published data sets."""
    return _task("dataops_public", target, instance, controller, seeds, budget)


@task
def swelite(
    target: int = 3,
    instance: str | list[str] | None = None,
    controller: str = "standard",
    seeds: int | str | list[int] = 0,
    budget: int | None = None,
) -> Task:
    """QGP-SWE-lite: fix N seeded bugs so the hidden tests of each unit pass."""
    return _task("swelite", target, instance, controller, seeds, budget)


__all__ = [
    "reposcan",
    "dataops",
    "dataops_public",
    "swelite",
    "pushbench_agent",
    "qgp_scorer",
    "tool_info",
    "pushbench_samples",
    "score_values",
    "SCORE_KEYS",
]
