"""What an experiment will cost before it runs: per-episode token bounds and the estimate table.

``pushbench run EXP.yaml --estimate`` prints, per policy label and in total, the planned
episodes, expected steps, prompt and completion tokens and cost, each as expected value and a
low-high range. Without a pilot the numbers follow stated assumptions (:data:`ASSUMPTIONS`,
computed by :func:`episode_bounds`); with ``--pilot K`` the labels' finished episodes in the run
folder (K pilot episodes each, at least) replace them (:func:`pilot_bounds`). The worst case of
an episode (:attr:`Bounds.cost_high`) is also what the cost cap reserves for it while it runs
(:mod:`.costcap`).

Per episode of step budget ``B`` and target ``T`` for a model policy with ``context_tokens``
``X``, ``max_tokens`` ``C`` and ``k`` free memory turns (``k = max_memory_turns`` for the memory
baselines, else 0), with ``D`` the estimated tokens of the tool definitions and ``S`` those of
the pinned system prompt and objective (chars/4, as the context budget counts)::

    steps       low min(T, B)          expected B                high B
    calls       low min(T, B)          expected B                high B(1+k)+k
    prompt      low steps_low*(S+D)    expected B*(X+D)          high calls_high*(X+D)
    completion  low steps_low*min(C,30) expected B*min(C,150)    high calls_high*C
    cost        tokens x the price table (USD per million tokens)

``max_episode_tokens`` ``M`` clips each token figure to ``M`` (an episode cannot pass it) and
the worst-case cost to ``M`` at the higher of the two prices. ``context_tokens: null`` has no
per-call bound: its prompt high (and worst case) is unbounded unless ``M`` is set. Policies
that call no model cost nothing. Aider and Letta have their own bounds (:func:`aider_bounds`,
:func:`letta_bounds`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from .spec import EpisodeSpec

COMPLETION_EXPECTED = 150  # tokens per call: the high end measured on the local model
COMPLETION_LOW = 30  # tokens per call: the low end of the same table (docs/llm.md)
LLM_CONFIGS = {
    "llm": "LLMConfig",
    "llm-langgraph": "LangGraphConfig",
    "llm-langgraph-memory": "LangGraphConfig",
    "llm-memgpt": "MemGPTConfig",
}
MEMORY_TOOLS = {"llm-langgraph-memory": "StoreMemory", "llm-memgpt": "MemGPTMemory"}
ASSUMPTIONS = (
    "steps = the step budget B (low: the target T, one step per unit); model calls = steps "
    "(high: B(1+k)+k with k free memory turns)",
    "prompt tokens per call approach context_tokens + the tool definitions (low: the system "
    "prompt + objective + tool definitions); chars/4 estimate, as the context budget counts",
    f"completion tokens per call: {COMPLETION_EXPECTED} expected (low {COMPLETION_LOW}), at most "
    "max_tokens (high); the range measured on the local model in docs/llm.md",
    "max_episode_tokens clips every token figure; context_tokens: null is unbounded without it",
)


Triple = tuple[float, float, float]  # low, expected, high


@dataclass(frozen=True)
class Bounds:
    """Low / expected / high figures of one episode (``math.inf``: unbounded)."""

    steps: Triple
    prompt: Triple
    completion: Triple
    cost: Triple | None  # None: calls a model without a price
    llm: bool = True

    @property
    def cost_high(self) -> float | None:
        return None if self.cost is None else self.cost[2]


ZERO = Bounds((0, 0, 0), (0, 0, 0), (0, 0, 0), (0.0, 0.0, 0.0), llm=False)


def llm_config(spec: EpisodeSpec):
    """The validated LLM config of ``spec``'s policy (``None`` for a policy without a model)."""
    name = LLM_CONFIGS.get(spec.policy)
    if name is None:
        return None
    from ..policies.llm import config

    return getattr(config, name).model_validate(dict(spec.policy_params))


def _memory_tools(policy: str) -> list[dict]:
    cls = MEMORY_TOOLS.get(policy)
    if cls is None:
        return []
    from ..policies.llm import memory  # needs the langgraph extra, as the policy itself does

    return list(getattr(memory, cls).tools)


class Planner:
    """Per-episode bounds for the specs of one experiment (task facts cached per cell)."""

    def __init__(self) -> None:
        self._facts: dict[tuple, tuple[int, int, int, int]] = {}

    def facts(self, spec: EpisodeSpec, cfg) -> tuple[int, int, int, int]:
        """``(budget, target, pinned_tokens, tool_tokens)`` of ``spec``'s episode start."""
        key = (
            spec.task_id,
            spec.instance,
            spec.controller,
            spec.budget,
            spec.policy,
            spec.seed if spec.instance is None else None,
            cfg.system_prompt,
        )
        if key not in self._facts:
            from ..policies.llm.context import estimate_tokens, view_tokens
            from ..policies.llm.core import AgentCore
            from .episode import _make_env

            env = _make_env(spec.task_id, spec.controller, spec.budget)
            try:
                obs, _ = env.reset(
                    seed=spec.seed, options=env.unwrapped.reset_options(spec.instance)
                )
            finally:
                env.close()
            core = AgentCore(cfg)
            pinned = view_tokens(core.start(obs))
            tools = core.env_tools + _memory_tools(spec.policy)
            first = json.loads(obs).get("result") or {}
            self._facts[key] = (
                int(first.get("budget") or 0),
                int(first.get("target") or 0),
                pinned,
                estimate_tokens(json.dumps(tools)) if tools else 0,
            )
        return self._facts[key]

    def bounds(self, spec: EpisodeSpec) -> Bounds:
        """The no-pilot bounds of ``spec`` (module docstring formulas)."""
        if spec.policy == "aider":
            return aider_bounds(spec)
        if spec.policy == "letta":
            return letta_bounds(spec)
        cfg = llm_config(spec)
        if cfg is None:
            return ZERO
        budget, target, pinned, tools = self.facts(spec, cfg)
        k = cfg.max_memory_turns if spec.policy in MEMORY_TOOLS else 0
        c = cfg.max_tokens
        steps_lo = min(target, budget) if target else budget
        calls_hi = budget * (1 + k) + k
        per_call = math.inf if cfg.context_tokens is None else cfg.context_tokens + tools
        prompt: Triple = (steps_lo * (pinned + tools), budget * per_call, calls_hi * per_call)
        completion: Triple
        completion = (
            steps_lo * min(c, COMPLETION_LOW),
            budget * min(c, COMPLETION_EXPECTED),
            calls_hi * c,
        )
        cap = spec.max_episode_tokens
        if cap is not None:
            prompt = _triple(min(x, cap) for x in prompt)
            completion = _triple(min(x, cap) for x in completion)
        price = cfg.price()
        cost: Triple | None = None
        if price is not None:
            cost = _triple(
                _cost(p, q, price.input_per_mtok, price.output_per_mtok)
                for p, q in zip(prompt, completion, strict=True)
            )
            if cap is not None:
                worst = cap * max(price.input_per_mtok, price.output_per_mtok) / 1e6
                cost = (min(cost[0], worst), min(cost[1], worst), min(cost[2], worst))
        return Bounds((steps_lo, budget, budget), prompt, completion, cost)


AIDER_OUTPUT_TOKENS = 4096  # max_output_tokens of the model metadata the harness writes


def aider_bounds(spec: EpisodeSpec) -> Bounds:
    """Aider (:mod:`pushbench.policies.aider`): every model request costs at least one step, so
    an episode of budget ``B`` makes at most ``B`` requests, each of at most ``context``
    prompt and :data:`AIDER_OUTPUT_TOKENS` completion tokens (low: one request, expected: one
    per unit of the target). No price table: the cost is unknown (``None``); ``oracle-edit``
    calls no model and costs nothing."""
    params = dict(spec.policy_params)
    if params.get("model_server") is not None:
        return ZERO
    from ..tasks import get_task

    task = get_task(spec.task_id)
    budget = int(spec.budget or task.budget)
    context = int(params.get("context", 32768))
    steps = (float(min(task.target, budget)), float(budget), float(budget))
    requests = (1.0, float(min(task.target, budget)), float(budget))
    return Bounds(
        steps,
        _triple(r * context for r in requests),
        _triple(r * AIDER_OUTPUT_TOKENS for r in requests),
        None,
    )


def _triple(values: Iterable[float]) -> Triple:
    """Three figures as a typed tuple (low, expected, high); ValueError if not three."""
    low, expected, high = values
    return low, expected, high


def letta_bounds(spec: EpisodeSpec) -> Bounds:
    """Letta (:mod:`pushbench.policies.letta`): one model request per Letta step; a step is a
    PushBench call (one step of budget ``B``) or one of Letta's memory calls (free). Requests:
    low ``min(T, B)`` (one call per unit, no memory call), expected ``2B`` (a memory note per
    PushBench call, the MemGPT pattern), high the driver's own limit (``MAX_TURNS`` turns of
    ``STEPS_PER_TURN`` steps). Per request at most the agent's context window in prompt tokens
    (low: Letta's system prompt and tools, :data:`~pushbench.policies.letta.PROMPT_FLOOR`) and
    its ``max_tokens`` in completion tokens (expected :data:`COMPLETION_EXPECTED`). Cost from
    ``prices`` (``None`` without one); ``model_server`` calls no model and costs nothing."""
    from ..policies import letta as L
    from ..tasks import get_task

    params = L.LettaParams.model_validate(dict(spec.policy_params))
    if params.model_server is not None:
        return ZERO
    task = get_task(spec.task_id)
    budget = int(spec.budget or task.budget)
    steps = (float(min(task.target, budget)), float(budget), float(budget))
    requests = (steps[0], 2.0 * budget, float(L.MAX_TURNS * L.STEPS_PER_TURN))
    prompt = (
        requests[0] * L.PROMPT_FLOOR,
        requests[1] * L.CONTEXT_WINDOW,
        requests[2] * L.CONTEXT_WINDOW,
    )
    completion = (
        requests[0] * min(L.MAX_TOKENS, COMPLETION_LOW),
        requests[1] * min(L.MAX_TOKENS, COMPLETION_EXPECTED),
        requests[2] * L.MAX_TOKENS,
    )
    price = params.price()
    cost = (
        None
        if price is None
        else _triple(
            _cost(p, q, price.input_per_mtok, price.output_per_mtok)
            for p, q in zip(prompt, completion, strict=True)
        )
    )
    return Bounds(steps, prompt, completion, cost)


def _cost(prompt: float, completion: float, pin: float, pout: float) -> float:
    if math.isinf(prompt) or math.isinf(completion):
        return math.inf
    return (prompt * pin + completion * pout) / 1e6


def pilot_bounds(base: Bounds, spec: EpisodeSpec, lines: list[dict]) -> Bounds:
    """``spec``'s bounds extrapolated from its label's finished ``lines`` (the pilot): per
    episode, steps scale with the budget as ``steps_used / budget`` did, and prompt and
    completion tokens per step are the pilot's (expected: mean; low/high: min/max)."""
    cfg = llm_config(spec)
    runs = [x for x in lines if int(x.get("steps_used") or 0) > 0 and x.get("budget")]
    if cfg is None or not runs:
        return base
    budget = base.steps[1]
    share = [int(x["steps_used"]) / int(x["budget"]) for x in runs]
    usage = [x.get("usage") or {} for x in runs]
    tp = [
        int(u.get("prompt_tokens") or 0) / int(x["steps_used"])
        for u, x in zip(usage, runs, strict=True)
    ]
    tc = [
        int(u.get("completion_tokens") or 0) / int(x["steps_used"])
        for u, x in zip(usage, runs, strict=True)
    ]
    steps = (budget * min(share), budget * sum(share) / len(share), budget * max(share))
    prompt = (steps[0] * min(tp), steps[1] * sum(tp) / len(tp), steps[2] * max(tp))
    completion = (steps[0] * min(tc), steps[1] * sum(tc) / len(tc), steps[2] * max(tc))
    price = cfg.price()
    cost = (
        None
        if price is None
        else _triple(
            _cost(p, q, price.input_per_mtok, price.output_per_mtok)
            for p, q in zip(prompt, completion, strict=True)
        )
    )
    return replace(base, steps=steps, prompt=prompt, completion=completion, cost=cost)


def finished_bounds(line: dict) -> Bounds:
    """A finished episode's own figures (low = expected = high)."""
    u = line.get("usage") or {}
    s, p, c = (
        float(line.get("steps_used") or 0),
        float(u.get("prompt_tokens") or 0),
        float(u.get("completion_tokens") or 0),
    )
    cost = u.get("cost_usd")
    return Bounds(
        (s, s, s),
        (p, p, p),
        (c, c, c),
        None if cost is None and line.get("usage") else (float(cost or 0),) * 3,
        llm=bool(line.get("usage")),
    )


def _add(a, b):
    if a is None or b is None:
        return None
    return tuple(x + y for x, y in zip(a, b, strict=True))


def estimate_rows(
    specs: list[EpisodeSpec],
    done: dict[str, dict],
    pilot: bool = False,
    planner: Planner | None = None,
) -> list[dict]:
    """One row per policy label (expansion order) plus a ``TOTAL`` row.

    Row keys: ``label``, ``planned``, ``finished``, ``basis`` (``assumptions`` or ``pilot (n
    episodes)``), ``steps``, ``prompt_tokens``, ``completion_tokens`` and ``cost_usd`` as
    ``(low, expected, high)`` (``cost_usd`` ``None`` when a model has no price). Finished
    episodes (``done``: key -> line) count with their recorded figures; with ``pilot`` the others
    are extrapolated from their label's finished episodes (:func:`pilot_bounds`).
    """
    from ..policies.identity import policy_label

    planner = planner or Planner()
    labels: dict[str, list[EpisodeSpec]] = {}
    for s in specs:
        labels.setdefault(policy_label(s.policy, s.policy_params, s.policy_label), []).append(s)
    rows: list[dict[str, Any]] = []
    zero = (0.0, 0.0, 0.0)
    for label, group in labels.items():
        finished = [done[s.key] for s in group if s.key in done]
        agg = {"steps": zero, "prompt_tokens": zero, "completion_tokens": zero, "cost_usd": zero}
        for s in group:
            if s.key in done:
                b = finished_bounds(done[s.key])
            else:
                b = planner.bounds(s)
                if pilot and b.llm:
                    b = pilot_bounds(b, s, finished)
            for name, part in (
                ("steps", b.steps),
                ("prompt_tokens", b.prompt),
                ("completion_tokens", b.completion),
                ("cost_usd", b.cost),
            ):
                agg[name] = _add(agg[name], part)
        basis = f"pilot ({len(finished)} episodes)" if pilot and finished else "assumptions"
        rows.append(
            {
                "label": label,
                "planned": len(group),
                "finished": len(finished),
                "basis": basis,
                **agg,
            }
        )
    total = {
        "label": "TOTAL",
        "planned": len(specs),
        "finished": sum(r["finished"] for r in rows),
        "basis": "",
    }
    for name in ("steps", "prompt_tokens", "completion_tokens", "cost_usd"):
        acc = zero
        for r in rows:
            acc = _add(acc, r[name])
        total[name] = acc
    return rows + [total]


def _fmt(v: float, money: bool) -> str:
    if math.isinf(v):
        return "unbounded"
    return f"${v:,.2f}" if money else f"{v:,.0f}"


def pilot_keys(specs: list[EpisodeSpec], k: int) -> set[str]:
    """The pilot: the first ``k`` episodes of each policy label in expansion order."""
    from ..policies.identity import policy_label

    seen: dict[str, int] = {}
    keys: set[str] = set()
    for s in specs:
        label = policy_label(s.policy, s.policy_params, s.policy_label)
        if seen.get(label, 0) < k:
            seen[label] = seen.get(label, 0) + 1
            keys.add(s.key)
    return keys


_FIGURES = (
    ("steps", "steps", False),
    ("prompt tokens", "prompt_tokens", False),
    ("completion tokens", "completion_tokens", False),
    ("cost USD", "cost_usd", True),
)


def print_estimate(rows: list[dict], console, pilot: bool, cap: float | None = None) -> None:
    """The estimate, then the assumptions (or the pilot's basis) and the cap.

    One block per policy label (labels are long: each has a line of its own) with its figures
    as rows and expected, low and high as columns, so the whole estimate fits an 80-column
    terminal without cutting a number or a name.
    """
    from rich.markup import escape
    from rich.text import Text

    from .. import terminal

    console.print(
        Text("cost estimate" + (" from the pilot" if pilot else ", no model called"), style="bold")
    )
    for r in rows:
        head = Text(r["label"], style="bold")
        head.append(
            f"  {r['planned']} episodes, {r['finished']} finished"
            + (f"; basis: {r['basis']}" if r["basis"] else ""),
            style="",
        )
        console.print(head, soft_wrap=False, overflow="fold")
        table = terminal.table()
        table.add_column("", no_wrap=True)
        for col in ("expected", "low", "high"):
            table.add_column(col, justify="right", no_wrap=True)
        for name, key, money in _FIGURES:
            t = r[key]
            cells = ["unpriced"] * 3 if t is None else [_fmt(t[i], money) for i in (1, 0, 2)]
            table.add_row(escape(name), *cells)
        console.print(table)
    if pilot:
        console.print(
            "Finished episodes count with their recorded usage; the rest are "
            "extrapolated per label from its finished episodes: steps scale with each "
            "task's budget as steps_used/budget did, tokens per step as measured "
            "(expected: mean, range: min-max).",
            highlight=False,
        )
    else:
        console.print("Assumptions (no model was called):", highlight=False)
        for a in ASSUMPTIONS:
            console.print(f"  - {a}", highlight=False)
    total = rows[-1]["cost_usd"] if rows else None
    if cap is not None and total is not None:
        console.print(
            f"cost cap ${cap:,.2f}: the expected total is {total[1] / cap:.0%} of it, "
            f"the worst case {total[2] / cap:.0%}"
            if not math.isinf(total[2])
            else f"cost cap ${cap:,.2f}: the worst case is unbounded",
            highlight=False,
        )
