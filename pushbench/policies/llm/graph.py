"""The LangGraph backend's graph: its state, nodes and routing (see :mod:`.langgraph_agent`).

``START -> model -> tools -> (conditional) model | END``. The graph is compiled once per
policy class and mode without checkpointer or store; each episode runs a copy with its own,
and the nodes reach the episode's policy as LangGraph's run context (``runtime.context``).
The tools node ends the run at the episode's end (``done``) or at a segment's end (``pause``).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

if TYPE_CHECKING:  # LangGraph injects ``runtime`` by parameter name
    from langgraph.runtime import Runtime


class AgentState(TypedDict):
    messages: list[dict]                          # the kept (trimmed) history, rewritten per node
    env_actions: Annotated[list, operator.add]    # every action sent to the environment
    obs_sha: Annotated[list, operator.add]        # digest of each answer (checked on resume)
    usage: dict
    stats: dict
    memory: dict | None
    free_streak: int
    turns: int
    done: bool
    pause: bool                                   # a segment's end (see the module docstring)
    transcript: Annotated[list, operator.add]     # record["transcript"] (see native.py)


def _route(state: AgentState) -> str:
    from langgraph.graph import END

    return END if state["done"] or state.get("pause") else "model"


# Nodes of the shared compiled graph: the policy of the run is LangGraph's run context
# (Runtime[Any]: LangGraph bounds a context type to data classes, the policy is an object).
def _model_node(state: AgentState, runtime: Runtime[Any]) -> dict:
    return runtime.context._model(state)


async def _amodel_node(state: AgentState, runtime: Runtime[Any]) -> dict:
    return await runtime.context._amodel(state)


def _tools_node(state: AgentState, runtime: Runtime[Any]) -> dict:
    return runtime.context._tools(state, runtime)


def build_graph(is_async: bool):
    """The agent graph, compiled without checkpointer or store (added per episode)."""
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(AgentState)
    g.add_node("model", _amodel_node if is_async else _model_node)
    g.add_node("tools", _tools_node)
    g.add_edge(START, "model")
    g.add_edge("model", "tools")
    g.add_conditional_edges("tools", _route, {"model": "model", END: END})
    return g.compile()
