"""``pushbench mcp``: one episode of a task served to a black-box agent as a stdio MCP server.

The environment, its hidden verifier and the chosen controller live in this process; the agent
only sees the tools the environment declares (names, descriptions and JSON schemas exactly as
``env.unwrapped.tool_schemas()`` gives them), the objective (server instructions, the ``task``
resource and the ``task`` prompt) and the observations of its own calls.

Per tool call: the MCP arguments become the JSON call ``{"tool": name, **arguments}`` for
``env.step`` and the observation JSON comes back as the tool result (``isError`` when the
observation says ``ok: false``; such calls cost a step, as in-process). Then ``episode.json``
(the full record) is replaced atomically and the step is appended to ``trace.jsonl`` with
``fsync``, before the result is sent, so a killed agent or server loses nothing that was
answered. After the episode ends every call gets an ``episode_over`` error and changes nothing.

Oversized arguments: a call whose JSON exceeds the environment's 64 KiB action limit reaches
``env.step`` as the first bytes of its text (the serialisation stops at the limit), so the
environment refuses it by size without parsing it. A JSON-RPC line over :data:`MAX_WIRE_LINE`
is never parsed at all: the stdin reader keeps only its head and tail, and forwards a small
stand-in request with the same id whose call the environment refuses the same way.

Every request is answered: lines the SDK cannot read (a lone surrogate, a huge integer, deep
nesting, not JSON) are screened first (:mod:`pushbench.mcp_wire`): a ``tools/call`` whose id
and name can be read is refused by the environment (one step), anything else gets a JSON-RPC
error (``-32700`` / ``-32600``), and each such line is logged.

stdout carries protocol messages only (fd 1 points at stderr while serving; protocol lines go
through one writer); logs go to ``DIR/server.log`` and warnings to stderr.

Integrity (see :mod:`pushbench.audit` and docs/blackbox.md): the run dir and its files are
private to the user (0700 / 0600) and ``main`` refuses to serve when the cache or the run dir is
readable by other users (``--allow-shared-cache`` downgrades that to a warning). Trace lines
form a sha256 chain whose head ``episode.json`` records. For families with a live workspace
(DataOps-lite, SWE-lite) the server snapshots the workspace after every call and records, before
the next one, every change it did not make (``blackbox.out_of_band_edits``).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections import deque
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from . import __version__, audit, blackbox, paths
from .blackbox import EPISODE_FILE, LOG_FILE, RUN_FILE, TRACE_FILE
from .watch import WorkspaceWatch
from .envs.spaces import MAX_ACTION_BYTES

log = logging.getLogger("pushbench.mcp")

TASK_URI = "pushbench://task"
MAX_WIRE_LINE = 1 << 20            # JSON-RPC lines longer than this are never parsed
_HEAD_KEEP = MAX_ACTION_BYTES + 1024  # bytes of an overlong line kept for the refusal
_TAIL_KEEP = 4096
_PROPOSED_CLIP = 200
RESOURCE_NOT_FOUND = -32002
# What a workspace copy leaves out: VCS data, the snapshot marker, caches and compiled files.
_WORKSPACE_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache",
                        ".ruff_cache", ".tox", ".nox", ".hypothesis", ".cache", ".eggs"}
_WORKSPACE_SKIP_FILES = re.compile(r"(^\.pushbench.*|\.py[co]$|\.json\.gz$|\.gitattributes$"
                                   r"|\.gitignore$|^\.coverage.*)")


class SetupError(RuntimeError):
    """The server cannot start as asked (the message says what to do)."""


# ----- small file helpers -----------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, obj: Any, sync_dir: bool = True) -> None:
    """Write ``obj`` as JSON to ``path`` via a temporary file, ``fsync`` and ``os.replace``.

    Readers (and a killed process) always see a whole file. ``sync_dir`` also makes the rename
    itself survive a power cut; per-call rewrites skip it (the fsync'd trace covers that case).
    """
    data = json.dumps(obj, ensure_ascii=True, indent=1, default=repr).encode()
    paths.write_private(path, data, fsync=True)  # 0600: the agent must not read the record
    if sync_dir:
        _fsync_dir(path.parent)


def _inside(a: Path, b: Path) -> bool:
    """True if ``a`` is ``b`` or lies under it (both resolved)."""
    return a == b or b in a.parents


def _git_revision() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def bounded_dump(call: dict, limit: int = MAX_ACTION_BYTES) -> tuple[str, int, bool]:
    """JSON text of ``call`` as the environment measures it, stopping once past ``limit`` bytes.

    Returns ``(text, utf8_bytes, over)``; when ``over``, ``text`` is only the first chunks
    (just past the limit), so a huge argument is never serialised whole.
    """
    enc = json.JSONEncoder(ensure_ascii=False)  # the separators json.dumps uses
    parts, size = [], 0
    for chunk in enc.iterencode(call):
        parts.append(chunk)
        size += len(chunk.encode("utf-8", "surrogatepass"))
        if size > limit:
            return "".join(parts), size, True
    return "".join(parts), size, False


# ----- workspace ----------------------------------------------------------------------------
def prepare_workspace(source: Path, dest: Path) -> int:
    """Copy the snapshot tree ``source`` to ``dest`` without VCS data, markers or caches.

    ``dest`` must not exist or be empty. Returns the number of files copied.
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SetupError(f"workspace {dest} exists and is not an empty directory; give a new "
                         "path (the workspace must be a fresh copy)")

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = set()
        for n in names:
            full = os.path.join(folder, n)
            if os.path.isdir(full) and not os.path.islink(full):
                if n in _WORKSPACE_SKIP_DIRS or n.endswith(".egg-info"):
                    skip.add(n)
            elif _WORKSPACE_SKIP_FILES.search(n):
                skip.add(n)
        return skip

    shutil.copytree(source, dest, symlinks=True, ignore=ignore, dirs_exist_ok=True)
    return _share_tree(dest)


def _share_tree(root: Path) -> int:
    """Give the workspace copy ordinary modes (0755 folders, 0644 files, 0755 executables).

    The snapshot cache is private (0700 / 0600) and ``copytree`` copies modes; the workspace is
    the one thing the agent is meant to read, possibly as another OS user. Returns the number of
    files.
    """
    n = 0
    os.chmod(root, 0o755)
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if not os.path.islink(full):
                os.chmod(full, 0o755)
        for f in filenames:
            full = os.path.join(dirpath, f)
            if os.path.islink(full):
                continue
            os.chmod(full, 0o755 if os.stat(full).st_mode & 0o100 else 0o644)
            n += 1
    return n


# ----- the session: env + run directory (synchronous, transport-free) ----------------------
class BlackBoxSession:
    """One episode of ``task_id`` driven by tool calls, persisted to ``run_dir`` after each."""

    def __init__(self, task_id: str, run_dir: str | os.PathLike, *, seed: int = 0,
                 controller: str | None = "standard", workspace: str | os.PathLike | None = None,
                 condition: str = "default", agent: str | None = None,
                 instance: str | None = None, budget: int | None = None,
                 overwrite: bool = False, argv: list[str] | None = None) -> None:
        self.task_id, self.seed = task_id, seed
        self.instance_opt, self.budget_opt = instance, budget
        self.condition = blackbox.check_label("condition", condition)
        self.agent = blackbox.check_label("agent", agent) if agent else None
        self.controller_opt = controller
        self.run_dir = Path(run_dir).expanduser().resolve()
        self.workspace = Path(workspace).expanduser().resolve() if workspace else None
        self.overwrite = overwrite
        self.argv = list(argv if argv is not None else sys.argv)
        self.run_id = uuid.uuid4().hex
        self.sentinel = f"__pushbench_oversized_{secrets.token_hex(8)}"
        self._oversized: dict[str, tuple[str, int]] = {}
        self._stashed: dict[str, tuple[Any, dict]] = {}
        self._lock_fh = None
        self.env = None
        self.mcp_calls = 0
        self.after_end_calls = 0
        self._trace_head = audit.genesis(self.run_id)  # digest chain over trace.jsonl lines
        self._trace_lines = 0
        self._closed = False
        self._watch: WorkspaceWatch | None = None
        self.out_of_band_edits: list[dict] = []
        self.out_of_band_count = 0
        self._pending_out_of_band: list[list[str]] = []
        self._pending_count = 0

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> "BlackBoxSession":
        if self.workspace is not None and (_inside(self.run_dir, self.workspace)
                                           or _inside(self.workspace, self.run_dir)):
            raise SetupError(f"the run dir {self.run_dir} and the workspace {self.workspace} "
                             "must not contain each other (the agent must not see the record)")
        paths.private_dir(self.run_dir, tighten=False)  # main() checks an existing one
        self._lock_fh = os.fdopen(paths.open_private(self.run_dir / ".lock",
                                                     os.O_WRONLY | os.O_CREAT), "w")
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.close()
            self._lock_fh = None
            raise SetupError(f"another pushbench mcp server is using {self.run_dir}; give each "
                             "server its own --run-dir") from None
        existing = [n for n in (EPISODE_FILE, TRACE_FILE, RUN_FILE)
                    if (self.run_dir / n).exists()]
        if existing and not self.overwrite:  # the same run started again: continue it
            from . import reattach

            return reattach.resume(self)
        for n in existing:
            (self.run_dir / n).unlink()
        self._setup_logging()
        self.env, self.controller = self._make_env()
        options = {self.env.unwrapped._instance_option: self.instance_opt} \
            if self.instance_opt else None
        obs, info = self.env.reset(seed=self.seed, options=options)
        self.reset_result = json.loads(obs)["result"]
        self.tool_schemas = self.env.unwrapped.tool_schemas()
        self.workspace_files = self._prepare_workspace() if self.workspace else None
        from .reattach import write_workspace_marker

        write_workspace_marker(self, self.workspace_files)  # how a restart knows its copy
        self._start_watch()
        self._trace_fh = os.fdopen(paths.open_private(self.run_dir / TRACE_FILE), "ab")
        write_json_atomic(self.run_dir / RUN_FILE, self._run_manifest())
        self._persist()
        log.info("run %s started: task %s seed %s controller %s condition %s", self.run_id,
                 self.task_id, self.seed, self.controller["name"], self.condition)
        return self

    def close(self) -> None:
        if self.env is not None and getattr(self, "_trace_fh", None) and not self._closed:
            self._closed = True  # the last record commits to the whole trace
            try:
                self._persist()
            except Exception:  # noqa: BLE001 - never lose the close itself
                log.exception("could not write the closing record")
        if self.env is not None:
            self.env.close()
        if getattr(self, "_trace_fh", None):
            self._trace_fh.close()
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None
        root = logging.getLogger()
        for h in list(root.handlers):
            if getattr(h, "_pushbench_run", None) == self.run_id:
                root.removeHandler(h)
                h.close()

    def __enter__(self) -> "BlackBoxSession":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def _setup_logging(self) -> None:
        os.close(paths.open_private(self.run_dir / LOG_FILE))  # created 0600 before logging opens it
        handler = logging.FileHandler(self.run_dir / LOG_FILE, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._pushbench_run = self.run_id  # type: ignore[attr-defined]
        logging.getLogger().addHandler(handler)  # the SDK's warnings land here too
        log.setLevel(logging.INFO)

    def _make_env(self):
        from . import make

        kwargs = {"budget": self.budget_opt} if self.budget_opt is not None else {}
        name = self.controller_opt
        if name in (None, "none"):  # the bare environment, no wrapper at all
            return make(self.task_id, **kwargs), {"name": "none", "components": []}
        env = make(self.task_id, controller=name, **kwargs)
        comps = list(getattr(env, "component_names", ()) or ())
        return env, {"name": name, "components": comps}

    def _prepare_workspace(self) -> int:
        base = self.env.unwrapped
        if hasattr(base, "prepare_workspace"):  # families with their own workspace (DataOps)
            base.prepare_workspace(self.workspace)
            return sum(1 for p in self.workspace.rglob("*") if p.is_file())
        snapshot = self.reset_result.get("snapshot")
        if not snapshot:
            raise SetupError(f"task {self.task_id} has no snapshot or workspace to copy; "
                             "drop --workspace")
        from . import snapshots

        source = snapshots.ensure(snapshot).resolve()
        if _inside(self.workspace, source) or _inside(source, self.workspace):
            raise SetupError(f"the workspace {self.workspace} must lie outside the snapshot "
                             f"cache {source}")
        n = prepare_workspace(source, self.workspace)
        log.info("workspace %s prepared from snapshot %s (%d files)", self.workspace, snapshot, n)
        return n

    def _run_manifest(self) -> dict:
        return {
            "schema_version": blackbox.RUN_SCHEMA_VERSION, "kind": blackbox.RUN_KIND,
            "run_id": self.run_id, "task": self.task_id, "seed": self.seed,
            "instance": self.instance_opt, "instance_used": self.reset_result.get("instance"),
            "budget": self.budget_opt, "controller": self.controller["name"],
            "components": self.controller["components"], "condition": self.condition,
            "agent": self.agent, "policy": blackbox.policy_name(self.condition, self.agent),
            "workspace": str(self.workspace) if self.workspace else None,
            "snapshot": self.reset_result.get("snapshot"),
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "pid": os.getpid(), "argv": self.argv,
            "versions": {"pushbench": __version__, "mcp": _version("mcp"),
                         "python": platform.python_version()},
            "git_revision": _git_revision(),
        }

    # -- texts the agent sees --------------------------------------------------------------
    @property
    def base(self):
        return self.env.unwrapped

    def task_text(self) -> str:
        r = self.reset_result
        names = ", ".join(f"`{t['function']['name']}`" for t in self.tool_schemas)
        lines = [f"# PushBench task {r.get('task_id', self.task_id)}", "", r.get("objective", ""),
                 "", f"- Target: at least {r['target']} distinct items accepted by the verifier.",
                 f"- Budget: {r['budget']} tool calls. Every call uses one step, including "
                 "`status` and calls the server refuses.",
                 f"- Tools: {names}.",
                 "- Success is decided by the verifier's count, not by what `final` reports. "
                 "After the episode ends (`final`, `ask_user` or the budget), calls are not "
                 "counted."]
        if self.workspace is not None:
            lines.append(f"- A copy of the repository, for reading files directly, is at "
                         f"`{self.workspace}`.")
        return "\n".join(lines) + "\n"

    def prompt(self) -> str:
        return blackbox.prompt_text(self.condition) + "\n\n" + self.task_text()

    # -- tool calls ------------------------------------------------------------------------
    def stash_oversized(self, head: str, size: int) -> str:
        """Keep the head of an overlong wire line; its stand-in call carries the token."""
        token = secrets.token_hex(8)
        self._oversized[token] = (head, size)
        return token

    def stash_action(self, action: Any, proposed: dict) -> str:
        """Keep an action the wire screen derived from an unreadable call; its stand-in carries
        the token (see :mod:`pushbench.mcp_wire`)."""
        token = secrets.token_hex(8)
        self._stashed[token] = (action, proposed)
        return token

    def over(self) -> bool:
        return self.base.terminated_by is not None

    def call(self, name: str, arguments: dict | None) -> tuple[str, bool]:
        """Run one tool call; return ``(observation text, is_error)``."""
        t0 = time.perf_counter()
        self._detect_out_of_band()
        self.mcp_calls += 1
        arguments = dict(arguments or {})
        if set(arguments) == {self.sentinel} and arguments[self.sentinel] in self._oversized:
            head, size = self._oversized.pop(arguments[self.sentinel])
            action: Any = head
            proposed: dict = {"tool": name, "oversized": True, "wire_bytes": size,
                              "head": head[:_PROPOSED_CLIP]}
        elif set(arguments) == {self.sentinel} and arguments[self.sentinel] in self._stashed:
            action, proposed = self._stashed.pop(arguments[self.sentinel])
        else:
            call: dict[str, Any] = {"tool": name}
            for k, v in arguments.items():
                # An argument named "tool" must not rename the call: keep it as an unknown one.
                call["tool (argument)" if k == "tool" else k] = v
            try:
                text, size, too_big = bounded_dump(call)
            except (TypeError, ValueError, RecursionError):
                text, size, too_big = "", 0, False
            if too_big:
                action = text  # longer than the limit: the env refuses it by its length alone
                proposed = {"tool": name, "oversized": True, "cutoff_bytes": size,
                            "head": text[:_PROPOSED_CLIP]}
            else:
                action = call
                proposed = {"tool": name, "arguments": arguments}

        if self.over():
            self.after_end_calls += 1
            obs = json.dumps({"tool": name, "ok": False, "error_type": "episode_over",
                              "error": f"the episode is over (ended by {self.base.terminated_by} "
                                       f"after {self.base.steps_used} steps); this call was not "
                                       "run or counted, and nothing can change the result now"},
                             ensure_ascii=True, separators=(",", ":"))
            self._persist()
            self._trace({"index": self.mcp_calls, "step": None, "after_end": True,
                         "proposed": proposed, "observation": obs, "is_error": True}, t0)
            return obs, True

        obs, reward, terminated, truncated, info = self.env.step(action)
        decoded = json.loads(obs)
        is_error = not decoded.get("ok", False)
        self._persist()
        self._trace({"index": self.mcp_calls, "step": info["qgp"]["steps_used"],
                     "ok": not is_error, "proposed": proposed, "observation": obs,
                     "reward": reward, "terminated": terminated, "truncated": truncated,
                     "info": info, "is_error": is_error}, t0)
        log.info("call %d step %s %s ok=%s%s", self.mcp_calls, info["qgp"]["steps_used"], name,
                 not is_error, f" -> episode ended ({self.base.terminated_by})"
                 if terminated or truncated else "")
        return obs, is_error

    # -- persistence -----------------------------------------------------------------------
    def record(self) -> dict:
        """The full episode record, marked as a black-box run (what ``episode.json`` holds)."""
        from .runner.episode import episode_key

        rec = self.env.get_wrapper_attr("episode_record")()
        if not isinstance(rec.get("controller"), dict):
            rec["controller"] = {**self.controller, "steps": []}
        rec["condition"] = self.condition
        rec["policy"] = blackbox.describe_policy(self.condition, self.agent, self.seed)
        rec["simulated"] = False
        rec["key"] = episode_key(self.task_id, self.controller["name"], rec["policy"]["name"],
                                 self.seed, self.instance_opt)
        rec["blackbox"] = {"run_id": self.run_id, "transport": "mcp-stdio",
                           "mcp_calls": self.mcp_calls, "after_end_calls": self.after_end_calls,
                           "complete": rec.get("terminated_by") is not None,
                           "trace_lines": self._trace_lines, "trace_head": self._trace_head,
                           "closed": self._closed,
                           "watched_workspace": self._watch is not None,
                           "out_of_band_edits": list(self.out_of_band_edits),
                           "out_of_band_edits_count": self.out_of_band_count}
        return rec

    def _persist(self) -> None:
        # The workspace as this call left it: the next call compares against it.
        if self._watch is not None:
            self._watch.refresh()
        write_json_atomic(self.run_dir / EPISODE_FILE, self.record(), sync_dir=False)

    def _trace(self, entry: dict, t0: float) -> None:
        entry["time"] = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        entry["server_ms"] = round(1000 * (time.perf_counter() - t0), 3)
        entry["prev"] = self._trace_head
        if self._pending_out_of_band:  # also in the chained trace: a record cannot hide them
            entry["out_of_band"] = self._pending_out_of_band
            entry["out_of_band_count"] = self._pending_count
            self._pending_out_of_band, self._pending_count = [], 0
        data = (json.dumps(entry, ensure_ascii=True, separators=(",", ":"), default=repr)
                + "\n").encode()
        self._trace_fh.write(data)
        self._trace_fh.flush()
        os.fsync(self._trace_fh.fileno())
        self._trace_head = audit.line_digest(data)
        self._trace_lines += 1

    # -- out-of-band workspace edits -------------------------------------------------------
    MAX_EDITS_KEPT = 500  # the count stays exact; the list keeps the first ones

    def _start_watch(self) -> None:
        """Watch the live workspace of families whose verifier reads it (DataOps, SWE-lite)."""
        ws = getattr(self.base, "_ws", None)
        root = getattr(ws, "root", None)
        if root and os.path.isdir(root):
            self._watch = WorkspaceWatch(root)
            log.info("watching the live workspace %s for out-of-band edits", root)

    def _detect_out_of_band(self) -> None:
        """Record changes to the workspace made since the server's last call (not by it)."""
        if self._watch is None or self.over():
            return
        changes = self._watch.changes()
        if not changes:
            return
        step = self.base.steps_used + 1
        self._pending_out_of_band = [[p, k] for p, k in changes[:self.MAX_EDITS_KEPT]]
        self._pending_count = len(changes)
        self.out_of_band_count += len(changes)
        room = self.MAX_EDITS_KEPT - len(self.out_of_band_edits)
        self.out_of_band_edits += [{"step_before": step, "path": p, "kind": k}
                                   for p, k in changes[:max(room, 0)]]
        log.warning("%d out-of-band workspace change(s) before step %d: %s", len(changes), step,
                    ", ".join(f"{k} {p}" for p, k in changes[:5]))


# ----- the stdin reader that never parses an overlong line --------------------------------
_ID = r'(-?\d{1,19}(?![\d.eE])|"(?:[^"\\]|\\.){0,256}")'  # a longer number is no id
_HEAD_ID = re.compile(r'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_TAIL_ID = re.compile(r'"id"\s*:\s*' + _ID + r'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')
_METHOD = re.compile(r'"method"\s*:\s*"([^"\\]{1,64})"')
_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,128})"')
_META = re.compile(r'"_meta"\s*:\s*\{')


def _object_end(text: str, start: int) -> int | None:
    """Index just past the JSON object opening at ``text[start]`` (``None`` if cut off)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _meta_from(text: str) -> tuple[dict | None, tuple[int, int] | None]:
    m = _META.search(text)
    if not m:
        return None, None
    end = _object_end(text, m.end() - 1)
    if end is None:
        return None, None
    try:
        meta = json.loads(text[m.end() - 1:end])
    except ValueError:
        return None, None
    return (meta, (m.start(), end)) if isinstance(meta, dict) else (None, None)


def stand_in_line(head: str, tail: str, size: int, session: BlackBoxSession) -> str | None:
    """A small request replacing an overlong JSON-RPC line (``None`` if it has no findable id).

    A ``tools/call`` becomes the same call with stand-in arguments, so the environment refuses
    it by size (and charges the step); any other method becomes an unknown method, which the
    SDK answers with an error. The request's ``_meta`` is carried over when it can be found.
    """
    m = _HEAD_ID.search(head[:4096]) or _TAIL_ID.search(tail)
    if not m:
        return None
    req_id = json.loads(m.group(1))
    args_at = head.find('"arguments"')
    pre = head[:args_at] if args_at >= 0 else head[:4096]
    meta, span = _meta_from(pre)
    if meta is None:
        meta, _ = _meta_from(tail)
    if span:
        pre = pre[:span[0]] + pre[span[1]:]
    method = _METHOD.search(pre) or _METHOD.search(tail)
    params: dict[str, Any] = {}
    if meta is not None:
        params["_meta"] = meta
    if method and method.group(1) == "tools/call":
        names = _NAME.findall(pre)
        name = names[-1] if names else "?"
        params.update(name=name, arguments={session.sentinel: session.stash_oversized(head, size)})
        method_name = "tools/call"
    else:
        method_name = "pushbench/oversized-request"
    log.warning("JSON-RPC line of %d bytes (limit %d) was not parsed; id %r, method %s",
                size, MAX_WIRE_LINE, req_id, method.group(1) if method else "?")
    return json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method_name,
                       "params": params})


class BoundedStdin:
    """Async line iterator over a file descriptor for the SDK's stdio transport.

    Lines up to ``limit`` bytes pass through unchanged. A longer line is never buffered whole
    or parsed: its first ``_HEAD_KEEP`` and last ``_TAIL_KEEP`` bytes are kept and
    ``on_oversized(head, tail, size)`` supplies a replacement line (or ``None`` to drop it).
    """

    def __init__(self, fd: int, on_oversized, limit: int = MAX_WIRE_LINE) -> None:
        self.fd, self.limit, self.on_oversized = fd, limit, on_oversized
        self._lines: deque[str] = deque()
        self._buf = bytearray()
        self._over = False
        self._head = b""
        self._tail = bytearray()
        self._size = 0
        self._eof = False

    def __aiter__(self) -> "BoundedStdin":
        return self

    async def __anext__(self) -> str:
        while not self._lines:
            if self._eof:
                raise StopAsyncIteration
            chunk = await anyio.to_thread.run_sync(os.read, self.fd, 1 << 16,
                                                   abandon_on_cancel=True)
            if chunk:
                self.feed(chunk)
            else:
                self._eof = True
                if self._buf.strip() or self._over:
                    self._finish()
        return self._lines.popleft()

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            self._append(chunk[start:] if nl < 0 else chunk[start:nl])
            if nl < 0:
                return
            self._finish()
            start = nl + 1

    def _append(self, piece: bytes) -> None:
        if not piece:
            return
        if self._over:
            self._size += len(piece)
            self._tail += piece[-_TAIL_KEEP:]
            del self._tail[:-_TAIL_KEEP]
            return
        self._buf += piece
        if len(self._buf) > self.limit:
            self._over = True
            self._head = bytes(self._buf[:_HEAD_KEEP])
            self._tail = bytearray(self._buf[-_TAIL_KEEP:])
            self._size = len(self._buf)
            self._buf = bytearray()

    def _finish(self) -> None:
        if self._over:
            line = self.on_oversized(self._head.decode("utf-8", "replace"),
                                     self._tail.decode("utf-8", "replace"), self._size)
            self._over, self._head, self._tail, self._size = False, b"", bytearray(), 0
        else:
            line = self._buf.decode("utf-8", "replace")
            self._buf = bytearray()
        if line is not None and line.strip():
            self._lines.append(line)


# ----- the MCP server -----------------------------------------------------------------------
def build_server(session: BlackBoxSession) -> Server:
    """A low-level MCP ``Server`` exposing the session's tools, task resource and prompt."""
    tools = [types.Tool(name=f["name"], description=f["description"],
                        input_schema=f["parameters"])
             for f in (t["function"] for t in session.tool_schemas)]
    task_resource = types.Resource(uri=TASK_URI, name="task", title="PushBench task",
                                   description="The objective, target, budget and rules.",
                                   mime_type="text/markdown")
    task_prompt = types.Prompt(name="task", title="PushBench task",
                               description=f"The {session.condition} prompt for this run, "
                                           "followed by the task.")

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            text, is_error = session.call(params.name, params.arguments)
        except Exception:  # a harness bug: say so without detail, keep the details in the log
            log.exception("internal error in tool call %r", params.name)
            text = json.dumps({"tool": params.name, "ok": False, "error_type": "internal",
                               "error": "internal error in the PushBench server (see its "
                                        "server.log)"})
            is_error = True
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[task_resource])

    async def read_resource(ctx, params: types.ReadResourceRequestParams):
        if str(params.uri) != TASK_URI:
            raise MCPError(code=RESOURCE_NOT_FOUND, message=f"no resource {params.uri!r}; "
                           f"the only resource is {TASK_URI}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=TASK_URI, mime_type="text/markdown", text=session.task_text())])

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[task_prompt])

    async def get_prompt(ctx, params: types.GetPromptRequestParams):
        if params.name != "task":
            raise MCPError(code=types.INVALID_PARAMS, message=f"no prompt {params.name!r}; "
                           "the only prompt is 'task'")
        return types.GetPromptResult(description=task_prompt.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=session.prompt()))])

    return Server("pushbench", version=__version__, title="PushBench",
                  instructions=session.task_text(), on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources,
                  on_read_resource=read_resource, on_list_prompts=list_prompts,
                  on_get_prompt=get_prompt)


async def serve(session: BlackBoxSession) -> None:
    """Serve ``session`` over this process's stdin/stdout until the client closes stdin."""
    from .mcp_wire import LineWriter, ScreenedStdin, WireScreen

    server = build_server(session)
    wire_fd, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # nothing else in this process may read the protocol stream
    os.close(devnull)
    os.dup2(2, 1)  # nor write to it: stray output goes to stderr (the SDK does the same)
    writer = LineWriter(wire_out)  # the one writer of protocol lines (SDK and wire screen)
    reader = ScreenedStdin(BoundedStdin(wire_fd, lambda h, t, n: stand_in_line(h, t, n, session)),
                           WireScreen(session), writer)
    try:
        async with stdio_server(stdin=reader, stdout=writer) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        os.dup2(wire_out, 1)
        os.close(wire_out)
        os.close(wire_fd)


def exposure_problem(run_dir: str | os.PathLike) -> str | None:
    """One line saying which of the cache and the run dir other users can read, and the fix.

    An agent running as another OS user must not read the cache (SWE-lite reference code) or
    the run dir (the record); ``None`` when both are private (a missing run dir is created so).
    """
    found = [(what, p) for what, p in (("the cache", paths.home()),
                                       ("the run dir", Path(run_dir).expanduser()))
             if p.is_dir() and paths.exposure(p)]  # a non-folder is open()'s error to report
    if not found:
        return None
    modes = ", ".join(f"{what} {p} (mode {os.stat(p).st_mode & 0o777:04o})" for what, p in found)
    fix = " && ".join(f"chmod 700 {p}" for _, p in found)
    return f"other users can read {modes}; make it private: {fix}"


def main(task: str, run_dir: str | os.PathLike, **kwargs: Any) -> int:
    """Entry of ``pushbench mcp``: set up, serve until stdin closes, return an exit code."""
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(logging.Formatter("[pushbench mcp] %(levelname)s: %(message)s"))
    logging.getLogger().addHandler(stderr)
    allow_shared = bool(kwargs.pop("allow_shared_cache", False))
    problem = exposure_problem(run_dir)
    if problem and not allow_shared:
        print(f"[pushbench mcp] error: {problem}; or pass --allow-shared-cache to serve anyway",
              file=sys.stderr, flush=True)
        return 2
    if problem:
        log.warning("%s (serving anyway: --allow-shared-cache)", problem)
    session = BlackBoxSession(task, run_dir, **kwargs)
    try:
        try:
            session.open()
        except (SetupError, KeyError, ValueError, OSError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            print(f"[pushbench mcp] error: {msg}", file=sys.stderr, flush=True)
            return 2
        anyio.run(serve, session)
    finally:
        session.close()
    done = session.base.terminated_by if session.env is not None else None
    log.info("server stopped after %d calls; episode %s", session.mcp_calls,
             f"ended by {done}" if done else "incomplete")
    return 0
