"""Bounded, checked intake of archives and file trees from outside (sdists, user folders, result
bundles): the limits, the name rules, and :func:`safe_extract`.

API (the one way PushBench unpacks an archive it did not write)::

    from pushbench.archives import Limits, safe_extract, SourceError
    limits = Limits(total_bytes=64 << 20, files=1_000)      # or DEFAULT_LIMITS
    done = safe_extract(Path("x.tar.gz"), Path("out"), limits)   # -> Extracted(files, bytes)

:func:`safe_extract` reads ``.tar`` (plain, gzip, bzip2, xz: recognised by content) and
``.zip``. It streams: each member is checked when it is reached, its bytes are counted as they
are written (declared sizes are never trusted), and nothing is read whole into memory. What it
guarantees:

* only regular files and folders are created, all inside ``dest`` (files 0600, or 0700 when
  owner-executable in the archive); absolute paths, ``..`` parts, backslashes, NUL, links,
  devices and FIFOs are refused (:class:`UnsafeArchiveError`), as are a member that needs a
  folder where the archive holds a file (``a`` and ``a/b``), a name given twice, and a file
  named only by ``.`` parts;
* names must be UTF-8 and no part longer than 255 bytes (what file systems hold), else
  :class:`BadNameError` showing the name escaped;
* every :class:`Limits` field is enforced while streaming (:class:`LimitExceeded`, whose
  message names the limit and the command-line flag that raises it, :data:`FLAGS`);
* on any error ``dest`` is left empty (what was written is removed; a ``dest`` the call
  created is removed too), so a refused archive leaves nothing behind.

Every error is a :class:`SourceError` (a :class:`~pushbench.errors.PushBenchError` and a
``ValueError``) with a one-line message; nothing else escapes except ``KeyboardInterrupt``.
One known bound is coarser: tar reads a member's own header extensions (pax records, GNU long
names) into memory whole, so those are bounded by ``total_bytes`` rather than by a chunk.

Defaults (:data:`DEFAULT_LIMITS`) are sized for real packages with room. One of the largest
sdists of the 20 most downloaded PyPI packages, botocore (measured on 1.44.8: 16.4 MiB gzip),
unpacks to 136 MiB in 5,053 members at a ratio of 8.3:1, its largest file 4.2 MiB, its
longest path 128 bytes, 8 parts deep. The defaults: 2 GiB in total (15x), 256 MiB per file
(60x), 200,000 entries (40x), 100:1 overall once past the first 16 MiB (12x), 1,024-byte
paths (8x), 64 parts (8x).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath

from .errors import PushBenchError

CHUNK = 1 << 20  # bytes copied at a time
NAME_MAX = 255  # bytes in one path part (ext4, APFS, NTFS all hold 255)
RATIO_GRACE = 16 << 20  # the ratio limit applies once this much came out


class SourceError(PushBenchError, ValueError):
    """Input from outside (an archive, folder or repository) that cannot be taken in as given."""


class UnsafeArchiveError(SourceError):
    """An archive member would escape the target, is a link or device, or clashes with another."""


class LimitExceeded(SourceError):
    """A :class:`Limits` bound was reached; the message names the limit and its flag."""


class BadNameError(SourceError):
    """A file name that is not UTF-8 or has a part longer than 255 bytes (shown escaped)."""


@dataclass(frozen=True)
class Limits:
    """Bounds on one archive or tree taken in (each checked while streaming)."""

    total_bytes: int = 2 << 30  # uncompressed bytes of all files together
    file_bytes: int = 256 << 20  # bytes of any one file
    files: int = 200_000  # files and folders (archive members, tree entries)
    ratio: int = 100  # uncompressed / compressed bytes (archives; past 16 MiB)
    path_length: int = 1024  # bytes of one relative path (UTF-8)
    depth: int = 64  # parts of one relative path

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise SourceError(f"{FLAGS[f.name]} must be a whole number >= 1, got {v!r}")


DEFAULT_LIMITS = Limits()
UNITS = {
    "total_bytes": " in total",
    "file_bytes": " per member (file)",
    "files": " members (entries)",
    "ratio": "",
    "path_length": " per path",
    "depth": " parts per path",
}
FLAGS = {
    "total_bytes": "--max-total-bytes",
    "file_bytes": "--max-file-bytes",
    "files": "--max-files",
    "ratio": "--max-ratio",
    "path_length": "--max-path-length",
    "depth": "--max-depth",
}
_SIZE = re.compile(r"\s*([0-9]{1,15})\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, flag: str = "size") -> int:
    """``"512M"``, ``"2GiB"``, ``"1000"`` (bytes) -> bytes (binary units); one-line error."""
    m = _SIZE.fullmatch(str(text))
    if not m or int(m.group(1)) < 1:
        raise SourceError(f"{flag} {text!r}: give a size like 500M, 2G or a number of bytes")
    return int(m.group(1)) * _UNIT[m.group(2).upper()]


def human(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"`` (bytes below 1 KiB as ``"N bytes"``)."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def escaped(name: str | bytes) -> str:
    """A name as one line of text, quoted: bytes that are not UTF-8 and control characters
    shown as ``\\xNN`` (valid UTF-8 letters are kept as they are)."""
    raw = os.fsencode(name) if isinstance(name, str) else bytes(name)
    text = raw.decode("utf-8", "backslashreplace")
    return (
        "'" + "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c for c in text) + "'"
    )


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


class Budget:
    """Counts one archive or tree against :class:`Limits` (files, bytes, ratio, names).

    ``where`` starts every message (``archive x.zip``, ``folder /src``); ``compressed`` is the
    archive's size for the ratio limit (``None``: no ratio, e.g. a folder).
    """

    def __init__(
        self, limits: Limits, where: str, compressed: int | None = None, flags: bool = True
    ) -> None:
        self.limits, self.where, self.compressed = limits, where, compressed
        self.flags = flags  # name the command-line flag that raises a limit
        self.files = 0
        self.bytes = 0

    def exceeded(self, field: str, what: str) -> LimitExceeded:
        value = getattr(self.limits, field)
        shown = (
            human(value)
            if field.endswith("bytes")
            else f"{value}:1"
            if field == "ratio"
            else str(value)
        )
        hint = f" (raise it with {FLAGS[field]})" if self.flags else ""
        return LimitExceeded(
            f"{self.where}: {what} exceeds the limit {field} = {shown}"
            f"{UNITS[field]}; refused, nothing was kept{hint}"
        )

    def name(self, rel: str) -> tuple[str, ...]:
        """Check one relative path's encoding, part lengths, length and depth; its parts."""
        try:
            raw = rel.encode("utf-8")
        except UnicodeEncodeError:
            raise BadNameError(
                f"{self.where}: the name {escaped(rel)} is not UTF-8; rename "
                "it (PushBench stores UTF-8 names only); refused"
            ) from None
        parts = tuple(p for p in PurePosixPath(rel).parts if p not in (".", "/"))
        long = [p for p in parts if len(p.encode("utf-8")) > NAME_MAX]
        if long:
            raise BadNameError(
                f"{self.where}: {escaped(rel)} has a name part of "
                f"{len(long[0].encode('utf-8'))} bytes; file systems hold "
                f"{NAME_MAX}; refused"
            )
        if len(raw) > self.limits.path_length:
            raise self.exceeded(
                "path_length", f"the path {escaped(rel)[:80]}... ({len(raw)} bytes)"
            )
        if len(parts) > self.limits.depth:
            raise self.exceeded("depth", f"the path {escaped(rel)[:80]} ({len(parts)} parts deep)")
        return parts

    def entry(self) -> None:
        self.files += 1
        if self.files > self.limits.files:
            raise self.exceeded("files", f"the count of entries (over {self.limits.files})")

    def add(self, n: int, file_total: int, name: str) -> None:
        """``n`` more bytes, ``file_total`` of them so far in the file ``name``."""
        self.bytes += n
        if file_total > self.limits.file_bytes:
            raise self.exceeded("file_bytes", f"the file {escaped(name)}")
        if self.bytes > self.limits.total_bytes:
            raise self.exceeded("total_bytes", "the uncompressed size")
        self.ratio(self.bytes)

    def ratio(self, out: int) -> None:
        if (
            self.compressed is not None
            and out > RATIO_GRACE
            and out > self.limits.ratio * max(self.compressed, 1)
        ):
            raise self.exceeded(
                "ratio", f"the compression ratio (over {human(out)} from {human(self.compressed)})"
            )

    def copy(self, src, target: Path, name: str, executable: bool) -> None:
        """Stream ``src`` into the new file ``target`` in chunks, counting every byte."""
        done = 0
        with open(target, "xb") as out:
            while True:
                chunk = src.read(CHUNK)
                if not chunk:
                    break
                done += len(chunk)
                self.add(len(chunk), done, name)
                out.write(chunk)
        target.chmod(0o700 if executable else 0o600)


class _Layout:
    """Names already extracted: refuses duplicates and a file where a folder is needed."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.files: set[tuple[str, ...]] = set()
        self.dirs: set[tuple[str, ...]] = set()

    def add(self, parts: tuple[str, ...], is_dir: bool, name: str) -> None:
        for k in range(1, len(parts)):
            if parts[:k] in self.files:
                raise self.clash(
                    name,
                    f"needs {'/'.join(parts[:k])!r} to be a folder, but the "
                    "archive holds it as a file",
                )
            self.dirs.add(parts[:k])
        if not parts:
            if is_dir:
                return
            raise self.clash(name, "names no file")
        if parts in self.files:
            raise self.clash(name, "appears twice")
        if not is_dir and parts in self.dirs:
            raise self.clash(name, "is a file, but the archive also holds it as a folder")
        (self.dirs if is_dir else self.files).add(parts)

    def clash(self, name: str, what: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(
            f"{self.where}: member {escaped(name)} {what}; refused, nothing was kept"
        )


@dataclass(frozen=True)
class Extracted:
    files: int
    bytes: int


def _refuse(where: str, name: str, why: str) -> UnsafeArchiveError:
    return UnsafeArchiveError(f"{where}: member {escaped(name)} {why}; refused, nothing was kept")


def _member_name(where: str, budget: Budget, name: str) -> tuple[str, ...]:
    why = member_problem(name)
    if why:
        raise _refuse(where, name, why)
    return budget.name(name)


def safe_extract(
    archive: Path, dest: Path, limits: Limits = DEFAULT_LIMITS, flags: bool = True
) -> Extracted:
    """Extract ``archive`` into ``dest`` (missing or empty) under ``limits``; see the module doc.

    ``flags``: refusals name the command-line flag that raises the limit (``pushbench
    snapshots``); callers without such flags pass False."""
    archive, dest = Path(archive), Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SourceError(f"cannot extract into {dest}: it is not an empty folder")
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        if archive.name.lower().endswith(".zip"):
            return _extract_zip(archive, dest, limits, flags)
        return _extract_tar(archive, dest, limits, flags)
    except BaseException:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        else:
            for p in list(dest.iterdir()):
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        raise


def _extract_zip(archive: Path, dest: Path, limits: Limits, flags: bool) -> Extracted:
    where = f"archive {archive.name}"
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise SourceError(f"{where} is not a readable zip file: {e}") from None
    budget = Budget(limits, where, archive.stat().st_size, flags)
    layout = _Layout(where)
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.files:  # the central directory is known up front
            raise budget.exceeded("files", f"the count of {len(infos)} entries")
        for info in infos:
            name = info.filename
            if not info.flag_bits & 0x800:  # not flagged UTF-8: zipfile decoded it as cp437
                try:
                    name.encode("cp437").decode("utf-8")
                except UnicodeEncodeError:
                    pass
                except UnicodeDecodeError:
                    raise BadNameError(
                        f"{where}: the member name "
                        f"{escaped(os.fsdecode(name.encode('cp437')))} is not "
                        "UTF-8; rename it; refused, nothing was kept"
                    ) from None
            parts = _member_name(where, budget, name)
            mode = info.external_attr >> 16
            kind = stat.S_IFMT(mode)
            if kind == stat.S_IFLNK:
                raise _refuse(where, name, "is a symbolic link")
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise _refuse(where, name, "is a device, FIFO or other special file")
            is_dir = info.is_dir()
            layout.add(parts, is_dir, name)
            budget.entry()
            target = dest.joinpath(*parts)
            if is_dir:
                target.mkdir(parents=True, exist_ok=True)
                continue
            if info.file_size > limits.file_bytes:  # stated in the directory: refused unread
                budget.add(0, info.file_size, name)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src:
                    budget.copy(src, target, name, bool(mode & 0o100))
            except (
                zipfile.BadZipFile,
                zlib.error,
                EOFError,
                NotImplementedError,
                RuntimeError,
                lzma.LZMAError,
            ) as e:
                raise SourceError(
                    f"{where}: member {escaped(name)} cannot be read "
                    f"({type(e).__name__}: {str(e)[:200]}); refused"
                ) from None
            except OSError as e:
                raise SourceError(
                    f"{where} cannot be extracted into {dest}: {e.strerror or e}"
                ) from None
    return Extracted(budget.files, budget.bytes)


class _Meter(io.RawIOBase):
    """The decompressed tar stream, counted: total and ratio limits apply to it as it flows."""

    def __init__(self, inner, budget: Budget) -> None:
        self.inner, self.budget, self.count = inner, budget, 0
        # headers and padding come on top of the files' bytes: 1 KiB per entry is plenty
        self.cap = budget.limits.total_bytes + 1024 * budget.limits.files + CHUNK

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.inner.readinto(b)
        self.count += n or 0
        if self.count > self.cap:
            raise self.budget.exceeded("total_bytes", "the uncompressed size")
        self.budget.ratio(self.count)
        return n


def _decompressed(raw):
    magic = raw.read(6)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic[:3] == b"BZh":
        return bz2.BZ2File(raw)
    if magic == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)
    return raw


def _extract_tar(archive: Path, dest: Path, limits: Limits, flags: bool) -> Extracted:
    where = f"archive {archive.name}"
    try:
        raw = open(archive, "rb")
    except OSError as e:
        raise SourceError(f"{where} cannot be read: {e.strerror or e}") from None
    budget = Budget(limits, where, archive.stat().st_size, flags)
    layout = _Layout(where)
    with raw:
        try:
            meter = _Meter(_decompressed(raw), budget)
            with tarfile.open(fileobj=io.BufferedReader(meter, CHUNK), mode="r|") as tar:
                for m in tar:
                    parts = _member_name(where, budget, m.name)
                    if m.issym():
                        raise _refuse(where, m.name, f"is a symbolic link (to {m.linkname!r})")
                    if m.islnk():
                        raise _refuse(where, m.name, f"is a hard link (to {m.linkname!r})")
                    if not (m.isfile() or m.isdir()):
                        raise _refuse(where, m.name, "is a device, FIFO or other special file")
                    layout.add(parts, m.isdir(), m.name)
                    budget.entry()
                    target = dest.joinpath(*parts)
                    if m.isdir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if m.size > limits.file_bytes:  # stated in the header: refused unread
                        budget.add(0, m.size, m.name)
                    budget.copy(tar.extractfile(m), target, m.name, bool(m.mode & 0o100))
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError) as e:
            if isinstance(e, OSError) and e.filename is not None:
                raise SourceError(
                    f"{where} cannot be extracted into {dest}: {e.strerror or e}"
                ) from None
            raise SourceError(
                f"{where} is not a readable tar archive or is damaged "
                f"({type(e).__name__}: {str(e)[:200]})"
            ) from None
    return Extracted(budget.files, budget.bytes)
