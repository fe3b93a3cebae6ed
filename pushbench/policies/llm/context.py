"""The context budget: which messages the model sees.

Token estimate (used for the budget, never for billing when the server reports usage):
``estimate_tokens(text) = ceil(len(text) / 4)`` (about four characters per token for English
and JSON with common BPE tokenizers), and a message costs ``4 + estimate(content) +
estimate(name + arguments)`` for each tool call (``4`` covers role and framing tokens). Tool
definitions are sent with every request and are not counted: they are the same size every
step. The estimate is deliberately simple and model-independent, so the same budget drops the
same turns for every model; ``max_view_tokens_est`` in the record shows how full it got.

The conversation is ``[system, objective, turn, turn, ...]``. A *turn* is one assistant message
plus every message answering it (its tool results, or the harness's reply to a plain-text
answer), so a tool call is never separated from its result. :func:`trim` keeps the two pinned
messages and drops the oldest whole turns until the estimate fits ``budget``; the newest turn
is always kept even when it alone is over budget (the model must see the result of its last
action). Dropping is monotone: a turn dropped once would be dropped again on every later call,
so backends may drop permanently (native) or trim a view (either gives the same messages).
"""

from __future__ import annotations

PINNED = 2  # system prompt + objective


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``: the documented chars-per-token estimate."""
    return (len(text) + 3) // 4


def estimate_message_tokens(message: dict) -> int:
    """Estimated tokens of one chat message (content, tool calls and framing)."""
    content = message.get("content")
    n = 4 + estimate_tokens(content if isinstance(content, str) else "")
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        n += estimate_tokens((fn.get("name") or "") + (fn.get("arguments") or ""))
    return n


def turns(messages: list[dict]) -> list[list[dict]]:
    """Split the unpinned part into turns (each starts at an assistant message)."""
    out: list[list[dict]] = []
    for m in messages[PINNED:]:
        if m.get("role") == "assistant" or not out:
            out.append([m])
        else:
            out[-1].append(m)
    return out


def trim(messages: list[dict], budget: int) -> tuple[list[dict], int]:
    """``(kept_messages, dropped_turn_count)`` under ``budget`` estimated tokens."""
    pinned = messages[:PINNED]
    groups = turns(messages)
    sizes = [sum(estimate_message_tokens(m) for m in g) for g in groups]
    total = sum(estimate_message_tokens(m) for m in pinned) + sum(sizes)
    drop = 0
    while total > budget and drop < len(groups) - 1:
        total -= sizes[drop]
        drop += 1
    kept = list(pinned)
    for g in groups[drop:]:
        kept.extend(g)
    return kept, drop


def view_tokens(messages: list[dict]) -> int:
    return sum(estimate_message_tokens(m) for m in messages)
