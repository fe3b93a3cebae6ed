"""``pushbench blackbox run``: a batch of black-box episodes through a real client, evaluated.

For every (task, seed) it prepares ``OUT/<agent>/<task>/<condition>/seed<S>/`` with ``agent/``
(the client's working directory; the workspace copy lands in ``agent/repo``), ``run/`` (the
record, out of the agent's view), ``client-home/`` (the client's own HOME and configuration),
writes the client's configuration (:mod:`pushbench.blackbox.clients`), runs the client headless
with a per-episode timeout (its whole process group is killed at the deadline), keeps its
output (``client.out``, ``client.err``, ``client.json``) and finally evaluates the batch like
``pushbench evaluate`` into ``OUT/<agent>/report``.

With ``policy`` set, each episode gets its own loopback model server
(:mod:`pushbench.modelserver`) running that offline policy with the episode's seed, and the
batch also runs the same policy **in-process** on the same (task, seed): ``harness.csv`` pairs
the two episode by episode (calls equal or the first differing step, steps, verified count,
success, end reason, client exit and time, and from the model server's log: requests,
repeated requests, failed requests, requests that carried less history than the one before),
so what the harness itself adds or loses is measured, not guessed.
"""

from __future__ import annotations

import csv
import functools
import json
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from .blackbox import clients
from .blackbox.episode_prompt import episode_prompt
from .processes import reap_orphans, stop_group

# Seconds an episode's `pushbench mcp` server may outlive its client before it is stopped: one
# whose client died mid-setup (Letta starts a server per tool call) still finishes its setup,
# then reads end-of-file and exits by itself, which keeps its closing record.
ORPHAN_GRACE = 30.0
CALL_FIELDS = ("tool", "args", "ok", "verdicts", "valid_count")
HARNESS_COLUMNS = [
    "agent",
    "task",
    "seed",
    "condition",
    "policy",
    "client_rc",
    "timed_out",
    "seconds",
    "calls_equal",
    "first_difference",
    "steps_in_process",
    "steps_harness",
    "valid_in_process",
    "valid_harness",
    "success_in_process",
    "success_harness",
    "ended_in_process",
    "ended_harness",
    "model_requests",
    "repeated_requests",
    "failed_requests",
    "history_shrank",
    "server_ms_median",
    "server_ms_max",
    "memory_calls",
]


@dataclass
class Batch:
    agent: str
    tasks: list[str]
    seeds: list[int]
    condition: str
    out: Path
    policy: str | None = None
    params: dict | None = None
    endpoint: clients.Endpoint | None = None
    controller: str = "standard"
    budget: int | None = None
    timeout: float = 600.0
    client_bin: str | None = None
    # Letta's model settings and the driver's limits (clients.letta); None keeps
    # pushbench.policies.letta's defaults
    context_window: int | None = None
    max_tokens: int | None = None
    max_turns: int | None = None
    steps_per_turn: int | None = None

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.endpoint is None):
            raise ValueError("a Batch needs exactly one of policy and endpoint")
        letta_only = (self.context_window, self.max_tokens, self.max_turns, self.steps_per_turn)
        if self.agent != "letta" and any(letta_only):
            raise ValueError(
                "context_window, max_tokens, max_turns and steps_per_turn are Letta's settings "
                f"(agent 'letta'); {self.agent} takes its own from its configuration"
            )
        # Absolute, because each client starts in its episode's agent folder: a relative
        # --out would make the config paths it is given (--mcp-config, CODEX_HOME, --cd) and
        # the server's --run-dir name nothing there, and every client exits at once.
        self.out = Path(self.out).absolute()


def episode_dir(b: Batch, task: str, seed: int) -> Path:
    return b.out / b.agent / task / b.condition / f"seed{seed}"


def _run_client(launch: clients.Launch, ep: Path, timeout: float) -> dict:
    t0 = time.monotonic()
    with open(ep / "client.out", "wb") as out, open(ep / "client.err", "wb") as err:
        proc = subprocess.Popen(
            launch.argv,
            cwd=launch.cwd,
            env=launch.env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = stop_group(proc, 15)
    return {"rc": rc, "timed_out": timed_out, "seconds": round(time.monotonic() - t0, 2)}


def _reap_servers(cmds: list[list[str]], log) -> list[dict]:
    """Stop what is left of the episode servers ``cmds`` (see :func:`reap_orphans`); one log
    line per server found, the entries without their command lines."""
    found = reap_orphans(cmds, ORPHAN_GRACE)
    for o in found:
        how = f"stopped with {o['stopped_by']}" if o["stopped_by"] else "exited by itself"
        log(f"an episode server (pid {o['pid']}) outlived its client: {how}")
    return [{"pid": o["pid"], "stopped_by": o["stopped_by"]} for o in found]


def run_episode(
    b: Batch,
    task: str,
    seed: int,
    binary: str,
    version: str,
    log=print,
    launcher=None,
    servers: list[list[str]] | None = None,
) -> Path:
    """One episode through the client; returns its run dir (the record may be incomplete).

    The episode server's command line is appended to ``servers`` (when given), so that the
    caller can stop any copy of it that the client's own server (Letta) starts later."""
    from . import modelserver

    ep = episode_dir(b, task, seed)
    run_dir = ep / "run"
    if (run_dir / "episode.json").exists():
        rec = json.loads((run_dir / "episode.json").read_text())
        if rec.get("terminated_by") is not None:
            log(f"{task} seed {seed}: already done, kept")
            return run_dir
    (ep / "agent").mkdir(parents=True, exist_ok=True)
    prompt = episode_prompt(b.condition, task, seed, b.controller, None, b.budget)
    # `pushbench mcp` copies a snapshot into the workspace; a task without one (DataOps)
    # refuses --workspace ("has no snapshot or workspace to copy")
    snapshot = (clients.first_observation_in(prompt).get("result") or {}).get("snapshot")
    cmd = clients.server_command(
        task,
        seed,
        b.condition,
        b.agent,
        run_dir,
        ep / "agent" / "repo" if snapshot else None,
        b.controller,
        b.budget,
    )
    if servers is not None:
        servers.append(cmd)
    with ExitStack() as stack:
        endpoint = b.endpoint
        if b.policy is not None:
            kind = modelserver.NotingBackend if b.agent == "letta" else modelserver.PolicyBackend
            backend = kind(b.policy, b.params, seed)
            url = stack.enter_context(modelserver.running(backend, str(ep / "model-server.jsonl")))
            endpoint = clients.Endpoint(base_url=url)
        assert endpoint is not None  # a Batch has a policy or an endpoint
        launch = (launcher or clients.LAUNCHERS[b.agent])(binary, ep, prompt, cmd, endpoint)
        result = _run_client(launch, ep, b.timeout)
        # The client's process group is gone, but a server its MCP SDK started in a session of
        # its own may not be (a Letta server killed mid-episode leaves one): the next run of
        # this episode could not take the run folder's lock while it lives.
        result["orphan_servers"] = _reap_servers([cmd], log)
    if b.agent == "letta":
        result.update(letta_summary(ep))
    argv = [a if a != prompt else "<prompt: see prompt.txt>" for a in launch.argv]
    (ep / "prompt.txt").write_text(prompt)
    (ep / "client.json").write_text(
        json.dumps(
            {
                "agent": b.agent,
                "client_version": version,
                "argv": argv,
                "cwd": str(launch.cwd),
                "endpoint": endpoint.base_url if endpoint else None,
                "offline": bool(endpoint and endpoint.offline),
                "policy": b.policy,
                "params": b.params,
                **result,
            },
            indent=1,
        )
        + "\n"
    )
    log(
        f"{task} seed {seed}: client exit {result['rc']}"
        f"{' (timed out)' if result['timed_out'] else ''} in {result['seconds']} s"
    )
    return run_dir


def _letta_client(b: Batch, stack: ExitStack, log) -> tuple:
    """Start Postgres + the Letta server for the batch (data in ``OUT/letta/server``, stopped
    when ``stack`` closes); return (server URL, version, launcher) for :func:`run_episode`.

    Letta lists the models of ``OPENAI_BASE_URL`` once at start-up; with a policy that is a
    batch-level model server (seed 0) used for nothing else: each episode's agent talks to its
    own seeded model server through its ``llm_config``.
    """
    from . import modelserver
    from .baselines import installer, letta_server

    installer.require("letta")
    mark = installer.installed("letta")
    assert mark is not None  # require() checked it
    version = f"{mark['version']} (Letta server)"
    data = b.out / b.agent / "server"
    data.mkdir(parents=True, exist_ok=True)
    if b.policy is not None:
        backend = modelserver.PolicyBackend(b.policy, b.params, 0)
        llm = stack.enter_context(modelserver.running(backend, str(data / "models.jsonl")))
        key, offline = "pushbench-offline", True
    else:
        assert b.endpoint is not None  # a Batch has a policy or an endpoint
        llm, key, offline = b.endpoint.base_url, b.endpoint.api_key, False
    server = stack.enter_context(letta_server.running(data, llm, key, offline, log=log))
    launcher = functools.partial(
        clients.letta,
        context_window=b.context_window,
        max_tokens=b.max_tokens,
        max_turns=b.max_turns,
        steps_per_turn=b.steps_per_turn,
    )
    return server.url, version, launcher


def letta_summary(ep: Path) -> dict:
    """What the Letta driver reported (``letta.json``), for ``client.json``."""
    try:
        data = json.loads((ep / "letta.json").read_text())
    except (OSError, ValueError):
        return {"memory_calls": None, "letta_error": "the Letta driver wrote no summary"}
    return {
        "memory_calls": data.get("memory_calls"),
        "memory_errors": data.get("memory_errors"),
        "letta_turns": data.get("turns"),
        "letta_stop_reasons": data.get("stop_reasons"),
        "letta_resumed": data.get("resumed"),
        "letta_prompt_resent": data.get("prompt_resent"),
        "letta_error": data.get("error"),
        "letta_error_after_end": data.get("error_after_end"),
        "letta_cancelled_after_end": data.get("cancelled_after_end"),
    }


def _calls(record: dict) -> list[dict]:
    return [{k: c.get(k) for k in CALL_FIELDS} for c in record.get("calls") or ()]


def compare(in_process: dict, harness: dict) -> dict:
    """How the harness episode differs from the in-process one (same policy, task, seed)."""
    a, h = _calls(in_process), _calls(harness)
    # strict=False: differing lengths are handled just below
    first = next((i + 1 for i, (x, y) in enumerate(zip(a, h, strict=False)) if x != y), None)
    if first is None and len(a) != len(h):
        first = min(len(a), len(h)) + 1
    return {
        "calls_equal": a == h,
        "first_difference": first,
        "steps_in_process": len(a),
        "steps_harness": len(h),
        "valid_in_process": in_process.get("valid_count"),
        "valid_harness": harness.get("valid_count"),
        "success_in_process": in_process.get("success"),
        "success_harness": harness.get("success"),
        "ended_in_process": in_process.get("terminated_by"),
        "ended_harness": harness.get("terminated_by"),
    }


def request_stats(log_path: Path) -> dict:
    """What the model server saw of the client: requests, repeats, failures, lost history.

    A repeated request carries as many tool results as the one before it (the client retried
    or re-sent); a request with fewer than before means the client dropped history (context
    compaction or truncation).
    """
    if not log_path.exists():
        return {
            "model_requests": 0,
            "repeated_requests": 0,
            "failed_requests": 0,
            "history_shrank": 0,
            "server_ms_median": None,
            "server_ms_max": None,
        }
    entries = [json.loads(x) for x in log_path.read_text().splitlines() if x.strip()]
    seen = [e.get("tool_results") for e in entries if e.get("status") == 200]
    ms = sorted(float(e.get("latency_ms") or 0) for e in entries)
    return {
        "model_requests": len(entries),
        "server_ms_median": ms[len(ms) // 2] if ms else None,
        "server_ms_max": ms[-1] if ms else None,
        "repeated_requests": sum(a == b for a, b in pairwise(seen)),
        "failed_requests": sum(e.get("status") != 200 for e in entries),
        "history_shrank": sum(b < a for a, b in pairwise(seen)),
    }


def harness_rows(b: Batch, run_dirs: list[Path]) -> list[dict]:
    """One row per episode pairing the in-process policy with the same policy via the client."""
    from .runner.episode import run_episode as in_process

    assert b.policy is not None  # run_batch pairs only batches driven by a policy
    rows = []
    for rd in run_dirs:
        ep = rd.parent
        seed, task = int(ep.name.removeprefix("seed")), ep.parent.parent.name
        client = (
            json.loads((ep / "client.json").read_text()) if (ep / "client.json").exists() else {}
        )
        rec = (
            json.loads((rd / "episode.json").read_text()) if (rd / "episode.json").exists() else {}
        )
        ref = in_process(
            task, b.controller, b.policy, seed, budget=b.budget, policy_params=b.params
        )
        rows.append(
            {
                "agent": b.agent,
                "task": task,
                "seed": seed,
                "condition": b.condition,
                "policy": b.policy,
                "client_rc": client.get("rc"),
                "timed_out": client.get("timed_out"),
                "seconds": client.get("seconds"),
                **compare(ref, rec),
                **request_stats(ep / "model-server.jsonl"),
                "memory_calls": client.get("memory_calls"),
            }
        )
    return rows


def write_rows(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HARNESS_COLUMNS)
        w.writeheader()
        w.writerows(rows)


def run_batch(b: Batch, log=print, console=None, out=None) -> dict:
    """Run every episode of ``b``, evaluate them, and (with a policy) pair them in-process."""
    from .blackbox.evaluate import check_evaluation_out, evaluate_run_dirs, write_evaluation

    report = b.out / b.agent / "report"
    check_evaluation_out(report, [], replace=True)  # the report folder is an evaluation's
    with ExitStack() as stack:
        if b.agent == "letta":
            binary, version, launcher = _letta_client(b, stack, log)
        else:
            binary = clients.find_binary(b.agent, b.client_bin)
            version, launcher = clients.client_version(binary), None
        log(
            f"{b.agent} {version}: {len(b.tasks)} task(s) x {len(b.seeds)} seed(s), condition "
            f"{b.condition}, "
            f"{'policy ' + b.policy if b.policy else 'endpoint ' + str(b.endpoint)}"
        )
        servers: list[list[str]] = []
        run_dirs = [
            run_episode(b, t, s, binary, version, log, launcher, servers)
            for t in b.tasks
            for s in b.seeds
        ]
    # Stopping the Letta server can orphan a server it had just started for a tool call
    orphans = _reap_servers(servers, log)
    present = [rd for rd in run_dirs if (rd / "episode.json").exists()]
    missing = [str(rd) for rd in run_dirs if rd not in present]
    records, refused = evaluate_run_dirs(present) if present else ([], [])
    for _, why in refused:  # one line each; the rest of the batch is still evaluated
        log(f"refused: {why}")
    if records:  # this batch's evaluation replaces an earlier batch's report
        write_evaluation(records, report, console=console, out=out, run_dirs=present, replace=True)
    summary = {
        "agent": b.agent,
        "client_version": version,
        "episodes": len(run_dirs),
        "recorded": len(present),
        "never_started": missing,
        "report": str(report),
        "refused": [why for _, why in refused],
        "orphan_servers": orphans,
    }
    if b.policy is not None and present:
        rows = harness_rows(b, present)
        write_rows(rows, b.out / b.agent / "harness.csv")
        summary["harness"] = {
            "episodes": len(rows),
            "calls_equal": sum(bool(r["calls_equal"]) for r in rows),
            "success_in_process": sum(bool(r["success_in_process"]) for r in rows),
            "success_harness": sum(bool(r["success_harness"]) for r in rows),
        }
    (b.out / b.agent).mkdir(parents=True, exist_ok=True)
    (b.out / b.agent / "batch.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
