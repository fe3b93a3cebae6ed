"""Where user snapshots and tasks are recorded, in which order they load, and how they are written.

A *user folder* holds up to two files, each with ``schema_version: 1``:

* ``pins.yaml``: ``snapshots: {NAME: {...}}``, pins written by ``pushbench snapshots add``
  (schema in :mod:`pushbench.snapshots` and docs/own_repositories.md);
* ``reposcan.yaml``: ``family: reposcan`` and ``instances: {ID: {...}}``, instances written by
  ``pushbench tasks new`` (schema in :mod:`pushbench.tasks`).

Load order (deterministic, and the only places looked at): the built-in data first
(``snapshots/pins.yaml``, ``tasks/*.yaml``), then the shipped synthetic family
(``tasks/synth/``, a user folder that comes with PushBench: seeded synthetic repositories and
their ``RepoScan-synth-*`` tasks, see docs/synthetic.md), then the user folder under the cache
(``$PUSHBENCH_HOME/user``), then the folder named by ``$PUSHBENCH_TASKS`` if set (a team can
commit it next to its experiments). A name defined twice in this chain is an error naming both
files; nothing is overridden silently.

Writes go to ``--tasks-dir`` when given, else to ``$PUSHBENCH_TASKS``, else to the cache's user
folder. Files are replaced atomically (0600; a folder PushBench creates is 0700) under a lock.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from . import paths
from .errors import PushBenchError

PINS_FILE = "pins.yaml"
TASKS_FILE = "reposcan.yaml"
ENV_VAR = "PUSHBENCH_TASKS"
_HEADERS = {
    PINS_FILE: "# User snapshot pins (written by `pushbench snapshots add`; see "
    "docs/own_repositories.md).\n",
    TASKS_FILE: "# User RepoScan tasks (written by `pushbench tasks new`; see "
    "docs/own_repositories.md).\n",
}


class UserDataError(PushBenchError, ValueError):
    """A user pins or tasks file that cannot be read, or a name defined twice."""


def home_dir() -> Path:
    """The user folder inside the cache: ``$PUSHBENCH_HOME/user``."""
    return paths.home() / "user"


def env_dir() -> Path | None:
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else None


SHIPPED_SYNTH = "synth"  # the shipped folder's name under tasks/, and its suite's name


def shipped_dir() -> Path:
    """The user-format folder that ships with PushBench: ``tasks/synth`` (the synthetic family)."""
    return paths.data_dir("tasks") / SHIPPED_SYNTH


def search_dirs() -> list[Path]:
    """User folders in load order: the shipped synthetic family, the cache's, then
    ``$PUSHBENCH_TASKS`` (if another one)."""
    dirs = [shipped_dir(), home_dir()]
    extra = env_dir()
    if extra is not None and all(extra.resolve() != d.resolve() for d in dirs):
        dirs.append(extra)
    return dirs


def target_dir(tasks_dir: str | os.PathLike | None = None) -> Path:
    """Where a new pin or task is written: ``tasks_dir``, ``$PUSHBENCH_TASKS``, the cache's."""
    if tasks_dir is not None:
        folder = Path(tasks_dir).expanduser()
        if not any(folder.resolve() == d.resolve() for d in search_dirs()):
            raise UserDataError(
                f"tasks folder {folder} is not loaded: set {ENV_VAR}={folder} (the command "
                "line's --tasks-dir does this) so what is written there is also read"
            )
        return folder
    return env_dir() or home_dir()


def read(path: Path, key: str) -> dict:
    """The ``key`` mapping of user file ``path`` (empty if the file does not exist)."""
    if not path.is_file():
        if path.exists():
            raise UserDataError(f"{path} is not a regular file")
        return {}
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise UserDataError(f"{path} is not valid YAML: {e}") from e
    except OSError as e:
        raise UserDataError(f"{path} cannot be read: {e}") from e
    if raw is None:
        return {}
    if not isinstance(raw, dict) or raw.get("schema_version") != 1:
        raise UserDataError(f"{path}: expected a mapping with schema_version: 1")
    section = raw.get(key) or {}
    if not isinstance(section, dict):
        raise UserDataError(f"{path}: `{key}` must be a mapping of names to entries")
    return raw


def record(
    folder: Path,
    filename: str,
    key: str,
    name: str,
    entry: dict,
    header: dict | None = None,
    replace: bool = False,
) -> Path:
    """Add ``entry`` as ``key.name`` of ``folder/filename`` (created if missing); return the
    file. An existing different entry is an error unless ``replace``; ``header`` fields are
    set on a new file."""
    ours = folder.resolve() == home_dir().resolve() if folder.exists() else False
    paths.private_dir(folder, tighten=ours)
    path = folder / filename
    with paths.locked("userdata"):
        raw = read(path, key) or {"schema_version": 1, **(header or {})}
        section = dict(raw.get(key) or {})
        if name in section and section[name] != entry and not replace:
            raise UserDataError(
                f"{name!r} is already defined in {path} (with different "
                "content); choose another name or replace it deliberately"
            )
        section[name] = entry
        raw[key] = section
        text = _HEADERS.get(filename, "") + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
        paths.write_private(path, text.encode("utf-8"))
    return path
