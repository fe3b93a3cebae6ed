"""Install a baseline into its own pinned virtual environment (``pushbench baselines install``).

A baseline is a program PushBench drives as a black box (Aider, Letta). Its pin file ships beside
this module (``<name>.txt``: exact ``name==version`` requirements, ``#`` comments), optionally
with ``<name>-constraints.txt`` (exact pins given to pip as ``-c``: they cap the versions of
whatever the requirements pull in; Letta's are its archived ``uv.lock``), and it is installed
with ``python -m venv`` + ``pip install`` into ``$PUSHBENCH_HOME/baselines/<name>``, never into
PushBench's own environment (Aider pins about a hundred exact versions that clash with
PushBench's). A baseline may add steps after pip (:data:`EXTRA_STEPS`: Letta's database
migrations, which ship only in its sdist).

Idempotence: the marker ``.pushbench-baseline.json`` (written last, after pip succeeded) holds
the digest of the pin file's requirements, the constraints and the Python version; an install whose
marker
matches is kept as it is, anything else (a half-finished venv, another pin, another Python) is
removed and built again. A pip failure (the index cannot serve the pin, no network) removes the
half-built venv and raises :class:`BaselineError` with one line quoting pip's last error.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import PushBenchError

MARKER = ".pushbench-baseline.json"
_PIN_DIR = Path(__file__).resolve().parent
# name -> (the distribution whose version is reported, the program inside the venv)
BASELINES: dict[str, tuple[str, str]] = {
    "aider": ("aider-chat", "aider"),
    "letta": ("letta", "letta"),
}
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


MIGRATIONS = Path("share") / "letta-migrations"  # alembic.ini + alembic/ of letta's sdist
_UNPACK = """import sys, tarfile
src, dest = sys.argv[1], sys.argv[2]
arc = tarfile.open(src)
top = arc.getnames()[0].split('/')[0]
want = [m for m in arc.getmembers() if m.name == top + '/alembic.ini'
        or m.name.startswith(top + '/alembic/')]
if not any(m.name.endswith('alembic.ini') for m in want):
    sys.exit('ERROR: no alembic.ini in ' + src)
for m in want:
    m.name = m.name[len(top) + 1:]
arc.extractall(dest, members=want, filter='data')
"""


def _letta_download(root: Path, pin: Pin) -> list[str]:
    return [
        str(root / "bin" / "python"),
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--no-input",
        "--disable-pip-version-check",
        "--quiet",
        "-d",
        str(root / "share" / "sdist"),
        f"letta=={pin.version_of('letta')}",
    ]


def _letta_unpack(root: Path, pin: Pin) -> list[str]:
    sdist = root / "share" / "sdist" / f"letta-{pin.version_of('letta')}.tar.gz"
    return [str(root / "bin" / "python"), "-c", _UNPACK, str(sdist), str(root / MIGRATIONS)]


# Steps after pip, per baseline: (command for (root, pin), what it does). Letta's alembic
# migrations (its database schema) ship in the sdist only, not in the wheel pip installs.
EXTRA_STEPS: dict[str, tuple] = {
    "letta": (
        (_letta_download, "download letta's sdist (its database migrations)"),
        (_letta_unpack, "unpack letta's database migrations"),
    )
}


class BaselineError(PushBenchError, RuntimeError):
    """A baseline cannot be installed or found; the message says what to do."""


@dataclass(frozen=True)
class Pin:
    name: str
    requirements: tuple[str, ...]  # exact "dist==version" lines, in file order
    constraints: tuple[str, ...] = ()  # exact pins passed to pip with -c (may be empty)

    @property
    def digest(self) -> str:
        """What the install depends on: requirements, constraints, the Python minor version."""
        blob = {"req": self.requirements, "py": list(sys.version_info[:2])}
        if self.constraints:  # absent for pins without constraints: their digest is unchanged
            blob["con"] = self.constraints
        return hashlib.sha256(json.dumps(blob).encode()).hexdigest()

    def version_of(self, dist: str) -> str | None:
        norm = _norm(dist)
        for r in self.requirements:
            name, _, version = r.partition("==")
            if _norm(name) == norm:
                return version
        return None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(name: str, text: str) -> Pin:
    """The requirements of pin file text: one exact ``dist==version`` per line; blank lines and
    ``#`` comments ignored. Anything else (ranges, URLs, options) is a :class:`BaselineError`
    naming the line: a baseline is reproducible only with exact pins."""
    reqs: list[str] = []
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _REQ.match(line):
            raise BaselineError(
                f"pin file of {name!r}, line {i}: {line[:80]!r} is not an exact "
                "pin (write dist==version)"
            )
        if any(_norm(r.partition("==")[0]) == _norm(line.partition("==")[0]) for r in reqs):
            raise BaselineError(
                f"pin file of {name!r}, line {i}: {line[:80]!r} pins a distribution twice"
            )
        reqs.append(line)
    if not reqs:
        raise BaselineError(f"pin file of {name!r} pins nothing")
    return Pin(name, tuple(reqs))


def pin_file(name: str) -> Path:
    if name not in BASELINES:
        raise BaselineError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
    return _PIN_DIR / f"{name}.txt"


def constraints_file(name: str) -> Path:
    return pin_file(name).with_name(f"{name}-constraints.txt")


def read_pin(name: str) -> Pin:
    try:
        text = pin_file(name).read_text()
    except OSError as e:
        raise BaselineError(f"cannot read the pin file of {name!r}: {e.strerror or e}") from None
    pin = parse_pin(name, text)
    cfile = constraints_file(name)
    if cfile.is_file():
        con = parse_pin(f"{name} (constraints)", cfile.read_text()).requirements
        pin = Pin(pin.name, pin.requirements, con)
    return pin


def venv_dir(name: str) -> Path:
    return paths.home() / "baselines" / name


def program(name: str, root: Path | None = None) -> Path:
    """The baseline's executable inside its venv (it may not exist yet)."""
    return (root or venv_dir(name)) / "bin" / BASELINES[name][1]


def _marker(root: Path) -> dict | None:
    try:
        data = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def installed(name: str, root: Path | None = None) -> dict | None:
    """The marker of ``name``'s install if it matches the current pin and its program exists."""
    root = root or venv_dir(name)
    mark = _marker(root)
    if mark is None or mark.get("pin_digest") != read_pin(name).digest:
        return None
    return mark if program(name, root).is_file() else None


def _pip_error(output: str) -> str:
    """pip's most telling line: its last ``ERROR:`` line, else its last line."""
    lines = [x.strip() for x in output.strip().splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR:")]
    return (errors or lines or ["pip printed nothing"])[-1][:300]


Runner = Callable[..., subprocess.CompletedProcess]


def install(
    name: str,
    *,
    root: Path | None = None,
    python: str | None = None,
    run: Runner = subprocess.run,
    log: Callable[[str], None] | None = None,
    force: bool = False,
) -> dict:
    """Install baseline ``name`` (idempotent); return its marker (``"kept": True`` if it was
    already installed with the same pin)."""
    pin = read_pin(name)
    root = root or venv_dir(name)
    with paths.locked(f"baseline-{name}"):
        mark = None if force else installed(name, root)
        if mark is not None:
            return {**mark, "kept": True}
        paths.private_dir(root.parent)
        shutil.rmtree(root, ignore_errors=True)  # a venv hard-codes its path: built in place
        if log:
            log(f"creating {root} and installing {', '.join(pin.requirements)} (pip) ...")
        t0 = time.monotonic()
        con = ["-c", str(constraints_file(name))] if pin.constraints else []
        steps = [
            ([python or sys.executable, "-m", "venv", str(root)], "create the venv"),
            (
                [
                    str(root / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "--no-input",
                    "--disable-pip-version-check",
                    "--quiet",
                    *con,
                    *pin.requirements,
                ],
                f"install {' '.join(pin.requirements)}",
            ),
        ]
        steps += [(cmd(root, pin), what) for cmd, what in EXTRA_STEPS.get(name, ())]
        for cmd, what in steps:
            try:
                proc = run(cmd, capture_output=True, text=True)
            except OSError as e:
                shutil.rmtree(root, ignore_errors=True)
                raise BaselineError(f"could not {what}: {e.strerror or e}") from None
            if proc.returncode != 0:
                shutil.rmtree(root, ignore_errors=True)
                raise BaselineError(
                    f"could not {what} for baseline {name!r} (the package index cannot serve "
                    f"it, or no network): {_pip_error((proc.stderr or '') + (proc.stdout or ''))}"
                )
        dist = BASELINES[name][0]
        mark = {
            "baseline": name,
            "requirements": list(pin.requirements),
            "version": pin.version_of(dist),
            "pin_digest": pin.digest,
            "python": ".".join(map(str, sys.version_info[:3])),
            "root": str(root),
            "program": str(program(name, root)),
            "seconds": round(time.monotonic() - t0, 1),
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        paths.tighten_tree(root)
        paths.write_private(root / MARKER, (json.dumps(mark, indent=1) + "\n").encode())
    return {**mark, "kept": False}


def list_baselines() -> list[dict]:
    """One row per known baseline: pinned version, installed or not, where."""
    rows = []
    for name, (dist, _) in BASELINES.items():
        try:
            pin = read_pin(name)
        except BaselineError as e:  # one broken baseline does not hide the others
            rows.append(
                {
                    "baseline": name,
                    "pinned": None,
                    "installed": False,
                    "version": None,
                    "state": str(e),
                    "path": str(venv_dir(name)),
                }
            )
            continue
        mark = installed(name)
        stale = mark is None and _marker(venv_dir(name)) is not None
        rows.append(
            {
                "baseline": name,
                "pinned": pin.version_of(dist),
                "installed": mark is not None,
                "version": mark.get("version") if mark else None,
                "state": "installed"
                if mark
                else ("stale (another pin or Python: install again)" if stale else "missing"),
                "path": str(venv_dir(name)),
            }
        )
    return rows


def require(name: str) -> Path:
    """The program of an installed baseline, or :class:`BaselineError` saying how to install."""
    if installed(name) is None:
        raise BaselineError(
            f"baseline {name!r} is not installed (or its pin changed); run "
            f"`pushbench baselines install {name}`"
        )
    return program(name)
