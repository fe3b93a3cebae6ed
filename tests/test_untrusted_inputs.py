"""Issue 26: every input from outside gets a bounded, clear answer.

Each hostile input is built here, in a temporary folder, scaled down (bombs of a few hundred MB
of zeros, limits set low where the point is the limit): archives and folders for
``pushbench snapshots add``, Python files the indexer cannot take, request bodies for the model
server, paths for the viewer's server and routes, and experiment files. The checks: one
``error: ...`` line (or a listed skip), the exit code, memory bounded (peak RSS of a
subprocess, read from VmHWM in ``/proc/self/status``), nothing pinned or cached after a
refusal, and other snapshots still building. Every test that pins or caches uses its own
``PUSHBENCH_HOME``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pushbench import archives, snapshots, tasks, userdata
from pushbench.archives import Limits, SourceError, safe_extract
from pushbench.families.reposcan import indexer
from pushbench.runner.experiment import ExperimentError, read_experiment_file

ROOT = Path(__file__).resolve().parent.parent
GOOD = 'def good(x):\n    """Doc."""\n    return x\n'


# ----- helpers -------------------------------------------------------------------------------
@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("PUSHBENCH_HOME", str(h))
    monkeypatch.delenv(userdata.ENV_VAR, raising=False)
    tasks.reload()
    yield h
    monkeypatch.undo()
    tasks.reload()


def env_for(home: Path) -> dict:
    env = {**os.environ, "PUSHBENCH_HOME": str(home), "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop(userdata.ENV_VAR, None)
    return env


# A subprocess's own peak RSS (KiB): VmHWM of its address space. Not getrusage's ru_maxrss,
# which Linux carries over from the parent across fork + exec, so a child of a large pytest
# process would report pytest's peak (CI saw 1.3 GiB for a child that used a few MiB).
_PEAK = """
def peak_rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
"""

# The CLI in a subprocess, reporting its own peak RSS (KiB) on a last stderr line.
_MEASURED = _PEAK + textwrap.dedent("""
    import sys
    from pushbench.cli import app
    try:
        app(sys.argv[1:], prog_name="pushbench")
    finally:
        sys.stderr.write("\\nPEAK_RSS_KIB=%d\\n" % peak_rss_kib())
""")


class Ran:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code = proc.returncode
        body, _, tail = proc.stderr.rpartition("PEAK_RSS_KIB=")
        self.rss_mib = int(tail.strip()) / 1024 if tail.strip().isdigit() else None
        self.stderr = body.rstrip() if tail else proc.stderr
        self.stdout = proc.stdout

    def one_error(self, *needles: str) -> str:
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error: ")]
        assert self.code == 2, (self.code, self.stderr)
        assert "Traceback" not in self.stderr and len(errors) == 1, self.stderr
        for n in needles:
            assert n in errors[0], (n, errors[0])
        return errors[0]


# root reads every file whatever its mode: without these two capabilities it obeys the modes
NO_ROOT_READ = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def pushbench(home: Path, *args: str, obey_modes: bool = False, timeout: int = 300) -> Ran:
    prefix = NO_ROOT_READ if obey_modes and os.getuid() == 0 else []
    proc = subprocess.run(
        [*prefix, sys.executable, "-c", _MEASURED, *map(str, args)],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Ran(proc)


def nothing_left(home: Path, name: str) -> None:
    """No pin, no built snapshot, no build folder and no index for ``name``."""
    pins = home / "user" / "pins.yaml"
    assert not pins.exists() or name not in pins.read_text()
    snaps = home / "snapshots"
    assert not list(snaps.glob(f"{name}-*")) and not list(snaps.glob(".add-*")), (
        list(snaps.iterdir()) if snaps.exists() else None
    )
    assert not list((home / "index").glob(f"{name}-*"))


def package(folder: Path, n: int = 3) -> Path:
    pkg = folder / "pkg"
    pkg.mkdir(parents=True)
    for i in range(n):
        (pkg / f"m{i}.py").write_text(GOOD.replace("good", f"good{i}"))
    return folder


def zeros_zip(path: Path, mib: int, name: str = "pkg/zeros.bin") -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("pkg/m.py", GOOD)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as out:
            block = bytes(1 << 20)
            for _ in range(mib):
                out.write(block)
    return path


def zeros_tgz(path: Path, mib: int) -> Path:
    """A .tar.gz whose one big member is ``mib`` MiB of zeros, written as a stream."""
    with gzip.open(path, "wb", compresslevel=9) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        info = tarfile.TarInfo("pkg/m.py")
        info.size = len(GOOD)
        tar.addfile(info, io.BytesIO(GOOD.encode()))
        info = tarfile.TarInfo("pkg/zeros.bin")
        info.size = mib << 20

        class Zeros(io.RawIOBase):
            left = mib << 20

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n

        tar.addfile(info, io.BufferedReader(Zeros()))
    return path


@pytest.fixture(scope="module")
def baseline_rss(tmp_path_factory) -> float:
    """Peak RSS (MiB) of `snapshots add` on a small clean folder: the cost of the command."""
    tmp = tmp_path_factory.mktemp("baseline")
    ran = pushbench(tmp / "home", "snapshots", "add", "base", "--from", package(tmp / "src"))
    assert ran.code == 0, ran.stderr
    return ran.rss_mib


# ----- 1. archive bombs and limits -------------------------------------------------------------
@pytest.mark.parametrize("kind", ["zip", "tgz"])
def test_an_archive_bomb_is_refused_by_the_ratio_limit_in_bounded_memory(
    tmp_path, kind, baseline_rss
):
    """256 MiB of zeros in a few hundred KB: the default ratio limit (100:1 past 16 MiB) stops
    it while streaming; memory stays near the command's own and nothing is left behind."""
    archive = (
        zeros_zip(tmp_path / "bomb.zip", 256)
        if kind == "zip"
        else zeros_tgz(tmp_path / "bomb.tar.gz", 256)
    )
    assert archive.stat().st_size < 2 << 20
    home = tmp_path / "home"
    ran = pushbench(home, "snapshots", "add", "bomb", "--from", archive)
    ran.one_error("limit ratio", "--max-ratio", "nothing was kept")
    assert ran.rss_mib < baseline_rss + 64, (ran.rss_mib, baseline_rss)
    nothing_left(home, "bomb")


def test_the_same_bomb_with_limits_set_low_names_each_limit(tmp_path, baseline_rss):
    archive = zeros_zip(tmp_path / "bomb.zip", 64)
    home = tmp_path / "home"
    ran = pushbench(
        home,
        "snapshots",
        "add",
        "bomb",
        "--from",
        archive,
        "--max-ratio",
        "100000",
        "--max-total-bytes",
        "8M",
    )
    ran.one_error("limit total_bytes = 8.0 MiB", "--max-total-bytes")
    assert ran.rss_mib < baseline_rss + 64
    ran = pushbench(
        home,
        "snapshots",
        "add",
        "bomb",
        "--from",
        archive,
        "--max-ratio",
        "100000",
        "--max-file-bytes",
        "2M",
    )
    ran.one_error("limit file_bytes = 2.0 MiB", "--max-file-bytes", "pkg/zeros.bin")
    nothing_left(home, "bomb")


def _zip(path: Path, members: dict[str, bytes | None]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            if data is None:
                zf.writestr(zipfile.ZipInfo(name if name.endswith("/") else name + "/"), b"")
            else:
                zf.writestr(name, data)
    return path


def _tar(path: Path, members: dict[str, bytes | None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    "limit, value, members, needle",
    [
        ("files", 5, {f"pkg/m{i}.py": GOOD.encode() for i in range(8)}, "entries"),
        ("path_length", 40, {"pkg/" + "d" * 50 + ".py": GOOD.encode()}, "bytes)"),
        ("depth", 4, {"pkg/a/b/c/d/e.py": GOOD.encode()}, "parts deep"),
        ("file_bytes", 100, {"pkg/m.py": GOOD.encode() * 10}, "pkg/m.py"),
        ("total_bytes", 300, {f"pkg/m{i}.py": GOOD.encode() for i in range(8)}, "uncompressed"),
    ],
)
@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_each_limit_refuses_with_its_name_and_flag(
    home, tmp_path, limit, value, members, needle, fmt
):
    path = (_zip if fmt == "zip" else _tar)(tmp_path / f"a.{fmt}", members)
    with pytest.raises(archives.LimitExceeded) as err:
        snapshots.add_snapshot("lim", path, limits=Limits(**{limit: value}))
    msg = str(err.value)
    assert "\n" not in msg and f"limit {limit}" in msg and archives.FLAGS[limit] in msg, msg
    assert needle in msg, msg
    nothing_left(home, "lim")
    snapshots.add_snapshot("lim", path)  # the defaults take the same archive
    assert "lim" in snapshots.load_pins()


def test_folder_and_git_sources_are_bounded_too(home, tmp_path):
    src = package(tmp_path / "src", n=6)
    with pytest.raises(archives.LimitExceeded, match="--max-files"):
        snapshots.add_snapshot("fold", src, limits=Limits(files=4))
    with pytest.raises(archives.LimitExceeded, match="--max-file-bytes"):
        snapshots.add_snapshot("fold", src, limits=Limits(file_bytes=10))
    import git

    repo = git.Repo.init(src)
    repo.index.add([str(p.relative_to(src)) for p in src.rglob("*.py")])
    repo.index.commit("c")
    with pytest.raises(archives.LimitExceeded, match="--max-total-bytes"):
        snapshots.add_snapshot("gitl", src, limits=Limits(total_bytes=100))
    nothing_left(home, "fold")
    nothing_left(home, "gitl")


def test_sizes_parse_and_bad_limit_values_are_one_line(tmp_path):
    assert archives.parse_size("512M") == 512 << 20 and archives.parse_size("2GiB") == 2 << 30
    assert archives.parse_size("1000") == 1000
    for bad in ("", "0", "-1", "1.5G", "lots", "1" * 30):
        with pytest.raises(SourceError, match="give a size"):
            archives.parse_size(bad, "--max-total-bytes")
    ran = pushbench(
        tmp_path / "home", "snapshots", "add", "x", "--from", tmp_path, "--max-total-bytes", "lots"
    )
    ran.one_error("--max-total-bytes")


# ----- 1b. archive and folder shapes -------------------------------------------------------------
@pytest.mark.parametrize(
    "members, needle",
    [
        ({"pkg/a": b"x", "pkg/a/b.py": GOOD.encode()}, "needs 'pkg/a' to be a folder"),
        ({"pkg/a/b.py": GOOD.encode(), "pkg/a": b"x"}, "also holds it as a folder"),
        ({"pkg/m.py": GOOD.encode(), "pkg//m.py": b"y"}, "appears twice"),
        ({"pkg/" + "n" * 300 + ".py": GOOD.encode()}, "name part of 303 bytes"),
    ],
)
@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_clashing_and_overlong_member_names_are_one_line_errors(
    home, tmp_path, members, needle, fmt
):
    path = (_zip if fmt == "zip" else _tar)(tmp_path / f"a.{fmt}", members)
    ran = pushbench(home, "snapshots", "add", "shape", "--from", path)
    ran.one_error(needle)
    nothing_left(home, "shape")


def test_non_utf8_names_are_refused_and_shown_escaped(home, tmp_path):
    tpath = tmp_path / "latin.tar"
    with tarfile.open(tpath, "w", encoding="latin-1", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("pkg/caf\xe9.py")
        info.size = len(GOOD)
        tar.addfile(info, io.BytesIO(GOOD.encode()))
    ran = pushbench(home, "snapshots", "add", "latin", "--from", tpath)
    ran.one_error("not UTF-8", r"caf\xe9.py")
    zpath = tmp_path / "latin.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("pkg/cafX.py", GOOD)
    # the name's raw bytes, not flagged UTF-8 (zip tools on Latin-1 systems write these)
    zpath.write_bytes(zpath.read_bytes().replace(b"cafX", b"caf\x82"))
    ran = pushbench(home, "snapshots", "add", "latin", "--from", zpath)
    ran.one_error("not UTF-8", r"\x82")
    folder = package(tmp_path / "src")
    with open(os.fsencode(folder / "pkg") + b"/caf\xe9.py", "wb") as fh:
        fh.write(GOOD.encode())
    ran = pushbench(home, "snapshots", "add", "latin", "--from", folder)
    ran.one_error("not UTF-8", r"caf\xe9.py")
    nothing_left(home, "latin")


@pytest.mark.parametrize("what", ["file", "folder"])
@pytest.mark.skipif(
    os.getuid() == 0 and shutil.which("setpriv") is None,
    reason="as root, needs setpriv to make file modes apply",
)
def test_unreadable_files_and_folders_are_an_error_unless_skipped_and_listed(tmp_path, what):
    src = package(tmp_path / "src")
    secret = src / "pkg" / ("secret.py" if what == "file" else "private")
    if what == "file":
        secret.write_text(GOOD)
    else:
        secret.mkdir()
        (secret / "inner.py").write_text(GOOD)
    home = tmp_path / "home"
    secret.chmod(0)
    try:
        ran = pushbench(home, "snapshots", "add", "unr", "--from", src, obey_modes=True)
        ran.one_error("cannot read", "pkg/" + secret.name, "--skip-unreadable")
        nothing_left(home, "unr")
        ran = pushbench(
            home, "snapshots", "add", "unr", "--from", src, "--skip-unreadable", obey_modes=True
        )
        assert ran.code == 0, ran.stderr
        assert f"skipped (unreadable): 'pkg/{secret.name}'" in ran.stderr
        assert "1 unreadable" in ran.stderr
    finally:
        secret.chmod(0o700)


# ----- 2. the indexer refuses, per file, what it cannot parse within bounds -------------------
def hostile_package(folder: Path) -> Path:
    src = package(folder)
    (src / "pkg" / "huge.py").write_bytes(b"x = 1\n" * ((indexer.MAX_PY_BYTES // 6) + 10))
    (src / "pkg" / "deep_sum.py").write_text("y = " + "+".join(["1"] * 100_000) + "\n")
    (src / "pkg" / "deep_not.py").write_text("z = " + "not " * 50_000 + "1\n")
    (src / "pkg" / "broken.py").write_text("def f(:\n")
    return src


def test_files_the_indexer_cannot_take_are_skipped_listed_and_counted(tmp_path, baseline_rss):
    src = hostile_package(tmp_path / "src")
    home = tmp_path / "home"
    ran = pushbench(home, "snapshots", "add", "hostile", "--from", src)
    assert ran.code == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    assert "skipped pkg/huge.py: too large" in ran.stderr
    assert "skipped pkg/deep_sum.py: too deep" in ran.stderr
    assert "skipped pkg/deep_not.py: too deep" in ran.stderr
    assert ".py skipped: 4 files (1 too large, 2 too deep, 1 not parseable)" in ran.stderr
    assert "3 definitions" in ran.stderr
    assert ran.rss_mib < baseline_rss + 200, (ran.rss_mib, baseline_rss)
    # the pin is usable: index and facts agree (the same files skipped) in a fresh process
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "from pushbench.families.reposcan import indexer as i;"
                "print(len(i.load_index('hostile')), len(i.load_facts('hostile')))"
            ),
        ],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.stdout.split() == ["3", "3"], check.stderr
    ran = pushbench(home, "snapshots", "build", "hostile", "base-missing")
    assert "ok hostile" in ran.stderr


def test_a_recursion_error_is_judged_on_a_fresh_stack():
    """The same file is skipped or kept however deep the caller's stack is."""

    def at_depth(source: str, n: int):
        return indexer.parse_checked(source)[1] if n == 0 else at_depth(source, n - 1)

    for terms in (100_000, 3_000, 2_000, 1_000):
        source = "y = " + "+".join(["1"] * terms) + "\n"
        answers = {at_depth(source, n) for n in (0, 300, 700)}
        assert len(answers) == 1, (terms, answers)
    assert at_depth("y = " + "+".join(["1"] * 100_000), 0) == "too deep"


def test_nothing_is_pinned_or_cached_when_indexing_fails(home, tmp_path):
    src = package(tmp_path / "src")

    def failing_index(root):
        raise MemoryError("simulated")

    with pytest.raises(MemoryError):
        snapshots.add_snapshot("idx", src, check=failing_index)
    nothing_left(home, "idx")
    seen = []
    snapshots.add_snapshot("idx", src, check=seen.append)
    assert len(seen) == 1 and "idx" in snapshots.load_pins()


def test_snapshots_build_reports_a_broken_pin_and_builds_the_others(tmp_path):
    home = tmp_path / "home"
    good, gone = package(tmp_path / "good"), package(tmp_path / "gone")
    for name, src in (("good", good), ("gone", gone)):
        assert pushbench(home, "snapshots", "add", name, "--from", src).code == 0
    shutil.rmtree(home / "snapshots")
    shutil.rmtree(gone)
    ran = pushbench(home, "snapshots", "build", "gone", "good")
    assert ran.code == 2 and "Traceback" not in ran.stderr, ran.stderr
    errors = [ln for ln in ran.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "snapshot gone:" in errors[0] and "missing" in errors[0]
    assert "ok good" in ran.stderr


# ----- 3. model server ---------------------------------------------------------------------------
pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from pushbench.modelserver import PolicyBackend, build_app, running  # noqa: E402
from pushbench.modelserver.app import RequestLog  # noqa: E402
from pushbench.modelserver.core import MODEL  # noqa: E402

API_PATHS = {
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
    "chat": "/v1/chat/completions",
}


def api_shaped(path: str, resp) -> bool:
    body = resp.json()
    if resp.status_code == 200:
        return True
    if "messages" in path:
        return body.get("type") == "error" and set(body["error"]) == {"type", "message"}
    return set(body["error"]) == {"message", "type", "param", "code"}


def test_a_gzip_bomb_body_is_cut_at_the_limit_in_bounded_memory(tmp_path):
    """1 MiB of gzip that inflates to 1 GiB: 413 after at most MAX_BODY decompressed bytes."""
    script = _PEAK + textwrap.dedent("""
        import zlib, json
        from starlette.testclient import TestClient
        from pushbench.modelserver import PolicyBackend, build_app
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        block = bytes(1 << 20)
        body = b"".join(c.compress(block) for _ in range(1024)) + c.flush()
        r = TestClient(build_app(PolicyBackend("diligent"))).post(
            "/v1/messages", content=body, headers={"content-encoding": "gzip"})
        print(json.dumps([r.status_code, r.json(), len(body),
                          peak_rss_kib()]))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env_for(tmp_path / "h"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    status, body, size, rss_kib = json.loads(out.stdout.strip().splitlines()[-1])
    assert size < 2 << 20 and status == 413, (status, body)
    assert (
        body["error"]["type"] == "request_too_large" and "decompressed" in body["error"]["message"]
    )
    assert rss_kib / 1024 < 600, rss_kib  # the old reader held the whole gigabyte


def test_gzip_bodies_within_the_limit_still_work_and_truncated_ones_are_400():
    c = TestClient(build_app(PolicyBackend("diligent")))
    payload = json.dumps(
        {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    r = c.post(
        "/v1/messages",
        content=gzip.compress(payload) + gzip.compress(b" "),
        headers={"content-encoding": "gzip"},
    )
    assert r.status_code == 400 and "first observation" in r.json()["error"]["message"]
    r = c.post(
        "/v1/messages", content=gzip.compress(payload)[:-12], headers={"content-encoding": "gzip"}
    )
    assert r.status_code == 400 and "truncated" in r.json()["error"]["message"]


def test_a_body_cut_mid_way_is_a_400_logged_as_one_line(tmp_path, caplog):
    log = tmp_path / "requests.jsonl"
    with (
        running(PolicyBackend("diligent"), str(log)) as url,
        caplog.at_level("WARNING", logger="pushbench.modelserver"),
    ):
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(
                b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                b'\r\nContent-Length: 5000\r\n\r\n{"model": '
            )
        for _ in range(200):
            if log.exists() and log.read_text():
                break
            import time

            time.sleep(0.05)
    entries = [json.loads(x) for x in log.read_text().splitlines()]
    assert entries and entries[-1]["status"] == 400 and "cut off" in entries[-1]["error"]
    cut = [r for r in caplog.records if "cut off" in r.getMessage()]
    assert len(cut) == 1 and cut[0].exc_info is None and "\n" not in cut[0].getMessage()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_an_unknown_model_gets_each_apis_own_not_found_and_models_lists_the_served(tmp_path):
    c = TestClient(
        build_app(PolicyBackend("diligent", models=(MODEL, "alias")), RequestLog(tmp_path / "log"))
    )
    assert stat.S_IMODE((tmp_path / "log").stat().st_mode) == 0o600
    listed = c.get("/v1/models").json()
    assert [m["id"] for m in listed["data"]] == [MODEL, "alias"]
    bodies = {
        "anthropic": {
            "model": "claude-x",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        },
        "responses": {"model": "gpt-x", "input": "hi"},
        "chat": {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]},
    }
    for api, path in API_PATHS.items():
        r = c.post(path, json=bodies[api])
        assert r.status_code == 404 and api_shaped(path, r), r.text
        err = r.json()["error"]
        if api == "anthropic":
            assert err["type"] == "not_found_error"
        else:
            assert err["code"] == "model_not_found" and err["param"] == "model"
        assert "not found" in err["message"] and MODEL in err["message"]
    assert c.get("/v1/models/alias").json()["id"] == "alias"
    assert c.get("/v1/models/nope").status_code == 404


HEADER_VALUES = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(sorted(API_PATHS.values()) + ["/v1/messages/count_tokens"]),
    body=st.one_of(
        st.binary(max_size=400),
        st.binary(max_size=400).map(gzip.compress),
        st.binary(max_size=400).map(lambda b: gzip.compress(b)[:-3]),
    ),
    encoding=st.sampled_from(["gzip", "identity", "", "GZIP", "br", "gzip, gzip"]),
    extra=st.dictionaries(
        st.sampled_from(["content-type", "x-api-key", "anthropic-version", "accept", "x-random"]),
        HEADER_VALUES,
        max_size=3,
    ),
)
def test_property_any_body_and_headers_get_an_api_shaped_answer(path, body, encoding, extra):
    c = TestClient(build_app(PolicyBackend("diligent")), raise_server_exceptions=True)
    r = c.post(path, content=body, headers={**extra, "content-encoding": encoding})
    assert r.status_code in (200, 400, 404, 413), r.status_code
    assert (
        api_shaped(path, r)
        if path != "/v1/messages/count_tokens" or r.status_code != 200
        else "input_tokens" in r.json()
    )


# ----- 4. viewer ----------------------------------------------------------------------------------
def test_the_viewer_server_serves_only_the_sites_files(tmp_path):
    import http.client
    import threading

    from pushbench.viewer.serve import make_server

    site = tmp_path / "site"
    (site / "data" / "ep").mkdir(parents=True)
    (site / "index.html").write_text("<html></html>")
    (site / "data" / "ep" / "k.js").write_text("PB.loaded('ep:k', {});\n")
    (tmp_path / "evil.js").write_text("alert(1)")
    server = make_server(site, 0)
    (site / "data" / "late.js").write_text("written after the server started")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:

        def get(path: str) -> int:
            conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
            conn.request("GET", path)
            status = conn.getresponse().status
            conn.close()
            return status

        assert get("/") == get("/index.html") == get("/data/ep/k.js") == 200
        assert get("/data/") == get("/data/ep/") == get("/data") == 404  # no listings
        assert get("/../evil.js") == get("/data/ep/..%2F..%2F..%2Fevil.js") == 404
        assert get("/data/late.js") == 404
        for bad in ("/index.html%00", "/%00", "/%ff%fe", "/data\\ep\\k.js", "index.html"):
            assert get(bad) == 400, bad
    finally:
        server.shutdown()
        server.server_close()


NODE_HARNESS = r"""
const fs = require("fs"), path = require("path"), vm = require("vm");
const site = process.argv[2], hash = process.argv[3];
const loaded = [];
function el(tag) {
  return { tag, children: [], attrs: {}, style: {}, setAttribute(k, v) { this.attrs[k] = v; },
    getAttribute(k) { return k in this.attrs ? this.attrs[k] : null; },
    removeAttribute() {}, addEventListener() {}, replaceChildren() {},
    appendChild(c) { this.children.push(c); if (this.isHead) load(c); return c; },
    set textContent(v) {}, get textContent() { return ""; } };
}
const head = el("head"); head.isHead = true;
const doc = { head, body: el("body"), createElement: el, createElementNS: (_, t) => el(t),
  createTextNode: (t) => ({ text: t }), getElementById: () => el("div") };
const ctx = { document: doc, location: { hash }, performance: { now: () => 0 },
  addEventListener() {}, scrollTo() {}, Node: function () {}, console, setTimeout, Promise, Map,
  JSON, Object };
process.on("uncaughtException", () => {});  // a view failing to render is not the question
ctx.window = ctx;
function load(s) {
  loaded.push(s.src);
  const file = path.join(site, s.src);
  setTimeout(() => {
    if (path.resolve(file).startsWith(path.resolve(site)) && fs.existsSync(file)) {
      vm.runInContext(fs.readFileSync(file, "utf8"), ctx); s.onload && s.onload();
    } else { s.onerror && s.onerror(); }
  }, 0);
}
vm.createContext(ctx);
vm.runInContext(fs.readFileSync(path.join(site, "assets", "viewer.js"), "utf8"), ctx);
setTimeout(() => console.log(JSON.stringify(loaded)), 300);
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the viewer's script")
def test_viewer_routes_load_only_episode_files_the_site_wrote(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from viewer_runs import small_run

    from pushbench.viewer import build_site

    site = build_site(small_run(tmp_path / "run"))
    (tmp_path / "run" / "evil.js").write_text("throw 'evil'")
    harness = tmp_path / "harness.js"
    harness.write_text(NODE_HARNESS)
    stems = json.loads((site / "data" / "files.js").read_text()[len('PB.loaded("files",') : -3])

    def scripts(hash_: str) -> list[str]:
        out = subprocess.run(
            ["node", str(harness), str(site), hash_], capture_output=True, text=True, timeout=60
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    good = scripts(f"#/episode/{stems[0]}")
    assert f"data/ep/{stems[0]}.js" in good
    for evil in (
        "#/episode/..%2F..%2F..%2Fevil",
        "#/episode/..%2Fevil",
        "#/pair/..%2Fx/..%2F..%2Fevil",
        "#/episode/" + stems[0] + "%2F..%2F..%2Fevil",
    ):
        loaded = scripts(evil)
        assert all(s in ("data/files.js", "data/overview.js") for s in loaded), (evil, loaded)


# ----- 5. experiment files ------------------------------------------------------------------------
def test_a_huge_integer_in_an_experiment_is_one_line_with_its_line(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(
        "name: t\ntasks: [RepoScan-requests-docstring-N10]\ncontrollers: [standard]\n"
        "policies: [random]\nseeds: [" + "9" * 5000 + "]\n"
    )
    with pytest.raises(ExperimentError, match=r"line 5: an integer of 5000 digits"):
        read_experiment_file(path)
    ran = pushbench(tmp_path / "home", "run", path, "--out", tmp_path / "o")
    ran.one_error("5000 digits")


def test_duplicate_keys_are_refused_with_their_line_numbers(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: t\nseeds: [0]\ntasks: [a]\nseeds: [1]\n")
    with pytest.raises(ExperimentError, match="duplicate key 'seeds' at lines 2 and 4"):
        read_experiment_file(path)
    path.write_text("name: t\npolicies:\n  - name: x\n    params: {a: 1, a: 2}\n")
    with pytest.raises(ExperimentError, match="duplicate key 'a' at lines 4 and 4"):
        read_experiment_file(path)
    path.write_text("base: &b {a: 1}\nname: t\nother:\n  <<: *b\n  a: 2\n")
    assert read_experiment_file(path)["other"] == {"a": 2}  # a merge key may be overridden
    ran = pushbench(tmp_path / "home", "run", path.with_name("dup.yaml"), "--out", tmp_path / "o")
    assert ran.code == 2


# ----- hypothesis: random archives ---------------------------------------------------------------
NAME_PARTS = st.sampled_from(
    ["pkg", "a", "b", "a.py", "..", ".", "", "x" * 260, "\\", "c:", "caf\xe9", "\x00", "sub"]
)
MEMBERS = st.lists(
    st.tuples(
        st.lists(NAME_PARTS, min_size=1, max_size=4).map("/".join),
        st.sampled_from(["file", "dir", "symlink", "hardlink", "fifo"]),
        st.integers(0, 3000),
    ),
    min_size=1,
    max_size=8,
)


def _build(path: Path, fmt: str, members) -> bool:
    import warnings

    try:
        if fmt.startswith("zip"):
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
                for name, kind, size in members:
                    info = zipfile.ZipInfo(name + ("/" if kind == "dir" else ""))
                    mode = {
                        "file": stat.S_IFREG,
                        "dir": stat.S_IFDIR,
                        "symlink": stat.S_IFLNK,
                        "hardlink": stat.S_IFREG,
                        "fifo": stat.S_IFIFO,
                    }[kind]
                    info.external_attr = (mode | 0o644) << 16
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # "Duplicate name": that is the point
                        zf.writestr(info, b"" if kind == "dir" else b"z" * size)
        else:
            latin = fmt.endswith("latin-1")  # names as latin-1 bytes: not UTF-8
            fmt_ = tarfile.GNU_FORMAT if latin else tarfile.PAX_FORMAT
            with tarfile.open(
                path, "w:gz", format=fmt_, encoding="latin-1" if latin else "utf-8"
            ) as tar:
                for name, kind, size in members:
                    info = tarfile.TarInfo(name)
                    info.type = {
                        "file": tarfile.REGTYPE,
                        "dir": tarfile.DIRTYPE,
                        "symlink": tarfile.SYMTYPE,
                        "hardlink": tarfile.LNKTYPE,
                        "fifo": tarfile.FIFOTYPE,
                    }[kind]
                    info.linkname = "a" if kind in ("symlink", "hardlink") else ""
                    data = b"z" * size if kind == "file" else b""
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    except (ValueError, OSError, UnicodeError):
        return False
    return True


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    members=MEMBERS,
    fmt=st.sampled_from(["zip", "tar.gz", "tar.gz-latin-1"]),
    limits=st.builds(
        Limits,
        total_bytes=st.integers(1, 20000),
        file_bytes=st.integers(1, 5000),
        files=st.integers(1, 10),
        path_length=st.integers(1, 600),
        depth=st.integers(1, 6),
        ratio=st.integers(1, 1000),
    ),
)
def test_property_random_archives_raise_only_source_errors_and_stay_inside(
    tmp_path_factory, members, fmt, limits
):
    base = tmp_path_factory.mktemp("h")
    archive = base / ("a.zip" if fmt == "zip" else "a.tar.gz")
    if not _build(archive, fmt, members):
        return
    target = base / "box" / "dest"
    target.mkdir(parents=True)
    try:
        done = safe_extract(archive, target, limits)
    except SourceError as e:
        assert "\n" not in str(e) and list(target.iterdir()) == []
    else:
        assert done.files <= limits.files and done.bytes <= limits.total_bytes
        for p in target.rglob("*"):
            assert p.is_dir() or (p.is_file() and not p.is_symlink()), p
    outside = [
        p
        for p in base.rglob("*")
        if p != archive and target not in (p, *p.parents) and p not in (base / "box", target)
    ]
    assert outside == []
