"""What a cross-process handoff costs on this machine (issue 31: why async vector envs lag).

An async vector step hands work to a worker process and back, and on a virtual machine a
process blocked on a pipe sits on an idle virtual CPU that must be woken. Two measurements:

* ``pipe round trip``: one small message to a worker process and back over a
  ``multiprocessing`` pipe, with both sides blocking in ``recv`` (what the async vector env
  does) and with both sides spinning on ``poll(0)`` (their CPUs never idle);
* ``idle gap``: a loop over 8 bare RepoScan-N50 copies stepping a fixed seeded call stream,
  stepped one vector step at a time, timed with and without a ``--gap`` sleep after each
  vector step: how much slower the same work runs right after the CPU idled (what each side
  of an async step pays after waiting for the other).

    python experiments/bench_wakeup.py
    python experiments/bench_wakeup.py --gap 0.0003 --rounds 5
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path


def _echo(conn, spin: bool) -> None:
    while True:
        if spin:
            while not conn.poll(0):
                pass
        message = conn.recv_bytes()
        if message == b"stop":
            return
        conn.send_bytes(message)


def round_trip(spin: bool, n: int) -> float:
    """Mean round trip (microseconds) of ``n`` 100-byte messages."""
    here, there = mp.Pipe()
    proc = mp.get_context("fork").Process(target=_echo, args=(there, spin), daemon=True)
    proc.start()
    try:
        here.send_bytes(b"x")
        here.recv_bytes()  # the worker is up
        t0 = time.perf_counter()
        for _ in range(n):
            here.send_bytes(b"x" * 100)
            if spin:
                while not here.poll(0):
                    pass
            here.recv_bytes()
        return (time.perf_counter() - t0) / n * 1e6
    finally:
        here.send_bytes(b"stop")
        proc.join(10)


def idle_gap(gap: float, steps: int, rounds: int) -> tuple[float, float]:
    """Median busy time (microseconds) of one vector step of the 8-copy loop without and with
    a ``gap``-second sleep after each step (rounds interleaved)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_vector

    loop = bench_vector.Loop("RepoScan-N50", None, 8, 0, "stream", 2 * steps * rounds + steps + 1)
    loop.run(steps)  # warm
    out: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for sleep in (False, True):
            busy = 0.0
            for _ in range(steps):
                t0 = time.perf_counter()
                loop.run(1)
                busy += time.perf_counter() - t0
                if sleep:
                    time.sleep(gap)
            out[sleep].append(busy / steps * 1e6)
    loop.close()
    return statistics.median(out[False]), statistics.median(out[True])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--gap", type=float, default=0.0003, help="seconds idle after each step")
    ap.add_argument("--steps", type=int, default=300, help="vector steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"{os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    block = round_trip(False, args.messages)
    spin = round_trip(True, args.messages)
    print(f"pipe round trip: blocking {block:.1f} us, spinning {spin:.1f} us ({block / spin:.1f}x)")
    plain, after_idle = idle_gap(args.gap, args.steps, args.rounds)
    print(
        f"8 bare copies, one vector step: {plain:.0f} us back to back, {after_idle:.0f} us "
        f"after {args.gap * 1e6:.0f} us idle ({after_idle / plain:.2f}x)"
    )


if __name__ == "__main__":
    main()
