"""A user's source tree (archive, folder or git revision) as a plain folder, copied safely.

:func:`materialise` turns what ``pushbench snapshots add NAME --from PATH [--rev REV]`` names
into a folder of regular files that :mod:`pushbench.snapshots` then freezes as a reproducible
one-commit git repository:

* **archive** (``.tar.gz``, ``.tgz``, ``.tar``, ``.tar.bz2``, ``.tar.xz``, ``.zip``, e.g. an
  sdist): every member is checked *before anything is extracted*; a member with an absolute
  path, a ``..`` part, a backslash or NUL, a symbolic or hard link, or a device/FIFO is refused
  (:class:`UnsafeArchiveError`) and nothing is used. Tar members are then extracted with
  tarfile's ``data`` filter as a second line of defence. An archive holding exactly one top
  folder (the sdist layout) has that folder as its root. Identity: the archive's sha256.
* **folder**: regular files are copied; symbolic links (never followed) and special files are
  skipped and counted. Identity: the tree hash.
* **git** (a local repository, at ``rev`` or ``HEAD``): the committed tree at that revision is
  exported (uncommitted changes are not part of it); symlinks and submodules are skipped and
  counted. Identity: the tree hash; the resolved commit is recorded.

Everywhere, version-control, cache and virtual-environment folders (:data:`IGNORED_DIRS`) and
compiled ``.pyc``/``.pyo`` files are left out, so one tree gives one hash however it arrived.

Tree hash (:func:`tree_hash`): sha256 over one line per file in sorted path order,
``<posix path>\\0<x if owner-executable else ->\\0<sha256 of the content>\\n``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .errors import PushBenchError

IGNORED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv", "venv",
                          ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
                          "node_modules"})
IGNORED_SUFFIXES = (".pyc", ".pyo")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
KINDS = ("sdist", "folder", "git")


class SourceError(PushBenchError, ValueError):
    """A source that cannot be used as given (missing, unknown format, bad revision)."""


class UnsafeArchiveError(SourceError):
    """An archive member would escape the target folder or is a link or device."""


@dataclass(frozen=True)
class Materialised:
    """A source copied into ``root`` (regular files only), with its identity."""

    kind: str                     # "sdist" (any archive) | "folder" | "git"
    root: Path
    sha256: str                   # archive sha256 for "sdist", else the tree hash
    tree_sha256: str
    files: int
    skipped: dict[str, int] = field(default_factory=dict)  # symlinks, special, ignored
    source_commit: str | None = None                       # git: the resolved commit


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
            raise SourceError(f"source {path} is a file but not an archive "
                              f"({', '.join(ARCHIVE_SUFFIXES)})")
        return "sdist"
    if path.is_dir():
        if (path / ".git").exists() or rev is not None:
            return "git"
        return "folder"
    raise SourceError(f"source {path} is neither a file nor a folder")


def _ignored(parts: tuple[str, ...]) -> bool:
    return any(p in IGNORED_DIRS for p in parts[:-1]) or parts[-1] in IGNORED_DIRS or \
        parts[-1].endswith(IGNORED_SUFFIXES)


def member_problem(name: str) -> str | None:
    """Why an archive member name may not be extracted (``None`` if it is safe).

    Refused: empty names, NUL or backslash anywhere, absolute paths (``/x``, ``C:...``) and any
    ``..`` part. ``.`` parts and repeated slashes are harmless and allowed.
    """
    if not name or "\x00" in name:
        return "has an empty name or a NUL character"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "has an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "contains a '..' part (it would escape the target folder)"
    return None


def _refuse(archive: Path, name: str, why: str) -> UnsafeArchiveError:
    return UnsafeArchiveError(f"archive {archive.name}: member {name!r} {why}; refused, "
                              "nothing was extracted")


@dataclass(frozen=True)
class ExtractLimits:
    """Caps on an archive from outside (``None``: no cap). Sizes are the members' stated
    sizes, checked from each header before its data is read, so a compressed bomb stops at
    the header that crosses a cap."""

    members: int | None = None
    member_bytes: int | None = None
    total_bytes: int | None = None


def _limit_problem(limits: ExtractLimits | None, count: int, size: int, total: int
                   ) -> str | None:
    if limits is None:
        return None
    if limits.members is not None and count > limits.members:
        return f"is one member too many (the cap is {limits.members} members)"
    if limits.member_bytes is not None and size > limits.member_bytes:
        return f"is {size} bytes (the cap is {limits.member_bytes} bytes per member)"
    if limits.total_bytes is not None and total > limits.total_bytes:
        return f"brings the total to {total} bytes (the cap is {limits.total_bytes} bytes)"
    return None


def safe_extract(archive: Path, dest: Path, limits: ExtractLimits | None = None) -> None:
    """Extract ``archive`` into ``dest`` after checking every member (see the module doc),
    and, with ``limits``, the member count and sizes (:class:`ExtractLimits`)."""
    if archive.name.lower().endswith(".zip"):
        try:
            zf = zipfile.ZipFile(archive)
        except zipfile.BadZipFile as e:
            raise SourceError(f"archive {archive.name} is not a readable zip file: {e}") from e
        with zf:
            infos = zf.infolist()
            total = 0
            for i, info in enumerate(infos, 1):
                total += info.file_size
                why = member_problem(info.filename)
                if why is None and stat.S_ISLNK(info.external_attr >> 16):
                    why = "is a symbolic link"
                why = why or _limit_problem(limits, i, info.file_size, total)
                if why:
                    raise _refuse(archive, info.filename, why)
            for info in infos:
                target = dest.joinpath(*PurePosixPath(info.filename).parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                if (info.external_attr >> 16) & 0o100:
                    target.chmod(0o700)
        return
    try:
        tar = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as e:
        raise SourceError(f"archive {archive.name} is not a readable tar archive: {e}") from e
    with tar:
        members, total = [], 0
        for m in _members(tar, archive):  # streams: stops at the first member over a cap
            members.append(m)
            total += m.size
            why = member_problem(m.name)
            if why is None and m.issym():
                why = f"is a symbolic link (to {m.linkname!r})"
            if why is None and m.islnk():
                why = f"is a hard link (to {m.linkname!r})"
            if why is None and not (m.isfile() or m.isdir()):
                why = "is a device, FIFO or other special file"
            why = why or _limit_problem(limits, len(members), m.size, total)
            if why:
                raise _refuse(archive, m.name, why)
        try:
            tar.extractall(dest, members=members, filter="data")
        except tarfile.FilterError as e:  # pragma: no cover - the checks above come first
            raise UnsafeArchiveError(f"archive {archive.name}: {e}; refused") from e
        except (tarfile.TarError, OSError, EOFError, zlib.error) as e:  # truncated data, a file
            # where a folder is
            raise SourceError(f"archive {archive.name} cannot be extracted: {e}") from e


def _members(tar: tarfile.TarFile, archive: Path):
    """The members of ``tar`` one header at a time (a truncated or corrupt archive is a
    :class:`SourceError`, not a traceback)."""
    try:
        yield from tar
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise SourceError(f"archive {archive.name} is not a readable tar archive: {e}") from e


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


def copy_folder(src: Path, dest: Path) -> dict[str, int]:
    """Copy the regular files of ``src`` into ``dest`` (links and special files skipped)."""
    skipped = {"ignored": 0, "symlinks": 0, "special": 0}
    dest.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(src):  # never follows symlinked folders
        rel = Path(dirpath).relative_to(src)
        for d in list(dirnames):
            if d in IGNORED_DIRS or Path(dirpath, d).is_symlink():
                skipped["ignored" if d in IGNORED_DIRS else "symlinks"] += 1
                dirnames.remove(d)
        dirnames.sort()
        for f in sorted(filenames):
            p = Path(dirpath, f)
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                skipped["symlinks"] += 1
            elif not stat.S_ISREG(st.st_mode):
                skipped["special"] += 1
            elif f.endswith(IGNORED_SUFFIXES):
                skipped["ignored"] += 1
            else:
                out = dest / rel / f
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, out)
                out.chmod(0o700 if st.st_mode & stat.S_IXUSR else 0o600)
    return skipped


def export_git(repo_path: Path, rev: str | None, dest: Path) -> tuple[str, dict[str, int]]:
    """Write the committed tree of ``repo_path`` at ``rev`` (default ``HEAD``) into ``dest``;
    return the resolved commit id and the skipped counts."""
    import git  # gitpython, needed only here

    try:
        repo = git.Repo(repo_path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise SourceError(f"{repo_path} is not a git repository (give a folder without --rev "
                          "to copy it as a plain folder)") from e
    try:
        commit = repo.commit(rev or "HEAD")
    except (git.BadName, ValueError, git.GitCommandError) as e:
        hint = "" if rev else " (a repository without commits? --working-tree takes its files)"
        raise SourceError(f"revision {rev or 'HEAD'!r} not found in {repo_path}{hint}") from e
    skipped = {"ignored": 0, "symlinks": 0, "special": 0}
    dest.mkdir(parents=True, exist_ok=True)
    for item in commit.tree.traverse():
        parts = PurePosixPath(item.path).parts
        if item.type == "tree":
            continue
        if item.type != "blob":  # a submodule (a commit inside the tree)
            skipped["special"] += 1
            continue
        if _ignored(parts):
            skipped["ignored"] += 1
            continue
        if item.mode == 0o120000:
            skipped["symlinks"] += 1
            continue
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
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        exe = "x" if p.stat().st_mode & stat.S_IXUSR else "-"
        lines.append(f"{rel.as_posix()}\0{exe}\0{digest}\n")
    lines.sort()
    return hashlib.sha256("".join(lines).encode()).hexdigest(), len(lines)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def materialise(source: Path, work: Path, rev: str | None = None,
                kind: str | None = None) -> Materialised:
    """Copy ``source`` into a new folder under the empty folder ``work``; see the module doc.

    ``kind`` forces ``folder`` for a git working tree (uncommitted files included) or ``git``;
    by default it is :func:`detect_kind`'s answer.
    """
    source = Path(source).expanduser()
    detected = detect_kind(source, rev)
    kind = kind or detected
    if kind not in KINDS:
        raise SourceError(f"unknown source kind {kind!r}; one of {', '.join(KINDS)}")
    if kind != detected and not (kind == "folder" and detected == "git" and rev is None) \
            and not (kind == "git" and detected == "folder"):
        raise SourceError(f"source {source} is a {detected}, not a {kind}")
    commit = None
    if kind == "sdist":
        extract = work / "extract"
        extract.mkdir()
        safe_extract(source, extract)
        skipped = _prune(extract)
        tops = list(extract.iterdir())
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else extract
        sha = sha256_file(source)
    elif kind == "folder":
        root = work / "tree"
        skipped = copy_folder(source, root)
        sha = None
    else:
        root = work / "tree"
        commit, skipped = export_git(source, rev, root)
        sha = None
    tree, files = tree_hash(root)
    if files == 0:
        raise SourceError(f"source {source} holds no files to freeze")
    return Materialised(kind=kind, root=root, sha256=sha or tree, tree_sha256=tree, files=files,
                        skipped=skipped, source_commit=commit)
