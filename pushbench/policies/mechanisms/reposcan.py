"""The competent RepoScan base agent and the RepoScan-only mechanisms.

**Base** (:class:`RepoScanAgent`): reads the property from the objective, works through its
queries (:func:`~pushbench.policies.reposcan.judge.queries_for`) page by page, judges each hit from
its
snippet (``yes``/``maybe`` are submitted), submits what a page gave (at most 10 ids a call),
never resubmits an id it remembers sending, never re-reads a page it remembers, and keeps its
tally at the verified count it reads in each result. It calls ``final`` once that tally reaches
the target; a tally that was not read from a shown count is confirmed with ``status`` first.
When every query is exhausted it reports the verified count. The only randomness is in the
mechanisms (:mod:`.core`), so with none switched on it is deterministic.

It reads observations only as text (:mod:`.reading`): a count shown anywhere (a status result,
a controller's block) replaces its tally; pages an added block says were seen for its query are
treated as seen.
"""

from __future__ import annotations

from collections import deque

from ..reposcan.judge import judge, property_from_objective, queries_for
from . import reading
from .core import Hooks, Mechanism, register

MAX_IDS = 10


class RepoScanAgent:
    """Competent base plus ``mechanisms`` (a :class:`~.core.Hooks`)."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks

    def reset(self, text: str) -> None:
        r = reading.decode(text)["result"]
        self.target = int(r["target"])
        self.spec = property_from_objective(r["objective"])
        self.plan = queries_for(self.spec)
        self.done_queries: set[str] = set()
        self.history: deque[tuple[dict | None, dict]] = deque(maxlen=self.hooks.memory())
        self.scratch: list[str] = []  # judged plausible, not sent yet
        self.tally = 0
        self.verified = True  # the tally was read from a shown count
        self.last_action: dict | None = None

    # ----- views of what is in memory -----------------------------------------------------
    def sent_ids(self) -> set[str]:
        return {
            i
            for a, _ in self.history
            if a and a.get("tool") == "submit"
            for i in a.get("ids", ())
            if isinstance(i, str)
        }

    def seen_hits(self) -> list[dict]:
        return [
            h
            for _, o in self.history
            if o.get("ok") and o.get("tool") == "search"
            for h in o["result"]["results"]
        ]

    def next_page(self, query: str, obs: dict) -> int:
        pages = {
            o["result"]["page"]
            for _, o in self.history
            if o.get("ok") and o.get("tool") == "search" and o["result"]["query"] == query
        }
        shown, nxt = reading.pages_mentioned(obs, query)
        pages |= shown
        if nxt is not None and nxt not in pages:
            return nxt
        return max(pages) + 1 if pages else 1

    # ----- the loop -------------------------------------------------------------------------
    def act(self, text: str) -> dict:
        obs = reading.decode(text)
        self.history.append((self.last_action, obs))
        self._read(obs)
        action = self._decide(obs)
        self.last_action = action
        return action

    def _read(self, obs: dict) -> None:
        result = obs.get("result") if obs.get("ok") else None
        last = self.last_action or {}
        if (
            isinstance(result, dict)
            and obs.get("tool") == "submit"
            and last.get("tool") == "submit"
        ):
            sent = len(last.get("ids", ()))
            bump = self.hooks.first("read_submit", self, sent, result["verdicts"])
            if bump is not None:
                self.tally, self.verified = self.tally + bump, False
            else:
                read = [
                    (v["id"], self.hooks.read_verdict(v["verdict"])) for v in result["verdicts"]
                ]
                misread = [
                    x for x, v in zip(read, result["verdicts"], strict=True) if x[1] != v["verdict"]
                ]
                for ident, verdict in misread:
                    if verdict == "rejected":  # believes it did not go through: sends it again
                        self.scratch.append(ident)
                if misread:
                    self.tally += sum(v == "accepted" for _, v in read)
                    self.verified = False
                else:
                    self.tally, self.verified = result["valid_count"], True
        elif isinstance(result, dict) and (n := reading.count_in(result)) is not None:
            self.tally, self.verified = n, True
        shown = reading.count_in(reading.extra_blocks(obs))
        if shown is not None:
            self.tally, self.verified = shown, True

    def _decide(self, obs: dict) -> dict:
        last = self.last_action or {}
        if last.get("tool") in ("final", "ask_user"):  # refused: the episode went on
            again = self.hooks.first("after_refusal", self, last)
            if again is not None:
                return again
        quit_ = self.hooks.first("quit_now", self)
        if quit_ is not None:
            return quit_
        if self.tally >= self.target:
            if self.verified or not self.hooks.checks_status():
                return {
                    "tool": "final",
                    "reported_count": int(self.tally),
                    "message": f"found {self.tally} identifiers",
                }
            if last.get("tool") != "status":
                return {"tool": "status"}
        if not obs.get("ok") and obs.get("tool") == "submit" and len(last.get("ids", ())) > MAX_IDS:
            ids = list(last["ids"])
            rest = self.hooks.first("drop_rest", self, ids[MAX_IDS:])
            self.scratch = (ids[MAX_IDS:] if rest is None else rest) + self.scratch
            return self._submit(ids[:MAX_IDS])
        if obs.get("ok") and obs.get("tool") == "search":
            self._collect(obs["result"])
            if not obs["result"]["has_more"]:
                self.done_queries.add(obs["result"]["query"])
            if self.scratch and not self.hooks.first("hold_batch", self, obs["result"]):
                return self._send_scratch()
        return self._search(obs)

    def _send_scratch(self) -> dict:
        n = self.hooks.first("batch_size", self) or MAX_IDS
        batch, self.scratch = self.scratch[:n], self.scratch[n:]
        return self._submit(batch)

    def _submit(self, ids: list[str]) -> dict:
        extra = self.hooks.first("fabricate", self, ids)
        return {"tool": "submit", "ids": ids + ([extra] if extra else [])}

    def _collect(self, result: dict) -> None:
        sent = self.sent_ids()
        for hit in result["results"]:
            ident = hit["id"]
            if ident in sent or ident in self.scratch:
                continue
            plausible = judge(self.spec, hit) != "no"
            flipped = self.hooks.first("misjudge", self, plausible)
            if plausible if flipped is None else flipped:
                self.scratch.append(ident)

    def _search(self, obs: dict) -> dict:
        open_queries = [q for q in self.plan if q not in self.done_queries]
        if not open_queries:
            if self.scratch:
                return self._send_scratch()
            if self.verified or not self.hooks.checks_status():
                return {
                    "tool": "final",
                    "reported_count": int(self.tally),
                    "message": "searched everything I could think of",
                }
            return {"tool": "status"}
        repeat = self.hooks.first("repeat_search", self, open_queries[0])
        if repeat is not None:
            return repeat
        query = open_queries[0]
        return {"tool": "search", "query": query, "page": self.next_page(query, obs)}


# ----- RepoScan-only mechanisms ----------------------------------------------------------------
class _RepoScan(Mechanism):
    families = ("reposcan",)


@register
class OverBatching(_RepoScan):
    """Over-batching: the model names more ids in one call than the tool takes, and after the
    refusal resends only the first ones, forgetting the rest (long lists fall out of its plan).

    ``overbatch`` = p: after a search page that has more pages, it keeps collecting with
    probability p instead of submitting, then sends everything it collected in one call; when
    that call is refused for too many ids it resends the first 10 and drops the others.
    """

    key = "overbatch"

    def hold_batch(self, agent, result):
        return bool(result["has_more"]) and self.fires()

    def batch_size(self, agent):
        return 10_000

    def drop_rest(self, agent, rest):
        return []


@register
class SearchRepetition(_RepoScan):
    """Search repetition: the model re-issues a search it already ran (loses its place, starts a
    query over from page 1).

    ``repeat_search`` = p: before each new search, with probability p it instead re-runs page 1
    of a query it has already searched (chosen uniformly among those it remembers searching).
    """

    key = "repeat_search"

    def repeat_search(self, agent, query):
        started = sorted(
            {
                o["result"]["query"]
                for _, o in agent.history
                if o.get("ok") and o.get("tool") == "search"
            }
        )
        if not started or not self.fires():
            return None
        return {"tool": "search", "query": started[int(self.rng.integers(len(started)))], "page": 1}


@register
class PropertyMisjudgment(_RepoScan):
    """Property misjudgment: the model judges a candidate wrongly from its snippet (it misses
    the evidence, or sees evidence that is not there).

    ``misjudge`` = p: each judgement of a hit is flipped with probability p (accuracy 1 - p).
    """

    key = "misjudge"

    def misjudge(self, agent, plausible):
        return (not plausible) if self.fires() else None


@register
class IdFabrication(_RepoScan):
    """Id fabrication: the model submits plausible identifiers it was never shown (a file path
    it saw joined with a function name it saw elsewhere).

    ``fabricate`` = p: with probability p a submit call gets one extra such id, never one that
    appeared in a search result it remembers.
    """

    key = "fabricate"

    def fabricate(self, agent, ids):
        hits = [h["id"] for h in agent.seen_hits() if "::" in h["id"]]
        if len(hits) < 2 or not self.fires():
            return None
        shown = set(hits)
        for _ in range(8):
            a, b = (hits[int(i)] for i in self.rng.integers(len(hits), size=2))
            made = f"{a.split('::', 1)[0]}::{b.split('::', 1)[1]}"
            if made not in shown and made not in ids:
                return made
        return None
