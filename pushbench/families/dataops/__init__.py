"""QGP-DataOps-lite: verifier-backed work units in a sandboxed per-episode workspace.

Modules: :mod:`.env` (the environment and its contract), :mod:`.units` (unit kinds, backlog
generation, checkers), :mod:`.datasets` / :mod:`.metadata` / :mod:`.artifacts` (material of
each kind), :mod:`.sandbox` (the workspace confinement every file access goes through).
"""

from .env import DataOpsEnv

__all__ = ["DataOpsEnv"]
