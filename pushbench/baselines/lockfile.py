"""Derive a pip constraints file from a ``uv.lock`` (how ``letta-constraints.txt`` was made).

Letta 0.16.8 declares about seventy unpinned dependencies; installed without its lock it does
not start (``ImportError: eval_type_backport`` from ``mcp`` under pydantic 2.14, issue 29).
The lock lives only in the archived server repository (branch ``archive`` of
``letta-ai/letta``, not on PyPI), so the versions are copied from it once into a committed
constraints file::

    git show archive:uv.lock > uv.lock
    python -m pushbench.baselines.lockfile uv.lock --skip letta \\
        > pushbench/baselines/letta-constraints.txt

Contract of :func:`constraints`: one ``name==version`` line per registry package of the lock,
sorted by name; packages from a path or git source (the project itself) and the names in
``skip`` are left out. A name locked at two versions (uv splits by platform or Python) is a
:class:`ValueError`: a constraints file cannot say both, and Letta's lock has none.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def constraints(lock_text: str, skip: tuple[str, ...] = ()) -> list[str]:
    data = tomllib.loads(lock_text)
    skipped = {_norm(s) for s in skip}
    pins: dict[str, str] = {}
    for pkg in data.get("package", []):
        name, version = pkg.get("name"), pkg.get("version")
        if not name or not version or "registry" not in (pkg.get("source") or {}):
            continue
        key = _norm(name)
        if key in skipped:
            continue
        if pins.get(key, version) != version:
            raise ValueError(f"{name} is locked at {pins[key]} and {version}")
        pins[key] = version
    return [f"{n}=={v}" for n, v in sorted(pins.items())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lock")
    ap.add_argument("--skip", action="append", default=[])
    args = ap.parse_args(argv)
    with open(args.lock, encoding="utf-8") as fh:
        lines = constraints(fh.read(), tuple(args.skip))
    sys.stdout.write(
        "# Derived by `python -m pushbench.baselines.lockfile` from the uv.lock of "
        "letta-ai/letta, branch archive\n# (letta 0.16.8); see lockfile.py. pip "
        "constraints: they cap versions, they install nothing.\n"
    )
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
