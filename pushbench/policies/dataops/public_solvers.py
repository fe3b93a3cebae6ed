"""How an offline agent solves a DataOps-public unit from what it observed (no env internals).

The counterpart of :mod:`.solvers` for the public-data family
(:mod:`pushbench.families.dataops.public`): input is the unit as ``inspect`` showed it and the
texts of its files as ``read_file`` returned them; output ``{"answer": text}`` or
``{"write": (path, content)}``. Written from the rule data and task texts the agent sees,
independently of the family's generators and checkers. :func:`handles` says whether a unit is
one of this family's (its first rule's ``op``); :func:`perturb` makes a plausible mistake.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

FIELD_OPS = frozenset(
    {"rows_missing", "rows_out_of_range", "rows_date_after", "rows_label_conflict"}
)
OPS = FIELD_OPS | {"keys_unresolved", "rows_unresolved", "raw_to_clean", "provenance_record"}


def handles(unit: dict) -> bool:
    rules = unit.get("rules") or [{}]
    return rules[0].get("op") in OPS


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    return rows[0], rows[1:]


def _float(v: str):
    try:
        return float(v)
    except ValueError:
        return None


def _numbers(picked) -> str:
    return ",".join(str(n) for n in picked) or "none"


def field_answer(rule: dict, text: str) -> str:
    header, rows = _table(text)
    c, op = header.index(rule["column"]), rule["op"]
    if op == "rows_missing":
        return _numbers(n for n, r in enumerate(rows, 1) if r[c] in rule["codes"])
    if op == "rows_out_of_range":
        return _numbers(
            n
            for n, r in enumerate(rows, 1)
            if r[c] not in rule["codes"]
            and _float(r[c]) is not None
            and (_float(r[c]) < rule["min"] or _float(r[c]) > rule["max"])
        )
    if op == "rows_date_after":
        sep = "/" if "/" in rule["format"] else "-"
        after = tuple(int(p) for p in rule["after"].split(sep))
        return _numbers(
            n for n, r in enumerate(rows, 1) if tuple(int(p) for p in r[c].split(sep)) > after
        )
    m = header.index(rule["number"])
    cmp = (lambda v: v > rule["value"]) if rule["cmp"] == ">" else (lambda v: v <= rule["value"])
    return _numbers(
        n
        for n, r in enumerate(rows, 1)
        if r[c] == rule["equals"] and _float(r[m]) is not None and cmp(_float(r[m]))
    )


def consistency_answer(rule: dict, files: dict[str, str]) -> str:
    header, rows = _table(files[rule["file"]])
    ref_header, ref_rows = _table(files[rule["ref_file"]])
    known = {r[ref_header.index(rule["ref_column"])] for r in ref_rows}
    c = header.index(rule["column"])
    if rule["op"] == "keys_unresolved":
        keys = sorted({r[c] for r in rows if r[c] not in rule["codes"] and r[c] not in known})
        return ",".join(keys) or "none"
    return _numbers(n for n, r in enumerate(rows, 1) if r[c] not in known)


def clean_fix(unit: dict, files: dict[str, str], slip: bool = False) -> tuple[str, str]:
    """Map every raw row to its clean row (``slip``: forget to lower-case the sex codes)."""
    first = unit["rules"][0]
    header, rows = _table(files[first["raw"]])
    col = {h: i for i, h in enumerate(header)}
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["species", "island", "bill_length_mm", "body_mass_g", "sex", "year"])
    for r in rows:
        sex = r[col["Sex"]] if slip or r[col["Sex"]] == "NA" else r[col["Sex"]].lower()
        w.writerow(
            [
                r[col["Species"]].split()[0],
                r[col["Island"]],
                r[col["Culmen Length (mm)"]],
                r[col["Body Mass (g)"]],
                sex,
                r[col["Date Egg"]][:4],
            ]
        )
    return first["clean"], out.getvalue()


def record_fix(unit: dict, files: dict[str, str], slip: bool = False) -> tuple[str, str]:
    """Rebuild the record from SOURCE.txt and the data file (``slip``: count the header)."""
    first = unit["rules"][0]
    source: dict[str, str] = {}
    for line in files[first["source"]].splitlines():
        key, _, value = line.partition(": ")
        source.setdefault(key.strip(), value)
    header, rows = _table(files[first["data"]])
    doc: dict[str, Any]
    doc = {k: source[k] for k in ("dataset", "package", "version", "licence", "citation")}
    doc.update(rows=len(rows) + (1 if slip else 0), columns=header)
    return first["record"], json.dumps(doc, indent=2) + "\n"


def solve(unit: dict, files: dict[str, str]) -> dict:
    """The agent's solution of ``unit``: ``{"answer": v}`` or ``{"write": (path, text)}``."""
    rule = unit["rules"][0]
    if rule["op"] in FIELD_OPS:
        return {"answer": field_answer(rule, files[rule["file"]])}
    if rule["op"] in ("keys_unresolved", "rows_unresolved"):
        return {"answer": consistency_answer(rule, files)}
    if rule["op"] == "raw_to_clean":
        return {"write": clean_fix(unit, files)}
    return {"write": record_fix(unit, files)}


def perturb(unit: dict, files: dict[str, str], rng, wrong_list) -> dict:
    """A plausible wrong solution: a wrong row or key list (``wrong_list(items, files, rng)``,
    the synthetic family's slips), upper-case sex codes kept, or the header counted as a row."""
    good = solve(unit, files)
    if "answer" in good:
        v = good["answer"]
        return {"answer": wrong_list([] if v == "none" else v.split(","), files, rng)}
    if unit["rules"][0]["op"] == "raw_to_clean":
        return {"write": clean_fix(unit, files, slip=True)}
    return {"write": record_fix(unit, files, slip=True)}
