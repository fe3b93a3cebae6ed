"""Check or record the golden traces of each family's current version (tests/golden/).

    python experiments/golden_traces.py              # check: exit 1 on the first difference
    python experiments/golden_traces.py --write      # record versions that have no goldens yet
    python experiments/golden_traces.py --write --family dataops --force   # overwrite (warned)

``--write`` records the goldens of every family (or each ``--family``) whose current version
(``FAMILY_VERSIONS`` in pushbench/tasks.py) has none. A version whose goldens exist is checked
instead: unchanged is fine, changed is refused (exit 2), since a change to what an agent sees is
a new version; ``--force`` overwrites them anyway, for a version not yet released. What the
goldens hold: :mod:`pushbench.runner.golden`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pushbench import tasks
from pushbench.runner import golden


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="record the goldens of versions that have none"
    )
    parser.add_argument(
        "--force", action="store_true", help="with --write: overwrite existing goldens (warned)"
    )
    parser.add_argument(
        "--family",
        action="append",
        choices=sorted(golden.PLANS),
        help="only this family (repeatable; default all)",
    )
    parser.add_argument("--root", type=Path, default=golden.ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.force and not args.write:
        parser.error("--force needs --write")
    status = 0
    for family in args.family or list(golden.PLANS):
        name = f"{family} v{tasks.family_version(family)}"
        folder = golden.golden_dir(family, root=args.root)
        if args.write and (args.force or not folder.exists()):
            if folder.exists():
                print(
                    f"warning: overwriting the goldens of {name} ({folder}); a released "
                    "version's goldens must not change: bump the version instead",
                    file=sys.stderr,
                )
            print(f"{name}: wrote {golden.write(family, root=args.root, force=True)}")
            continue
        problem = golden.compare(family, root=args.root)
        if problem is None:
            print(f"{name}: matches {folder}")
        elif args.write and folder.exists():
            print(
                f"error: {name}: refusing to overwrite its goldens (pass --force only for a "
                f"version not yet released).\n{problem}",
                file=sys.stderr,
            )
            status = 2
        else:
            print(f"{name}: {problem}", file=sys.stderr)
            status = max(status, 1)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
