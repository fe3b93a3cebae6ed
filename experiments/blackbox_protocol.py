"""Run the black-box protocol of experiments/blackbox/protocol.yaml and evaluate it as one batch.

    python experiments/blackbox_protocol.py --out runs/bb --model-server diligent
    python experiments/blackbox_protocol.py --out runs/bb --base-url URL --api-key-env VAR \
        --model NAME [--agents codex] [--targets 50] [--conditions default]

With ``--model-server POLICY`` every episode is driven by that offline policy behind a loopback
model server, and ``OUT/harness.csv`` pairs each episode with the same policy run in-process
(see pushbench/blackbox_run.py). Prints where the report and the pairing went.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import yaml

from pushbench import blackbox_run
from pushbench.blackbox import clients as blackbox_clients
from pushbench.blackbox import full_records_from_run_dirs, write_evaluation

HERE = Path(__file__).resolve().parent


def tasks(protocol: dict, targets: list[int]) -> list[str]:
    return [f"RepoScan-{inst}-N{n}" for n in targets for inst in protocol["instances"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default=str(HERE / "blackbox" / "protocol.yaml"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--model-server", dest="policy")
    ap.add_argument("--params", default=None, help="policy parameters (JSON)")
    ap.add_argument("--base-url")
    ap.add_argument("--api-key-env")
    ap.add_argument("--model", default="default")
    ap.add_argument("--agents", help="comma-separated subset of the protocol's agents")
    ap.add_argument("--targets", help="comma-separated subset of the protocol's targets")
    ap.add_argument("--conditions", help="comma-separated subset of the protocol's conditions")
    ap.add_argument("--instances", help="comma-separated subset of the protocol's instances")
    ap.add_argument("--timeout", type=float, help="seconds per episode (default: protocol's)")
    a = ap.parse_args(argv)
    protocol = yaml.safe_load(open(a.protocol))
    pick = lambda opt, key, conv=str: [conv(x) for x in opt.split(",")] if opt else protocol[key]  # noqa: E731
    if (a.policy is None) == (a.base_url is None):
        ap.error("give exactly one of --model-server POLICY and --base-url URL")
    if a.instances:
        protocol["instances"] = a.instances.split(",")
    endpoint = None
    if a.base_url:
        endpoint = blackbox_clients.Endpoint(
            base_url=a.base_url,
            api_key=os.environ.get(a.api_key_env or "", "none"),
            model=a.model,
            offline=False,
        )
    import json

    params = json.loads(a.params) if a.params else None
    out = Path(a.out)
    run_dirs, rows = [], []
    for agent in pick(a.agents, "agents"):
        for cond in pick(a.conditions, "conditions"):
            b = blackbox_run.Batch(
                agent=agent,
                tasks=tasks(protocol, pick(a.targets, "targets", int)),
                seeds=protocol["seeds"],
                condition=cond,
                out=out / cond,
                policy=a.policy,
                params=params,
                endpoint=endpoint,
                controller=protocol["controller"],
                timeout=a.timeout or protocol["timeout_seconds"],
            )
            blackbox_run.run_batch(b, log=lambda m: print(m, file=sys.stderr))
            run_dirs += [
                blackbox_run.episode_dir(b, t, s) / "run" for t in b.tasks for s in b.seeds
            ]
            hc = out / cond / agent / "harness.csv"
            if hc.exists():
                rows += list(csv.DictReader(open(hc)))
    present = [rd for rd in run_dirs if (rd / "episode.json").exists()]
    write_evaluation(full_records_from_run_dirs(present), out / "report", seed=0)
    if rows:
        blackbox_run.write_rows(rows, out / "harness.csv")
        print(f"harness pairing: {out / 'harness.csv'} ({len(rows)} episodes)")
    print(f"report: {out / 'report'} ({len(present)} of {len(run_dirs)} runs recorded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
