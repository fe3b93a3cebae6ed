"""Episode lines -> one flat table (the frame every table, delta and plot is computed from).

Input is the runner's ``DIR/episodes.jsonl`` (one finished episode per line: the record without
``calls`` and the controller's per-step trace, with per-episode ``metrics`` from
:mod:`pushbench.metrics`); the MCP black-box path writes the same format.

A policy's identity is its **label** (:mod:`pushbench.policies.identity`): the frame's
``policy`` column holds it (``policy_name`` the bare name), so different models or parameter
sets are never pooled. Lines written before labels existed get the label derived from name and
params.

Family versions (:func:`pushbench.records.version_of`; a line without one is version 1) are
never pooled either: when a frame holds more than one version of a family
(:func:`mixed_versions`), the summary and delta tables group by ``family_version`` too
(:func:`versioned`) and name a family ``reposcan v2`` (:func:`family_labels`). With one version
per family they have no such column, so their bytes are what they were before versions existed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from .. import metrics as _metrics
from .. import records
from ..controllers.catalogue import catalogue
from ..metrics import NOT_AGENT_OUTCOMES
from ..policies.identity import label_of

# Baseline first: "none" (no controller), then the catalogue's order (controllers/*.yaml).
CONTROLLER_ORDER = ["none", *catalogue()]
# The STATEQGP ablation rows (the catalogue's ``ablation_of: stateqgp``).
ABLATION_CONTROLLERS = tuple(n for n, c in catalogue().items() if c.ablation_of == "stateqgp")
USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "cost_usd")
ANYTIME_COLUMNS = ("steps_to_25", "steps_to_50", "steps_to_75", "steps_to_100")

# Per-episode metrics copied from the line's ``metrics`` (missing on older lines -> NaN).
_METRIC_COLUMNS = (
    "success",
    "valid_count",
    "submissions",
    "duplicate_submit_rate",
    "proposed_duplicate_rate",
    "precision",
    "rejected",
    "valid_per_step",
    "false_completion",
    "false_claim",
    "honest_stop",
    "premature_stop",
    "budget_exhausted",
    "reported_count_error",
    "over_claim",
    "gated_over_claim",
    "invalid_actions",
    "verifier_recoveries",
    "blocked_completions",
)
EPISODE_COLUMNS = [
    "key",
    "family",
    "family_version",
    "policy",
    "policy_name",
    "simulated",
    "controller",
    "components",
    "target",
    "task_id",
    "instance",
    "seed",
    *_METRIC_COLUMNS,
    "interventions_total",
    "steps_used",
    "budget",
    "terminated_by",
    "reported_count",
    *ANYTIME_COLUMNS,
    "tampered",
    "incomplete",
]
BOOL_METRICS = ("success", "false_completion", "premature_stop", "budget_exhausted")
# Defined on every line that has them; 0/1 floats with NaN where an older line lacks them.
FLAG_METRICS = ("false_claim", "honest_stop")


# ----- loading ----------------------------------------------------------------------------
def load_episodes(path: str | Path) -> list[dict[str, Any]]:
    """Episode lines from ``path`` (a run directory holding ``episodes.jsonl``, or the file).

    Read by the run-folder rules (:func:`pushbench.records.read_lines`: blank lines ignored, an
    unreadable line skipped with a warning naming it, a torn last line dropped with a warning),
    then lines sharing a ``key`` deduplicated keeping the first (the one resume treats as
    finished; a line without a key gets :func:`fallback_key`). Raises ``FileNotFoundError``
    when there is no such file.
    """
    path = Path(path)
    file = path / "episodes.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise FileNotFoundError(f"no episodes file at {file}")
    return records.unique_by_key(
        records.read_lines(file), key=lambda ep: ep.get("key") or fallback_key(ep)
    )


def fallback_key(ep: dict[str, Any]) -> str:
    """A stable key for a line written without one."""
    raw = json.dumps(
        [
            ep.get("task_id"),
            ep.get("instance"),
            controller_name(ep),
            label_of(ep.get("policy")),
            ep.get("seed"),
        ]
    )
    return "nokey-" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def controller_name(ep: dict[str, Any]) -> str:
    c = ep.get("controller")
    if isinstance(c, dict):
        return str(c.get("name") or "none")
    return str(c) if c else "none"


def policy_name(ep: dict[str, Any]) -> str:
    """The bare policy name of a line (not its identity: see :func:`label_of`)."""
    p = ep.get("policy")
    if isinstance(p, dict):
        return str(p.get("name") or "unknown")
    return str(p) if p else "unknown"


def is_simulated(ep: dict[str, Any]) -> bool:
    if "simulated" in ep:
        return bool(ep["simulated"])
    p = ep.get("policy")
    return bool(p.get("simulated")) if isinstance(p, dict) else False


def _anytime(met: dict[str, Any]) -> list[Any]:
    steps = met.get("anytime_steps")
    if not isinstance(steps, (list, tuple)) or len(steps) != len(ANYTIME_COLUMNS):
        return [None] * len(ANYTIME_COLUMNS)
    return list(steps)


# ----- family versions ------------------------------------------------------------------
VERSION = "family_version"


def mixed_versions(df: pd.DataFrame) -> dict[str, list[int]]:
    """``{family: [versions]}`` of the families ``df`` holds in more than one version."""
    if VERSION not in df or df.empty:
        return {}
    seen = df.groupby("family", sort=True)[VERSION].unique()
    return {str(f): sorted(int(x) for x in v) for f, v in seen.items() if len(v) > 1}


def versioned(columns: list[str], df: pd.DataFrame) -> list[str]:
    """``columns`` with ``family_version`` after ``family`` when ``df`` mixes versions."""
    if not mixed_versions(df) or VERSION in columns:
        return list(columns)
    at = columns.index("family") + 1
    return [*columns[:at], VERSION, *columns[at:]]


def family_labels(df: pd.DataFrame) -> pd.Series:
    """The family of each row as tables show it: ``reposcan``, or ``reposcan v2`` where the
    table has a ``family_version`` column (only tables of a frame that mixes versions do; the
    episodes frame always has it, so ask :func:`mixed_versions` first there)."""
    if VERSION not in df:
        return df["family"]
    return df["family"].astype(str) + " v" + df[VERSION].astype(str)


def labelled(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` for display: ``family`` as :func:`family_labels`, no ``family_version``."""
    if VERSION not in table:
        return table
    return table.assign(family=family_labels(table)).drop(columns=VERSION)


def version_note(df: pd.DataFrame) -> str | None:
    """One line saying the frame mixes versions and that no row pools them (None if not)."""
    mixed = mixed_versions(df)
    if not mixed:
        return None
    counts = df.groupby(["family", VERSION]).size()
    parts = "; ".join(
        f"{f} " + ", ".join(f"v{v}: {int(counts[(f, v)])} episodes" for v in vs)
        for f, vs in mixed.items()
    )
    return (
        f"This run folder holds more than one family version ({parts}): every summary and "
        "delta row is one version, never pooled."
    )


# ----- the flat episode table -------------------------------------------------------------
def episodes_frame(episodes: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per episode with flat columns (:data:`EPISODE_COLUMNS`, plus ``progress``).

    Metrics come from the line's ``metrics`` (computed from ``calls`` when a full record
    without them is given); a metric missing from an older line is NaN. Undefined values (no
    submissions, not ended by ``final``) are NaN. ``steps_to_25`` .. ``steps_to_100`` are the
    anytime quartiles (steps to reach 25/50/75/100% of the target; NaN if never reached).
    ``tampered`` marks lines a fresh verifier disagreed with (excluded from every metric by the
    tables); ``incomplete`` black-box runs that never ended. LLM usage columns
    (``prompt_tokens``, ``completion_tokens``, ``cost_usd``) are added when any episode has
    ``usage``, ``out_of_band_edits`` when any black-box line counts them. ``progress`` (verified
    count after each step) is kept as a list for the anytime plot; it is never written to CSV.
    Rows are sorted.
    """
    rows = []
    usage_seen = oob_seen = False
    for ep in episodes:
        met = ep.get("metrics")
        if met is None:
            if "calls" not in ep:
                raise ValueError(f"episode {ep.get('key')!r} has neither metrics nor calls")
            met = _metrics.episode_metrics(ep)
        ctrl = ep.get("controller")
        comps = ctrl.get("components") if isinstance(ctrl, dict) else None
        inter = met.get("interventions") or {}
        row: dict[str, Any] = {
            "key": ep.get("key") or fallback_key(ep),
            "family": ep.get("family", ""),
            "family_version": records.version_of(ep),
            "policy": label_of(ep.get("policy")),
            "policy_name": policy_name(ep),
            "simulated": is_simulated(ep),
            "controller": controller_name(ep),
            "components": "+".join(comps) if comps else "",
            "target": int(ep["target"]),
            "task_id": ep.get("task_id", ""),
            "instance": ep.get("instance") or ep.get("task_id", ""),
            "seed": ep.get("seed"),
            "steps_used": met.get("steps_used", ep.get("steps_used")),
            "budget": ep.get("budget"),
            "terminated_by": ep.get("terminated_by"),
            "reported_count": ep.get("reported_count"),
            "interventions_total": int(sum(inter.values())),
            "tampered": bool(ep.get("tampered")),
            "incomplete": bool(ep.get("incomplete")),
            "progress": list(ep.get("progress") or []),
        }
        for name in _METRIC_COLUMNS:
            row[name] = met.get(name)
        row.update(zip(ANYTIME_COLUMNS, _anytime(met), strict=True))
        usage = ep.get("usage")
        if isinstance(usage, dict):
            usage_seen = True
            for col in USAGE_COLUMNS:
                row[col] = usage.get(col)
        bb = ep.get("blackbox")
        if isinstance(bb, dict) and "out_of_band_edits_count" in bb:
            oob_seen = True
            row["out_of_band_edits"] = bb.get("out_of_band_edits_count")
        rows.append(row)
    extra = (list(USAGE_COLUMNS) if usage_seen else []) + (
        ["out_of_band_edits"] if oob_seen else []
    )
    df = pd.DataFrame(rows, columns=EPISODE_COLUMNS + extra + ["progress"])
    for col in BOOL_METRICS + ("simulated", "tampered", "incomplete"):
        # missing, null and NaN are False (pandas deprecates fillna(False) on a float column)
        df[col] = df[col].map(_flag).astype(bool)
    numeric = (
        [c for c in _METRIC_COLUMNS if c not in BOOL_METRICS]
        + list(ANYTIME_COLUMNS)
        + extra
        + ["steps_used", "budget", "reported_count"]
    )
    for col in numeric:  # booleans count as 0/1; text that is not a number is NaN
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    df["seed"] = pd.to_numeric(df["seed"], errors="coerce").astype("Int64")
    return sort_frame(
        df, ["family", "policy", "controller", "target", "task_id", "instance", "seed", "key"]
    )


def _flag(v: Any) -> bool:
    return bool(v) if pd.notna(v) else False


def controller_rank(name: str) -> tuple[int, str]:
    return (
        (CONTROLLER_ORDER.index(name), "")
        if name in CONTROLLER_ORDER
        else (len(CONTROLLER_ORDER), name)
    )


def order_controllers(names: Iterable[str]) -> list[str]:
    """Controller names baseline-first (:data:`CONTROLLER_ORDER`, then alphabetical)."""
    return sorted(set(names), key=controller_rank)


def sort_frame(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Stable sort by ``by`` (which names ``controller``) with controllers baseline-first."""
    if df.empty:
        return df.reset_index(drop=True)
    keyed = df.assign(_crank=[controller_rank(c) for c in df["controller"]])
    by = ["_crank" if c == "controller" else c for c in by]
    return keyed.sort_values(by, kind="mergesort").drop(columns="_crank").reset_index(drop=True)


def as_frame(data: pd.DataFrame | Iterable[dict[str, Any]]) -> pd.DataFrame:
    return data if isinstance(data, pd.DataFrame) else episodes_frame(data)


def scored(df: pd.DataFrame) -> pd.DataFrame:
    """The episodes that count as agent outcomes: not a backend failure, not cut by a spend
    limit (``cost_cap``, ``token_cap``), not tampered."""
    if df.empty:
        return df
    return df[~df["terminated_by"].isin(NOT_AGENT_OUTCOMES) & ~df["tampered"]]
