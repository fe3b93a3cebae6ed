"""Realistic CSV tables with planted defects, and the field rules the CSV units ask about.

Tables (all values are strings, as written): ``readings`` (sensor readings of weather stations),
``inventory`` (stock per warehouse) and ``station_log`` (station events with start/end times).
Every generator takes a :class:`numpy.random.Generator` and plants a random number of defects of
the kinds its rules ask about, so answers are rarely zero and differ between units.

A rule is plain data (shown to the agent); :func:`evaluate` computes its answer from the rows:
the row numbers of the data rows it selects (``rows_*`` rules), or a value (``top_value``).
Which rows is the question, not how many: a count would be a small number a guesser finds by
trying 0, 1, 2, ... through the verifier, while a set of row numbers out of 40-160 rows cannot
be guessed within any budget. Definitions (stated to the agent in :func:`describe`):

* a *number* is ``-?digits`` optionally followed by ``.digits`` (nothing else, no spaces);
* a *timestamp* is ``YYYY-MM-DDTHH:MM``;
* rows are data rows (the header does not count), numbered from 1 in file order.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from datetime import datetime, timedelta

import numpy as np

NUMBER = re.compile(r"-?\d+(\.\d+)?")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
_WORDS = (
    "bolt",
    "washer",
    "bracket",
    "hinge",
    "valve",
    "gasket",
    "flange",
    "spring",
    "clamp",
    "bearing",
    "sensor",
    "fuse",
    "relay",
    "cable",
    "filter",
    "pump",
    "seal",
    "nozzle",
)
_OPERATORS = ("akim", "bea", "chen", "dara", "eli", "femi", "gus", "hana", "ivo", "jo")


def _pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(len(seq)))]


def _defect_rows(rng: np.random.Generator, n: int, k: int) -> list[int]:
    return sorted(int(i) for i in rng.choice(np.arange(1, n), size=min(k, n - 1), replace=False))


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M")


def readings(rng: np.random.Generator, n: int):
    stations = [f"ST-{int(s):02d}" for s in rng.choice(np.arange(1, 40), 5, replace=False)]
    start = datetime(2024, 1, 1) + timedelta(days=int(rng.integers(0, 300)))
    rows = []
    for i in range(n):
        st = _pick(rng, stations)
        rows.append(
            [
                f"R{10000 + i}",
                st,
                _ts(start + timedelta(minutes=10 * i)),
                f"{rng.normal(12, 6):.1f}",
                f"{np.clip(rng.normal(65, 15), 0, 100):.1f}",
                f"{rng.normal(1013, 8):.1f}",
            ]
        )
    for i in _defect_rows(rng, n, int(rng.integers(2, 7))):  # humidity out of range
        rows[i][4] = _pick(rng, [f"{rng.uniform(100.5, 140):.1f}", f"-{rng.uniform(1, 9):.1f}"])
    for i in _defect_rows(rng, n, int(rng.integers(1, 6))):  # broken temperature
        rows[i][3] = _pick(rng, ["", "NaN", "err", f"{rng.uniform(60, 99):.1f}", "12,5"])
    for i in _defect_rows(rng, n, int(rng.integers(1, 5))):  # duplicated id
        rows[i][0] = rows[int(rng.integers(0, i))][0]
    for i in _defect_rows(rng, n, int(rng.integers(1, 5))):  # malformed timestamp
        t = datetime.fromisoformat(rows[i][2])
        rows[i][2] = _pick(
            rng,
            [
                t.strftime("%d/%m/%Y %H:%M"),
                t.strftime("%Y-%m-%d %H:%M"),
                t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "",
            ],
        )
    header = ["reading_id", "station", "timestamp", "temperature_c", "humidity_pct", "pressure_hpa"]
    rules = [
        {"op": "rows_invalid_number", "column": "humidity_pct", "min": 0, "max": 100},
        {"op": "rows_invalid_number", "column": "temperature_c", "min": -40, "max": 50},
        {"op": "rows_duplicate", "columns": ["reading_id"]},
        {"op": "rows_pattern_mismatch", "column": "timestamp", "pattern": TIMESTAMP.pattern},
    ]
    return header, rows, rules


def inventory(rng: np.random.Generator, n: int):
    houses = ["WH-N", "WH-S", "WH-E", "WH-W"][: int(rng.integers(2, 5))]
    rows: list[list] = []
    seen: set = set()
    while len(rows) < n:
        letters = "".join(_pick(rng, "ABCDEFGHKLMPRT") for _ in range(3))
        sku = f"{letters}-{rng.integers(1000, 9999)}"
        wh = _pick(rng, houses)
        if (sku, wh) in seen:
            continue
        seen.add((sku, wh))
        on_hand = int(rng.poisson(40))
        rows.append(
            [
                sku,
                wh,
                f"{_pick(rng, _WORDS)} {_pick(rng, _WORDS)}",
                str(on_hand),
                str(int(rng.integers(5, 60))),
                f"{rng.lognormal(2.5, 0.8):.2f}",
                f"2024-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}",
            ]
        )
    for i in _defect_rows(rng, n, int(rng.integers(1, 6))):  # negative / broken stock
        rows[i][3] = _pick(rng, [f"-{int(rng.integers(1, 30))}", "", "twelve", "3.5e2"])
    for i in _defect_rows(rng, n, int(rng.integers(1, 6))):  # malformed sku
        sku = rows[i][0]
        rows[i][0] = _pick(rng, [sku.lower(), sku.replace("-", ""), sku + "X", " " + sku])
    for i in _defect_rows(rng, n, int(rng.integers(1, 5))):  # duplicated (sku, warehouse)
        j = int(rng.integers(0, i))
        rows[i][0], rows[i][1] = rows[j][0], rows[j][1]
    for i in _defect_rows(rng, n, int(rng.integers(1, 5))):  # broken cost
        rows[i][5] = _pick(rng, ["", "n/a", "-1.00", "0.00", "12.5.0"])
    header = [
        "sku",
        "warehouse",
        "description",
        "on_hand",
        "reorder_level",
        "unit_cost",
        "last_counted",
    ]
    rules = [
        {"op": "rows_invalid_number", "column": "on_hand", "min": 0, "max": 100000},
        {"op": "rows_pattern_mismatch", "column": "sku", "pattern": r"[A-Z]{3}-\d{4}"},
        {"op": "rows_duplicate", "columns": ["sku", "warehouse"]},
        {"op": "rows_invalid_number", "column": "unit_cost", "min": 0.01, "max": 10000},
        {"op": "rows_less_than", "column": "on_hand", "than": "reorder_level"},
    ]
    return header, rows, rules


EVENTS = ["OK", "WARN", "ERROR", "MAINT"]


def station_log(rng: np.random.Generator, n: int):
    stations = [f"PUMP-{int(s)}" for s in rng.choice(np.arange(10, 99), 4, replace=False)]
    weights = rng.dirichlet(np.ones(len(stations)) * 2)
    t = datetime(2024, 3, 1) + timedelta(hours=int(rng.integers(0, 2000)))
    rows = []
    for i in range(n):
        t += timedelta(minutes=int(rng.integers(5, 240)))
        end = t + timedelta(minutes=int(rng.integers(1, 180)))
        event = EVENTS[int(rng.choice(4, p=[0.55, 0.2, 0.15, 0.1]))]
        rows.append(
            [
                f"L{5000 + i}",
                stations[int(rng.choice(len(stations), p=weights))],
                event,
                _ts(t),
                _ts(end),
                _pick(rng, _OPERATORS),
            ]
        )
    for i in _defect_rows(rng, n, int(rng.integers(1, 6))):  # end before start
        s = datetime.fromisoformat(rows[i][3])
        rows[i][4] = _ts(s - timedelta(minutes=int(rng.integers(1, 120))))
    for i in _defect_rows(rng, n, int(rng.integers(1, 5))):  # missing operator
        rows[i][5] = ""
    # ERROR events concentrate on one station so the "most ERROR events" question has one answer.
    hot = _pick(rng, stations)
    hot_rows = _defect_rows(rng, n, int(rng.integers(3, 7)))
    for i in hot_rows:
        rows[i][1], rows[i][2] = hot, "ERROR"
    # Unknown event codes go on other rows, so none is overwritten and the answer is never empty.
    others = np.setdiff1d(np.arange(1, n), hot_rows)
    for i in sorted(int(j) for j in rng.choice(others, int(rng.integers(1, 5)), replace=False)):
        rows[i][2] = _pick(rng, ["ERR", "ok", "FAIL", "Warn", "MAINTENANCE"])
    header = ["log_id", "station", "event", "started_at", "ended_at", "operator"]
    rules = [
        {"op": "rows_order_violation", "start": "started_at", "end": "ended_at"},
        {"op": "rows_not_in", "column": "event", "allowed": list(EVENTS)},
        {"op": "rows_empty", "column": "operator"},
        {"op": "top_value", "column": "station", "where_column": "event", "equals": "ERROR"},
    ]
    return header, rows, rules


TABLES = {"readings": readings, "inventory": inventory, "station_log": station_log}


def to_csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _number(v: str) -> float | None:
    return float(v) if NUMBER.fullmatch(v) else None


def evaluate(rule: dict, header: list[str], rows: list[list[str]]):
    """The answer to ``rule`` over ``rows``.

    ``rows_*`` rules: the ascending 1-based numbers of the data rows the rule selects (a
    ``list[int]``, maybe empty); ``top_value``: a ``str`` (``"none"`` when nothing qualifies).
    """
    col = {h: i for i, h in enumerate(header)}
    op = rule["op"]
    if op == "top_value":
        c, w = col[rule["column"]], col[rule["where_column"]]
        counts = Counter(r[c] for r in rows if r[w] == rule["equals"])
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return best[0][0] if best else "none"
    if op == "rows_duplicate":
        seen, out = set(), []
        for n, r in enumerate(rows, 1):
            key = tuple(r[col[c]] for c in rule["columns"])
            if key in seen:
                out.append(n)
            seen.add(key)
        return out
    return [n for n, r in enumerate(rows, 1) if _selects(op, rule, col, r)]


def _selects(op: str, rule: dict, col: dict, r: list[str]) -> bool:
    if op == "rows_invalid_number":
        x = _number(r[col[rule["column"]]])
        return x is None or not rule["min"] <= x <= rule["max"]
    if op == "rows_pattern_mismatch":
        return not re.fullmatch(rule["pattern"], r[col[rule["column"]]])
    if op == "rows_less_than":
        x, y = _number(r[col[rule["column"]]]), _number(r[col[rule["than"]]])
        return x is not None and y is not None and x < y
    if op == "rows_order_violation":
        s, e = r[col[rule["start"]]], r[col[rule["end"]]]
        return bool(TIMESTAMP.fullmatch(s) and TIMESTAMP.fullmatch(e) and e < s)
    if op == "rows_not_in":
        return r[col[rule["column"]]] not in rule["allowed"]
    if op == "rows_empty":
        return r[col[rule["column"]]].strip() == ""
    raise ValueError(f"unknown rule op {op!r}")


ROWS_ANSWER = (
    "Answer their row numbers (the first data row after the header is row 1), "
    "comma-separated in ascending order, e.g. 4,17,102; answer none if no row "
    "qualifies."
)


def describe(rule: dict, path: str) -> str:
    """The rule as the question the agent reads (with the answer format)."""
    op = rule["op"]
    num = (
        "(a number is an optional '-', digits, and optionally '.' and digits; empty or other "
        "text is not a number)"
    )
    if op == "rows_invalid_number":
        q = (
            f"Which data rows of {path} have a {rule['column']} value that is not a number or "
            f"lies outside [{rule['min']}, {rule['max']}]? {num}"
        )
    elif op == "rows_pattern_mismatch":
        q = (
            f"Which data rows of {path} have a {rule['column']} value that does not fully "
            f"match the regular expression {rule['pattern']}?"
        )
    elif op == "rows_duplicate":
        cols = ", ".join(rule["columns"])
        q = (
            f"Which data rows of {path} repeat a ({cols}) value that already appeared in an "
            "earlier row? (the first occurrence does not count)"
        )
    elif op == "rows_less_than":
        q = (
            f"Which data rows of {path} have both {rule['column']} and {rule['than']} as "
            f"numbers and {rule['column']} < {rule['than']}? {num}"
        )
    elif op == "rows_order_violation":
        q = (
            f"Which data rows of {path} have {rule['end']} earlier than {rule['start']}, "
            "counting only rows where both are timestamps of the form YYYY-MM-DDTHH:MM?"
        )
    elif op == "rows_not_in":
        q = (
            f"Which data rows of {path} have a {rule['column']} value that is not one of "
            f"{', '.join(rule['allowed'])} (exact, case-sensitive)?"
        )
    elif op == "rows_empty":
        q = f"Which data rows of {path} have an empty (or blank) {rule['column']} value?"
    elif op == "top_value":
        return (
            f"Among data rows of {path} whose {rule['where_column']} is exactly "
            f"{rule['equals']}, which {rule['column']} value occurs most often? (ties: the "
            "alphabetically first) Record the answer with answer() as the exact value."
        )
    else:
        raise ValueError(op)
    return f"{q} {ROWS_ANSWER}"


def parse_csv(text: str) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], [r for r in rows[1:] if r]
