"""DataOps-public work units: the three kinds of the paper on published data excerpts.

Unit kinds (``kind`` in ``list_units``/``inspect``), each on a window of rows of one committed
excerpt (:mod:`.excerpts`), cells exactly as the source writes them:

    ``field_check`` (answer)     a slice of one table and a rule over one column: missing
                                 values and their codings (``rows_missing``), values outside a
                                 range (``rows_out_of_range``), dates after a date in the file's
                                 own format (``rows_date_after``), a label that contradicts a
                                 measurement (``rows_label_conflict``). Answer: the row numbers
                                 (1 = first data row of the unit's file).
    ``consistency`` (answer)     a slice of flights and a reference table: the tail numbers no
                                 plane row resolves (``keys_unresolved``, answer: the keys) or the
                                 flights whose destination no airport row resolves
                                 (``rows_unresolved``, answer: the row numbers).
    ``metadata_repair`` (edit)   ``raw_to_clean``: rows of penguins_raw.csv and their cleaned
                                 form with planted deviations from the mapping (long species
                                 names, upper-case or empty sex codes, wrong year, island or
                                 mass); the fix is the package's own clean table.
                                 ``provenance_record``: a slice of an excerpt, its SOURCE.txt
                                 and a record.json whose licence, version, citation, row count
                                 or columns were planted wrong.

Unguessable answers: a row-number answer always holds at least two rows and a key answer is a
set of tail numbers, so no single cheap guess (an integer, ``none``) is right; edit units need
the files. Deterministic: unit ``i`` of (backlog, N) comes from ``default_rng([seed, N, i])``
(:func:`~pushbench.families.dataops.units.generate_backlog`). Expected answers and fixes live
only in :attr:`Unit.secret`.
"""

from __future__ import annotations

import csv
import io
import json
import math

from ....envs.sandbox import Workspace
from ..datasets import to_csv
from ..units import CheckResult, Unit, check_with, generate_backlog, list_text, put_files
from . import excerpts as X

KINDS = ("field_check", "metadata_repair", "consistency")
MISSING = ("NA", "")  # how the excerpts code a missing value: NA, or an empty cell
MIN_ROWS, MAX_ANSWER = 2, 40  # row answers hold 2..40 rows (key answers 1..40 keys)
_ATTEMPTS = 400

FIELD_RULES = (
    ("penguins_raw.csv", "rows_missing", {"column": "Sex"}),
    ("penguins_raw.csv", "rows_missing", {"column": "Delta 15 N (o/oo)"}),
    ("penguins_raw.csv", "rows_out_of_range", {"column": "Body Mass (g)"}),
    ("penguins_raw.csv", "rows_out_of_range", {"column": "Culmen Length (mm)"}),
    ("penguins_raw.csv", "rows_date_after", {"column": "Date Egg", "format": "YYYY-MM-DD"}),
    ("penguins.csv", "rows_out_of_range", {"column": "flipper_length_mm"}),
    ("flights.csv", "rows_out_of_range", {"column": "dep_delay"}),
    ("seattle_weather.csv", "rows_out_of_range", {"column": "wind"}),
    ("seattle_weather.csv", "rows_out_of_range", {"column": "temp_max"}),
    (
        "seattle_weather.csv",
        "rows_label_conflict",
        {"column": "weather", "equals": "sun", "number": "precipitation", "cmp": ">", "value": 0},
    ),
    (
        "seattle_weather.csv",
        "rows_label_conflict",
        {"column": "weather", "equals": "rain", "number": "precipitation", "cmp": "<=", "value": 0},
    ),
)
CLEAN_HEADER = ("species", "island", "bill_length_mm", "body_mass_g", "sex", "year")
RAW_COLUMNS = (
    "Sample Number",
    "Species",
    "Island",
    "Individual ID",
    "Date Egg",
    "Culmen Length (mm)",
    "Body Mass (g)",
    "Sex",
)
MAPPING = {
    "species": "the first word of Species",
    "island": "Island",
    "bill_length_mm": "Culmen Length (mm)",
    "body_mass_g": "Body Mass (g)",
    "sex": "Sex in lower case (NA stays NA)",
    "year": "the year of Date Egg",
}
RECORD_KEYS = ("dataset", "package", "version", "licence", "citation", "rows", "columns")
WRONG_LICENCES = ("CC-BY-4.0", "MIT", "CC-BY-NC-4.0", "ODbL-1.0", "proprietary")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _rows(pred, rows) -> list[int]:
    return [n for n, r in enumerate(rows, 1) if pred(r)]


def evaluate(rule: dict, header, rows) -> list[int]:
    """The 1-based rows of ``rows`` that ``rule`` selects (the field-check semantics)."""
    c = list(header).index(rule["column"])
    op = rule["op"]
    if op == "rows_missing":
        return _rows(lambda r: r[c] in rule["codes"], rows)
    if op == "rows_out_of_range":
        return _rows(
            lambda r: (
                r[c] not in rule["codes"]
                and _number(r[c]) is not None
                and not rule["min"] <= _number(r[c]) <= rule["max"]
            ),
            rows,
        )
    if op == "rows_date_after":  # both formats put year, month, day in order: compare digits
        after = rule["after"].replace("/", "-")
        return _rows(lambda r: r[c].replace("/", "-") > after, rows)
    if op == "rows_label_conflict":
        m = list(header).index(rule["number"])
        over = (
            (lambda v: v > rule["value"]) if rule["cmp"] == ">" else (lambda v: v <= rule["value"])
        )
        return _rows(
            lambda r: r[c] == rule["equals"] and _number(r[m]) is not None and over(_number(r[m])),
            rows,
        )
    raise ValueError(f"unknown field rule {op!r}")


def _window(rng, table: X.Table, lo: int, hi: int) -> tuple[int, list]:
    n = int(rng.integers(lo, hi + 1))
    start = int(rng.integers(0, len(table.rows) - n + 1))
    return start, [list(r) for r in table.rows[start : start + n]]


def _describe(rule: dict, path: str) -> str:
    col, op = rule["column"], rule["op"]
    if op == "rows_missing":
        what = f"have a missing {col} (missing is coded as NA or an empty cell)"
    elif op == "rows_out_of_range":
        what = (
            f"have a {col} outside [{rule['min']}, {rule['max']}] (a missing value, "
            "coded NA or empty, is not out of range)"
        )
    elif op == "rows_date_after":
        what = f"have a {col} (written {rule['format']}) later than {rule['after']}"
    else:
        what = f"have {col} = {rule['equals']} while {rule['number']} {rule['cmp']} {rule['value']}"
    return (
        f"Which data rows of {path} {what}? Answer their row numbers (1 = the first row "
        "after the header), comma-separated in ascending order (e.g. 4,17,102)."
    )


def _field_rule(rng, op: str, params: dict, header, rows) -> dict:
    rule = {"op": op, **params}
    c = list(header).index(params["column"])
    if op in ("rows_missing", "rows_out_of_range"):
        rule["codes"] = list(MISSING)
    if op == "rows_out_of_range":
        vals = sorted(v for r in rows if r[c] not in MISSING and (v := _number(r[c])) is not None)
        if vals:
            q_lo, q_hi = float(rng.uniform(0.03, 0.15)), float(rng.uniform(0.85, 0.97))
            rule["min"] = math.floor(vals[int(q_lo * (len(vals) - 1))])
            rule["max"] = math.ceil(vals[int(q_hi * (len(vals) - 1))])
        else:
            rule.update(min=0, max=0)
    if op == "rows_date_after":
        dates = sorted({r[c] for r in rows})
        rule["after"] = dates[
            int(rng.integers(len(dates) // 3, max(len(dates) // 3 + 1, 2 * len(dates) // 3)))
        ]
    return rule


def _field_unit(rng, uid, cfg, ws) -> Unit:
    for attempt in range(_ATTEMPTS):
        if attempt % 50 == 0:  # a rule first, then windows until one has an answer of 2..40
            name, op, params = FIELD_RULES[int(rng.integers(len(FIELD_RULES)))]
            t = X.table(name)
        _, rows = _window(rng, t, 40, 120)
        rule = _field_rule(rng, op, params, t.header, rows)
        answer = evaluate(rule, t.header, rows)
        if MIN_ROWS <= len(answer) <= MAX_ANSWER:
            break
    else:  # pragma: no cover - the excerpts always allow a window (tests build every backlog)
        raise RuntimeError("no field-check window found")
    [path] = put_files(ws, uid, {name: to_csv(list(t.header), rows)})
    return Unit(
        uid,
        "field_check",
        f"{name}: {rule['column']} {op.replace('_', ' ')}",
        _describe(rule, path),
        [path],
        [{**rule, "file": path}],
        "list",
        {"answer": list_text(answer)},
    )


def _consistency_unit(rng, uid, cfg, ws) -> Unit:
    flights, planes, airports = (X.table(n) for n in ("flights.csv", "planes.csv", "airports.csv"))
    tail, dest = flights.column("tailnum"), flights.column("dest")
    by_key = rng.random() < 0.5
    for _ in range(_ATTEMPTS):
        _, rows = _window(rng, flights, 40, 120)
        if by_key:
            known = {r[0] for r in planes.rows}
            answer = sorted(
                {r[tail] for r in rows if r[tail] not in MISSING and r[tail] not in known}
            )
            ok = 1 <= len(answer) <= MAX_ANSWER
        else:
            known = {r[0] for r in airports.rows}
            answer = [n for n, r in enumerate(rows, 1) if r[dest] not in known]
            ok = MIN_ROWS <= len(answer) <= MAX_ANSWER
        if ok:
            break
    else:  # pragma: no cover
        raise RuntimeError("no consistency window found")
    if by_key:  # the planes of this slice that do resolve, and some others, in excerpt order
        used = {r[tail] for r in rows}
        others = [i for i, r in enumerate(planes.rows) if r[0] not in used]
        extra = set(rng.choice(others, int(rng.integers(20, 61)), replace=False).tolist())
        ref = [list(r) for i, r in enumerate(planes.rows) if r[0] in used or i in extra]
        files = put_files(
            ws,
            uid,
            {
                "flights.csv": to_csv(list(flights.header), rows),
                "planes.csv": to_csv(list(planes.header), ref),
            },
        )
        rule = {
            "op": "keys_unresolved",
            "file": files[0],
            "column": "tailnum",
            "ref_file": files[1],
            "ref_column": "tailnum",
            "codes": list(MISSING),
        }
        task = (
            f"Each flight in {files[0]} names its aircraft by tailnum; {files[1]} is the "
            "aircraft register. Which tail numbers of the flights have no row in the "
            "register (a missing tailnum, coded NA or empty, does not count)? Answer the "
            "distinct tail numbers, comma-separated in ascending order (e.g. "
            "N101AA,N202BB)."
        )
        title = "flights.tailnum vs planes register"
    else:
        files = put_files(
            ws,
            uid,
            {
                "flights.csv": to_csv(list(flights.header), rows),
                "airports.csv": to_csv(list(airports.header), [list(r) for r in airports.rows]),
            },
        )
        rule = {
            "op": "rows_unresolved",
            "file": files[0],
            "column": "dest",
            "ref_file": files[1],
            "ref_column": "faa",
        }
        task = (
            f"Each flight in {files[0]} names its destination airport by its FAA code "
            f"(dest); {files[1]} lists airports by faa. Which data rows of {files[0]} have "
            "a dest that no airport row resolves? Answer their row numbers (1 = the first "
            "row after the header), comma-separated in ascending order (e.g. 4,17,102)."
        )
        title = "flights.dest vs airports"
    return Unit(
        uid, "consistency", title, task, files, [rule], "list", {"answer": list_text(answer)}
    )


def _metadata_unit(rng, uid, cfg, ws) -> Unit:
    return (_clean_unit if rng.random() < 0.5 else _record_unit)(rng, uid, ws)


def _clean_unit(rng, uid, ws) -> Unit:
    raw, clean = X.table("penguins_raw.csv"), X.table("penguins.csv")
    start, window = _window(rng, raw, 12, 30)  # the excerpts keep the same rows in order
    rows_raw = [[r[raw.column(c)] for c in RAW_COLUMNS] for r in window]
    fixed = [
        [r[clean.column(c)] for c in CLEAN_HEADER] for r in clean.rows[start : start + len(window)]
    ]
    shown = [list(r) for r in fixed]
    islands = sorted({r[clean.column("island")] for r in clean.rows})
    k = int(rng.integers(1, 4))
    for i in sorted(rng.choice(len(shown), k, replace=False).tolist()):
        raw_row, row = rows_raw[i], shown[i]
        kinds = ["species", "year", "island", "mass"] + (
            ["sex"] if row[4] != "NA" else ["sex_empty"]
        )
        kind = kinds[int(rng.integers(len(kinds)))]
        if kind == "species":
            row[0] = raw_row[1]
        elif kind == "sex":
            row[4] = raw_row[7]  # the raw upper-case code
        elif kind == "sex_empty":
            row[4] = ""
        elif kind == "year":
            row[5] = str(int(row[5]) + int(rng.choice([-1, 1])))
        elif kind == "island":
            row[1] = [x for x in islands if x != row[1]][int(rng.integers(len(islands) - 1))]
        else:
            row[3] = "NA" if row[3] != "NA" else "3700"
    files = put_files(
        ws,
        uid,
        {
            "raw.csv": to_csv(list(RAW_COLUMNS), rows_raw),
            "clean.csv": to_csv(list(CLEAN_HEADER), shown),
        },
    )
    task = (
        f"{files[1]} is the cleaned form of {files[0]} (the Palmer penguins raw-to-clean "
        "mapping), one row per raw row in the same order, but some rows do not follow the "
        "mapping below. Edit the wrong cells of " + files[1] + " so that every row follows "
        "it; keep the header and row order. Then run the verifier and submit."
    )
    rules: list[dict]
    rules = [
        {
            "op": "raw_to_clean",
            "rule": "parses",
            "raw": files[0],
            "clean": files[1],
            "text": f"{files[1]} parses as CSV",
        },
        {"rule": "header", "text": "header is " + ",".join(CLEAN_HEADER)},
        {"rule": "rows", "text": f"one row per data row of {files[0]}, same order"},
        {
            "rule": "mapping",
            "mapping": dict(MAPPING),
            "text": "every cell follows the mapping from its raw row",
        },
    ]
    return Unit(
        uid,
        "metadata_repair",
        "penguins raw-to-clean mapping",
        task,
        files,
        rules,
        None,
        {
            "edit": "raw_to_clean",
            "target": files[1],
            "expected": fixed,
            "fixed_text": to_csv(list(CLEAN_HEADER), fixed),
        },
    )


def _record_unit(rng, uid, ws) -> Unit:
    names = sorted(X.manifest()["excerpts"])
    name = names[int(rng.integers(len(names)))]
    t = X.table(name)
    _, rows = _window(rng, t, 15, 60)
    entry = X.manifest()["excerpts"][name]
    expected = {
        "dataset": name,
        "package": entry["package"],
        "version": str(entry["version"]),
        "licence": entry["licence"],
        "citation": entry["citation"],
        "rows": len(rows),
        "columns": list(t.header),
    }
    shown = json.loads(json.dumps(expected))
    for key in sorted(rng.choice(5, int(rng.integers(1, 4)), replace=False).tolist()):
        field = ("licence", "version", "rows", "columns", "citation")[key]
        if field == "licence":
            wrong = [x for x in WRONG_LICENCES if x != shown["licence"]]
            shown["licence"] = wrong[int(rng.integers(len(wrong)))]
        elif field == "version":
            shown["version"] = f"{int(rng.integers(1, 4))}.{int(rng.integers(0, 10))}.0"
        elif field == "rows":
            shown["rows"] = len(rows) + int(rng.choice([-1, 1])) * int(rng.integers(1, 6))
        elif field == "columns":
            shown["columns"].pop(int(rng.integers(len(shown["columns"]))))
        else:
            shown["citation"] = shown["citation"].split(". ")[0] + "."
    files = put_files(
        ws,
        uid,
        {
            name: to_csv(list(t.header), rows),
            "SOURCE.txt": X.source_text(name),
            "record.json": json.dumps(shown, indent=2) + "\n",
        },
    )
    data, source, target = files
    task = (
        f"{target} is the provenance record of {data}; some of its fields disagree with "
        f"{source} (the source's own provenance) or with {data} itself. Edit {target} so "
        "that it parses and every rule below holds. Then run the verifier and submit."
    )
    rules = [
        {
            "op": "provenance_record",
            "rule": "parses",
            "record": target,
            "data": data,
            "source": source,
            "text": f"{target} parses as a JSON object with exactly the "
            "keys " + ",".join(RECORD_KEYS),
        }
    ]
    rules += [
        {"rule": k, "field": k, "equals": f"{source}: {k}"}
        for k in ("dataset", "package", "version", "licence", "citation")
    ]
    rules += [
        {
            "rule": "rows",
            "field": "rows",
            "equals": f"the number of data rows of {data} (header excluded), an integer",
        },
        {
            "rule": "columns",
            "field": "columns",
            "equals": f"the header of {data}: a list of the column names in order",
        },
    ]
    return Unit(
        uid,
        "metadata_repair",
        f"{name}: repair provenance record",
        task,
        files,
        rules,
        None,
        {
            "edit": "provenance_record",
            "target": target,
            "expected": expected,
            "fixed_text": json.dumps(expected, indent=2) + "\n",
        },
    )


_BUILDERS = {
    "field_check": _field_unit,
    "metadata_repair": _metadata_unit,
    "consistency": _consistency_unit,
}


def generate(cfg: dict, target: int, ws: Workspace) -> list[Unit]:
    """Write the backlog's files into ``ws`` and return its units (deterministic)."""
    return generate_backlog(cfg, target, ws, KINDS, _BUILDERS)


def _check_clean(text: str, expected: list[list[str]]) -> CheckResult:
    try:
        got = [r for r in csv.reader(io.StringIO(text)) if r]
    except csv.Error as e:
        return CheckResult(False, "parses", f"the file is not valid CSV ({str(e)[:200]})")
    if not got or tuple(c.strip() for c in got[0]) != CLEAN_HEADER:
        return CheckResult(False, "header", "the header is not " + ",".join(CLEAN_HEADER))
    if len(got) - 1 != len(expected):
        return CheckResult(False, "rows", "the file does not have one row per raw row")
    if any([c.strip() for c in g] != e for g, e in zip(got[1:], expected, strict=True)):
        return CheckResult(False, "mapping", "at least one row does not follow the mapping")
    return CheckResult(True)


def _check_record(text: str, expected: dict) -> CheckResult:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        return CheckResult(False, "parses", f"the file is not valid JSON ({str(e)[:200]})")
    if not isinstance(doc, dict) or sorted(doc) != sorted(RECORD_KEYS):
        return CheckResult(
            False,
            "parses",
            "the record is not a JSON object with exactly the keys " + ",".join(RECORD_KEYS),
        )
    for key in RECORD_KEYS:
        value = doc[key]
        if type(value) is not type(expected[key]) or value != expected[key]:
            return CheckResult(False, key, f"record field {key!r} does not match its source")
    return CheckResult(True)


def check(unit: Unit, ws: Workspace, answer=None) -> CheckResult:
    """Run ``unit``'s checker now: answers against the secret, edits against the workspace."""
    return check_with(unit, ws, answer, _check_edit)


def _check_edit(unit: Unit, text: str) -> CheckResult:
    if unit.secret["edit"] == "raw_to_clean":
        return _check_clean(text, unit.secret["expected"])
    return _check_record(text, unit.secret["expected"])


def reference_solution(unit: Unit, ws: Workspace):
    """Solve ``unit`` from its secret (tests only): write the fix, return the answer or None."""
    if unit.answer_type is not None:
        return unit.secret["answer"]
    ws.write_text(unit.secret["target"], unit.secret["fixed_text"])
    return None
