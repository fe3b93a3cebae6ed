"""Find SWE-lite unit candidates: mutate functions of one source file, run test modules, report.

A maintainer's tool for extending ``tasks/swelite/units.yaml``: for every function of ``--file``
(or the ``--functions`` given) and every operator in ``--ops`` (first target, ``k = 0``), apply
the mutation to a scratch copy of the snapshot, run ``--tests`` in the snapshot's test venv and
print which baseline-passing tests fail. Pick candidates that break a few tests, write the
issue text from the failures, and let ``pushbench swelite build`` validate them.

    python experiments/swelite_discover.py requests --file src/requests/utils.py \
        --tests tests/test_utils.py --ops compare_negate,int_delta,negate_test
"""

from __future__ import annotations

import argparse
import ast
import shutil
import tempfile
from pathlib import Path

from pushbench import snapshots
from pushbench.families.swelite import mutate, runner, venvs


def functions(source: str) -> list[str]:
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(prefix + child.name)
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    walk(ast.parse(source), "")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("snapshot")
    ap.add_argument("--file", required=True)
    ap.add_argument("--tests", required=True, help="comma-separated test files/node ids")
    ap.add_argument("--ops", default="compare_negate,negate_test,int_delta,boolop_swap")
    ap.add_argument("--functions", default="", help="comma-separated qualified names")
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    spec = venvs.spec(a.snapshot)
    py = venvs.ensure(a.snapshot)
    tests = a.tests.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        shutil.copytree(snapshots.ensure(a.snapshot), root, ignore=shutil.ignore_patterns(".git"))
        base = runner.run_pytest(py, root, spec.source_dirs, tests, timeout=a.timeout)
        ok = {n for n, o in base.outcomes.items() if o == "passed"}
        print(f"baseline: {len(ok)} passing of {len(base.outcomes)} in {base.seconds:.1f}s")
        path = root / a.file
        source = path.read_text()
        names = a.functions.split(",") if a.functions else functions(source)
        for fn in names:
            for op in a.ops.split(","):
                try:
                    ap_ = mutate.apply(source, mutate.Mutation(a.file, fn, op, 0))
                except mutate.MutationError:
                    continue
                path.write_text(ap_.source)
                r = runner.run_pytest(py, root, spec.source_dirs, tests, timeout=a.timeout)
                path.write_text(source)
                broken = sorted(n for n in ok if r.outcomes.get(n) != "passed")
                if broken:
                    print(
                        f"{fn:40s} {op:16s} {len(broken):3d} broken {r.seconds:5.1f}s  "
                        f"{' | '.join(broken[:3])}"
                    )
                    print(f"{'':40s}   changed: {ap_.changed_lines[:2]}")


if __name__ == "__main__":
    main()
