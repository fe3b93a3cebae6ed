"""Coding-agent baselines run as separate programs (docs/aider.md): installed into their own
virtual environments under ``$PUSHBENCH_HOME/baselines/<name>``, never into PushBench's.

:mod:`.installer` reads the pin file shipped beside this module (``<name>.txt``), creates the
venv and records what it installed; :data:`BASELINES` names the baselines and their program.
"""

from .installer import (
    BASELINES,
    BaselineError,
    Pin,
    install,
    installed,
    list_baselines,
    parse_pin,
    read_pin,
    venv_dir,
)

__all__ = [
    "BASELINES",
    "BaselineError",
    "Pin",
    "install",
    "installed",
    "list_baselines",
    "parse_pin",
    "read_pin",
    "venv_dir",
]
