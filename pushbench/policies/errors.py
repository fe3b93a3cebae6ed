"""Policy failures that are not agent mistakes.

An agent's bad action is an environment outcome (an ``ok: false`` observation that costs a
step). A *policy error* is different: the policy's backend failed permanently (the model API
refused the key, a model name does not exist, retries were exhausted). The episode driver catches
:class:`PolicyError`, ends the episode with ``terminated_by: "error"`` and stores the error, so
reports count these episodes separately from agent failures. This module has no optional
dependency, so the driver can import it without the ``llm`` extra.
"""

from __future__ import annotations

import re

from .. import metrics

CONTEXT_KIND = "context_length"  # PolicyError.kind of a request over the model's window
# What servers say when a request does not fit the window: OpenAI and vLLM ("maximum context
# length is N tokens"), llama-cpp-python (the same, code context_length_exceeded), llama.cpp's
# server ("exceeds the available context size"), others ("context window", "n_ctx").
_CONTEXT_CODES = frozenset(
    {
        "context_length_exceeded",
        "exceed_context_size_error",
        "context_window_exceeded",
        "string_above_max_length",
    }
)
_CONTEXT_TEXT = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|n_ctx|"
    r"too many tokens|prompt is too long",
    re.IGNORECASE,
)


class PolicyError(RuntimeError):
    """A permanent failure of a policy's backend; ends the episode as ``terminated_by: "error"``.

    ``kind`` is a short code (``auth``, ``bad_request``, ``not_found``, ``api_unavailable``,
    ``config``, ``resume_mismatch``, ...), ``status`` the HTTP status when there was one and
    ``retries`` how many transient failures were retried before giving up.
    """

    def __init__(
        self, kind: str, message: str, *, status: int | None = None, retries: int = 0
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.status, self.retries = kind, message, status, retries

    def as_record(self) -> dict:
        return {
            "type": self.kind,
            "message": self.message[:2000],
            "status": self.status,
            "retries": self.retries,
        }


class ContextOverflow(PolicyError):
    """The server refused a request for not fitting the model's context window
    (``kind`` :data:`CONTEXT_KIND`). ``window`` and ``prompt_tokens`` are the numbers the
    server's message gave (``None`` when it gave none): the policy trims and retries once."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        window: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(CONTEXT_KIND, message, status=status)
        self.window, self.prompt_tokens = window, prompt_tokens


class SpendCut(PolicyError):
    """The episode was cut by a spend limit (:mod:`pushbench.spend`), not by its backend:
    ``kind`` is ``"cost_cap"`` (the run's dollar cap) or ``"token_cap"`` (``max_episode_tokens``),
    and becomes the episode's ``terminated_by``."""


def mark_policy_error(record: dict, error: PolicyError) -> dict:
    """Turn ``record`` into the record of an episode ended by ``error`` (in place; returned).

    ``terminated_by`` becomes ``"error"``, ``record["error"]`` holds the error, the metrics are
    recomputed from the record (so they stay a pure function of it: no ``false_completion``,
    ``premature_stop`` or ``budget_exhausted`` is charged to the agent) and ``metrics["error"]``
    is set so summaries can filter these episodes out.
    A :class:`SpendCut` ends it as ``terminated_by: "cost_cap"`` or ``"token_cap"`` instead,
    with the same treatment (``metrics["error"]`` is set: not an agent outcome).
    """
    record["terminated_by"] = error.kind if isinstance(error, SpendCut) else "error"
    record["error"] = error.as_record()
    record["metrics"] = {**metrics.episode_metrics(record), "error": True}
    return record


def is_context_error(status: int | None, message: str | None, code: str | None = None) -> bool:
    """Whether a refused request was refused for not fitting the model's context window
    (recognised by the error code, or by an HTTP 400/413 whose message says so)."""
    if code in _CONTEXT_CODES:
        return True
    return status in (400, 413) and bool(_CONTEXT_TEXT.search(message or ""))
