"""``pushbench bundle RUN_DIR... --out NAME.pushbench.tar.gz``: runs as one archive.

Layout (every member listed with its sha256 and size in ``bundle.json``)::

    bundle.json                     kind, schema, date, the bundler's versions, the tasks (id ->
                                    family, family version, manifest digest), the runs, members
    runs/NNN/run.json               one input folder: kind (``run`` | ``blackbox``), what it
                                    ran (the experiment, or the black-box run's labels), its
                                    date, versions and revision, and its episodes in order
    runs/NNN/records/KKKKKK.json    a ``pushbench run`` episode: the full record (calls,
                                    controller steps) as canonical JSON, from its trace
    runs/NNN/blackbox/{run.json, episode.json, trace.jsonl}
                                    a ``pushbench mcp`` run folder's evidence as written (the
                                    trace lines carry the recorded out-of-band edits)

Nothing else goes in: no valid set (records hold verdicts only), no workspace, no cache file,
no ``server.log``, no report. Members are taken in the order the inputs are given; the archive
is deterministic (:mod:`.archive`), and its date is the newest run's start, so the same inputs
give the same bytes. The task facts come from the local registry
(:func:`pushbench.tasks.task_manifest_digest`, :func:`pushbench.tasks.family_version`); a run
of a task unknown here, or an episode run under another version of its family (records without
one are version 1), cannot be bundled.
"""

from __future__ import annotations

import gzip
import json
import warnings
from collections.abc import Sequence
from pathlib import Path

from .. import tasks
from ..analysis.frame import load_episodes
from ..blackbox import evaluate as bb
from ..records import git_revision, package_versions, version_of
from ..runner import outdir
from ..runner.rundir import TRACES
from .archive import (
    KIND,
    MANIFEST,
    SCHEMA_VERSION,
    SUFFIX,
    BundleError,
    dumps,
    sha256,
    write_archive,
)

BLACKBOX_FILES = (bb.RUN_FILE, bb.EPISODE_FILE, bb.TRACE_FILE)


def kind_of(run_dir: Path) -> str:
    """``run`` (a ``pushbench run`` folder) or ``blackbox`` (a ``pushbench mcp`` run folder);
    :class:`BundleError` saying what the folder is otherwise."""
    if not run_dir.is_dir():
        what = "a file" if run_dir.exists() else "not found"
        raise BundleError(f"{run_dir} is not a folder ({what})")
    if (run_dir / bb.RUN_FILE).is_file():
        return "blackbox"
    manifest = outdir.read_manifest(run_dir)
    writer = outdir.writer_of(manifest) if manifest is not None else None
    if writer == "run":
        return "run"
    if writer is not None:
        raise BundleError(
            f"{run_dir} was written by `{outdir.COMMANDS[writer]}`, not a run; "
            "bundle the run folders it was made from"
        )
    raise BundleError(
        f"{run_dir} is neither a `pushbench run` folder (manifest.json) nor a "
        f"`pushbench mcp` run folder ({bb.RUN_FILE})"
    )


def _first(manifest: dict, key: str):
    inv = manifest.get("invocations") or [{}]
    return (inv[0] if isinstance(inv[0], dict) else {}).get(key, manifest.get(key))


def _run_members(run_dir: Path, prefix: str) -> tuple[dict, dict[str, bytes], list[str | None]]:
    """``(run.json, members, task ids)`` of a ``pushbench run`` folder."""
    manifest = outdir.read_manifest(run_dir) or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the read rules' warnings: the report shows them
        lines = load_episodes(run_dir)
    members: dict[str, bytes] = {}
    episodes, task_ids = [], []
    for i, line in enumerate(lines):
        key = line.get("key")
        trace = run_dir / TRACES / f"{key}.json.gz"
        if not isinstance(key, str) or not trace.is_file() or "/" in key:
            raise BundleError(
                f"{run_dir}: episode {key!r} has no trace file; a bundle holds "
                "only episodes it can replay (re-run them, or bundle without "
                "this folder)"
            )
        try:
            with gzip.open(trace, "rt", encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError, EOFError) as e:
            raise BundleError(f"{trace}: unreadable trace ({e})") from None
        if not isinstance(record, dict) or record.get("key") != key:
            raise BundleError(f"{trace}: not the record of episode {key}")
        _same_version(record.get("family"), version_of(record), f"{run_dir}: episode {key}")
        name = f"records/{i:06d}.json"
        members[f"{prefix}/{name}"] = dumps(record)
        episodes.append({"key": key, "task_id": record.get("task_id"), "record": name})
        task_ids.append(record.get("task_id"))
    info = {
        "kind": "run",
        "experiment": manifest.get("experiment"),
        "result_fields": manifest.get("result_fields"),
        "created": manifest.get("created"),
        "packages": _first(manifest, "packages"),
        "git": _first(manifest, "git"),
        "episodes": episodes,
    }
    return info, members, task_ids


def _blackbox_members(
    run_dir: Path, prefix: str
) -> tuple[dict, dict[str, bytes], list[str | None]]:
    """``(run.json, members, task ids)`` of a ``pushbench mcp`` run folder."""
    members = {}
    for name in BLACKBOX_FILES:
        if (run_dir / name).is_file():
            members[f"{prefix}/blackbox/{name}"] = (run_dir / name).read_bytes()
    try:
        run = json.loads(members[f"{prefix}/blackbox/{bb.RUN_FILE}"])
        assert isinstance(run, dict)
    except (KeyError, ValueError, AssertionError):
        raise BundleError(f"{run_dir}/{bb.RUN_FILE} is not a JSON object") from None
    if f"{prefix}/blackbox/{bb.EPISODE_FILE}" not in members:
        raise BundleError(f"{run_dir}: no {bb.EPISODE_FILE} (did the server start?)")
    versions = run.get("family_versions")  # the session's (signed); absent before versions
    for family, v in versions.items() if isinstance(versions, dict) else ():
        _same_version(family, v, str(run_dir))
    info = {
        "kind": "blackbox",
        "run_id": run.get("run_id"),
        "task_id": run.get("task"),
        "seed": run.get("seed"),
        "policy": run.get("policy"),
        "controller": run.get("controller"),
        "created": run.get("started_at"),
        "packages": run.get("versions"),
        "git": run.get("git_revision"),
        "files": sorted(n.rsplit("/", 1)[1] for n in members),
    }
    return info, members, [run.get("task")]


def _same_version(family, version, where: str) -> None:
    """Refuse an episode run under another version of its family than this registry's: the
    bundle states one version per task, and verification replays under that version."""
    if family in tasks.FAMILY_VERSIONS and version != tasks.family_version(family):
        raise BundleError(
            f"{where} ran under {family} v{str(version)[:20]}, this installation "
            f"is v{tasks.family_version(family)}: a bundle holds one version per "
            "task (bundle it where that version is current)"
        )


def _task_facts(task_ids: list[str | None], where: str) -> dict:
    out = {}
    for tid in task_ids:
        if not isinstance(tid, str):
            raise BundleError(f"{where}: an episode without a task id")
        if tid in out:
            continue
        try:
            spec = tasks.get_task(tid)
        except KeyError as e:
            raise BundleError(f"{where}: {e}") from None
        out[tid] = {
            "family": spec.family,
            "family_version": tasks.family_version(spec.family),
            "manifest_digest": tasks.task_manifest_digest(tid),
        }
    return out


def bundle_members(run_dirs: Sequence[str | Path]) -> dict[str, bytes]:
    """Every member of the bundle of ``run_dirs`` (name -> bytes), ``bundle.json`` included."""
    if not run_dirs:
        raise BundleError("give at least one run folder")
    if len(run_dirs) > 999:
        raise BundleError(f"{len(run_dirs)} run folders: a bundle holds at most 999")
    members: dict[str, bytes] = {}
    runs: list[dict] = []
    task_facts: dict[str, dict] = {}
    seen: dict[Path, Path] = {}
    for i, d in enumerate(run_dirs):
        d = Path(d)
        real = d.resolve()
        if real in seen:
            raise BundleError(f"{d} is given twice (also as {seen[real]})")
        seen[real] = d
        prefix = f"runs/{i:03d}"
        kind = kind_of(d)
        info, files, task_ids = (_run_members if kind == "run" else _blackbox_members)(d, prefix)
        task_facts.update(_task_facts(task_ids, str(d)))
        members[f"{prefix}/run.json"] = dumps(info)
        members.update(files)
        runs.append(
            {
                "dir": prefix,
                "kind": kind,
                "episodes": len(task_ids),
                "name": (info.get("experiment") or {}).get("name")
                if kind == "run"
                else info.get("run_id"),
            }
        )
    dates = [json.loads(members[f"{r['dir']}/run.json"]).get("created") for r in runs]
    manifest = {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "date": max((x for x in dates if isinstance(x, str)), default=None),
        "packages": package_versions(),
        "git": git_revision(),
        "tasks": dict(sorted(task_facts.items())),
        "runs": runs,
        "members": {n: {"sha256": sha256(b), "size": len(b)} for n, b in sorted(members.items())},
    }
    members[MANIFEST] = dumps(manifest)
    return members


def write_bundle(run_dirs: Sequence[str | Path], out: str | Path) -> dict:
    """Write the bundle of ``run_dirs`` to ``out`` (``NAME.pushbench.tar.gz``).

    Returns ``{"path", "sha256", "members", "episodes", "tasks"}``. Refuses (:class:`BundleError`)
    an ``out`` without the suffix, an input that is not a run folder, an episode without its
    trace, and a task unknown to this registry.
    """
    out = Path(out)
    if not out.name.endswith(SUFFIX):
        raise BundleError(f"--out {out}: a bundle's name ends in {SUFFIX}")
    members = bundle_members(list(run_dirs))
    manifest = json.loads(members[MANIFEST])
    digest = write_archive(members, out)
    return {
        "path": str(out),
        "sha256": digest,
        "members": len(members),
        "episodes": sum(r["episodes"] for r in manifest["runs"]),
        "tasks": len(manifest["tasks"]),
    }
