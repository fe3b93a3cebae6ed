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
                assert page.split("/")[-1] in test.read_text(), (
                    f"{b.where()}: {test} never reads it"
                )


def test_client_blocks_name_known_clients():
    """A ``clients`` block is slow (the real clients run in the slow set) and names only
    clients the runner can provide; the black-box tutorial runs both."""
    marked = [b for bs in ALL.values() for b in bs if "clients" in b.marks]
    for b in marked:
        assert b.slow and b.clients, b.where()
    tutorial = {c for b in ALL["docs/tutorials/blackbox-client.md"] for c in b.clients}
    assert tutorial == {"claude-code", "codex"}


def test_a_missing_client_fails_when_required(tmp_path, monkeypatch):
    """Under ``PUSHBENCH_REQUIRE_CLIENTS=1`` a client that cannot be found fails the page
    (CI); without it the page is skipped with the reason (a reader without the clients)."""
    monkeypatch.setenv("PUSHBENCH_CODEX", str(tmp_path / "no-such-codex"))
    monkeypatch.setenv("PUSHBENCH_REQUIRE_CLIENTS", "1")
    with pytest.raises(pytest.fail.Exception, match="codex not found"):
        _client_bin(tmp_path / "a", ["codex"])
    monkeypatch.delenv("PUSHBENCH_REQUIRE_CLIENTS")
    with pytest.raises(pytest.skip.Exception, match="codex not found"):
        _client_bin(tmp_path / "b", ["codex"])
    fake = tmp_path / "codex-1.0"
    fake.write_text("#!/bin/sh\necho fake codex\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PUSHBENCH_CODEX", str(fake))
    folder = _client_bin(tmp_path / "c", ["codex"])
    out = subprocess.run(["codex"], env={"PATH": folder}, capture_output=True, text=True)
    assert out.stdout == "fake codex\n"


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
        "optional-dependencies"
    ]
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


def _client_bin(tmp_path, agents) -> str | None:
    """A folder with ``claude`` / ``codex`` linked to the clients ``agents`` names, found as
    ``pushbench blackbox run`` finds them; None when no block needs one. A missing client fails
    the page under ``PUSHBENCH_REQUIRE_CLIENTS=1`` (CI installs them) and skips it otherwise,
    saying which client and how to install it (never silently)."""
    from pushbench.blackbox.clients import find_binary

    if not agents:
        return None
    folder = tmp_path / "client-bin"
    folder.mkdir(parents=True)
    for agent in agents:
        try:
            found = find_binary(agent)
        except FileNotFoundError as e:
            if os.environ.get("PUSHBENCH_REQUIRE_CLIENTS") == "1":
                pytest.fail(f"PUSHBENCH_REQUIRE_CLIENTS=1 but {e}")
            pytest.skip(f"the page runs a real client: {e}")
        (folder / {"claude-code": "claude", "codex": "codex"}[agent]).symlink_to(found)
    return str(folder)


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
    return subprocess.run(
        cmd, cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
    )


def _run_page(page: str, tmp_path, slow: bool):
    from pushbench.policies.llm.stub import StubServer

    runnable = [b for b in ALL[page] if b.runs_here and (slow or not b.slow)]
    agents = sorted({c for b in runnable for c in b.clients})
    clients = _client_bin(tmp_path, agents)
    work = _workdir(tmp_path)
    expected_failures = []
    env = _env()
    if clients:
        env["PATH"] = clients + os.pathsep + env["PATH"]
    env["PUSHBENCH_HOME"] = str(_home(tmp_path))
    with StubServer() as stub:
        port = int(stub.url.split(":")[2].split("/")[0])
        for block in runnable:
            res = _run(block, work, env, port)
            out = f"--- stdout\n{res.stdout[-4000:]}\n--- stderr\n{res.stderr[-4000:]}"
            if "xfail" in block.marks:
                assert res.returncode != 0, (
                    f"{block.where()} passed but is marked xfail ({block.marks['xfail']}): "
                    f"remove the marker\n{out}"
                )
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
