"""Memory baselines (practical comparisons, run under the ``standard`` controller).

* ``llm-langgraph-memory`` -- **LangGraph + Memory**: the LangGraph agent gets ``remember(note)``
  and ``recall(query)`` tools over a LangGraph long-term memory store (``InMemoryStore`` with a
  semantic index, compiled into the graph and reached through the node's ``runtime.store``).
  Recalled notes enter the context as the tool's answer.
* ``llm-memgpt`` -- **MemGPT-style** (not Letta itself): on the native loop, a *core memory*
  block the agent edits with ``core_memory_append`` / ``core_memory_replace`` that is always in
  the context (appended to the system message, so context trimming never drops it), plus an
  *archival memory* it fills with ``archival_memory_insert`` and reads with
  ``archival_memory_search``.

Memory calls run in the harness and cost no environment step (see :mod:`.core` for the
allowance that keeps an episode finite); ``record["memory"]`` counts them by tool.

Search uses :func:`hash_embed`, a deterministic hashed bag-of-words embedding (no model, no
download), so memory behaviour is reproducible offline.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationError

from ..base import PolicyParamsError, describe_validation
from .config import MemGPTConfig
from .langgraph_agent import LangGraphPolicy
from .native import LLMPolicy

if TYPE_CHECKING:  # an optional dependency, imported where a store is made
    from langgraph.store.base import BaseStore

EMBED_DIMS = 256
MAX_NOTE_CHARS = 2000
_WORD = re.compile(r"[A-Za-z0-9_]+")


def hash_embed(texts: Sequence[str], dims: int = EMBED_DIMS) -> list[list[float]]:
    """L2-normalised hashed bag of lower-cased word and identifier-part tokens."""
    out = []
    for text in texts:
        vec = [0.0] * dims
        for tok in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "big")
            vec[h % dims] += 1.0 if (h >> 32) & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        out.append([v / norm for v in vec])
    return out


def _fn(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def _text(args: dict, key: str, limit: int = MAX_NOTE_CHARS) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"argument {key!r} must be a non-empty string")
    if len(value) > limit:
        raise ValueError(f"argument {key!r} is longer than {limit} characters")
    return value


def _check_keys(args: dict, allowed: set[str]) -> None:
    extra = set(args) - allowed
    if extra:
        raise ValueError(f"unknown argument(s) {sorted(extra)}")


class _Counts:
    kind: ClassVar[str] = ""

    def __init__(self) -> None:
        self.by_tool: dict[str, int] = {}
        self.errors = 0

    def note_call(self, name: str, ok: bool) -> None:
        self.by_tool[name] = self.by_tool.get(name, 0) + 1
        self.errors += not ok

    def _count_state(self) -> dict:
        return {"by_tool": dict(self.by_tool), "errors": self.errors}

    def _load_counts(self, d: dict) -> None:
        self.by_tool, self.errors = dict(d.get("by_tool") or {}), int(d.get("errors") or 0)

    def summary(self) -> dict:
        return {
            "backend": self.kind,
            "calls": sum(self.by_tool.values()),
            "by_tool": dict(sorted(self.by_tool.items())),
            "errors": self.errors,
        }


class StoreMemory(_Counts):
    """``remember`` / ``recall`` over a LangGraph ``BaseStore`` namespace."""

    kind: ClassVar[str] = "langgraph_store"
    tools = [
        _fn(
            "remember",
            "Save a note to long-term memory (costs no step).",
            {"note": {"type": "string", "description": "what to remember"}},
            ["note"],
        ),
        _fn(
            "recall",
            "Search long-term memory for notes related to a query (costs no step).",
            {
                "query": {"type": "string"},
                "k": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            },
            ["query"],
        ),
    ]
    names = frozenset({"remember", "recall"})

    def __init__(self, namespace: tuple[str, ...] = ("pushbench", "notes")) -> None:
        super().__init__()
        self.namespace = namespace
        self.store: BaseStore | None = None  # bound by the policy before the first call
        self.notes: list[list[str]] = []  # [key, text]: the log that rebuilds the store on resume

    def bind(self, store) -> None:
        self.store = store

    def call(self, name: str, args: dict) -> dict:
        store = self.store
        if store is None:
            raise RuntimeError("StoreMemory.call before bind(store)")
        if name == "remember":
            _check_keys(args, {"note"})
            note = _text(args, "note")
            key = f"note-{len(self.notes) + 1:04d}"
            store.put(self.namespace, key, {"text": note})
            self.notes.append([key, note])
            return {"stored": key, "notes": len(self.notes)}
        _check_keys(args, {"query", "k"})
        query = _text(args, "query", 500)
        k = args.get("k", 5)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 10:
            raise ValueError("argument 'k' must be an integer from 1 to 10")
        hits = store.search(self.namespace, query=query, limit=k)
        return {
            "notes": [
                {
                    "key": h.key,
                    "text": h.value.get("text"),
                    "score": None if h.score is None else round(h.score, 4),
                }
                for h in hits
            ],
            "total_notes": len(self.notes),
        }

    def context_block(self) -> None:
        return None

    def to_state(self) -> dict:
        return {**self._count_state(), "notes": [list(n) for n in self.notes]}

    def load_state(self, d: dict) -> None:
        self._load_counts(d)
        self.notes = [list(n) for n in d.get("notes") or ()]
        if self.store is not None:
            for key, text in self.notes:
                self.store.put(self.namespace, key, {"text": text})

    def summary(self) -> dict:
        return {**super().summary(), "notes": len(self.notes)}


class MemGPTMemory(_Counts):
    """Core memory (always in context, agent-edited) plus searchable archival memory."""

    kind: ClassVar[str] = "memgpt_style"
    PAGE = 5
    tools = [
        _fn(
            "core_memory_append",
            "Append text to your core memory, which is always shown to you (costs no step).",
            {"content": {"type": "string"}},
            ["content"],
        ),
        _fn(
            "core_memory_replace",
            "Replace an exact piece of your core memory with new text "
            "(empty new_content deletes it; costs no step).",
            {"old_content": {"type": "string"}, "new_content": {"type": "string"}},
            ["old_content", "new_content"],
        ),
        _fn(
            "archival_memory_insert",
            "Store a passage in archival memory (costs no step).",
            {"content": {"type": "string"}},
            ["content"],
        ),
        _fn(
            "archival_memory_search",
            "Search archival memory; 5 passages per page (costs no step).",
            {"query": {"type": "string"}, "page": {"type": "integer", "minimum": 1, "default": 1}},
            ["query"],
        ),
    ]
    names = frozenset(t["function"]["name"] for t in tools)

    def __init__(self, core_chars: int = 2000) -> None:
        super().__init__()
        self.core_chars = core_chars
        self.core = ""
        self.archival: list[str] = []
        self._vectors: list[list[float]] = []

    def call(self, name: str, args: dict) -> dict:
        if name == "core_memory_append":
            _check_keys(args, {"content"})
            text = _text(args, "content")
            new = f"{self.core}\n{text}" if self.core else text
            if len(new) > self.core_chars:
                raise ValueError(
                    f"core memory would exceed {self.core_chars} characters; "
                    "replace or shorten existing content first"
                )
            self.core = new
            return {"core_chars": len(self.core), "limit": self.core_chars}
        if name == "core_memory_replace":
            _check_keys(args, {"old_content", "new_content"})
            old = _text(args, "old_content")
            replacement = args.get("new_content")
            if not isinstance(replacement, str):
                raise ValueError("argument 'new_content' must be a string")
            if old not in self.core:
                raise ValueError("old_content does not occur in core memory")
            updated = self.core.replace(old, replacement, 1)
            if len(updated) > self.core_chars:
                raise ValueError(f"core memory would exceed {self.core_chars} characters")
            self.core = updated
            return {"core_chars": len(self.core), "limit": self.core_chars}
        if name == "archival_memory_insert":
            _check_keys(args, {"content"})
            text = _text(args, "content")
            self.archival.append(text)
            self._vectors.extend(hash_embed([text]))
            return {"entries": len(self.archival)}
        _check_keys(args, {"query", "page"})
        query = _text(args, "query", 500)
        page = args.get("page", 1)
        if not isinstance(page, int) or isinstance(page, bool) or page < 1:
            raise ValueError("argument 'page' must be a positive integer")
        q = hash_embed([query])[0]
        ranked = sorted(
            range(len(self.archival)),
            key=lambda i: (-sum(a * b for a, b in zip(q, self._vectors[i], strict=True)), i),
        )
        start = (page - 1) * self.PAGE
        return {
            "results": [self.archival[i] for i in ranked[start : start + self.PAGE]],
            "page": page,
            "total": len(self.archival),
            "has_more": start + self.PAGE < len(self.archival),
        }

    def context_block(self) -> str:
        return (
            f"## Core memory ({len(self.core)}/{self.core_chars} characters; always shown; "
            "edit it with core_memory_append and core_memory_replace)\n"
            f"{self.core or '(empty)'}\n"
            f"## Archival memory: {len(self.archival)} passages (archival_memory_search "
            "reads them)"
        )

    def bind(self, store) -> None:  # no LangGraph store
        pass

    def to_state(self) -> dict:
        return {**self._count_state(), "core": self.core, "archival": list(self.archival)}

    def load_state(self, d: dict) -> None:
        self._load_counts(d)
        self.core = d.get("core") or ""
        self.archival = list(d.get("archival") or ())
        self._vectors = hash_embed(self.archival) if self.archival else []

    def summary(self) -> dict:
        return {
            **super().summary(),
            "core_chars": len(self.core),
            "archival_entries": len(self.archival),
        }


class LangGraphMemoryPolicy(LangGraphPolicy):
    """LangGraph + Memory: the LangGraph agent with remember/recall over a long-term store."""

    name: ClassVar[str] = "llm-langgraph-memory"
    backend: ClassVar[str] = "langgraph"

    def make_memory(self) -> StoreMemory:
        return StoreMemory()

    def make_store(self):
        from langgraph.store.memory import InMemoryStore

        return InMemoryStore(index={"dims": EMBED_DIMS, "embed": hash_embed, "fields": ["text"]})


class MemGPTPolicy(LLMPolicy):
    """MemGPT-style memory (core block + archival memory) on the native loop."""

    name: ClassVar[str] = "llm-memgpt"
    backend: ClassVar[str] = "native"
    Params = MemGPTConfig

    def __init__(self, seed: int | None = None, **params: Any) -> None:
        given = "core_chars" in params
        try:
            self.core_chars = MemGPTConfig.model_validate(params).core_chars
        except ValidationError as e:
            raise PolicyParamsError(describe_validation(self.name, e)) from None
        params.pop("core_chars", None)
        super().__init__(seed=seed, **params)
        if given:  # keep it in the described params (and so in the record)
            self.params["core_chars"] = self.core_chars

    def make_memory(self) -> MemGPTMemory:
        return MemGPTMemory(self.core_chars)
