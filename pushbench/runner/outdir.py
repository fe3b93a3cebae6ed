"""Output folders say what wrote them, and no command writes into another's folder.

Every folder PushBench writes results into carries ``manifest.json`` with a ``writer``:

* ``run``: ``pushbench run`` (:class:`~pushbench.runner.rundir.RunDir`; appends, resumes);
* ``evaluate``: ``pushbench evaluate`` and the report of ``pushbench blackbox run``
  (:func:`pushbench.blackbox.evaluate.write_evaluation`; rewrites its files wholesale);
* ``verify``: ``pushbench verify`` (:mod:`pushbench.bundles`; rewrites its files wholesale);

and an ``experiment`` saying for what: the experiment of a run, the run directories of an
evaluation, the bundle digests of a verification. A manifest written before writers were
recorded that has ``result_fields`` is a ``run``'s.

:func:`check` is the rule, applied before anything is written: a folder that holds none of the
files PushBench writes (:data:`OUTPUT_FILES`, :data:`OUTPUT_DIRS`) is free; one that holds some
of them is refused when it has no manifest saying what wrote it, when another writer wrote it,
or when the same writer wrote it for another experiment (``same`` decides, per writer).
``overwrite`` turns every refusal into :func:`discard`: the output files named above are
removed (anything else in the folder is left alone) and the folder is written afresh.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from .. import errors, paths
from ..records import git_revision, package_versions

MANIFEST = "manifest.json"
WRITERS = ("run", "evaluate", "verify")
COMMANDS = {"run": "pushbench run", "evaluate": "pushbench evaluate", "verify": "pushbench verify"}
# Every file and folder some writer creates in an output folder (the report's figures too).
OUTPUT_FILES = (
    MANIFEST,
    "episodes.jsonl",
    "errors.jsonl",
    "capped.jsonl",
    "summary.csv",
    "paired_deltas.csv",
    "report.md",
    "context_deltas.csv",
    "condition_deltas.csv",
    "verification.json",
    "target_scaling.png",
    "duplicate_rate.png",
    "anytime_progress.png",
    "component_ablation.png",
    "verifier_recoveries.png",
)
OUTPUT_DIRS = ("traces",)
SCHEMA_VERSION = 1


class OutputDirError(errors.RunDirError):
    """An output folder another command or another experiment wrote (message says what to do)."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def present(path: str | Path) -> list[str]:
    """The output files and folders of :data:`OUTPUT_FILES` / :data:`OUTPUT_DIRS` in ``path``."""
    path = Path(path)
    if not path.is_dir():
        return []
    return [
        n for n in (*OUTPUT_FILES, *OUTPUT_DIRS) if (path / n).exists() or (path / n).is_symlink()
    ]


def read_manifest(path: str | Path) -> dict | None:
    """``path/manifest.json`` as a dict (``None`` if absent); unreadable:
    :class:`OutputDirError`."""
    file = Path(path) / MANIFEST
    if not file.exists():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, OSError) as e:
        raise OutputDirError(
            f"{file} is unreadable ({e}); move it away, or --overwrite to "
            "discard the folder's outputs"
        ) from None
    if not isinstance(data, dict):
        raise OutputDirError(
            f"{file} is not a PushBench manifest (not a JSON object); move it "
            "away, or --overwrite to discard the folder's outputs"
        )
    return data


def writer_of(manifest: dict) -> str | None:
    """Who wrote a folder with this manifest (``None``: not a PushBench output manifest)."""
    writer = manifest.get("writer")
    if writer in WRITERS:
        return writer
    if writer is None and "result_fields" in manifest:  # run folders from before writers
        return "run"
    return None


def _name(manifest: dict) -> str:
    exp = manifest.get("experiment")
    name = exp.get("name") if isinstance(exp, dict) else None
    return f" (experiment {name!r})" if isinstance(name, str) and name else ""


def check(
    path: str | Path,
    writer: str,
    same: Callable[[dict], str | None] | None = None,
    overwrite: bool = False,
) -> dict | None:
    """May ``writer`` write into ``path``? The old manifest if it is its own, else ``None``.

    ``same(old_manifest)`` returns why the folder's experiment is another one (``None``: the
    same); without it any experiment of ``writer`` is accepted. Raises
    :class:`OutputDirError` naming the folder, who wrote it and what to do; with
    ``overwrite`` nothing is refused (the caller :func:`discard` s first).
    """
    path = Path(path)
    found = present(path)
    if not found or overwrite:
        return None
    old = read_manifest(path)
    fix = (
        "use another --out folder, or --overwrite to discard what is there (only the files "
        "PushBench writes are removed)"
    )
    if old is None:
        raise OutputDirError(
            f"{path} holds {', '.join(found[:4])} but no {MANIFEST} saying "
            f"what wrote them; `{COMMANDS[writer]}` never replaces files it "
            f"did not create: {fix}"
        )
    other = writer_of(old)
    if other is None:
        raise OutputDirError(f"{path}/{MANIFEST} is not a PushBench output manifest; {fix}")
    if other != writer:
        raise OutputDirError(
            f"{path} was written by `{COMMANDS[other]}`{_name(old)}; "
            f"`{COMMANDS[writer]}` never writes into another command's folder: "
            f"{fix}"
        )
    why = same(old) if same is not None else None
    if why:
        raise OutputDirError(
            f"{path} holds the output of `{COMMANDS[writer]}` for another experiment ({why}); {fix}"
        )
    return old


def discard(path: str | Path, keep: tuple[str, ...] = ()) -> list[str]:
    """Remove the PushBench output files and folders in ``path`` (not ``keep``); their names."""
    path = Path(path)
    gone = []
    for name in present(path):
        if name in keep:
            continue
        target = path / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
        gone.append(name)
    return gone


def new_manifest(
    writer: str, experiment: dict, arguments: dict | None = None, old: dict | None = None, **extra
) -> dict:
    """The manifest of an output folder: writer, experiment, versions, one entry per
    invocation (the only place wall-clock time lives); ``extra`` keys are added as given."""
    invocation = {
        "started": now(),
        "arguments": arguments or {},
        "argv": list(sys.argv),
        "packages": package_versions(),
        "git": git_revision(),
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "writer": writer,
        "created": (old or {}).get("created") or invocation["started"],
        "packages": invocation["packages"],
        "git": invocation["git"],
        "experiment": experiment,
        "arguments": invocation["arguments"],
        "invocations": [*(old or {}).get("invocations", []), invocation],
        **extra,
    }


def write_manifest(path: str | Path, manifest: dict) -> None:
    paths.write_private(
        Path(path) / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    )


def replace_outputs(
    path: str | Path,
    writer: str,
    experiment: dict,
    same: Callable[[dict], str | None] | None = None,
    overwrite: bool = False,
    arguments: dict | None = None,
    **extra,
) -> dict:
    """For writers that rewrite their folder wholesale (``evaluate``, ``verify``): check,
    discard the previous outputs (their own, or anything with ``overwrite``), create the
    folder (0700) and write the new manifest; return it."""
    old = check(path, writer, same, overwrite)
    discard(path)
    paths.private_dir(path)
    manifest = new_manifest(writer, experiment, arguments, old, **extra)
    write_manifest(path, manifest)
    return manifest
