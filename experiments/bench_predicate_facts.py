"""Cost of the predicate-language facts (issue 15, section 2) on the three built-in snapshots.

The facts pass re-parses a snapshot's source the first time a process needs its valid sets
(issue 11: facts live in memory only). The predicate language added facts (yields, calls,
decorator names, annotations, size, ...) whose extraction walks every expression of each own
body, where the earlier pass walked statements only. This script times, per snapshot, on
source text already in memory (file reading excluded, the same for both):

* ``parse``: ``ast.parse`` of every file alone (the floor both passes share);
* ``v5 facts``: the earlier pass (parse + statement-only walk), reproduced below verbatim
  as the baseline;
* ``facts``: today's :func:`indexer.facts_in_source`;
* ``index``: :func:`indexer.definitions_in_source` (the search index a cold build makes),
  for scale;

and prints ``facts / v5 facts`` (the overhead ratio) and the same ratio for the walks alone
(parse time subtracted). Pass costs are CPU seconds of this process, best of ``--reps``
interleaved rounds, so other jobs on a shared machine weigh less. Then it times, in this
process, the first make+reset of one instance per snapshot (memos dropped, index file cached on
disk) and the warm make+reset of every RepoScan task afterwards, against issue 11's 0.3 s rule.

    python experiments/bench_predicate_facts.py [--reps 5]

The make+reset timings are wall-clock and vary with machine load (CI shares 2 cores).
"""

from __future__ import annotations

import argparse
import ast
import gc
import statistics
import sys
import time

import pushbench
from pushbench import snapshots
from pushbench.families.reposcan import indexer
from pushbench.families.reposcan.env import _search_index, _valid_set
from pushbench.registration import list_tasks

SNAPSHOTS = ("requests", "flask", "pytest")
INSTANCE = {"requests": "requests-docstring", "flask": "flask-decorated", "pytest": "pytest-raises"}
WARM_TARGET_S = 0.3

# ----- the v5 fact pass (before the predicate language), verbatim as the baseline -------------
_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _v5_own_body(fn) -> tuple[bool, bool, bool]:
    has_assert = returns_value = raises = False
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPE_NODES):
            continue
        kind = type(node)
        if kind is ast.Assert:
            has_assert = True
        elif kind is ast.Return:
            returns_value = returns_value or node.value is not None
        elif kind is ast.Raise:
            raises = True
        for name in _BLOCKS:
            sub = getattr(node, name, None)
            if sub:
                stack.extend(sub)
    return has_assert, returns_value, raises


def v5_facts_in_source(source: str, relpath: str) -> list[tuple]:
    tree = indexer._parse(source)
    if tree is None:
        return []
    out: list[tuple] = []

    def visit(fn, qual, in_class):
        a = fn.args
        out.append(
            (
                f"{relpath}::{qual}",
                qual,
                fn.name,
                indexer._has_docstring(fn),
                *_v5_own_body(fn),
                bool(fn.decorator_list),
                tuple(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)),
            )
        )

    indexer._qualname_walk(tree, visit)
    return out


# ----- timing ------------------------------------------------------------------------------------
def bench_passes(name: str, reps: int) -> dict[str, float]:
    """CPU seconds (this process only, so other jobs on the machine weigh less) of each pass,
    the minimum over ``reps`` rounds that interleave the passes."""
    sources = list(indexer._sources(snapshots.ensure(name)))
    old = [f for rel, src in sources for f in v5_facts_in_source(src, rel)]
    new = [f for rel, src in sources for f in indexer.facts_in_source(src, rel)]
    if [o[0] for o in old] != [f.ident for f in new]:  # the same definitions, or no comparison
        raise SystemExit(f"{name}: the v5 and current fact passes disagree on the definitions")

    def each(fn):  # one file at a time, nothing kept: every pass frees its trees alike
        def run():
            for rel, src in sources:
                fn(src, rel)

        return run

    passes = {
        "parse": each(lambda src, rel: indexer._parse(src)),
        "v5": each(v5_facts_in_source),
        "facts": each(indexer.facts_in_source),
        "index": each(indexer.definitions_in_source),
    }
    best = {k: float("inf") for k in passes}
    for _ in range(reps):
        for key, fn in passes.items():
            gc.collect()
            t0 = time.process_time()
            fn()
            best[key] = min(best[key], time.process_time() - t0)
    return {"defs": float(len(new)), **best}


def _forget() -> None:
    indexer._MEMO.clear()
    indexer._FACTS.clear()
    _valid_set.cache_clear()
    _search_index.cache_clear()
    gc.collect()


def bench_first_and_warm(reps: int) -> tuple[dict[str, float], list[float]]:
    first: dict[str, float] = {}
    _forget()
    for name in SNAPSHOTS:
        t0 = time.perf_counter()
        pushbench.make(f"RepoScan-{INSTANCE[name]}-N10").reset(seed=0)
        first[name] = time.perf_counter() - t0
    warm = []
    for r in range(reps):
        for task in list_tasks("RepoScan-"):
            t0 = time.perf_counter()
            pushbench.make(task).reset(seed=r)
            warm.append(time.perf_counter() - t0)
    return first, warm


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="rounds per measurement")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be at least 1")

    print(
        f"predicate-fact pass cost (python {sys.version.split()[0]}; CPU seconds, best of "
        f"{args.reps} interleaved rounds; sources in memory)"
    )
    print(
        f"{'snapshot':9} {'defs':>5} {'parse s':>8} {'v5 facts s':>10} {'facts s':>8} "
        f"{'index s':>8} {'facts/v5':>9} {'walk/v5 walk':>12}"
    )
    total_old = total_new = 0.0
    for name in SNAPSHOTS:
        r = bench_passes(name, args.reps)
        total_old += r["v5"]
        total_new += r["facts"]
        walk_old, walk_new = r["v5"] - r["parse"], r["facts"] - r["parse"]
        walk = f"{walk_new / walk_old:.2f}" if walk_old > 0 else "-"
        print(
            f"{name:9} {int(r['defs']):5d} {r['parse']:8.3f} {r['v5']:10.3f} "
            f"{r['facts']:8.3f} {r['index']:8.3f} {r['facts'] / r['v5']:9.2f} {walk:>12}"
        )
    print(
        f"{'all':9} {'':5} {'':8} {total_old:10.3f} {total_new:8.3f} {'':8} "
        f"{total_new / total_old:9.2f}"
    )

    first, warm = bench_first_and_warm(args.reps)
    print()
    print("first make+reset per snapshot in this process (index file on disk, facts in memory):")
    for name, s in first.items():
        print(f"  {name:9} {s:.3f} s")
    med, worst = statistics.median(warm), max(warm)
    print(
        f"warm make+reset over {len(warm)} calls: median {med * 1000:.2f} ms, max "
        f"{worst * 1000:.2f} ms; target {WARM_TARGET_S * 1000:.0f} ms, ratio median "
        f"{med / WARM_TARGET_S:.4f}, max {worst / WARM_TARGET_S:.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
