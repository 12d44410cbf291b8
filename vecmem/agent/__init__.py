"""The memory agent: write gate, extraction, supersession, summaries and rules around a ``MemoryBank``;
the ``ChatModel`` protocol and its OpenAI-compatible client (``llm.py``, the only openai importer).

``writing.learn.Learner`` is what ``MemoryBank.add_messages`` runs and ``writing.adding.AddResolution`` what types
and resolves ``MemoryBank.add``: the bank is a layer below and cannot import them, so vecmem/assembly.py hands
them to it."""

from vecmem.agent.memory_agent import MemoryAgent, TurnResult
from vecmem.agent.writing.adding import AddResolution
from vecmem.agent.writing.learn import Learner

__all__ = ["AddResolution", "Learner", "MemoryAgent", "TurnResult"]
