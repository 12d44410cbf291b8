"""The memory agent: write gate, extraction, supersession, summaries and rules around a ``MemoryBank``;
the ``ChatModel`` protocol and its OpenAI-compatible client (``llm.py``, the only openai importer).

Importing it registers ``learn.Learner`` as what ``MemoryBank.add_messages`` runs when the bank was given no
learner: the bank is a layer below and cannot import it (maintenance/learning.py says why)."""

from vecmem.agent.learn import Learner
from vecmem.agent.memory_agent import MemoryAgent, TurnResult
from vecmem.maintenance.learning import register_learner

register_learner(Learner)

__all__ = ["Learner", "MemoryAgent", "TurnResult"]
