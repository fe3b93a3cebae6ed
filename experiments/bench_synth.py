"""Speed of the synthetic repository generator, and how density moves a valid set (issue 15, §4).

Part 1 times ``generate`` (render + write) of a 5,000-definition repository against the 10 s
goal and prints the rate in definitions per second; the indexer's time to read the result back
is printed beside it (for scale, not part of the goal). Part 2 prints the markdown table of
docs/synthetic.md: for several requested ``docstring`` densities, the valid set size of the
``docstring`` predicate as the real RepoScan indexer measures it on the written tree.

    python experiments/bench_synth.py                  # both parts
    python experiments/bench_synth.py --defs 5000 --repeats 5 --skip-table
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pushbench.families.reposcan import indexer
from pushbench.families.reposcan.synth import generate
from pushbench.families.reposcan.synth.measure import measure

GOAL_S = 10.0


def bench(defs: int, modules: int, repeats: int, seed: int) -> None:
    gen, idx = [], []
    for r in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            dest = Path(tmp) / "repo"
            t0 = time.perf_counter()
            stats = generate(dest, seed=seed + r, modules=modules, defs=defs)
            t1 = time.perf_counter()
            found = len(indexer.index_tree(dest))
            t2 = time.perf_counter()
            assert found == defs == stats.defs, (found, defs)
            gen.append(t1 - t0)
            idx.append(t2 - t1)
    med = statistics.median(gen)
    print(f"generate {defs} definitions in {modules} modules ({repeats} seeds from {seed}):")
    print(
        f"  median {med:.2f} s, max {max(gen):.2f} s  -> {med / GOAL_S:.3f} of the "
        f"{GOAL_S:.0f} s goal ({'meets' if max(gen) <= GOAL_S else 'MISSES'} it)"
    )
    print(f"  rate {defs / med:,.0f} definitions/s")
    print(f"  (indexer reading the tree back: median {statistics.median(idx):.2f} s)")


def table(defs: int, modules: int, seed: int) -> None:
    print(
        "\n| requested `docstring` density | valid set size (`docstring`, measured) | "
        "fraction | `raises` set (fixed at 0.15) |"
    )
    print("|---:|---:|---:|---:|")
    for p in (0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9):
        with tempfile.TemporaryDirectory() as tmp:
            stats = generate(
                Path(tmp) / "r",
                seed=seed,
                modules=modules,
                defs=defs,
                density={"docstring": p, "raises": 0.15},
            )
            got = measure(Path(tmp) / "r", stats.primary_fixture)
        print(
            f"| {p:.2f} | {got['docstring']} / {got['defs']} | "
            f"{got['docstring'] / got['defs']:.3f} | {got['raises']} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--defs", type=int, default=5000)
    ap.add_argument("--modules", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--table-defs", type=int, default=1000)
    args = ap.parse_args()
    bench(args.defs, args.modules, args.repeats, args.seed)
    bench(args.defs, 1, 1, args.seed)  # worst layout: every definition in one module
    if not args.skip_table:
        table(args.table_defs, 10, args.seed)


if __name__ == "__main__":
    main()
