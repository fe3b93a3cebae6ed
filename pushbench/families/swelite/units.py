"""SWE-lite work units: the shipped selection recipe, its local validation, and the cached set.

The recipe (``tasks/swelite/units.yaml``) lists candidate units per snapshot: a mutation of one
function (:mod:`.mutate`), the test-id prefixes whose tests it should break, and an issue-style
text describing the symptom a user sees (never the diff, the file or the function). The
validated unit set is built locally, once per (snapshot sha256, unit-set version, recipe and
venv hash), by :func:`build` (``pushbench swelite build``, or lazily on first use) and cached
as JSON under ``paths.home()/swelite/``. Validation, in a scratch copy of the snapshot:

1. baseline: the candidates' test modules run on the clean snapshot; a unit's *chosen tests*
   are the baseline-passing tests under its prefixes that its mutation breaks;
2. each mutation alone: the chosen tests must pass clean (1), fail mutated, and pass again
   once the reference fix (the original function text) is put back; the mutated run must not
   time out; ``broken`` records every baseline-passing test of *all* candidate modules that the
   mutation breaks (a mutated fixture can break another module's tests);
3. independence: a unit is discarded when its function is already used or nests with another
   unit's, or when its chosen tests overlap another kept unit's broken tests (so a unit's
   verifier never depends on the state of other units);
4. together: all kept mutations are applied at once, every unit's chosen tests must fail, and
   fixing each unit alone must make its chosen tests and the rest of its modules pass (tests
   broken by other units excluded), exactly the check ``submit`` runs in an episode.

Units failing any step are discarded with the reason; the build reports kept/discarded counts.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

import numpy as np
import yaml

from ... import paths, snapshots
from ...snapshots import locked
from . import mutate, runner, venvs, workspace

CACHE_SCHEMA = 1
RECIPE_ENV = "PUSHBENCH_SWELITE_RECIPE"
BUILD_TIMEOUT = 600.0
RUN_TIMEOUT = 120.0  # one mutated/fixed run during validation
_HEX = re.compile(r"0x[0-9a-fA-F]{6,}")


class UnitBuildError(RuntimeError):
    """The unit set cannot be built (snapshot, venv or recipe problem)."""


# ----- the recipe -----------------------------------------------------------------------------
def default_recipe_path() -> Path:
    return paths.data_dir("tasks") / "swelite" / "units.yaml"


def recipe_path(recipe: str | Path | None = None) -> Path:
    import os

    return Path(recipe or os.environ.get(RECIPE_ENV) or default_recipe_path())


@cache
def _load_recipe(path: str) -> dict:
    raw = yaml.safe_load(Path(path).read_text())
    if raw.get("schema_version") != 1:
        raise UnitBuildError(f"{path}: unsupported schema_version {raw.get('schema_version')}")
    for snap, cfg in raw["snapshots"].items():
        keys = [c["key"] for c in cfg["candidates"]]
        if len(keys) != len(set(keys)):
            raise UnitBuildError(f"{path}: duplicate candidate keys in {snap}")
        for c in cfg["candidates"]:
            missing = {"key", "file", "function", "op", "tests", "title", "issue"} - set(c)
            if missing:
                raise UnitBuildError(f"{path}: candidate {c.get('key')} lacks {sorted(missing)}")
            if c["op"] not in mutate.OPS:
                raise UnitBuildError(f"{path}: candidate {c['key']}: unknown op {c['op']!r}")
    return raw


def recipe(recipe: str | Path | None = None) -> dict:
    return _load_recipe(str(recipe_path(recipe)))


def cache_file(snapshot: str, recipe_file: str | Path | None = None) -> Path:
    path = recipe_path(recipe_file)
    raw = recipe(path)
    pin = snapshots.get_pin(snapshot)
    cfg = raw["snapshots"].get(snapshot)
    if cfg is None:
        raise UnitBuildError(f"the SWE-lite recipe {path} has no units for snapshot {snapshot!r}")
    blob = json.dumps(
        {"cands": cfg, "venv": venvs.spec(snapshot).key, "py": sys.version_info[:2]}, sort_keys=True
    )
    digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
    name = f"{snapshot}-{pin.sha256[:12]}-v{raw['unit_set_version']}-{digest}.json"
    return paths.home() / "swelite" / name


# ----- loading -------------------------------------------------------------------------------
def is_built(snapshot: str, recipe_file: str | Path | None = None) -> bool:
    return cache_file(snapshot, recipe_file).is_file()


_LOADED: dict[str, dict] = {}


def load(
    snapshot: str, recipe_file: str | Path | None = None, *, build_if_missing: bool = True, log=None
) -> dict:
    """The validated unit set of ``snapshot`` (building and caching it on first use)."""
    path = cache_file(snapshot, recipe_file)
    key = str(path)
    if key in _LOADED:
        return _LOADED[key]
    if not path.is_file():
        if not build_if_missing:
            raise UnitBuildError(
                f"the SWE-lite unit set of {snapshot} is not built; run `pushbench swelite build`"
            )
        if log is None:

            def log(msg: str) -> None:
                print(f"[pushbench] swelite {snapshot}: {msg}", file=sys.stderr, flush=True)

        log("unit set not built yet; validating it once (runs the snapshot's tests many times)")
        build(snapshot, recipe_file, log=log, progress=True)
    data = json.loads(path.read_text())
    _LOADED[key] = data
    return data


def backlog(
    unit_set: dict, target: int, seed: int, size_factor: float, min_extra: int
) -> list[dict]:
    """The backlog of a (snapshot, target) task: a seeded order of the kept units, cut to
    ``max(N + min_extra, ceil(size_factor * N))`` units (fewer when fewer are kept)."""
    kept = unit_set["kept"]
    order = np.random.default_rng(seed).permutation(len(kept))
    size = min(len(kept), max(target + min_extra, math.ceil(size_factor * target)))
    return [kept[i] for i in order[:size]]


def module_args(unit_set: dict, unit: dict) -> list[str]:
    """pytest arguments of a unit's module check (baseline failures deselected)."""
    args = list(unit["modules"])
    for m in unit["modules"]:
        for nid in unit_set["baseline_failing"].get(m, ()):
            args += ["--deselect", nid]
    return args


def module_expected(unit_set: dict, unit: dict, others) -> list[str]:
    """Baseline-passing tests of the unit's modules, minus those other units break."""
    excluded = set()
    for o in others:
        if o["key"] != unit["key"]:
            excluded.update(o["broken"])
    return [
        n
        for m in unit["modules"]
        for n in unit_set["baseline_passing"].get(m, ())
        if n not in excluded
    ]


# ----- building ------------------------------------------------------------------------------
def _matches(nodeid: str, prefixes) -> bool:
    return any(
        nodeid == p or nodeid.startswith(p + "::") or nodeid.startswith(p + "[") for p in prefixes
    )


def _leak_tokens(cand: dict) -> list[str]:
    tokens = []
    name = cand["function"].split(".")[-1]  # the class is the public API a user would name
    if len(name.strip("_")) >= 4:
        tokens += [name, name.strip("_").replace("_", " ")]
    mod = cand["file"].removesuffix(".py").split("/")
    tokens += ["/".join(mod[-2:]), ".".join(mod[-2:]), mod[-1] + ".py"]
    return [t.lower() for t in tokens if t]


def _observed(cand: dict, messages: dict, chosen: list[str]) -> str | None:
    """A failure message of a chosen test, if it names neither the function nor the file."""
    for nid in chosen:
        msg = (messages.get(nid) or "").strip().splitlines()
        if not msg:
            continue
        text = _HEX.sub("0x...", msg[0])[:200]
        low = text.lower()
        if any(t in low for t in _leak_tokens(cand)) or "/" in text or "line " in low:
            continue
        return text
    return None


class _Progress:
    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self.bar = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self.bar.start()
            self.task = self.bar.add_task(label, total=total)

    def advance(self, what: str = "") -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=what or None)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def build(
    snapshot: str,
    recipe_file: str | Path | None = None,
    *,
    force: bool = False,
    log=None,
    progress: bool = False,
) -> dict:
    """Validate the recipe's candidates for ``snapshot`` and cache the kept unit set."""
    out_path = cache_file(snapshot, recipe_file)
    if out_path.is_file() and not force:
        return json.loads(out_path.read_text())
    with locked(f"swelite-{snapshot}"):
        if out_path.is_file() and not force:
            return json.loads(out_path.read_text())
        data = _build(snapshot, recipe(recipe_path(recipe_file)), log or (lambda m: None), progress)
        paths.private_dir(out_path.parent)  # the unit set names the mutated functions
        paths.write_private(out_path, json.dumps(data, indent=1).encode())
    _LOADED.pop(str(out_path), None)
    return data


def _build(snapshot: str, raw: dict, log, show_progress: bool) -> dict:
    t0 = time.monotonic()
    pin = snapshots.get_pin(snapshot)
    clean = snapshots.ensure(snapshot)
    spec = venvs.spec(snapshot)
    py = venvs.ensure(snapshot, log=log)
    cands = raw["snapshots"][snapshot]["candidates"]
    modules = sorted({p.split("::")[0] for c in cands for p in c["tests"]})
    bar = _Progress(2 * len(cands) + 2, f"swelite {snapshot}", show_progress)
    discarded: list[dict] = []
    timings: list[float] = []

    def discard(c, reason):
        discarded.append({"key": c["key"], "reason": reason})

    scratch = Path(tempfile.mkdtemp(prefix="pushbench-swelite-build-"))
    try:
        root = workspace.copy_clean(clean, scratch / "repo")

        def run(args, timeout=RUN_TIMEOUT):
            return runner.run_pytest(py, root, spec.source_dirs, args, timeout=timeout)

        base = run(modules, timeout=BUILD_TIMEOUT)
        if base.timed_out:
            raise UnitBuildError(f"{snapshot}: the baseline test run timed out")
        bar.advance("baseline")
        passing = {
            m: sorted(
                n for n, o in base.outcomes.items() if o == "passed" and n.split("::")[0] == m
            )
            for m in modules
        }
        failing = {
            m: sorted(
                n for n, o in base.outcomes.items() if o != "passed" and n.split("::")[0] == m
            )
            for m in modules
        }
        kept: list[dict] = []
        for c in cands:
            bar.advance(f"{snapshot}: {c['key']}")
            unit = _validate_one(c, root, run, passing, discard, timings, modules)
            bar.advance()
            if unit is None:
                continue
            clash = _clash(unit, kept)
            if clash:
                discard(c, clash)
                continue
            kept.append(unit)
        kept = _validate_together(kept, root, run, passing, failing, discard)
        bar.advance("together")
    finally:
        bar.close()
        shutil.rmtree(scratch, ignore_errors=True)
    data = {
        "schema": CACHE_SCHEMA,
        "snapshot": snapshot,
        "snapshot_sha256": pin.sha256,
        "unit_set_version": raw["unit_set_version"],
        "venv": str(venvs.venv_dir(snapshot)),
        "built_seconds": round(time.monotonic() - t0, 1),
        "candidates": len(cands),
        "kept_count": len(kept),
        "discarded_count": len(discarded),
        "kept": kept,
        "discarded": discarded,
        "baseline_passing": passing,
        "baseline_failing": failing,
        "verifier_seconds": [round(t, 3) for t in timings],
    }
    log(
        f"kept {len(kept)} of {len(cands)} candidate units ({len(discarded)} discarded) in "
        f"{data['built_seconds']} s"
    )
    return data


def _validate_one(c: dict, root: Path, run, passing, discard, timings, all_modules) -> dict | None:
    mods = sorted({p.split("::")[0] for p in c["tests"]})
    pool = [n for m in mods for n in passing.get(m, ()) if _matches(n, c["tests"])]
    if not pool:
        discard(c, "no chosen test passes on the clean snapshot")
        return None
    path = root / c["file"]
    try:
        original = path.read_text(encoding="utf-8")
        applied = mutate.apply(
            original,
            mutate.Mutation(c["file"], c["function"], c["op"], int(c.get("k", 0)), c.get("value")),
        )
    except (OSError, mutate.MutationError, SyntaxError) as e:
        discard(c, f"mutation does not apply: {e}")
        return None
    if original.count(applied.original_func) != 1:
        discard(c, "the function text is not unique in its file")
        return None
    leaks = [t for t in _leak_tokens(c) if t in (c["title"] + " " + c["issue"]).lower()]
    if leaks:
        discard(c, f"the issue text names the location ({leaks[0]!r})")
        return None
    try:
        path.write_text(applied.source, encoding="utf-8")
        # Every candidate module runs: a mutation may break tests of other modules too (e.g.
        # a broken fixture), and those must count as broken by this unit, not by others.
        mutated = run(all_modules)
        if mutated.timed_out:
            discard(c, "the mutated test run times out")
            return None
        broken = sorted(
            n
            for m in all_modules
            for n in passing.get(m, ())
            if mutated.outcomes.get(n) != "passed"
        )
        chosen = [n for n in pool if n in broken]
        if not chosen:
            discard(c, "the chosen tests still pass on the mutated snapshot")
            return None
        fixed_text = applied.source.replace(applied.mutated_func, applied.original_func, 1)
        if applied.source.count(applied.mutated_func) != 1 or fixed_text != original:
            discard(c, "the reference fix does not restore the file")
            return None
        path.write_text(fixed_text, encoding="utf-8")
        fixed = run(chosen)
        if not fixed.passed(chosen):
            discard(c, "the chosen tests fail again with the reference fix")
            return None
        timings.append(fixed.seconds)
    finally:
        path.write_text(original, encoding="utf-8")
    start, end = mutate.function_span(original, c["function"])
    return {
        "key": c["key"],
        "file": c["file"],
        "function": c["function"],
        "op": c["op"],
        "k": int(c.get("k", 0)),
        "value": c.get("value"),
        "title": c["title"].strip(),
        "issue": " ".join(c["issue"].split()),
        "observed": _observed(c, mutated.messages, chosen),
        "tests": chosen,
        "modules": mods,
        "broken": broken,
        "span": [start, end],
        "original_func": applied.original_func,
        "mutated_func": applied.mutated_func,
        "changed_lines": list(applied.changed_lines),
    }


def _clash(unit: dict, kept: list[dict]) -> str | None:
    for o in kept:
        if o["file"] == unit["file"]:
            (a0, a1), (b0, b1) = unit["span"], o["span"]
            if a0 < b1 and b0 < a1:
                return f"its function overlaps unit {o['key']}'s"
        if set(unit["tests"]) & set(o["broken"]) or set(o["tests"]) & set(unit["broken"]):
            return f"its tests overlap those of unit {o['key']}"
    return None


def _validate_together(kept: list[dict], root: Path, run, passing, failing, discard) -> list[dict]:
    if not kept:
        return kept
    originals = {u["file"]: (root / u["file"]).read_text(encoding="utf-8") for u in kept}
    try:
        workspace.apply_units(root, kept)
        mods = sorted({m for u in kept for m in u["modules"]})
        together = run(mods, timeout=BUILD_TIMEOUT)
        ok = []
        for u in kept:
            if together.timed_out or any(together.outcomes.get(n) == "passed" for n in u["tests"]):
                discard(u, "some of its tests pass when all units are applied together")
            else:
                ok.append(u)
        unit_set = {"baseline_passing": passing, "baseline_failing": failing}
        final = []
        for u in ok:
            path = root / u["file"]
            text = path.read_text(encoding="utf-8")
            path.write_text(
                text.replace(u["mutated_func"], u["original_func"], 1), encoding="utf-8"
            )
            try:
                r = run(module_args(unit_set, u))
                expected = module_expected(unit_set, u, kept)
                if r.passed(u["tests"]) and r.passed(expected):
                    final.append(u)
                else:
                    discard(
                        u,
                        "fixing it alone does not pass its module check alongside the other units",
                    )
            finally:
                path.write_text(text, encoding="utf-8")
        return final
    finally:
        for f, text in originals.items():
            (root / f).write_text(text, encoding="utf-8")
