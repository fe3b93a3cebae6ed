"""The black-box session: one episode's environment and run directory, transport-free.

:class:`BlackBoxSession` owns the (wrapped) environment of one task, the run directory
(``run.json``, ``episode.json``, ``trace.jsonl``, ``server.log``) and, for families with a live
workspace, the agent's workspace copy and its out-of-band-edit watch. :mod:`.server` puts it
behind MCP; tests drive it directly. The helpers here write files atomically, copy a
workspace and measure oversized calls without serialising them whole.

The session class is about 320 lines: one episode's whole lifecycle (open, call, record,
trace chain, workspace watch, close) kept together so its ordering guarantees (record and
trace written before a result is returned) are visible in one place.
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
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .. import __version__, paths, records
from ..envs.actions import mcp_call
from ..envs.base import QGPEnv, base_env
from ..envs.spaces import MAX_ACTION_BYTES
from ..tasks import family_version
from . import audit, rundir_safety, signing
from . import evaluate as blackbox
from .evaluate import EPISODE_FILE, LOG_FILE, RUN_FILE, TRACE_FILE
from .watch import WorkspaceWatch

if TYPE_CHECKING:
    import gymnasium as gym

log = logging.getLogger("pushbench.mcp")

TASK_URI = "pushbench://task"
_PROPOSED_CLIP = 200
RESOURCE_NOT_FOUND = -32002
# What a workspace copy leaves out: VCS data, the snapshot marker, caches and compiled files.
_WORKSPACE_SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    ".hypothesis",
    ".cache",
    ".eggs",
}
_WORKSPACE_SKIP_FILES = re.compile(
    r"(^\.pushbench.*|\.py[co]$|\.json\.gz$|\.gitattributes$"
    r"|\.gitignore$|^\.coverage.*)"
)


from .files import SetupError, write_json_atomic  # noqa: E402  (one home; re-exported)


def _inside(a: Path, b: Path) -> bool:
    """True if ``a`` is ``b`` or lies under it (both resolved)."""
    return a == b or b in a.parents


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
        raise SetupError(
            f"workspace {dest} exists and is not an empty directory; give a new "
            "path (the workspace must be a fresh copy)"
        )

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

    def __init__(
        self,
        task_id: str,
        run_dir: str | os.PathLike,
        *,
        seed: int = 0,
        controller: str | None = "standard",
        workspace: str | os.PathLike | None = None,
        condition: str = "default",
        agent: str | None = None,
        instance: str | None = None,
        budget: int | None = None,
        overwrite: bool = False,
        argv: list[str] | None = None,
    ) -> None:
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
        self._lock_fh: IO[str] | None = None
        self.env: gym.Env | None = None
        self.mcp_calls = 0
        self.after_end_calls = 0
        self._key: bytes | None = None  # this installation's signing key (set by open)
        self._trace_head = audit.genesis(self.run_id)  # open() binds it to the configuration
        self._trace_lines = 0
        self._closed = False
        self._watch: WorkspaceWatch | None = None
        self.out_of_band_edits: list[dict] = []
        self.out_of_band_count = 0
        self._pending_out_of_band: list[list[str]] = []
        self._pending_count = 0
        self._pending_content: list[dict] = []

    # -- lifecycle --------------------------------------------------------------------------
    def open(self) -> BlackBoxSession:
        if self.workspace is not None and (
            _inside(self.run_dir, self.workspace) or _inside(self.workspace, self.run_dir)
        ):
            raise SetupError(
                f"the run dir {self.run_dir} and the workspace {self.workspace} "
                "must not contain each other (the agent must not see the record)"
            )
        self._load_key()
        paths.private_dir(self.run_dir, tighten=False)  # main() checks an existing one
        unsafe = rundir_safety.mcp_problem(self.run_dir)  # again: made by someone else meanwhile?
        if unsafe:
            raise SetupError(f"unsafe run dir: {unsafe}")
        self._lock_fh = os.fdopen(
            paths.open_private(self.run_dir / ".lock", os.O_WRONLY | os.O_CREAT), "w"
        )
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_fh.close()
            self._lock_fh = None
            raise SetupError(
                f"another pushbench mcp server is using {self.run_dir}; give each "
                "server its own --run-dir"
            ) from None
        existing = [n for n in (EPISODE_FILE, TRACE_FILE, RUN_FILE) if (self.run_dir / n).exists()]
        if existing and not self.overwrite:  # the same run started again: continue it
            from . import reattach

            return reattach.resume(self)
        for n in existing:
            (self.run_dir / n).unlink()
        self._setup_logging()
        self.env, self.controller = self._make_env()
        obs, info = self.env.reset(
            seed=self.seed, options=self.base.reset_options(self.instance_opt)
        )
        self.reset_result = json.loads(obs)["result"]
        self.tool_schemas = self.base.tool_schemas()
        self.workspace_files = self._prepare_workspace() if self.workspace else None
        from .reattach import write_workspace_marker

        write_workspace_marker(self, self.workspace_files)  # how a restart knows its copy
        self._start_watch()
        self._trace_fh = os.fdopen(paths.open_private(self.run_dir / TRACE_FILE), "ab")
        manifest = self._run_manifest()
        self._trace_head = signing.genesis(manifest)  # the chain starts from the configuration
        write_json_atomic(self.run_dir / RUN_FILE, manifest, seal=self.sealer(signing.RUN))
        self._persist()
        log.info(
            "run %s started: task %s seed %s controller %s condition %s",
            self.run_id,
            self.task_id,
            self.seed,
            self.controller["name"],
            self.condition,
        )
        return self

    def close(self) -> None:
        if self.env is not None and getattr(self, "_trace_fh", None) and not self._closed:
            self._closed = True  # the last record commits to the whole trace
            try:
                self._persist()
            except Exception:  # never lose the close itself
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

    def __enter__(self) -> BlackBoxSession:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def _setup_logging(self) -> None:
        # created 0600 before logging opens it
        os.close(paths.open_private(self.run_dir / LOG_FILE))
        handler = logging.FileHandler(self.run_dir / LOG_FILE, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._pushbench_run = self.run_id  # type: ignore[attr-defined]
        logging.getLogger().addHandler(handler)  # the SDK's warnings land here too
        log.setLevel(logging.INFO)

    def _load_key(self) -> None:
        """Load (or create) the installation key, kept out of the run dir and the workspace."""
        try:
            signing.check_outside(self.run_dir, *([self.workspace] if self.workspace else []))
            self._key = signing.installation_key()
        except (ValueError, signing.SigningKeyError) as e:
            raise SetupError(str(e)) from None

    @property
    def _live_key(self) -> bytes:
        """The signing key :meth:`open` loaded."""
        if self._key is None:
            raise SetupError("no signing key loaded (the session is not open)")
        return self._key

    def sealer(self, domain: bytes):
        """What ``write_json_atomic`` applies to sign a file of kind ``domain``."""
        return lambda data: signing.seal_json(self._live_key, domain, data)

    def _make_env(self) -> tuple[gym.Env, dict]:
        from .. import make

        kwargs: dict[str, Any] = {"budget": self.budget_opt} if self.budget_opt is not None else {}
        name = self.controller_opt
        if name in (None, "none"):  # the bare environment, no wrapper at all
            return make(self.task_id, **kwargs), {"name": "none", "components": []}
        env = make(self.task_id, controller=name, **kwargs)
        comps = list(getattr(env, "component_names", ()) or ())
        return env, {"name": name, "components": comps}

    def _prepare_workspace(self) -> int:
        workspace = self.workspace
        assert workspace is not None  # open() prepares one only where --workspace is given
        base = self.base
        if hasattr(base, "prepare_workspace"):  # families with their own workspace (DataOps)
            base.prepare_workspace(workspace)
            return sum(1 for p in workspace.rglob("*") if p.is_file())
        snapshot = self.reset_result.get("snapshot")
        if not snapshot:
            raise SetupError(
                f"task {self.task_id} has no snapshot or workspace to copy; drop --workspace"
            )
        from .. import snapshots

        source = snapshots.ensure(snapshot).resolve()
        if _inside(workspace, source) or _inside(source, workspace):
            raise SetupError(
                f"the workspace {workspace} must lie outside the snapshot cache {source}"
            )
        n = prepare_workspace(source, workspace)
        log.info("workspace %s prepared from snapshot %s (%d files)", self.workspace, snapshot, n)
        return n

    def _run_manifest(self) -> dict:
        return {
            "schema_version": blackbox.RUN_SCHEMA_VERSION,
            "kind": blackbox.RUN_KIND,
            "run_id": self.run_id,
            "task": self.task_id,
            "seed": self.seed,
            "instance": self.instance_opt,
            "instance_used": self.reset_result.get("instance"),
            "budget": self.budget_opt,
            "controller": self.controller["name"],
            "components": self.controller["components"],
            "condition": self.condition,
            "agent": self.agent,
            "policy": blackbox.policy_name(self.condition, self.agent),
            "workspace": str(self.workspace) if self.workspace else None,
            "snapshot": self.reset_result.get("snapshot"),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "pid": os.getpid(),
            "argv": self.argv,
            "versions": {
                "pushbench": __version__,
                "mcp": records.package_version("mcp"),
                "python": platform.python_version(),
            },
            "family_versions": {self.base.family: family_version(self.base.family)},
            "signing": {"alg": signing.ALG, "key_id": signing.key_id(self._live_key)},
            "git_revision": (records.git_revision() or {}).get("commit"),
        }

    # -- texts the agent sees --------------------------------------------------------------
    @property
    def _live_env(self) -> gym.Env:
        """The environment :meth:`open` (or a re-attach) made."""
        if self.env is None:
            raise SetupError("the session is not open")
        return self.env

    @property
    def base(self) -> QGPEnv:
        return base_env(self._live_env)

    def task_text(self) -> str:
        r = self.reset_result
        names = ", ".join(f"`{t['function']['name']}`" for t in self.tool_schemas)
        lines = [
            f"# PushBench task {r.get('task_id', self.task_id)}",
            "",
            r.get("objective", ""),
            "",
            f"- Target: at least {r['target']} distinct items accepted by the verifier.",
            f"- Budget: {r['budget']} tool calls. Every call uses one step, including "
            "`status` and calls the server refuses.",
            f"- Tools: {names}.",
            "- Success is decided by the verifier's count, not by what `final` reports. "
            "After the episode ends (`final`, `ask_user` or the budget), calls are not "
            "counted.",
        ]
        if self.workspace is not None:
            lines.append(
                f"- A copy of the repository, for reading files directly, is at `{self.workspace}`."
            )
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
        the token (see :mod:`pushbench.blackbox.wire`)."""
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
            proposed: dict = {
                "tool": name,
                "oversized": True,
                "wire_bytes": size,
                "head": head[:_PROPOSED_CLIP],
            }
        elif set(arguments) == {self.sentinel} and arguments[self.sentinel] in self._stashed:
            action, proposed = self._stashed.pop(arguments[self.sentinel])
        else:
            call = mcp_call(name, arguments)
            try:
                text, size, too_big = bounded_dump(call)
            except (TypeError, ValueError, RecursionError):
                text, size, too_big = "", 0, False
            if too_big:
                action = text  # longer than the limit: the env refuses it by its length alone
                proposed = {
                    "tool": name,
                    "oversized": True,
                    "cutoff_bytes": size,
                    "head": text[:_PROPOSED_CLIP],
                }
            else:
                action = call
                proposed = {"tool": name, "arguments": arguments}

        if self.over():
            self.after_end_calls += 1
            obs = json.dumps(
                {
                    "tool": name,
                    "ok": False,
                    "error_type": "episode_over",
                    "error": f"the episode is over (ended by {self.base.terminated_by} "
                    f"after {self.base.steps_used} steps); this call was not "
                    "run or counted, and nothing can change the result now",
                },
                ensure_ascii=True,
                separators=(",", ":"),
            )
            self._persist()
            self._trace(
                {
                    "index": self.mcp_calls,
                    "step": None,
                    "after_end": True,
                    "proposed": proposed,
                    "observation": obs,
                    "is_error": True,
                },
                t0,
            )
            return obs, True

        obs, reward, terminated, truncated, info = self._live_env.step(action)
        decoded = json.loads(obs)
        is_error = not decoded.get("ok", False)
        self._persist()
        self._trace(
            {
                "index": self.mcp_calls,
                "step": info["qgp"]["steps_used"],
                "ok": not is_error,
                "proposed": proposed,
                "observation": obs,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "info": info,
                "is_error": is_error,
            },
            t0,
        )
        log.info(
            "call %d step %s %s ok=%s%s",
            self.mcp_calls,
            info["qgp"]["steps_used"],
            name,
            not is_error,
            f" -> episode ended ({self.base.terminated_by})" if terminated or truncated else "",
        )
        return obs, is_error

    # -- persistence -----------------------------------------------------------------------
    def record(self) -> dict:
        """The full episode record, marked as a black-box run (what ``episode.json`` holds)."""
        from ..runner.episode import episode_key

        rec = self._live_env.get_wrapper_attr("episode_record")()
        if not isinstance(rec.get("controller"), dict):
            rec["controller"] = {**self.controller, "steps": []}
        rec["condition"] = self.condition
        rec["policy"] = blackbox.describe_policy(self.condition, self.agent, self.seed)
        rec["simulated"] = False
        rec["key"] = episode_key(
            self.task_id,
            self.controller["name"],
            rec["policy"]["name"],
            self.seed,
            self.instance_opt,
        )
        rec["blackbox"] = {
            "run_id": self.run_id,
            "transport": "mcp-stdio",
            "mcp_calls": self.mcp_calls,
            "after_end_calls": self.after_end_calls,
            "complete": rec.get("terminated_by") is not None,
            "trace_lines": self._trace_lines,
            "trace_head": self._trace_head,
            "closed": self._closed,
            "watched_workspace": self._watch is not None,
            "out_of_band_edits": list(self.out_of_band_edits),
            "out_of_band_edits_count": self.out_of_band_count,
        }
        return rec

    def _persist(self) -> None:
        # The workspace as this call left it: the next call compares against it.
        if self._watch is not None:
            self._watch.refresh()
        write_json_atomic(
            self.run_dir / EPISODE_FILE,
            self.record(),
            sync_dir=False,
            seal=self.sealer(signing.RECORD),
        )

    def _trace(self, entry: dict, t0: float) -> None:
        entry["time"] = datetime.now(UTC).isoformat(timespec="milliseconds")
        entry["server_ms"] = round(1000 * (time.perf_counter() - t0), 3)
        entry["prev"] = self._trace_head
        if self._pending_out_of_band:  # also in the chained trace: a record cannot hide them
            entry["out_of_band"] = self._pending_out_of_band
            entry["out_of_band_count"] = self._pending_count
            entry["out_of_band_edits"] = self._pending_content  # what replay applies
            self._pending_out_of_band, self._pending_count = [], 0
            self._pending_content = []
        data = signing.sign_line(
            self._live_key,
            json.dumps(entry, ensure_ascii=True, separators=(",", ":"), default=repr).encode(),
        )
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
        self._pending_content = edit_contents(self._watch.root, changes)
        self._pending_out_of_band = [[p, k] for p, k in changes[: self.MAX_EDITS_KEPT]]
        self._pending_count = len(changes)
        self.out_of_band_count += len(changes)
        room = self.MAX_EDITS_KEPT - len(self.out_of_band_edits)
        self.out_of_band_edits += [
            {"step_before": step, "path": p, "kind": k} for p, k in changes[: max(room, 0)]
        ]
        log.warning(
            "%d out-of-band workspace change(s) before step %d: %s",
            len(changes),
            step,
            ", ".join(f"{k} {p}" for p, k in changes[:5]),
        )


def edit_contents(root: str, changes: list[tuple[str, str]]) -> list[dict]:
    """The content of out-of-band ``changes`` under ``root`` as trace-line entries.

    Each is :func:`pushbench.runner.replay_steps.record_edit` (new bytes, or why they were not
    kept); at most ``MAX_EDITS_PER_CALL`` entries and ``MAX_EDITS_BYTES`` of content per call.
    Past either cap an entry says ``unrecorded`` (or is missing), and replay marks the run
    unverifiable rather than guessing.
    """
    from ..runner.replay_steps import MAX_EDITS_BYTES, MAX_EDITS_PER_CALL, record_edit

    out, room = [], MAX_EDITS_BYTES
    for rel, kind in changes[:MAX_EDITS_PER_CALL]:
        entry = record_edit(root, rel, kind, room)
        room -= entry.get("size", 0)
        out.append(entry)
    return out
