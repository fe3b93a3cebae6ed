"""The full prompt of one black-box episode: the condition's prompt plus the first observation.

In-process agents start from the environment's reset observation (objective, target, budget,
tool schemas); a black-box agent gets the same JSON in its prompt, so both start from the same
information, and the policy-backed model server (:mod:`pushbench.modelserver`) can reset its
policy from the conversation alone. The observation is public (no verdict, nothing hidden).
"""

from __future__ import annotations

from typing import Any

from .prompts import prompt_text

FIRST_OBSERVATION_HEADER = (
    "The episode's first observation (the JSON an in-process agent gets from reset):"
)


def first_observation(
    task: str,
    seed: int = 0,
    controller: str | None = "standard",
    instance: str | None = None,
    budget: int | None = None,
) -> str:
    """The reset observation text of the episode ``pushbench mcp`` serves with these options."""
    from .. import make
    from ..envs.base import base_env

    kwargs: dict[str, Any] = {"budget": budget} if budget is not None else {}
    env = (
        make(task, **kwargs)
        if controller in (None, "none")
        else make(task, controller=controller, **kwargs)
    )
    try:
        options = {base_env(env)._instance_option: instance} if instance else None
        obs, _ = env.reset(seed=seed, options=options)
    finally:
        env.close()
    return obs


def episode_prompt(
    condition: str,
    task: str,
    seed: int = 0,
    controller: str | None = "standard",
    instance: str | None = None,
    budget: int | None = None,
) -> str:
    """``prompt_text(condition)`` followed by the episode's first observation in a JSON block."""
    obs = first_observation(task, seed, controller, instance, budget)
    return (
        prompt_text(condition)
        + "\n\n"
        + FIRST_OBSERVATION_HEADER
        + "\n\n```json\n"
        + obs
        + "\n```\n"
    )
