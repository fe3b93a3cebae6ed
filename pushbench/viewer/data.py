"""What the viewer shows, gathered from a run folder with the existing readers.

Everything here is read from the run folder through the analysis and runner modules (no parsing
of our own): episode lines via :func:`pushbench.analysis.frame.load_episodes` and
:func:`~pushbench.analysis.frame.episodes_frame`, outcome classes via
:func:`pushbench.analysis.failures.failure_class`, run facts via
:func:`pushbench.runner.runinfo.run_info`, full records via
:func:`pushbench.runner.rundir.load_trace`. The summary table and paired deltas are the run's
own ``summary.csv`` / ``paired_deltas.csv`` when they are at least as new as
``episodes.jsonl`` (what ``pushbench run``/``report``/``evaluate`` wrote), else computed here by
:func:`~pushbench.analysis.summary.summary_table` and
:func:`~pushbench.analysis.deltas.paired_deltas` (the source is shown on the page).

All values are plain JSON (NaN becomes ``null``); nothing is added that the records do not hold
except derived counts that say so (the duplicate count is ``duplicate_submit_rate x
submissions``).
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import pandas as pd

from ..analysis.failures import failure_class
from ..analysis.frame import episodes_frame, fallback_key, load_episodes
from ..analysis.report_md import FIGURES
from ..runner.runinfo import run_info

MAX_LISTED = 500  # missing / raised episodes listed one by one on the overview
PAIR_KEY = ("policy", "task_id", "instance", "target", "seed")  # analysis.deltas.MATCH + label
LIST_COLUMNS = (
    "key",
    "file",
    "family",
    "policy",
    "simulated",
    "controller",
    "target",
    "task_id",
    "instance",
    "seed",
    "outcome",
    "valid_count",
    "steps_used",
    "budget",
    "duplicates",
    "interventions",
    "reported_count",
    "terminated_by",
    "pair",
)
_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def plain(value):
    """``value`` as plain JSON data: numpy scalars unwrapped, NaN/inf/NA -> ``None``."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):  # numpy scalar
        return plain(value.item())
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


def file_stem(key: str) -> str:
    """The data-file name of an episode: its key when that is a safe name, else a hash of it."""
    if _SAFE_NAME.fullmatch(key):
        return key
    return "h-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def outcome(row) -> str:
    """``success`` or the failure class of :func:`pushbench.analysis.failures.failure_class`."""
    cls = failure_class(row)
    return "success" if cls is None else cls


def _table(df: pd.DataFrame) -> dict:
    return {
        "columns": [str(c) for c in df.columns],
        "rows": [plain(list(r)) for r in df.itertuples(index=False, name=None)],
    }


def _fresh_csv(run_dir: Path, name: str) -> pd.DataFrame | None:
    csv, lines = run_dir / name, run_dir / "episodes.jsonl"
    if not csv.is_file() or not lines.is_file():
        return None
    if csv.stat().st_mtime < lines.stat().st_mtime:
        return None
    try:
        return pd.read_csv(csv)
    except (ValueError, OSError):
        return None


def _summary_and_deltas(run_dir: Path, df: pd.DataFrame) -> tuple[dict, dict]:
    summary, deltas = _fresh_csv(run_dir, "summary.csv"), _fresh_csv(run_dir, "paired_deltas.csv")
    if summary is not None and deltas is not None:
        src = "summary.csv and paired_deltas.csv of the run folder (written by the run's report)"
    else:
        from ..analysis.deltas import paired_deltas
        from ..analysis.summary import summary_table

        summary = summary_table(df, steps_reference=False)
        deltas = paired_deltas(df)
        src = (
            "computed by the viewer from episodes.jsonl (no up-to-date summary.csv; "
            "steps_ratio needs `pushbench report`)"
        )
    return {**_table(summary), "source": src}, {**_table(deltas), "source": src}


def gather(run_dir: str | Path) -> tuple[dict, dict, list[dict], pd.DataFrame]:
    """``(overview, episode_list, lines, frame)`` for ``run_dir``.

    ``lines`` are the episode lines in frame order; raises ``FileNotFoundError`` when there is
    no ``episodes.jsonl``.
    """
    run_dir = Path(run_dir)
    lines = load_episodes(run_dir)
    df = episodes_frame(lines)
    by_key = {ln.get("key") or fallback_key(ln): ln for ln in lines}
    ordered = [by_key[k] for k in df["key"]]  # the frame's keys are these lines' keys
    outcomes = [outcome(r) for _, r in df.iterrows()]
    df = df.assign(outcome=outcomes)
    groups: dict[tuple, int] = {}
    pair_ids = [
        groups.setdefault(tuple(plain(r[c]) for c in PAIR_KEY), len(groups))
        for _, r in df[list(PAIR_KEY)].iterrows()
    ]
    df = df.assign(pair=pair_ids)
    rows = []
    for r, pid in zip(df.itertuples(index=False), pair_ids, strict=True):
        rate, subs = r.duplicate_submit_rate, r.submissions
        dup = None if pd.isna(rate) or pd.isna(subs) else int(round(rate * subs))
        rows.append(
            plain(
                [
                    r.key,
                    file_stem(r.key),
                    r.family,
                    r.policy,
                    r.simulated,
                    r.controller,
                    r.target,
                    r.task_id,
                    r.instance,
                    r.seed,
                    r.outcome,
                    r.valid_count,
                    r.steps_used,
                    r.budget,
                    dup,
                    r.interventions_total,
                    r.reported_count,
                    r.terminated_by,
                    pid,
                ]
            )
        )
    episode_list = {"columns": list(LIST_COLUMNS), "rows": rows}
    overview = _overview(run_dir, df, ordered)
    overview["summary"], overview["deltas"] = _summary_and_deltas(run_dir, df)
    cond = _fresh_csv(run_dir, "condition_deltas.csv")  # evaluate: checklist - default
    overview["condition_deltas"] = (
        None
        if cond is None
        else {
            **_table(cond),
            "source": "condition_deltas.csv of the run folder (pushbench evaluate)",
        }
    )
    return overview, episode_list, ordered, df


def _overview(run_dir: Path, df: pd.DataFrame, lines: list[dict]) -> dict:
    info = run_info(run_dir)
    finished = set(df["key"])
    classes = df["outcome"].value_counts()
    tampered = [
        {
            "key": k,
            "file": file_stem(k),
            "task_id": ln.get("task_id"),
            "reasons": ln.get("tamper_reasons") or [],
        }
        for k, ln in zip(df["key"], lines, strict=True)
        if ln.get("tampered")
    ]
    backend = [
        {
            "key": k,
            "file": file_stem(k),
            "task_id": ln.get("task_id"),
            "error": _error_text(ln.get("error")),
        }
        for k, t, ln in zip(df["key"], df["terminated_by"], lines, strict=True)
        if t == "error"
    ]
    out: dict = {
        "run_dir": str(run_dir.resolve()),
        "n_episodes": len(df),
        "outcomes": {str(k): int(v) for k, v in classes.items()},
        "tampered": tampered,
        "backend_errors": backend[:MAX_LISTED],
        "n_backend_errors": len(backend),
        "n_incomplete": int(df["incomplete"].sum()),
        "simulated_policies": sorted(set(df.loc[df["simulated"], "policy"])),
        "figures": [
            {"file": name, "title": title} for name, title in FIGURES if (run_dir / name).is_file()
        ],
        "info": None,
    }
    if info is not None:
        planned = info.get("planned_episodes")
        missing = [p for p in planned if p["key"] not in finished] if planned is not None else None
        raised = [
            {
                "key": r.get("key"),
                "task_id": r.get("task_id"),
                "controller": (r.get("controller") or {}).get("name"),
                "policy": (r.get("policy") or {}).get("label")
                or (r.get("policy") or {}).get("name"),
                "seed": r.get("seed"),
                "error": _last_line(r.get("error")),
            }
            for r in info.get("raised", [])
            if r.get("key") not in finished
        ]
        out["info"] = plain(
            {
                "experiment": info["experiment"],
                "packages": info.get("packages"),
                "git": info.get("git"),
                "other_revisions": info.get("other_revisions"),
                "invocations": info.get("invocations"),
                "planned": info.get("planned"),
                "plan_problem": info.get("plan_problem"),
                "missing": missing[:MAX_LISTED] if missing is not None else None,
                "n_missing": len(missing) if missing is not None else None,
                "raised": raised[:MAX_LISTED],
                "n_raised": len(raised),
            }
        )
    return out


def _error_text(err) -> str:
    """One line about a backend failure (``record["error"]`` is ``{type, message, ...}``)."""
    if isinstance(err, dict):
        return _last_line(f"{err.get('type', '')}: {err.get('message', '')}".strip(": "))
    return _last_line(err)


def _last_line(text) -> str:
    lines = [x for x in str(text or "").strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else ""
