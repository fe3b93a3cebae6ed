"""What a controller knows: built only from what the environment returned (verdicts, counts).

The tracker never sees the hidden valid set; it learns ``submitted`` / ``accepted`` ids from
verdicts, the verified count from ``info["qgp"]`` and the search state from search results.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def query_key(query: str) -> str:
    """Normalised query used for page memory (case and white space do not make a new search)."""
    return " ".join(query.lower().split())


@dataclass
class SearchMemory:
    pages_seen: set[int] = field(default_factory=set)
    exhausted_after: int | None = None  # a page whose has_more was false

    def next_unseen(self) -> int:
        page = 1
        while page in self.pages_seen:
            page += 1
        return page


@dataclass
class TrackerState:
    target: int = 0
    budget: int = 0
    valid_count: int = 0
    steps_used: int = 0
    submitted: set[str] = field(default_factory=set)
    accepted: set[str] = field(default_factory=set)
    searches: dict[str, SearchMemory] = field(default_factory=dict)
    search_order: list[str] = field(default_factory=list)
    last_query: str | None = None
    buffer: list[str] = field(default_factory=list)
    units: dict = field(default_factory=dict)  # family-specific unit book (unit components)

    def update_from_info(self, info: dict) -> None:
        q = info.get("qgp", {})
        self.valid_count = q.get("valid_count", self.valid_count)
        self.steps_used = q.get("steps_used", self.steps_used)
        self.target = q.get("target", self.target)
        self.budget = q.get("budget", self.budget)

    def update_from_observation(self, obs: dict) -> None:
        if not obs.get("ok"):
            return
        result = obs.get("result") or {}
        for v in result.get("verdicts") or ():
            if v["verdict"] != "malformed":
                self.submitted.add(v["id"])
            if v["verdict"] == "accepted":
                self.accepted.add(v["id"])
        if obs.get("tool") == "search":
            key = query_key(result.get("query", ""))
            mem = self.searches.get(key)
            if mem is None:
                mem = self.searches[key] = SearchMemory()
                self.search_order.append(key)
            mem.pages_seen.add(int(result.get("page", 1)))
            if not result.get("has_more", True):
                mem.exhausted_after = min(mem.exhausted_after or 10**9, int(result["page"]))
            self.last_query = result.get("query", "")

    def search_view(self, recent: int = 8) -> dict:
        out = {}
        for key in self.search_order[-recent:]:
            mem = self.searches[key]
            out[key] = {"pages_seen": sorted(mem.pages_seen), "next_unseen_page": mem.next_unseen(),
                        "exhausted": mem.exhausted_after is not None
                        and mem.next_unseen() > mem.exhausted_after}
        return out
