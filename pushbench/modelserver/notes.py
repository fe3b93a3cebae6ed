"""A policy backend that also keeps progress notes in the client's own memory (Letta).

Offline policies know nothing of memory tools, so a memory agent driven by one would never use
its memory. :class:`NotingBackend` answers like :class:`PolicyBackend` except that after every
answered PushBench call it first writes one progress note with the client's memory tool
(``memory_insert`` into the core memory block ``progress``, Letta's MemGPT-style tool), then
makes the policy's move. The note holds only what the agent saw (the tool, whether it
succeeded, the observation's public counters), never anything hidden.

The PushBench calls are exactly the policy's: :meth:`PolicyBackend.decide` ignores calls of
non-PushBench tools in the history, so the in-process episode and the one through Letta stay
comparable call for call, and the notes show up as Letta memory calls in its trace.
"""

from __future__ import annotations

import hashlib
import json

from ..blackbox.letta_agent import MEMORY_TOOLS
from .core import Conversation, Decision, PolicyBackend, observation_from_result

NOTE_TOOL, NOTE_BLOCK = "memory_insert", "progress"
_COUNTERS = (
    "step",
    "steps_used",
    "budget",
    "budget_left",
    "verified",
    "valid_count",
    "submitted",
    "remaining",
)


def note_text(n: int, tool: str, observation: str) -> str:
    """One line about PushBench call ``n``: its tool, ``ok`` and the counters it reported."""
    obs = json.loads(observation)
    res = got if isinstance(got := obs.get("result"), dict) else {}
    seen = {k: res[k] for k in _COUNTERS if isinstance(res.get(k), (int, float, str))}
    extra = "".join(f" {k}={v}" for k, v in seen.items())
    status = "ok" if obs.get("ok") else f"failed ({obs.get('error_type') or 'error'})"
    return f"call {n}: {tool} {status}{extra}"


class NotingBackend(PolicyBackend):
    """:class:`PolicyBackend` plus one ``memory_insert`` note after each PushBench result."""

    def decide(self, conv: Conversation) -> Decision:
        move = super().decide(conv)
        if NOTE_TOOL not in conv.tools or move.text is not None or not conv.steps:
            return move
        last = conv.steps[-1]
        if last.name in MEMORY_TOOLS or last.result is None:
            return move  # the note for this result is written: make the policy's move
        note = note_text(
            move.step, last.name, observation_from_result(last.name, last.result, last.is_error)
        )
        h = hashlib.sha256(
            f"note|{self.name}|{self.seed}|{move.step}|{len(conv.steps)}".encode()
        ).hexdigest()[:24]
        return Decision(
            tool=NOTE_TOOL,
            arguments={"label": NOTE_BLOCK, "new_string": note, "insert_line": -1},
            call_id=h,
            step=move.step,
        )
