"""Reading run records back (``pushbench.runner.rundir.read_lines``): what survives damage.

A run directory's JSONL files are appended one whole line at a time; a killed process can leave
a torn last line, and disk or hand edits can leave an unreadable line anywhere. Each must cost
exactly that line (with a warning naming it), never the lines around it. These are the fast
tests `experiments/mutation_score.py` runs against the record-loading code.
"""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pushbench.runner.executors.local import InProcessExecutor
from pushbench.runner.experiment import validate
from pushbench.runner.rundir import read_lines
from pushbench.runner.sweep import run_experiment

A, B, C = {"key": "a", "n": 1}, {"key": "b", "n": 2.5}, {"key": "c", "nested": {"x": [1, None]}}
# Warnings name the line that called read_lines (stacklevel 2): the call in _read below. Under
# mutation testing mutmut calls read_lines through two trampoline frames, so there the warning
# names mutmut's trampoline file instead (and stacklevel 2 vs 3 cannot be told apart).
_CODE = read_lines.__code__.co_filename
UNDER_MUTMUT = Path(_CODE).name != "records.py"


def _jsonl(*objs: dict) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


def _read(path: Path, repair: bool = False) -> tuple[list[dict], list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = read_lines(path, repair=repair)
    return lines, caught


_SRC, _FIRST = inspect.getsourcelines(_read)
CALL_LINE = _FIRST + next(i for i, text in enumerate(_SRC) if "= read_lines(" in text)


def _names_the_caller(w: warnings.WarningMessage) -> bool:
    if UNDER_MUTMUT:
        return w.filename == _CODE
    return (w.filename, w.lineno) == (__file__, CALL_LINE)


def test_missing_file_is_empty(tmp_path):
    assert _read(tmp_path / "nope.jsonl") == ([], [])
    assert not (tmp_path / "nope.jsonl").exists()


def test_complete_lines_come_back_in_order_without_warnings(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_bytes(_jsonl(A, B, C))
    assert _read(path) == ([A, B, C], [])
    assert _read(path, repair=True) == ([A, B, C], [])
    assert path.read_bytes() == _jsonl(A, B, C)


def test_blank_lines_anywhere_are_skipped_silently(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b"\n" + _jsonl(A) + b"  \n\n" + _jsonl(B) + b"\t\n")
    assert _read(path) == ([A, B], [])


@pytest.mark.parametrize("repair", [False, True])
def test_torn_last_line_is_dropped_and_cut_only_when_repairing(tmp_path, repair):
    path = tmp_path / "e.jsonl"
    whole = _jsonl(A, B)
    torn = json.dumps(C).encode()[:9]
    path.write_bytes(whole + torn)
    lines, caught = _read(path, repair=repair)
    assert lines == [A, B]
    (w,) = caught
    assert w.category is UserWarning
    assert str(w.message) == (
        f"{path}: dropping a truncated last line ({len(torn)} bytes), "
        "probably from an interrupted run; that episode will run again"
    )
    assert _names_the_caller(w)  # not the writer module, not a frame further out
    assert path.read_bytes() == (whole if repair else whole + torn)
    if repair:  # repaired once: reading again is clean, and appending starts a fresh line
        assert _read(path) == ([A, B], [])


def test_reading_does_not_repair_by_default(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_bytes(_jsonl(A) + b'{"torn')
    with pytest.warns(UserWarning, match="truncated last line"):
        assert read_lines(path) == [A]
    assert path.read_bytes() == _jsonl(A) + b'{"torn'


def test_a_torn_only_line_leaves_nothing(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b'{"key": "a"')
    lines, caught = _read(path, repair=True)
    assert lines == [] and len(caught) == 1 and "(11 bytes)" in str(caught[0].message)
    assert path.read_bytes() == b""


@pytest.mark.parametrize(
    "bad", [b'{"key": "x", ', b"not json", b"\xff\xfe{}", b"[1, 2]", b'"a string"', b"42", b"null"]
)
def test_an_unreadable_middle_line_costs_only_that_line(tmp_path, bad):
    path = tmp_path / "e.jsonl"
    path.write_bytes(_jsonl(A) + b"\n" + bad + b"\n" + _jsonl(B, C))
    lines, caught = _read(path, repair=True)
    assert lines == [A, B, C]
    (w,) = caught
    assert str(w.message).startswith(f"{path}:3: unreadable line skipped")  # 1-based, blanks count
    assert _names_the_caller(w)
    assert path.read_bytes() == _jsonl(A) + b"\n" + bad + b"\n" + _jsonl(B, C)  # not "repaired"


def test_each_bad_line_is_named_once(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_bytes(b"x\n" + _jsonl(A) + b"y\n" + _jsonl(B) + b'{"torn')
    lines, caught = _read(path)
    assert lines == [A, B]
    msgs = [str(w.message) for w in caught]
    assert [m.split(": ", 1)[0] for m in msgs] == [str(path), f"{path}:1", f"{path}:3"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=3),
        max_size=6,
    ),
    st.lists(st.binary(max_size=12), max_size=3),
    st.data(),
)
def test_any_damage_loses_only_the_damaged_lines(tmp_path_factory, objs, junk, data):
    """Good lines survive whatever junk lines are interleaved and however the tail is torn."""
    good = [json.dumps(o).encode() for o in objs]
    junk = [j.replace(b"\n", b"").replace(b"\r", b"") for j in junk]
    junk = [j for j in junk if not _parses_as_object(j)]
    rows = good + junk
    order = data.draw(st.permutations(range(len(rows))))
    tail = data.draw(st.binary(max_size=6).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")))
    path = tmp_path_factory.mktemp("h") / "e.jsonl"
    path.write_bytes(b"".join(rows[i] + b"\n" for i in order) + tail)
    lines, _ = _read(path, repair=True)
    assert lines == [objs[i] for i in order if i < len(good)]
    assert path.read_bytes() == b"".join(rows[i] + b"\n" for i in order)


def _parses_as_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict) or not raw.strip()
    except ValueError:
        return False


def test_resume_reruns_only_the_episode_on_a_corrupt_middle_line(tmp_path):
    exp = validate(
        {
            "schema_version": 1,
            "name": "records",
            "controllers": ["standard"],
            "tasks": ["RepoScan-requests-docstring-N10"],
            "policies": ["diligent"],
            "seeds": [0, 1, 2],
        }
    )
    run_experiment(exp, tmp_path, executor=InProcessExecutor(), progress=False)
    path = tmp_path / "episodes.jsonl"
    first, middle, last = path.read_bytes().splitlines(keepends=True)
    lost = json.loads(middle)
    path.write_bytes(first + middle[:25] + b"\x00garbage\n" + last)
    with pytest.warns(UserWarning, match=r"episodes.jsonl:2: unreadable line skipped"):
        s = run_experiment(exp, tmp_path, executor=InProcessExecutor(), progress=False)
    assert (s["skipped"], s["ran"], s["errors"]) == (2, 1, 0)
    lines, _ = _read(path)
    assert [x["key"] for x in lines] == [
        json.loads(first)["key"],
        json.loads(last)["key"],
        lost["key"],
    ]
    assert lines[-1] == lost  # the same episode again, byte for byte the same record


# ----- family versions (issue 27) ---------------------------------------------------------------
def test_lines_and_traces_carry_the_family_version_without_changing_the_record():
    import gzip

    from pushbench import records, tasks
    from pushbench.runner.episode import run_episode

    rec = run_episode("RepoScan-requests-docstring-N10", "standard", "diligent", 0)
    assert "family_version" not in rec
    line = records.episode_line(rec)
    trace = json.loads(gzip.decompress(records.encode_trace(rec)))
    assert line["family_version"] == trace["family_version"] == tasks.family_version("reposcan")
    assert "family_version" not in rec  # the caller's record is untouched
    assert {k: v for k, v in trace.items() if k != "family_version"} == json.loads(json.dumps(rec))
    # a record that names its version keeps it (a re-written or black-box record)
    old = {**rec, "family_version": 7}
    assert records.episode_line(old)["family_version"] == 7
    assert json.loads(gzip.decompress(records.encode_trace(old)))["family_version"] == 7
    # no known family: nothing to add
    assert "family_version" not in records.episode_line({**rec, "family": "nosuch"})


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 10**6),
        st.floats(allow_nan=True),
        st.text(max_size=4),
        st.lists(st.integers(), max_size=2),
    )
)
def test_version_of_any_line_is_a_positive_integer_and_unversioned_lines_are_1(value):
    from pushbench import records

    v = records.version_of({"family_version": value})
    good = isinstance(value, int) and not isinstance(value, bool) and value > 0
    assert v == (value if good else records.UNVERSIONED)
    assert records.version_of({}) == records.UNVERSIONED == 1


def test_run_info_names_the_versions_of_each_invocation(tmp_path, monkeypatch):
    from pushbench import tasks
    from pushbench.runner.runinfo import run_info

    exp = validate(
        {
            "schema_version": 1,
            "name": "versions",
            "controllers": ["standard"],
            "tasks": ["RepoScan-requests-docstring-N10"],
            "policies": ["diligent"],
            "seeds": [0, 1],
        }
    )
    run_experiment(exp, tmp_path, executor=InProcessExecutor(), progress=False)
    info = run_info(tmp_path)
    assert info["family_versions"] == tasks.FAMILY_VERSIONS and info["other_family_versions"] == []
    path = tmp_path / "episodes.jsonl"
    first, second = path.read_bytes().splitlines(keepends=True)
    assert json.loads(first)["family_version"] == tasks.family_version("reposcan")
    # a resume under another version is named; the episode it runs again carries that version
    path.write_bytes(first)
    monkeypatch.setitem(tasks.FAMILY_VERSIONS, "reposcan", tasks.FAMILY_VERSIONS["reposcan"] + 1)
    run_experiment(exp, tmp_path, executor=InProcessExecutor(), progress=False)
    info = run_info(tmp_path)
    assert info["family_versions"]["reposcan"] == tasks.FAMILY_VERSIONS["reposcan"] - 1
    assert info["other_family_versions"] == [dict(tasks.FAMILY_VERSIONS)]
    lines, _ = _read(path)
    assert [x["family_version"] for x in lines] == [
        tasks.FAMILY_VERSIONS["reposcan"] - 1,
        tasks.FAMILY_VERSIONS["reposcan"],
    ]
    assert lines[1] == {**json.loads(second), "family_version": tasks.FAMILY_VERSIONS["reposcan"]}
