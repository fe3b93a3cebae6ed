"""``letta``: a real Letta agent as a runner-level policy (the paper's memory baseline rows).

The episode runs as a black-box Letta episode (docs/letta.md) in a child process,
``pushbench blackbox run --agent letta`` for this one (task, seed, controller, budget) in a
private temporary folder: its own Postgres and Letta server, the Letta agent with core memory
blocks and Letta's memory tools, ``pushbench mcp`` as its tool server. The policy then replays
the PushBench calls of that run's trace, in order, into the runner's environment (``drive``)
and requires every observation to be byte for byte the one ``pushbench mcp`` gave the agent:
the runner's record is the agent's episode, and a difference is a ``letta_replay`` error, never
a silently different row. (A subprocess, not an import: the black-box layers sit above the
policies, and Letta's server must run in its own process groups anyway.)

Step charge: one step per PushBench call, as for every black-box agent. Letta's own memory
calls (``memory_insert``, ...) consume no step; they are counted (``record["letta"]
["memory_calls"]``, and ``record["memory"]`` as the in-process memory baselines write it)
with the model requests and turns.

The model is ``model_server`` (an offline policy behind the loopback model server, which also
writes progress notes with Letta's memory tool: the row is ``simulated``, it tests the
harness, never a result) or ``base_url`` + ``model`` (+ ``api_key_env``), a real
OpenAI-compatible endpoint (no ``/v1``). Episodes end as ``terminated_by: "error"``
(a :class:`~pushbench.policies.errors.PolicyError`, record kept with the calls made) when the
Letta server fails or dies (``letta_error``), the episode timeout fires (``letta_timeout``) or
the replay differs (``letta_replay``). A missing Letta install is a setup problem:
:meth:`LettaPolicy.preflight` says so in one line before ``pushbench run`` starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ..baselines import installer as baselines
from ..envs.actions import mcp_call
from ..tasks import get_task
from .base import NoParams, Policy, UnsupportedFamily, parse_observation
from .errors import PolicyError
from .llm.config import Price

FAMILIES = ("reposcan", "dataops")
# The Letta agent's settings (blackbox.clients.letta uses these): its model's context window
# and completion tokens per request, and the driver's limits (turns of at most STEPS_PER_TURN
# Letta steps; "Continue." starts the next turn).
CONTEXT_WINDOW, MAX_TOKENS, MAX_TURNS, STEPS_PER_TURN = 32000, 2048, 50, 100
BATCH_GRACE = 1800  # seconds past the episode timeout for the batch's start and evaluation
# Tokens (chars/4) of Letta's first request: its system prompt, memory blocks and tools plus
# PushBench's prompt; measured 18,671 bytes on RepoScan-requests-docstring-N10 (docs/letta.md)
PROMPT_FLOOR = 4000
MAX_TRANSCRIPT = 2000  # Letta messages kept in the record (a message's text clipped to 2,000)
_OFFLINE = Literal[
    "random",
    "diligent",
    "simulated-weak",
    "simulated-mid",
    "simulated-strong",
    "exhaustive",
    "simulated-base",
]


class LettaParams(NoParams):
    model_server: _OFFLINE | None = Field(
        None,
        description="serve this offline policy to Letta on loopback (a harness test: "
        "the rows are simulated, never a result)",
    )
    base_url: str | None = Field(
        None,
        min_length=1,
        max_length=2048,
        description="a real OpenAI-compatible endpoint (without /v1) instead",
    )
    model: str = Field(
        "default", min_length=1, max_length=256, description="with base_url: the model name"
    )
    api_key_env: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="with base_url: the variable holding the endpoint's key",
    )
    condition: Literal["default", "checklist"] = "default"
    timeout: float = Field(
        3600.0,
        gt=0,
        le=10 * 86400,
        description="seconds per episode before the Letta client is stopped",
    )
    prices: dict[str, Price] | Price | None = Field(
        None, description="USD per million tokens (for --estimate), as the llm policies"
    )

    @model_validator(mode="after")
    def _one_endpoint(self):
        if (self.model_server is None) == (self.base_url is None):
            raise ValueError("give exactly one of model_server and base_url")
        return self

    def price(self) -> Price | None:
        if isinstance(self.prices, Price):
            return self.prices
        return (self.prices or {}).get(self.model)


class LettaPolicy(Policy):
    name = "letta"
    Params = LettaParams

    def __init__(self, seed: int | None = None, **params) -> None:
        super().__init__(seed=seed, **params)
        self.p = LettaParams.model_validate(params)
        self.simulated = self.p.model_server is not None
        self.info: dict = {}
        self.transcript: list[dict] = []

    @classmethod
    def params_for(cls, family: str):
        if family not in FAMILIES:
            raise UnsupportedFamily(
                f"policy 'letta' runs on RepoScan and DataOps tasks, not {family}"
            )
        return LettaParams

    @classmethod
    def preflight(cls) -> None:
        """Raise a one-line :class:`~pushbench.baselines.installer.BaselineError` unless the
        pinned Letta is installed (``pushbench run`` calls this before the first episode)."""
        try:
            baselines.require("letta")
        except baselines.BaselineError as e:
            raise baselines.BaselineError(f"policy 'letta' needs the Letta server: {e}") from None

    def describe(self) -> dict:
        out = super().describe()
        out["simulated"] = self.simulated
        if self.simulated:
            out["note"] = (
                "an offline policy behind the model server drives Letta; tests the "
                "harness, never a result"
            )
        return out

    def reset(self, first_observation: str) -> None:
        self.first_text = first_observation
        self.first = parse_observation(first_observation)
        self.check_family(self.first["result"].get("family", "reposcan"))

    def act(self, observation: str):  # the episode runs through Letta (drive)
        raise NotImplementedError("LettaPolicy drives the environment (drive)")

    async def adrive(self, env) -> None:
        """:meth:`drive` off the event loop (the async executor): the episode is a child
        process, and the replay afterwards is the only use of ``env``."""
        await asyncio.to_thread(self.drive, env)

    # ----- the episode ----------------------------------------------------------------------
    def drive(self, env) -> None:
        self.preflight()
        u = env.unwrapped
        task, seed = u.task.task_id, u.seed_used
        controller = (env.get_wrapper_attr("episode_record")().get("controller") or {}).get(
            "name", "none"
        )
        work = Path(tempfile.mkdtemp(prefix="pushbench-letta-"))
        try:
            argv = [
                sys.executable,
                "-m",
                "pushbench.cli",
                "blackbox",
                "run",
                "--agent",
                "letta",
                "--tasks",
                task,
                "--seeds",
                str(seed),
                "--condition",
                self.p.condition,
                "--controller",
                controller,
                "--timeout",
                str(self.p.timeout),
                "--out",
                str(work / "out"),
            ]
            if u.task.budget != get_task(task).budget:  # the runner's budget override
                argv += ["--budget", str(u.task.budget)]
            if self.simulated:
                argv += ["--model-server", self.p.model_server]
            else:
                argv += ["--base-url", self.p.base_url, "--model", self.p.model]
                if self.p.api_key_env:
                    argv += ["--api-key-env", self.p.api_key_env]
            proc = _run_batch(argv, work, self.p.timeout + BATCH_GRACE)
            ep = work / "out" / "letta" / task / self.p.condition / f"seed{seed}"
            self._read_run(ep, proc)
            self._replay(env, ep)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _read_run(self, ep: Path, proc: subprocess.CompletedProcess) -> None:
        client = _json(ep / "client.json")
        letta = _json(ep / "letta.json")
        if client is None:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise PolicyError(
                "letta_error",
                f"the Letta episode did not start (exit "
                f"{proc.returncode}): {(tail or ['no output'])[-1][:300]}",
            )
        requests = [json.loads(x) for x in _lines(ep / "model-server.jsonl")]
        self.info = {
            "version": client.get("client_version"),
            "endpoint": "model-server" if self.simulated else self.p.base_url,
            "model": None if self.simulated else self.p.model,
            "condition": self.p.condition,
            "client_rc": client.get("rc"),
            "timed_out": client.get("timed_out"),
            "seconds": client.get("seconds"),
            "memory_calls": client.get("memory_calls"),
            "memory_errors": client.get("memory_errors"),
            "memory_tools_used": (letta or {}).get("memory_tools_used"),
            "pushbench_calls": (letta or {}).get("pushbench_calls"),
            "turns": client.get("letta_turns"),
            "stop_reasons": client.get("letta_stop_reasons"),
            "error": client.get("letta_error"),
            "model_requests": len(requests) if self.simulated else None,
            "server": _json(ep.parents[2] / "server" / "server.json"),
        }
        for line in _lines(ep / "letta-trace.jsonl")[:MAX_TRANSCRIPT]:
            m = json.loads(line)
            self.transcript.append(
                {
                    k: (v[:2000] if isinstance(v, str) else v)
                    for k, v in m.items()
                    if k
                    in (
                        "turn",
                        "message_type",
                        "name",
                        "tool_call",
                        "tool_calls",
                        "tool_return",
                        "status",
                        "content",
                        "stop_reason",
                        "usage",
                    )
                }
            )

    def _replay(self, env, ep: Path) -> None:
        """Step ``env`` with the trace's PushBench calls; every observation must be the one
        the agent got through ``pushbench mcp``."""
        prompt = (ep / "prompt.txt").read_text() if (ep / "prompt.txt").exists() else ""
        if self.first_text not in prompt:
            raise PolicyError(
                "letta_replay",
                "the black-box episode started from another "
                "first observation than the runner's (instance or options differ)",
            )
        done = False
        for i, line in enumerate(_lines(ep / "run" / "trace.jsonl"), 1):
            t = json.loads(line)
            if t.get("step") is None:
                continue  # a call after the episode's end: nothing ran
            proposed = t.get("proposed") or {}
            if done or proposed.get("oversized") or t.get("out_of_band_edits"):
                raise PolicyError(
                    "letta_replay",
                    f"trace line {i} cannot be replayed in "
                    "process (a call after the end, an oversized call or a "
                    "workspace edit)",
                )
            action = mcp_call(proposed.get("tool"), proposed.get("arguments"))
            obs, _, terminated, truncated, _ = env.step(action)
            if obs != t.get("observation"):
                raise PolicyError(
                    "letta_replay",
                    f"call {i}: the runner's environment "
                    "answered differently than pushbench mcp did",
                )
            done = terminated or truncated
        if not done:
            why = self.info.get("error") or (
                "the episode timeout fired"
                if self.info.get("timed_out")
                else "the agent stopped before the episode ended"
            )
            kind = "letta_timeout" if self.info.get("timed_out") else "letta_error"
            raise PolicyError(kind, f"the Letta episode is unfinished: {why}"[:500])

    def episode_extras(self) -> dict:
        # record["memory"] in the shape the in-process memory baselines give it
        # (policies.llm.memory), so the memory rows compare field for field
        memory = {
            "backend": "letta",
            "calls": self.info.get("memory_calls"),
            "by_tool": dict(sorted((self.info.get("memory_tools_used") or {}).items())),
            "errors": self.info.get("memory_errors"),
            "charged_to_env": 0,
        }
        return {"letta": self.info, "memory": memory, "transcript": self.transcript}


def _run_batch(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run the one-episode batch. The child's own limits (the client's timeout, the servers'
    start-up) come first; past ``timeout`` (a hung start or evaluation) it gets SIGINT, so its
    cleanup stops Letta and Postgres (their own process groups, which a kill of the child
    would leave running), and SIGKILL only after :data:`BATCH_GRACE` more seconds."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=BATCH_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise PolicyError(
            "letta_timeout", f"the Letta batch did not end within {timeout:g} s"
        ) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _lines(path: Path) -> list[str]:
    try:
        return [x for x in path.read_text().splitlines() if x.strip()]
    except OSError:
        return []
