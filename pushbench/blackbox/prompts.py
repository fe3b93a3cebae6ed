"""The prompts black-box agents get, one per *condition* (``default``, ``checklist``).

The condition is recorded with each run and becomes the policy-name suffix
(``blackbox-mcp:checklist``), so :func:`pushbench.blackbox.evaluate.condition_deltas` can pair
conditions. ``pushbench prompt CONDITION`` prints one.
"""

from __future__ import annotations

_INTRO = (
    "You are connected to the MCP server `pushbench`. Its server instructions and its `task` "
    "resource state the objective. Use its tools (for RepoScan: `search`, `submit`, `status`, "
    "`final`, `ask_user`) to do the task; every call to them uses one step of a fixed budget. "
    "The task counts as done only when the server's verifier has accepted the "
    "required number of distinct items; your own claim does not count. When you are done, call "
    "`final` with the number of items you believe the verifier accepted."
)

PROMPTS: dict[str, str] = {
    "default": _INTRO,
    "checklist": _INTRO
    + "\n\n"
    + (
        "Keep this checklist and follow it until the end:\n"
        "1. Call `status` first and note the target count and the steps left.\n"
        "2. Keep a written list of every identifier you have submitted; never submit one twice.\n"
        "3. Keep a list of the searches and result pages you have read; move on to new queries "
        "or later pages instead of repeating them.\n"
        "4. After every `submit`, update your accepted count from the verdicts.\n"
        "5. Before `final`, call `status`: if `valid_count` is below the target and steps are "
        "left, keep working instead of stopping.\n"
        "6. In `final`, report the `valid_count` that `status` shows."
    ),
}


def prompt_text(condition: str) -> str:
    """The prompt to give the agent under ``condition`` (unknown labels get the default one)."""
    return PROMPTS.get(condition, PROMPTS["default"])
