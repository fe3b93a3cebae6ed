"""The bundle archive: deterministic tar.gz bytes out, checked and capped extraction in.

Writing (:func:`write_archive`): members in sorted name order, each a regular file with mode
0644, mtime :data:`MTIME`, uid/gid 0 and no user or group names, in a gzip stream whose header
carries no file name and mtime 0; the same members give the same archive bytes on any machine.
``bundle.json`` (the manifest) names the sha256 and size of every other member.

Reading (:func:`extract_bundle`, the one place a bundle from outside is unpacked): the archive
goes through :func:`pushbench.archives.safe_extract` with :data:`LIMITS` (every member checked
as it streams: no absolute path, no ``..``, no link, device or FIFO; member count, per-member
and total size, ratio, path length and depth capped), into a fresh private folder. Then
:func:`read_manifest` holds the extracted files to the manifest: every listed member present
with its sha256, nothing unlisted, names of the expected shapes only.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from .. import archives, paths, sources
from ..errors import PushBenchError

MANIFEST = "bundle.json"
KIND = "pushbench-bundle"
SCHEMA_VERSION = 1
SUFFIX = ".pushbench.tar.gz"
MTIME = 946684800  # 2000-01-01T00:00:00Z: a fixed member mtime (same inputs, same bytes)
LIMITS = archives.Limits(files=200_000, file_bytes=64 << 20, total_bytes=4 << 30)
# The member names a bundle may hold (anything else is refused even when listed).
_NAME = re.compile(
    r"^(bundle\.json|runs/[0-9]{3}/(run\.json|records/[0-9]{6}\.json|"
    r"blackbox/(run\.json|episode\.json|trace\.jsonl)))$"
)


class BundleError(PushBenchError, ValueError):
    """A bundle that cannot be written, read or trusted as given (message says why)."""


def dumps(obj) -> bytes:
    """Canonical JSON bytes of ``obj`` (sorted keys, ASCII, no spaces) plus a newline."""
    return (
        json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"
    ).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_archive(members: dict[str, bytes], out: str | Path) -> str:
    """Write ``members`` (name -> bytes) as a deterministic tar.gz at ``out``; its sha256."""
    for name in members:
        if not _NAME.match(name):  # pragma: no cover - the writer names members itself
            raise BundleError(f"internal: member name {name!r} is not a bundle member name")
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name in sorted(members):
                data = members[name]
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), MTIME, 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
    data = raw.getvalue()
    paths.write_private(Path(out), data)
    return sha256(data)


def extract_bundle(archive: str | Path, dest: str | Path) -> Path:
    """Unpack bundle ``archive`` into the new folder ``dest`` (0700) under :data:`LIMITS`.

    The one extraction call site of bundles: refusals are :class:`BundleError` naming the
    member and the rule or cap it broke; nothing is written outside ``dest``.
    """
    archive, dest = Path(archive), Path(dest)
    if not archive.is_file():
        raise BundleError(
            f"bundle {archive} not found"
            if not archive.exists()
            else f"bundle {archive} is not a file"
        )
    paths.private_dir(dest)
    try:
        archives.safe_extract(archive, dest, LIMITS, flags=False)  # no command-line flags here
    except sources.SourceError as e:
        raise BundleError(f"bundle {archive}: {e}") from None
    return dest


def _files(root: Path) -> Iterable[str]:
    for p in sorted(root.rglob("*")):
        if p.is_symlink() or not p.is_dir():
            yield p.relative_to(root).as_posix()


def read_manifest(root: str | Path, name: str = "bundle") -> dict:
    """The manifest of an extracted bundle, after holding every file to it.

    Refused (:class:`BundleError`): no or unreadable ``bundle.json``, another kind or schema,
    a file the manifest does not list, a listed member missing, of another size or sha256, or
    a member name outside the bundle layout.
    """
    root = Path(root)
    file = root / MANIFEST
    if not file.is_file():
        raise BundleError(f"{name}: no {MANIFEST} (not a PushBench bundle)")
    try:
        manifest = json.loads(file.read_bytes())
    except ValueError as e:
        raise BundleError(f"{name}: {MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != KIND:
        raise BundleError(f"{name}: {MANIFEST} is not a {KIND} manifest")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise BundleError(
            f"{name}: bundle schema_version {manifest.get('schema_version')!r}; "
            f"this PushBench reads {SCHEMA_VERSION}"
        )
    listed = manifest.get("members")
    if not isinstance(listed, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("sha256"), str) for v in listed.values()
    ):
        raise BundleError(f"{name}: {MANIFEST} has no valid member list")
    for member in _files(root):
        if member == MANIFEST:
            continue
        if member not in listed:
            raise BundleError(f"{name}: member {member!r} is not listed in {MANIFEST}")
    for member, entry in sorted(listed.items()):
        if (
            not _NAME.match(member)
            or member == MANIFEST
            or sources.member_problem(member) is not None
        ):
            raise BundleError(f"{name}: {MANIFEST} lists {member!r}, not a bundle member name")
        path = root.joinpath(*PurePosixPath(member).parts)
        if path.is_symlink() or not path.is_file():
            raise BundleError(f"{name}: member {member!r} is listed but missing")
        data = path.read_bytes()
        if sha256(data) != entry["sha256"] or len(data) != entry.get("size"):
            raise BundleError(
                f"{name}: member {member!r} does not match its sha256 in "
                f"{MANIFEST} (changed after bundling)"
            )
    return manifest


def member_json(root: Path, member: str, name: str = "bundle"):
    """The JSON value of ``member`` of an extracted, checked bundle."""
    try:
        return json.loads(root.joinpath(*PurePosixPath(member).parts).read_bytes())
    except (OSError, ValueError) as e:
        raise BundleError(f"{name}: member {member!r} is not readable JSON ({e})") from None
