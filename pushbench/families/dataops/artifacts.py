"""Artifact-validation material: JSON/YAML record files that must satisfy a stated schema.

The schema (``schema.json`` in the unit's folder) is a small JSON-Schema subset for one record:
``required``, ``additionalProperties: false`` and per-property ``type`` (``integer``, ``number``,
``string``, ``boolean``; booleans are not numbers), ``minimum``/``maximum``, ``minLength``,
``enum`` and ``pattern`` (full match), plus ``x-unique``: a property whose value may appear only
once (a record repeating the value of an earlier *valid* record is invalid).

The artifact is ``{"schema": ..., "generated": ..., "records": [...]}``. The unit passes when
the file parses, its top-level keys other than ``records`` are unchanged, every record is valid,
and every record that was valid originally is still present unchanged (invalid records may be
repaired or deleted).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from typing import Any

import numpy as np
import yaml

SCHEMAS: dict[str, dict[str, Any]] = {
    "stations": {
        "required": ["station_id", "name", "latitude", "longitude", "elevation_m", "active"],
        "properties": {
            "station_id": {"type": "integer", "minimum": 1},
            "name": {"type": "string", "minLength": 1},
            "latitude": {"type": "number", "minimum": -90, "maximum": 90},
            "longitude": {"type": "number", "minimum": -180, "maximum": 180},
            "elevation_m": {"type": "integer", "minimum": -500, "maximum": 9000},
            "active": {"type": "boolean"},
        },
        "x-unique": "station_id",
    },
    "orders": {
        "required": ["order_id", "customer", "qty", "status", "total_cents"],
        "properties": {
            "order_id": {"type": "integer", "minimum": 1},
            "customer": {"type": "string", "pattern": r"C\d{4}"},
            "qty": {"type": "integer", "minimum": 1, "maximum": 1000},
            "status": {"type": "string", "enum": ["new", "paid", "shipped", "cancelled"]},
            "total_cents": {"type": "integer", "minimum": 0},
        },
        "x-unique": "order_id",
    },
    "accounts": {
        "required": ["user_id", "email", "role", "quota_gb"],
        "properties": {
            "user_id": {"type": "integer", "minimum": 1},
            "email": {"type": "string", "pattern": r"[a-z0-9._]+@[a-z0-9-]+\.[a-z]{2,}"},
            "role": {"type": "string", "enum": ["admin", "editor", "viewer"]},
            "quota_gb": {"type": "number", "minimum": 0, "maximum": 1024},
        },
        "x-unique": "user_id",
    },
}
_TOWNS = ("Aster", "Birch", "Cedar", "Dunmore", "Elm", "Fairby", "Glen", "Holt", "Iver", "Juno")


def schema_doc(kind: str) -> dict:
    s = SCHEMAS[kind]
    return {
        "title": f"{kind} record",
        "type": "object",
        "required": s["required"],
        "additionalProperties": False,
        "properties": s["properties"],
        "x-unique": s["x-unique"],
    }


def _type_ok(t: str, v) -> bool:
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":  # NaN and infinities are not numbers a schema can bound
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    return False


def record_problem(schema: dict, rec, seen: set) -> str | None:
    """Why ``rec`` is invalid under ``schema`` (``seen``: unique values so far), else None."""
    if not isinstance(rec, dict):
        return "is not an object"
    for key in schema["required"]:
        if key not in rec:
            return f"misses required field {key!r}"
    for key, val in rec.items():
        spec = schema["properties"].get(key)
        if spec is None:
            return f"has unknown field {key!r}"
        if not _type_ok(spec["type"], val):
            return f"field {key!r} is not of type {spec['type']}"
        if (
            "minimum" in spec
            and val < spec["minimum"]
            or "maximum" in spec
            and val > spec["maximum"]
        ):
            return f"field {key!r} is out of range"
        if "minLength" in spec and len(val) < spec["minLength"]:
            return f"field {key!r} is too short"
        if "enum" in spec and val not in spec["enum"]:
            return f"field {key!r} is not an allowed value"
        if "pattern" in spec and not re.fullmatch(spec["pattern"], val):
            return f"field {key!r} does not match its pattern"
    uniq = rec[schema["x-unique"]]
    if uniq in seen:
        return f"repeats {schema['x-unique']} {uniq!r}"
    return None


def valid_mask(schema: dict, records: list) -> list[bool]:
    seen: set = set()
    out: list[bool] = []
    for rec in records:
        ok = record_problem(schema, rec, seen) is None
        if ok:
            seen.add(rec[schema["x-unique"]])
        out.append(ok)
    return out


def _record(kind: str, i: int, rng: np.random.Generator) -> dict:
    if kind == "stations":
        return {
            "station_id": 100 + i,
            "name": f"{_TOWNS[int(rng.integers(10))]} {i}",
            "latitude": round(float(rng.uniform(-60, 70)), 4),
            "longitude": round(float(rng.uniform(-170, 170)), 4),
            "elevation_m": int(rng.integers(-20, 2500)),
            "active": bool(rng.random() < 0.8),
        }
    if kind == "orders":
        qty = int(rng.integers(1, 40))
        return {
            "order_id": 5000 + i,
            "customer": f"C{int(rng.integers(1000, 9999))}",
            "qty": qty,
            "status": ["new", "paid", "shipped", "cancelled"][int(rng.integers(4))],
            "total_cents": qty * int(rng.integers(99, 9999)),
        }
    return {
        "user_id": 300 + i,
        "email": f"user{i}.{int(rng.integers(10, 99))}@example.org",
        "role": ["admin", "editor", "viewer"][int(rng.integers(3))],
        "quota_gb": round(float(rng.uniform(1, 500)), 1),
    }


def _break(kind: str, rec: dict, records: list, rng: np.random.Generator) -> dict:
    s, rec = SCHEMAS[kind], dict(rec)
    how = ["type", "missing", "range", "extra", "unique", "enum_or_pattern"][int(rng.integers(6))]
    ints = [k for k, p in s["properties"].items() if p["type"] in ("integer", "number")]
    if how == "type":
        k = ints[int(rng.integers(len(ints)))]
        rec[k] = str(rec[k])
    elif how == "missing":
        del rec[s["required"][1 + int(rng.integers(len(s["required"]) - 1))]]
    elif how == "range":
        cands = [x for x in ints if x != s["x-unique"]]
        k = cands[int(rng.integers(len(cands)))]
        p = s["properties"][k]
        rec[k] = p["maximum"] + 1 if "maximum" in p and rng.random() < 0.5 else p["minimum"] - 1
    elif how == "extra":
        rec["note"] = "imported"
    elif how == "unique" and records:
        rec[s["x-unique"]] = records[int(rng.integers(len(records)))][s["x-unique"]]
    else:
        strs = [
            k
            for k, p in s["properties"].items()
            if "enum" in p or "pattern" in p or "minLength" in p
        ]
        k = strs[int(rng.integers(len(strs)))]
        rec[k] = "" if "minLength" in s["properties"][k] else str(rec[k]).upper() + "?"
    return rec


def build(rng: np.random.Generator) -> dict:
    """An artifact unit's material: format, texts, and the originally valid records."""
    kind = list(SCHEMAS)[int(rng.integers(len(SCHEMAS)))]
    fmt = "json" if rng.random() < 0.55 else "yaml"
    n = int(rng.integers(8, 20))
    bad = set(
        int(i) for i in rng.choice(np.arange(1, n), size=int(rng.integers(2, 5)), replace=False)
    )
    records: list = []
    for i in range(n):
        rec = _record(kind, i, rng)
        records.append(_break(kind, rec, records, rng) if i in bad else rec)
    doc = {"schema": f"{kind}/v1", "generated": "2024-06-30", "records": records}
    mask = valid_mask(SCHEMAS[kind], records)
    text = dump(fmt, doc)
    return {
        "kind": kind,
        "format": fmt,
        "target": f"{kind}.{fmt}",
        "text": text,
        "doc": doc,
        "schema": schema_doc(kind),
        "valid": [r for r, ok in zip(records, mask, strict=True) if ok],
        "n_invalid": mask.count(False),
    }


def dump(fmt: str, doc: dict) -> str:
    return (
        json.dumps(doc, indent=2) + "\n"
        if fmt == "json"
        else yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    )


def load(fmt: str, text: str):
    return json.loads(text) if fmt == "json" else yaml.safe_load(text)


def _first_line(e: Exception) -> str:
    lines = str(e).splitlines()
    return lines[0][:200] if lines else type(e).__name__


def check(fmt: str, text: str, kind: str, valid: list) -> tuple[str, str] | None:
    """``None`` when the artifact passes, else ``(rule, reason)``; never raises on any text."""
    return _check(fmt, text, kind, tuple(sorted(json.dumps(r, sort_keys=True) for r in valid)))


# A pure function of its arguments, memoised because the same file texts come back episode
# after episode (every episode of a task starts from the same backlog) and parsing YAML in
# pure Python was a large share of a DataOps check. Bounded: files are at most 256 KiB.
@functools.lru_cache(maxsize=128)
def _check(fmt: str, text: str, kind: str, valid: tuple[str, ...]) -> tuple[str, str] | None:
    """:func:`check` with the originally valid records as sorted canonical JSON texts."""
    try:
        doc = load(fmt, text)
    except (ValueError, yaml.YAMLError) as e:
        return "parses", f"the file is not valid {fmt.upper()} ({_first_line(e)})"
    except RecursionError:  # the parsers recurse per nesting level
        return "parses", f"the file is not valid {fmt.upper()} (nested too deeply)"
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        return "parses", "the top level must be an object with a 'records' list"
    if (
        doc.get("schema") != f"{kind}/v1"
        or doc.get("generated") != "2024-06-30"
        or set(doc) != {"schema", "generated", "records"}
    ):
        return "unchanged", "the top-level keys other than 'records' must stay as they were"
    seen: set = set()
    schema = SCHEMAS[kind]
    for i, rec in enumerate(doc["records"]):
        why = record_problem(schema, rec, seen)
        if why:
            return "records_valid", f"record {i} {why}"
        seen.add(rec[schema["x-unique"]])
    have = Counter(json.dumps(r, sort_keys=True) for r in doc["records"])
    need = Counter(valid)
    if any(have[k] < c for k, c in need.items()):
        return "kept_valid", "a record that was valid originally is missing or was changed"
    return None
