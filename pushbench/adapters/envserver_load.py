"""Seeded action streams and WebSocket sessions against the env server (benchmark and tests).

* :func:`action_stream` -- a fixed, seeded list of well-formed tool calls for a task: samples
  of the environment's own action space (``ToolCallSpace.sample``), without ``final`` and
  ``ask_user`` so episodes run to their budget. The same seed gives the same list.
* :func:`local_trajectory` -- what ``pushbench.make(task, controller)`` answers to a stream in
  process: every observation text, reward and ``done`` flag; after the budget runs out the
  episode is reset with the next seed (``seed + episodes``) and the stream goes on.
* :func:`ws_session` -- the same stream over one WebSocket session of a server (OpenEnv's
  ``/ws`` protocol), with each step's round-trip latency; its ``trajectory`` must equal
  :func:`local_trajectory` for the same arguments. With ``pace`` (from :func:`think_times`) the
  session pauses before each step, as an agent generating its next call does.

Nothing here is timed against a target; :mod:`experiments.bench_env_server` does the timing.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field

from ..registration import make, sample_calls
from .openenv_env import PushBenchAction


def action_stream(task: str, seed: int, n: int) -> list[dict]:
    """``n`` seeded well-formed non-terminal calls for ``task``
    (:func:`pushbench.registration.sample_calls`), as OpenEnv step payloads
    (``{"tool": name, "arguments": {...}}``)."""
    out = []
    for call in sample_calls(task, seed, n):
        tool = call.pop("tool")
        out.append({"tool": tool, "arguments": call})
    return out


@dataclass
class Trajectory:
    """Observation texts, rewards and done flags of resets and steps, in order."""

    texts: list[str] = field(default_factory=list)
    rewards: list[float | None] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)
    episodes: int = 0

    def add(self, text: str, reward: float | None, done: bool) -> None:
        self.texts.append(text)
        self.rewards.append(reward)
        self.dones.append(done)


def local_trajectory(task: str, controller: str, seed: int, actions: list[dict]) -> Trajectory:
    """The stream stepped through ``pushbench.make`` in process (resetting with ``seed + k``
    after the k-th episode ends). Rewards are the env's ledger rewards per step."""
    env = make(task, controller=controller)
    traj = Trajectory()
    try:
        obs, _ = env.reset(seed=seed)
        traj.add(obs, None, False)
        for payload in actions:
            action = PushBenchAction(**payload).env_action()
            obs, reward, term, trunc, _ = env.step(action)
            done = bool(term or trunc)
            traj.add(obs, float(reward), done)
            if done:
                traj.episodes += 1
                obs, _ = env.reset(seed=seed + traj.episodes)
                traj.add(obs, None, False)
        return traj
    finally:
        env.close()


def think_times(seed: int, n: int, mean: float) -> list[float]:
    """``n`` seeded exponential think times with mean ``mean`` seconds: sessions that each
    step after an exponential pause send steps to the server as a Poisson stream of rate
    ``sessions / mean`` (the first pause spreads the sessions' starts)."""
    rng = random.Random(seed)
    return [rng.expovariate(1.0 / mean) if mean > 0 else 0.0 for _ in range(n)]


@dataclass
class SessionResult:
    """One WebSocket session's trajectory, step latencies (s), errors and worker pid."""

    trajectory: Trajectory = field(default_factory=Trajectory)
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pid: int | None = None


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/ws"


async def _ask(ws, message: dict) -> dict:
    await ws.send(json.dumps(message))
    reply = json.loads(await ws.recv())
    if reply.get("type") == "error":
        raise RuntimeError(reply["data"].get("message", "error"))
    return reply["data"]


async def ws_session(
    base_url: str,
    task: str,
    controller: str,
    seed: int,
    actions: list[dict],
    ready=None,
    go=None,
    ask_worker: bool = False,
    pace: list[float] | None = None,
) -> SessionResult:
    """Run ``actions`` over one session (reset with ``seed``, then ``seed + k`` after each
    episode). ``ready``/``go`` (asyncio events or None): the session sets ``ready`` after its
    first reset and waits for ``go`` before stepping, so a caller can hold every session open
    at once before the timed part. ``pace`` (seconds, one per action): the session waits that
    long before sending each step (an agent's think time; not part of the latency). Errors
    are collected, not raised."""
    from websockets.asyncio.client import connect

    out = SessionResult()
    reset_data = {"task": task, "controller": controller}
    try:
        async with connect(
            ws_url(base_url), max_size=None, open_timeout=120, ping_interval=None
        ) as ws:
            if ask_worker:
                out.pid = (await _ask(ws, {"type": "worker"}))["pid"]
            first = await _ask(ws, {"type": "reset", "data": {**reset_data, "seed": seed}})
            out.trajectory.add(first["observation"]["text"], None, False)
            if ready is not None:
                ready()
            if go is not None:
                await go.wait()
            for k, payload in enumerate(actions):
                if pace is not None:
                    await asyncio.sleep(pace[k])
                t0 = time.perf_counter()
                data = await _ask(ws, {"type": "step", "data": payload})
                out.latencies.append(time.perf_counter() - t0)
                out.trajectory.add(
                    data["observation"]["text"], data.get("reward"), bool(data.get("done"))
                )
                if data.get("done"):
                    out.trajectory.episodes += 1
                    again = await _ask(
                        ws,
                        {
                            "type": "reset",
                            "data": {**reset_data, "seed": seed + out.trajectory.episodes},
                        },
                    )
                    out.trajectory.add(again["observation"]["text"], None, False)
            await ws.send(json.dumps({"type": "close"}))
    except Exception as e:  # noqa: BLE001 - the benchmark counts errors, it does not stop
        out.errors.append(f"{type(e).__name__}: {e}")
    return out


__all__ = [
    "action_stream",
    "local_trajectory",
    "ws_session",
    "ws_url",
    "think_times",
    "Trajectory",
    "SessionResult",
]
