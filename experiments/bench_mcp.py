"""Latency of one tool call through the black-box MCP server (issue 6).

Starts ``python -m pushbench.cli mcp`` as a subprocess, connects the official ``mcp`` SDK client
over stdio (the same transport Claude Code and Codex CLI use), and times ``--calls`` ``status``
calls end to end (client send -> server: env.step, atomic episode.json rewrite, trace append
with fsync -> client receive). Prints median / p10 / p90 / mean in milliseconds, plus the
server-side share measured inside the server (``server_ms`` in trace.jsonl).

    python experiments/bench_mcp.py                       # 200 calls, handshake-era protocol
    python experiments/bench_mcp.py --mode auto --calls 500
    python experiments/bench_mcp.py --tool search         # a heavier call (10 hits + snippets)
    python experiments/bench_mcp.py --json                # one JSON line
    python experiments/bench_mcp.py --task DataOps-b1-N20  # a family with a watched workspace
    python experiments/bench_mcp.py --watch-only          # the out-of-band watch alone
    python experiments/bench_mcp.py --signing             # signed vs unsigned, per call

The server watches the live workspace of DataOps-lite and SWE-lite episodes for out-of-band
edits (a stat walk per check, hashing only changed files). ``--watch-only`` times that watch in
process on each ``--watch-tasks`` workspace: the per-call cost (check before the call + snapshot
after it) with nothing changed and with one file changed between calls.

``--signing`` times the server's per-call work in process (``BlackBoxSession.call``: env.step,
the signed episode.json rewrite, the signed fsync'd trace line) as served, and with the HMACs
patched out (the same bytes minus the signatures), in alternating rounds; it prints both medians,
their ratio, and the HMAC work alone per call (seal of the final episode.json + one trace line).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

TASK = "RepoScan-requests-docstring-N10"
WATCH_TASKS = "DataOps-b1-N20,SWELite-pytest-N10"


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def measure(
    run_dir: Path, calls: int, warmup: int, mode: str, tool: str, task: str = TASK
) -> dict:
    import os

    env = {k: os.environ[k] for k in ("PUSHBENCH_HOME",) if k in os.environ}
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "pushbench.cli",
            "mcp",
            "--task",
            task,
            "--run-dir",
            str(run_dir),
            "--budget",
            str(calls + warmup + 10),
        ],
        env=env,
    )
    args = {"status": {}, "search": {"query": "session", "page": 1}}[tool]
    t0 = time.perf_counter()
    async with Client(params, mode=mode) as client:
        startup = time.perf_counter() - t0
        for _ in range(warmup):
            await client.call_tool(tool, args)
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            res = await client.call_tool(tool, args)
            times.append(1000 * (time.perf_counter() - t))
            assert not res.is_error, res
        protocol = client.protocol_version
    trace = [json.loads(x) for x in (run_dir / "trace.jsonl").read_text().splitlines()]
    server = [t["server_ms"] for t in trace[warmup:]]
    return {
        "task": task,
        "tool": tool,
        "calls": calls,
        "protocol": protocol,
        "startup_s": round(startup, 3),
        "median_ms": round(statistics.median(times), 3),
        "p10_ms": round(_pct(times, 0.10), 3),
        "p90_ms": round(_pct(times, 0.90), 3),
        "mean_ms": round(statistics.fmean(times), 3),
        "server_median_ms": round(statistics.median(server), 3),
    }


def watch_cost(task: str, reps: int) -> dict:
    """Per-call cost of the out-of-band watch on ``task``'s live workspace (in process)."""
    import os

    import pushbench
    from pushbench.blackbox.watch import WorkspaceWatch

    env = pushbench.make(task)
    env.reset(seed=0)
    try:
        root = env.unwrapped._ws.root
        watch = WorkspaceWatch(root)
        watch.refresh()
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
        size = sum(os.path.getsize(f) for f in files)

        def per_call(touch: bool) -> list[float]:
            out = []
            for i in range(reps):
                if touch:  # an out-of-band edit between two calls
                    with open(files[i % len(files)], "a") as fh:
                        fh.write(" ")
                t = time.perf_counter()
                changed = watch.changes()  # before the call
                watch.refresh()  # after the call (nothing changed in between here)
                out.append(1000 * (time.perf_counter() - t))
                assert bool(changed) == touch
            return out

        quiet, edited = per_call(False), per_call(True)
    finally:
        env.close()
    return {
        "task": task,
        "files": len(files),
        "bytes": size,
        "reps": reps,
        "quiet_median_ms": round(statistics.median(quiet), 3),
        "quiet_p90_ms": round(_pct(quiet, 0.9), 3),
        "one_edit_median_ms": round(statistics.median(edited), 3),
    }


def signing_cost(task: str, calls: int, warmup: int, tool: str, rounds: int = 3) -> dict:
    """Per-call server time signed vs unsigned (HMACs patched out), in process."""
    from pushbench.blackbox import signing
    from pushbench.blackbox.session import BlackBoxSession

    args = {"status": {}, "search": {"query": "session", "page": 1}}[tool]
    real = signing.seal_json, signing.sign_line

    def per_call(run_dir: Path, signed: bool) -> tuple[list[float], int]:
        if not signed:
            signing.seal_json = lambda key, domain, data: data
            signing.sign_line = lambda key, body: body + b"\n"
        try:
            with BlackBoxSession(task, run_dir, budget=calls + warmup + 10, argv=["bench"]) as s:
                out = []
                for i in range(calls + warmup):
                    t = time.perf_counter()
                    s.call(tool, args)
                    if i >= warmup:
                        out.append(1000 * (time.perf_counter() - t))
            return out, len((run_dir / "episode.json").read_bytes())
        finally:
            signing.seal_json, signing.sign_line = real

    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="pushbench-sign-bench-") as tmp:
        for r in range(rounds):
            for signed in (True, False) if r % 2 == 0 else (False, True):
                got, record_bytes = per_call(Path(tmp) / f"{signed}-{r}", signed)
                times[signed] += got
        line = (Path(tmp) / "True-0" / "trace.jsonl").read_bytes().splitlines()[-1]
    key = signing.installation_key()
    record = b"{\n" + b" " * (record_bytes - 4) + b"\n}"
    reps = 200
    t = time.perf_counter()
    for _ in range(reps):
        signing.seal_json(key, signing.RECORD, record)
        signing.sign_line(key, line[: line.rfind(b',"sig"')] + b"}")
    hmac_ms = 1000 * (time.perf_counter() - t) / reps
    signed, unsigned = statistics.median(times[True]), statistics.median(times[False])
    return {
        "task": task,
        "tool": tool,
        "calls": calls * rounds,
        "signed_median_ms": round(signed, 3),
        "unsigned_median_ms": round(unsigned, 3),
        "ratio": round(signed / unsigned, 3),
        "record_bytes": record_bytes,
        "hmac_only_ms": round(hmac_ms, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mode", default="legacy", help="legacy (initialize handshake) | auto")
    ap.add_argument("--tool", default="status", choices=["status", "search"])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--task", default=TASK, help="task to serve (status works for every family)")
    ap.add_argument("--watch-only", action="store_true", help="time the out-of-band watch only")
    ap.add_argument("--watch-tasks", default=WATCH_TASKS, help="comma-separated tasks")
    ap.add_argument("--signing", action="store_true", help="signed vs unsigned per-call cost")
    a = ap.parse_args()
    if a.signing:
        r = signing_cost(a.task, a.calls, a.warmup, a.tool)
        if a.json:
            print(json.dumps(r))
            return
        print(
            f"{r['task']}: {r['calls']} {r['tool']} calls in process per arm; server work per "
            f"call median {r['signed_median_ms']:.3f} ms signed, "
            f"{r['unsigned_median_ms']:.3f} ms unsigned (ratio {r['ratio']:.3f}); the HMACs "
            f"alone (episode.json of {r['record_bytes']:,} bytes + one trace line) "
            f"{r['hmac_only_ms']:.4f} ms"
        )
        return
    if a.watch_only:
        for task in a.watch_tasks.split(","):
            w = watch_cost(task, a.calls)
            if a.json:
                print(json.dumps(w))
                continue
            print(
                f"{w['task']}: {w['files']} files ({w['bytes'] / 1e6:.1f} MB); watch per call "
                f"(check + snapshot) median {w['quiet_median_ms']:.3f} ms, p90 "
                f"{w['quiet_p90_ms']:.3f} ms; with one file edited between calls "
                f"{w['one_edit_median_ms']:.3f} ms"
            )
        return
    with tempfile.TemporaryDirectory(prefix="pushbench-mcp-bench-") as tmp:
        r = anyio.run(measure, Path(tmp) / "run", a.calls, a.warmup, a.mode, a.tool, a.task)
    if a.json:
        print(json.dumps(r))
        return
    print(
        f"{r['task']}: {r['calls']} {r['tool']} calls over stdio ({r['protocol']}), server start "
        f"{r['startup_s']:.2f} s"
    )
    print(
        f"  round trip  median {r['median_ms']:.2f} ms   p10 {r['p10_ms']:.2f}   "
        f"p90 {r['p90_ms']:.2f}   mean {r['mean_ms']:.2f}"
    )
    print(
        f"  in server   median {r['server_median_ms']:.2f} ms (env.step + episode.json "
        "rewrite + fsync'd trace line)"
    )


if __name__ == "__main__":
    main()
