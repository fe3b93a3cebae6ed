"""Signed black-box run folders: the installation key and what ``pushbench mcp`` signs with it.

Every PushBench installation (one ``$PUSHBENCH_HOME``) has one secret key,
``$PUSHBENCH_HOME/keys/run-signing.key`` (32 random bytes as hex; the folder 0700, the file
0600, owned by the user). It is created on first use by whichever process gets there first
(written to a private temporary file, then ``link``-ed into place, which fails if another
process won the race: everyone then reads the winner's key) and never lies inside a run folder
or an agent's workspace (:func:`check_outside`).

A run folder of schema 3 is signed with HMAC-SHA256 under that key:

* ``run.json`` and ``episode.json`` end with a ``"signature"`` member: the MAC of the file's
  bytes without that member (:func:`seal_json`). Any edit of a label (condition, agent,
  controller, seed, budget, ...) or of the record, down to its whitespace, breaks it.
* every ``trace.jsonl`` line ends with ``"sig"``: the MAC of the line's bytes without it
  (:func:`sign_line`). Lines chain by ``prev`` (sha256 of the line before, signature
  included) from a **genesis** that binds the run id and the whole configuration
  (:func:`genesis`: task, instance, seed, controller, condition, agent, budget option,
  PushBench version, family versions). ``episode.json`` records the chain's head, so the
  signed record commits to the trace.

Each MAC is computed over a domain tag plus the bytes, so a signed line can never pass for a
signed record or run manifest. ``run.json`` names the key by a non-secret id
(:func:`key_id`), so a run signed elsewhere, or before the key was replaced, is told apart
from an edited one. :func:`verify_run` is what ``pushbench evaluate`` asks: ``valid``,
``invalid`` (with reasons) or ``unsigned`` (a schema-2 run, written before runs were signed).

What a signature proves is stated in docs/blackbox.md (threat model): the files were written
by a process that could read this installation's key, i.e. by PushBench as this user, and not
changed since. It proves nothing on another installation, and nothing about who sent the calls.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from pathlib import Path

from .. import errors, paths

ALG = "hmac-sha256"
KEY_DIR, KEY_FILE = "keys", "run-signing.key"
KEY_BYTES = 32
SIGNED_SCHEMA = 3  # RUN_SCHEMA_VERSION of signed runs; 2 = unsigned (digest chain only)
# The configuration the genesis binds (run.json fields, compared by re-attach too).
CONFIG_FIELDS = ("task", "instance", "seed", "controller", "condition", "agent", "budget")
GENESIS_PREFIX = b"pushbench-trace-genesis-v3\x00"
RUN, RECORD, LINE = b"pushbench-run\x00", b"pushbench-record\x00", b"pushbench-trace-line\x00"

_JSON_TAIL = re.compile(rb',\n "signature": "([0-9a-f]{64})"\n\}\Z')
_LINE_TAIL = re.compile(rb',"sig":"([0-9a-f]{64})"\}\n\Z')


class SigningKeyError(errors.PushBenchError):
    """The installation key cannot be used safely (the message says how to fix it)."""


# ----- the key ---------------------------------------------------------------------------------
def key_path() -> Path:
    """Where this installation's key lives (``$PUSHBENCH_HOME/keys/run-signing.key``)."""
    return paths.home() / KEY_DIR / KEY_FILE


def installation_key(create: bool = True) -> bytes | None:
    """This installation's signing key; created (race-safely) when missing and ``create``.

    Returns ``None`` when there is no key and ``create`` is false. Raises
    :class:`SigningKeyError` for a key file that is not a regular file of this user, that
    others can read or write, or that does not hold a key.
    """
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:
            return None
    folder = paths.private_dir(path.parent)  # 0700, group/other bits dropped
    tmp = folder / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, paths.FILE_MODE)
    try:
        os.write(fd, secrets.token_hex(KEY_BYTES).encode() + b"\n")
        os.fsync(fd)
        os.close(fd)
        try:
            os.link(tmp, path)  # atomic, and fails if another process created the key first
        except FileExistsError:
            pass  # the other process's key is the installation's key
    finally:
        os.unlink(tmp)
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise SigningKeyError(
                f"the signing key {path} is not a file of this user; remove "
                "it (a new key is made on next use; runs signed with the "
                "old key then fail verification)"
            )
        if st.st_mode & 0o077:
            raise SigningKeyError(
                f"the signing key {path} is readable or writable by other "
                f"users (mode {stat.S_IMODE(st.st_mode):04o}); make it "
                f"private: chmod 600 {path}"
            )
        text = os.read(fd, 4 * KEY_BYTES).strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise SigningKeyError(
            f"the signing key {path} does not hold a {KEY_BYTES}-byte hex key; "
            "remove it (a new key is made on next use)"
        )
    return key


def key_id(key: bytes) -> str:
    """A non-secret name of ``key`` (16 hex digits), stored in ``run.json``."""
    return hmac.new(key, b"pushbench-key-id", hashlib.sha256).hexdigest()[:16]


def check_outside(*folders: Path) -> None:
    """Raise ``ValueError`` if the key folder and one of ``folders`` contain each other."""
    keys = (paths.home() / KEY_DIR).resolve()
    for f in folders:
        f = Path(f).resolve()
        if f == keys or keys in f.parents or f in keys.parents:
            raise ValueError(
                f"{f} and the signing key folder {keys} must not contain each "
                "other (the key must stay out of every run dir and workspace); "
                "choose another folder"
            )


# ----- signing ---------------------------------------------------------------------------------
def _mac(key: bytes, domain: bytes, data: bytes) -> str:
    return hmac.new(key, domain + data, hashlib.sha256).hexdigest()


def canonical(obj) -> bytes:
    return json.dumps(
        obj, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=repr
    ).encode()


def run_config(run: dict) -> dict:
    """What the genesis binds, taken from a ``run.json`` (or the manifest about to be one)."""
    versions = got if isinstance(got := run.get("versions"), dict) else {}
    return {
        "run_id": run.get("run_id"),
        **{k: run.get(k) for k in CONFIG_FIELDS},
        "pushbench": versions.get("pushbench"),
        "family_versions": run.get("family_versions"),
    }


def genesis(run: dict) -> str:
    """The ``prev`` of a signed run's first trace line: sha256 over its configuration."""
    return hashlib.sha256(GENESIS_PREFIX + canonical(run_config(run))).hexdigest()


def seal_json(key: bytes, domain: bytes, data: bytes) -> bytes:
    """``data`` (an indented JSON object, as ``write_json_atomic`` writes it) + its signature."""
    if not data.endswith(b"\n}"):
        raise ValueError("seal_json needs a non-empty JSON object written with indent")
    return data[:-2] + b',\n "signature": "' + _mac(key, domain, data).encode() + b'"\n}'


def sign_line(key: bytes, body: bytes) -> bytes:
    """A trace line: ``body`` (a compact JSON object, no newline) with ``"sig"`` and ``\\n``."""
    if not body.endswith(b"}") or body == b"{}":
        raise ValueError("sign_line needs a non-empty compact JSON object")
    return body[:-1] + b',"sig":"' + _mac(key, LINE, body).encode() + b'"}\n'


def json_signature_ok(key: bytes, domain: bytes, raw: bytes) -> bool | None:
    """True/False for a sealed file's signature; ``None`` when it carries none."""
    m = _JSON_TAIL.search(raw)
    if m is None:
        return None
    return hmac.compare_digest(m.group(1).decode(), _mac(key, domain, raw[: m.start()] + b"\n}"))


def line_signature_ok(key: bytes, line: bytes) -> bool | None:
    """True/False for one trace line's signature (newline included); ``None`` when unsigned."""
    m = _LINE_TAIL.search(line)
    if m is None:
        return None
    return hmac.compare_digest(m.group(1).decode(), _mac(key, LINE, line[: m.start()] + b"}"))


# ----- verifying -------------------------------------------------------------------------------
def is_signed(run: dict) -> bool:
    """A run written by a signing server (schema 3), as opposed to an older unsigned one."""
    return run.get("schema_version") == SIGNED_SCHEMA


def _signature_traces(run: dict, record: dict, trace_raw: bytes | None) -> bool:
    """Whether an unsigned run still holds what only a signing server writes. A careful forger
    strips it all; this catches the schema number edited back to 2 to dodge the signatures."""
    return (
        "signing" in run
        or "signature" in run
        or "signature" in record
        or any(_LINE_TAIL.search(line) for line in (trace_raw or b"").splitlines(True))
    )


def verify_run(
    run: dict,
    run_raw: bytes,
    record: dict,
    record_raw: bytes,
    trace_raw: bytes | None,
    key: bytes | None,
) -> tuple[str, list[str]]:
    """Check every signature of one run folder with this installation's ``key``.

    Returns ``(status, reasons)``: ``("unsigned", [])`` for a schema-2 run, ``("valid", [])``,
    or ``("invalid", reasons)`` (a missing or wrong signature, no key, another key). A torn
    last trace line (a server killed mid-write) is the chain check's business, not a
    signature failure.
    """
    if not is_signed(run):
        if _signature_traces(run, record, trace_raw):
            return "invalid", [
                "an unsigned (schema-2) run that carries signature fields (a "
                "signed run relabelled as unsigned?)"
            ]
        return "unsigned", []
    block = got if isinstance(got := run.get("signing"), dict) else {}
    if block.get("alg") != ALG:
        return "invalid", [f"run.json has no {ALG} signing block"]
    if key is None:
        return "invalid", [f"signed run, but this installation has no signing key ({key_path()})"]
    if block.get("key_id") != key_id(key):
        return "invalid", [
            f"signed with key {str(block.get('key_id'))[:16]!r}, not this "
            f"installation's key {key_id(key)} (signed elsewhere, or the key "
            "was replaced)"
        ]
    out = []
    for name, domain, raw in (("run.json", RUN, run_raw), ("episode.json", RECORD, record_raw)):
        ok = json_signature_ok(key, domain, raw)
        if not ok:
            out.append(f"{name} signature {'missing' if ok is None else 'invalid'}")
    bb = got if isinstance(got := record.get("blackbox"), dict) else {}
    if bb.get("run_id") != run.get("run_id"):
        out.append("episode.json belongs to another run than run.json")
    for i, line in enumerate((trace_raw or b"").splitlines(keepends=True), 1):
        if not line.endswith(b"\n"):
            break  # a torn last line: never part of the signed account
        ok = line_signature_ok(key, line)
        if not ok:
            out.append(f"trace line {i} signature {'missing' if ok is None else 'invalid'}")
            break
    return ("invalid" if out else "valid"), out
