"""PushBench's own vector paths (issue 31): the sync step and info batching, the async env's
worker slices. They must change nothing but speed: every observation, reward, flag and info
equals single envs stepped in a loop with the same seeds and actions (sync and async), the info
batching equals Gymnasium's on any info, and calls a user may make before the first reset
either work or raise a clear ``NotResetError`` (issue 32's failing README example)."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

import pushbench
from pushbench.errors import NotResetError, PushBenchError
from pushbench.vector.batch import InfoLeaf, PushBenchSyncVectorEnv, place_batch
from pushbench.vector.workers import PushBenchAsyncVectorEnv, _slices

FAMILY_TASKS = ["RepoScan-N10", "DataOps-N3", "SWELite-N3"]


def _loop_reference(task, controller, budget, seeds, actions_per_step):
    """Single envs in a loop with NEXT_STEP autoreset by hand: what the vector must equal."""
    envs = [pushbench.make(task, controller=controller, budget=budget) for _ in seeds]
    out = []
    obs = [env.reset(seed=s) for env, s in zip(envs, seeds, strict=True)]
    out.append(([o for o, _ in obs], None, None, None, [i for _, i in obs]))
    resetting = [False] * len(envs)
    for actions in actions_per_step:
        step = []
        for i, env in enumerate(envs):
            if resetting[i]:
                o, info = env.reset()
                step.append((o, 0.0, False, False, info))
                resetting[i] = False
            else:
                o, r, te, tr, info = env.step(actions[i])
                step.append((o, r, te, tr, info))
                resetting[i] = te or tr
        out.append(tuple(list(x) for x in zip(*step, strict=True)))
    for env in envs:
        env.close()
    return out


def _unbatch(batched: dict, i: int) -> dict:
    """Copy ``i``'s info back out of a batched info (its ``_key`` masks say what it had)."""
    out = {}
    for k, v in batched.items():
        if k.startswith("_") or not batched["_" + k][i]:
            continue
        out[k] = _unbatch(v, i) if isinstance(v, dict) else v[i]
        if k == "controller":  # each copy's entry whole, a dict (pushbench.vector's contract)
            assert type(out[k]) is InfoLeaf, type(out[k])
    return out


def _actions(task, seeds, steps):
    """Seeded random-policy calls for RepoScan; seeded action-space samples otherwise."""
    space = pushbench.make(task).unwrapped.action_space
    space.seed(seeds[0])
    return [[space.sample() for _ in seeds] for _ in range(steps)]


# async: the caller steps the first slice, a worker the second (waits spin 1 ms, the
# default); async-procs: every slice in a worker process (caller_slice=False), one copy per
# process, every wait blocking at once (spin=0)
_MODES = {
    "sync": {"vectorization_mode": "sync"},
    "async": {"vectorization_mode": "async", "num_workers": 2},
    "async-procs": {
        "vectorization_mode": "async",
        "num_workers": 3,
        "caller_slice": False,
        "spin": 0.0,
    },
}


@pytest.mark.parametrize("mode", list(_MODES))
@pytest.mark.parametrize(
    "task,controller",
    [("RepoScan-N10", None), ("RepoScan-N10", "stateqgp"), ("DataOps-N3", "unitqgp")],
)
def test_every_vector_observation_equals_the_single_env_loop(mode, task, controller):
    seeds = [11, 12, 13]
    steps = 24
    acts = _actions(task, seeds, steps)
    ref = _loop_reference(task, controller, 5, seeds, acts)  # budget 5: several autoresets
    envs = pushbench.make_vec(task, len(seeds), controller=controller, budget=5, **_MODES[mode])
    try:
        obs, info = envs.reset(seed=seeds)
        assert list(obs) == ref[0][0]
        assert [_unbatch(info, i) for i in range(len(seeds))] == ref[0][4]
        for t, actions in enumerate(acts, start=1):
            obs, rew, term, trunc, info = envs.step(actions)
            r_obs, r_rew, r_term, r_trunc, r_info = ref[t]
            assert list(obs) == r_obs, f"step {t}"
            assert list(rew) == r_rew and list(term) == r_term and list(trunc) == r_trunc
            assert [_unbatch(info, i) for i in range(len(seeds))] == r_info, f"step {t}"
            if controller is not None:  # the same JSON a single env's entry gives, too
                entries = info.get("controller", [None] * len(seeds))  # absent: all reset
                masks = info.get("_controller", [False] * len(seeds))
                assert [
                    json.dumps(e, sort_keys=True) if m else None
                    for e, m in zip(entries, masks, strict=True)
                ] == [
                    json.dumps(i["controller"], sort_keys=True) if "controller" in i else None
                    for i in r_info
                ], f"step {t}"
        assert sum(sum(r[2]) + sum(r[3]) for r in ref[1:]) >= 3  # autoresets were exercised
    finally:
        envs.close()


# ----- info batching: the same result as Gymnasium's on any info --------------------------
_scalars = st.one_of(
    st.integers(-5, 5),
    st.booleans(),
    st.floats(-1, 1, allow_nan=False),
    st.none(),
    st.text(max_size=3),
)
_infos = st.dictionaries(
    st.sampled_from(["a", "b", "qgp", "c"]),
    st.one_of(_scalars, st.dictionaries(st.sampled_from(["x", "y"]), _scalars, max_size=2)),
    max_size=3,
)


def _stable(infos):
    """Gymnasium types a key by the first copy that has it; keep one kind per key path."""
    kinds: dict = {}
    out = []
    for info in infos:
        ok = {}
        for k, v in info.items():
            kind = "dict" if type(v) is dict else type(v)  # an InfoLeaf is a value
            if kinds.setdefault(k, kind) == kind and kind != "dict":
                ok[k] = v
            elif kind == "dict" and kinds[k] == "dict":
                sub = {}
                for kk, vv in v.items():
                    if kinds.setdefault((k, kk), type(vv)) is type(vv):
                        sub[kk] = vv
                ok[k] = sub
        out.append(ok)
    return out


def _assert_same(a, b):
    assert set(a) == set(b)
    for k in a:
        if isinstance(a[k], dict):
            _assert_same(a[k], b[k])
        else:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
            assert [repr(x) for x in a[k]] == [repr(x) for x in b[k]], k


class _Gym(VectorEnv):
    num_envs = 0


@settings(max_examples=200, deadline=None)
@given(st.lists(_infos, min_size=1, max_size=5))
def test_info_batching_equals_gymnasiums(infos):
    infos = _stable(infos)
    n = len(infos)
    gym_env = _Gym()
    gym_env.num_envs = n
    ours = PushBenchSyncVectorEnv.__new__(PushBenchSyncVectorEnv)
    ours.num_envs = n
    expected, got = {}, {}
    for i, info in enumerate(infos):
        expected = gym_env._add_info(expected, info, i)
        got = ours._add_info(got, info, i)
    _assert_same(expected, got)
    # and split across two workers' slices, then placed: the same again
    for cut in range(1, n):
        left, right = {}, {}
        for i, info in enumerate(infos[:cut]):
            ours.num_envs = cut
            left = ours._add_info(left, info, i)
        for i, info in enumerate(infos[cut:]):
            ours.num_envs = n - cut
            right = ours._add_info(right, info, i)
        merged: dict = {}
        place_batch(merged, left, 0, n)
        place_batch(merged, right, cut, n)
        _assert_same(expected, merged)


# infos with the same keys in every copy (a real step's shape), values mostly of one type
_uniform_infos = st.integers(1, 6).flatmap(
    lambda n: st.lists(
        st.sampled_from(["a", "b", "qgp", "c", "final_obs"]), unique=True, max_size=4
    ).flatmap(
        lambda keys: st.lists(
            st.fixed_dictionaries(
                {
                    k: st.one_of(
                        _scalars, st.fixed_dictionaries({"x": _scalars, "y": st.integers(0, 3)})
                    )
                    for k in keys
                }
            ),
            min_size=n,
            max_size=n,
        )
    )
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_uniform_infos, st.lists(_infos, min_size=1, max_size=5)))
def test_all_copies_batched_at_once_equal_gymnasiums_copy_by_copy(infos):
    infos = _stable(infos)
    gym_env = _Gym()
    gym_env.num_envs = len(infos)
    ours = PushBenchSyncVectorEnv.__new__(PushBenchSyncVectorEnv)
    ours.num_envs = len(infos)
    expected: dict = {}
    for i, info in enumerate(infos):
        expected = gym_env._add_info(expected, info, i)
    got = ours._batch_infos(infos)
    _assert_same(expected, got)
    assert list(got) == list(expected)  # and in Gymnasium's key order


# infos as real steps make them, and worse: keys missing in some copies (an autoreset copy's
# info has no ``controller``), text and None in one key, one kind per key or mixed kinds
_step_infos = st.integers(1, 8).flatmap(
    lambda n: st.lists(
        st.dictionaries(
            st.sampled_from(["qgp", "controller", "a", "_a", "b"]),
            st.one_of(
                st.none(),
                st.text(max_size=3),
                _scalars,
                st.dictionaries(
                    st.sampled_from(["terminated_by", "n", "_n", "x"]),
                    st.one_of(st.none(), st.sampled_from(["final", "budget"]), _scalars),
                    max_size=4,
                ),
            ),
            max_size=4,
        ),
        min_size=n,
        max_size=n,
    )
)


@settings(max_examples=400, deadline=None)
@given(_step_infos)
def test_key_by_key_batching_equals_gymnasiums_on_any_infos_it_accepts(infos):
    """Missing keys, mixed kinds, mask-like keys: whenever Gymnasium batches the infos, ours
    gives the same arrays, dtypes, masks and key order (the key-by-key path and its fallbacks)."""
    expected = _gymnasium_batch(infos)
    if expected is None:
        return  # Gymnasium cannot batch these (text into an int column, a mask-named key)
    ours = PushBenchSyncVectorEnv.__new__(PushBenchSyncVectorEnv)
    ours.num_envs = len(infos)
    got = ours._batch_infos(infos)
    assert _shape_of(got) == _shape_of(expected)


class _Opaque:
    """A stand-in Gymnasium batches as one object, as ours batches an InfoLeaf."""

    def __init__(self, leaf: InfoLeaf) -> None:
        self.leaf = leaf

    def __repr__(self) -> str:
        return repr(self.leaf)

    def __bool__(self) -> bool:  # as the dict casts into a bool column (odd inputs)
        return bool(self.leaf)


_leaves = st.builds(
    InfoLeaf,
    st.dictionaries(
        st.sampled_from(["step", "proposed", "n", "_n"]),
        st.one_of(_scalars, st.dictionaries(st.sampled_from(["x", "y"]), _scalars, max_size=2)),
        max_size=3,
    ),
)
_leaf_infos = st.integers(1, 6).flatmap(
    lambda n: st.lists(
        st.dictionaries(
            st.sampled_from(["qgp", "controller", "a", "final_obs"]),
            st.one_of(
                _leaves,
                _leaves,
                _scalars,
                st.dictionaries(st.sampled_from(["n", "leaf"]), st.one_of(_scalars, _leaves)),
            ),
            max_size=3,
        ),
        min_size=n,
        max_size=n,
    )
)


def _boxed(info: dict) -> dict:
    return {
        k: _Opaque(v) if type(v) is InfoLeaf else _boxed(v) if isinstance(v, dict) else v
        for k, v in info.items()
    }


def _leaves_in(batched: Any) -> list:
    """The leaves (unboxed) in a batched info, in order (odd inputs leave odd values)."""
    if type(batched) is dict:
        return [x for v in batched.values() for x in _leaves_in(v)]
    items = list(batched) if isinstance(batched, np.ndarray) else [batched]
    return [x.leaf if type(x) is _Opaque else x for x in items if type(x) in (InfoLeaf, _Opaque)]


@settings(max_examples=300, deadline=None)
@given(_leaf_infos)
def test_an_info_leaf_is_batched_as_one_object_whole(infos):
    """An InfoLeaf anywhere in an info (beside, or mixed with, any other kind; copies lacking
    it; the ``same_step`` path) is batched as Gymnasium batches an opaque object: the very
    same dict lands in its copy's row of an object array, never split into a nested info; by
    all copies at once and copy by copy, and (one kind per key, as a real env's infos)
    split across two slices then placed."""
    ours = PushBenchSyncVectorEnv.__new__(PushBenchSyncVectorEnv)
    for stable in (False, True):
        if stable:
            infos = _stable(infos)
        expected = _gymnasium_batch([_boxed(info) for info in infos])
        if expected is None:
            continue  # Gymnasium cannot batch these (text into an int column, a mask-named key)
        n = ours.num_envs = len(infos)
        got: list = [ours._batch_infos(infos), {}]
        for i, info in enumerate(infos):
            got[1] = ours._add_info(got[1], info, i)
        if stable:
            left, right, cut = {}, {}, n // 2
            ours.num_envs = cut
            for i, info in enumerate(infos[:cut]):
                left = ours._add_info(left, info, i)
            ours.num_envs = n - cut
            for i, info in enumerate(infos[cut:]):
                right = ours._add_info(right, info, i)
            got.append({})
            place_batch(got[2], left, 0, n)
            place_batch(got[2], right, cut, n)
        for batched in got:
            assert _shape_of(batched) == _shape_of(expected)
            assert [id(x) for x in _leaves_in(batched)] == [id(x) for x in _leaves_in(expected)]


def _gymnasium_batch(infos: list[dict]) -> dict | None:
    gym_env = _Gym()
    gym_env.num_envs = len(infos)
    expected: dict = {}
    try:
        for i, info in enumerate(infos):
            expected = gym_env._add_info(expected, info, i)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None
    return expected


def _shape_of(batched):
    """Everything comparable about a batched info: key order, dtypes, shapes, values' reprs
    (Gymnasium leaves odd values in odd inputs, e.g. ``{1: None}`` for a dict then None)."""
    if type(batched) is dict:  # an InfoLeaf is a value
        return [(repr(k), _shape_of(v)) for k, v in batched.items()]
    if isinstance(batched, np.ndarray):
        return (str(batched.dtype), batched.shape, [repr(x) for x in batched])
    return repr(batched)


def test_a_step_with_an_autoreset_copy_takes_the_one_array_path():
    """Copy 1 autoreset (no ``controller``), copy 2 ended (``terminated_by`` text): still one
    array per key, with Gymnasium's defaults and masks in the rows of copies without it."""
    ours = PushBenchSyncVectorEnv.__new__(PushBenchSyncVectorEnv)
    ours.num_envs = 3
    first, last = InfoLeaf(step=1, proposed={"tool": "status"}), InfoLeaf()
    infos = [
        {"qgp": {"n": 0, "terminated_by": None}, "controller": first},
        {"qgp": {"n": 1, "terminated_by": None}},
        {"qgp": {"n": 2, "terminated_by": "final"}, "controller": last},
    ]
    got = ours._batch_infos(infos)
    assert got["controller"].dtype == object and got["controller"].shape == (3,)
    assert got["controller"][0] is first and got["controller"][1] is None
    assert got["controller"][2] is last
    assert list(got["_controller"]) == [True, False, True]
    assert list(got["qgp"]["terminated_by"]) == [None, None, "final"]
    assert got["qgp"]["n"].dtype == np.int64 and list(got) == [
        "qgp",
        "_qgp",
        "controller",
        "_controller",
    ]


def test_uniform_infos_take_the_one_array_path():
    """The fast path is taken (not only equal): ints stay int64, text is an object array."""
    ours = PushBenchSyncVectorEnv.__new__(PushBenchSyncVectorEnv)
    ours.num_envs = 3
    got = ours._batch_infos([{"qgp": {"n": i}, "controller": "{}"} for i in range(3)])
    assert got["qgp"]["n"].dtype == np.int64 and list(got["qgp"]["n"]) == [0, 1, 2]
    assert got["controller"].dtype == object and got["_controller"].all()
    leaves = [InfoLeaf(step=i, interventions=[]) for i in range(3)]
    got = ours._batch_infos([{"qgp": {"n": i}, "controller": e} for i, e in enumerate(leaves)])
    assert got["controller"].shape == (3,) and got["_controller"].all()
    assert all(a is b for a, b in zip(got["controller"], leaves, strict=True))


@given(st.integers(1, 40), st.integers(1, 8))
def test_worker_slices_cover_every_copy_once(n, workers):
    workers = min(n, workers)
    cuts = _slices(n, workers)
    assert [i for a, b in cuts for i in range(a, b)] == list(range(n))
    sizes = [b - a for a, b in cuts]
    assert max(sizes) - min(sizes) <= 1 and len(cuts) == workers


# ----- before the first reset ---------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("task", FAMILY_TASKS)
def test_calls_before_the_first_reset_work_or_say_reset_first(task, mode):
    envs = pushbench.make_vec(task, 2, controller="standard", vectorization_mode=mode)
    try:
        with pytest.raises(NotResetError, match=r"reset\(\) before episode_record"):
            envs.call("episode_record")
        with pytest.raises(NotResetError, match=r"reset\(\) before step"):
            envs.step([{"tool": "status"}] * 2)
        assert all(isinstance(s, list) and s for s in envs.call("tool_schemas"))
        assert envs.call("proposal", {"tool": "status"})[0]["tool"] == "status"
        assert envs.render() == (None, None)
        envs.reset(seed=[0, 1])  # and the env is usable afterwards
        assert [r["steps_used"] for r in envs.call("episode_record")] == [0, 0]
    finally:
        envs.close()


@pytest.mark.parametrize("task", FAMILY_TASKS)
def test_single_env_episode_record_before_reset_is_a_pushbench_error(task):
    env = pushbench.make(task)
    with pytest.raises(PushBenchError, match="reset"):
        env.unwrapped.episode_record()


# ----- the async env's own plumbing ---------------------------------------------------------
def test_async_workers_attrs_and_bad_arguments():
    with pytest.raises(ValueError, match="num_workers"):
        pushbench.make_vec("RepoScan-N10", 2, vectorization_mode="async", num_workers=3)
    with pytest.raises(ValueError, match="shared_memory"):
        pushbench.make_vec("RepoScan-N10", 2, vectorization_mode="async", shared_memory=True)
    for spin in (-0.001, 2.0, True, "1ms", float("nan")):
        with pytest.raises(ValueError, match="spin"):
            pushbench.make_vec("RepoScan-N10", 2, vectorization_mode="async", spin=spin)
    envs = pushbench.make_vec("RepoScan-N10", 3, vectorization_mode="async", num_workers=2)
    try:
        assert isinstance(envs, PushBenchAsyncVectorEnv) and isinstance(envs, gym.vector.VectorEnv)
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        envs.set_attr("marker", [1, 2, 3])
        assert envs.get_attr("marker") == (1, 2, 3)
        with pytest.raises(ValueError, match="length"):
            envs.set_attr("marker", [1])
        with pytest.raises(ValueError, match="3 actions"):
            envs.step([{"tool": "status"}])
        obs, _ = envs.reset(seed=0)
        envs.step_async([{"tool": "status"}] * 3)
        with pytest.raises(RuntimeError, match="step_wait"):
            envs.call("episode_record")
        _, _, _, _, info = envs.step_wait()
        assert list(info["qgp"]["steps_used"]) == [1, 1, 1]
    finally:
        envs.close()
    assert envs.closed


def test_async_reset_mask_resets_only_masked_copies_across_workers():
    envs = pushbench.make_vec(
        "RepoScan-N10",
        4,
        budget=1,
        autoreset_mode="disabled",
        vectorization_mode="async",
        num_workers=2,
    )
    try:
        envs.reset(seed=[0, 1, 2, 3])
        _, _, _, trunc, _ = envs.step(['{"tool": "status"}'] * 4)
        assert trunc.all()
        mask = np.array([False, False, True, False])  # only the second worker has work
        obs, info = envs.reset(options={"reset_mask": mask})
        assert [r["steps_used"] for r in envs.call("episode_record")] == [1, 1, 0, 1]
        assert list(info["_qgp"]) == [False, False, True, False]
        assert '"reset"' in obs[2] and '"reset"' not in obs[0]
    finally:
        envs.close()


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_exit_when_their_parent_is_killed(tmp_path, context):
    """A parent killed without ``close()`` (SIGKILL) leaves no worker behind: each worker's
    pipe sees EOF because no worker holds a parent end of any pipe (forked workers inherit
    them). Three workers, so later workers would inherit the earlier pipes' ends too."""
    import subprocess
    import sys
    import time

    import psutil

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, pushbench\n"
        "if __name__ == '__main__':\n"
        "    envs = pushbench.make_vec('RepoScan-N10', 4, vectorization_mode='async',"
        f" num_workers=3, context={context!r})\n"
        "    envs.reset(seed=0)\n"
        "    print(*[p.pid for p in envs._procs if p is not None], flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as o, err.open("w") as e:  # files, not pipes a stray worker would hold
        proc = subprocess.run([sys.executable, str(script)], stdout=o, stderr=e, timeout=300)
    assert proc.returncode == -9, err.read_text()
    pids = [int(x) for x in out.read_text().split()]
    assert len(pids) == 2  # the first slice is the caller's own
    deadline = time.monotonic() + 60
    alive = pids
    try:
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if _running(p)]
            time.sleep(0.1)
        assert alive == [], f"workers {alive} outlived their killed parent"
    finally:
        for pid in alive:
            psutil.Process(pid).kill()


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
