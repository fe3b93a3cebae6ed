"""Golden traces: the exact bytes of every observation of fixed episodes, per family version.

A family's version (:data:`pushbench.tasks.FAMILY_VERSIONS`) names its observation contract:
observation text, tool schemas, verdict rules, budgets and search. The goldens pin it. Per
family (:data:`PLANS`), the episodes are: two policies (``diligent`` and one simulated preset;
SWE-lite has no simulated agent, so ``random`` stands in) x ``standard`` and the family's full
controller x seeds 0 and 1, on a suite task whose seed picks the instance. A SWE-lite episode
is cut after its first :attr:`Plan.max_steps` steps (each ``run_verifier`` or ``submit`` runs
the unit's tests for seconds); the others run to the end.

On disk, ``ROOT/<family>-v<version>/`` holds ``tools.json`` (the family's tool schemas,
sorted and indented) and one ``<controller>--<policy>--s<seed>.txt`` per episode: line ``i`` is the
observation after step ``i`` (line 0 the reset's), byte for byte (observations are one-line
ASCII JSON). :func:`compare` runs the episodes again and names the first observation that
differs; :func:`write` records them and refuses to overwrite the goldens of an existing version
(:class:`GoldenExistsError`), so a change cannot be recorded without a version bump, unless
forced.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import tasks
from ..errors import PushBenchError
from .episode import _make_env, _make_policy, _step

ROOT = Path(__file__).resolve().parents[2] / "tests" / "golden"
WRITER = "python experiments/golden_traces.py --write"
SEEDS = (0, 1)
SNIPPET = 160  # characters of each side shown around the first difference


@dataclass(frozen=True)
class Plan:
    """The golden episodes of one family: ``task`` under ``standard`` and ``controller``, each
    policy, each seed of :data:`SEEDS`; ``max_steps`` cuts an episode (None: to the end)."""

    task: str
    controller: str
    policies: tuple[str, ...]
    max_steps: int | None = None


PLANS: dict[str, Plan] = {
    "reposcan": Plan("RepoScan-N10", "stateqgp", ("diligent", "simulated-mid")),
    "dataops": Plan("DataOps-N3", "unitqgp", ("diligent", "simulated-mid")),
    "swelite": Plan("SWELite-N3", "unitqgp", ("diligent", "random"), max_steps=6),
    "dataops_public": Plan("DataOps-public-N3", "unitqgp", ("diligent", "simulated-mid")),
}


class GoldenExistsError(PushBenchError):
    """The goldens of this family version exist already (bump the version, or force)."""


@dataclass(frozen=True)
class Episode:
    family: str
    task: str
    controller: str
    policy: str
    seed: int
    max_steps: int | None

    @property
    def name(self) -> str:
        return f"{self.controller}--{self.policy}--s{self.seed}"


def episodes(family: str) -> list[Episode]:
    """The golden episodes of ``family``, in a fixed order."""
    p = PLANS[family]
    return [
        Episode(family, p.task, c, pol, s, p.max_steps)
        for c in ("standard", p.controller)
        for pol in p.policies
        for s in SEEDS
    ]


def golden_dir(family: str, version: int | None = None, root: Path = ROOT) -> Path:
    """``root/<family>-v<version>`` (the family's current version by default)."""
    return Path(root) / f"{family}-v{tasks.family_version(family) if version is None else version}"


def tools_text(family: str) -> str:
    """The family's tool schemas as stored in ``tools.json`` (sorted keys, indented)."""
    env = _make_env(PLANS[family].task, "standard", None)
    try:
        schemas = env.unwrapped.tool_schemas()
    finally:
        env.close()
    return json.dumps(schemas, ensure_ascii=True, sort_keys=True, indent=1) + "\n"


def run(ep: Episode) -> tuple[list[str], list[str | dict | None]]:
    """The observations of ``ep`` (reset first) and the action before each (None for reset)."""
    env = _make_env(ep.task, ep.controller, None)
    try:
        pol = _make_policy(ep.policy, ep.seed, None)
        obs, _ = env.reset(seed=ep.seed, options=env.unwrapped.reset_options(None))
        pol.reset(obs)
        observations, done = [obs], False
        actions: list[str | dict | None] = [None]
        while not done and (ep.max_steps is None or len(actions) <= ep.max_steps):
            action = pol.act(obs)
            obs, done = _step(env, action)
            observations.append(obs)
            actions.append(action)
        return observations, actions
    finally:
        env.close()


def write(family: str, root: Path = ROOT, force: bool = False) -> Path:
    """Record the goldens of ``family``'s current version under ``root``; return the folder.

    Refuses (:class:`GoldenExistsError`) when that version's goldens exist: a change to what
    an agent sees is a new version. ``force`` replaces them (for a version not yet released).
    """
    out = golden_dir(family, root=root)
    if out.exists() and not force:
        raise GoldenExistsError(
            f"golden traces of {family} v{tasks.family_version(family)} exist ({out}); an "
            f"observation change needs a new version: bump FAMILY_VERSIONS[{family!r}] in "
            "pushbench/tasks.py first (or pass --force to overwrite a version not yet released)"
        )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "tools.json").write_text(tools_text(family), encoding="ascii")
    for ep in episodes(family):
        observations, _ = run(ep)
        (tmp / f"{ep.name}.txt").write_text(
            "".join(o + "\n" for o in observations), encoding="ascii"
        )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _bump(family: str) -> str:
    v = tasks.family_version(family)
    return (
        f"If the change is intended, bump FAMILY_VERSIONS[{family!r}] in pushbench/tasks.py "
        f"({v} -> {v + 1}), add it to the version history in docs/concepts.md, then run "
        f"`{WRITER}` to record the goldens of version {v + 1}. If it is not intended, "
        "undo it: results of the two behaviours must not be compared under one version."
    )


def _snippet(text: str, at: int) -> str:
    lo = max(0, at - SNIPPET // 2)
    return (
        ("..." if lo else "")
        + text[lo : lo + SNIPPET]
        + ("..." if lo + SNIPPET < len(text) else "")
    )


def _first_diff(a: str, b: str) -> int:
    # strict=False: a prefix of the other differs at the shorter length
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def compare(family: str, root: Path = ROOT) -> str | None:
    """None when every golden observation of ``family``'s current version is reproduced
    byte for byte; else the failure message: the first differing observation (episode, step,
    the action before it, both texts around the first differing character) and what to do."""
    v = tasks.family_version(family)
    folder = golden_dir(family, root=root)
    if not folder.is_dir():
        return (
            f"no golden traces of {family} v{v} ({folder}): run `{WRITER}` to record them "
            "(and add the version to the version history in docs/concepts.md)"
        )
    head = f"golden traces of {family} v{v} differ from the current observations: "
    stored_tools = (
        (folder / "tools.json").read_text(encoding="ascii")
        if (folder / "tools.json").is_file()
        else ""
    )
    now_tools = tools_text(family)
    if stored_tools != now_tools:
        at = _first_diff(stored_tools, now_tools)
        return (
            f"{head}the tool schemas (tools.json) differ at character {at}:\n"
            f"  golden : {_snippet(stored_tools, at)}\n  current: {_snippet(now_tools, at)}"
            f"\n{_bump(family)}"
        )
    for ep in episodes(family):
        file = folder / f"{ep.name}.txt"
        if not file.is_file():
            return f"{head}episode {ep.name} has no golden ({file}).\n{_bump(family)}"
        stored = file.read_text(encoding="ascii").splitlines()
        observations, actions = run(ep)
        # strict=False: differing counts are reported after the shared ones
        for i, (old, new) in enumerate(zip(stored, observations, strict=False)):
            if old != new:
                at = _first_diff(old, new)
                after = "the reset" if i == 0 else f"action {json.dumps(actions[i])}"
                return (
                    f"{head}episode {ep.name} ({ep.task}, controller {ep.controller}, "
                    f"policy {ep.policy}, seed {ep.seed}): observation {i} (after {after}) "
                    f"differs at character {at}:\n  golden : {_snippet(old, at)}\n"
                    f"  current: {_snippet(new, at)}\n{_bump(family)}"
                )
        if len(stored) != len(observations):
            return (
                f"{head}episode {ep.name} ({ep.task}, controller {ep.controller}, policy "
                f"{ep.policy}, seed {ep.seed}) has {len(observations)} observations, the "
                f"golden {len(stored)} (every shared one is equal).\n{_bump(family)}"
            )
    return None
