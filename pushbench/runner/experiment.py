"""Experiments as data: a validated YAML file expanded into a deterministic list of episodes.

An experiment file (``experiments/*.yaml``) looks like::

    schema_version: 1
    name: controller_ablation
    description: ...
    tasks:                       # task ids, globs, or suites expanded over their instances
      - RepoScan-*-N10           # glob over `pushbench tasks` ids (fnmatch; sorted matches)
      - RepoScan-requests-docstring-N25   # one exact id
      - RepoScan-N50             # a suite id alone: the reset seed picks the instance
      - {suite: RepoScan-N100, instances: all}      # one episode per instance of the suite
      - {suite: RepoScan-N100, instances: [requests-assert, flask-decorated]}
    controllers: [standard, verifier_gated, stateqgp]     # names from controllers/*.yaml
    policies:                    # names from pushbench.policies.POLICIES, optionally with params
      - simulated-mid
      - {name: simulated-weak, params: {window: 4}}       # reported as simulated-weak[window=4]
      - {name: llm, params: {model: gpt-4.1}, label: gpt41-native}   # an explicit label
    seeds: [0, 1, 2]             # or {start: 0, count: 3}
    workers: 2                   # process-pool size (1 = run in this process)
    executor: auto               # auto | inprocess | process  (auto: process iff workers > 1)
    budget: null                 # optional step-budget override for every task
    executor_options: {}         # per executor name, e.g. {ray: {address: auto, task_cpus: 0.25}}
    max_inflight_per_endpoint: {}   # {base_url or "*": N}: cap on concurrent model calls
    max_cost_usd: null           # hard cap on the run folder's model spend (USD; docs/llm.md)
    max_episode_tokens: null     # per-episode token cap (terminated_by "token_cap")

A policy's identity in every report is its label (:mod:`pushbench.policies.identity`): the
explicit ``label`` or one derived from the name and the params that distinguish it (for model
policies the model and base URL). Labels must be unique within an experiment: two entries that
would share one (e.g. the same model with two temperatures) need explicit labels.

Task entries: a string with ``*``, ``?`` or ``[`` is a glob over all task ids and must match
at least one; any other string must be an exact task id. A suite id (``RepoScan-N10``) as a
plain string runs the suite as Gymnasium does, the reset seed choosing the instance; the mapping
form ``{suite, instances}`` pins the instance per episode instead. Every name is checked when
the file is loaded; an unknown task, controller or policy fails with the closest matches.

Expansion order (:func:`expand`) is fixed: seeds, then tasks (in file order, glob matches
sorted), then instances, then policies, then controllers. The controllers of one
(task, instance, policy, seed) cell are adjacent, so a run cut short by ``--limit`` or by Ctrl-C
still holds complete paired comparisons. A cell listed twice (overlapping globs) runs once.

Size: about 440 lines, the experiment schema with its validation (every name, parameter and
executor option checked before an episode runs), loading and expansion kept in one place so the
rules an experiment file must follow are read together.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..envs.base import MAX_BUDGET
from ..errors import ExperimentError, did_you_mean
from ..policies.identity import policy_key_id, policy_label
from .episode import episode_key
from .spec import EpisodeSpec  # an experiment expands into specs
from .yamlfile import Refused, strict_yaml

EXPERIMENT_SCHEMA_VERSION: Literal[1] = 1
_GLOB_CHARS = "*?["
MAX_SEEDS = 10_000  # seeds per experiment
MAX_SEED = 2**63 - 1  # seeds are non-negative (numpy and Gymnasium refuse others)
MAX_EPISODES = 250_000  # planned episodes per experiment (seeds x cells x policies x ctl)
MAX_WORKERS = 512
MAX_COST_USD = 1e7  # a cap above this is a typo, not a budget
MAX_EPISODE_TOKENS = 10**10
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuiteTasks(_Strict):
    """A suite task expanded over (some of) its instances: one episode per instance."""

    suite: str
    instances: Literal["all"] | list[str] = "all"


class PolicySpec(_Strict):
    """One policy entry: ``name``, optional ``params`` and an optional explicit ``label``.

    The label is the policy's identity in every report (see :mod:`pushbench.policies.identity`):
    ``label`` when given, else derived from name and params (``llm[model=gpt-4.1]``).
    """

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    label: str | None = Field(
        default=None, min_length=1, max_length=120, pattern=r"^[^\s\x00-\x1f]+$"
    )

    @property
    def report_label(self) -> str:
        """The label reports group by (explicit or derived)."""
        return policy_label(self.name, self.params, self.label)

    @property
    def key_id(self) -> str:
        """The policy part of episode keys (unchanged for entries written before labels)."""
        return policy_key_id(self.name, self.params, self.label)


class SeedRange(_Strict):
    start: Seed = 0
    count: int = Field(ge=1, le=MAX_SEEDS)


def _close(name: str, known: list[str], n: int = 5) -> str:
    return did_you_mean(name, known, n=n, cutoff=0.5)


class Experiment(_Strict):
    """A validated experiment: what to run (the runner decides how and where)."""

    schema_version: Literal[1] = EXPERIMENT_SCHEMA_VERSION
    name: str = Field(min_length=1)
    description: str = ""
    tasks: list[str | SuiteTasks] = Field(min_length=1)
    controllers: list[str] = Field(min_length=1)
    policies: list[PolicySpec] = Field(min_length=1)
    seeds: list[Seed] = Field(min_length=1, max_length=MAX_SEEDS)
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS)
    executor: str = "auto"
    budget: int | None = Field(default=None, ge=1, le=MAX_BUDGET)
    executor_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    max_inflight_per_endpoint: dict[str, int] = Field(default_factory=dict)
    # spend limits (pushbench/spend.py, pushbench/runner/costcap.py; docs/llm.md)
    max_cost_usd: float | None = Field(default=None, gt=0, le=MAX_COST_USD, allow_inf_nan=False)
    max_episode_tokens: int | None = Field(default=None, ge=1, le=MAX_EPISODE_TOKENS)

    @field_validator("policies", mode="before")
    @classmethod
    def _policy_names(cls, v: Any) -> Any:
        if isinstance(v, (str, dict)):
            v = [v]
        return [{"name": p} if isinstance(p, str) else p for p in v]

    @field_validator("seeds", mode="before")
    @classmethod
    def _seed_range(cls, v: Any) -> Any:
        if isinstance(v, int):
            return [v]
        if isinstance(v, dict):
            r = SeedRange.model_validate(v)  # bounded before the list is built
            if r.start + r.count - 1 > MAX_SEED:
                raise ValueError(f"seeds run past the largest seed {MAX_SEED}")
            return list(range(r.start, r.start + r.count))
        return v

    @field_validator("controllers", mode="before")
    @classmethod
    def _one_controller(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("tasks", mode="before")
    @classmethod
    def _one_task(cls, v: Any) -> Any:
        return [v] if isinstance(v, (str, dict)) else v

    @model_validator(mode="after")
    def _check_names(self) -> Experiment:
        from ..controllers import catalogue
        from ..controllers.catalogue import scope_problem
        from ..policies import POLICIES, PolicyParamsError, validate_params
        from .registry import EXECUTORS

        problems: list[str] = []
        cells: list[tuple[str, str | None]] = []
        for entry in self.tasks:
            try:
                cells += _resolve_task(entry)
            except ValueError as e:
                problems.append(str(e))
        known_ctl = list(catalogue())
        for c in self.controllers:
            if c not in known_ctl:
                problems.append(
                    f"unknown controller {c!r}.{_close(c, known_ctl)} Known: {', '.join(known_ctl)}"
                )
        families = sorted({_family(t) for t, _ in cells})
        for c in dict.fromkeys(self.controllers):  # a component that would do nothing: refused
            if c in known_ctl:
                comp = catalogue()[c]
                problems += [
                    prob
                    for f in families
                    if (
                        prob := scope_problem(
                            c, comp.components, f, comp.family_independent is not None
                        )
                    )
                ]
        for p in self.policies:
            if p.name not in POLICIES:
                problems.append(
                    f"unknown policy {p.name!r}.{_close(p.name, list(POLICIES))} "
                    f"Known: {', '.join(POLICIES)}"
                )
                continue
            try:  # the policy's own schema, and every param must act on every family run
                validate_params(p.name, p.params, families)
            except PolicyParamsError as e:
                problems.append(str(e))
        planned = (
            len(set(self.seeds)) * len(set(cells)) * len(self.policies) * len(set(self.controllers))
        )
        if planned > MAX_EPISODES:
            problems.append(
                f"the experiment plans {planned} episodes (seeds x tasks x policies "
                f"x controllers); the limit is {MAX_EPISODES}: split it into "
                "several experiments"
            )
        ids = [p.key_id for p in self.policies]
        if len(set(ids)) != len(ids):
            twice = sorted({x for x in ids if ids.count(x) > 1})
            problems.append(f"policies listed twice: {twice}")
        else:
            labels = [p.report_label for p in self.policies]
            twice = sorted({x for x in labels if labels.count(x) > 1})
            if twice:
                problems.append(
                    f"policy entries share the label(s) {twice} (reports would pool "
                    "them): give each entry a distinct `label:`"
                )
        if self.executor != "auto" and self.executor not in EXECUTORS:
            hint = _close(self.executor, list(EXECUTORS))
            problems.append(
                f"unknown executor {self.executor!r}.{hint} Known: auto, {', '.join(EXECUTORS)}"
            )
        problems += _executor_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def result_fields(self) -> dict:
        """The fields that decide what each episode produces (compared on resume).

        ``workers``, ``executor``, ``executor_options``, ``max_inflight_per_endpoint``,
        ``max_cost_usd`` (a resume may raise it) and ``description`` only change how or why it
        runs. ``max_episode_tokens`` changes outcomes (``token_cap`` episodes), so it counts,
        and only when set (run folders written before it existed still resume).
        """
        d = self.model_dump(mode="json")
        # an entry without an explicit label dumps as before labels existed (resume compares)
        d["policies"] = [
            {k: v for k, v in p.items() if k != "label" or v is not None} for p in d["policies"]
        ]
        out = {
            k: d[k]
            for k in (
                "schema_version",
                "name",
                "tasks",
                "controllers",
                "policies",
                "seeds",
                "budget",
            )
        }
        if self.max_episode_tokens is not None:
            out["max_episode_tokens"] = self.max_episode_tokens
        return out

    def options_for_executor(self) -> dict[str, Any]:
        """The ``executor_options`` entry of the executor this experiment runs on."""
        name = (
            self.executor
            if self.executor != "auto"
            else ("process" if self.workers > 1 else "inprocess")
        )
        return dict(self.executor_options.get(name, {}))


def _executor_problems(exp: Experiment) -> list[str]:
    """``executor_options`` of unknown executors or options the chosen one does not take;
    endpoint caps it cannot honour."""
    import inspect

    from .. import limits
    from .registry import EXECUTORS

    name = (
        exp.executor if exp.executor != "auto" else ("process" if exp.workers > 1 else "inprocess")
    )
    if name not in EXECUTORS:  # reported by the caller
        return []
    problems = [
        f"max_inflight_per_endpoint: {p}" for p in limits.check_caps(exp.max_inflight_per_endpoint)
    ]
    unknown = sorted(set(exp.executor_options) - set(EXECUTORS))
    if unknown:
        problems.append(
            f"executor_options: {unknown} are not executors (options are given per "
            f"executor name, e.g. {{ray: {{address: auto}}}}); known: "
            f"{', '.join(EXECUTORS)}"
        )
    params = inspect.signature(EXECUTORS[name].__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        bad = sorted(set(exp.executor_options.get(name, {})) - set(params) - {"self", "workers"})
        if bad:
            problems.append(f"executor_options.{name}: {bad} are not options of that executor")
    if name == "process" and exp.max_inflight_per_endpoint and not problems:
        low = min(exp.max_inflight_per_endpoint.values())
        if exp.workers > low:
            problems.append(limits.pool_problem(exp.workers, low))
    return problems


def _family(task_id: str) -> str:
    from ..tasks import get_task

    return get_task(task_id).family


def _resolve_task(entry: str | SuiteTasks) -> list[tuple[str, str | None]]:
    """``(task_id, instance)`` cells for one ``tasks`` entry (raise ValueError if unknown)."""
    from ..tasks import all_tasks, builtin_tasks, get_task

    if isinstance(entry, SuiteTasks):
        try:
            spec = get_task(entry.suite)
        except KeyError as e:
            raise ValueError(str(e)) from None
        if not spec.is_suite:
            raise ValueError(
                f"{entry.suite!r} is a single-instance task, not a suite; list it "
                "as a plain task id (suites look like RepoScan-N10)"
            )
        if entry.instances == "all":
            return [(spec.task_id, inst) for inst in spec.instances]
        bad = [i for i in entry.instances if i not in spec.instances]
        if bad:
            hint = _close(bad[0], list(spec.instances))
            raise ValueError(
                f"suite {spec.task_id} has no instance(s) {bad}.{hint}"
                f" Known: {', '.join(spec.instances)}"
            )
        return [(spec.task_id, inst) for inst in entry.instances]
    if any(ch in entry for ch in _GLOB_CHARS):
        # Built-in ids first, so adding own or synthetic tasks never changes what an existing
        # experiment's pattern runs; a pattern no built-in id matches covers the others.
        ids = sorted(builtin_tasks())
        hits = fnmatch.filter(ids, entry)
        if not hits:
            ids = sorted(all_tasks())
            hits = fnmatch.filter(ids, entry)
        if not hits:
            stem = "".join(ch for ch in entry if ch not in _GLOB_CHARS + "]")
            raise ValueError(
                f"task pattern {entry!r} matches no task id.{_close(stem, ids)} "
                "(`pushbench tasks` lists them all)"
            )
        return [(t, None) for t in hits]
    try:
        return [(get_task(entry).task_id, None)]
    except KeyError as e:
        raise ValueError(str(e)) from None


def expand(experiment: Experiment, limit: int | None = None) -> list[EpisodeSpec]:
    """The experiment's episodes in the documented deterministic order (first ``limit`` only)."""
    cells: list[tuple[str, str | None]] = []
    for entry in experiment.tasks:
        cells += _resolve_task(entry)
    specs: list[EpisodeSpec] = []
    seen: set[str] = set()
    for seed in experiment.seeds:
        for task_id, instance in cells:
            for pol in experiment.policies:
                for ctl in experiment.controllers:
                    key = episode_key(
                        task_id, ctl, pol.name, seed, instance, params=pol.params, label=pol.label
                    )
                    if key in seen:
                        continue
                    seen.add(key)
                    specs.append(
                        EpisodeSpec(
                            task_id=task_id,
                            instance=instance,
                            controller=ctl,
                            policy=pol.name,
                            policy_params=dict(pol.params),
                            policy_label=pol.label,
                            seed=seed,
                            budget=experiment.budget,
                            key=key,
                            max_episode_tokens=experiment.max_episode_tokens,
                        )
                    )
                    if limit is not None and len(specs) >= limit:
                        return specs
    return specs


def _describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc}: {msg}" if loc else f"  {msg}")
    return "\n".join(lines)


def validate(data: dict, source: str = "experiment") -> Experiment:
    """Validate a raw mapping; errors become one :class:`ExperimentError` listing each problem."""
    if not isinstance(data, dict):
        raise ExperimentError(
            f"{source}: expected a mapping at top level, got {type(data).__name__}"
        )
    _check_size(data, source)
    try:
        return Experiment.model_validate(data)
    except ValidationError as e:
        text = _describe(e)
        sep = " " if text.count("\n") == 0 else "\n"
        raise ExperimentError(
            f"{source} is not a valid experiment:{sep}{text.strip() if sep == ' ' else text}"
        ) from None


MAX_FILE_BYTES = 1 << 20  # an experiment file is a page of YAML
MAX_NODES = 100_000  # values in the loaded document, aliases counted each time they appear


def _check_size(data: Any, source: str) -> None:
    """Refuse documents that only aliases make huge (a "billion laughs" YAML)."""
    seen, stack = 0, [data]
    while stack:
        v = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ExperimentError(
                f"{source}: the document holds more than {MAX_NODES} values "
                "(YAML aliases included); an experiment is much smaller"
            )
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set)):
            stack.extend(v)


def read_experiment_file(path: Path) -> Any:
    """The YAML document in ``path``; every way it can fail is an :class:`ExperimentError`
    (including a key given twice and an integer too long to be a seed, count or budget)."""
    if path.is_dir():
        raise ExperimentError(
            f"experiment file {str(path)!r} is a directory; give a YAML file "
            "(e.g. experiments/smoke.yaml)"
        )
    if not path.exists():
        raise ExperimentError(f"experiment file {str(path)!r} not found")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ExperimentError(
                f"{path}: {path.stat().st_size} bytes is too large for an "
                f"experiment file (limit {MAX_FILE_BYTES})"
            )
        raw = path.read_bytes()
    except OSError as e:
        raise ExperimentError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ExperimentError(
            f"{path}: not a text file (byte {e.start} is not UTF-8); give a YAML experiment file"
        ) from None
    try:
        return strict_yaml(text)
    except Refused as e:
        raise ExperimentError(f"{path}: {e}") from None
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ExperimentError(f"{path}: not valid YAML: {first}") from None
    except RecursionError:
        raise ExperimentError(f"{path}: not valid YAML: nested too deeply") from None


def load_experiment(path: str | Path, overrides: dict | None = None) -> Experiment:
    """Load ``path`` and apply ``overrides`` (field -> value; ``None`` values are ignored)."""
    path = Path(path)
    data = read_experiment_file(path)
    if isinstance(data, dict):  # a mapping override (executor_options) updates the file's mapping
        data = _merge(data, {k: v for k, v in (overrides or {}).items() if v is not None})
    return validate(data, source=str(path))


def _merge(base: dict, extra: dict) -> dict:
    """``base`` updated by ``extra``; nested mappings are merged rather than replaced."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"``, ``"0-4"`` (inclusive) or a mix like ``"0-2,7"`` -> list of ints.

    Seeds are non-negative; at most :data:`MAX_SEEDS` of them (checked before a range is
    expanded, so ``0-100000000`` fails at once).
    """
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"([0-9]{1,19})(?:\s*-\s*([0-9]{1,19}))?", part)
        if not m:
            raise ExperimentError(
                f"bad seeds {text!r}: {part!r} is not a seed or a range like "
                "0-4 (seeds are whole numbers >= 0)"
            )
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if b < a:
            raise ExperimentError(
                f"bad seeds {text!r}: the range {part!r} runs backwards (write {b}-{a})"
            )
        if len(seeds) + (b - a + 1) > MAX_SEEDS:
            raise ExperimentError(f"bad seeds {text!r}: more than {MAX_SEEDS} seeds")
        seeds += range(a, b + 1)
    if not seeds:
        raise ExperimentError(f"bad seeds {text!r}: no seed given")
    return seeds
