"""Isolated per-snapshot test environments for the SWE-lite verifier.

Each snapshot's tests run in their own virtual environment, built on demand under
``paths.home()/venvs/<snapshot>-<hash>`` from the pinned list in ``tasks/swelite/venvs.yaml``
(``pip install --no-deps`` of a complete pinned list, so the environment is the same on every
machine). The hash covers the pins and the Python version, so a changed pin builds a new venv.
PushBench's own environment is never modified. The build happens in a temporary folder renamed
into place under a file lock, so concurrent workers and killed builds never leave half a venv.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from ... import paths
from ...snapshots import locked

_MARKER = ".pushbench-venv.json"


class VenvError(RuntimeError):
    """A snapshot's test environment cannot be built (offline and uncached, pip failed...)."""


@dataclass(frozen=True)
class TestEnvSpec:
    snapshot: str
    source_dirs: tuple[str, ...]
    editable: tuple[str, ...]
    test_dirs: tuple[str, ...]
    requirements: tuple[str, ...]

    @property
    def key(self) -> str:
        blob = json.dumps({"req": self.requirements, "py": sys.version_info[:2]}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


@cache
def specs() -> dict[str, TestEnvSpec]:
    raw = yaml.safe_load((paths.data_dir("tasks") / "swelite" / "venvs.yaml").read_text())
    return {
        name: TestEnvSpec(snapshot=name, **{k: tuple(v) for k, v in cfg.items()})
        for name, cfg in raw["snapshots"].items()
    }


def spec(snapshot: str) -> TestEnvSpec:
    if snapshot not in specs():
        raise VenvError(
            f"no SWE-lite test environment for snapshot {snapshot!r}; known: {', '.join(specs())}"
        )
    return specs()[snapshot]


def venv_dir(snapshot: str) -> Path:
    s = spec(snapshot)
    return paths.home() / "venvs" / f"{snapshot}-{s.key}"


def python_of(root: Path) -> Path:
    return root / "bin" / "python"


def is_built(snapshot: str) -> bool:
    return (venv_dir(snapshot) / _MARKER).is_file()


def ensure(snapshot: str, log=None) -> Path:
    """Return the python of ``snapshot``'s test venv, building the venv on first use."""
    final = venv_dir(snapshot)
    if (final / _MARKER).is_file():
        return python_of(final)
    s = spec(snapshot)
    with locked(f"venv-{snapshot}"):
        if (final / _MARKER).is_file():
            return python_of(final)
        if log:
            log(
                f"building the test environment of {snapshot} ({len(s.requirements)} pinned "
                "packages) ..."
            )
        paths.private_dir(final.parent)
        # A venv hard-codes its own path, so it is built in place; the marker comes last.
        shutil.rmtree(final, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(final)], "create the venv")
        cmd = [
            str(python_of(final)),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            *s.requirements,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            shutil.rmtree(final, ignore_errors=True)
            raise VenvError(
                f"the test environment of snapshot {snapshot!r} is not cached and its pinned "
                f"packages could not be installed (offline?). pip said: {tail or 'nothing'}."
                f"\nConnect to the package index once and run `pushbench swelite build`, or "
                f"point pip at a wheel folder holding {', '.join(s.requirements)} "
                "(PIP_FIND_LINKS=DIR PIP_NO_INDEX=1)."
            )
        paths.tighten_tree(final)  # venv and pip create with the umask's modes
        paths.write_private(
            final / _MARKER,
            json.dumps(
                {"snapshot": snapshot, "key": s.key, "requirements": list(s.requirements)}
            ).encode(),
        )
    return python_of(final)


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VenvError(f"could not {what}: {(proc.stderr or proc.stdout).strip()[-500:]}")
