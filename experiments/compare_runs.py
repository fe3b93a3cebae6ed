"""Are two run folders of the same experiment the same results? (behaviour-preservation check)

    python experiments/compare_runs.py BEFORE AFTER [--no-traces] [--family F]

Checks, and prints every difference it finds:

* ``episodes.jsonl``: the same episode keys on both sides, and per key every field of the line
  identical (``metrics`` compared field by field, so a difference names the metric);
* ``errors.jsonl``: the same keys failed on both sides;
* ``summary.csv`` and ``paired_deltas.csv``: byte-identical;
* ``traces/<key>.json.gz`` (unless ``--no-traces``): the full records (calls and controller
  steps) decode to the same JSON.

``--family F`` compares only family ``F``: its episode lines and traces, and the header and
the rows of ``F`` in each CSV (for an experiment that gained another family's rows, e.g. the
DataOps ablation with DataOps-public; paired deltas are Holm-adjusted per family).

Wall-clock time lives only in ``manifest.json``, which is not compared. Exit status: 0 when
everything matches, 1 on any difference, 2 when a folder or file is missing or unreadable.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
from pathlib import Path

CSV_FILES = ("summary.csv", "paired_deltas.csv")
MAX_SHOWN = 20  # differences printed per check (the count is always printed)


def _lines(path: Path, family: str | None = None) -> dict[str, dict]:
    """``key -> line`` of a JSONL file (of ``family`` only, if given); a duplicate key or
    unreadable line is an error."""
    out: dict[str, dict] = {}
    if not path.exists():
        return out
    for i, raw in enumerate(path.read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        line = json.loads(raw)
        key = line.get("key")
        if key in out:
            raise ValueError(f"{path}:{i}: duplicate key {key}")
        if family is None or line.get("family", family) == family:
            out[key] = line
    return out


def _field_diffs(a: dict, b: dict) -> list[str]:
    """Names (``metrics.x`` for metrics) of the fields whose values differ."""
    diffs = []
    for field in sorted(set(a) | set(b)):
        va, vb = a.get(field, "<missing>"), b.get(field, "<missing>")
        if field == "metrics" and isinstance(va, dict) and isinstance(vb, dict):
            diffs += [
                f"metrics.{m}: {va.get(m, '<missing>')!r} != {vb.get(m, '<missing>')!r}"
                for m in sorted(set(va) | set(vb))
                if va.get(m, "<missing>") != vb.get(m, "<missing>")
            ]
        elif va != vb:
            diffs.append(f"{field}: {json.dumps(va)[:120]} != {json.dumps(vb)[:120]}")
    return diffs


def _report(title: str, problems: list[str]) -> bool:
    if not problems:
        print(f"  same   {title}")
        return True
    print(f"  DIFFER {title}: {len(problems)} difference(s)")
    for p in problems[:MAX_SHOWN]:
        print(f"           {p}")
    if len(problems) > MAX_SHOWN:
        print(f"           ... and {len(problems) - MAX_SHOWN} more")
    return False


def _csv_rows(data: bytes, family: str | None) -> bytes:
    """The header and the rows of ``family`` (all rows if None) of a CSV with a family column."""
    if family is None:
        return data
    lines = data.decode().splitlines(keepends=True)
    if not lines:
        return data
    col = next(csv.reader([lines[0]])).index("family")
    return b"".join(
        x.encode() for i, x in enumerate(lines) if i == 0 or next(csv.reader([x]))[col] == family
    )


def compare(before: Path, after: Path, traces: bool = True, family: str | None = None) -> bool:
    """Print the comparison of run folders ``before`` and ``after`` (only ``family``'s lines
    and rows if given); ``True`` if identical."""
    ok = True
    ep_a = _lines(before / "episodes.jsonl", family)
    ep_b = _lines(after / "episodes.jsonl", family)
    problems = [f"key {k} only in BEFORE" for k in sorted(set(ep_a) - set(ep_b))]
    problems += [f"key {k} only in AFTER" for k in sorted(set(ep_b) - set(ep_a))]
    for key in sorted(set(ep_a) & set(ep_b)):
        problems += [f"key {key}: {d}" for d in _field_diffs(ep_a[key], ep_b[key])]
    ok &= _report(
        f"episodes.jsonl ({len(ep_a)} vs {len(ep_b)} episodes, every field per key)", problems
    )

    err_a, err_b = _lines(before / "errors.jsonl", family), _lines(after / "errors.jsonl", family)
    problems = [
        f"key {k} failed only in {side}"
        for side, ks in (("BEFORE", set(err_a) - set(err_b)), ("AFTER", set(err_b) - set(err_a)))
        for k in sorted(ks)
    ]
    ok &= _report(f"errors.jsonl ({len(err_a)} vs {len(err_b)} failed episodes)", problems)

    for name in CSV_FILES:
        a, b = (_csv_rows((d / name).read_bytes(), family) for d in (before, after))
        problems = []
        if a != b:
            la, lb = a.decode().splitlines(), b.decode().splitlines()
            # strict=False: the line counts may differ; that is reported below
            problems = [
                f"line {i + 1}: {x!r} != {y!r}"
                for i, (x, y) in enumerate(zip(la, lb, strict=False))
                if x != y
            ]
            if len(la) != len(lb):
                problems.append(f"{len(la)} vs {len(lb)} lines")
        ok &= _report(f"{name} (byte-identical, {len(a)} bytes)", problems)

    if traces:
        problems = []
        for key in sorted(set(ep_a) & set(ep_b)):
            ta, tb = (before / "traces" / f"{key}.json.gz"), (after / "traces" / f"{key}.json.gz")
            if not ta.exists() or not tb.exists():
                side = "BEFORE" if not ta.exists() else "AFTER"
                problems.append(f"key {key}: trace missing in {side}")
                continue
            ra, rb = (json.loads(gzip.decompress(t.read_bytes())) for t in (ta, tb))
            problems += [f"key {key}: {d}" for d in _field_diffs(ra, rb)]
        ok &= _report("traces/*.json.gz (full records: calls and controller steps)", problems)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--no-traces", action="store_true", help="skip comparing trace files")
    parser.add_argument("--family", help="compare only this family's lines, traces and rows")
    args = parser.parse_args(argv)
    for d in (args.before, args.after):
        if not (d / "episodes.jsonl").is_file():
            print(f"error: {d} is not a run folder (no episodes.jsonl)", file=sys.stderr)
            return 2
    print(f"comparing {args.before} (BEFORE) with {args.after} (AFTER)")
    try:
        same = compare(args.before, args.after, traces=not args.no_traces, family=args.family)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("IDENTICAL" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
