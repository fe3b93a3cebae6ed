"""The LangGraph backend's graph: its state, node and routing (see :mod:`.langgraph_agent`).

``START -> turn -> turn | END`` (the node's ``Command`` picks): one node, one superstep per
agent turn (the model call and the execution of its reply's calls). The graph is compiled once
per policy class and mode without checkpointer or store; an episode adds its store, and its
checkpointer when runs write their own checkpoints (``sync`` / ``async``); the node reaches the
episode's policy as LangGraph's run context (``runtime.context``). The run ends at the episode's
end (``done``) or at a segment's end (``pause``).

Why one node and two channels (issue 31, harness < 1 ms per step): LangGraph's cost is per
superstep (task preparation, runnable and callback set-up, applying writes, the in-memory
checkpoint) and, within one, per channel written and read. The earlier ``model -> tools`` graph
with eleven channels cost about 2,600 Python function calls of harness per environment step (the
native loop: about 320); one superstep per turn over two channels about 1,400. The node routes
itself with a ``Command`` (no conditional edge: its router was one more runnable, writer and
callback set-up per superstep) and runs stream nothing, which with checkpointer-less runs under
``durability="exit"`` brings it to about 1,000, LangGraph's share about 690: close to its floor
for one superstep (a no-op node run the same way: about 650; ``docs/performance.md``). Fewer
supersteps than turns would mean running the agent loop inside a node, which would leave
LangGraph nothing to orchestrate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # LangGraph injects ``runtime`` by parameter name
    from langgraph.runtime import Runtime
    from langgraph.types import Command


class Episode(TypedDict):
    """Everything but the history; rewritten whole by each turn (lists copied, never mutated)."""

    env_actions: list  # every action sent to the environment (storable form)
    obs_sha: list  # digest of each answer (checked on resume)
    transcript: list  # record["transcript"] (see native.py)
    usage: dict
    stats: dict
    memory: dict | None
    free_streak: int
    turns: int
    done: bool
    pause: bool  # a segment's end (see the module docstring of langgraph_agent)


class AgentState(TypedDict):
    """The graph's state: two channels, each rewritten by every turn."""

    messages: list[dict]  # the kept (trimmed) history, rewritten per turn
    episode: Episode


def _goto(update: dict) -> str:
    """Where a turn goes next: END at the episode's or a segment's end, else another turn."""
    from langgraph.graph import END

    ep = update["episode"]
    return END if ep["done"] or ep["pause"] else "turn"


# The node of the shared compiled graph: the policy of the run is LangGraph's run context
# (Runtime[Any]: LangGraph bounds a context type to data classes, the policy is an object).
# It routes itself with a Command (update + goto) rather than through a conditional edge: the
# edge's router is one more runnable, writer and callback set-up per superstep.
def _turn_node(state: AgentState, runtime: Runtime[Any]) -> Command:
    from langgraph.types import Command  # imported here: this module loads without LangGraph

    update = runtime.context._turn(state, runtime)
    return Command(update=update, goto=_goto(update))


async def _aturn_node(state: AgentState, runtime: Runtime[Any]) -> Command:
    from langgraph.types import Command

    update = await runtime.context._aturn(state, runtime)
    return Command(update=update, goto=_goto(update))


def build_graph(is_async: bool):
    """The agent graph, compiled without checkpointer or store (added per episode)."""
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(AgentState)
    g.add_node("turn", _aturn_node if is_async else _turn_node, destinations=("turn", END))
    g.add_edge(START, "turn")
    return g.compile()
