"""What a replay is fed: steps (an action plus the out-of-band edits before it), read from records.

:mod:`pushbench.runner.replay` rebuilds an episode through a fresh environment; this module
turns what run folders hold into its input, and holds the one encoding of a recorded
out-of-band workspace edit:

* :func:`steps_from_trace` - the counted lines of a black-box run's ``trace.jsonl``
  (:mod:`pushbench.blackbox.session`): each line's ``proposed`` call (the MCP tool call as the
  agent sent it, in full) and the ``out_of_band_edits`` recorded before it.
* :func:`steps_from_record` - an in-process ``pushbench run`` record (its gzipped trace:
  ``calls`` plus the controller's ``steps``): the proposed call where the controller changed
  it, else the executed call rebuilt from the ledger's ``args``.
* :func:`record_edit` / :func:`decode_edit` - an out-of-band edit of the live workspace as it is
  written into the trace line of the call it preceded (the new bytes, base64, size-capped) and
  read back.

Steps that cannot be rebuilt exactly are not guessed: each comes back with a reason in the
``unverifiable`` list (an argument clipped in the record, an edit over the size cap, a call
refused unparsed whose text was not kept), and the step itself is replaced by a *stand-in*
(:data:`STAND_IN`, refused by the environment before any tool runs, so it changes nothing but
the step count) or, for a clipped argument, kept as recorded.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any

MAX_EDIT_BYTES = 256 * 1024  # one file's new bytes kept in a trace line
MAX_EDITS_BYTES = 2 * 1024 * 1024  # all new bytes kept for one call's out-of-band edits
MAX_EDITS_PER_CALL = 500  # edits kept per call (the count stays exact)
EDIT_KINDS = ("created", "modified", "deleted")
# Refused by the action decoder (raw control character) before any tool or component runs.
STAND_IN = "\x01"
_CLIPPED_ARG = re.compile(r"\.\.\.\[\d+ chars\]\Z")  # envs/backlog.py's ledger clip
_PREVIEW_LIMIT = 2000  # controllers/wrapper.py's proposed clip
# Text the action decoder refuses with the same observation as an unreadable wire line (a
# number_too_large message names the digit count, which the trace does not keep: a stand-in).
_UNREADABLE = {"too_deep": "[" * 40 + "]" * 40}


@dataclass(frozen=True)
class Edit:
    """One out-of-band change of a workspace file (``path`` relative, ``/``-separated).

    ``data``: the new bytes of a created or modified regular file; ``link``: the target of a
    created or modified symlink; neither for ``deleted``.
    """

    path: str
    kind: str
    data: bytes | None = None
    link: str | None = None


@dataclass
class Step:
    """One call to replay: ``action`` goes to ``env.step`` after ``edits`` are applied.

    ``stand_in``: the action is :data:`STAND_IN` for a call the record says was refused but
    whose text it does not hold (compare only ``ok``, counts and reward for it).
    """

    action: Any
    edits: tuple[Edit, ...] = ()
    stand_in: bool = False


@dataclass
class Steps:
    steps: list[Step] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)


# ----- recorded edits ---------------------------------------------------------------------------
def record_edit(root: str, rel: str, kind: str, room: int = MAX_EDIT_BYTES) -> dict:
    """The trace-line entry of an out-of-band change of ``root/rel`` as it is now.

    ``{"path", "kind"}`` plus, for a created/modified regular file, ``size``, ``sha256`` and
    ``b64`` (its bytes); for a symlink, ``link``; when the content cannot be kept (over
    ``min(room, MAX_EDIT_BYTES)`` bytes, not a regular file or link, unreadable),
    ``unrecorded`` with the reason, which makes the run unverifiable. Never follows links.
    """
    entry: dict[str, Any] = {"path": rel, "kind": kind}
    if kind == "deleted":
        return entry
    full = os.path.join(root, rel)
    cap = max(0, min(room, MAX_EDIT_BYTES))
    try:
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            entry["link"] = os.readlink(full)
            return entry
        if not stat.S_ISREG(st.st_mode):
            entry["unrecorded"] = "not a regular file or a symlink"
            return entry
        if st.st_size > cap:
            entry["unrecorded"] = f"{st.st_size} bytes, over the {cap}-byte cap"
            return entry
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(cap + 1)
    except OSError as e:  # changed again or removed meanwhile
        entry["unrecorded"] = f"unreadable ({e.strerror or type(e).__name__})"
        return entry
    if len(data) > cap:
        entry["unrecorded"] = f"grew past the {cap}-byte cap while it was read"
        return entry
    entry.update(
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        b64=base64.b64encode(data).decode("ascii"),
    )
    return entry


def decode_edit(obj: Any) -> tuple[Edit | None, str | None]:
    """``(edit, None)`` for a well-formed trace entry, else ``(None, reason)`` (never raises)."""
    if not isinstance(obj, dict):
        return None, "an out-of-band edit entry is not an object"
    path, kind = obj.get("path"), obj.get("kind")
    if not isinstance(path, str) or kind not in EDIT_KINDS:
        return None, "an out-of-band edit entry without a path or a known kind"
    shown = path[:60]
    if "unrecorded" in obj:
        return None, f"out-of-band edit of {shown} not recorded ({str(obj['unrecorded'])[:60]})"
    if kind == "deleted":
        return Edit(path, kind), None
    if isinstance(obj.get("link"), str):
        return Edit(path, kind, link=obj["link"]), None
    raw = obj.get("b64")
    try:
        data = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
    except ValueError:
        data = None
    if data is None or len(data) > MAX_EDIT_BYTES:
        return None, f"out-of-band edit of {shown}: content missing or malformed"
    if obj.get("sha256") != hashlib.sha256(data).hexdigest() or obj.get("size") != len(data):
        return None, f"out-of-band edit of {shown}: content differs from its digest"
    return Edit(path, kind, data=data), None


# ----- black-box traces ---------------------------------------------------------------------------
def trace_action(proposed: Any) -> tuple[Any, bool]:
    """``(action, exact)``: the ``env.step`` action a trace line's ``proposed`` stands for.

    An MCP call becomes ``{"tool": name, **arguments}`` (an argument named ``tool`` renamed as
    the server does). A call refused for its size or unreadable on the wire is refused
    unparsed by the environment; any text past the limit (or :data:`STAND_IN`) stands for it,
    and ``exact`` is False for the latter (its ``error_type`` may differ).
    """
    from ..envs.actions import mcp_call
    from ..envs.spaces import MAX_ACTION_BYTES

    if not isinstance(proposed, dict):
        return STAND_IN, False
    if proposed.get("oversized"):  # refused by its size alone: any text past the limit will do
        head = got if isinstance(got := proposed.get("head"), str) else ""
        return head + " " * (MAX_ACTION_BYTES + 1), True
    if "unreadable" in proposed:  # the wire line the env refused for this reason
        text = _UNREADABLE.get(str(proposed.get("unreadable")))
        return (text, True) if text else (STAND_IN, False)
    return mcp_call(proposed.get("tool"), proposed.get("arguments")), True


def steps_from_trace(lines: list[dict]) -> Steps:
    """The steps of a black-box trace: its counted lines (``step`` set) in order.

    Lines after the episode's end (``step`` null) ran nothing and are skipped. Edits recorded
    on any line apply before the next counted call.
    """
    out = Steps()
    pending: list[Edit] = []
    for i, line in enumerate(lines, 1):
        if not isinstance(line, dict):
            out.unverifiable.append(f"trace line {i} is not an object")
            continue
        listed = line.get("out_of_band_edits")
        if listed is not None:
            if not isinstance(listed, list):
                out.unverifiable.append(f"trace line {i}: out_of_band_edits is not a list")
            else:
                for obj in listed[: MAX_EDITS_PER_CALL + 1]:
                    edit, why = decode_edit(obj)
                    if edit is None:
                        out.unverifiable.append(f"trace line {i}: {why}")
                    else:
                        pending.append(edit)
        count = line.get("out_of_band_count")
        if isinstance(count, int) and not isinstance(listed, list) and count > 0:
            out.unverifiable.append(
                f"trace line {i}: {count} out-of-band edit(s) without "
                "their content (written before edits were recorded)"
            )
        elif isinstance(count, int) and isinstance(listed, list) and count != len(listed):
            out.unverifiable.append(
                f"trace line {i}: {count} out-of-band edits, {len(listed)} recorded"
            )
        if line.get("step") is None:
            continue
        action, exact = trace_action(line.get("proposed"))
        out.steps.append(Step(action, tuple(pending), stand_in=not exact))
        pending = []
    if pending:
        out.unverifiable.append("out-of-band edits recorded after the last call")
    return out


# ----- in-process records -------------------------------------------------------------------------
def _clipped(value: Any) -> bool:
    if isinstance(value, str):
        return _CLIPPED_ARG.search(value) is not None
    if isinstance(value, list):
        return any(_clipped(v) for v in value)
    if isinstance(value, dict):
        return any(_clipped(v) for v in value.values())
    return False


def _whole_submit(clipped: str, ids: Any) -> dict | None:
    """The proposed ``submit`` whose record clipped it, rebuilt from the step's unclipped
    ``proposed_ids`` (the well-formed ids the wrapper keeps in full), or ``None``.

    Taken only when the rebuilt call clips to exactly the stored text, so its first 2000
    characters are the policy's own. Should the policy's call have held more past the clip (a
    malformed id, which ``proposed_ids`` leaves out), the replayed calls differ from the stored
    ones and the episode is flagged: a wrong rebuild is never passed as clean.
    """
    from ..envs.actions import preview

    if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
        return None
    whole = {"tool": "submit", "ids": list(ids)}
    return whole if preview(whole, _PREVIEW_LIMIT) == clipped else None


def steps_from_record(record: dict) -> Steps:
    """The steps of an in-process record (``calls`` + ``controller.steps``).

    Where the controller changed a call its step keeps ``proposed`` (what the policy sent,
    clipped past 2000 characters); elsewhere the proposed call is the executed one,
    ``{"tool": tool, **args}`` from the ledger (work-unit families shorten strings past 200
    characters in ``args`` and keep them whole in ``unclipped``). A refused call whose
    arguments were not parsed (``args`` null) becomes a stand-in. An argument shortened without
    its whole value (records written before ``unclipped``) makes the run unverifiable.
    """
    out = Steps()
    calls = record.get("calls") if isinstance(record, dict) else None
    if not isinstance(calls, list):
        out.unverifiable.append("the record has no list of calls")
        return out
    ctl = record.get("controller")
    kept = ctl.get("steps") if isinstance(ctl, dict) else None
    changed = (
        {s.get("step"): s for s in kept if isinstance(s, dict)} if isinstance(kept, list) else {}
    )
    for pos, c in enumerate(calls, 1):
        c = c if isinstance(c, dict) else {}
        step = changed.get(pos)
        if step is not None and "proposed" in step:
            prop = step["proposed"]
            if isinstance(prop, str) and len(prop) == _PREVIEW_LIMIT + 3 and prop.endswith("..."):
                whole = _whole_submit(prop, step.get("proposed_ids"))
                if whole is None:
                    out.unverifiable.append(
                        f"step {pos}: the proposed call is clipped in the record"
                    )
                else:
                    prop = whole
            if isinstance(prop, str) and prop.startswith("<") and prop.endswith(">"):
                out.steps.append(Step(STAND_IN, stand_in=True))  # "<unreadable dict action>"
            else:
                out.steps.append(Step(prop))
            continue
        args, tool = c.get("args"), c.get("tool")
        if isinstance(args, dict) and isinstance(c.get("unclipped"), dict):
            args = {**args, **c["unclipped"]}  # the ledger's shortened arguments in full
        if isinstance(args, dict) and isinstance(tool, str):
            if _clipped(args):
                out.unverifiable.append(
                    f"step {pos}: an argument of {tool[:20]} is clipped in the record"
                )
            out.steps.append(Step({"tool": tool, **args}))
        else:
            out.steps.append(Step(STAND_IN, stand_in=True))
    return out
