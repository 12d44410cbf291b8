"""The memory agent: write gate, extraction, supersession, summaries and rules around a ``MemoryBank``;
the ``ChatModel`` protocol and its OpenAI-compatible client (``llm.py``, the only openai importer).

Importing it registers ``learn.Learner`` as what ``MemoryBank.add_messages`` runs when the bank was given no
learner, and ``adding.AddResolution`` as what types and resolves ``MemoryBank.add``: the bank is a layer below
and cannot import them (bank/learning.py and resolving.py say why)."""

from vecmem.agent.memory_agent import MemoryAgent, TurnResult
from vecmem.agent.writing.adding import AddResolution
from vecmem.agent.writing.learn import Learner
from vecmem.bank.learning import register_learner
from vecmem.bank.resolving import register_resolver

register_learner(Learner)
register_resolver(AddResolution)

__all__ = ["AddResolution", "Learner", "MemoryAgent", "TurnResult"]
