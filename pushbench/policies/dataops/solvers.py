"""How an offline agent solves a DataOps-lite unit from what it observed (no env internals).

Input: the unit as ``inspect`` showed it (``rules``, ``files``, ``mode``, ``answer_type``) and
the texts of its files as ``read_file`` returned them. Output: ``{"answer": value}`` (list
answers as comma-separated text) or ``{"write": (path, content)}``. These are written from the rule
texts the agent sees, independently of the
environment's generators and checkers, so a disagreement shows up as a failing verifier run.
:func:`perturb` makes the plausible mistakes a less accurate agent makes.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
from collections import Counter

import yaml

from . import public_solvers as P

_NUM = re.compile(r"-?\d+(\.\d+)?")
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def _table(text: str):
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    return {h: i for i, h in enumerate(rows[0])}, rows[1:]


def _num(v: str):
    return float(v) if _NUM.fullmatch(v) else None


def _rows_where(rows, pred) -> str:
    return ",".join(str(n) for n, r in enumerate(rows, 1) if pred(r)) or "none"


def csv_answer(rule: dict, text: str):
    """The answer text: selected row numbers (1 = first data row) or the top value."""
    col, rows = _table(text)
    op = rule["op"]
    if op == "rows_invalid_number":
        c = col[rule["column"]]
        return _rows_where(
            rows, lambda r: _num(r[c]) is None or not rule["min"] <= _num(r[c]) <= rule["max"]
        )
    if op == "rows_pattern_mismatch":
        c = col[rule["column"]]
        return _rows_where(rows, lambda r: not re.fullmatch(rule["pattern"], r[c]))
    if op == "rows_duplicate":
        keys = [tuple(r[col[c]] for c in rule["columns"]) for r in rows]
        return ",".join(str(n) for n, k in enumerate(keys, 1) if k in keys[: n - 1]) or "none"
    if op == "rows_less_than":
        a, b = col[rule["column"]], col[rule["than"]]
        return _rows_where(
            rows,
            lambda r: _num(r[a]) is not None and _num(r[b]) is not None and _num(r[a]) < _num(r[b]),
        )
    if op == "rows_order_violation":
        s, e = col[rule["start"]], col[rule["end"]]
        return _rows_where(
            rows, lambda r: bool(_TS.fullmatch(r[s]) and _TS.fullmatch(r[e]) and r[e] < r[s])
        )
    if op == "rows_not_in":
        c = col[rule["column"]]
        return _rows_where(rows, lambda r: r[c] not in rule["allowed"])
    if op == "rows_empty":
        c = col[rule["column"]]
        return _rows_where(rows, lambda r: not r[c].strip())
    if op == "top_value":
        c, w = col[rule["column"]], col[rule["where_column"]]
        counts = Counter(r[c] for r in rows if r[w] == rule["equals"])
        return min(counts, key=lambda k: (-counts[k], k)) if counts else "none"
    raise ValueError(f"unknown csv rule {op!r}")


def consistency_answer(rule: dict, files: dict[str, str]) -> str:
    """The answer text: the differing accounts or files, comma-separated and sorted."""
    op = rule["op"]
    if op == "ledger_mismatch_accounts":
        col, rows = _table(files[rule["ledger"]])
        sums: Counter[str] = Counter()
        for r in rows:
            sums[r[col["account"]]] += int(r[col["amount_cents"]])
        totals = json.loads(files[rule["summary"]])["totals_cents"]
        bad = sorted(a for a in set(sums) | set(totals) if sums.get(a, 0) != totals.get(a))
        return ",".join(bad) or "none"
    manifest = {f["name"]: f["bytes"] for f in json.loads(files[rule["manifest"]])["files"]}
    listed = {}
    for line in files[rule["listing"]].splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0].startswith("-"):
            listed[parts[-1]] = int(parts[4])
    if op == "manifest_mismatch_files":
        names = sorted(n for n, b in manifest.items() if listed.get(n) != b)
    elif op == "listing_extra":
        names = sorted(n for n in listed if n not in manifest)
    else:
        raise ValueError(f"unknown consistency rule {op!r}")
    return ",".join(names) or "none"


def pkg_info(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        if not line.strip():
            break
        k, _, v = line.partition(":")
        out.append((k.strip(), v.strip()))
    return out


def metadata_fix(unit: dict, files: dict[str, str], skip: str | None = None) -> tuple[str, str]:
    """Rewrite each rule's line of the target from PKG-INFO (``skip``: leave that field)."""
    target = unit["rules"][0]["file"]
    pkg = next(t for p, t in files.items() if p.endswith("PKG-INFO"))
    headers = pkg_info(pkg)
    first: dict[str, str] = {}
    for k, v in headers:
        first.setdefault(k, v)
    lines = files[target].splitlines()
    for rule in unit["rules"]:
        if "field" not in rule or rule["rule"] == skip:
            continue
        header = rule["equals"].split(":", 1)[1]
        value = first.get(header)
        if value is None and header == "License":
            value = next(
                v.split("::")[-1].strip()
                for k, v in headers
                if k == "Classifier" and v.startswith("License ::")
            )
        if target.endswith(".toml"):
            key = rule["field"].split(".")[1]
            new = (
                f"license = {{text = {json.dumps(value)}}}"
                if key == "license"
                else f"{key} = {json.dumps(value)}"
            )
            pat = re.compile(rf"{re.escape(key)}\s*=")
        else:
            new, pat = f"{rule['field']}: {value}", re.compile(rf"{re.escape(rule['field'])}:")
        lines = [new if pat.match(ln) else ln for ln in lines]
    return target, "\n".join(lines) + "\n"


def _type_ok(t: str, v) -> bool:
    return {
        "integer": isinstance(v, int) and not isinstance(v, bool),
        "number": isinstance(v, (int, float)) and not isinstance(v, bool),
        "string": isinstance(v, str),
        "boolean": isinstance(v, bool),
    }.get(t, False)


def record_ok(schema: dict, rec, seen: set) -> bool:
    if not isinstance(rec, dict) or any(k not in rec for k in schema["required"]):
        return False
    for k, v in rec.items():
        p = schema["properties"].get(k)
        if p is None or not _type_ok(p["type"], v):
            return False
        if ("minimum" in p and v < p["minimum"]) or ("maximum" in p and v > p["maximum"]):
            return False
        if ("minLength" in p and len(v) < p["minLength"]) or ("enum" in p and v not in p["enum"]):
            return False
        if "pattern" in p and not re.fullmatch(p["pattern"], v):
            return False
    return rec[schema["x-unique"]] not in seen


def artifact_fix(unit: dict, files: dict[str, str], mistake: str | None = None):
    """Keep the valid records (in order), drop the rest; ``mistake`` keeps a bad / drops a good."""
    rule = next(r for r in unit["rules"] if r.get("rule") == "records_valid")
    path = rule["artifact"]
    return path, _fixed_text(files[rule["schema"]], rule["format"], files[path], mistake)


# A pure function of the texts, memoised: the same files come back episode after episode and
# parsing and writing YAML in pure Python was a large share of a simulated agent's CPU.
@functools.lru_cache(maxsize=256)
def _fixed_text(schema_text: str, fmt: str, text: str, mistake: str | None) -> str:
    schema = json.loads(schema_text)
    doc = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    seen: set = set()
    good: list = []
    bad: list = []
    for rec in doc["records"]:
        if record_ok(schema, rec, seen):
            seen.add(rec[schema["x-unique"]])
            good.append(rec)
        else:
            bad.append(rec)
    if mistake == "keep_bad" and bad:
        good.append(bad[0])
    elif mistake == "drop_good" and good:
        good.pop(len(good) // 2)
    doc["records"] = good
    return (
        json.dumps(doc, indent=2) + "\n" if fmt == "json" else yaml.safe_dump(doc, sort_keys=False)
    )


def solve(unit: dict, files: dict[str, str]) -> dict:
    """The agent's solution of ``unit``: ``{"answer": v}`` or ``{"write": (path, text)}``."""
    if P.handles(unit):  # a DataOps-public unit (its rule ops are its own)
        return P.solve(unit, files)
    kind, rule = unit["kind"], unit["rules"][0]
    if kind == "csv_check":
        return {"answer": csv_answer(rule, files[rule["file"]])}
    if kind == "consistency":
        return {"answer": consistency_answer(rule, files)}
    if kind == "metadata_repair":
        return {"write": metadata_fix(unit, files)}
    return {"write": artifact_fix(unit, files)}


_TOKENS = re.compile(r"ACC-\d+|part-\d{4}\.csv\.gz|PUMP-\d+|ST-\d+")


def _wrong_list(items: list[str], files: dict[str, str], rng) -> str:
    """A plausible wrong list: rows numbered from the header, or one item dropped or added."""
    rows = bool(items) and all(i.isdigit() for i in items)
    kinds = (["shift"] if rows else []) + (["drop"] if items else []) + ["add"]
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "shift":  # counted the header line as row 1
        return ",".join(str(int(i) + 1) for i in items)
    if kind == "drop":
        gone = int(rng.integers(len(items)))
        return ",".join(i for k, i in enumerate(items) if k != gone) or "none"
    if rows or not items:
        pool = [str(n) for n in range(1, 160) if str(n) not in items]
    else:
        pool = sorted({t for text in files.values() for t in _TOKENS.findall(text)} - set(items))
    extra = pool[int(rng.integers(len(pool)))] if pool else "x"
    key = (lambda i: int(i)) if rows else (lambda i: i)
    return ",".join(sorted(items + [extra], key=key))


def perturb(unit: dict, files: dict[str, str], rng) -> dict:
    """A plausible wrong solution: a wrong row list or id, a partial fix."""
    if P.handles(unit):
        return P.perturb(unit, files, rng, _wrong_list)
    good = solve(unit, files)
    if "answer" in good:
        v = good["answer"]
        if unit.get("answer_type") == "list":
            items = [] if v == "none" else v.split(",")
            return {"answer": _wrong_list(items, files, rng)}
        pool = sorted({t for text in files.values() for t in _TOKENS.findall(text)} - {v})
        return {"answer": pool[int(rng.integers(len(pool)))] if pool else "none"}
    if unit["kind"] == "metadata_repair":
        fields = [r["rule"] for r in unit["rules"] if "field" in r]
        needed = [f for f in fields if metadata_fix(unit, files, skip=f) != good["write"]]
        fields = needed or fields
        return {"write": metadata_fix(unit, files, skip=fields[int(rng.integers(len(fields)))])}
    return {"write": artifact_fix(unit, files, ["keep_bad", "drop_good"][int(rng.integers(2))])}
