"""DataOps-lite work units: the four kinds, backlog generation and the in-memory checkers.

Kinds
    ``csv_check`` (answer)      a CSV table with planted defects; which rows break one field
                                rule (answer: their row numbers), or a field's top value.
    ``metadata_repair`` (edit)  a package metadata file from a RepoScan snapshot with one or two
                                planted inconsistencies against the snapshot's PKG-INFO/source.
    ``consistency`` (answer)    two related files (ledger CSV + summary JSON, or manifest JSON +
                                folder listing) that disagree; the question asks which
                                accounts or files differ (answer: their ids or names).
    ``artifact`` (edit)         a JSON or YAML record file to fix against ``schema.json``.

Generation is deterministic: the backlog of (backlog config, target N) comes from
``numpy.random.default_rng([seed, N])`` and unit ``i`` from ``default_rng([seed, N, i])``.
Files go under ``<unit id>/`` in the workspace. Expected answers, the original valid records and
the metadata facts live only in :attr:`Unit.secret` (in memory); checkers read the workspace
through the sandbox and never trust files the agent could edit.

Unguessable answers: an answer unit is accepted only for an answer computed from its files.
List answers (``answer_type: "list"``) are sets of row numbers, account ids or file names with
at least one element; the text answer (``top_value``) is one of 89 station names. Without
reading a file, no answer value is right for more than a small share of units (the test suite
measures the largest share over hundreds of generated units), so trying guesses through the
verifier cannot reach a target within the budget; the ``exhaustive`` floor measures it.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from dataclasses import dataclass, field

import numpy as np

from ...envs.sandbox import SandboxError, Workspace
from . import artifacts, datasets, metadata

KINDS = ("csv_check", "metadata_repair", "consistency", "artifact")
EDIT_KINDS = frozenset({"metadata_repair", "artifact"})


@dataclass
class Unit:
    id: str
    kind: str
    title: str
    task: str
    files: list[str]
    rules: list[dict]
    answer_type: str | None  # "list" | "text" | "integer" for answer units, None for edits
    secret: dict = field(repr=False, default_factory=dict)

    def public(self) -> dict:
        """What ``inspect`` shows: task text, files, rules as data; never the secret."""
        out = {
            "unit_id": self.id,
            "kind": self.kind,
            "title": self.title,
            "task": self.task,
            "files": list(self.files),
            "rules": [dict(r) for r in self.rules],
            "mode": "edit" if self.answer_type is None else "answer",
        }
        if self.answer_type:
            out["answer_type"] = self.answer_type
        return out


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    rule: str | None = None
    reason: str | None = None


def backlog_size(target: int, cfg: dict) -> int:
    """Units in the backlog for ``target``: at least 1.5 N (``size_factor``) and N + extra."""
    return max(
        target + int(cfg.get("min_extra", 3)),
        math.ceil(float(cfg.get("size_factor", 1.6)) * target),
    )


def generate(cfg: dict, target: int, ws: Workspace) -> list[Unit]:
    """Write the backlog's files into ``ws`` and return its units (deterministic)."""
    return generate_backlog(cfg, target, ws, KINDS, _BUILDERS)


def generate_backlog(
    cfg: dict, target: int, ws: Workspace, kinds_: tuple[str, ...], builders: dict
) -> list[Unit]:
    """The backlog of one DataOps family: ``backlog_size`` units of ``kinds_`` (each kind at
    least once, the rest drawn by the config's ``mix`` weights, then shuffled), unit ``i``
    built by ``builders[kind](default_rng([seed, N, i]), uid, cfg, ws)``. Shared by the
    synthetic and the public-data family (:mod:`.public`).

    The backlog of one (family, ``cfg``, ``target``) is built once per process
    (:func:`_blueprint`); every call writes all of its files into ``ws`` afresh, in the same
    order, and returns new units (unpickled: an exact deep copy, 5x cheaper than
    ``copy.deepcopy``), so two episodes never share a unit or a file. Builders may only write
    through ``ws.setup_write`` (the blueprint records those writes).
    """
    family = tuple(kinds_) + tuple(f"{b.__module__}.{b.__qualname__}" for b in builders.values())
    key = (family, json.dumps(cfg, sort_keys=True, default=repr), target)
    if key not in _BLUEPRINTS:
        if len(_BLUEPRINTS) >= _MAX_BLUEPRINTS:  # bounded: a long-lived process forgets
            _BLUEPRINTS.clear()
        files, built = _blueprint(cfg, target, kinds_, builders)
        _BLUEPRINTS[key] = files, pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)
    files, units = _BLUEPRINTS[key]
    for rel, text in files:
        ws.setup_write(rel, text)
    return pickle.loads(units)


class _Recorder:
    """Stands in for the workspace while a backlog is built: keeps the writes, in order."""

    def __init__(self) -> None:
        self.files: list[tuple[str, str]] = []

    def setup_write(self, rel: str, text: str) -> None:
        self.files.append((rel, text))


# Built backlogs by (family's kinds and builders, config as sorted JSON, target): every episode
# of a task builds the same backlog (its numbers come from the config's seed and ``target``
# only) and building it was the largest share of a simulated DataOps episode's CPU. Never
# handed out: see generate_backlog.
_BLUEPRINTS: dict[tuple, tuple[tuple[tuple[str, str], ...], bytes]] = {}
_MAX_BLUEPRINTS = 64


def _blueprint(
    cfg: dict, target: int, kinds_: tuple[str, ...], builders: dict
) -> tuple[tuple[tuple[str, str], ...], list[Unit]]:
    """The files (relative path, text, in write order) and the units of a backlog."""
    rng = np.random.default_rng([int(cfg["seed"]), target])
    size = backlog_size(target, cfg)
    weights = np.array([float(cfg.get("mix", {}).get(k, 1.0)) for k in kinds_])
    kinds = list(kinds_[: min(size, len(kinds_))])
    kinds += [
        kinds_[int(i)]
        for i in rng.choice(len(kinds_), size=size - len(kinds), p=weights / weights.sum())
    ]
    kinds = [kinds[int(i)] for i in rng.permutation(len(kinds))]
    width = max(2, len(str(size)))
    units, rec = [], _Recorder()
    for i, kind in enumerate(kinds):
        urng = np.random.default_rng([int(cfg["seed"]), target, i])
        uid = f"u{i + 1:0{width}d}"
        units.append(builders[kind](urng, uid, cfg, rec))
    return tuple(rec.files), units


def put_files(ws: Workspace, uid: str, files: dict[str, str]) -> list[str]:
    """Write ``files`` (relative name -> text) under ``<uid>/``; their workspace paths."""
    out = []
    for rel, text in files.items():
        ws.setup_write(f"{uid}/{rel}", text)
        out.append(f"{uid}/{rel}")
    return out


def _csv_unit(rng, uid, cfg, ws) -> Unit:
    tables = list(cfg.get("tables", datasets.TABLES))
    table = tables[int(rng.integers(len(tables)))]
    header, rows, rules = datasets.TABLES[table](rng, int(rng.integers(40, 160)))
    rule = rules[int(rng.integers(len(rules)))]
    answer = datasets.evaluate(rule, header, rows)
    [path] = put_files(ws, uid, {f"{table}.csv": datasets.to_csv(header, rows)})
    atype = "text" if isinstance(answer, str) else "list"
    if atype == "list":
        answer = list_text(answer)
    words = {"top_value": "most frequent", "rows_duplicate": "duplicate rows"}.get(
        rule["op"], rule["op"].replace("rows_", "rows with ").replace("_", " ")
    )
    col = rule.get("column") or ",".join(rule.get("columns", [])) or rule.get("end")
    return Unit(
        uid,
        "csv_check",
        f"{table}.csv: {col} {words}",
        datasets.describe(rule, path),
        [path],
        [{**rule, "file": path}],
        atype,
        {"answer": answer},
    )


def _metadata_unit(rng, uid, cfg, ws) -> Unit:
    snap = cfg.get("snapshot", "requests")
    m = metadata.build(rng, snap)
    files = put_files(ws, uid, m["files"])
    target = f"{uid}/{m['target']}"
    fixed = metadata.render(m["format"], m["expected"], metadata.facts(snap))
    task = (
        f"{target} describes the {snap} package but disagrees with the package's own "
        f"metadata ({uid}/PKG-INFO, as shipped in its source distribution). Edit {target} "
        "so that it parses and every rule below holds; keep everything else unchanged. "
        "Then run the verifier and submit."
    )
    return Unit(
        uid,
        "metadata_repair",
        f"{m['target']} of {snap}: repair metadata",
        task,
        files,
        metadata.rules(m["format"], target),
        None,
        {
            "format": m["format"],
            "target": target,
            "expected": m["expected"],
            "keep": m["keep"],
            "planted": m["planted"],
            "fixed_text": fixed,
        },
    )


def _consistency_unit(rng, uid, cfg, ws) -> Unit:
    if rng.random() < 0.5:
        return _ledger_unit(rng, uid, ws)
    return _manifest_unit(rng, uid, ws)


def _ledger_unit(rng, uid, ws) -> Unit:
    accounts = sorted({f"ACC-{int(a)}" for a in rng.choice(np.arange(100, 999), 6, replace=False)})
    accounts = accounts[: int(rng.integers(4, 7))]
    rows, totals = [], {a: 0 for a in accounts}
    for i in range(int(rng.integers(30, 90))):
        acc = accounts[int(rng.integers(len(accounts)))]
        amt = int(rng.integers(-20000, 90000))
        totals[acc] += amt
        rows.append([f"T{7000 + i}", f"2024-05-{int(rng.integers(1, 32)):02d}", acc, str(amt)])
    m = int(rng.choice([1, 2, 3], p=[0.5, 0.35, 0.15]))  # at least one: "none" is no answer
    summary = dict(totals)
    bad = sorted(accounts[int(i)] for i in rng.choice(len(accounts), m, replace=False))
    for a in bad:
        summary[a] += int(rng.choice([-1, 1])) * int(rng.integers(1, 50)) * 100
    files = put_files(
        ws,
        uid,
        {
            "ledger.csv": datasets.to_csv(["txn_id", "date", "account", "amount_cents"], rows),
            "summary.json": json.dumps(
                {"period": "2024-05", "currency": "EUR", "totals_cents": summary}, indent=2
            )
            + "\n",
        },
    )
    rule = {"op": "ledger_mismatch_accounts", "ledger": files[0], "summary": files[1]}
    task = (
        f"{files[1]} states each account's total of amount_cents over {files[0]}; the two "
        f"files disagree. Which accounts have a total in {files[1]} that differs from the "
        "sum of their ledger rows? Answer the account ids, comma-separated in ascending "
        "order (e.g. ACC-104,ACC-377)."
    )
    return Unit(
        uid,
        "consistency",
        "ledger vs summary totals",
        task,
        files,
        [rule],
        "list",
        {"answer": list_text(bad)},
    )


def _manifest_unit(rng, uid, ws) -> Unit:
    n = int(rng.integers(8, 22))
    first = int(rng.integers(0, 9000))  # file numbers start anywhere: names are not guessable
    names = [f"part-{first + i:04d}.csv.gz" for i in range(n)]
    sizes = {nm: int(rng.integers(2_000, 900_000)) for nm in names}
    listed = dict(sizes)
    k_missing = int(rng.integers(0, 3))
    k_resized = int(rng.integers(1 if k_missing == 0 else 0, 3))  # at least one mismatch
    missing = [names[int(i)] for i in rng.choice(n, k_missing, replace=False)]
    for nm in missing:
        del listed[nm]
    others = [nm for nm in listed if nm not in missing]
    resized = [others[int(i)] for i in rng.choice(len(others), k_resized, replace=False)]
    for nm in resized:
        listed[nm] += int(rng.choice([-1, 1])) * int(rng.integers(1, 4000))
    extra = sorted(
        f"part-{first + n + int(k):04d}.csv.gz"
        for k in rng.choice(6, int(rng.integers(1, 3)), replace=False)
    )
    for nm in extra:
        listed[nm] = int(rng.integers(2_000, 900_000))
    lines = [f"total {len(listed)}"] + [
        f"-rw-r--r-- 1 etl etl {listed[nm]:>9} 2024-05-{1 + i % 28:02d} 0{i % 10}:1{i % 6} {nm}"
        for i, nm in enumerate(sorted(listed))
    ]
    files = put_files(
        ws,
        uid,
        {
            "manifest.json": json.dumps(
                {
                    "dataset": "meter-exports",
                    "files": [{"name": nm, "bytes": sizes[nm]} for nm in names],
                },
                indent=2,
            )
            + "\n",
            "listing.txt": "\n".join(lines) + "\n",
        },
    )
    base = f"{files[0]} lists the files a folder should hold; {files[1]} is that folder's listing."
    fmt = "comma-separated in ascending order (e.g. part-0012.csv.gz,part-0040.csv.gz)."
    if rng.random() < 0.5:
        rule = {"op": "manifest_mismatch_files", "manifest": files[0], "listing": files[1]}
        task = (
            f"{base} Which files of the manifest are missing from the listing or listed "
            f"with a different size in bytes? Answer their names, {fmt}"
        )
        answer = sorted(missing + resized)
    else:
        rule = {"op": "listing_extra", "manifest": files[0], "listing": files[1]}
        task = (
            f"{base} Which file names appear in the listing but not in the manifest? "
            f"Answer the names, {fmt}"
        )
        answer = extra
    return Unit(
        uid,
        "consistency",
        "manifest vs folder listing",
        task,
        files,
        [rule],
        "list",
        {"answer": list_text(answer)},
    )


def _artifact_unit(rng, uid, cfg, ws) -> Unit:
    a = artifacts.build(rng)
    files = put_files(
        ws, uid, {"schema.json": json.dumps(a["schema"], indent=2) + "\n", a["target"]: a["text"]}
    )
    target = files[1]
    fixed_doc = {**a["doc"], "records": a["valid"]}
    task = (
        f"{target} must satisfy the record schema in {files[0]}. Fix it so every record "
        "validates, without losing or changing any record that was already valid "
        "(invalid records may be repaired or deleted) and without changing the other "
        "top-level keys. Then run the verifier and submit."
    )
    rules = [
        {"rule": "parses", "text": f"{target} parses as {a['format'].upper()}"},
        {"rule": "unchanged", "text": "top-level keys other than records are unchanged"},
        {
            "rule": "records_valid",
            "schema": files[0],
            "artifact": target,
            "format": a["format"],
            "text": f"every record satisfies {files[0]}",
        },
        {"rule": "kept_valid", "text": "every originally valid record is still present"},
    ]
    return Unit(
        uid,
        "artifact",
        f"{a['target']}: validate against schema",
        task,
        files,
        rules,
        None,
        {
            "format": a["format"],
            "target": target,
            "kind": a["kind"],
            "valid": a["valid"],
            "fixed_doc": fixed_doc,
        },
    )


_BUILDERS = {
    "csv_check": _csv_unit,
    "metadata_repair": _metadata_unit,
    "consistency": _consistency_unit,
    "artifact": _artifact_unit,
}


_INTEGER = re.compile(r"-?[0-9]{1,100}")  # ASCII digits only: int() accepts more than isdigit


def list_text(items) -> str:
    """The canonical text of a list answer: items comma-separated, or ``none`` when empty."""
    return ",".join(str(i) for i in items) or "none"


def list_items(value) -> frozenset[str] | None:
    """A list answer as a set: split on commas and white space, ``07`` == ``7``; ``none`` = {}.

    Order and spacing do not matter; ``None`` for a value that is no list (e.g. a bool). Total:
    an item of ASCII digits longer than 100 stays text (``int()`` refuses past 4300 digits).
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    parts = [p for p in re.split(r"[,\s]+", str(value).strip()) if p]
    if [p.lower() for p in parts] == ["none"]:
        return frozenset()
    return frozenset(str(int(p)) if _INTEGER.fullmatch(p) and p[0] != "-" else p for p in parts)


def _normalise(value, atype: str | None):
    """The answer as the checker compares it; total (``None``: not a well-formed answer).

    A list answer is compared as a set (:func:`list_items`). An integer answer is an ``int``
    (not a bool) or text of an optional ``-`` and up to 100 ASCII digits; anything else
    (``"--5"``, ``"²"``, ``"1_000"``, ``"3.0"``) is no integer, so the check fails instead of
    raising.
    """
    if atype == "list":
        return list_items(value)
    if atype == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value).strip()
        return int(text) if _INTEGER.fullmatch(text) else None
    return str(value).strip()


def check_answer(unit: Unit, answer=None) -> CheckResult:
    """An answer unit's checker: the recorded ``answer`` against the secret (every DataOps
    family: a list answer compared as a set, an integer as a number, text stripped)."""
    if answer is None:
        return CheckResult(False, "answer", "no answer recorded yet; use answer()")
    expected = unit.secret["answer"]
    if unit.answer_type == "list":
        expected = list_items(expected)
    if _normalise(answer, unit.answer_type) != expected:
        return CheckResult(False, "answer", "the recorded answer is not correct")
    return CheckResult(True)


def check(unit: Unit, ws: Workspace, answer=None) -> CheckResult:
    """Run ``unit``'s checker now: answers against the secret, edits against the workspace."""
    return check_with(unit, ws, answer, _check_edit)


def check_with(unit: Unit, ws: Workspace, answer, check_edit) -> CheckResult:
    """A DataOps family's checker: :func:`check_answer` for answer units; for edit units the
    text of ``secret["target"]`` (read through the sandbox) judged by ``check_edit(unit,
    text)``, a target that cannot be read failing ``parses``."""
    if unit.answer_type is not None:
        return check_answer(unit, answer)
    target = unit.secret["target"]
    try:
        text = ws.read_text(target)
    except SandboxError as e:
        return CheckResult(False, "parses", f"{target} cannot be read ({e.message})")
    return check_edit(unit, text)


def _check_edit(unit: Unit, text: str) -> CheckResult:
    if unit.kind == "metadata_repair":
        bad = metadata.check(
            unit.secret["format"], text, unit.secret["expected"], unit.secret["keep"]
        )
    else:
        bad = artifacts.check(
            unit.secret["format"], text, unit.secret["kind"], unit.secret["valid"]
        )
    return CheckResult(True) if bad is None else CheckResult(False, bad[0], bad[1])


def reference_solution(unit: Unit, ws: Workspace):
    """Solve ``unit`` from its secret (tests only): write the fix, return the answer or None."""
    if unit.answer_type is not None:
        return unit.secret["answer"]
    text = (
        unit.secret["fixed_text"]
        if unit.kind == "metadata_repair"
        else artifacts.dump(unit.secret["format"], unit.secret["fixed_doc"])
    )
    ws.write_text(unit.secret["target"], text)
    return None
