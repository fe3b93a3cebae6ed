"""pytest plugin loaded by the SWE-lite verifier (``-p pushbench_probe``): one JSON line per
test report, appended to ``$PUSHBENCH_PROBE_OUT`` as it happens, so a run killed by its timeout
still leaves the outcomes of the tests that finished."""

import json
import os

_OUT = os.environ.get("PUSHBENCH_PROBE_OUT")


def _emit(nodeid, when, outcome, message=None):
    if not _OUT:
        return
    rec = {"id": nodeid, "when": when, "outcome": outcome}
    if message:
        rec["message"] = message[:300]
    with open(_OUT, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec) + "\n")


def _crash(report):
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    return getattr(crash, "message", None) if report.failed else None


def pytest_runtest_logreport(report):
    outcome = report.outcome
    if outcome == "skipped" and hasattr(report, "wasxfail"):
        outcome = "xfailed"
    _emit(report.nodeid, report.when, outcome, _crash(report))


def pytest_collectreport(report):
    if report.failed:
        _emit(report.nodeid, "collect", "failed")
