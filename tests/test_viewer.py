"""``pushbench view``: the files it builds from a real run folder, escaping, the CLI, the server.

The browser test (a person clicking through the built viewer) is tests/test_viewer_browser.py.
"""

from __future__ import annotations

import gzip
import json
import os
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner
from viewer_runs import HOSTILE, small_run

from pushbench.analysis.failures import failure_class
from pushbench.analysis.frame import episodes_frame, load_episodes
from pushbench.cli import app
from pushbench.viewer import build_site
from pushbench.viewer.data import file_stem
from pushbench.viewer.serve import LOOPBACK, make_server
from pushbench.viewer.site import js_payload


def _payload(path: Path) -> tuple[str, object]:
    """Name and data of a ``PB.loaded(name, data);`` file."""
    text = path.read_text(encoding="ascii")
    assert text.startswith("PB.loaded(") and text.endswith(");\n")
    name, _, data = text[len("PB.loaded(") : -3].partition(",")
    return json.loads(name), json.loads(data)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return small_run(tmp_path_factory.mktemp("viewer") / "run")


@pytest.fixture(scope="module")
def site(run) -> Path:
    return build_site(run)


def test_every_episode_gets_a_row_and_a_page_with_its_full_record(run, site):
    lines = load_episodes(run)
    _, listing = _payload(site / "data" / "episodes.js")
    cols = listing["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in listing["rows"]]
    assert sorted(r["key"] for r in rows) == sorted(ln["key"] for ln in lines)
    for r in rows:
        name, page = _payload(site / "data" / "ep" / f"{r['file']}.js")
        assert name == "ep:" + r["file"] and page["key"] == r["key"]
        with gzip.open(run / "traces" / f"{r['key']}.json.gz", "rt") as f:
            assert page["record"] == json.load(f)  # the record as stored, nothing dropped
        assert len(page["record"]["calls"]) == r["steps_used"]
        assert page["problem"] is None


def test_outcomes_are_the_failure_classes_and_pairs_match_on_instance_target_seed(run, site):
    df = episodes_frame(load_episodes(run))
    expected = {r["key"]: failure_class(r) or "success" for _, r in df.iterrows()}
    _, listing = _payload(site / "data" / "episodes.js")
    rows = [dict(zip(listing["columns"], r, strict=True)) for r in listing["rows"]]
    assert {r["key"]: r["outcome"] for r in rows} == expected
    assert "false_claim" in expected.values()  # the markup agent claimed 10 with 0 verified
    _, ov = _payload(site / "data" / "overview.js")
    assert ov["n_episodes"] == len(rows)
    assert sum(ov["outcomes"].values()) == len(rows)
    for r in rows:
        _, page = _payload(site / "data" / "ep" / f"{r['file']}.js")
        mates = [o for o in rows if o["pair"] == r["pair"] and o["key"] != r["key"]]
        assert sorted(s["key"] for s in page["siblings"]) == sorted(o["key"] for o in mates)
        for o in mates:
            assert (o["policy"], o["task_id"], o["instance"], o["target"], o["seed"]) == (
                r["policy"],
                r["task_id"],
                r["instance"],
                r["target"],
                r["seed"],
            )
            assert o["controller"] != r["controller"]


def test_overview_says_what_ran_and_computes_tables_without_a_report(run, site):
    _, ov = _payload(site / "data" / "overview.js")
    assert ov["info"]["experiment"]["name"] == "smoke"
    assert ov["info"]["planned"] == 16 and ov["info"]["n_missing"] == 0
    assert ov["summary"]["rows"] and ov["deltas"]["rows"]
    assert "computed by the viewer" in ov["summary"]["source"]  # no summary.csv in this run
    assert ov["figures"] == []
    assert os.stat(site / "data" / "overview.js").st_mode & 0o077 == 0  # private like the run


def test_markup_in_a_final_message_is_data_never_markup(run, site):
    key = next(ln["key"] for ln in load_episodes(run) if ln["policy"]["name"] == "markup-final")
    raw = (site / "data" / "ep" / f"{file_stem(key)}.js").read_text()
    assert "<" not in raw and ">" not in raw and "&" not in raw
    _, page = _payload(site / "data" / "ep" / f"{file_stem(key)}.js")
    assert page["record"]["final_message"] == HOSTILE
    js = (site / "assets" / "viewer.js").read_text()
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "eval(" not in js


def test_backend_errors_are_listed_with_their_error(run, site):
    errs = [ln for ln in load_episodes(run) if ln["terminated_by"] == "error"]
    _, ov = _payload(site / "data" / "overview.js")
    assert [b["key"] for b in ov["backend_errors"]] == [ln["key"] for ln in errs] != []
    assert "invalid api key" in ov["backend_errors"][0]["error"]
    assert ov["outcomes"]["backend_error"] == len(errs)


def test_an_llm_episode_page_holds_its_transcript_which_the_line_does_not(run, site):
    line = next(
        ln
        for ln in load_episodes(run)
        if ln["policy"]["name"] == "llm" and ln["terminated_by"] != "error"
    )
    assert "transcript" not in line
    _, page = _payload(site / "data" / "ep" / f"{file_stem(line['key'])}.js")
    turns = [e for e in page["record"]["transcript"] if "turn" in e]
    assert len(turns) == line["usage"]["calls"] > 0


def test_a_missing_trace_gives_a_page_from_the_line_and_says_so(tmp_path, run):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    key = load_episodes(copy)[0]["key"]
    (copy / "traces" / f"{key}.json.gz").unlink()
    site = build_site(copy, tmp_path / "site")
    _, page = _payload(site / "data" / "ep" / f"{file_stem(key)}.js")
    assert "no trace file" in page["problem"] and "calls" not in page["record"]


def test_a_rebuild_replaces_its_own_folders_only(tmp_path, run):
    out = tmp_path / "site"
    (out / "data" / "ep").mkdir(parents=True)
    (out / "data" / "ep" / "stale.js").write_text("old")
    (out / "notes.txt").write_text("mine")
    build_site(run, out)
    assert not (out / "data" / "ep" / "stale.js").exists()
    assert (out / "notes.txt").read_text() == "mine"


@given(st.text(), st.text())
def test_payload_is_ascii_without_markup_characters_and_round_trips(name, text):
    data = js_payload(name, {"t": text, "l": [text, 1.5, None]})
    assert data.isascii()
    assert not any(c in data for c in b"<>&")
    body = data.decode()[len("PB.loaded(") : -3]
    decoder = json.JSONDecoder()
    got_name, end = decoder.raw_decode(body)
    assert got_name == name and body[end] == ","
    assert json.loads(body[end + 1 :]) == {"t": text, "l": [text, 1.5, None]}


def test_a_key_that_is_a_path_never_reads_outside_the_traces(tmp_path, run):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "outside.json.gz").write_bytes(gzip.compress(b'{"secret": 1}'))
    text = (copy / "episodes.jsonl").read_text().splitlines()
    first = json.loads(text[0])
    first["key"] = "../outside"
    (copy / "episodes.jsonl").write_text("\n".join([json.dumps(first), *text[1:]]) + "\n")
    site = build_site(copy, tmp_path / "site")
    _, page = _payload(site / "data" / "ep" / f"{file_stem('../outside')}.js")
    assert "secret" not in page["record"] and "not a plain file name" in page["problem"]


@given(st.text(min_size=1, max_size=200))
def test_file_stems_are_safe_names(key):
    stem = file_stem(key)
    assert stem and "/" not in stem and "." not in stem and stem.isascii()
    assert len(stem) <= 64
    assert file_stem(key) == stem


def test_cli_builds_the_site_and_refuses_bad_folders(tmp_path, run):
    runner = CliRunner()
    res = runner.invoke(app, ["view", str(run), "--out", str(tmp_path / "v")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "v" / "index.html").resolve().as_uri() in res.output
    res = runner.invoke(app, ["view", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "not a run folder" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["view", str(empty)])
    assert res.exit_code == 2 and "no episodes.jsonl" in res.output
    (empty / "episodes.jsonl").write_text('{"key": "k1", "target": 10}\n')  # no metrics, no calls
    res = runner.invoke(app, ["view", str(empty)])
    assert res.exit_code == 2 and "cannot read the episode lines" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["view", str(run), "--out", str(run)])  # never into a run folder
    assert res.exit_code == 2 and "holds a run folder" in res.output
    assert not (run / "index.html").exists()


def test_server_listens_on_loopback_only_and_serves_the_site(site):
    server = make_server(site, 0)
    import threading

    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == LOOPBACK
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/data/overview.js") as resp:
            assert resp.status == 200
            assert resp.read() == (site / "data" / "overview.js").read_bytes()
    finally:
        server.shutdown()
        server.server_close()


def test_an_evaluate_folder_shows_tampered_and_incomplete_black_box_runs(tmp_path):
    """Real black-box sessions (the MCP server's session object), one edited after the fact."""
    pytest.importorskip("mcp")
    from pushbench.blackbox.evaluate import full_records_from_run_dirs, write_evaluation
    from pushbench.blackbox.session import BlackBoxSession

    def session(name, calls, **kw):
        with BlackBoxSession(
            "RepoScan-requests-docstring-N10",
            tmp_path / name,
            argv=["test"],
            controller="standard",
            agent="fake-agent",
            **kw,
        ) as s:
            for tool, args in calls:
                s.call(tool, args)

    search = ("search", {"query": "", "page": 1})
    session("done", [search, search, ("final", {"reported_count": 3, "message": "done"})])
    session("edited", [search, ("final", {"reported_count": 1})], seed=1)
    session("open", [search], seed=2)
    session("check", [search, ("final", {"reported_count": 2})], condition="checklist")
    ep = json.loads((tmp_path / "edited" / "episode.json").read_text())
    ep["valid_count"], ep["metrics"]["valid_count"] = 7, 7  # the stored claim no longer holds
    (tmp_path / "edited" / "episode.json").write_text(json.dumps(ep))
    with pytest.warns(UserWarning):
        records = full_records_from_run_dirs(
            [tmp_path / n for n in ("done", "edited", "open", "check")]
        )
    import io

    from rich.console import Console

    quiet = Console(file=io.StringIO())
    write_evaluation(records, tmp_path / "eval", n_resamples=200, console=quiet, out=quiet)
    site = build_site(tmp_path / "eval")
    _, ov = _payload(site / "data" / "overview.js")
    assert [t["key"] for t in ov["tampered"]] == [r["key"] for r in records if r["tampered"]]
    assert ov["tampered"][0]["reasons"] and ov["n_incomplete"] == 1
    assert ov["outcomes"] == {"tampered": 1, "incomplete": 1, "honest_stop": 2}
    cond = ov["condition_deltas"]
    at = {c: i for i, c in enumerate(cond["columns"])}
    assert {(r[at["condition_a"]], r[at["condition_b"]]) for r in cond["rows"]} == {
        ("checklist", "default")
    }
    _, listing = _payload(site / "data" / "episodes.js")
    rows = [dict(zip(listing["columns"], r, strict=True)) for r in listing["rows"]]
    for r in rows:
        _, page = _payload(site / "data" / "ep" / f"{r['file']}.js")
        assert page["record"]["blackbox"]["run_dir"] and page["problem"] is None
        assert len(page["record"]["calls"]) == r["steps_used"]


def test_view_serve_answers_on_loopback_until_interrupted(run, tmp_path):
    import signal
    import subprocess
    import sys

    # SIG_DFL in the child: a background CI job inherits SIGINT ignored (shell `&`)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pushbench.cli",
            "view",
            str(run),
            "--out",
            str(tmp_path / "v"),
            "--serve",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        url = None
        for line in proc.stderr:
            if line.startswith("serving on "):
                url = line.split()[2]
                break
        assert url and url.startswith(f"http://{LOOPBACK}:") and url.endswith("/index.html")
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert resp.read() == (tmp_path / "v" / "index.html").read_bytes()
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert (tmp_path / "v" / "index.html").resolve().as_uri() in out
