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


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


async def measure(run_dir: Path, calls: int, warmup: int, mode: str, tool: str) -> dict:
    import os

    env = {k: os.environ[k] for k in ("PUSHBENCH_HOME",) if k in os.environ}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pushbench.cli", "mcp", "--task", TASK, "--run-dir", str(run_dir),
              "--budget", str(calls + warmup + 10)], env=env)
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
    return {"tool": tool, "calls": calls, "protocol": protocol, "startup_s": round(startup, 3),
            "median_ms": round(statistics.median(times), 3),
            "p10_ms": round(_pct(times, 0.10), 3), "p90_ms": round(_pct(times, 0.90), 3),
            "mean_ms": round(statistics.fmean(times), 3),
            "server_median_ms": round(statistics.median(server), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mode", default="legacy", help="legacy (initialize handshake) | auto")
    ap.add_argument("--tool", default="status", choices=["status", "search"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pushbench-mcp-bench-") as tmp:
        r = anyio.run(measure, Path(tmp) / "run", a.calls, a.warmup, a.mode, a.tool)
    if a.json:
        print(json.dumps(r))
        return
    print(f"{r['calls']} {r['tool']} calls over stdio ({r['protocol']}), server start "
          f"{r['startup_s']:.2f} s")
    print(f"  round trip  median {r['median_ms']:.2f} ms   p10 {r['p10_ms']:.2f}   "
          f"p90 {r['p90_ms']:.2f}   mean {r['mean_ms']:.2f}")
    print(f"  in server   median {r['server_median_ms']:.2f} ms (env.step + episode.json "
          "rewrite + fsync'd trace line)")


if __name__ == "__main__":
    main()
