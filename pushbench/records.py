"""Run records on disk: the line and trace encodings, reading JSONL back, provenance.

The one place for the rules every run folder follows (sweep run folders written by
:class:`pushbench.runner.rundir.RunDir`, black-box evaluations written by
:func:`pushbench.blackbox.evaluate.write_evaluation`, and every reader: resume, the report,
``evaluate``):

* an ``episodes.jsonl`` line is the record minus ``calls`` and controller steps
  (:func:`episode_line`), canonical JSON, one per line (:func:`dumps_line`);
* a trace is the full record as gzipped canonical JSON with ``mtime=0`` (:func:`encode_trace`):
  same record, same bytes;
* both carry ``family_version``, the version of the family's observation contract the episode
  was run under (:func:`versioned`: the current :func:`pushbench.tasks.family_version` unless
  the record already names one); a line written before versions existed has none and counts as
  version 1 (:data:`UNVERSIONED`, :func:`version_of`);
* reading (:func:`read_lines`) skips blank lines, skips and names any line that is not a JSON
  object, and drops a torn last line (no newline: a write cut short), optionally cutting it
  from the file; :func:`unique_by_key` keeps the first line of each key, as resume does;
* provenance: :func:`package_versions` and :func:`git_revision`.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import subprocess
import warnings
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from . import tasks

# The version of a record that names none: written before family versions existed, i.e. under
# the behaviour every family's version 1 pins (docs/concepts.md, "Observation contract and
# versions").
UNVERSIONED = 1


def versioned(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``family_version`` set (a shallow copy; ``record`` is not changed).

    A record that already names a version keeps it (a replayed or re-written record states
    what it was run under); otherwise the family's current version. A record without a known
    ``family`` is returned as it is."""
    family = record.get("family")
    if "family_version" in record or family not in tasks.FAMILY_VERSIONS:
        return record
    return {**record, "family_version": tasks.family_version(family)}


def version_of(line: dict[str, Any]) -> int:
    """The family version a line or record was run under (:data:`UNVERSIONED` if it names
    none, or names something that is not a positive integer)."""
    v = line.get("family_version")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else UNVERSIONED


def episode_line(record: dict[str, Any]) -> dict[str, Any]:
    """The ``episodes.jsonl`` line: the full record minus ``calls``, controller steps and an
    LLM policy's ``transcript`` (those stay in the trace), with ``family_version``
    (:func:`versioned`)."""
    line = {k: v for k, v in versioned(record).items() if k not in ("calls", "transcript")}
    ctl = record.get("controller")
    if isinstance(ctl, dict):
        line["controller"] = {"name": ctl.get("name"), "components": ctl.get("components")}
    return line


def dumps_line(obj: Any) -> bytes:
    """Canonical JSON of ``obj`` plus a newline (one ``episodes.jsonl`` line)."""
    text = json.dumps(obj, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return (text + "\n").encode()


def encode_trace(record: dict[str, Any]) -> bytes:
    """Gzipped canonical JSON of the full record with ``family_version`` (:func:`versioned`;
    ``mtime=0``: same record, same bytes)."""
    data = json.dumps(
        versioned(record), ensure_ascii=True, sort_keys=True, separators=(",", ":")
    ).encode()
    return gzip.compress(data, compresslevel=6, mtime=0)


def read_lines(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """The JSON objects of ``path``, one per line, in file order (``[]`` if it does not exist).

    Blank lines are skipped. A line that is not a JSON object (bad JSON, a list, a number) is
    skipped with a warning naming its 1-based line number; only that line is lost. A truncated
    last line (no newline: a write cut short) is dropped with a warning and, if ``repair``,
    cut from the file so appends start on a fresh line.
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        warnings.warn(
            f"{path}: dropping a truncated last line ({len(data) - end} bytes), "
            "probably from an interrupted run; that episode will run again",
            stacklevel=2,
        )
        if repair:
            with open(path, "r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
    lines = []
    for i, raw in enumerate(data[:end].splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            line = None
        if not isinstance(line, dict):  # resume reads keys from these lines: objects only
            warnings.warn(f"{path}:{i}: unreadable line skipped", stacklevel=2)
            continue
        lines.append(line)
    return lines


def unique_by_key(
    lines: Iterable[dict[str, Any]],
    key: Callable[[dict[str, Any]], str | None] = lambda d: d.get("key"),
) -> list[dict[str, Any]]:
    """``lines`` without later lines whose ``key`` was seen before (the first one counts)."""
    seen: set[str | None] = set()
    out = []
    for line in lines:
        k = key(line)
        if k in seen:
            continue
        seen.add(k)
        out.append(line)
    return out


def package_version(name: str) -> str | None:
    """The installed version of distribution ``name`` (``None`` if not installed)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("pushbench", "gymnasium", "numpy", "pydantic"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_revision() -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the pushbench checkout, or ``None`` (not a git checkout)."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
