"""Pinned repository snapshots: obtain, verify, extract and freeze each sdist as a git repository.

A snapshot is built once into the cache (``paths.home()/snapshots/<name>-<version>``):

1. the sdist comes from a file or folder the user names (``source=`` / ``$PUSHBENCH_SDIST_DIR``)
   or from ``pip download --no-deps --no-binary :all: NAME==VERSION``;
2. its sha256 must equal the pin, otherwise nothing is used (:class:`SnapshotError`);
3. it is extracted with tarfile's ``data`` filter (no absolute paths, links out or devices);
4. the snapshot root (the top folder, holding ``pyproject.toml``) becomes a git repository with
   one commit whose author, committer and dates are fixed, so its id is reproducible.

The build happens in a temporary folder renamed into place, under a file lock, so concurrent
workers and killed builds never leave a half-built snapshot behind. The tree is private to the
user (folders 0700, files 0600, executables 0700) before it is renamed into place.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from . import paths

_MARKER = ".pushbench-snapshot.json"
_FIXED_DATE = "2000-01-01T00:00:00+0000"


class SnapshotError(RuntimeError):
    """A snapshot cannot be used: unknown, wrong hash, unobtainable offline, or corrupt."""


@dataclass(frozen=True)
class Pin:
    name: str
    package: str
    version: str
    sha256: str
    commit: str | None = None

    @property
    def sdist_name(self) -> str:
        return f"{self.package}-{self.version}.tar.gz"

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


def load_pins() -> dict[str, Pin]:
    """Read ``snapshots/pins.yaml`` into :class:`Pin` objects keyed by snapshot name."""
    raw = yaml.safe_load((paths.data_dir("snapshots") / "pins.yaml").read_text())
    return {name: Pin(name=name, **fields) for name, fields in raw["snapshots"].items()}


def get_pin(name: str) -> Pin:
    pins = load_pins()
    if name not in pins:
        raise SnapshotError(f"unknown snapshot {name!r}; known: {', '.join(sorted(pins))}")
    return pins[name]


def snapshot_dir(pin: Pin) -> Path:
    return paths.home() / "snapshots" / f"{pin.name}-{pin.version}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold the cache-wide lock ``name`` (an flock under ``$PUSHBENCH_HOME/locks``): builders
    of one cache entry (snapshots, SWE-lite venvs and unit sets) run one at a time."""
    lock_dir = paths.private_dir(paths.home() / "locks")
    fd = paths.open_private(lock_dir / f"{name}.lock", os.O_WRONLY | os.O_CREAT)
    with os.fdopen(fd, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _find_local_sdist(pin: Pin, source: str | os.PathLike | None) -> Path | None:
    candidates: list[Path] = []
    for src in (source, os.environ.get("PUSHBENCH_SDIST_DIR")):
        if not src:
            continue
        p = Path(src).expanduser()
        candidates.append(p / pin.sdist_name if p.is_dir() else p)
    for c in candidates:
        if c.is_file():
            return c
    if source is not None:
        raise SnapshotError(f"{pin.sdist_name} not found at {source}")
    return None


def _download(pin: Pin, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--disable-pip-version-check", "-d", str(dest), pin.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    target = dest / pin.sdist_name
    if proc.returncode != 0 or not target.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise SnapshotError(
            f"snapshot {pin.name!r} is not cached and its sdist {pin.requirement} could not be "
            f"downloaded (offline?). pip said: {' | '.join(tail) or 'nothing'}.\n"
            f"Supply the file {pin.sdist_name} (sha256 {pin.sha256}) with "
            f"`pushbench snapshots build --from PATH` or set PUSHBENCH_SDIST_DIR to its folder."
        )
    return target


def _private_git(repo) -> None:
    """Files git writes later (the index, on ``status``) are created 0600, not umask-wide."""
    with repo.config_writer() as cfg:
        if not (cfg.has_option("core", "sharedRepository")
                and cfg.get("core", "sharedRepository") == "0600"):
            cfg.set_value("core", "sharedRepository", "0600")


def _git_freeze(root: Path) -> str:
    """Make ``root`` a git repo with one reproducible commit; return the commit id."""
    import git  # gitpython; imported lazily because it is only needed at build time

    repo = git.Repo.init(root)
    _private_git(repo)
    files = sorted(
        str(p.relative_to(root)) for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    )
    repo.index.add(files)
    actor = git.Actor("PushBench", "snapshots@pushbench.invalid")
    commit = repo.index.commit(
        "PushBench snapshot", author=actor, committer=actor,
        author_date=_FIXED_DATE, commit_date=_FIXED_DATE,
    )
    return commit.hexsha


def build(name: str, source: str | os.PathLike | None = None, *, force: bool = False,
          log=None) -> Path:
    """Build snapshot ``name`` into the cache if needed and return its root folder."""
    pin = get_pin(name)
    final = snapshot_dir(pin)
    if not force and (final / _MARKER).is_file():
        return final
    with locked(f"snapshot-{pin.name}"):
        if not force and (final / _MARKER).is_file():
            return final  # another process built it while we waited for the lock
        if log:
            log("not built yet; building it once into the cache")
        paths.private_dir(paths.home() / "snapshots")
        with tempfile.TemporaryDirectory(dir=paths.home() / "snapshots", prefix=".build-") as tmp:
            tmp = Path(tmp)
            sdist = _find_local_sdist(pin, source)
            if sdist is None:
                if log:
                    log(f"downloading {pin.requirement} sdist ...")
                sdist = _download(pin, tmp)
            digest = sha256_file(sdist)
            if digest != pin.sha256:
                raise SnapshotError(
                    f"sha256 mismatch for {sdist}: got {digest}, pinned {pin.sha256}; "
                    "the file was not used."
                )
            if log:
                log(f"extracting {sdist.name} and freezing it as a git repository ...")
            extract = tmp / "extract"
            with tarfile.open(sdist, "r:gz") as tar:
                tar.extractall(extract, filter="data")
            tops = [p for p in extract.iterdir() if p.is_dir()]
            if len(tops) != 1 or not (tops[0] / "pyproject.toml").is_file():
                raise SnapshotError(f"{sdist.name}: expected one top folder holding pyproject.toml")
            root = tops[0]
            commit = _git_freeze(root)
            if pin.commit and commit != pin.commit:
                raise SnapshotError(
                    f"snapshot {name!r} froze to commit {commit}, pinned {pin.commit}: "
                    "the build is not reproducible on this machine."
                )
            meta = {"name": pin.name, "package": pin.package, "version": pin.version,
                    "sha256": pin.sha256, "commit": commit}
            (root / _MARKER).write_text(json.dumps(meta, indent=2))
            # Keep the marker out of `git status` noise without changing the commit.
            with open(root / ".git" / "info" / "exclude", "a") as fh:
                fh.write(f"\n{_MARKER}\n")
            # tar and git wrote with the umask's modes: private before it becomes visible
            paths.tighten_tree(root)
            if final.exists():
                shutil.rmtree(final)
            root.rename(final)
    return final


def ensure(name: str, log=None) -> Path:
    """Return the built snapshot root, building it on first use (with a message on stderr)."""
    pin = get_pin(name)
    final = snapshot_dir(pin)
    if (final / _MARKER).is_file():
        return final
    if log is None:
        def log(msg: str) -> None:
            print(f"[pushbench] snapshot {name}: {msg}", file=sys.stderr, flush=True)
    return build(name, log=log)


def info(name: str) -> dict | None:
    """Return the build metadata of a built snapshot, or None if it is not built."""
    marker = snapshot_dir(get_pin(name)) / _MARKER
    return json.loads(marker.read_text()) if marker.is_file() else None


def verify(name: str) -> list[str]:
    """Check a built snapshot against its pin; return a list of problems (empty if fine)."""
    import git

    pin = get_pin(name)
    meta = info(name)
    if meta is None:
        return [f"{name}: not built (run `pushbench snapshots build {name}`)"]
    problems = []
    if meta["sha256"] != pin.sha256:
        problems.append(f"{name}: built from sha256 {meta['sha256']}, pinned {pin.sha256}")
    repo = git.Repo(snapshot_dir(pin))
    _private_git(repo)  # snapshots frozen by older versions: keep the index private too
    head = repo.head.commit.hexsha
    if pin.commit and head != pin.commit:
        problems.append(f"{name}: HEAD is {head}, pinned commit {pin.commit}")
    if repo.is_dirty(untracked_files=True):
        problems.append(f"{name}: working tree differs from its commit")
    return problems
