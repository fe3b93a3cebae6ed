"""experiments/compare_runs.py --family: one family's lines and rows of two run folders."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "compare_runs", ROOT / "experiments" / "compare_runs.py"
)
compare_runs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_runs)


def _run(folder: Path, lines: list[dict]) -> Path:
    folder.mkdir()
    (folder / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = "".join(f"{x['family']},{x['metrics']['success']}\n" for x in lines)
    for name in compare_runs.CSV_FILES:
        (folder / name).write_text("family,success\n" + rows)
    return folder


def test_family_filter_ignores_another_family_and_catches_a_change(tmp_path, capsys):
    synth = [{"key": f"k{i}", "family": "dataops", "metrics": {"success": i % 2}} for i in range(3)]
    public = [{"key": "p0", "family": "dataops_public", "metrics": {"success": 1}}]
    before = _run(tmp_path / "a", synth)
    after = _run(tmp_path / "b", synth + public)
    assert compare_runs.compare(before, after, traces=False, family="dataops")
    assert not compare_runs.compare(before, after, traces=False)  # the extra key and rows
    changed = [{**synth[0], "metrics": {"success": 1}}] + synth[1:] + public
    other = _run(tmp_path / "c", changed)
    assert not compare_runs.compare(before, other, traces=False, family="dataops")
    assert "metrics.success" in capsys.readouterr().out
