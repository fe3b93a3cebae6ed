"""LLM policies (optional extra ``pushbench[llm]``; ``pushbench[langgraph]`` for the graph ones).

=======================  =========================================  ==========================
policy name              class                                      backend
=======================  =========================================  ==========================
``llm``                  :class:`.native.LLMPolicy`                 native tool-calling loop
``llm-langgraph``        :class:`.langgraph_agent.LangGraphPolicy`  LangGraph ``StateGraph``
``llm-langgraph-memory`` :class:`.memory.LangGraphMemoryPolicy`     LangGraph + long-term store
``llm-memgpt``           :class:`.memory.MemGPTPolicy`              native + MemGPT-style memory
=======================  =========================================  ==========================

All speak the OpenAI-compatible chat-completions API through the ``openai`` SDK; parameters
are validated by :class:`.config.LLMConfig`. :mod:`pushbench.runner.episode` runs many episodes
concurrently on
one event loop. See ``docs/llm.md``.
"""

from .config import LLMConfig, Price

__all__ = ["LLMConfig", "Price"]
