"""PushBench as an OpenEnv environment (``pip install "pushbench[openenv]"``), for LLM RL trainers.

OpenEnv serves a Gymnasium-style ``reset`` / ``step`` / ``state`` API over HTTP and a WebSocket
session per client; TRL's GRPO trainer and other RL stacks speak it. Start a server with

    python -m pushbench.adapters.openenv_env --port 8000 --max-concurrent 8

and talk to it with :class:`PushBenchClient` (``PushBenchClient(base_url).sync()`` for blocking
code). Why OpenEnv and not ``verifiers``: ``verifiers`` 0.4.0 requires ``openai<3``, which
cannot be installed with the ``llm`` extra (``openai>=3,<4``); ``openenv-core`` 0.3.0 resolves
and installs beside every test extra.

Contract:

* ``reset(task=..., seed=..., controller="standard", instance=None, budget=None,
  reward_weights=None)`` builds ``pushbench.make(task, controller=controller, budget=budget)``
  (the controller wraps exactly as in the runner) and resets it with ``seed`` (and the instance
  pinned through the reset options when given). The observation carries the environment's JSON
  text, the tool schemas (OpenAI function format) and the verifier-visible counts.
* ``step(PushBenchAction(tool=name, arguments=...))`` is one environment step. ``arguments`` is
  a dict or the model's raw argument text; both go through the native LLM policy's
  normalisation (:func:`pushbench.policies.llm.core.call_action`), so unparseable text is
  refused by the environment with one step. ``PushBenchAction(text=...)`` is a reply with no
  tool call: refused as ``not_object``, one step.
* Rewards come from verifier state only (``info["qgp"]``, never the agent's claims), weighted by
  :class:`RewardWeights`: per step ``accepted * (newly accepted units) - duplicate * (new
  duplicate verdicts)``; on the final step also ``success * [valid_count >= target] +
  verified_fraction * min(valid_count / target, 1)``. The parts are in ``reward_parts``.
  :func:`episode_return` recomputes the episode's return from the record alone.
* When the episode ends (``done``), the observation carries the episode record (``record``),
  the same record ``run_episode`` writes (policy fields aside), metrics included.
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import TYPE_CHECKING, Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .. import metrics
from ..envs.base import base_env
from ..policies.llm.core import call_action, text_action
from ..registration import make

if TYPE_CHECKING:
    import gymnasium as gym


class RewardWeights(BaseModel):
    """Weights of the reward parts (all from verifier state; see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    accepted: float = Field(1.0, description="per newly accepted unit, every step")
    success: float = Field(0.0, description="at the end: 1 if valid_count >= target")
    verified_fraction: float = Field(0.0, description="at the end: min(valid_count/target, 1)")
    duplicate: float = Field(0.0, ge=0.0, description="penalty per duplicate verdict")


class PushBenchAction(Action):
    """One agent action: a tool call (``tool`` + ``arguments``) or a plain-text ``text`` reply."""

    tool: str | None = Field(None, max_length=200, description="the function name called")
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="arguments: an object or raw JSON text"
    )
    text: str | None = Field(None, description="a reply without a tool call")

    @model_validator(mode="after")
    def _one_kind(self) -> PushBenchAction:
        if (self.tool is None) == (self.text is None):
            raise ValueError("give exactly one of tool (a tool call) or text (a plain reply)")
        return self

    def env_action(self) -> str | dict:
        """The environment action, normalised as the native LLM policy does it."""
        if self.text is not None:
            return text_action(self.text)
        raw = (
            self.arguments
            if isinstance(self.arguments, str)
            else json.dumps(self.arguments, ensure_ascii=True)
        )
        assert self.tool is not None  # the model's validator: a text or a tool call
        return call_action(self.tool, raw)


class PushBenchObservation(Observation):
    """The environment's answer plus verifier-visible progress (``done``/``reward`` inherited)."""

    text: str = Field("", description="the environment's observation (ASCII JSON)")
    tools: list[dict] = Field(default_factory=list, description="tool schemas (on reset)")
    qgp: dict[str, Any] = Field(default_factory=dict, description="verifier-visible counts")
    reward_parts: dict[str, float] = Field(default_factory=dict)
    record: dict[str, Any] | None = Field(None, description="the episode record, when done")


class PushBenchState(State):
    """The session's state as OpenEnv reports it: task, instance, seed, controller, progress."""

    task_id: str | None = None
    instance: str | None = None
    seed: int | None = None
    controller: str | None = None
    valid_count: int = 0
    target: int = 0
    done: bool = False


class PushBenchEnvironment(Environment[PushBenchAction, PushBenchObservation, PushBenchState]):
    """One PushBench episode per session (every WebSocket session gets its own instance)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._env: gym.Env | None = None
        self._weights = RewardWeights()
        self._state = PushBenchState()
        self._last_qgp: dict = {}

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: str = "RepoScan-N10",
        controller: str = "standard",
        instance: str | None = None,
        budget: int | None = None,
        reward_weights: dict | None = None,
        **kwargs: Any,
    ) -> PushBenchObservation:
        if kwargs:
            raise ValueError(
                f"unknown reset arguments {sorted(kwargs)}; known: task, seed, "
                "controller, instance, budget, reward_weights, episode_id"
            )
        weights = RewardWeights.model_validate(reward_weights or {})
        env = make(
            task, controller=controller, **({"budget": budget} if budget is not None else {})
        )
        options = {base_env(env)._instance_option: instance} if instance else None
        try:
            obs, info = env.reset(seed=seed, options=options)
        except BaseException:
            env.close()
            raise
        self.close()
        self._env, self._weights, self._last_qgp = env, weights, info["qgp"]
        self._state = PushBenchState(
            episode_id=episode_id or uuid.uuid4().hex,
            step_count=0,
            task_id=task,
            instance=base_env(env).instance,
            seed=seed,
            controller=controller,
            target=base_env(env).task.target,
        )
        return PushBenchObservation(
            text=obs, tools=base_env(env).tool_schemas(), qgp=info["qgp"], reward=0.0, done=False
        )

    def step(
        self, action: PushBenchAction, timeout_s: float | None = None, **kwargs: Any
    ) -> PushBenchObservation:
        if self._env is None:
            raise RuntimeError("call reset() before step()")
        obs, _, terminated, truncated, info = self._env.step(action.env_action())
        qgp = info["qgp"]
        done = bool(terminated or truncated)
        parts = {
            "accepted": float(qgp["valid_count"] - self._last_qgp["valid_count"]),
            "duplicates": float(qgp["duplicates"] - self._last_qgp["duplicates"]),
        }
        record = None
        if done and not self._state.done:
            record = self._env.get_wrapper_attr("episode_record")()
            parts.update(terminal_parts(record))
        self._last_qgp = qgp
        self._state.step_count = qgp["steps_used"]
        self._state.valid_count = qgp["valid_count"]
        self._state.done = done
        return PushBenchObservation(
            text=obs,
            qgp=qgp,
            reward=weigh(parts, self._weights),
            reward_parts=parts,
            done=done,
            record=record,
        )

    @property
    def state(self) -> PushBenchState:
        """The session's current :class:`PushBenchState` (OpenEnv's ``state`` endpoint)."""
        return self._state

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def terminal_parts(record: dict) -> dict[str, float]:
    """The end-of-episode reward parts, from the record's verifier verdicts."""
    vc = metrics.valid_count(record)
    return {
        "success": float(vc >= record["target"]),
        "verified_fraction": min(vc / record["target"], 1.0),
    }


def weigh(parts: dict[str, float], w: RewardWeights) -> float:
    return (
        w.accepted * parts.get("accepted", 0.0)
        - w.duplicate * parts.get("duplicates", 0.0)
        + w.success * parts.get("success", 0.0)
        + w.verified_fraction * parts.get("verified_fraction", 0.0)
    )


def episode_return(record: dict, weights: RewardWeights | dict | None = None) -> float:
    """The sum of an episode's step rewards, recomputed from its record alone.

    ``accepted * valid_count - duplicate * (duplicate verdicts) + success * success +
    verified_fraction * min(valid_count / target, 1)`` (the episode must have ended).
    """
    w = (
        weights
        if isinstance(weights, RewardWeights)
        else RewardWeights.model_validate(weights or {})
    )
    dups = sum(1 for c in record["calls"] for _, v in c.get("verdicts") or () if v == "duplicate")
    parts = {
        "accepted": float(metrics.valid_count(record)),
        "duplicates": float(dups),
        **terminal_parts(record),
    }
    return weigh(parts, w)


def create_pushbench_app(max_concurrent_envs: int = 8):
    """The OpenEnv FastAPI app (HTTP + WebSocket) serving :class:`PushBenchEnvironment`."""
    return create_app(
        PushBenchEnvironment,
        PushBenchAction,
        PushBenchObservation,
        env_name="pushbench",
        max_concurrent_envs=max_concurrent_envs,
    )


class PushBenchClient(EnvClient[PushBenchAction, PushBenchObservation, PushBenchState]):
    """WebSocket client of a PushBench OpenEnv server (one session = one environment)."""

    def _step_payload(self, action: PushBenchAction) -> dict:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict) -> StepResult[PushBenchObservation]:
        obs = PushBenchObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )
        return StepResult(observation=obs, reward=payload.get("reward"), done=obs.done)

    def _parse_state(self, payload: dict) -> PushBenchState:
        return PushBenchState(**payload)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Serve PushBench tasks as an OpenEnv environment.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument(
        "--max-concurrent",
        type=int,
        default=8,
        help="concurrent WebSocket sessions (one environment each)",
    )
    args = ap.parse_args(argv)
    import uvicorn

    uvicorn.run(create_pushbench_app(args.max_concurrent), host=args.host, port=args.port)


if __name__ == "__main__":
    main()


__all__ = [
    "PushBenchAction",
    "PushBenchObservation",
    "PushBenchState",
    "PushBenchEnvironment",
    "PushBenchClient",
    "RewardWeights",
    "create_pushbench_app",
    "episode_return",
    "terminal_parts",
]
