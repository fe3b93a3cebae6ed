"""``pushbench verify BUNDLE... --out DIR``: every verdict of a bundle rebuilt by replay.

For each bundle (:func:`open_bundle`): the archive is unpacked under the extraction caps and
held to its manifest (:mod:`.archive`); then every task it names must be one this registry
knows, with the same manifest digest and family version (:func:`task_problems`): otherwise the
bundle is refused, with the reason, before anything is replayed.

Each episode is then replayed through a fresh environment by the one replay engine,
:mod:`pushbench.runner.replay` (:func:`replay_bundle`):

* a ``pushbench run`` episode: its configuration comes from the bundled experiment expanded
  here (the spec with the record's key: task, instance, controller, seed, budget), never from
  the record; a record whose key is not in the expansion, or whose labels differ from its
  spec, is flagged. Its calls are replayed (:func:`~pushbench.runner.replay.check_episode`)
  and the record that counts is the replayed one (:func:`~pushbench.runner.replay.adopt`);
* a black-box episode: its run folder is rebuilt from the bundle and read by
  :func:`pushbench.blackbox.evaluate.record_from_run_dir`, which replays it the same way.
  Signatures of another installation cannot be checked and are not required: the replay is
  the proof (``provenance=False``: ``blackbox.signature`` reads ``not checked (bundle)``).

An episode whose replay disagrees with what was stored (or that cannot be replayed) is
*flagged*: its line carries ``tampered`` and ``tamper_reasons`` (the report leaves it out of
every metric and lists it) and ``verification.json`` names it. Only replayed records reach
``DIR``: ``episodes.jsonl``, ``traces/``, ``verification.json``, ``summary.csv``,
``paired_deltas.csv`` and ``report.md`` (the report code of ``pushbench run``), under a
``verify`` manifest (:mod:`pushbench.runner.outdir`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, tasks
from ..records import dumps_line, encode_trace, episode_line
from ..runner import outdir
from ..sources import sha256_file
from .archive import BundleError, extract_bundle, member_json, read_manifest

VERIFICATION = "verification.json"


@dataclass
class Bundle:
    """An unpacked, checked bundle: ``root`` (a private temporary folder), its manifest."""

    path: Path
    sha256: str
    root: Path
    manifest: dict

    @property
    def date(self) -> str | None:
        return self.manifest.get("date")


@dataclass
class Verified:
    """The replayed records of one bundle and the episodes whose replay disagreed."""

    bundle: Bundle
    records: list[dict] = field(default_factory=list)
    flagged: list[dict] = field(default_factory=list)  # {"key", "run", "reasons"}
    experiments: list[dict] = field(default_factory=list)  # of its ``pushbench run`` runs


def task_problems(manifest: dict) -> list[str]:
    """Why the bundle's tasks are not this registry's (empty: the same tasks)."""
    facts = manifest.get("tasks")
    if not isinstance(facts, dict) or not facts:
        return ["the bundle names no tasks"]
    out = []
    for tid, fact in sorted(facts.items()):
        fact = fact if isinstance(fact, dict) else {}
        try:
            spec = tasks.get_task(tid)
        except KeyError:
            out.append(f"task {tid} is not known here (add its snapshot and user task first)")
            continue
        here = tasks.family_version(spec.family)
        if fact.get("family") != spec.family:
            out.append(
                f"task {tid} is family {fact.get('family')!r} in the bundle, {spec.family!r} here"
            )
        elif fact.get("family_version") != here:
            out.append(
                f"task {tid}: {spec.family} version {fact.get('family_version')!r} in "
                f"the bundle, {here} here (results of two versions are never pooled)"
            )
        if fact.get("manifest_digest") != tasks.task_manifest_digest(tid):
            out.append(
                f"task {tid}: its manifest digest differs from this registry's (another "
                "instance, target, budget, valid-set pin or snapshot)"
            )
    return out


def open_bundle(path: str | Path, work: Path) -> Bundle:
    """Unpack and check bundle ``path`` into a new folder under ``work``; refuse it
    (:class:`BundleError`, with the reasons) when its tasks are not this registry's."""
    path = Path(path)
    root = Path(tempfile.mkdtemp(prefix="bundle-", dir=work))
    extract_bundle(path, root / "x")
    manifest = read_manifest(root / "x", name=f"bundle {path.name}")
    problems = task_problems(manifest)
    if problems:
        raise BundleError(
            f"bundle {path.name} is refused: {'; '.join(problems[:5])}"
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        )
    return Bundle(path=path, sha256=sha256_file(path), root=root / "x", manifest=manifest)


# ----- replay ---------------------------------------------------------------------------------
def _specs(experiment) -> tuple[dict, str | None]:
    """The bundled experiment expanded here: key -> spec (and why not, if it cannot be)."""
    from ..runner.experiment import expand, validate

    if not isinstance(experiment, dict):
        return {}, "the run names no experiment"
    fields = {k: v for k, v in experiment.items() if k not in ("limit", "episodes")}
    try:
        specs = expand(validate(fields, source="bundled experiment"), limit=experiment.get("limit"))
    except (ValueError, KeyError) as e:  # ExperimentError is a ValueError
        return {}, f"the bundled experiment does not expand here ({str(e).splitlines()[0]})"
    return {s.key: s for s in specs}, None


def _label_reasons(record: dict, spec) -> list[str]:
    from ..policies.identity import policy_label

    ctl = got if isinstance(got := record.get("controller"), dict) else {}
    pol = got if isinstance(got := record.get("policy"), dict) else {}
    want = {
        "task_id": (record.get("task_id"), spec.task_id),
        "seed": (record.get("seed"), spec.seed),
        "controller": (ctl.get("name"), spec.controller),
        "policy": (
            pol.get("label"),
            policy_label(spec.policy, spec.policy_params, spec.policy_label),
        ),
    }
    return [f"{k} {a!r} is not its spec's {b!r}" for k, (a, b) in want.items() if a != b]


def replay_record(record: dict, spec) -> tuple[dict, list[str]]:
    """``(replayed record, reasons)`` for one ``pushbench run`` episode of spec ``spec``."""
    from ..runner.replay import adopt, check_episode
    from ..runner.replay_steps import steps_from_record

    reasons = _label_reasons(record, spec)
    checked = check_episode(
        record,
        steps_from_record(record),
        task_id=spec.task_id,
        controller=spec.controller,
        seed=spec.seed,
        instance=spec.instance,
        budget=spec.budget,
    )
    reasons += checked.reasons + [f"unverifiable: {u}" for u in checked.unverifiable]
    return adopt(record, checked), reasons


def _replay_run(b: Bundle, run_dir: str, info: dict, out: Verified) -> None:
    specs, problem = _specs(info.get("experiment"))
    out.experiments.append(info.get("experiment") or {})
    for ep in info.get("episodes") or []:
        member = f"{run_dir}/{ep.get('record')}" if isinstance(ep, dict) else ""
        record = member_json(b.root, member, f"bundle {b.path.name}") if member else None
        if not isinstance(record, dict):
            raise BundleError(f"bundle {b.path.name}: {member or run_dir} is not a record")
        spec = specs.get(record.get("key"))
        if spec is None:
            reasons = [problem or "its key is not an episode of the bundled experiment"]
            record = {**record, "tampered": True, "tamper_reasons": reasons}
        else:
            record, reasons = replay_record(record, spec)
            if reasons:
                record["tampered"], record["tamper_reasons"] = True, reasons
        if reasons:
            out.flagged.append({"key": record.get("key"), "run": run_dir, "reasons": reasons})
        out.records.append(record)


def _replay_blackbox(b: Bundle, run_dir: str, work: Path, out: Verified) -> None:
    from ..blackbox.evaluate import RunDirError, record_from_run_dir

    folder = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    for name in (b.root / run_dir / "blackbox").iterdir():
        shutil.copyfile(name, folder / name.name)
    try:
        record = record_from_run_dir(folder, provenance=False)  # another installation's key
    except RunDirError as e:  # not a readable run: the bundle cannot be judged as it is
        raise BundleError(
            f"bundle {b.path.name}: {run_dir} is not a readable black-box run "
            f"({str(e).replace(str(folder), run_dir)})"
        ) from None
    bb = got if isinstance(got := record.get("blackbox"), dict) else {}
    bb["run_dir"] = f"{b.path.name}:{run_dir}"  # not the temporary folder
    record["blackbox"] = bb
    reasons = list(record.get("tamper_reasons") or [])
    if reasons:
        out.flagged.append({"key": record.get("key"), "run": run_dir, "reasons": reasons})
    out.records.append(record)


def replay_bundle(b: Bundle, work: Path) -> Verified:
    """Replay every episode of ``b`` (see the module doc); flagged episodes are listed."""
    out = Verified(bundle=b)
    for run in b.manifest.get("runs") or []:
        run_dir = run.get("dir") if isinstance(run, dict) else None
        if not isinstance(run_dir, str) or f"{run_dir}/run.json" not in b.manifest["members"]:
            raise BundleError(f"bundle {b.path.name}: a run entry without its run.json")
        info = member_json(b.root, f"{run_dir}/run.json", f"bundle {b.path.name}")
        kind = info.get("kind") if isinstance(info, dict) else None
        if kind == "run":
            _replay_run(b, run_dir, info, out)
        elif kind == "blackbox":
            _replay_blackbox(b, run_dir, work, out)
        else:
            raise BundleError(f"bundle {b.path.name}: {run_dir} is of unknown kind {kind!r}")
    return out


# ----- writing DIR ----------------------------------------------------------------------------
def _line(record: dict) -> dict:
    from ..blackbox.evaluate import blackbox_line

    return (
        blackbox_line(record) if isinstance(record.get("blackbox"), dict) else episode_line(record)
    )


def verify_bundles(
    bundles: Sequence[str | Path],
    out: str | Path,
    overwrite: bool = False,
    seed: int = 0,
    n_resamples: int = 9999,
    console=None,
    printer=None,
    arguments: dict | None = None,
) -> list[Verified]:
    """Verify ``bundles`` into ``out`` (see the module doc); return one :class:`Verified` each.

    A refused bundle raises :class:`BundleError` before ``out`` is touched. An episode key
    that two bundles share counts once (the first) and is flagged in the later one.
    """
    from rich.console import Console

    from ..runner.sweep import write_and_print_report

    console = console or Console(stderr=True)
    printer = printer or Console()
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="pushbench-verify-") as tmp:
        opened = [open_bundle(p, Path(tmp)) for p in bundles]
        digests = sorted(b.sha256 for b in opened)
        outdir.check(out, "verify", _same_bundles(digests), overwrite)
        results = [replay_bundle(b, Path(tmp)) for b in opened]
    seen: set = set()
    records = []
    for v in results:
        for rec in v.records:
            if rec.get("key") in seen:
                v.flagged.append(
                    {
                        "key": rec.get("key"),
                        "run": None,
                        "reasons": ["the same episode is in an earlier bundle"],
                    }
                )
                continue
            seen.add(rec.get("key"))
            records.append(rec)
    # One bundled `pushbench run` folder and nothing else: its experiment, so the report says
    # what was planned and what is missing, as the original run's report does.
    experiments = [e for v in results for e in v.experiments]
    n_runs = sum(len(v.bundle.manifest.get("runs") or []) for v in results)
    experiment = (
        experiments[0] if n_runs == 1 and len(experiments) == 1 else {"name": "verified bundles"}
    )
    outdir.replace_outputs(
        out, "verify", experiment, _same_bundles(digests), overwrite, arguments, bundles=digests
    )
    paths.private_dir(out / "traces")
    for rec in records:
        paths.write_private(out / "traces" / f"{rec['key']}.json.gz", encode_trace(rec))
    lines = [_line(r) for r in records]
    paths.write_private(out / "episodes.jsonl", b"".join(dumps_line(x) for x in lines))
    paths.write_private(
        out / VERIFICATION,
        (
            json.dumps({"bundles": [summary(v) for v in results]}, indent=1, sort_keys=True) + "\n"
        ).encode(),
    )
    if lines:
        write_and_print_report(
            lines, out, out, console=console, out=printer, seed=seed, n_resamples=n_resamples
        )
    return results


def summary(v: Verified) -> dict:
    """What ``verification.json`` says about one bundle."""
    return {
        "bundle": v.bundle.path.name,
        "sha256": v.bundle.sha256,
        "date": v.bundle.date,
        "episodes": len(v.records),
        "flagged": v.flagged,
        "tasks": v.bundle.manifest.get("tasks"),
    }


def _same_bundles(digests: list[str]):
    def why(old: dict) -> str | None:
        before = old.get("bundles")
        return None if before == digests else "a verification of other bundles"

    return why
