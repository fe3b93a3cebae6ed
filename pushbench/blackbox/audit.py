"""Records are evidence: re-check a black-box run before any number is taken from it.

``pushbench evaluate`` never trusts what a run directory says about itself. For every run it
re-derives what can be re-derived and compares; each disagreement is a short reason, and a run
with any reason is ``tampered`` (the report excludes such runs from every metric and lists them).

What is re-checked, per family:

* **Every family**: ``steps_used == len(calls)``; the calls are steps ``1..n`` in order; the
  stored ``progress`` equals the per-call ``valid_count``; ``terminated_by`` agrees with the
  calls (``final``/``ask_user`` only as the last call, ``budget`` only with ``n == budget``);
  only successful ``submit`` calls carry verdicts; each call's ``valid_count`` and ``reward``
  follow from the accepted verdicts so far.
* **RepoScan**: every id of every ``submit`` is replayed, in order, through a fresh
  :class:`~pushbench.families.reposcan.verifier.Verifier` built from the instance's valid set; each
  stored verdict
  must equal the replayed one.
* **DataOps-lite and SWE-lite**: a submit verdict depends on the workspace at that moment, which
  is gone, so consistency is checked instead: a unit is accepted at most once; ``duplicate``
  only for a unit accepted before, and every later submit of an accepted unit is ``duplicate``;
  ``malformed`` exactly for ids not of the form ``u<digits>``; one verdict per submit; an
  accepted submit carries a passing checker run, a rejected one a failing run.
* **The trace**: ``trace.jsonl`` is a digest chain. Line ``i`` carries ``prev``, the sha256 of
  line ``i-1``'s bytes (for the first line, of :func:`genesis` of the run id). Each
  ``episode.json`` states how many lines the trace held when it was written and their head
  digest; a cleanly closed server writes it once more at the end, so the record commits to the
  whole trace. A server killed between writing ``episode.json`` and the trace line leaves the
  trace exactly one line short (``trace_missing_last``): the run is taken as ended at the last
  trace line, and the call the record holds beyond it (never answered, and in a run of schema
  2 not covered by anything the record did not also write) is dropped from the record and
  never counted (:func:`drop_unanswered_tail`, noted in ``blackbox.dropped_unanswered``). Any
  other count, a broken link, an unreadable line, or a trace line whose step, status, tool,
  verdicts or count disagree with the matching call marks the run tampered. Out-of-band
  workspace edits are written into the trace line of the call they preceded too, so the
  record's count of them must match the trace's.

Signatures: a run of schema 3 starts its chain from a genesis that binds the configuration and
signs every file and trace line with the installation key (:mod:`.signing`, checked by
``evaluate``); a schema-2 run's chain uses no secret, so whoever can write its run directory and
recomputes every digest can forge a consistent one (the verdict replay still catches forged
RepoScan verdicts). The defence for both is that the agent cannot write the run directory
(docs/blackbox.md, threat model).
"""

from __future__ import annotations

import hashlib
import json
import re

GENESIS_PREFIX = b"pushbench-trace-genesis\x00"
_UNIT_ID = re.compile(r"u\d{1,4}")
TERMINAL = ("final", "ask_user")


def genesis(run_id: str) -> str:
    """The digest the first trace line's ``prev`` carries for an unsigned (schema-2) run."""
    return hashlib.sha256(GENESIS_PREFIX + str(run_id).encode()).hexdigest()


def chain_start(run: dict) -> str:
    """The first ``prev`` of ``run``'s trace: the configuration's genesis for a signed run."""
    from . import signing

    return signing.genesis(run) if signing.is_signed(run) else genesis(str(run.get("run_id")))


def line_digest(line: bytes) -> str:
    """sha256 of one trace line's bytes, newline included (what the next line's ``prev`` is)."""
    return hashlib.sha256(line).hexdigest()


# ----- the ledger on its own ------------------------------------------------------------------
def _d(x) -> dict:
    """``x`` if it is a dict, else an empty one (records are outside input)."""
    return x if isinstance(x, dict) else {}


def _calls(record: dict) -> list[dict]:
    calls = record.get("calls")
    return calls if isinstance(calls, list) and all(isinstance(c, dict) for c in calls) else []


def ledger_reasons(record: dict) -> list[str]:
    """Disagreements inside the record (family-independent), as short reasons."""
    calls = _calls(record)
    if not isinstance(record.get("calls"), list) or len(calls) != len(record["calls"]):
        return ["calls is not a list of objects"]
    out = []
    if record.get("steps_used") != len(calls):
        out.append(f"steps_used {record.get('steps_used')!r} != {len(calls)} calls")
    if [c.get("step") for c in calls] != list(range(1, len(calls) + 1)):
        out.append("call steps are not 1..n in order")
    if "progress" in record and record["progress"] != [c.get("valid_count") for c in calls]:
        out.append("progress disagrees with the calls")
    budget, ended = record.get("budget"), record.get("terminated_by")
    if not isinstance(budget, int):
        out.append("budget is not an integer")
    if isinstance(budget, int) and len(calls) > budget:
        out.append(f"{len(calls)} calls exceed the budget {budget}")
    for i, c in enumerate(calls):
        if c.get("ok") and c.get("tool") in TERMINAL and i != len(calls) - 1:
            out.append(f"calls continue after {c.get('tool')} at step {i + 1}")
            break
    last = calls[-1] if calls else {}
    if ended in TERMINAL and not (last.get("ok") and last.get("tool") == ended):
        out.append(f"terminated_by {ended} but the last call is not a successful {ended}")
    elif ended == "budget" and len(calls) != budget:
        out.append("terminated_by budget before the budget was used")
    elif ended is None and (
        len(calls) == budget or (last.get("ok") and last.get("tool") in TERMINAL)
    ):
        out.append("the calls ended the episode but terminated_by is null")
    elif ended not in (None, "budget", *TERMINAL):
        out.append(f"unknown terminated_by {str(ended)[:40]!r}")
    for c in calls:
        if "verdicts" in c and not (c.get("ok") and c.get("tool") == "submit"):
            out.append(f"step {c.get('step')}: verdicts on a call that is not a successful submit")
            break
    return out


def _count_reasons(calls: list[dict], accepted_after: list[int]) -> list[str]:
    """Each call's stored ``valid_count`` and ``reward`` against the replayed counts."""
    prev = 0
    for c, n in zip(calls, accepted_after, strict=True):
        if c.get("valid_count") != n:
            return [f"step {c.get('step')}: valid_count {c.get('valid_count')!r}, replay {n}"]
        if c.get("reward") != n - prev:
            return [f"step {c.get('step')}: reward {c.get('reward')!r}, replay {n - prev}"]
        prev = n
    return []


# ----- per family -----------------------------------------------------------------------------
def reposcan_reasons(record: dict) -> list[str]:
    """Replay every submitted id through a fresh verifier of the record's instance."""
    from ..families.reposcan import verifier
    from ..families.reposcan.env import _valid_set

    instance = record.get("instance")
    try:
        judge = verifier.Verifier(_valid_set(instance if isinstance(instance, str) else ""))
    except KeyError:
        return [f"unknown RepoScan instance {str(instance)[:40]!r}"]
    out, after = [], []
    for c in _calls(record):
        if c.get("ok") and c.get("tool") == "submit":
            ids = _d(c.get("args")).get("ids")
            if not isinstance(ids, list) or not ids:
                out.append(f"step {c.get('step')}: submit without ids")
                ids = []
            replay = []
            for ident in ids:
                v = judge.judge(ident)
                shown = (
                    ident
                    if not isinstance(ident, str) or len(ident) <= verifier.MAX_IDENT_LEN
                    else ident[:200] + "..."
                )
                replay.append([shown, v])
            if c.get("verdicts") != replay and not out:
                out.append(f"step {c.get('step')}: stored verdicts differ from the replay")
        after.append(judge.valid_count)
    return out + _count_reasons(_calls(record), after)


def unit_reasons(record: dict) -> list[str]:
    """Verdict consistency of a work-unit family (DataOps-lite, SWE-lite)."""
    accepted: set[str] = set()
    out, after = [], []
    for c in _calls(record):
        step = c.get("step")
        if c.get("ok") and c.get("tool") == "submit":
            uid = _d(c.get("args")).get("unit_id")
            verdicts = c.get("verdicts")
            if not isinstance(uid, str) or not isinstance(verdicts, list) or len(verdicts) != 1:
                out.append(f"step {step}: a submit needs one unit id and one verdict")
                after.append(len(accepted))
                continue
            uid = uid.strip()
            shown, verdict = (
                (verdicts[0] + [None, None])[:2] if isinstance(verdicts[0], list) else (None, None)
            )
            check = got if isinstance(got := c.get("check"), dict) else None
            well_formed = _UNIT_ID.fullmatch(uid) is not None
            problem = None
            if shown != uid[:64]:
                problem = "verdict for another id"
            elif not well_formed:
                problem = None if verdict == "malformed" else f"{verdict} for a malformed id"
            elif verdict == "malformed":
                problem = "malformed for a well-formed id"
            elif uid in accepted:
                problem = None if verdict == "duplicate" else f"{verdict} after it was accepted"
            elif verdict == "duplicate":
                problem = "duplicate of a unit never accepted"
            elif verdict == "accepted":
                if not (check and check.get("unit") == uid and check.get("passed") is True):
                    problem = "accepted without a passing check"
                accepted.add(uid)
            elif verdict == "rejected":
                if check and check.get("passed") is not False:
                    problem = "rejected with a passing check"
            else:
                problem = f"unknown verdict {verdict!r}"
            if problem and len(out) < 5:
                out.append(f"step {step}: {uid[:20]} {problem}")
        after.append(len(accepted))
    return out + _count_reasons(_calls(record), after)


FAMILY_CHECKS = {
    "reposcan": reposcan_reasons,
    "dataops": unit_reasons,
    "swelite": unit_reasons,
    "dataops_public": unit_reasons,
}


# ----- the trace --------------------------------------------------------------------------------
def _split_lines(raw: bytes) -> tuple[list[bytes], bool]:
    """Complete lines (newline kept) and whether a partial last line (a torn write) followed."""
    lines = raw.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        return lines[:-1], True
    return lines, False


def _obs(line: dict) -> dict:
    try:
        obs = json.loads(line.get("observation") or "")
    except (TypeError, ValueError):
        return {}
    return obs if isinstance(obs, dict) else {}


def _pair_reasons(line: dict, call: dict) -> str | None:
    obs = _obs(line)
    result = _d(obs.get("result"))
    listed = got if isinstance(got := result.get("verdicts"), list) else []
    verdicts = (
        [[v.get("id"), v.get("verdict")] for v in listed if isinstance(v, dict)]
        if obs.get("ok")
        else None
    )
    qgp = _d(_d(line.get("info")).get("qgp"))
    if line.get("ok") != call.get("ok") or obs.get("ok") != call.get("ok"):
        return "ok"
    if obs.get("tool") != call.get("tool"):
        return "tool"
    if (verdicts or None) != (call.get("verdicts") or None):
        return "verdicts"
    if qgp.get("valid_count") != call.get("valid_count"):
        return "valid_count"
    return None


def trace_reasons(record: dict, run: dict, raw: bytes) -> tuple[list[str], dict]:
    """Check the digest chain of ``trace.jsonl`` and its agreement with ``record``'s calls.

    Returns ``(reasons, facts)``; ``facts`` (line counts, ``trace_missing_last``,
    ``trace_partial_line``) go into the record's ``blackbox`` section.
    """
    bb = _d(record.get("blackbox"))
    lines, partial = _split_lines(raw)
    facts = {
        "trace_lines_found": len(lines),
        "trace_partial_line": partial,
        "trace_missing_last": False,
    }
    committed, head_stored = bb.get("trace_lines"), bb.get("trace_head")
    if not isinstance(committed, int) or not isinstance(head_stored, str):
        return ["episode.json has no trace digest head"], facts
    head, parsed, out = chain_start(run), [], []
    heads = [head]
    for i, raw_line in enumerate(lines, 1):
        try:
            line = json.loads(raw_line)
        except ValueError:
            line = None
        if not isinstance(line, dict):
            return [f"trace line {i} is not a JSON object"], facts
        if line.get("prev") != head:
            return [f"trace chain broken at line {i}"], facts
        head = line_digest(raw_line)
        heads.append(head)
        parsed.append(line)
    n = len(lines)
    closed = bool(bb.get("closed"))
    if isinstance(committed, bool) or committed < 0 or committed > n:
        return [f"trace truncated: {n} lines, the record saw {committed}"], facts
    if heads[committed] != head_stored:
        return ["trace head differs from the record's"], facts
    served = bb.get("mcp_calls")
    if not isinstance(served, int) or isinstance(served, bool) or served < 0:
        return ["episode.json has no MCP call count"], facts
    # episode.json is written before each call's trace line, and once more after a clean close
    if committed != (served if closed or served == 0 else served - 1):
        out.append(f"the record saw {committed} trace lines after {served} MCP calls")
    if n == served - 1 and not closed:
        facts["trace_missing_last"] = True  # killed between episode.json and the trace line
    elif n != served:
        out.append(f"trace has {n} lines for {served} MCP calls")
    after_end = sum(1 for ln in parsed if ln.get("step") is None)
    stored_after = bb.get("after_end_calls")
    if after_end != stored_after and not (
        facts["trace_missing_last"] and stored_after == after_end + 1
    ):
        out.append(f"{stored_after!r} calls after the end recorded, {after_end} in the trace")
    oob = sum(
        ln.get("out_of_band_count") or 0
        for ln in parsed
        if isinstance(ln.get("out_of_band_count"), int)
    )
    stored_oob = bb.get("out_of_band_edits_count")
    listed = got if isinstance(got := bb.get("out_of_band_edits"), list) else []
    if stored_oob != oob and not (
        facts["trace_missing_last"] and isinstance(stored_oob, int) and stored_oob > oob
    ):
        out.append(f"{stored_oob} out-of-band edits recorded, {oob} in the trace")
    elif len(listed) > stored_oob:
        out.append("more out-of-band edits listed than counted")
    counted = [ln for ln in parsed if ln.get("step") is not None]
    facts["trace_counted_steps"] = len(counted)
    calls = _calls(record)
    short = facts["trace_missing_last"] and len(counted) == len(calls) - 1
    if len(counted) != len(calls) and not short:
        out.append(f"trace has {len(counted)} counted steps for {len(calls)} calls")
    # strict=False: a trace one short (missing last line) is allowed above
    for line, call in zip(counted, calls, strict=False):
        if line.get("step") != call.get("step"):
            out.append(f"trace step {line.get('step')!r} vs call step {call.get('step')!r}")
            break
        what = _pair_reasons(line, call)
        if what:
            out.append(f"step {call.get('step')}: trace and record differ in {what}")
            break
    return out, facts


def registry_family(task_id) -> str | None:
    """The family of ``task_id`` in the task registry (``None`` for an unknown id)."""
    from ..errors import PushBenchError
    from ..tasks import get_task

    try:
        return get_task(task_id).family if isinstance(task_id, str) else None
    except PushBenchError:
        return None


def drop_unanswered_tail(record: dict, counted: int) -> dict | None:
    """End a killed server's run at its last trace line: drop the record's unanswered call.

    Call only when the trace is one line short (``trace_missing_last``) and otherwise
    consistent with the record; ``counted`` is the trace's number of counted steps
    (``trace_counted_steps``). The record holds one call more than that when the
    unanswered call was a step (an after-the-end call is not in ``calls``): that call is removed
    with its controller step and ``progress`` entry, ``terminated_by`` becomes ``None`` (the
    episode had not ended before that call), and the stored summary (``valid_count``,
    ``success``, ``metrics``) is removed, to be recomputed from the calls kept. Returns what was
    dropped (``{"step", "tool"}``), or ``None`` when no counted call was.
    """
    calls = record.get("calls")
    if not isinstance(calls, list) or len(calls) != counted + 1:
        return None
    last = calls.pop()
    step = last.get("step") if isinstance(last, dict) else None
    if isinstance(record.get("progress"), list):
        record["progress"] = record["progress"][: len(calls)]
    ctrl = _d(record.get("controller"))
    if isinstance(ctrl.get("steps"), list):
        ctrl["steps"] = [
            s for s in ctrl["steps"] if not (isinstance(s, dict) and s.get("step") == step)
        ]
    record["terminated_by"] = None
    # only an ending call (final, ask_user: the last one) sets these: none is left
    record["reported_count"] = record["final_message"] = None
    record["steps_used"] = len(calls)
    for k in ("valid_count", "success", "metrics"):
        record.pop(k, None)
    return {"step": step, "tool": last.get("tool") if isinstance(last, dict) else None}


def audit_run(record: dict, run: dict, trace_raw: bytes | None) -> tuple[list[str], dict]:
    """Every reason the run cannot be trusted (empty: consistent evidence) and trace facts."""
    reasons = ledger_reasons(record)
    family = registry_family(record.get("task_id"))  # never the record's own claim
    check = FAMILY_CHECKS.get(family) if isinstance(family, str) else None
    reasons += check(record) if check else [f"unknown task {str(record.get('task_id'))[:40]!r}"]
    if trace_raw is None:
        return reasons + ["no trace.jsonl"], {}
    more, facts = trace_reasons(record, run, trace_raw)
    return reasons + more, facts
