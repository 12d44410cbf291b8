"""The memory agent: write gate, extraction, supersession, summaries and rules around a ``MemoryBank``;
the ``ChatModel`` protocol and its OpenAI-compatible client (``llm.py``, the only openai importer)."""

from vecmem.agent.memory_agent import MemoryAgent, TurnResult

__all__ = ["MemoryAgent", "TurnResult"]
