"""DataOps-public: the DataOps-lite family on excerpts of published, openly licensed data.

Modules: :mod:`.excerpts` (the committed excerpts and their provenance manifest, digests
checked on load), :mod:`.units` (unit kinds, backlog generation, checkers), :mod:`.env` (the
environment: the DataOps-lite contract with this family's backlog).
"""

from .env import DataOpsPublicEnv

__all__ = ["DataOpsPublicEnv"]
