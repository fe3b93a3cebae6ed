"""Real runs and bundles for the bundle, verify and leaderboard tests.

Everything is made by the code under test's own writers: the runner's sweep for in-process
runs, the MCP server's session object for a black-box run, :func:`write_bundle` for bundles.
:func:`repack` is how a forger would change a bundle: edit members, recompute every sha256 in
``bundle.json``, write the archive again (so only replay and the registry can catch it).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from pushbench.bundles import write_bundle
from pushbench.bundles.archive import MANIFEST, dumps, sha256, write_archive

TASKS = ["RepoScan-requests-docstring-N10", "RepoScan-flask-decorated-N10"]


def experiment(
    tmp: Path, name: str, policies, controllers=("standard", "stateqgp"), seeds=(0, 1), tasks=TASKS
) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        json.dumps(
            {
                "name": name,
                "tasks": list(tasks),
                "controllers": list(controllers),
                "policies": list(policies),
                "seeds": list(seeds),
            }
        )
    )
    return path


def make_run(out: Path, name: str = "small", policies=("diligent", "random"), **kw) -> Path:
    """Run a small experiment into ``out`` and write its report (no figures), as
    ``pushbench run`` does."""
    from rich.console import Console

    from pushbench.runner.experiment import load_experiment
    from pushbench.runner.sweep import report_and_plot, run_experiment

    out.parent.mkdir(parents=True, exist_ok=True)
    exp = load_experiment(experiment(out.parent, name, policies, **kw))
    quiet = Console(file=io.StringIO())
    run_experiment(exp, out, progress=False, console=quiet)
    report_and_plot(out, plot=False, console=quiet, out=quiet)
    return out


def make_blackbox_run(out: Path, seed: int = 0) -> Path:
    """One real black-box episode (the MCP session object): search, submit, final."""
    from pushbench.blackbox.session import BlackBoxSession

    with BlackBoxSession(
        TASKS[0], out, argv=["test"], controller="standard", agent="fake-agent", seed=seed
    ) as s:
        s.call("search", {"query": "", "page": 1})
        s.call("submit", {"ids": ["requests.api:request", "requests.api:get"]})
        s.call("final", {"reported_count": 2})
    return out


def members_of(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def repack(bundle: Path, out: Path, edit) -> Path:
    """``edit(members)`` changes the members dict in place; the manifest's digests are then
    recomputed (a careful forger) and the archive written to ``out``."""
    members = members_of(bundle)
    edit(members)
    manifest = json.loads(members[MANIFEST])
    manifest["members"] = {
        n: {"sha256": sha256(b), "size": len(b)}
        for n, b in sorted(members.items())
        if n != MANIFEST
    }
    members[MANIFEST] = dumps(manifest)
    write_archive(members, out)
    return out


def bundle(run_dirs, out: Path) -> Path:
    write_bundle(run_dirs, out)
    return out
