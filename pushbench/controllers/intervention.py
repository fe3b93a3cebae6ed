"""How a controller states an intervention, in the observation and in the trace.

When a component blocked, replaced or filtered the proposed call, the observation gets a
``controller`` block::

    {"interventions": [labels], "sent": {"tool": ..., "args": {...}},
     "executed": {"tool": ..., "args": {...}}, "filtered": [ids], "filtered_count": n,
     "reason": "<what each component said>", "message": "<one paragraph an LLM reads>"}

``sent`` is the call the agent proposed (after the environment's own normalisation),
``executed`` the call that ran instead, ``filtered`` the ids named in the sent call that the
executed call does not carry (a repeat inside one call counts once per extra copy; at most
:data:`MAX_LISTED` are listed, ``filtered_count`` counts them all), ``reason`` the components'
messages and ``message`` the same facts as sentences. The trace (``info["controller"]`` and the
record's kept steps) holds ``proposed``, ``executed``, ``filtered`` (all of them) and ``reason``.
Everything here comes from the call the agent sent and the call the controller built, so
nothing hidden can appear in it.
"""

from __future__ import annotations

import json
from collections import Counter

ARGS_LIMIT = 2000  # characters of one call's arguments kept as a structure in the block
SENTENCE_LIMIT = 300  # characters of one call's arguments quoted in the message
MAX_LISTED = 50  # filtered ids listed in the observation (all are counted)


def _ids(call) -> list:
    if isinstance(call, dict) and isinstance(call.get("ids"), list):
        return list(call["ids"])
    return []


def filtered_ids(sent, executed) -> list:
    """Ids the sent call named that the executed call does not carry (in sent order; each
    extra copy of an id repeated within the sent call counts once)."""
    left = Counter(json.dumps(i, sort_keys=True) for i in _ids(executed))
    out = []
    for i in _ids(sent):
        key = json.dumps(i, sort_keys=True)
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(i)
    return out


def split(call) -> dict:
    """``{"tool": ..., "args": {...}}`` of a call; arguments longer than :data:`ARGS_LIMIT`
    characters of JSON become their clipped JSON text (ending in ``...``)."""
    if not isinstance(call, dict):
        return {"tool": None, "args": str(call)[:ARGS_LIMIT]}
    args = {k: v for k, v in call.items() if k != "tool"}
    text = json.dumps(args, ensure_ascii=True, separators=(",", ":"))
    return {"tool": call.get("tool"), "args": args if len(text) <= ARGS_LIMIT
            else text[:ARGS_LIMIT] + "..."}


def _quote(part: dict) -> str:
    args = part["args"]
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=True)
    if len(text) > SENTENCE_LIMIT:
        text = text[:SENTENCE_LIMIT] + "..."
    return f"{part['tool']} {text}" if text not in ("{}", "") else str(part["tool"])


def describe(labels: list[str], sent, executed, filtered: list, reason: str) -> dict:
    """The ``controller`` block of an observation whose call a component changed."""
    s, e = split(sent), split(executed)
    words = [f"The controller changed your call ({', '.join(labels)}).",
             f"You sent: {_quote(s)}."]
    if e == s:
        words.append("It was executed as sent.")
    elif e["tool"] == s["tool"]:
        words.append(f"Executed instead (same tool, changed arguments): {_quote(e)}.")
    else:
        words.append(f"Your {s['tool']} call was not executed; executed instead: {_quote(e)}.")
    if filtered:
        shown = json.dumps(filtered[:MAX_LISTED], ensure_ascii=True)
        more = f" and {len(filtered) - MAX_LISTED} more" if len(filtered) > MAX_LISTED else ""
        words.append(f"Ids removed from your call: {shown}{more}.")
    if reason:
        words.append(f"Why: {reason.rstrip('.')}.")
    return {"interventions": list(labels), "sent": s, "executed": e,
            "filtered": filtered[:MAX_LISTED], "filtered_count": len(filtered),
            "reason": reason, "message": " ".join(words)}
