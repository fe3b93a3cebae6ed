"""A user's source tree (archive, folder or git revision) as a plain folder, copied safely.

:func:`materialise` turns what ``pushbench snapshots add NAME --from PATH [--rev REV]`` names
into a folder of regular files that :mod:`pushbench.snapshots` then freezes as a reproducible
one-commit git repository:

* **archive** (``.tar.gz``, ``.tgz``, ``.tar``, ``.tar.bz2``, ``.tar.xz``, ``.zip``, e.g. an
  sdist): extracted by :func:`pushbench.archives.safe_extract`, which checks every member as it
  streams (no absolute path, ``..`` part, backslash or NUL, link, device/FIFO, clashing or
  non-UTF-8 name) and enforces the :class:`~pushbench.archives.Limits`; on any refusal nothing
  is kept. An archive holding exactly one top folder (the sdist layout) has that folder as its
  root. Identity: the archive's sha256.
* **folder**: regular files are copied; symbolic links (never followed) and special files are
  skipped and counted. A file or folder that cannot be read is an error naming it
  (:class:`UnreadableError`) unless ``skip_unreadable``, which skips and lists it. Identity:
  the tree hash.
* **git** (a local repository, at ``rev`` or ``HEAD``): the committed tree at that revision is
  exported (uncommitted changes are not part of it); symlinks and submodules are skipped and
  counted. Identity: the tree hash; the resolved commit is recorded.

Everywhere, the same :class:`~pushbench.archives.Limits` bound what is taken in (entries,
bytes per file and in total, path length and depth) and names must be UTF-8, counted while
copying; version-control, cache and virtual-environment folders (:data:`IGNORED_DIRS`) and
compiled ``.pyc``/``.pyo`` files are left out, so one tree gives one hash however it arrived.

Tree hash (:func:`tree_hash`): sha256 over one line per file in sorted path order,
``<posix path>\\0<x if owner-executable else ->\\0<sha256 of the content>\\n`` (files are
hashed in chunks, never read whole).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from . import archives
from .archives import (  # noqa: F401 (re-exported)
    DEFAULT_LIMITS,
    Budget,
    Limits,
    SourceError,
    UnsafeArchiveError,
    escaped,
    member_problem,
)

IGNORED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
        "node_modules",
    }
)
IGNORED_SUFFIXES = (".pyc", ".pyo")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
KINDS = ("sdist", "folder", "git")


def safe_extract(archive: Path, dest: Path, limits: Limits | None = None) -> archives.Extracted:
    """:func:`pushbench.archives.safe_extract` under ``limits`` (or the defaults)."""
    return archives.safe_extract(archive, dest, limits or DEFAULT_LIMITS)


class UnreadableError(SourceError):
    """A file or folder of a source tree that cannot be read (``--skip-unreadable`` lists it)."""


@dataclass(frozen=True)
class Materialised:
    """A source copied into ``root`` (regular files only), with its identity."""

    kind: str  # "sdist" (any archive) | "folder" | "git"
    root: Path
    sha256: str  # archive sha256 for "sdist", else the tree hash
    tree_sha256: str
    files: int
    skipped: dict[str, int] = field(default_factory=dict)  # symlinks, special, ignored
    source_commit: str | None = None  # git: the resolved commit
    unreadable: tuple[str, ...] = ()  # skipped (skip_unreadable only)


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def detect_kind(path: Path, rev: str | None = None) -> str:
    """``sdist`` for an archive file, ``git`` for a repository folder (or any ``rev``),
    ``folder`` for another folder; :class:`SourceError` otherwise."""
    if not path.exists():
        raise SourceError(f"source {path} does not exist")
    if path.is_file():
        if rev is not None:
            raise SourceError(f"--rev {rev!r} needs a git repository folder, {path} is a file")
        if not is_archive(path):
            raise SourceError(
                f"source {path} is a file but not an archive ({', '.join(ARCHIVE_SUFFIXES)})"
            )
        return "sdist"
    if path.is_dir():
        if (path / ".git").exists() or rev is not None:
            return "git"
        return "folder"
    raise SourceError(f"source {path} is neither a file nor a folder")


def _ignored(parts: tuple[str, ...]) -> bool:
    return (
        any(p in IGNORED_DIRS for p in parts[:-1])
        or parts[-1] in IGNORED_DIRS
        or parts[-1].endswith(IGNORED_SUFFIXES)
    )


def _prune(root: Path) -> dict[str, int]:
    """Remove ignored folders/files and links from an extracted tree; count them."""
    skipped = {"ignored": 0, "symlinks": 0, "special": 0}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in list(dirnames):
            p = Path(dirpath, d)
            if p.is_symlink():
                p.unlink()
                skipped["symlinks"] += 1
                dirnames.remove(d)
            elif d in IGNORED_DIRS:
                shutil.rmtree(p)
                skipped["ignored"] += 1
                dirnames.remove(d)
        for f in filenames:
            p = Path(dirpath, f)
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                p.unlink()
                skipped["symlinks"] += 1
            elif f.endswith(IGNORED_SUFFIXES):
                p.unlink()
                skipped["ignored"] += 1
    return skipped


def copy_folder(
    src: Path, dest: Path, limits: Limits = DEFAULT_LIMITS, skip_unreadable: bool = False
) -> tuple[dict[str, int], list[str]]:
    """Copy the regular files of ``src`` into ``dest`` (links and special files skipped) under
    ``limits``; return the skipped counts and the unreadable paths (relative, ``/``-joined)
    that ``skip_unreadable`` let through (otherwise the first one is an
    :class:`UnreadableError`)."""
    skipped = {"ignored": 0, "symlinks": 0, "special": 0}
    unreadable: list[str] = []
    budget = Budget(limits, f"folder {src}")

    def cannot_read(path: str, err: OSError) -> None:
        rel = os.path.relpath(path, src)
        if not skip_unreadable:
            raise UnreadableError(
                f"folder {src}: cannot read {escaped(rel)} "
                f"({err.strerror or err}); fix its permissions or give "
                "--skip-unreadable to leave it out (it is then listed)"
            )
        unreadable.append(Path(rel).as_posix())

    def walk_error(err: OSError) -> None:
        cannot_read(err.filename or str(src), err)

    dest.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(src, onerror=walk_error):  # no symlinked dirs
        rel = Path(dirpath).relative_to(src)
        for d in list(dirnames):
            if d in IGNORED_DIRS or Path(dirpath, d).is_symlink():
                skipped["ignored" if d in IGNORED_DIRS else "symlinks"] += 1
                dirnames.remove(d)
            else:
                budget.name((rel / d).as_posix())
                budget.entry()
        dirnames.sort()
        for f in sorted(filenames):
            p = Path(dirpath, f)
            try:
                st = p.lstat()
            except OSError as e:
                cannot_read(str(p), e)
                continue
            if stat.S_ISLNK(st.st_mode):
                skipped["symlinks"] += 1
            elif not stat.S_ISREG(st.st_mode):
                skipped["special"] += 1
            elif f.endswith(IGNORED_SUFFIXES):
                skipped["ignored"] += 1
            else:
                name = (rel / f).as_posix()
                budget.name(name)
                budget.entry()
                # A regular file's size is known before it is read: counted first, then copied
                # by the kernel (sendfile); a file that grew meanwhile is counted again after.
                budget.add(st.st_size, st.st_size, name)
                out = dest / rel / f
                out.parent.mkdir(parents=True, exist_ok=True)
                try:
                    shutil.copyfile(p, out)
                except OSError as e:
                    if e.filename not in (str(p), p):
                        raise
                    cannot_read(str(p), e)
                    continue
                grown = out.stat().st_size - st.st_size
                if grown > 0:
                    budget.add(grown, st.st_size + grown, name)
                out.chmod(0o700 if st.st_mode & stat.S_IXUSR else 0o600)
    return skipped, unreadable


def export_git(
    repo_path: Path, rev: str | None, dest: Path, limits: Limits = DEFAULT_LIMITS
) -> tuple[str, dict[str, int]]:
    """Write the committed tree of ``repo_path`` at ``rev`` (default ``HEAD``) into ``dest``
    under ``limits``; return the resolved commit id and the skipped counts."""
    import git  # gitpython, needed only here

    try:
        repo = git.Repo(repo_path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise SourceError(
            f"{repo_path} is not a git repository (give a folder without --rev "
            "to copy it as a plain folder)"
        ) from e
    try:
        commit = repo.commit(rev or "HEAD")
    except (git.BadName, ValueError, git.GitCommandError) as e:
        hint = "" if rev else " (a repository without commits? --working-tree takes its files)"
        raise SourceError(f"revision {rev or 'HEAD'!r} not found in {repo_path}{hint}") from e
    skipped = {"ignored": 0, "symlinks": 0, "special": 0}
    budget = Budget(limits, f"repository {repo_path} at {rev or 'HEAD'}")
    dest.mkdir(parents=True, exist_ok=True)
    for item in commit.tree.traverse():
        if isinstance(item, git.Tree):
            continue
        if not isinstance(item, git.Blob):  # a submodule (a commit inside the tree)
            skipped["special"] += 1
            continue
        path = str(item.path)  # a str already; typed as a path-like by GitPython
        parts = PurePosixPath(path).parts
        if _ignored(parts):
            skipped["ignored"] += 1
            continue
        if item.mode == 0o120000:
            skipped["symlinks"] += 1
            continue
        budget.name(path)
        budget.entry()
        budget.add(item.size, item.size, path)  # git's object sizes are exact
        out = dest.joinpath(*parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "wb") as fh:
            item.stream_data(fh)
        out.chmod(0o700 if item.mode & 0o100 else 0o600)
    return commit.hexsha, skipped


def tree_hash(root: Path) -> tuple[str, int]:
    """The tree hash of ``root`` (see the module doc; ``.git`` is left out) and its file count."""
    lines = []
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if ".git" in rel.parts or p.is_symlink() or not p.is_file():
            continue
        digest = sha256_file(p)
        exe = "x" if p.stat().st_mode & stat.S_IXUSR else "-"
        lines.append(f"{rel.as_posix()}\0{exe}\0{digest}\n")
    lines.sort()
    return hashlib.sha256("".join(lines).encode()).hexdigest(), len(lines)


def sha256_file(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks (never whole)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def materialise(
    source: Path,
    work: Path,
    rev: str | None = None,
    kind: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    skip_unreadable: bool = False,
) -> Materialised:
    """Copy ``source`` into a new folder under the empty folder ``work``; see the module doc.

    ``kind`` forces ``folder`` for a git working tree (uncommitted files included) or ``git``;
    by default it is :func:`detect_kind`'s answer. ``limits`` bound what is taken in;
    ``skip_unreadable`` (folders) leaves out what cannot be read and lists it.
    """
    source = Path(source).expanduser()
    detected = detect_kind(source, rev)
    kind = kind or detected
    if kind not in KINDS:
        raise SourceError(f"unknown source kind {kind!r}; one of {', '.join(KINDS)}")
    if (
        kind != detected
        and not (kind == "folder" and detected == "git" and rev is None)
        and not (kind == "git" and detected == "folder")
    ):
        raise SourceError(f"source {source} is a {detected}, not a {kind}")
    commit = None
    unreadable: list[str] = []
    if kind == "sdist":
        extract = work / "extract"
        safe_extract(source, extract, limits)
        skipped = _prune(extract)
        tops = list(extract.iterdir())
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else extract
        sha = sha256_file(source)
    elif kind == "folder":
        root = work / "tree"
        skipped, unreadable = copy_folder(source, root, limits, skip_unreadable)
        if unreadable:
            skipped["unreadable"] = len(unreadable)
        sha = None
    else:
        root = work / "tree"
        commit, skipped = export_git(source, rev, root, limits)
        sha = None
    tree, files = tree_hash(root)
    if files == 0:
        raise SourceError(f"source {source} holds no files to freeze")
    return Materialised(
        kind=kind,
        root=root,
        sha256=sha or tree,
        tree_sha256=tree,
        files=files,
        skipped=skipped,
        source_commit=commit,
        unreadable=tuple(unreadable),
    )
