"""Batching for PushBench vector envs: Gymnasium's info batching made cheap, and a sync step
without the overhead a Python loop over single environments does not pay (issue 31)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv


class _BatchInfo(VectorEnv):
    """Gymnasium's info batching (``VectorEnv._add_info``) with the same result, cheaper.

    Gymnasium's version builds a fresh mask array for every key of every copy on every step
    (``dict.get(key, np.zeros(...))`` evaluates its default eagerly) and checks types the long
    way; with ``info["qgp"]``'s dozen counts that was most of a vector step's own cost. Same
    keys, arrays, dtypes and ``_key`` masks as Gymnasium's (a test compares the two).
    """

    num_envs: int

    def _add_info(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        n = self.num_envs
        for key, value in env_info.items():
            if key == "final_obs":  # same_step mode only: Gymnasium's own path
                vector_infos = super()._add_info(vector_infos, {key: value}, env_num)
                continue
            array: np.ndarray | dict[str, Any]
            if type(value) is dict:
                array = self._add_info(vector_infos.get(key, {}), value, env_num)
            else:
                batch = vector_infos.get(key)
                if batch is None:
                    batch = _empty_batch(value, n)
                batch[env_num] = value
                array = batch
            mask_key = "_" + key
            mask = vector_infos.get(mask_key)
            if mask is None:
                mask = np.zeros(n, dtype=np.bool_)
            mask[env_num] = True
            vector_infos[key], vector_infos[mask_key] = array, mask
        return vector_infos

    def _batch_infos(self, env_infos: list[dict[str, Any]]) -> dict[str, Any]:
        """The infos of copies ``0 .. len(env_infos) - 1`` batched, equal to calling
        ``_add_info`` copy by copy. When every copy's info has the same keys and each key one
        value type (every RepoScan/DataOps step: ``qgp``'s counts, ``controller`` text), a
        key's array is built in one ``np.array`` call instead of one assignment per copy."""
        out: dict[str, Any] = {}
        if env_infos and len(env_infos) == self.num_envs and _uniform(env_infos):
            return _batch_uniform(self, env_infos, out)
        for i, env_info in enumerate(env_infos):
            out = self._add_info(out, env_info, i)
        return out


_FAST_KINDS = {int: int, float: float, bool: bool, str: object, type(None): object}


def _uniform(infos: list[dict[str, Any]]) -> bool:
    keys = infos[0].keys()
    return "final_obs" not in keys and all(i.keys() == keys for i in infos)


def _batch_uniform(
    env: _BatchInfo, infos: list[dict[str, Any]], out: dict[str, Any]
) -> dict[str, Any]:
    """``_batch_infos`` for infos with the same keys (``_uniform``): per key, one array when
    every copy's value has one exact type Gymnasium types the same way (``_FAST_KINDS``: its
    dtype rule gives int64, float64, bool or object); any other key goes copy by copy."""
    n = len(infos)
    for key in infos[0]:
        values = [i[key] for i in infos]
        kind = type(values[0])
        same = all(type(v) is kind for v in values)
        array: Any  # a nested info dict or one array for the key
        if same and kind is dict and _uniform(values):
            array = _batch_uniform(env, values, {})
        elif same and kind in _FAST_KINDS:
            array = np.array(values, dtype=_FAST_KINDS[kind])
        else:  # Gymnasium's way, one copy at a time (key and mask land in the same order)
            sub: dict[str, Any] = {}
            for j, v in enumerate(values):
                sub = env._add_info(sub, {key: v}, j)
            out.update(sub)
            continue
        out[key], out["_" + key] = array, np.ones(n, dtype=np.bool_)
    return out


def _empty_batch(value: Any, n: int) -> np.ndarray:
    """The array Gymnasium's ``_add_info`` starts a key with (its dtype rules, verbatim)."""
    kind = type(value)
    if kind in (int, float, bool) or issubclass(kind, np.number):
        return np.zeros(n, dtype=kind)
    if isinstance(value, np.ndarray):
        return np.zeros((n, *value.shape), dtype=value.dtype)
    return np.full(n, fill_value=None, dtype=object)


class PushBenchSyncVectorEnv(_BatchInfo, SyncVectorEnv):
    """``SyncVectorEnv`` without per-step overhead a loop over single envs does not pay.

    ``step`` in the ``next_step`` and ``disabled`` autoreset modes is Gymnasium's loop minus
    the action-space iteration, the observation ``deepcopy`` (observations are a tuple of
    immutable strings: a copy is the same object) and its generic info batching; results,
    autoreset and errors are the same. ``same_step`` keeps Gymnasium's ``step``.
    """

    def step(self, actions: Any):
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            return super().step(actions)
        obs, rewards, terms, truncs, env_infos = self.step_unbatched(actions)
        return obs, rewards.copy(), terms.copy(), truncs.copy(), self._batch_infos(env_infos)

    def step_unbatched(self, actions: Any):
        """``step`` with each copy's info as it came (a list), for a worker to send: plain
        dicts pickle an order of magnitude faster than batched arrays (``next_step`` and
        ``disabled`` modes). The arrays returned are this env's own: copy before keeping."""
        mode = self.autoreset_mode
        actions = actions if isinstance(actions, (list, tuple)) else list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        env_infos: list[dict[str, Any]] = []
        env_obs, rewards = self._env_obs, self._rewards
        terms, truncs, resetting = self._terminations, self._truncations, self._autoreset_envs
        for i, env in enumerate(self.envs):
            if resetting[i]:
                if mode == AutoresetMode.DISABLED:  # Gymnasium asserts the same
                    raise AssertionError(f"{self._autoreset_envs=}")
                env_obs[i], env_info = env.reset()
                rewards[i], terms[i], truncs[i] = 0.0, False, False
            else:
                env_obs[i], rewards[i], terms[i], truncs[i], env_info = env.step(actions[i])
            env_infos.append(env_info)
        self._observations = tuple(env_obs)
        self._autoreset_envs = np.logical_or(terms, truncs)
        return self._observations, rewards, terms, truncs, env_infos


def place_batch(dst: dict[str, Any], src: dict[str, Any], offset: int, n: int) -> None:
    """Copy ``src`` (infos batched over copies ``offset ..`` of a slice) into ``dst`` (infos
    batched over all ``n`` copies): arrays and ``_key`` masks land at their copies' rows; rows
    of copies a key is absent from stay as Gymnasium leaves them (0, ``None``, ``False``)."""
    for key, value in src.items():
        if isinstance(value, dict):
            place_batch(dst.setdefault(key, {}), value, offset, n)
            continue
        arr = dst.get(key)
        if arr is None:
            arr = (
                np.full((n, *value.shape[1:]), None, dtype=object)
                if value.dtype == object
                else np.zeros((n, *value.shape[1:]), dtype=value.dtype)
            )
            dst[key] = arr
        elif value.dtype == object and arr.dtype != object:  # mixed kinds across slices
            arr = dst[key] = arr.astype(object)
        arr[offset : offset + len(value)] = value
