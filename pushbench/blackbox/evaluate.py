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
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import errors
from ..records import dumps_line, encode_trace, episode_line
from . import audit, rundir_safety, signing
from .prompts import PROMPTS, prompt_text  # noqa: F401  (the prompts of black-box runs)

# 2: trace.jsonl is a digest chain whose head episode.json records; 3: the run is signed
# (run.json, episode.json and every trace line; the chain's genesis binds the configuration)
RUN_SCHEMA_VERSION = signing.SIGNED_SCHEMA
READABLE_SCHEMAS = (2, RUN_SCHEMA_VERSION)  # schema 2 is read as `unsigned`
RUN_KIND = "pushbench-blackbox-run"
POLICY_PREFIX = "blackbox-mcp"
RUN_FILE, EPISODE_FILE = "run.json", "episode.json"
TRACE_FILE, LOG_FILE = "trace.jsonl", "server.log"
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

RunDirError = errors.RunDirError  # a run directory cannot be evaluated (message says why)


def check_label(kind: str, value: str) -> str:
    if not LABEL_RE.match(value):
        raise ValueError(
            f"{kind} {value!r} must be 1-64 characters of letters, digits, '.', "
            "'_' or '-', starting with a letter or digit"
        )
    return value


def policy_name(condition: str, agent: str | None = None) -> str:
    """``blackbox-mcp[:agent]:condition``: one report row per agent and prompt condition."""
    return ":".join([POLICY_PREFIX, *([agent] if agent else []), condition])


def describe_policy(condition: str, agent: str | None, seed: int | None) -> dict:
    """What the record stores under ``policy`` for a black-box run (the label is the name,
    which already carries the agent and the condition)."""
    name = policy_name(condition, agent)
    return {
        "name": name,
        "label": name,
        "simulated": False,
        "seed": seed,
        "params": {"transport": "mcp-stdio", "condition": condition, "agent": agent},
    }


# ----- reading run directories ------------------------------------------------------------
def _read_json_raw(path: Path) -> tuple[dict, bytes]:
    """The JSON object in ``path`` and the bytes it was read from (what a signature covers)."""
    try:
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise RunDirError(
            f"{path.parent}: no {path.name} (is this a `pushbench mcp` run "
            "directory, and did the server start?)"
        ) from None
    except ValueError as e:
        raise RunDirError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data, raw


def provenance_reasons(
    run_dir: Path,
    run: dict,
    run_raw: bytes,
    record: dict,
    record_raw: bytes,
    trace_raw: bytes | None,
) -> tuple[list[str], dict]:
    """Signatures (:mod:`.signing`) and who could have written the folder
    (:mod:`.rundir_safety`): reasons to distrust the run, and facts for ``blackbox``."""
    status, reasons = signing.verify_run(
        run, run_raw, record, record_raw, trace_raw, signing.installation_key(create=False)
    )
    unsafe = rundir_safety.evaluate_problems(run_dir)
    record.pop("signature", None)  # the seal, not part of the record
    return reasons + [f"unsafe run dir: {u}" for u in unsafe], {
        "signature": status,
        "unsafe": unsafe,
    }


def check_run_manifest(run: dict, run_dir: Path) -> None:
    """Refuse a ``run.json`` whose labels have the wrong type (one line naming the field).

    ``run_id`` and ``task`` are strings, ``seed`` an integer, ``instance`` a string or null,
    ``budget`` a positive integer or null, ``controller`` a string or null, ``condition`` and
    ``agent`` labels (:func:`check_label`; ``agent`` may be null).
    """

    def bad(field: str, why: str) -> RunDirError:
        return RunDirError(f"{run_dir}/{RUN_FILE}: {field} {str(run.get(field))[:40]!r} {why}")

    for field in ("run_id", "task"):
        if not isinstance(run.get(field), str):
            raise bad(field, "is not a string")
    seed = run.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise bad("seed", "is not an integer")
    budget = run.get("budget")
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 1
    ):
        raise bad("budget", "is not a positive integer or null")
    for field in ("instance", "controller"):
        if run.get(field) is not None and not (isinstance(run.get(field), str) and run.get(field)):
            raise bad(field, "is not a non-empty string or null")
    for field, required in (("condition", False), ("agent", False)):
        value = run.get(field)
        if value is None and not required:
            continue
        try:
            check_label(field, value if isinstance(value, str) else "")
        except ValueError:
            raise bad(field, "is not a label (1-64 letters, digits, '.', '_' or '-')") from None


def record_from_run_dir(run_dir: str | Path, provenance: bool = True) -> dict:
    """The full episode record of one run directory, replayed, with run labels.

    The run is audited (:func:`pushbench.blackbox.audit.audit_run`: ledger consistency, the
    trace's digest chain) and replayed (:func:`pushbench.blackbox.replaycheck.check_run`: the
    trace's calls and out-of-band edits through a fresh environment of the registry's task).
    ``calls``, ``metrics``, ``valid_count``, ``success``, ``steps_used`` and the configuration
    fields are the replayed ones; ``policy``, ``condition``, ``simulated`` and ``key`` come
    from ``run.json``. ``tampered`` and ``tamper_reasons`` say whether anything disagreed (a
    run the replay cannot vouch for is ``unverifiable`` too, and tampered: it is not counted);
    a tampered record keeps its stored summary under ``claimed``. Stored summary fields that
    differ from the replay are also listed in ``blackbox.stored_mismatch``.
    Raises :class:`RunDirError` (one line naming the file and field) for a folder that is not
    a readable run. ``provenance=False`` skips the signature and run-dir-safety checks, for a
    run that arrived in a bundle from another installation (``pushbench verify``): its key is
    not this one's, and the replay is the proof (``blackbox.signature`` says so).
    """
    from ..envs.base import RECORD_SCHEMA_VERSION
    from ..runner.episode import episode_key
    from ..runner.replay import adopt
    from . import replaycheck

    run_dir = Path(run_dir)
    run, run_raw = _read_json_raw(run_dir / RUN_FILE)
    record, record_raw = _read_json_raw(run_dir / EPISODE_FILE)
    if run.get("kind") != RUN_KIND or run.get("schema_version") not in READABLE_SCHEMAS:
        raise RunDirError(
            f"{run_dir}/{RUN_FILE}: not a schema-{RUN_SCHEMA_VERSION} (or 2) {RUN_KIND} manifest"
        )
    check_run_manifest(run, run_dir)
    if record.get("schema_version") != RECORD_SCHEMA_VERSION:
        raise RunDirError(
            f"{run_dir}/{EPISODE_FILE}: record schema_version "
            f"{str(record.get('schema_version'))[:20]!r}, expected "
            f"{RECORD_SCHEMA_VERSION}"
        )
    for field in ("calls", "target", "budget", "task_id"):
        if field not in record:
            raise RunDirError(f"{run_dir}/{EPISODE_FILE}: missing {field!r}")
    for field, kind in (("calls", list), ("target", int), ("budget", int)):
        if not isinstance(record[field], kind) or isinstance(record[field], bool):
            raise RunDirError(
                f"{run_dir}/{EPISODE_FILE}: {field!r} is a "
                f"{type(record[field]).__name__}, expected {kind.__name__}"
            )
    for field, run_field in (("task_id", "task"), ("seed", "seed")):
        if record.get(field) != run.get(run_field):
            raise RunDirError(
                f"{run_dir}: {EPISODE_FILE} has {field}="
                f"{str(record.get(field))[:40]!r} but {RUN_FILE} has "
                f"{run_field}={run.get(run_field)!r}"
            )
    ctrl_name = run.get("controller") or "none"
    ctrl = record.get("controller")
    if not isinstance(ctrl, dict):
        record["controller"] = ctrl = {"name": ctrl_name, "components": [], "steps": []}
    elif ctrl.get("name") != ctrl_name:
        raise RunDirError(
            f"{run_dir}: {EPISODE_FILE} controller {str(ctrl.get('name'))[:40]!r} "
            f"differs from {RUN_FILE} controller {ctrl_name!r}"
        )

    trace_path = run_dir / TRACE_FILE
    trace_raw = trace_path.read_bytes() if trace_path.is_file() else None
    if provenance:
        signed, signed_facts = provenance_reasons(
            run_dir, run, run_raw, record, record_raw, trace_raw
        )
    else:
        record.pop("signature", None)  # the seal, not part of the record
        signed, signed_facts = [], {"signature": "not checked (bundle)", "unsafe": []}
    reasons, facts = audit.audit_run(record, run, trace_raw)
    reasons = signed + reasons
    facts.update(signed_facts)
    if facts.get("trace_missing_last"):  # killed before answering: the run ends at the trace
        facts["dropped_unanswered"] = audit.drop_unanswered_tail(
            record, facts.get("trace_counted_steps", -1)
        )
    checked = replaycheck.check_run(record, run, trace_raw, facts)
    reasons += checked.reasons
    stored, record = record, adopt(record, checked)
    mismatch = [
        k
        for k in ("valid_count", "success", "steps_used", "metrics")
        if k in stored and stored[k] != record[k]
    ]

    condition, agent = run.get("condition") or "default", run.get("agent")
    record["condition"] = condition
    record["policy"] = describe_policy(condition, agent, run.get("seed"))
    record["simulated"] = False
    record["key"] = episode_key(
        record["task_id"], ctrl_name, record["policy"]["name"], run.get("seed"), run.get("instance")
    )
    incomplete = record.get("terminated_by") is None
    record["incomplete"] = incomplete
    record["blackbox"] = replaycheck.blackbox_section(
        stored, run, run_dir, incomplete, mismatch, facts
    )
    record["blackbox"]["fingerprint"] = replaycheck.fingerprint(record, trace_raw)
    # The version the agent saw is the session's (run.json), not this evaluation's; a run.json
    # without one leaves it to the record writer (records.versioned).
    seen = (run.get("family_versions") or {}).get(record.get("family"))
    if isinstance(seen, int) and not isinstance(seen, bool):
        record["family_version"] = seen
    record["tampered"] = bool(reasons or checked.unverifiable)
    record["tamper_reasons"] = reasons + [f"unverifiable: {u}" for u in checked.unverifiable]
    record["unverifiable"] = bool(checked.unverifiable)
    if mismatch:
        warnings.warn(
            f"{run_dir}: stored {', '.join(mismatch)} disagreed with the values "
            "recomputed by replaying the calls; the replayed values are used",
            stacklevel=2,
        )
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

    Raises :class:`RunDirError` for the first folder :func:`evaluate_run_dirs` refuses.
    """
    return [blackbox_line(r) for r in full_records_from_run_dirs(dirs)]


def full_records_from_run_dirs(dirs: Iterable[str | Path]) -> list[dict]:
    """Like :func:`records_from_run_dirs` but keeping ``calls`` and controller steps."""
    records, refused = evaluate_run_dirs(dirs)
    if refused:
        raise RunDirError(refused[0][1])
    return records


def evaluate_run_dirs(dirs: Iterable[str | Path]) -> tuple[list[dict], list[tuple[str, str]]]:
    """Full records of the run dirs that can be evaluated, and ``(dir, reason)`` per refusal.

    One bad folder never stops the batch: an unreadable or malformed folder
    (:class:`RunDirError` from :func:`record_from_run_dir`, which names the file and field),
    a copy of a run already in the batch (same trace head and calls: counted once, whatever
    its folder name or seed), and a second run of the same episode key with other calls
    (give repeated runs distinct ``--seed`` values) are refused with one line each.
    """
    out: list[dict] = []
    refused: list[tuple[str, str]] = []
    keys: dict[str, str] = {}
    prints: dict[str, str] = {}
    given: set[Path] = set()
    for d in dirs:
        where = Path(d).resolve()
        if where in given:
            refused.append((str(d), f"{d}: given more than once"))
            continue
        given.add(where)
        try:
            rec = record_from_run_dir(d)
        except RunDirError as e:
            refused.append((str(d), str(e)))
            continue
        except OSError as e:
            refused.append((str(d), f"{d}: cannot read the run directory: {e.strerror or e}"))
            continue
        fp = rec["blackbox"]["fingerprint"]
        if fp in prints:
            refused.append(
                (
                    str(d),
                    f"{d}: a copy of {prints[fp]} (the same calls and trace head): counted once",
                )
            )
            continue
        if rec["key"] in keys:
            refused.append(
                (
                    str(d),
                    f"{d} and {keys[rec['key']]} are the same episode (task "
                    f"{rec['task_id']}, controller {rec['controller']['name']}, "
                    f"policy {rec['policy']['name']}, seed {rec['seed']}); give "
                    "repeated runs distinct --seed values",
                )
            )
            continue
        keys[rec["key"]], prints[fp] = str(d), str(d)
        out.append(rec)
    return out, refused


# ----- checklist - default ----------------------------------------------------------------
def _condition_columns() -> list[str]:
    from ..analysis.deltas import STAT_COLUMNS

    return [
        "family",
        "agent",
        "controller",
        "pooled",
        "target",
        "n_targets",
        "condition_a",
        "condition_b",
        *STAT_COLUMNS,
    ]


def split_policy(name: str) -> tuple[str | None, str | None]:
    """``blackbox-mcp[:agent]:condition`` -> ``(agent, condition)``; ``(None, None)`` otherwise."""
    parts = str(name).split(":")
    if parts[0] != POLICY_PREFIX or len(parts) not in (2, 3):
        return None, None
    return (parts[1] if len(parts) == 3 else None), parts[-1]


def _against_default(names: list[str]) -> list[tuple[str, str]]:
    return [(c, "default") for c in sorted(names) if c != "default"] if "default" in names else []


def condition_deltas(
    episodes: Sequence[dict],
    metrics_: Sequence[str] | None = None,
    seed: int = 0,
    n_resamples: int = 9999,
    confidence: float = 0.95,
):
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
    out = delta_table(
        df,
        side="condition",
        strata=["family", "agent", "controller"],
        pairs=_against_default,
        metrics=metrics_,
        seed=seed,
        n_resamples=n_resamples,
        confidence=confidence,
        a_col="condition_a",
        b_col="condition_b",
    )
    return out[_condition_columns()]


# ----- writing an evaluation ----------------------------------------------------------------
def evaluation_experiment(run_dirs: Iterable[str | Path]) -> dict:
    """What an evaluation folder's manifest names as its experiment: the run directories."""
    return {
        "name": "blackbox-evaluation",
        "run_dirs": sorted({str(Path(d).resolve()) for d in run_dirs}),
    }


def check_evaluation_out(
    out_dir: str | Path,
    run_dirs: Iterable[str | Path],
    overwrite: bool = False,
    replace: bool = False,
) -> dict:
    """Refuse (:class:`~pushbench.runner.outdir.OutputDirError`) an ``--out`` folder that
    another command wrote, or an evaluation of other run directories unless ``replace`` (a
    batch's own report folder); return the experiment to write. Nothing is written."""
    from ..runner import outdir

    experiment = evaluation_experiment(run_dirs)
    outdir.check(out_dir, "evaluate", None if replace else _same_runs(experiment), overwrite)
    return experiment


def _same_runs(experiment: dict):
    def why(old: dict) -> str | None:
        before = set((old.get("experiment") or {}).get("run_dirs") or [])
        now = set(experiment["run_dirs"])
        if before == now:
            return None
        return (
            f"an evaluation of other run directories: {len(now - before)} new here, "
            f"{len(before - now)} there only"
        )

    return why


def write_evaluation(
    records: Sequence[dict],
    out_dir: str | Path,
    seed: int = 0,
    n_resamples: int = 9999,
    console=None,
    out=None,
    run_dirs: Sequence[str | Path] | None = None,
    overwrite: bool = False,
    replace: bool = False,
    arguments: dict | None = None,
) -> dict:
    """Write ``episodes.jsonl`` (+ ``traces/<key>.json.gz``) and the report for full records.

    Same layout as a runner directory, so ``pushbench report``/``plot`` work on it too. Adds
    ``condition_deltas.csv`` (checklist - default) when more than one condition is present.
    Returns the report frames (empty dict when :mod:`pushbench.analysis.report` is unavailable).

    ``out_dir`` gets an ``evaluate`` manifest naming ``run_dirs`` (default: the records' run
    directories); a folder another command wrote, or an evaluation of other run directories,
    is refused (:func:`check_evaluation_out`) unless ``overwrite`` discards it (``replace``:
    another evaluation may be replaced). The previous evaluation's files are removed first.
    """
    from .. import paths
    from ..runner import outdir

    out_dir = Path(out_dir)
    if run_dirs is None:
        run_dirs = [r["blackbox"]["run_dir"] for r in records]
    experiment = evaluation_experiment(run_dirs)
    outdir.replace_outputs(
        out_dir,
        "evaluate",
        experiment,
        None if replace else _same_runs(experiment),
        overwrite,
        arguments,
    )
    paths.private_dir(out_dir / "traces")  # full records: 0700 / 0600
    lines = [blackbox_line(r) for r in records]
    for rec in records:  # the run-folder encodings of pushbench.records, as a sweep writes them
        paths.write_private(out_dir / "traces" / f"{rec['key']}.json.gz", encode_trace(rec))
    paths.write_private(out_dir / "episodes.jsonl", b"".join(dumps_line(line) for line in lines))

    def say(msg: str) -> None:
        if console is not None:
            console.print(msg, highlight=False, soft_wrap=True)  # never break a path

    incomplete = [r["blackbox"]["run_dir"] for r in records if r.get("incomplete")]
    if incomplete:
        say(
            f"[yellow]{len(incomplete)} incomplete run(s)[/] (the episode never ended: no "
            "final/ask_user and budget left; kept with terminated_by None, counted by their "
            f"verified progress): {', '.join(incomplete)}"
        )
    tampered = [r for r in records if r.get("tampered") and not r.get("unverifiable")]
    if tampered:
        say(
            f"[bold red]{len(tampered)} tampered run(s)[/] (their stored record disagrees with "
            "the replay or the trace; excluded from every metric; their lines carry the "
            "replayed numbers, the stored ones under `claimed`):"
        )
        for r in tampered:
            say(f"  {r['blackbox']['run_dir']}: {'; '.join(r['tamper_reasons'])}")
    unverifiable = [r for r in records if r.get("unverifiable")]
    if unverifiable:
        say(
            f"[bold red]{len(unverifiable)} unverifiable run(s)[/] (the replay cannot vouch "
            "for them, e.g. an out-of-band edit over the size cap; excluded from every "
            "metric):"
        )
        for r in unverifiable:
            say(f"  {r['blackbox']['run_dir']}: {'; '.join(r['tamper_reasons'])}")
    _say_provenance(records, say)
    edited = [r for r in records if (r.get("blackbox") or {}).get("out_of_band_edits_count")]
    for r in edited:
        bb = r["blackbox"]
        first = bb["out_of_band_edits"][0] if bb.get("out_of_band_edits") else {}
        say(
            f"[yellow]out-of-band workspace edits[/] in {bb['run_dir']}: "
            f"{bb['out_of_band_edits_count']} (first: {first.get('kind')} {first.get('path')} "
            f"before step {first.get('step_before')})"
        )
    say(f"wrote {out_dir / 'episodes.jsonl'} ({len(lines)} episodes)")
    try:
        from ..analysis import report
    except ImportError as e:  # pragma: no cover - the report module ships with the package
        say(
            f"[yellow]pushbench.analysis.report is not available ({e})[/]: "
            "wrote episodes.jsonl only; "
            f"run `pushbench report {out_dir}` once it is"
        )
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


def _say_provenance(records: Sequence[dict], say) -> None:
    """List unsafe run dirs (already among the tampered) and unsigned runs, each on its own."""
    unsafe = [r for r in records if (r.get("blackbox") or {}).get("unsafe")]
    if unsafe:
        say(
            f"[bold red]{len(unsafe)} unsafe run dir(s)[/] (another user could have written "
            "them; counted as tampered):"
        )
        for r in unsafe:
            say(f"  {r['blackbox']['run_dir']}: {'; '.join(r['blackbox']['unsafe'])}")
    unsigned = [
        r["blackbox"]["run_dir"]
        for r in records
        if (r.get("blackbox") or {}).get("signature") == "unsigned"
    ]
    if unsigned:
        say(
            f"[yellow]{len(unsigned)} unsigned run(s)[/] (schema 2, written before runs were "
            "signed: replayed and checked, but their labels are not protected by a signature): "
            f"{', '.join(unsigned)}"
        )


def _print_condition_deltas(deltas, console=None) -> None:
    from rich.console import Console
    from rich.text import Text

    from .. import terminal
    from ..terminal import ident_column

    console = console or Console()
    if deltas.empty:
        console.print(
            "no matched condition pairs (checklist and default runs need the same "
            "task, instance and seed)"
        )
        return
    from ..analysis.format import counts_text, delta_cell, p_text

    # one table per (metric, agent), both named in a title line of its own: agent names are
    # long, and the rest fits 80 columns
    console.print(
        "black-box: condition A - default, matched on (task, instance, seed); pairs: matched pairs",
        style="bold",
        highlight=False,
    )
    for (metric, agent), grp in deltas.groupby(["metric", "agent"], sort=False):
        console.print(Text(f"{metric} | {agent or '-'}", style="bold"))
        table = terminal.table()
        ident_column(table, "controller")
        table.add_column("N", justify="right", no_wrap=True)
        ident_column(table, "A")
        for col in ("delta", "95% CI", "instances", "p", "pairs"):
            table.add_column(col, no_wrap=True, justify="left" if col == "instances" else "right")
        for r in grp.to_dict("records"):
            delta, ci = delta_cell(r, r["metric"], short=True)
            p = p_text(r["p_value"]) + ("" if r["testable"] else " nt")
            table.add_row(
                r["controller"],
                "all" if r["pooled"] else str(r["target"]),
                r["condition_a"],
                delta,
                ci,
                counts_text(r, short=True),
                p,
                str(r["n_pairs"]),
            )
        console.print(table)
