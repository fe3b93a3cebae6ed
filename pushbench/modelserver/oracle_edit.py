"""``oracle-edit``: a text-edit "model" that answers a coding agent (Aider) with the SWE-lite
reference fix, for testing the Aider harness end to end. **An oracle, never a result**: it
knows what the environment hides (which function each unit broke and its original text).

A request is answered from its **last user message** (Aider puts its own examples of the edit
format in earlier messages): every SWE-lite unit whose issue text appears there, verbatim, gets
one SEARCH/REPLACE block in Aider's ``diff`` edit format:

    path/of/file.py
    ```python
    <<<<<<< SEARCH
    <the mutated function>
    =======
    <the original function>
    >>>>>>> REPLACE
    ```

A request that asks for a commit message (Aider's commit prompt) gets a one-line message; any
other request (no unit's issue text in it, e.g. Aider reporting that a block did not apply)
gets a short text without blocks, so Aider stops. Units come from the built unit sets of every
snapshot (:func:`pushbench.families.swelite.units.load`; ``$PUSHBENCH_SWELITE_RECIPE`` is
honoured); the same request always gets the same answer.
"""

from __future__ import annotations

import hashlib

from ..families.swelite import units as U
from .core import MODEL, Conversation, Decision, RequestProblem

NAME = "oracle-edit"
COMMIT_MESSAGE = "fix: repair the reported issues (oracle-edit reference fix)"
NO_CHANGE = "No change: this request names no SWE-lite issue I know (oracle-edit)."


def diff_block(path: str, search: str, replace: str) -> str:
    """One SEARCH/REPLACE block of Aider's ``diff`` edit format."""

    def body(text: str) -> str:
        return text if text.endswith("\n") else text + "\n"

    return (
        f"{path}\n```python\n<<<<<<< SEARCH\n{body(search)}=======\n{body(replace)}"
        f">>>>>>> REPLACE\n```\n"
    )


def known_units(recipe: str | None = None) -> list[dict]:
    """The kept units of every snapshot whose unit set is built (nothing is built here)."""
    out = []
    for snap in U.recipe(recipe)["snapshots"]:
        if U.is_built(snap, recipe):
            out.extend(U.load(snap, recipe, build_if_missing=False)["kept"])
    return out


class OracleEditBackend:
    """Answers Chat Completions (and the other APIs' text answers) with reference fixes."""

    oracle = True

    def __init__(self, recipe: str | None = None, models: tuple[str, ...] = (MODEL,)) -> None:
        if not models or any(not isinstance(m, str) or not m or len(m) > 256 for m in models):
            raise ValueError("the served model names must be 1 to 256 characters each")
        self.name, self.server_name = NAME, "pushbench"
        self.models = tuple(dict.fromkeys(models))
        self.recipe = recipe
        self._units: list[dict] | None = None

    def describe(self) -> dict:
        return {
            "policy": NAME,
            "oracle": True,
            "models": list(self.models),
            "note": "answers with SWE-lite reference fixes; tests the harness, never a result",
        }

    def units(self) -> list[dict]:
        if self._units is None:
            self._units = known_units(self.recipe)
        return self._units

    def answer(self, conv: Conversation) -> tuple[str, str]:
        """``(text, kind)`` for the conversation: kind is ``edit``, ``commit`` or ``none``."""
        if not conv.texts:
            raise RequestProblem("the request holds no message text")
        last = conv.last_user or conv.texts[-1]
        hits = [u for u in self.units() if u["issue"] and u["issue"] in last]
        if hits:
            blocks = [
                diff_block(u["file"], u["mutated_func"], u["original_func"])
                for u in sorted(hits, key=lambda u: last.index(u["issue"]))
            ]
            return (
                "Reference fix (oracle-edit) of "
                + ", ".join(u["key"] for u in hits)
                + ":\n\n"
                + "\n".join(blocks)
            ), "edit"
        if any("commit message" in t.lower() for t in conv.texts[:1]):
            return COMMIT_MESSAGE, "commit"
        return NO_CHANGE, "none"

    def decide(self, conv: Conversation) -> Decision:
        text, kind = self.answer(conv)
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        return Decision(text=text, call_id=digest, ended_by=f"oracle-edit:{kind}")
