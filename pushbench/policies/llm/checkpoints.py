"""The LangGraph backend's checkpointer: SQLite, written only when a checkpoint can matter.

:class:`EpisodeSaver` is LangGraph's ``SqliteSaver`` (same tables, same serializer, same version
ids) for one episode's thread file, with three differences that take its cost off the step
(issue 31: 7.6 ms of harness per step, most of it the saver and its worker thread):

* The file is opened (and its tables created) at the first write, and a read of a file that
  does not exist is "no checkpoint": an episode that never needs one never touches SQLite.
* Writes are skipped once ``discard()`` is true: the episode has ended and its thread is to be
  deleted, so the final checkpoint would be written only to be removed.
* The async methods run the sync ones (a local file, written at most once per segment of
  ``checkpoint_every`` steps and on an error under ``exit``), so one class serves ``invoke``
  and ``ainvoke``.

What gets written when is decided by the graph's ``durability`` and the policy's
segments (see :mod:`.langgraph_agent`): under ``exit`` (the default) the runs carry no
checkpointer and the policy writes through this saver with ``update_state``; under
``sync`` / ``async`` LangGraph writes after every superstep.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver


class EpisodeSaver(SqliteSaver):
    """``SqliteSaver`` over ``path``, opened lazily; writes skipped while ``discard()``."""

    def __init__(self, path: Path, discard: Callable[[], bool] = lambda: False) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # opened on first use
        self.path = Path(path)
        self.discard = discard
        self.opened = False  # the file was opened (read or written) at least once
        # Under sync/async LangGraph writes from its executor's threads (a checkpoint and a
        # task's writes may go at once): without it two could each open a connection, and the
        # one dropped would keep the file locked.
        self._open_lock = threading.Lock()

    def _open(self) -> None:
        if self.conn is not None:
            return
        with self._open_lock:
            if self.conn is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
                # WAL (set up by SqliteSaver): a killed process loses nothing committed; NORMAL
                # skips the fsync per commit, so only an operating-system crash may lose the
                # last.
                conn.execute("PRAGMA synchronous=NORMAL")
                self.conn = conn
                self.opened = True

    def cursor(self, transaction: bool = True):
        self._open()
        return super().cursor(transaction)

    def absent(self) -> bool:
        """No checkpoint can exist: the file is neither open nor on disk."""
        return self.conn is None and not self.path.exists()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            # None: closed (this saver's own lazy state; SqliteSaver types conn as always open)
            self.conn = None  # type: ignore[assignment]

    # ----- reads: no file, no checkpoint ---------------------------------------------------
    def get_tuple(self, config):
        if self.absent():
            return None
        self._open()
        return super().get_tuple(config)

    def list(self, config, **kwargs: Any) -> Iterator:
        if self.absent():
            return iter(())
        self._open()
        return super().list(config, **kwargs)

    # ----- writes: only while the checkpoint can still be used -----------------------------
    def put(self, config, checkpoint, metadata, new_versions):
        if self.discard():
            return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}
        self._open()
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config, writes, task_id: str, task_path: str = "") -> None:
        if self.discard():
            return
        self._open()
        super().put_writes(config, writes, task_id, task_path)

    # ----- async: the same, in the caller's thread ----------------------------------------
    async def aget_tuple(self, config):
        return self.get_tuple(config)

    async def alist(self, config, **kwargs: Any):
        for item in self.list(config, **kwargs):
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id: str, task_path: str = "") -> None:
        self.put_writes(config, writes, task_id, task_path)
