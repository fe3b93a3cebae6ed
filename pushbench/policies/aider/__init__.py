"""Aider as a SWE-lite policy (:mod:`.policy`): its turns as processes (:mod:`.process`) and its
file changes as ``edit_file`` calls (:mod:`.edits`). docs/aider.md describes the harness."""

from .policy import AiderParams, AiderPolicy

__all__ = ["AiderParams", "AiderPolicy"]
