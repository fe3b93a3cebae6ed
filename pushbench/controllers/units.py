"""Work-unit controller components (UNITQGP): a backlog book and redirects for stale unit loops.

The book (:class:`UnitBook`, kept in ``TrackerState.units["book"]``) is built only from what the
environment returned: unit ids from ``list_units``, each unit's files from ``inspect`` (and the
documented layout: unit ``uNN``'s files live under ``uNN/``), answers and edits from their
results, verifier runs from ``run_verifier`` and verdicts from ``submit``. Per unit status:

``pending``    known, no answer/edit yet;
``attempted``  answered or edited, not verified since;
``failing``    the last check (verifier run or rejected submit) failed, nothing changed since;
``passed``     the last verifier run passed, not accepted yet;
``accepted``   the verifier accepted it (a ``duplicate`` verdict also means accepted earlier).

The lists are named for what they hold (version 2 of the observations; version 1 called the
accepted list ``submitted``, though a rejected submission was listed under ``failing``).

``unit_tracker`` shows the book in the observation's ``progress`` block (with verified count,
target, steps left and the number of **verifier recoveries**: units whose check failed and later
passed). ``unit_redirect`` repairs the proposed call, first rule that applies:

1. ``submit`` of an accepted unit -> ``inspect`` the next pending unit (or list the next page);
2. some unit ``passed`` but was never submitted, and the call is not a submit/edit of it ->
   ``submit`` it;
3. some unit is ``attempted`` (edit/answer not verified) and the call is about another unit or
   ends the episode -> ``run_verifier`` on it;
4. a stale loop: an ``inspect``/``read_file`` that repeats a look at a unit (same unit, same
   file and offset) with :data:`STALE` repeats already since its last edit/answer -> ``inspect``
   the next pending unit, else ``run_verifier`` on the looping unit.

Terminal calls (``final``/``ask_user``) are left to the completion gate once the target is met.

SWE-lite units share one repository, so a file (or a ``search_code`` call) names no unit: there
(``shared_files``) such calls are attributed to the unit in focus, i.e. the one last inspected or
verified, and a repeated ``search_code`` (same pattern, glob and page) counts as a repeated look.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .components import Component, register

STALE = 2
STATUSES = ("pending", "attempted", "failing", "passed", "accepted")
_UNIT_TOOLS = ("inspect", "answer", "run_verifier", "submit")
_PATH_TOOLS = ("read_file", "edit_file", "write_file")
_LOOK_TOOLS = ("inspect", "read_file", "search_code")
SHARED_FILE_FAMILIES = ("swelite",)  # files belong to no unit: attribute calls to the focus


@dataclass
class UnitBook:
    order: list[str] = field(default_factory=list)
    status: dict[str, str] = field(default_factory=dict)
    owner: dict[str, str] = field(default_factory=dict)  # file path -> unit id
    pages: int | None = None
    pages_seen: set[int] = field(default_factory=set)
    looked: dict[str, set] = field(default_factory=dict)  # looks since the last attempt
    repeats: dict[str, int] = field(default_factory=dict)
    failed_once: set[str] = field(default_factory=set)
    recovered: set[str] = field(default_factory=set)
    last_step: int = -1
    shared_files: bool = False
    focus: str | None = None

    # ----- reading calls and observations ----------------------------------------------
    def unit_of(self, call: dict) -> str | None:
        if call.get("tool") in _UNIT_TOOLS and isinstance(call.get("unit_id"), str):
            return call["unit_id"].strip()
        path = call.get("path")
        if call.get("tool") in _PATH_TOOLS and isinstance(path, str):
            norm = path.strip().lstrip("./")
            if norm in self.owner:
                return self.owner[norm]
            head = norm.split("/", 1)[0]
            if head in self.status:
                return head
        if self.shared_files and call.get("tool") in _PATH_TOOLS + ("search_code",):
            return self.focus
        return None

    @staticmethod
    def look_key(call: dict):
        if call.get("tool") == "inspect":
            return ("inspect",)
        if call.get("tool") == "read_file":
            return ("read", str(call.get("path", "")).strip().lstrip("./"), call.get("offset", 0))
        if call.get("tool") == "search_code":
            return ("search", str(call.get("pattern", "")), str(call.get("path_glob", "")),
                    call.get("page", 1))
        return None

    def _know(self, uid: str) -> None:
        if uid not in self.status:
            self.order.append(uid)
            self.status[uid] = "pending"

    def _check(self, uid: str, passed: bool) -> None:
        if passed:
            if uid in self.failed_once:
                self.recovered.add(uid)
        else:
            self.failed_once.add(uid)

    def observe(self, call: dict | None, obs: dict, step: int) -> None:
        """Update from one executed call and its decoded observation (idempotent per step)."""
        if step == self.last_step:
            return
        self.last_step = step
        if not obs.get("ok"):
            return
        tool, r = obs.get("tool"), obs.get("result") or {}
        if tool == "list_units":
            self.pages = r.get("pages")
            self.pages_seen.add(r.get("page", 1))
            for u in r.get("units", ()):
                self._know(u["id"])
            return
        call = call if isinstance(call, dict) else {"tool": tool}
        uid = r.get("unit_id") or self.unit_of({**call, "path": r.get("path", call.get("path"))})
        if tool == "inspect" and uid is not None:  # an inspect call always names its unit
            self._know(uid)
            for f in r.get("files", ()):
                self.owner[f] = uid
        if tool in ("inspect", "run_verifier") and uid in self.status:
            self.focus = uid
        if uid is None or uid not in self.status:
            pass
        elif tool in _LOOK_TOOLS:
            key = self.look_key(call)
            seen = self.looked.setdefault(uid, set())
            if key in seen:
                self.repeats[uid] = self.repeats.get(uid, 0) + 1
            seen.add(key)
        elif tool in ("answer", "edit_file", "write_file"):
            if self.status[uid] != "accepted":
                self.status[uid] = "attempted"
            self.looked.pop(uid, None)
            self.repeats[uid] = 0
        elif tool == "run_verifier" and self.status[uid] != "accepted":
            self.status[uid] = "passed" if r.get("passed") else "failing"
            self._check(uid, bool(r.get("passed")))
        for v in r.get("verdicts") or ():
            vid = v.get("id")
            if vid not in self.status:
                continue
            if v["verdict"] in ("accepted", "duplicate"):
                if v["verdict"] == "accepted":
                    self._check(vid, True)
                self.status[vid] = "accepted"
            elif v["verdict"] == "rejected":
                self.status[vid] = "failing"
                self._check(vid, False)

    # ----- views ------------------------------------------------------------------------
    def with_status(self, status: str) -> list[str]:
        return [u for u in self.order if self.status[u] == status]

    def next_page(self) -> int | None:
        if self.pages is None:
            return 1
        missing = [p for p in range(1, self.pages + 1) if p not in self.pages_seen]
        return missing[0] if missing else None

    def view(self) -> dict:
        out: dict[str, Any] = {s: self.with_status(s) for s in STATUSES}
        out["counts"] = {s: len(out[s]) for s in STATUSES}
        out["next_page"] = self.next_page()
        return out


def book_of(st) -> UnitBook:
    if "book" not in st.units:
        st.units["book"] = UnitBook()
    return st.units["book"]


class _UnitComponent(Component):
    families = ("dataops", "swelite", "dataops_public")

    def on_reset(self, decoded_obs, st, family):
        st.units["book"] = UnitBook(shared_files=family in SHARED_FILE_FAMILIES)

    def observe(self, executed_call, decoded_obs, st, family):
        book_of(st).observe(executed_call, decoded_obs, st.steps_used)


@register
class UnitTracker(_UnitComponent):
    """Show the backlog book (and verifier recoveries) in the ``progress`` block."""

    name = "unit_tracker"
    order = 40
    shows_progress = True

    def decorate(self, progress, st, family):
        book = book_of(st)
        progress.update(valid_count=st.valid_count, target=st.target,
                        remaining=max(st.target - st.valid_count, 0), steps_used=st.steps_used,
                        steps_left=st.budget - st.steps_used, units=book.view(),
                        verifier_recoveries=len(book.recovered))


@register
class UnitRedirect(_UnitComponent):
    """Steer stale unit loops (the four rules of the module docstring)."""

    name = "unit_redirect"
    order = 50

    def repair(self, call, st, family):
        book = book_of(st)
        tool, uid = call.get("tool"), book.unit_of(call)
        if tool in ("final", "ask_user") and st.valid_count >= st.target:
            return call, [], None
        if tool == "submit" and uid is not None and book.status.get(uid) == "accepted":
            return self._move_on(book, uid, "unit_redirect_duplicate",
                                 f"{uid} was already accepted")
        passed = book.with_status("passed")
        if passed and not (uid == passed[0] and tool in ("submit", "edit_file", "write_file",
                                                           "answer")):
            return ({"tool": "submit", "unit_id": passed[0]}, ["unit_redirect_submit"],
                    f"{passed[0]} passed the verifier but was never submitted; controller "
                    "submitted it")
        attempted = book.with_status("attempted")
        if attempted and uid != attempted[0]:
            return ({"tool": "run_verifier", "unit_id": attempted[0]}, ["unit_redirect_verify"],
                    f"{attempted[0]} was changed but not verified; controller ran the verifier")
        key = book.look_key(call)
        if key and uid in book.status and key in book.looked.get(uid, ()) \
                and book.repeats.get(uid, 0) >= STALE:
            book.repeats[uid] = 0
            book.looked.pop(uid, None)
            nxt = [u for u in book.with_status("pending") if u != uid]
            if nxt:
                return ({"tool": "inspect", "unit_id": nxt[0]}, ["unit_redirect_stale"],
                        f"you looked at {uid} again and again without an answer or edit; "
                        f"controller moved to pending unit {nxt[0]}")
            return ({"tool": "run_verifier", "unit_id": uid}, ["unit_redirect_stale"],
                    f"you looked at {uid} again and again; controller ran its verifier")
        return call, [], None

    @staticmethod
    def _move_on(book: UnitBook, uid: str, label: str, why: str):
        pending = book.with_status("pending")
        if pending:
            nxt: dict[str, Any] = {"tool": "inspect", "unit_id": pending[0]}
            what = f"inspected {pending[0]}"
        elif book.next_page() is not None:
            page = book.next_page()
            nxt, what = {"tool": "list_units", "page": page}, f"listed page {page}"
        else:
            nxt, what = {"tool": "status"}, "showed the status"
        return nxt, [label], f"{why}; controller {what} instead"
