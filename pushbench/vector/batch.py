"""Batching for PushBench vector envs: Gymnasium's info batching made cheap, and a sync step
without the overhead a Python loop over single environments does not pay (issue 31).

One addition to Gymnasium's batching rules: an :class:`InfoLeaf` (a ``dict`` subclass) is one
value, stored whole in an object array like any other object, where Gymnasium would batch a
dict as a nested info. ``pushbench.make_vec`` passes each copy's controller step entry as one,
so ``info["controller"][i]`` is that copy's entry, a dict as the single env gives it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv


class InfoLeaf(dict):
    """A dict that vector info batching keeps whole: ``info[key]`` becomes an object array of
    the copies' dicts (``None`` in the rows of copies without the key, ``_key`` masks as for
    any key) instead of a nested info of arrays. A plain ``dict`` in every other respect
    (``==``, ``json.dumps``, ``pickle``, ``copy``); a copy of it (``dict(leaf)``) is a plain
    dict again."""

    __slots__ = ()


class _BatchInfo(VectorEnv):
    """Gymnasium's info batching (``VectorEnv._add_info``) with the same result, cheaper.

    Gymnasium's version builds a fresh mask array for every key of every copy on every step
    (``dict.get(key, np.zeros(...))`` evaluates its default eagerly) and checks types the long
    way; with ``info["qgp"]``'s dozen counts that was most of a vector step's own cost. Same
    keys, arrays, dtypes and ``_key`` masks as Gymnasium's (a test compares the two), except
    that an :class:`InfoLeaf` is one value (Gymnasium would batch it as a nested info).
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
        ``_add_info`` copy by copy (same keys, key order, arrays, dtypes and masks).

        Key by key (:func:`_batch_keys`): a key whose values in the copies that have it are
        all ints, all floats, all bools, all :class:`InfoLeaf`, or all text/``None`` (every key
        of a RepoScan/DataOps step: ``qgp``'s counts, ``terminated_by``, the ``controller``
        entries) gets its array in
        one ``np.array`` call, also on steps where some copies autoreset (their infos lack
        ``controller``); any other key goes Gymnasium's way, copy by copy."""
        if (
            not env_infos
            or len(env_infos) != self.num_envs
            or any("final_obs" in i for i in env_infos)  # same_step mode only
        ):
            return self._add_infos(env_infos)
        out = _batch_keys(self, list(env_infos))
        return self._add_infos(env_infos) if out is None else out

    def _add_infos(self, env_infos: list[dict[str, Any]]) -> dict[str, Any]:
        """Gymnasium's way: ``_add_info`` copy by copy."""
        out: dict[str, Any] = {}
        for i, env_info in enumerate(env_infos):
            out = self._add_info(out, env_info, i)
        return out


# The dtype Gymnasium's ``_add_info`` gives a key by the type of its first value (``np.zeros``
# of int/float/bool; an object array of ``None`` for anything else), with the value a row of a
# copy without the key keeps. Text and ``None`` share the object dtype, so a column mixing them
# (``terminated_by`` on a step where one copy ends) is still one array. An InfoLeaf is an
# object too (a dict is not a sequence to numpy: ``np.array`` of dicts is one row per dict).
_FAST_KINDS: dict[type, tuple[Any, Any]] = {
    int: (int, 0),
    float: (float, 0.0),
    bool: (bool, False),
    str: (object, None),
    type(None): (object, None),
    InfoLeaf: (object, None),
}
_TEXT_OR_NONE = {str, type(None)}


def _batch_keys(env: _BatchInfo, infos: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """``infos`` (``None``: a copy without this dict) batched key by key, in Gymnasium's key
    order (first appearance over the copies, each key followed by its ``_key`` mask); ``None``
    when a key is not a string or starts with ``_`` (it could collide with a mask).

    Without such keys a key is independent of the others in ``_add_info`` (it writes its own
    array and mask only), so a key that is not of one ``_FAST_KINDS`` rule or a dict in every
    copy having it is batched by ``_add_info`` over those copies alone: the same result as the
    whole infos copy by copy.
    """
    n = len(infos)
    first = infos[0]
    # every copy has the same keys (most steps): copy 0's order is the first-appearance order
    same = first is not None and all(i is not None and i.keys() == first.keys() for i in infos)
    keys: Any = first
    if not same:
        keys = {}
        for info in infos:
            if info is not None:
                keys.update(dict.fromkeys(info))
    if not _plain_keys(tuple(keys)):
        return None
    out: dict[str, Any] = {}
    for key in keys:
        if same:
            values = [i[key] for i in infos]  # type: ignore[index]  # same: none is None
            kinds = set(map(type, values))
            present = None
        else:
            values = [_MISSING if i is None else i.get(key, _MISSING) for i in infos]
            kinds = set(map(type, values))
            kinds.discard(_Missing)
            present = [v is not _MISSING for v in values]
        array: Any = None
        if kinds == {dict}:
            array = _batch_keys(env, values if present is None else _or_none(values))
        else:
            rule = (
                _FAST_KINDS.get(next(iter(kinds)))
                if len(kinds) == 1
                else _FAST_KINDS[str]
                if kinds == _TEXT_OR_NONE
                else None
            )
            if rule is not None:
                dtype, fill = rule
                if present is not None:
                    values = [fill if v is _MISSING else v for v in values]
                array = np.array(values, dtype=dtype)
        if array is None:
            sub: dict[str, Any] = {}
            for j, v in enumerate(values):
                if v is not _MISSING:
                    sub = env._add_info(sub, {key: v}, j)
            out.update(sub)
            continue
        out[key] = array
        out["_" + key] = _ones(n) if present is None else np.array(present, dtype=np.bool_)
    return out


@functools.lru_cache(maxsize=256)
def _plain_keys(keys: tuple) -> bool:
    """No key is a non-string or starts with ``_`` (memoised: a step's keys repeat)."""
    return all(type(k) is str and not k.startswith("_") for k in keys)


_ONES: dict[int, np.ndarray] = {}  # n -> an all-True mask, never handed out (copied)


def _ones(n: int) -> np.ndarray:
    """A fresh all-True mask of ``n`` copies (copying a cached one is ten times np.ones)."""
    ones = _ONES.get(n)
    if ones is None:
        ones = _ONES[n] = np.ones(n, dtype=np.bool_)
    return ones.copy()


def _or_none(values: list[Any]) -> list[Any]:
    return [None if v is _MISSING else v for v in values]


class _Missing:
    """The type of :data:`_MISSING`: a copy whose info lacks the key."""


_MISSING = _Missing()


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
