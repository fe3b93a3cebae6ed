"""Re-attaching ``pushbench mcp`` to a run dir that already holds an episode of the same run.

MCP clients start servers more than once: ``claude mcp list`` health checks, reconnects, and
Codex CLI starts its servers at every ``codex exec``. A server started on a run dir that holds
an episode of the **same configuration** (task, instance, seed, controller, condition, budget,
agent label) continues that episode instead of refusing:

- no calls yet: the episode is reused as it is (same run id, same trace chain);
- calls made: a fresh environment is reset with the same seed and every counted call of the
  trace is replayed into it; each replayed observation must equal the recorded one byte for
  byte, else the server refuses, naming the first differing step. The trace chain, call counts
  and out-of-band edit log continue where they stopped.

The workspace copy is recognised through a marker in the run dir (``workspace.json``: its path
and the run id), which the agent cannot see; an empty or missing workspace is prepared afresh,
any other non-empty one is refused. A different configuration is refused as before, and
``--overwrite`` still discards the old run. So is a run this installation did not sign (an
unsigned schema-2 run, another key, a bad signature on ``run.json`` or a trace line): its
continuation could not be signed as one account. A server killed between writing
``episode.json`` and the trace line of a call (the call was never answered) loses that call:
the trace is the account of answered calls, and the resumed record follows it
(``blackbox.dropped_unanswered``).
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import paths
from ..runner.replay import apply_edit
from ..runner.replay_steps import decode_edit, trace_action
from . import audit, signing
from .evaluate import EPISODE_FILE, RUN_FILE, TRACE_FILE

log = logging.getLogger("pushbench.mcp")
WORKSPACE_MARKER = "workspace.json"


def _setup_error(msg: str) -> Exception:
    from .files import SetupError

    return SetupError(msg)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise _setup_error(
            f"{path.parent} holds a run that cannot be read ({path.name}: {e}); "
            "use a new --run-dir (or --overwrite to discard it)"
        ) from None


def differences(session, run: dict) -> list[str]:
    """The configuration fields in which ``run`` (a run.json) differs from ``session``."""
    name = session.controller_opt if session.controller_opt not in (None, "none") else "none"
    mine = {
        "task": session.task_id,
        "instance": session.instance_opt,
        "seed": session.seed,
        "controller": name,
        "condition": session.condition,
        "budget": session.budget_opt,
        "agent": session.agent,
    }
    return [f"{k} {run.get(k)!r} there, {v!r} now" for k, v in mine.items() if run.get(k) != v]


def _trace_lines(run_dir: Path) -> list[bytes]:
    """The whole lines of the trace; a torn last line (server killed mid-write) is cut off."""
    path = run_dir / TRACE_FILE
    raw = path.read_bytes() if path.exists() else b""
    keep = raw[: raw.rfind(b"\n") + 1] if not raw.endswith(b"\n") else raw
    if len(keep) != len(raw):
        log.warning("re-attach: cut a torn last trace line (%d bytes)", len(raw) - len(keep))
        with open(path, "r+b") as f:
            f.truncate(len(keep))
            os.fsync(f.fileno())
    return keep.splitlines(keepends=True)


def resume(session) -> Any:
    """Continue the episode in ``session.run_dir`` (already locked by ``session.open``).

    Raises ``SetupError`` for a different configuration, an unreadable run, a replay that
    disagrees with the record, or a workspace that is not this run's.
    """
    run_dir = session.run_dir
    if not (run_dir / RUN_FILE).exists():
        raise _setup_error(
            f"{run_dir} holds part of a run without its run.json; use a new "
            "--run-dir (or --overwrite to discard it)"
        )
    run = _read(run_dir / RUN_FILE)
    if not isinstance(run, dict):
        raise _setup_error(
            f"{run_dir}/{RUN_FILE} is not a JSON object; use a new --run-dir "
            "(or --overwrite to discard it)"
        )
    diff = differences(session, run)
    if diff:
        raise _setup_error(
            f"{run_dir} already holds a run of another configuration "
            f"({'; '.join(diff)}); use a new --run-dir per episode (or "
            "--overwrite to discard it)"
        )
    _check_signed(session, run, (run_dir / RUN_FILE).read_bytes())
    run.pop("signature", None)  # re-sealed when run.json is written again below
    record = _read(run_dir / EPISODE_FILE) if (run_dir / EPISODE_FILE).exists() else {}
    record = record if isinstance(record, dict) else {}
    bb = got if isinstance(got := record.get("blackbox"), dict) else {}
    lines = _trace_lines(run_dir)
    parsed = [_line(run_dir, i, raw) for i, raw in enumerate(lines, 1)]
    session.run_id = run["run_id"]
    session._setup_logging()
    session.env, session.controller = session._make_env()
    options = (
        {session.env.unwrapped._instance_option: session.instance_opt}
        if session.instance_opt
        else None
    )
    obs, _ = session.env.reset(seed=session.seed, options=options)
    session.reset_result = json.loads(obs)["result"]
    session.tool_schemas = session.env.unwrapped.tool_schemas()
    head, after_end = signing.genesis(run), 0
    for i, (raw, line) in enumerate(zip(lines, parsed, strict=True), 1):
        if line.get("prev") != head:
            raise _setup_error(
                f"cannot re-attach to {run_dir}: its trace chain is broken at "
                f"line {i}; use a new --run-dir (or --overwrite)"
            )
        if not signing.line_signature_ok(session._key, raw):
            raise _setup_error(
                f"cannot re-attach to {run_dir}: trace line {i} is not signed by "
                "this installation; use a new --run-dir (or --overwrite)"
            )
        head = audit.line_digest(raw)
        _apply_recorded_edits(session, run_dir, i, line)
        if line.get("step") is None:
            after_end += 1
            continue
        replayed, *_ = session.env.step(trace_action(line.get("proposed"))[0])
        if replayed != line.get("observation"):
            raise _setup_error(
                f"cannot re-attach to {run_dir}: replaying step {line.get('step')} "
                f"({(line.get('proposed') or {}).get('tool')}) gave a different observation "
                "than the recorded one (the snapshot, cache or PushBench version changed?); "
                "use a new --run-dir (or --overwrite to discard the old run)"
            )
    session._trace_head, session._trace_lines = head, len(lines)
    session.mcp_calls, session.after_end_calls = len(lines), after_end
    edits = bb.get("out_of_band_edits")
    session.out_of_band_edits = (
        [e for e in edits if isinstance(e, dict)] if isinstance(edits, list) else []
    )
    session.out_of_band_count = sum(
        ln["out_of_band_count"] for ln in parsed if isinstance(ln.get("out_of_band_count"), int)
    )
    served = got if isinstance(got := bb.get("mcp_calls"), int) else 0
    dropped = max(0, served - len(lines))
    if dropped:
        log.warning(
            "re-attach: %d call(s) the previous server ran but never answered are not "
            "part of the resumed episode",
            dropped,
        )
    session.workspace_files = _workspace(session, run)
    session._start_watch()
    session._trace_fh = os.fdopen(paths.open_private(run_dir / TRACE_FILE), "ab")
    attach = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "pid": os.getpid(),
        "replayed_steps": session.base.steps_used,
        "dropped_unanswered": dropped,
    }
    run["reattached"] = list(run.get("reattached") or []) + [attach]
    from .files import write_json_atomic

    write_json_atomic(run_dir / RUN_FILE, run, seal=session.sealer(signing.RUN))
    session.reattached = run["reattached"]
    session._persist()
    log.info(
        "run %s re-attached: %d step(s) replayed, %d trace line(s)",
        session.run_id,
        session.base.steps_used,
        len(lines),
    )
    return session


def _line(run_dir: Path, i: int, raw: bytes) -> dict:
    """Trace line ``i`` as an object, or a refusal naming it."""
    try:
        line = json.loads(raw)
    except ValueError:
        line = None
    if not isinstance(line, dict):
        raise _setup_error(
            f"cannot re-attach to {run_dir}: trace line {i} is not a JSON "
            "object; use a new --run-dir (or --overwrite)"
        )
    return line


def _apply_recorded_edits(session, run_dir: Path, i: int, line: dict) -> None:
    """Redo the out-of-band edits recorded on trace line ``i`` in the fresh workspace, so the
    replayed calls see the workspace the agent's calls saw."""
    listed = line.get("out_of_band_edits")
    count = line.get("out_of_band_count")
    if not listed and not count:
        return
    ws = getattr(getattr(session.base, "_ws", None), "root", None)
    edits = [decode_edit(e) for e in (listed if isinstance(listed, list) else [])]
    why = next((w for _, w in edits if w), None)
    if ws is None or why or not isinstance(listed, list) or count != len(listed):
        raise _setup_error(
            f"cannot re-attach to {run_dir}: the out-of-band edits before trace "
            f"line {i} cannot be redone ({why or 'their content is not recorded'}"
            "); use a new --run-dir (or --overwrite)"
        )
    for edit, _ in edits:
        assert edit is not None  # why is None: every edit decoded
        problem = apply_edit(ws, edit)
        if problem:
            raise _setup_error(
                f"cannot re-attach to {run_dir}: {problem}; use a new --run-dir (or --overwrite)"
            )


def _check_signed(session, run: dict, raw: bytes) -> None:
    """Refuse to continue a run this installation's key did not sign."""
    fix = "use a new --run-dir (or --overwrite to discard it)"
    if not signing.is_signed(run):
        raise _setup_error(
            f"{session.run_dir} holds an unsigned run written by an older PushBench; {fix}"
        )
    if (run.get("signing") or {}).get("key_id") != signing.key_id(session._key):
        raise _setup_error(
            f"{session.run_dir} holds a run signed with another key (another "
            f"installation, or the key was replaced); {fix}"
        )
    if not signing.json_signature_ok(session._key, signing.RUN, raw):
        raise _setup_error(
            f"{session.run_dir}/{RUN_FILE} is not signed by this installation (edited?); {fix}"
        )


def _workspace(session, run: dict) -> int | None:
    """Keep this run's workspace copy, prepare a missing one, refuse anyone else's."""
    ws = session.workspace
    if ws is None:
        return None
    marker = session.run_dir / WORKSPACE_MARKER
    mine = _read(marker) if marker.exists() else {}
    if ws.exists() and ws.is_dir() and any(ws.iterdir()):
        if mine.get("path") == str(ws) and mine.get("run_id") == session.run_id:
            return mine.get("files")
        raise _setup_error(
            f"workspace {ws} is not empty and is not the copy this run made; "
            "give an empty or new --workspace"
        )
    n = session._prepare_workspace()
    write_workspace_marker(session, n)
    return n


def write_workspace_marker(session, files: int | None) -> None:
    """Record in the run dir which workspace this run prepared (out of the agent's view)."""
    if session.workspace is None:
        return
    from .files import write_json_atomic

    write_json_atomic(
        session.run_dir / WORKSPACE_MARKER,
        {"path": str(session.workspace), "run_id": session.run_id, "files": files},
    )
