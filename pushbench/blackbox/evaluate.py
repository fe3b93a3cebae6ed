"""Black-box agents (coding CLIs over MCP): how their runs are read, audited and scored.

A black-box run is one ``pushbench mcp`` server process writing a run directory::

    run.json        what was started: task, seed, controller, condition, agent label, versions
    episode.json    the full episode record, rewritten atomically after every tool call
    trace.jsonl     one line per MCP tool call (proposed call, observation, reward, info),
                    each carrying ``prev``: the sha256 of the line before (a digest chain)
    server.log      the server's log

:func:`records_from_run_dirs` turns run directories into the episode lines the runner writes to
``episodes.jsonl`` (record minus ``calls`` and controller steps), so black-box rows sit beside
controlled ones in one report. Numbers are recomputed from the stored calls with
:mod:`pushbench.metrics` (never copied from the stored summary), and the labels (policy,
condition, key) come from ``run.json``. A run whose episode never ended (agent stopped calling,
harness timeout, server killed) keeps ``terminated_by: None`` and gets ``incomplete: True``.

Records are evidence, not claims: :mod:`pushbench.blackbox.audit` replays and cross-checks every run
(stored verdicts, counts, steps, the trace's digest chain). A run with any disagreement gets
``tampered: True`` and ``tamper_reasons`` (short strings) on its record and episode line; the
report leaves tampered runs out of every metric and lists them. Out-of-band edits of a live
workspace that the server saw are in ``blackbox.out_of_band_edits`` (the episode line keeps
only ``blackbox.out_of_band_edits_count``).

The *condition* names the prompt the agent was given (``default`` or ``checklist``); it becomes
the policy-name suffix (``blackbox-mcp:checklist``, or ``blackbox-mcp:<agent>:checklist`` with
an agent label), so conditions are separate report rows, and :func:`condition_deltas` gives the
paired ``checklist - default`` deltas.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from . import audit
from .prompts import PROMPTS, prompt_text  # noqa: F401  (the prompts of black-box runs)
from .. import errors, metrics
from ..records import dumps_line, encode_trace, episode_line

RUN_SCHEMA_VERSION = 2  # 2: trace.jsonl is a digest chain whose head episode.json records
RUN_KIND = "pushbench-blackbox-run"
POLICY_PREFIX = "blackbox-mcp"
RUN_FILE, EPISODE_FILE = "run.json", "episode.json"
TRACE_FILE, LOG_FILE = "trace.jsonl", "server.log"
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

RunDirError = errors.RunDirError  # a run directory cannot be evaluated (message says why)


def check_label(kind: str, value: str) -> str:
    if not LABEL_RE.match(value):
        raise ValueError(f"{kind} {value!r} must be 1-64 characters of letters, digits, '.', "
                         "'_' or '-', starting with a letter or digit")
    return value


def policy_name(condition: str, agent: str | None = None) -> str:
    """``blackbox-mcp[:agent]:condition``: one report row per agent and prompt condition."""
    return ":".join([POLICY_PREFIX, *([agent] if agent else []), condition])


def describe_policy(condition: str, agent: str | None, seed: int | None) -> dict:
    """What the record stores under ``policy`` for a black-box run (the label is the name,
    which already carries the agent and the condition)."""
    name = policy_name(condition, agent)
    return {"name": name, "label": name, "simulated": False, "seed": seed,
            "params": {"transport": "mcp-stdio", "condition": condition, "agent": agent}}


# ----- reading run directories ------------------------------------------------------------
def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(f"{path.parent}: no {path.name} (is this a `pushbench mcp` run "
                          "directory, and did the server start?)") from None
    except ValueError as e:
        raise RunDirError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data


def record_from_run_dir(run_dir: str | Path) -> dict:
    """The full episode record of one run directory, with derived numbers and run labels.

    ``metrics``, ``valid_count``, ``success`` and ``steps_used`` are recomputed from ``calls``;
    ``policy``, ``condition``, ``simulated`` and ``key`` come from ``run.json``. The run is
    audited (:func:`pushbench.blackbox.audit.audit_run`): ``tampered`` and ``tamper_reasons`` say whether
    anything disagreed (stored summary fields that differ from the recomputation count too;
    they are also listed in ``blackbox.stored_mismatch``).
    """
    from ..envs.base import RECORD_SCHEMA_VERSION
    from ..runner.episode import episode_key

    run_dir = Path(run_dir)
    run = _read_json(run_dir / RUN_FILE)
    record = _read_json(run_dir / EPISODE_FILE)
    if run.get("kind") != RUN_KIND or run.get("schema_version") != RUN_SCHEMA_VERSION:
        raise RunDirError(f"{run_dir}/{RUN_FILE}: not a schema-{RUN_SCHEMA_VERSION} "
                          f"{RUN_KIND} manifest")
    if record.get("schema_version") != RECORD_SCHEMA_VERSION:
        raise RunDirError(f"{run_dir}/{EPISODE_FILE}: record schema_version "
                          f"{record.get('schema_version')!r}, expected {RECORD_SCHEMA_VERSION}")
    for field in ("calls", "target", "budget", "task_id"):
        if field not in record:
            raise RunDirError(f"{run_dir}/{EPISODE_FILE}: missing {field!r}")
    for field, kind in (("calls", list), ("target", int), ("budget", int)):
        if not isinstance(record[field], kind) or isinstance(record[field], bool):
            raise RunDirError(f"{run_dir}/{EPISODE_FILE}: {field!r} is a "
                              f"{type(record[field]).__name__}, expected {kind.__name__}")
    for field, run_field in (("task_id", "task"), ("seed", "seed")):
        if record.get(field) != run.get(run_field):
            raise RunDirError(f"{run_dir}: {EPISODE_FILE} has {field}={record.get(field)!r} but "
                              f"{RUN_FILE} has {run_field}={run.get(run_field)!r}")
    ctrl_name = run.get("controller") or "none"
    ctrl = record.get("controller")
    if not isinstance(ctrl, dict):
        record["controller"] = ctrl = {"name": ctrl_name, "components": [], "steps": []}
    elif ctrl.get("name") != ctrl_name:
        raise RunDirError(f"{run_dir}: {EPISODE_FILE} controller {ctrl.get('name')!r} differs "
                          f"from {RUN_FILE} controller {ctrl_name!r}")

    trace_path = run_dir / TRACE_FILE
    trace_raw = trace_path.read_bytes() if trace_path.is_file() else None
    reasons, facts = audit.audit_run(record, run, trace_raw)
    try:
        derived = metrics.episode_metrics(record)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        reasons.append("the record cannot be scored")
        derived = metrics.episode_metrics({"calls": [], "target": record["target"],
                                           "budget": record["budget"], "terminated_by": None})
    mismatch = [k for k in ("valid_count", "success", "steps_used")
                if k in record and record[k] != derived[k]]
    if record.get("metrics") not in (None, derived):
        mismatch.append("metrics")
    reasons += [f"stored {k} differs from the calls" for k in mismatch]
    record["metrics"] = derived
    record["valid_count"], record["success"] = derived["valid_count"], derived["success"]
    record["steps_used"] = derived["steps_used"]

    condition, agent = run.get("condition", "default"), run.get("agent")
    record["condition"] = condition
    record["policy"] = describe_policy(condition, agent, run.get("seed"))
    record["simulated"] = False
    record["key"] = episode_key(record["task_id"], ctrl_name, record["policy"]["name"],
                                run.get("seed"), run.get("instance"))
    incomplete = record.get("terminated_by") is None
    record["incomplete"] = incomplete
    bb = dict(record["blackbox"]) if isinstance(record.get("blackbox"), dict) else {}
    if not isinstance(bb.get("out_of_band_edits"), list):
        bb["out_of_band_edits"] = []
    if not isinstance(bb.get("out_of_band_edits_count"), int):
        bb["out_of_band_edits_count"] = len(bb["out_of_band_edits"])
    bb.update(run_id=run.get("run_id"), run_dir=str(run_dir), incomplete=incomplete,
              stored_mismatch=mismatch, **facts)
    record["blackbox"] = bb
    record["tampered"] = bool(reasons)
    record["tamper_reasons"] = reasons
    if mismatch:
        warnings.warn(f"{run_dir}: stored {', '.join(mismatch)} disagreed with the values "
                      "recomputed from the calls; the recomputed values are used", stacklevel=2)
    return record


def blackbox_line(record: dict) -> dict:
    """The episode line of an evaluated record: the runner's line without the edit list."""
    line = episode_line(record)
    bb = line.get("blackbox")
    if isinstance(bb, dict) and "out_of_band_edits" in bb:
        line["blackbox"] = {k: v for k, v in bb.items() if k != "out_of_band_edits"}
    return line


def records_from_run_dirs(dirs: Iterable[str | Path]) -> list[dict]:
    """Episode lines (the runner's ``episodes.jsonl`` format) for black-box run directories.

    Raises :class:`RunDirError` for an unreadable directory or when two directories share an
    episode key (same task, instance, controller, agent, condition and seed: give repeated
    runs distinct ``--seed`` values).
    """
    return [blackbox_line(r) for r in full_records_from_run_dirs(dirs)]


def full_records_from_run_dirs(dirs: Iterable[str | Path]) -> list[dict]:
    """Like :func:`records_from_run_dirs` but keeping ``calls`` and controller steps."""
    out, seen = [], {}
    for d in dirs:
        rec = record_from_run_dir(d)
        if rec["key"] in seen:
            raise RunDirError(f"{d} and {seen[rec['key']]} are the same episode (task "
                              f"{rec['task_id']}, controller {rec['controller']['name']}, policy "
                              f"{rec['policy']['name']}, seed {rec['seed']}); give repeated runs "
                              "distinct --seed values")
        seen[rec["key"]] = d
        out.append(rec)
    return out


# ----- checklist - default ----------------------------------------------------------------
def _condition_columns() -> list[str]:
    from ..analysis.deltas import STAT_COLUMNS

    return ["family", "agent", "controller", "pooled", "target", "n_targets", "condition_a",
            "condition_b", *STAT_COLUMNS]


def split_policy(name: str) -> tuple[str | None, str | None]:
    """``blackbox-mcp[:agent]:condition`` -> ``(agent, condition)``; ``(None, None)`` otherwise."""
    parts = str(name).split(":")
    if parts[0] != POLICY_PREFIX or len(parts) not in (2, 3):
        return None, None
    return (parts[1] if len(parts) == 3 else None), parts[-1]


def _against_default(names: list[str]) -> list[tuple[str, str]]:
    return [(c, "default") for c in sorted(names) if c != "default"] if "default" in names \
        else []


def condition_deltas(episodes: Sequence[dict], metrics_: Sequence[str] | None = None,
                     seed: int = 0, n_resamples: int = 9999,
                     confidence: float = 0.95):
    """``condition_a - default`` per metric for black-box rows, by the report's delta engine.

    Within one ``(family, agent, controller)``, each non-default condition is matched with
    ``default`` on ``(target, task_id, instance, seed)``, per target and pooled over targets,
    exactly as :func:`pushbench.analysis.deltas.paired_deltas` matches controllers (same
    interval, sign-flip test and duplicate check); Holm runs over this table's rows of each
    metric and scope (pooled or per target).
    """
    import pandas as pd

    from ..analysis.deltas import DEFAULT_DELTA_METRICS, delta_table
    from ..analysis.frame import episodes_frame

    metrics_ = tuple(metrics_ or DEFAULT_DELTA_METRICS)
    df = episodes_frame(episodes)
    parsed = [split_policy(p) for p in df["policy"]]
    df = df.assign(agent=[a or "" for a, _ in parsed], condition=[c for _, c in parsed])
    df = df[df["condition"].notna()]
    if df.empty:
        return pd.DataFrame(columns=_condition_columns())
    out = delta_table(df, side="condition", strata=["family", "agent", "controller"],
                      pairs=_against_default, metrics=metrics_, seed=seed,
                      n_resamples=n_resamples, confidence=confidence, a_col="condition_a",
                      b_col="condition_b")
    return out[_condition_columns()]


# ----- writing an evaluation ----------------------------------------------------------------
def write_evaluation(records: Sequence[dict], out_dir: str | Path, seed: int = 0,
                     n_resamples: int = 9999, console=None, out=None) -> dict:
    """Write ``episodes.jsonl`` (+ ``traces/<key>.json.gz``) and the report for full records.

    Same layout as a runner directory, so ``pushbench report``/``plot`` work on it too. Adds
    ``condition_deltas.csv`` (checklist - default) when more than one condition is present.
    Returns the report frames (empty dict when :mod:`pushbench.analysis.report` is unavailable).
    """
    from .. import paths

    out_dir = Path(out_dir)
    paths.private_dir(paths.private_dir(out_dir) / "traces")  # full records: 0700 / 0600
    lines = [blackbox_line(r) for r in records]
    for rec in records:  # the run-folder encodings of pushbench.records, as a sweep writes them
        paths.write_private(out_dir / "traces" / f"{rec['key']}.json.gz", encode_trace(rec))
    paths.write_private(out_dir / "episodes.jsonl", b"".join(dumps_line(line) for line in lines))

    def say(msg: str) -> None:
        if console is not None:
            console.print(msg, highlight=False, soft_wrap=True)  # never break a path

    incomplete = [r["blackbox"]["run_dir"] for r in records if r.get("incomplete")]
    if incomplete:
        say(f"[yellow]{len(incomplete)} incomplete run(s)[/] (the episode never ended: no "
            "final/ask_user and budget left; kept with terminated_by None, counted by their "
            f"verified progress): {', '.join(incomplete)}")
    tampered = [r for r in records if r.get("tampered")]
    if tampered:
        say(f"[bold red]{len(tampered)} tampered run(s)[/] (their stored record disagrees with "
            "the replay or the trace; excluded from every metric):")
        for r in tampered:
            say(f"  {r['blackbox']['run_dir']}: {'; '.join(r['tamper_reasons'])}")
    edited = [r for r in records if (r.get("blackbox") or {}).get("out_of_band_edits_count")]
    for r in edited:
        bb = r["blackbox"]
        first = bb["out_of_band_edits"][0] if bb.get("out_of_band_edits") else {}
        say(f"[yellow]out-of-band workspace edits[/] in {bb['run_dir']}: "
            f"{bb['out_of_band_edits_count']} (first: {first.get('kind')} {first.get('path')} "
            f"before step {first.get('step_before')})")
    say(f"wrote {out_dir / 'episodes.jsonl'} ({len(lines)} episodes)")
    try:
        from ..analysis import report
    except ImportError as e:  # pragma: no cover - the report module ships with the package
        say(f"[yellow]pushbench.analysis.report is not available ({e})[/]: wrote episodes.jsonl only; "
            f"run `pushbench report {out_dir}` once it is")
        return {}
    frames = report.write_report(lines, out_dir, seed=seed, n_resamples=n_resamples)
    report.print_report(frames, console=out)
    conditions = {split_policy(line["policy"]["name"])[1] for line in lines}
    if len(conditions - {None}) > 1:
        deltas = condition_deltas(lines, seed=seed, n_resamples=n_resamples)
        (out_dir / "condition_deltas.csv").write_bytes(report.to_csv_bytes(deltas))
        frames["condition_deltas"] = deltas
        _print_condition_deltas(deltas, out)
        say(f"wrote {out_dir / 'condition_deltas.csv'}")
    say(f"wrote {out_dir / 'summary.csv'} and {out_dir / 'paired_deltas.csv'}")
    return frames


def _print_condition_deltas(deltas, console=None) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if deltas.empty:
        console.print("no matched condition pairs (checklist and default runs need the same "
                      "task, instance and seed)")
        return
    table = Table(title="black-box: condition A - default, matched on (task, instance, seed)",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    from ..analysis.format import counts_text, delta_cell, p_text

    for col in ("agent", "controller", "N", "A", "metric", "delta", "95% CI", "instances",
                "p", "pairs"):
        table.add_column(col, justify="right" if col in ("N", "delta", "p", "pairs") else "left")
    for r in deltas.to_dict("records"):
        delta, ci = delta_cell(r, r["metric"], short=True)
        p = p_text(r["p_value"]) + ("" if r["testable"] else " nt")
        table.add_row(r["agent"] or "-", r["controller"], "all" if r["pooled"] else str(r["target"]),
                      r["condition_a"], r["metric"], delta, ci, counts_text(r, short=True), p,
                      str(r["n_pairs"]))
    console.print(table)
