"""Paired harness comparison: the same offline policy in-process and through each real client.

    python experiments/harness_comparison.py --out runs/harness [--policies diligent,simulated-mid]
        [--targets 50,100] [--agents claude-code,codex]

Runs the black-box protocol's tasks (experiments/blackbox/protocol.yaml, default prompt) with
each policy behind the loopback model server through Claude Code and Codex CLI, pairs every
episode with the in-process run of the same policy, task and seed, and prints a Markdown table
(also written to OUT/harness_comparison.md): how many episodes had identical calls, success,
verified count and steps in-process vs through the harness, client failures and timeouts, and
the client's wall-clock seconds per episode (median). Simulated policies are labelled so.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import blackbox_protocol  # noqa: E402


def table(rows: list[dict]) -> str:
    head = (
        "| policy | harness | episodes | identical calls | success in-process | success "
        "via harness | mean verified in-process / harness | mean steps in-process / "
        "harness | model requests (repeated, failed, history lost) | client failures | "
        "timeouts | median s / episode | model server ms per request (median, max) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    out = []
    for pol, agent in sorted({(r["policy"], r["agent"]) for r in rows}):
        rs = [r for r in rows if (r["policy"], r["agent"]) == (pol, agent)]
        n = len(rs)

        def t(k: str, rs: list[dict] = rs) -> int:  # rs bound now (B023)
            return sum(r[k] == "True" for r in rs)

        def m(k: str, rs: list[dict] = rs) -> float:
            return statistics.mean(float(r[k] or 0) for r in rs)

        def s(k: str, rs: list[dict] = rs) -> int:
            return sum(int(r.get(k) or 0) for r in rs)

        label = pol + (" (simulated)" if pol.startswith("simulated") else "")
        out.append(
            f"| {label} | {agent} | {n} | {t('calls_equal')} | {t('success_in_process')} "
            f"| {t('success_harness')} | {m('valid_in_process'):.1f} / "
            f"{m('valid_harness'):.1f} | {m('steps_in_process'):.1f} / "
            f"{m('steps_harness'):.1f} | {s('model_requests')} ({s('repeated_requests')}, "
            f"{s('failed_requests')}, {s('history_shrank')}) | "
            f"{sum(r['client_rc'] not in ('0', '') for r in rs)}"
            f" | {t('timed_out')} | "
            f"{statistics.median(float(r['seconds'] or 0) for r in rs):.1f} | "
            f"{statistics.median(float(r['server_ms_median'] or 0) for r in rs):.1f}, "
            f"{max(float(r['server_ms_max'] or 0) for r in rs):.1f} |"
        )
    return head + "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--policies", default="diligent,simulated-mid")
    ap.add_argument("--targets", default="50,100")
    ap.add_argument("--agents", default="claude-code,codex")
    ap.add_argument("--timeout", default="600")
    a = ap.parse_args(argv)
    out = Path(a.out)
    rows = []
    for pol in a.policies.split(","):
        blackbox_protocol.main(
            [
                "--out",
                str(out / pol),
                "--model-server",
                pol,
                "--conditions",
                "default",
                "--targets",
                a.targets,
                "--agents",
                a.agents,
                "--timeout",
                a.timeout,
            ]
        )
        rows += list(csv.DictReader(open(out / pol / "harness.csv")))
    md = table(rows)
    (out / "harness_comparison.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
