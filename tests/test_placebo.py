"""The placebo carries nothing but a length: its block is a function of the rendered length of
the real progress block alone. Episodes are driven to different progress under ``placebo`` and,
call for call, under the family's real progress component; every pair of steps whose real
blocks have the same length must show byte-identical placebo blocks."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pushbench
from pushbench.controllers.placebo import KEY, blank, rendered_length
from pushbench.policies import make_policy

FAMILIES = {  # family -> (task, the controller that shows the real block)
    "reposcan": ("RepoScan-flask-decorated-N10", "only_progress_state"),
    "dataops": ("DataOps-b0-N5", "only_unit_tracker"),
}
RUNS = [("diligent", 0), ("simulated-weak", 0), ("simulated-mid", 1), ("random", 2)]


def _drive(task: str, real_ctl: str, policy: str, seed: int):
    """(real block text, placebo block text, verified count) at every step of one episode."""
    env_x = pushbench.make(task, controller="placebo")
    env_r = pushbench.make(task, controller=real_ctl)
    pol = make_policy(policy, seed=seed)
    obs, _ = env_x.reset(seed=seed)
    real, _ = env_r.reset(seed=seed)
    pol.reset(obs)
    out, done = [], False
    try:
        while True:
            x, r = json.loads(obs), json.loads(real)
            assert "progress" not in x and set(x) - set(r) == {KEY}
            out.append(
                (
                    json.dumps(r["progress"], separators=(",", ":")),
                    json.dumps(x[KEY], separators=(",", ":")),
                    r["progress"]["valid_count"],
                )
            )
            if done:
                return out
            action = pol.act(obs)
            obs, _, term, trunc, _ = env_x.step(action)
            real, _, term_r, trunc_r, _ = env_r.step(action)
            assert (term, trunc) == (term_r, trunc_r)  # the placebo changes no call's outcome
            done = term or trunc
    finally:
        env_x.close()
        env_r.close()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_same_real_length_gives_the_same_placebo_bytes(family):
    task, real_ctl = FAMILIES[family]
    by_length: dict[int, set[str]] = defaultdict(set)
    progress_at: dict[int, set[int]] = defaultdict(set)
    for policy, seed in RUNS:
        for real, placebo, count in _drive(task, real_ctl, policy, seed):
            assert len(placebo) == len(real)  # as long as the real block, nothing else
            assert set(json.loads(placebo)) == {"pad"} and set(json.loads(placebo)["pad"]) <= {"."}
            by_length[len(real)].add(placebo)
            progress_at[len(real)].add(count)
    assert all(len(texts) == 1 for texts in by_length.values())
    # Non-vacuous: some length was reached at different verified counts (different progress),
    # and the episodes reached more than one count in all.
    assert any(len(counts) > 1 for counts in progress_at.values())
    assert len(set().union(*progress_at.values())) > 2


@given(st.integers(min_value=0, max_value=100_000))
def test_blank_is_a_function_of_the_length_only(n):
    block = blank(n)
    assert set(block) == {"pad"} and set(block["pad"]) <= {"."}
    assert rendered_length(block) == max(n, rendered_length({"pad": ""}))
    assert blank(n) == block
