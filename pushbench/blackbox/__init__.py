"""Black-box evaluation: an agent CLI drives a task over MCP; ``evaluate`` judges the runs.

:mod:`.server` (the MCP server and its session), :mod:`.wire` (screening JSON-RPC lines),
:mod:`.watch` (workspace watch), :mod:`.audit` (re-judging a run dir) and :mod:`.evaluate`
(prompts, run-dir parsing, condition deltas, writing the evaluation).
"""
