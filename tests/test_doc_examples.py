"""Every ```python and ```bash block of README.md and docs/ runs as written (issue 32).

The convention (markers, scratch folder, fast and slow sets) is in ``doc_examples.py`` and
docs/examples.md. Pages are found afresh, so a new docs page is covered without registration.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

import pytest
from doc_examples import ROOT, Block, blocks, pages

PAGES = pages()
ALL = {str(p.relative_to(ROOT)): blocks(p) for p in PAGES}
SKIP_LINKS = {".git", ".venv", "site", "runs", "__pycache__", ".pytest_cache", ".hypothesis"}
BLOCK_TIMEOUT = 600


def test_every_fence_names_its_language():
    """A block without a language would be neither run nor declared non-runnable."""
    bare = [b.where() for bs in ALL.values() for b in bs if not b.lang]
    assert bare == [], f"fence these as python/bash (run) or text/yaml/json (not run): {bare}"


def test_markers_sit_on_runnable_blocks():
    """A marker on a block that never runs would promise a check that does not happen."""
    wrong = [b.where() for bs in ALL.values() for b in bs if b.marks and not b.runnable]
    assert wrong == []


def test_the_examples_are_found():
    """The runner sees README's quick start and the tutorials (a parser bug would see nothing)."""
    assert any(b.lang == "bash" for b in ALL["README.md"])
    assert any(b.lang == "python" for b in ALL["README.md"])
    tutorials = [k for k in ALL if k.startswith("docs/tutorials/")]
    assert tutorials and all(any(b.runnable for b in ALL[k]) for k in tutorials)


def test_blocks_tested_elsewhere_are():
    """A ``tested: FILE`` block names a test file that exists and reads this page."""
    for page, bs in ALL.items():
        for b in bs:
            if "tested" in b.marks:
                test = ROOT / b.marks["tested"]
                assert test.is_file(), f"{b.where()}: no {test}"
                assert page.split("/")[-1] in test.read_text(), \
                    f"{b.where()}: {test} never reads it"


def test_getting_started_shows_the_readme_commands_verbatim():
    """docs/getting-started.md repeats the README's install and main-job blocks; the README's
    run in the slow set, so the page's are checked to be the same code (not run twice in CI)."""
    readme = {b.code for b in ALL["README.md"] if b.runnable}
    repeated = [b for b in ALL["docs/getting-started.md"] if "tested" in b.marks]
    assert len(repeated) == 2
    for b in repeated:
        assert b.code in readme, f"{b.where()} differs from every README block"


def test_install_blocks_name_existing_extras():
    """The fast half of an ``install`` block's check: every extra it names is in pyproject."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for bs in ALL.values():
        for b in bs:
            if "install" in b.marks:
                for group in re.findall(r"\.\[([\w,-]+)\]", b.code):
                    for name in group.split(","):
                        assert name in extras, f"{b.where()}: no extra {name!r}"


def _workdir(tmp_path):
    """A scratch folder with links to the repository's top-level entries."""
    work = tmp_path / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in SKIP_LINKS:
            (work / entry.name).symlink_to(entry)
    return work


def _home(tmp_path):
    """A private ``PUSHBENCH_HOME``: the built snapshots and indexes borrowed entry by entry
    (a tutorial's new snapshot lands here, never in the real cache), no ``user/``, own keys."""
    from pushbench import paths

    home = tmp_path / "pushbench-home"
    home.mkdir(mode=0o700)
    for entry in paths.home().iterdir():
        if entry.name in ("keys", "locks", "user") or entry.name.startswith(".private"):
            continue
        if entry.name in ("snapshots", "index"):
            (home / entry.name).mkdir(mode=0o700)
            for child in entry.iterdir():
                (home / entry.name / child.name).symlink_to(child)
        else:
            (home / entry.name).symlink_to(entry)
    return home


def _env():
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("COLUMNS", "100")
    env["NO_COLOR"] = "1"
    return env


def _run(block: Block, work, env, port: int | None) -> subprocess.CompletedProcess:
    code = block.code
    if "stub" in block.marks:
        code = code.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
    if "install" in block.marks:
        code = re.sub(r"\bpip install\b", "pip install --dry-run --quiet", code)
    if block.lang == "python":
        script = work / f"_example_{block.line}.py"
        script.write_text(code)
        cmd = [sys.executable, script.name]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", code]
    return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT)


def _run_page(page: str, tmp_path, slow: bool):
    from pushbench.policies.llm.stub import StubServer

    runnable = [b for b in ALL[page] if b.runs_here and (slow or not b.slow)]
    work = _workdir(tmp_path)
    expected_failures = []
    env = _env()
    env["PUSHBENCH_HOME"] = str(_home(tmp_path))
    with StubServer() as stub:
        port = int(stub.url.split(":")[2].split("/")[0])
        for block in runnable:
            res = _run(block, work, env, port)
            out = f"--- stdout\n{res.stdout[-4000:]}\n--- stderr\n{res.stderr[-4000:]}"
            if "xfail" in block.marks:
                assert res.returncode != 0, (
                    f"{block.where()} passed but is marked xfail ({block.marks['xfail']}): "
                    f"remove the marker\n{out}")
                expected_failures.append(f"{block.where()}: {block.marks['xfail']}")
                continue
            assert res.returncode == 0, f"{block.where()} ({block.lang}) failed\n{out}"
    if expected_failures:
        pytest.xfail("; ".join(expected_failures))


FAST = [p for p, bs in ALL.items() if any(b.runs_here and not b.slow for b in bs)]
SLOW = [p for p, bs in ALL.items() if any(b.runs_here and b.slow for b in bs)]


@pytest.mark.parametrize("page", FAST)
def test_page_examples(page, tmp_path):
    """The page's fast blocks, in order."""
    _run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", SLOW)
def test_page_examples_slow(page, tmp_path):
    """The whole page, slow and install blocks included, in order."""
    _run_page(page, tmp_path, slow=True)
