"""Worker deaths for the process-pool tests (not a test module: pool workers import it).

Pool workers unpickle the function they run by reference, so it has to live in a module they
can import; pytest puts ``tests/`` on ``sys.path`` before any pool (and its fork server) starts.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from pushbench.runner import episode as _episode
from pushbench.runner.executors.base import run_spec
from pushbench.runner.spec import EpisodeResult, EpisodeSpec


def die_mid_episode(
    spec: EpisodeSpec, *, seed: int, step: int, marker: str | None = None
) -> EpisodeResult:
    """Run ``spec``; if its seed is ``seed``, SIGKILL this worker when the policy takes ``step``.

    The kill happens inside the episode loop, after ``step - 1`` environment steps. With
    ``marker`` (a file path) the worker dies only once: it writes ``"<pid> <step>"`` there just
    before dying, and later attempts find the file and run normally. Without it, every attempt
    dies (an episode that deterministically crashes its process).
    """
    if spec.seed != seed or (marker is not None and Path(marker).exists()):
        return run_spec(spec)
    real = _episode.make_policy

    def make_policy(name, seed=None, **params):
        pol = real(name, seed=seed, **params)
        act, taken = pol.act, 0

        def act_or_die(obs):
            nonlocal taken
            taken += 1
            if taken == step:
                if marker is not None:
                    Path(marker).write_text(f"{os.getpid()} {step}")
                os.kill(os.getpid(), signal.SIGKILL)
            return act(obs)

        pol.act = act_or_die
        return pol

    _episode.make_policy = make_policy
    try:
        return run_spec(spec)
    finally:
        _episode.make_policy = real


def always_die(spec: EpisodeSpec) -> EpisodeResult:
    """A worker that dies on every episode before it starts (like workers that cannot start)."""
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")
