"""Roll out an OpenAI-compatible chat model (or a scripted policy) on a PushBench OpenEnv session.

:func:`llm_rollout` is what an RL trainer's rollout function does with the environment: reset
with (task, seed), send the model the same system/user messages and tools the native LLM policy
sends (:class:`pushbench.policies.llm.core.AgentCore`), turn every tool call of every reply into
one :class:`~.openenv_env.PushBenchAction` (one environment step), and collect per-step rewards
until the episode ends; the result holds the conversation (the trainable completion), the
rewards and the episode record. :func:`policy_rollout` does the same with an offline PushBench
policy (simulated: for tests and examples without a model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..policies import make_policy
from ..policies.llm.config import LLMConfig
from ..policies.llm.core import PLAIN_TEXT_NOTE, AgentCore, Stats
from .openenv_env import PushBenchAction


@dataclass
class Rollout:
    """One episode: the messages, each step's reward and parts, and the episode record."""

    messages: list[dict] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    reward_parts: list[dict] = field(default_factory=list)
    record: dict | None = None

    @property
    def total(self) -> float:
        """The undiscounted return: the sum of the step rewards."""
        return float(sum(self.rewards))


def _reset(env, task: str, seed: int, **reset_kwargs: Any):
    result = env.reset(
        task=task, seed=seed, **{k: v for k, v in reset_kwargs.items() if v is not None}
    )
    return result.observation


def _take(env, action: PushBenchAction, out: Rollout):
    result = env.step(action)
    obs = result.observation
    out.rewards.append(float(result.reward or 0.0))
    out.reward_parts.append(dict(obs.reward_parts))
    if obs.done and obs.record is not None:
        out.record = obs.record
    return obs


def llm_rollout(
    env,
    chat,
    model: str,
    task: str,
    seed: int,
    *,
    max_tokens: int = 256,
    temperature: float = 1.0,
    sampling_seed: int | None = None,
    context_tokens: int | None = None,
    tool_choice: str | None = "auto",
    **reset_kwargs: Any,
) -> Rollout:
    """One episode of ``model`` (an ``openai.OpenAI`` client ``chat``) on the sync OpenEnv
    client ``env``. ``reset_kwargs``: controller, instance, budget, reward_weights.

    ``tool_choice`` is sent explicitly (``None`` leaves it out): ``"auto"`` is the OpenAI
    default when tools are given, but some servers (llama-cpp-python's
    ``chatml-function-calling``) offer the tools to the model only when it is set.

    ``context_tokens``: trim each request to about this many tokens with the native policy's
    context view (oldest turns first); ``Rollout.messages`` keeps the whole conversation.
    """
    obs = _reset(env, task, seed, **reset_kwargs)
    core = AgentCore(
        LLMConfig(model=model, **({"context_tokens": context_tokens} if context_tokens else {}))
    )
    stats = Stats("openenv")
    out = Rollout(messages=core.start(obs.text))
    tools = core.tools()
    while not obs.done:
        request = core.view(out.messages, stats)[0] if context_tokens else out.messages
        resp = chat.chat.completions.create(
            model=model,
            messages=request,
            tools=tools,
            max_tokens=max_tokens,
            temperature=temperature,
            **({"seed": sampling_seed} if sampling_seed is not None else {}),
            **({"tool_choice": tool_choice} if tool_choice else {}),
        )
        msg = resp.choices[0].message
        calls = list(msg.tool_calls or [])
        out.messages.append(
            {
                "role": "assistant",
                "content": msg.content or "",
                **({"tool_calls": [c.model_dump() for c in calls]} if calls else {}),
            }
        )
        if not calls:
            obs = _take(env, PushBenchAction(text=msg.content or ""), out)
            out.messages.append({"role": "user", "content": f"{PLAIN_TEXT_NOTE}\n{obs.text}"})
            continue
        for c in calls:
            if obs.done:  # the episode ended mid-reply: later calls are not executed
                out.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": c.id,
                        "content": "[harness] The episode had already ended.",
                    }
                )
                continue
            obs = _take(
                env,
                PushBenchAction(tool=c.function.name, arguments=c.function.arguments or ""),
                out,
            )
            out.messages.append({"role": "tool", "tool_call_id": c.id, "content": obs.text})
    return out


def policy_rollout(
    env, policy: str, task: str, seed: int, *, policy_seed: int | None = None, **reset_kwargs: Any
) -> Rollout:
    """One episode of the offline PushBench ``policy`` (simulated), the environment reset with
    ``seed`` and the policy seeded with ``policy_seed`` (default: ``seed``, as the runner)."""
    obs = _reset(env, task, seed, **reset_kwargs)
    pol = make_policy(policy, seed=seed if policy_seed is None else policy_seed)
    pol.reset(obs.text)
    out = Rollout()
    while not obs.done:
        action = pol.act(obs.text)
        call = json.loads(action) if isinstance(action, str) else dict(action)
        tool = call.pop("tool")
        obs = _take(env, PushBenchAction(tool=tool, arguments=call), out)
    return out


__all__ = ["Rollout", "llm_rollout", "policy_rollout"]
