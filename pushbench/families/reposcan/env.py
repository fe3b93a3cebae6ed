"""QGP-RepoScan: collect N distinct identifiers of definitions that satisfy a stated property.

Description
    The agent searches a pinned snapshot of a real repository (requests, flask or pytest) for
    function definitions with a property (has a docstring, raises, takes the ``app`` fixture,
    ...) and submits their identifiers, ``<path>::<qualified name>``. A hidden verifier accepts
    each distinct valid identifier once. Success: at least ``target`` accepted identifiers.

Action Space
    :class:`~pushbench.envs.spaces.ToolCallSpace`: one JSON tool call as text (or a dict):

    * ``{"tool": "search", "query": str, "page": int = 1}``: 10 ranked candidates per page with
      identifier, kind, signature line, ``path:line`` and a snippet of at most 8 lines, plus
      ``has_more``. An empty query browses all definitions in identifier order. When part of
      the query was ignored, ``ignored: {"terms", "reason"}`` says which and why (Python
      keywords match paths and names only; a query without letters or digits browses all).
    * ``{"tool": "submit", "ids": [str, ...]}`` (1 to 10): per-id verdicts ``accepted``,
      ``duplicate`` (submitted before in this episode), ``rejected`` or ``malformed``.
    * ``{"tool": "status"}``, ``{"tool": "final", "reported_count": int, "message": str}``,
      ``{"tool": "ask_user", "message": str}``: see :mod:`pushbench.envs.base`.

Observation Space
    ``Text`` over printable ASCII: the JSON observation. The reset observation's ``result`` holds
    ``objective``, ``target``, ``budget`` and ``tools`` (OpenAI-style function definitions).

Rewards
    The number of identifiers newly accepted in the step.

Episode End
    Terminated by ``final`` or ``ask_user``; truncated when ``budget`` steps are used.

Arguments
    ``task_id`` (for example ``RepoScan-pytest-raises-N50`` or the suite ``RepoScan-N50``),
    ``render_mode`` (``"ansi"`` or None), ``budget`` (override the calibrated step budget).
    ``reset(seed=s, options={"instance": name})`` picks a suite's instance (else from the seed).

Version History
    v0: initial release (index version 4, 36 tasks). Index version 5 (predicate facts in
    memory only) changes no observation, identifier or valid set.
    Family version 2 (issue 27): search results carry ``ignored`` (keyword terms, or a query
    without words) and the ``query`` argument's description says so.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

from pydantic import Field

from ...envs.base import QGPEnv, ToolArgs
from ...tasks import instance_config
from . import indexer, verifier
from .predicates import objective_words, parse_predicate
from .search import PAGE_SIZE, SearchIndex, search_feedback

MAX_PAGE = 1000
MAX_QUERY = 500
MAX_IDS = 10


class SearchArgs(ToolArgs):
    query: str = Field(
        max_length=MAX_QUERY,
        description="words to search for in definition "
        "paths, names and code (Python keywords match paths and names only; "
        "the result's `ignored` lists them); empty lists all definitions",
    )
    page: int = Field(default=1, ge=1, le=MAX_PAGE, description="1-based result page")


class SubmitArgs(ToolArgs):
    ids: list[str] = Field(
        min_length=1,
        max_length=MAX_IDS,
        description="identifiers of the form path/to/file.py::Qualified.name",
    )


class RepoScanIntegrityError(RuntimeError):
    """The built snapshot or indexer no longer gives the valid set the manifest pins."""


@cache
def _search_index(snapshot: str) -> SearchIndex:
    return SearchIndex(indexer.load_index(snapshot))


@cache
def _valid_set(instance: str) -> frozenset[str]:
    cfg = instance_config("reposcan", instance)
    pred = parse_predicate(cfg["predicate"])
    # Facts live in memory only (computed once per process and snapshot): no answer key at rest.
    valid = frozenset(f.ident for f in indexer.load_facts(cfg["snapshot"]) if pred.test(f))
    if len(valid) != cfg["valid_count"] or verifier.digest(valid) != cfg["valid_sha256"]:
        raise RepoScanIntegrityError(
            f"RepoScan instance {instance!r}: the valid set built from snapshot "
            f"{cfg['snapshot']!r} does not match the manifest (size {len(valid)} vs pinned "
            f"{cfg['valid_count']}, or a different digest). The snapshot or the indexer changed; "
            "rebuild with `pushbench snapshots build --force` or update the manifest deliberately."
        )
    return valid


def objective_text(instance: str, target: int) -> str:
    """The objective sentence the agent reads for ``instance`` at target ``target``."""
    cfg = instance_config("reposcan", instance)
    pred = parse_predicate(cfg["predicate"])
    return (
        f"In the {cfg['snapshot']} repository snapshot, find function or method definitions "
        f"(module- or class-level `def`/`async def`, not functions nested in functions) that "
        f"{objective_words(pred)}. Submit their identifiers, written "
        f"`<path relative to the repository root>::<Qualified.name>` exactly as search results "
        f"show them. The task is complete when the verifier has accepted at least {target} "
        f"distinct identifiers. Use `search` to find candidates, `submit` (up to {MAX_IDS} ids "
        f"per call) to have them verified, `status` to see verified progress, and `final` when "
        f"done."
    )


class RepoScanEnv(QGPEnv):
    __doc__ = __doc__
    family: ClassVar[str] = "reposcan"
    TOOLS = {
        "search": (
            SearchArgs,
            "Search the repository's definitions; returns 10 candidates per "
            "page with identifier, kind, signature, location and a code snippet.",
        ),
        "submit": (
            SubmitArgs,
            "Submit 1 to 10 identifiers to the verifier; returns a verdict "
            "per id: accepted, duplicate, rejected or malformed.",
        ),
        **QGPEnv.TOOLS,
    }
    _VOCAB: ClassVar[list[str]] = [
        "test",
        "get",
        "error",
        "raise",
        "app",
        "client",
        "request",
        "fixture",
        "session",
        "config",
        "parse",
        "",
    ]

    def _setup_episode(self, instance: str, options: dict) -> dict:
        cfg = instance_config("reposcan", instance)
        self._index = _search_index(cfg["snapshot"])
        self._verifier = verifier.Verifier(_valid_set(instance))
        self._seen_ids: list[str] = []  # display ids from results, for action sampling only
        return {
            "objective": objective_text(instance, self.task.target),
            "snapshot": cfg["snapshot"],
            "instance": instance,
        }

    def _valid_count(self) -> int:
        return self._verifier.valid_count

    def _tool_search(self, args: SearchArgs) -> dict:
        hits, has_more, total = self._index.page(args.query, args.page)
        if len(self._seen_ids) < 200:
            self._seen_ids.extend(h.ident for h in hits[:3])
        out: dict[str, Any] = {"query": args.query}
        ignored = search_feedback(args.query)  # a function of the query alone: hides nothing
        if ignored is not None:
            out["ignored"] = ignored
        return {
            **out,
            "page": args.page,
            "page_size": PAGE_SIZE,
            "total_matches": total,
            "has_more": has_more,
            "results": [h.as_dict() for h in hits],
        }

    def _submission_ids(self, call: dict) -> list[str]:
        ids = call.get("ids")
        return [i for i in ids if verifier.is_well_formed(i)] if isinstance(ids, list) else []

    def _tool_submit(self, args: SubmitArgs) -> dict:
        verdicts = []
        for ident in args.ids:
            v = self._verifier.judge(ident)
            if v == verifier.MALFORMED:
                self.counts["malformed"] += 1
            else:
                self.counts["submitted"] += 1
                if v == verifier.DUPLICATE:
                    self.counts["duplicates"] += 1
                elif v == verifier.REJECTED:
                    self.counts["rejected"] += 1
            # Only malformed ids can exceed MAX_IDENT_LEN; clip those so an echo stays small.
            shown = ident if len(ident) <= verifier.MAX_IDENT_LEN else ident[:200] + "..."
            verdicts.append({"id": shown, "verdict": v})
        return {
            "verdicts": verdicts,
            "accepted_now": sum(v["verdict"] == "accepted" for v in verdicts),
            "valid_count": self._verifier.valid_count,
            "target": self.task.target,
        }

    def _sample_action(self, rng) -> dict:
        tool = ["search", "search", "submit", "submit", "status", "final", "ask_user"][
            int(rng.integers(7))
        ]
        if tool == "search":
            return {
                "tool": tool,
                "query": self._VOCAB[int(rng.integers(len(self._VOCAB)))],
                "page": int(rng.integers(1, 6)),
            }
        if tool == "submit":
            pool = getattr(self, "_seen_ids", None) or ["src/module.py::function"]
            k = int(rng.integers(1, 4))
            return {"tool": tool, "ids": [pool[int(rng.integers(len(pool)))] for _ in range(k)]}
        return self._sample_common(tool, rng)
