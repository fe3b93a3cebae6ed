"""Pinned repository snapshots: obtain, verify, extract and freeze each sdist as a git repository.

A snapshot is built once into the cache (``paths.home()/snapshots/<name>-<version>``):

1. the sdist comes from a file or folder the user names (``source=`` / ``$PUSHBENCH_SDIST_DIR``)
   or from ``pip download --no-deps --no-binary :all: NAME==VERSION``;
2. its sha256 must equal the pin, otherwise nothing is used (:class:`SnapshotError`);
3. it is extracted with tarfile's ``data`` filter (no absolute paths, links out or devices);
4. the snapshot root (the top folder, holding ``pyproject.toml``) becomes a git repository with
   one commit whose author, committer and dates are fixed, so its id is reproducible.

User snapshots (``pushbench snapshots add``, :func:`add_snapshot`) go through the same freeze:
an archive, a folder or a git revision is copied safely and within
:class:`~pushbench.archives.Limits` (:mod:`pushbench.sources`), checked by the caller's
``check`` (the CLI indexes it there), frozen to a reproducible commit, and only then installed
in the cache and pinned in a user ``pins.yaml`` (:mod:`pushbench.userdata`) with its
kind, identity (archive sha256 or tree hash), commit and provenance. A ``synth`` pin also names
a registered generator and its parameters, so a missing cache entry is rebuilt by regenerating
(:func:`register_generator`). Built-in pins load first; a user name equal to a built-in one, or
defined in two user files, is an error.

The build happens in a temporary folder renamed into place, under a file lock, so concurrent
workers and killed builds never leave a half-built snapshot behind. The tree is private to the
user (folders 0700, files 0600, executables 0700) before it is renamed into place.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import paths, sources, userdata
from .archives import DEFAULT_LIMITS, Limits
from .errors import PushBenchError
from .paths import locked  # re-exported: the SWE-lite builders use it
from .sources import sha256_file  # re-exported

_MARKER = ".pushbench-snapshot.json"
_FIXED_DATE = "2000-01-01T00:00:00+0000"


class SnapshotError(PushBenchError, RuntimeError):
    """A snapshot cannot be used: unknown, wrong hash, unobtainable offline, or corrupt (a
    :class:`~pushbench.errors.PushBenchError`: the CLI prints it as one error line, exit 2)."""


@dataclass(frozen=True)
class Pin:
    """One pinned snapshot. Built-in pins are sdists (``package``, ``version``, ``sha256``,
    ``commit``); user pins add ``kind`` and provenance (see :func:`add_snapshot`)."""

    name: str
    package: str
    version: str
    sha256: str
    commit: str | None = None
    kind: str = "sdist"  # "sdist" | "folder" | "git" | "synth"
    tree_sha256: str | None = None  # tree hash of the frozen files (user pins)
    source: str | None = None  # the path it was added from (user pins)
    rev: str | None = None  # git: the revision as given
    source_commit: str | None = None  # git: the commit it resolved to
    files: int | None = None  # files frozen (user pins)
    skipped: dict | None = field(default=None, hash=False)  # symlinks/special/ignored counts
    generator: str | None = None  # synth: registered generator name
    params: dict | None = field(default=None, hash=False)  # synth: generator parameters
    origin: str | None = field(default=None, compare=False)  # the pins file (not written)

    @property
    def sdist_name(self) -> str:
        return f"{self.package}-{self.version}.tar.gz"

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def builtin(self) -> bool:
        return self.origin is None

    def to_entry(self) -> dict:
        """The pins-file entry (``None`` fields and ``name``/``origin`` left out)."""
        return {
            k: v for k, v in asdict(self).items() if v is not None and k not in ("name", "origin")
        }


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PIN_FIELDS = {f for f in Pin.__dataclass_fields__ if f not in ("name", "origin")}


def _user_pin(name: str, entry: object, origin: Path) -> Pin:
    if not _NAME.match(str(name)):
        raise userdata.UserDataError(
            f"{origin}: snapshot name {name!r} is not allowed "
            "(letters, digits, '_', '.', '-'; at most 64)"
        )
    if (
        not isinstance(entry, dict)
        or set(entry) - _PIN_FIELDS
        or not {"package", "version", "sha256", "commit", "kind"} <= set(entry)
    ):
        raise userdata.UserDataError(
            f"{origin}: pin {name!r} must be a mapping with package, version, sha256, commit "
            f"and kind (known fields: {', '.join(sorted(_PIN_FIELDS))})"
        )
    return Pin(name=str(name), origin=str(origin), **entry)


def builtin_pins() -> dict[str, Pin]:
    """The pins shipped in ``snapshots/pins.yaml``."""
    raw = yaml.safe_load((paths.data_dir("snapshots") / "pins.yaml").read_text())
    return {name: Pin(name=name, **fields) for name, fields in raw["snapshots"].items()}


def load_pins() -> dict[str, Pin]:
    """Every pin keyed by snapshot name: built-ins, then the user files in
    :func:`pushbench.userdata.search_dirs` order; a name defined twice is an error."""
    pins = builtin_pins()
    for folder in userdata.search_dirs():
        path = folder / userdata.PINS_FILE
        for name, entry in (userdata.read(path, "snapshots").get("snapshots") or {}).items():
            if name in pins:
                where = pins[name].origin or "the built-in snapshots/pins.yaml"
                raise userdata.UserDataError(
                    f"snapshot {name!r} in {path} is already defined in {where}"
                )
            pins[name] = _user_pin(name, entry, path)
    return pins


def get_pin(name: str) -> Pin:
    pins = load_pins()
    if name not in pins:
        raise SnapshotError(f"unknown snapshot {name!r}; known: {', '.join(sorted(pins))}")
    return pins[name]


def snapshot_dir(pin: Pin) -> Path:
    return paths.home() / "snapshots" / f"{pin.name}-{pin.version}"


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
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        pin.requirement,
    ]
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
        if not (
            cfg.has_option("core", "sharedRepository")
            and cfg.get("core", "sharedRepository") == "0600"
        ):
            cfg.set_value("core", "sharedRepository", "0600")


def _stage_fast(root: Path, files: list[str]) -> bool:
    """Stage ``files`` as gitpython's ``index.add`` does (raw bytes, no filters or attributes,
    mode 100755 when owner-executable else 100644), with two git commands instead of one
    object write per file in Python (~10x faster on thousands of files). Returns False, having
    done nothing, where the two could differ (a symlink, a newline in a name, no git), so the
    caller falls back to gitpython and the commit id is the same either way."""
    paths_ = [root / f for f in files]
    if any("\n" in f or p.is_symlink() for f, p in zip(files, paths_, strict=True)) or not files:
        return False
    git_cmd = ["git", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false"]
    try:
        out = subprocess.run(
            [*git_cmd, "hash-object", "-w", "--no-filters", "--stdin-paths"],
            cwd=root,
            input="\n".join(files) + "\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if len(out) != len(files):
            return False
        info = "".join(
            f"{'100755' if p.stat().st_mode & 0o100 else '100644'} {sha}\t{f}\n"
            for f, p, sha in zip(files, paths_, out, strict=True)
        )
        subprocess.run(
            [*git_cmd, "update-index", "--add", "--index-info"],
            cwd=root,
            input=info,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        (root / ".git" / "index").unlink(missing_ok=True)
        return False
    return True


def _git_freeze(root: Path) -> str:
    """Make ``root`` a git repo with one reproducible commit; return the commit id."""
    import git  # gitpython; imported lazily because it is only needed at build time

    repo = git.Repo.init(root)
    _private_git(repo)
    files = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    )
    if not _stage_fast(root, files):
        repo.index.add(files)
    actor = git.Actor("PushBench", "snapshots@pushbench.invalid")
    commit = repo.index.commit(
        "PushBench snapshot",
        author=actor,
        committer=actor,
        author_date=_FIXED_DATE,
        commit_date=_FIXED_DATE,
    )
    return commit.hexsha


def build(
    name: str,
    source: str | os.PathLike | None = None,
    *,
    force: bool = False,
    log=None,
    limits: Limits = DEFAULT_LIMITS,
) -> Path:
    """Build snapshot ``name`` into the cache if needed and return its root folder.

    ``source`` is where to read it: the sdist (file or folder) for built-in pins, the archive,
    folder or repository for a user pin (default: the path recorded in the pin). ``limits``
    bound what a user pin's source may unpack to (a built-in sdist is trusted by its sha256)."""
    pin = get_pin(name)
    final = snapshot_dir(pin)
    if not force and (final / _MARKER).is_file():
        return final
    if pin.kind != "sdist" or not pin.builtin:
        return _build_user(pin, source, log, limits)
    with locked(f"snapshot-{pin.name}"):
        if not force and (final / _MARKER).is_file():
            return final  # another process built it while we waited for the lock
        if log:
            log("not built yet; building it once into the cache")
        paths.private_dir(paths.home() / "snapshots")
        with tempfile.TemporaryDirectory(
            dir=paths.home() / "snapshots", prefix=".build-"
        ) as tmp_name:
            tmp = Path(tmp_name)
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
            _install(pin, root, commit)
    return final


def _install(pin: Pin, root: Path, commit: str) -> Path:
    """Mark the frozen ``root``, make it private and rename it to :func:`snapshot_dir`."""
    final = snapshot_dir(pin)
    meta: dict[str, Any] = {
        "name": pin.name,
        "package": pin.package,
        "version": pin.version,
        "sha256": pin.sha256,
        "commit": commit,
    }
    if pin.kind != "sdist" or not pin.builtin:
        meta.update(kind=pin.kind, tree_sha256=pin.tree_sha256)
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


# --- user snapshots -------------------------------------------------------------------------

# Generators that can rebuild a ``kind: synth`` pin: name -> callable or "module:function"
# (imported on first use). The callable is ``fn(dest: Path, **params)`` and writes a plain
# source folder at ``dest``. Only registered names are ever imported, never one from a file.
_GENERATORS: dict[str, str | Callable[..., Any]] = {
    "reposcan-synth": "pushbench.families.reposcan.synth:generate",
}


def register_generator(name: str, fn: str | Callable[..., Any]) -> None:
    """Register ``fn`` (a callable or ``"module:function"``) as synth generator ``name``."""
    _GENERATORS[name] = fn


def generator(name: str) -> Callable[..., Any]:
    """The registered generator ``name``; :class:`SnapshotError` if unknown or not importable."""
    import importlib

    fn = _GENERATORS.get(name)
    if fn is None:
        raise SnapshotError(
            f"unknown snapshot generator {name!r}; registered: "
            f"{', '.join(sorted(_GENERATORS)) or 'none'}"
        )
    if isinstance(fn, str):
        module, _, attr = fn.partition(":")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise SnapshotError(
                f"snapshot generator {name!r} ({_GENERATORS[name]}) cannot be loaded: {e}"
            ) from e
    return fn


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise SnapshotError(
            f"snapshot name {name!r} is not allowed: use letters, digits, '_', "
            "'.' and '-' (starting with a letter or digit, at most 64)"
        )
    if name in builtin_pins():
        raise SnapshotError(f"snapshot name {name!r} is a built-in snapshot; choose another name")


def add_snapshot(
    name: str,
    source: str | os.PathLike,
    rev: str | None = None,
    tasks_dir: str | os.PathLike | None = None,
    *,
    kind: str | None = None,
    generator_name: str | None = None,
    params: Mapping[str, Any] | None = None,
    replace: bool = False,
    log: Callable[[str], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    skip_unreadable: bool = False,
    check: Callable[[Path], Any] | None = None,
) -> Pin:
    """Freeze ``source`` as user snapshot ``name``, build it into the cache and pin it.

    ``source``: an archive (sdist), a folder, or a git repository (at ``rev``, default
    ``HEAD``); ``kind`` forces ``"folder"`` (a git working tree as it is) or ``"synth"`` (a
    folder made by the registered generator ``generator_name`` with ``params``, recorded so the
    snapshot can be rebuilt by regenerating). The pin is written to ``pins.yaml`` in
    :func:`pushbench.userdata.target_dir` (``tasks_dir``) and returned.

    ``limits`` bound what the source may unpack to; ``skip_unreadable`` leaves out (and logs)
    files and folders that cannot be read instead of refusing; ``check(root)`` runs on the
    copied tree before anything is frozen, installed or pinned (the CLI indexes the tree
    there), so an exception from it leaves no trace in the cache or the pins.

    Idempotent: adding the same content again under the same name returns the existing pin.
    Errors (:class:`SnapshotError`, :class:`~pushbench.sources.SourceError`,
    :class:`~pushbench.userdata.UserDataError`): a built-in or malformed name, a name pinned
    to other content (unless ``replace``) or in another user file, an unsafe archive member,
    a missing source or revision. Nothing is pinned when any of them is raised.
    """
    _check_name(name)
    if kind == "synth":
        if not generator_name or params is None:
            raise SnapshotError("a synth snapshot needs generator_name and params")
        generator(generator_name)  # fail early on an unknown generator
        pin_params = json.loads(json.dumps(dict(params)))  # plain data, as the pin holds it
    elif generator_name is not None or params is not None:
        raise SnapshotError("generator_name and params are for kind='synth' only")
    else:
        pin_params = None
    folder = userdata.target_dir(tasks_dir)
    pins_file = folder / userdata.PINS_FILE
    existing = load_pins().get(name)
    if existing is not None and (
        existing.origin is None  # built in (refused above)
        or Path(existing.origin).resolve() != pins_file.resolve()
    ):
        raise SnapshotError(f"snapshot {name!r} is already pinned in {existing.origin}")
    source = Path(source).expanduser().resolve()
    paths.private_dir(paths.home() / "snapshots")
    with locked(f"snapshot-{name}"):
        with tempfile.TemporaryDirectory(dir=paths.home() / "snapshots", prefix=".add-") as tmp:
            if log:
                log(f"copying {source} ...")
            m = sources.materialise(
                source,
                Path(tmp),
                rev=rev,
                kind="folder" if kind == "synth" else kind,
                limits=limits,
                skip_unreadable=skip_unreadable,
            )
            if log:
                for rel in m.unreadable:
                    log(f"skipped (unreadable): {sources.escaped(rel)}")
            if check is not None:
                check(m.root)
            if log:
                log(f"freezing {m.files} files as a git repository ...")
            commit = _git_freeze(m.root)
            pin = Pin(
                name=name,
                package=name,
                version=m.tree_sha256[:12],
                sha256=m.sha256,
                commit=commit,
                kind=kind or m.kind,
                tree_sha256=m.tree_sha256,
                source=None if kind == "synth" else str(source),
                rev=rev,
                source_commit=m.source_commit,
                files=m.files,
                skipped=dict(m.skipped),
                generator=generator_name,
                params=pin_params,
                origin=str(pins_file),
            )
            same = existing is not None and (existing.kind, existing.sha256, existing.commit) == (
                pin.kind,
                pin.sha256,
                pin.commit,
            )
            if existing is not None and not same and not replace:
                raise SnapshotError(
                    f"snapshot {name!r} is already pinned in {existing.origin} to other content "
                    f"(sha256 {existing.sha256[:12]}, now {pin.sha256[:12]}); choose another "
                    "name, or replace it deliberately (--replace: tasks pinned on it then fail "
                    "their valid-set check)"
                )
            if same and existing is not None:  # same implies an existing pin
                pin = existing
            if not (snapshot_dir(pin) / _MARKER).is_file():
                _install(pin, m.root, commit)
    if not same:
        userdata.record(
            folder, userdata.PINS_FILE, "snapshots", name, pin.to_entry(), replace=replace
        )
    return pin


def _build_user(
    pin: Pin, source: str | os.PathLike | None, log, limits: Limits = DEFAULT_LIMITS
) -> Path:
    """Rebuild a user snapshot from its source (or generator) and check it against the pin."""
    final = snapshot_dir(pin)
    with locked(f"snapshot-{pin.name}"):
        if (final / _MARKER).is_file():
            return final
        paths.private_dir(paths.home() / "snapshots")
        with tempfile.TemporaryDirectory(
            dir=paths.home() / "snapshots", prefix=".build-"
        ) as tmp_name:
            tmp = Path(tmp_name)
            src: Path | None
            if pin.kind == "synth" and source is None:
                if pin.generator is None:
                    raise SnapshotError(f"synth snapshot {pin.name!r} pins no generator")
                if log:
                    log(f"regenerating with {pin.generator} {pin.params} ...")
                generator(pin.generator)(tmp / "generated", **(pin.params or {}))
                src, kind, rev = tmp / "generated", "folder", None
                (tmp / "work").mkdir()
                work = tmp / "work"
            else:
                given = source or pin.source
                src = Path(given).expanduser() if given else None
                kind, rev, work = (
                    "folder" if pin.kind == "synth" else pin.kind,
                    pin.source_commit or pin.rev,
                    tmp,
                )
                if src is None or not src.exists():
                    raise SnapshotError(
                        f"user snapshot {pin.name!r} is not built here and its source "
                        f"{pin.source} is missing; give it with `pushbench snapshots build "
                        f"{pin.name} --from PATH` (pinned in {pin.origin})"
                    )
            m = sources.materialise(
                src,
                work,
                rev=rev,
                kind=kind,
                limits=limits,
                skip_unreadable=bool((pin.skipped or {}).get("unreadable")),
            )
            if m.sha256 != pin.sha256 or m.tree_sha256 != (pin.tree_sha256 or m.tree_sha256):
                raise SnapshotError(
                    f"user snapshot {pin.name!r}: {src} gives sha256 {m.sha256}, pinned "
                    f"{pin.sha256} (in {pin.origin}); the source changed, nothing was used"
                )
            commit = _git_freeze(m.root)
            if pin.commit and commit != pin.commit:
                raise SnapshotError(
                    f"user snapshot {pin.name!r} froze to commit {commit}, "
                    f"pinned {pin.commit}: the build is not reproducible"
                )
            return _install(pin, m.root, commit)
