"""The run directory: atomic, resumable episode output plus the run manifest.

Layout of ``DIR``::

    episodes.jsonl          one line per finished episode (record minus calls/controller steps)
    traces/<key>.json.gz    the full record of that episode (calls and controller steps)
    errors.jsonl            episodes whose run raised (terminated_by "error", traceback in "error")
    capped.jsonl            episodes cut at the cost cap (terminated_by "cost_cap"): their spend
                            is billed, they are not finished and run again on resume
    traces/capped/<key>.json.gz  the full record of the latest cut of that episode
    manifest.json           schema version, writer ("run": see :mod:`.outdir`), package versions,
                            git revision, experiment, arguments, and one entry per invocation
                            (the only place wall-clock time lives; each names the
                            ``family_versions`` it ran under)
    .lock                   held (flock) while a sweep writes, so two sweeps cannot share DIR

Only the parent process writes here. Per episode, the trace is written first (tmp file +
``os.replace``), then the line with a single ``os.write`` on an ``O_APPEND`` descriptor, so a
line appears only once its trace exists. Once ``write`` returns, the line is in the kernel: a
killed or crashed process loses nothing. A torn last line (possible only if the process dies
inside that one write) is cut off by :meth:`RunDir.open`, and that episode simply runs again.
``DIR`` and everything PushBench writes in it are private to the user (0700 / 0600, see
:mod:`pushbench.paths`); opening an older, world-readable ``DIR`` tightens it.
Errors live in their own file so ``episodes.jsonl`` holds only real episodes and a resume
retries the failed ones.

Durability against an OS crash or power loss is a group commit: at most every
``sync_interval`` seconds (and on close) one ``syncfs`` flushes lines and traces together
(fallback: ``fsync`` per file). Episodes finished since the last commit may then be lost and
simply run again on resume; an fsync per episode costs ~8 ms here, as much as running an
offline episode. ``sync_interval=0`` fsyncs each trace and each line as it is written.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

from .. import errors, paths, tasks
from ..policies.identity import policy_label
from ..records import dumps_line as _dumps
from ..records import git_revision, package_versions, read_lines
from . import outdir
from .spec import EpisodeResult, EpisodeSpec

MANIFEST_SCHEMA_VERSION = 1
LINE_SCHEMA_VERSION = 1
EPISODES = "episodes.jsonl"
ERRORS = "errors.jsonl"
CAPPED = "capped.jsonl"
MANIFEST = "manifest.json"
TRACES = "traces"


RunDirError = errors.RunDirError  # the run directory cannot be used as asked


def error_line(spec: EpisodeSpec, error: str) -> dict:
    """The ``errors.jsonl`` line for an episode whose run raised."""
    return {
        "schema_version": LINE_SCHEMA_VERSION,
        "key": spec.key,
        "task_id": spec.task_id,
        "instance": spec.instance,
        "controller": {"name": spec.controller},
        "policy": {
            "name": spec.policy,
            "params": dict(spec.policy_params),
            "label": policy_label(spec.policy, spec.policy_params, spec.policy_label),
        },
        "seed": spec.seed,
        "terminated_by": "error",
        "error": error,
    }


def _append(fd: int, data: bytes, sync: bool = True) -> None:
    """One write of the whole line (O_APPEND makes it land at the end), then fsync."""
    n = os.write(fd, data)
    if n != len(data):  # regular files do not short-write in practice; say so if one does
        raise OSError(f"short write ({n} of {len(data)} bytes)")
    if sync:
        os.fsync(fd)


def _load_syncfs():
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).syncfs
        fn.argtypes = [ctypes.c_int]
        return fn
    except (OSError, AttributeError):
        return None


_SYNCFS = _load_syncfs() if sys.platform.startswith("linux") else None


def _syncfs(fd: int) -> bool:
    """Flush the whole filesystem holding ``fd`` in one call (Linux); ``False`` if unsupported."""
    return _SYNCFS is not None and _SYNCFS(fd) == 0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class RunDir:
    """An output directory for one experiment; use as a context manager around a sweep."""

    def __init__(self, path: str | Path, sync_interval: float = 0.5) -> None:
        self.path = Path(path)
        self.episodes_path = self.path / EPISODES
        self.errors_path = self.path / ERRORS
        self.capped_path = self.path / CAPPED
        self.capped: list[dict] = []  # lines of episodes cut at the cost cap (all invocations)
        self.manifest_path = self.path / MANIFEST
        self.traces = self.path / TRACES
        self._fd: int | None = None
        self._err_fd: int | None = None
        self._cap_fd: int | None = None
        self._lock_fd: int | None = None
        self.done: dict[str, dict] = {}
        self.manifest: dict = {}
        self.sync_interval = float(sync_interval)
        self._pending: list[Path] = []
        self._last_sync = time.monotonic()

    # ----- opening and resume ---------------------------------------------------------
    def open(
        self,
        experiment: dict,
        result_fields: dict,
        arguments: dict | None = None,
        force: bool = False,
        overwrite: bool = False,
    ) -> RunDir:
        """Lock DIR, repair a torn last line, load finished keys, write/update the manifest.

        If DIR already holds a run of a *different* experiment (``result_fields`` differ),
        refuse with :class:`RunDirError` unless ``force``. A DIR that another command wrote
        (``evaluate``, ``verify``) or whose outputs no manifest claims is refused even with
        ``force`` (:func:`.outdir.check`); ``overwrite`` discards its outputs first.
        """
        # Records are evidence and traces show every call: private to the user (0700/0600).
        outdir.check(self.path, "run", overwrite=overwrite)  # before anything is created
        paths.private_dir(self.path)
        self._lock()
        try:
            outdir.check(self.path, "run", overwrite=overwrite)  # again, under the lock
            if overwrite:
                outdir.discard(self.path)
            paths.private_dir(self.traces)
            old = self._read_manifest()
            if old is not None and old.get("result_fields") != result_fields:
                diff = _diff(old.get("result_fields") or {}, result_fields)
                msg = (
                    f"{self.path} holds a run of a different experiment ({diff}). "
                    "Use another --out directory, or --force to append anyway "
                    "(episode keys do not include every field, so records may mix)."
                )
                if not force:
                    raise RunDirError(msg)
                warnings.warn(msg, stacklevel=2)
            lines = read_lines(self.episodes_path, repair=True)
            for line in lines:
                key = line.get("key")
                if key in self.done:
                    warnings.warn(
                        f"{self.episodes_path}: duplicate key {key} (kept the first)", stacklevel=2
                    )
                    continue
                if key is not None:
                    self.done[key] = line
            missing = [k for k in self.done if not (self.traces / f"{k}.json.gz").exists()]
            if missing:
                warnings.warn(
                    f"{len(missing)} finished episode(s) in {self.path} have no trace "
                    f"file (e.g. {missing[0]}), probably after an OS crash; their "
                    "lines and metrics are kept",
                    stacklevel=2,
                )
            self.manifest = self._new_manifest(old, experiment, result_fields, arguments)
            self.write_manifest()
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            self._fd = paths.open_private(self.episodes_path, flags)
            self._err_fd = paths.open_private(self.errors_path, flags)
            self.capped = read_lines(self.capped_path, repair=True)
            self._cap_fd = paths.open_private(self.capped_path, flags)
        except BaseException:
            self.close()
            raise
        return self

    def _lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX: no lock, single writer assumed
            return
        self._lock_fd = paths.open_private(self.path / ".lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise RunDirError(
                f"another sweep is writing to {self.path} (it holds {self.path}/.lock)"
            ) from None

    def _read_manifest(self) -> dict | None:
        if not self.manifest_path.exists():
            return None
        try:
            return json.loads(self.manifest_path.read_text())
        except ValueError as e:
            raise RunDirError(
                f"{self.manifest_path} is unreadable ({e}); move it away to continue"
            ) from None

    def _new_manifest(
        self, old: dict | None, experiment: dict, result_fields: dict, arguments: dict | None
    ) -> dict:
        invocation = {
            "started": _now(),
            "arguments": arguments or {},
            "argv": list(sys.argv),
            "packages": package_versions(),
            "git": git_revision(),
            "family_versions": dict(tasks.FAMILY_VERSIONS),
            "resumed_with": len(self.done),
        }
        return {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "writer": "run",
            "created": (old or {}).get("created") or invocation["started"],
            "packages": invocation["packages"],
            "git": invocation["git"],
            "experiment": experiment,
            "result_fields": result_fields if old is None else old.get("result_fields"),
            "arguments": invocation["arguments"],
            "invocations": [*(old or {}).get("invocations", []), invocation],
        }

    def write_manifest(self) -> None:
        paths.write_private(
            self.manifest_path,
            (json.dumps(self.manifest, indent=2, sort_keys=True) + "\n").encode(),
        )

    def finish(self, summary: dict) -> None:
        """Record the end of this invocation (timing lives here, never in episode lines)."""
        if self.manifest.get("invocations"):
            self.manifest["invocations"][-1].update(finished=_now(), summary=summary)
            self.write_manifest()

    # ----- writing --------------------------------------------------------------------
    def write(self, result: EpisodeResult) -> bool:
        """Persist one result; ``True`` if it became an episode line (not an error/duplicate)."""
        fd, err_fd, cap_fd = self._fd, self._err_fd, self._cap_fd
        if fd is None or err_fd is None or cap_fd is None:  # open() sets all three
            raise RunDirError("RunDir.write before open()")
        if result.error is not None:  # not result.ok
            _append(
                err_fd, _dumps(error_line(result.spec, result.error)), sync=self.sync_interval <= 0
            )
            return False
        line, trace_gz = result.line, result.trace_gz
        if line is None or trace_gz is None:
            raise RunDirError(
                f"the result of {result.spec.key} has no error, so it needs a line and a trace"
            )
        key = result.spec.key
        if key in self.done:
            return False
        strict = self.sync_interval <= 0
        if line.get("terminated_by") == "cost_cap":  # not finished: billed, run again
            paths.private_dir(self.traces / "capped")
            paths.write_private(self.traces / "capped" / f"{key}.json.gz", trace_gz)
            _append(cap_fd, _dumps(line), sync=strict)
            self.capped.append(line)
            return False
        trace = self.traces / f"{key}.json.gz"
        tmp = trace.with_name(f".{key}.{os.getpid()}.tmp")
        with os.fdopen(paths.open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as f:
            f.write(trace_gz)
            if strict:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, trace)
        _append(fd, _dumps(line), sync=strict)
        self.done[key] = line
        if not strict:
            self._pending.append(trace)
            if time.monotonic() - self._last_sync >= self.sync_interval:
                self.sync()
        return True

    def sync(self) -> None:
        """Make every line and trace written so far durable (one ``syncfs`` where available)."""
        if self._fd is None:
            return
        if not _syncfs(self._fd):
            for p in self._pending:
                fd = os.open(p, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            for open_fd in (self._err_fd, self._cap_fd, self._fd):
                if open_fd is not None:
                    os.fsync(open_fd)
        self._pending.clear()
        self._last_sync = time.monotonic()

    def close(self) -> None:
        self.sync()
        for name in ("_fd", "_err_fd", "_cap_fd", "_lock_fd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)  # closing the lock fd releases the flock
                setattr(self, name, None)

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _diff(old: dict, new: dict) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return "; ".join(f"{k}: stored {old.get(k)!r} vs now {new.get(k)!r}" for k in keys)[:800]


def load_trace(run_dir: str | Path, key: str) -> dict:
    """The full record (calls and controller steps) of episode ``key`` in ``run_dir``."""
    import gzip

    with gzip.open(Path(run_dir) / TRACES / f"{key}.json.gz", "rt") as f:
        return json.load(f)
