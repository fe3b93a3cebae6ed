"""The DataOps-lite workspace sandbox: every file tool and every checker read goes through here.

Contract
    * Paths are relative to the workspace root, ``/``-separated (``./`` is allowed). Refused,
      each with a :class:`SandboxError` whose message says why: absolute paths (``/x``, ``~x``),
      any ``..`` component, NUL or backslash characters, paths longer than
      :data:`MAX_PATH_CHARS`, paths whose real path (``os.path.realpath``) leaves the root,
      symlinks anywhere on the path (every component is opened with ``O_NOFOLLOW`` relative to
      its parent's descriptor, so a swapped-in link is refused too), anything that is not a
      regular file (devices, FIFOs, sockets: checked with ``lstat`` before opening, so a FIFO
      never blocks and a device is never opened), hard-linked files (``st_nlink > 1``, which
      could alias a file outside), reads of files over :data:`MAX_FILE_BYTES` and writes whose
      result would exceed it, and more than :data:`MAX_NEW_FILES` new files per episode.
    * Writes only replace or create regular files in existing folders; no folder is created.
    * Nothing outside the root is ever opened, read or written.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile

MAX_FILE_BYTES = 256 * 1024
MAX_PATH_CHARS = 400
MAX_NEW_FILES = 50


class SandboxError(Exception):
    """A refused file operation; ``code`` is a short machine name, ``message`` is for the agent."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Workspace:
    """A folder the episode owns; :meth:`remove` deletes it (the env calls it on close/reset)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise ValueError(f"workspace root {root!r} is not a folder")
        self.new_files = 0

    @classmethod
    def create(cls, prefix: str = "pushbench-dataops-") -> Workspace:
        return cls(tempfile.mkdtemp(prefix=prefix))

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # ----- path checks ---------------------------------------------------------------------
    def parts(self, rel: str) -> list[str]:
        """Validated path components of ``rel`` (no fs access beyond ``realpath``)."""
        if not isinstance(rel, str) or not rel.strip():
            raise SandboxError(
                "bad_path", "path must be a non-empty relative path like 'u01/data.csv'"
            )
        if len(rel) > MAX_PATH_CHARS:
            raise SandboxError("bad_path", f"path is longer than {MAX_PATH_CHARS} characters")
        if "\x00" in rel or "\\" in rel:
            raise SandboxError("bad_path", "path must not contain NUL or backslash characters")
        if rel.startswith(("/", "~")):
            raise SandboxError(
                "outside_workspace",
                f"{rel!r} is absolute; use a path relative to the workspace, e.g. 'u01/data.csv'",
            )
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if any(p == ".." for p in parts):
            raise SandboxError(
                "outside_workspace", f"{rel!r} uses '..'; paths must stay inside the workspace"
            )
        if not parts:
            raise SandboxError("bad_path", f"{rel!r} names the workspace itself, not a file")
        real = os.path.realpath(os.path.join(self.root, *parts))
        if os.path.commonpath([self.root, real]) != self.root:
            raise SandboxError(
                "outside_workspace",
                f"{rel!r} resolves outside the workspace (through a symlink); refused",
            )
        return parts

    def _open_parent(self, parts: list[str]) -> int:
        """Descriptor of the folder holding ``parts[-1]``, walked without following links."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, name in enumerate(parts[:-1]):
                try:
                    nfd = os.open(
                        name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                    )
                except FileNotFoundError:
                    raise SandboxError(
                        "not_found", f"folder {'/'.join(parts[: i + 1])!r} does not exist"
                    ) from None
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise SandboxError(
                            "not_allowed",
                            f"{'/'.join(parts[: i + 1])!r} is a symlink or not a folder; refused",
                        ) from None
                    raise
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _lstat(self, dfd: int, name: str, rel: str):
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise SandboxError("not_allowed", f"{rel!r} is a symlink; symlinks are not followed")
        if stat.S_ISDIR(st.st_mode):
            raise SandboxError("is_directory", f"{rel!r} is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise SandboxError(
                "not_allowed", f"{rel!r} is not a regular file (device, FIFO or socket); refused"
            )
        if st.st_nlink > 1:
            raise SandboxError("not_allowed", f"{rel!r} is hard-linked elsewhere; refused")
        return st

    # ----- operations ----------------------------------------------------------------------
    def read_bytes(self, rel: str) -> bytes:
        parts = self.parts(rel)
        dfd = self._open_parent(parts)
        try:
            st = self._lstat(dfd, parts[-1], rel)
            if st is None:
                raise SandboxError("not_found", f"file {rel!r} does not exist")
            if st.st_size > MAX_FILE_BYTES:
                raise SandboxError(
                    "too_large", f"{rel!r} is {st.st_size} bytes; the limit is {MAX_FILE_BYTES}"
                )
            fd = os.open(
                parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd
            )
        finally:
            os.close(dfd)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise SandboxError("not_allowed", f"{rel!r} is not a regular file; refused")
            return fh.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8", errors="replace")

    def exists(self, rel: str) -> bool:
        try:
            self.read_bytes(rel)
        except SandboxError:
            return False
        return True

    def write_text(self, rel: str, text: str) -> int:
        """Replace or create ``rel`` with ``text`` (UTF-8); return the byte size written."""
        data = text.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise SandboxError(
                "too_large",
                f"refusing to write {len(data)} bytes to {rel!r}; "
                f"the limit is {MAX_FILE_BYTES} bytes per file",
            )
        parts = self.parts(rel)
        dfd = self._open_parent(parts)
        try:
            existed = self._lstat(dfd, parts[-1], rel) is not None
            if not existed and self.new_files >= MAX_NEW_FILES:
                raise SandboxError(
                    "too_many_files", f"at most {MAX_NEW_FILES} new files per episode"
                )
            fd = os.open(
                parts[-1],
                os.O_WRONLY
                | os.O_CREAT
                | os.O_TRUNC
                | os.O_NOFOLLOW
                | os.O_NONBLOCK
                | os.O_CLOEXEC,
                0o644,
                dir_fd=dfd,
            )
        finally:
            os.close(dfd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if not existed:
            self.new_files += 1
        return len(data)

    def setup_write(self, rel: str, text: str) -> None:
        """Generator-side write (creates folders); only used while building the workspace."""
        path = os.path.join(self.root, *self.parts(rel))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)

    def listing(self) -> list[str]:
        """Every regular file under the root as a relative path (for tests and debugging)."""
        out = []
        for dirpath, _, files in os.walk(self.root):
            for f in files:
                out.append(
                    os.path.relpath(os.path.join(dirpath, f), self.root).replace(os.sep, "/")
                )
        return sorted(out)
