"""Controller components for RepoScan-style retrieval (STATEQGP) and the completion gate.

Each component may *repair* the proposed call (returning the call to execute plus intervention
labels and an optional message to the policy) and may *decorate* the observation. Components use
only :class:`~.state.TrackerState`, which is built from environment outputs.
"""

from __future__ import annotations

from typing import ClassVar

from ..families.reposcan.verifier import MAX_IDENT_LEN
from .state import TrackerState, query_key

MAX_IDS = 10
MAX_BUFFERED_IDS = 200  # ids the buffered_submit queue holds at most


class Component:
    """Base class of a controller component: ``repair`` a proposed call, ``decorate`` progress.

    A subclass sets ``name`` (its catalogue name), ``order`` (its place in the repair pipeline),
    ``families`` (the families it serves; None: all) and ``shows_progress``, and is made known
    with :func:`register`. Components read only the tracker state built from environment
    outputs, never the verifier's hidden state.
    """

    name: ClassVar[str] = ""
    # Position in the wrapper's repair pipeline (lower repairs first); the order of a
    # controller's components comes from here, never from a list in a YAML file.
    order: ClassVar[int] = 0
    families: ClassVar[tuple[str, ...] | None] = None  # None: every family
    shows_progress: ClassVar[bool] = False  # True: the observation gets a ``progress`` block

    def repair(self, call: dict, st: TrackerState, family: str):
        """Return ``(call, labels, message)``; the default changes nothing."""
        return call, [], None

    def decorate(self, progress: dict, st: TrackerState, family: str) -> None:
        """Add fields to the ``progress`` block of the observation (progress components only)."""


REGISTRY: dict[str, type[Component]] = {}


def register(cls: type[Component]) -> type[Component]:
    """Class decorator: make component ``cls`` known under ``cls.name`` (at ``cls.order``)."""
    REGISTRY[cls.name] = cls
    return cls


def _next_page_call(st: TrackerState) -> dict:
    if st.last_query is None:
        return {"tool": "status"}
    mem = st.searches[query_key(st.last_query)]
    return {"tool": "search", "query": st.last_query, "page": mem.next_unseen()}


@register
class ProgressState(Component):
    """Expose verified progress and search state under ``progress`` in every observation."""

    name = "progress_state"
    order = 70
    shows_progress = True

    def decorate(self, progress, st, family):
        progress.update(valid_count=st.valid_count, target=st.target,
                        remaining=max(st.target - st.valid_count, 0),
                        steps_used=st.steps_used, steps_left=st.budget - st.steps_used,
                        submitted_ids=len(st.submitted))
        if family == "reposcan":
            progress["searches"] = st.search_view()
            if st.last_query is not None:
                progress["last_search"] = {
                    "query": st.last_query,
                    "next_unseen_page": st.searches[query_key(st.last_query)].next_unseen()}
            progress["buffered_ids"] = len(st.buffer)


@register
class BufferedSubmit(Component):
    """Queue ids beyond the per-call limit (or named outside a submit); send them later.

    The queue is bounded: it holds at most :data:`MAX_BUFFERED_IDS` ids, each a string of at
    most ``verifier.MAX_IDENT_LEN`` characters (a longer one could only be judged malformed).
    Ids beyond that are dropped with a ``buffer_full`` label and a message saying how many, so
    a bulk call cannot grow the controller's state without bound; the proposed call itself was
    already bounded by the environment's action size limit.
    """

    name = "buffered_submit"
    order = 10
    families = ("reposcan",)

    def repair(self, call, st, family):
        labels, dropped, why = [], 0, []
        if call.get("tool") != "submit" and isinstance(call.get("ids"), list):
            extra = [i for i in call["ids"] if isinstance(i, str)]
            call = {k: v for k, v in call.items() if k != "ids"}
            dropped = _queue(st, extra)
            labels.append("buffer_ids_outside_submit")
            why.append(f"{call.get('tool')} takes no ids: controller queued the "
                       f"{len(extra) - dropped} id(s) you named and sends them with a later "
                       "submit")
        elif call.get("tool") == "submit" and isinstance(call.get("ids"), list):
            ids = list(call["ids"])
            if st.buffer:
                added = [i for i in st.buffer if i not in ids]
                ids += added
                st.buffer = []
                labels.append("buffer_flush")
                why.append(f"controller added {len(added)} queued id(s) from earlier calls "
                           "to this submit")
            if len(ids) > MAX_IDS:
                dropped = _queue(st, ids[MAX_IDS:])
                why.append(f"a submit takes at most {MAX_IDS} ids: controller sent the first "
                           f"{MAX_IDS} and queued {len(ids) - MAX_IDS - dropped} for later "
                           "submit turns")
                ids = ids[:MAX_IDS]
                labels.append("buffer_overflow")
            call = {**call, "ids": ids}
        if dropped:
            labels.append("buffer_full")
            why.append(f"controller queue full: {dropped} id(s) were not queued "
                       f"(it holds at most {MAX_BUFFERED_IDS} ids of at most "
                       f"{MAX_IDENT_LEN} characters)")
        return call, labels, "; ".join(why) or None


def _queue(st: TrackerState, ids: list) -> int:
    """Append new ids to the buffer within its bounds; return how many were dropped."""
    dropped = 0
    for i in ids:
        if i in st.buffer:
            continue
        if isinstance(i, str) and len(i) <= MAX_IDENT_LEN and len(st.buffer) < MAX_BUFFERED_IDS:
            st.buffer.append(i)
        else:
            dropped += 1
    return dropped


@register
class Dedupe(Component):
    """Remove ids already submitted this episode; an emptied submit fetches the next page."""

    name = "dedupe"
    order = 20
    families = ("reposcan",)

    def repair(self, call, st, family):
        if call.get("tool") != "submit" or not isinstance(call.get("ids"), list):
            return call, [], None
        seen, kept = set(st.submitted), []
        for i in call["ids"]:
            if isinstance(i, str) and i in seen:
                continue
            kept.append(i)
            if isinstance(i, str):
                seen.add(i)
        if len(kept) == len(call["ids"]):
            return call, [], None
        dropped = len(call["ids"]) - len(kept)
        if kept:
            return ({**call, "ids": kept}, ["dedupe"],
                    f"controller removed {dropped} id(s) already submitted (in an earlier "
                    "call or earlier in this one)")
        # Refill from the buffer before giving up on the submit turn.
        if st.buffer:
            refill = [i for i in st.buffer if i not in st.submitted][:MAX_IDS]
            st.buffer = [i for i in st.buffer if i not in refill and i not in st.submitted]
            if refill:
                return ({**call, "ids": refill}, ["dedupe", "buffer_flush"],
                        "all proposed ids were already submitted; sent buffered ids instead")
        nxt = _next_page_call(st)
        return (nxt, ["dedupe", "dedupe_redirect"],
                f"all {dropped} proposed id(s) were already submitted; controller ran "
                f"{nxt['tool']} {('page ' + str(nxt['page'])) if 'page' in nxt else ''}".strip())


@register
class PageMemory(Component):
    """A search for a query/page already seen advances to the next unseen page of that query."""

    name = "page_memory"
    order = 30
    families = ("reposcan",)

    def repair(self, call, st, family):
        if call.get("tool") != "search" or not isinstance(call.get("query"), str):
            return call, [], None
        mem = st.searches.get(query_key(call["query"]))
        page = call.get("page", 1)
        if mem is None or not isinstance(page, int) or page not in mem.pages_seen:
            return call, [], None
        nxt = mem.next_unseen()
        return ({**call, "page": nxt}, ["page_memory"],
                f"page {page} of this query was already seen; controller fetched page {nxt}")


@register
class CompletionGate(Component):
    """``final``/``ask_user`` below target runs as ``status`` with a not-done message."""

    name = "completion_gate"
    order = 60

    def repair(self, call, st, family):
        if call.get("tool") in ("final", "ask_user") and st.valid_count < st.target:
            return ({"tool": "status"}, ["completion_gate"],
                    f"not done: the verifier has accepted {st.valid_count} of {st.target}; "
                    f"{st.budget - st.steps_used - 1} steps left. Keep working toward the target.")
        return call, [], None
