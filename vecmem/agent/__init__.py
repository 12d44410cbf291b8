"""The memory agent: write gate, extraction, supersession, summaries and rules around a ``MemoryBank``;
the ``ChatModel`` protocol and its OpenAI-compatible client (``llm.py``, the only openai importer).

``writing.learn.Learner`` is what ``MemoryBank.add_messages`` runs and ``writing.adding.AddResolution`` what types
and resolves ``MemoryBank.add``: the bank is a layer below and cannot import them, so vecmem/assembly.py hands
them to it.

The names below are imported when first used, not with the package: a `vecmem add` needs the rules of
``writing.adding`` only, not the agent's chat loop and its LLM schemas (a tenth of a second of a command's start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vecmem.agent.memory_agent import MemoryAgent as MemoryAgent
    from vecmem.agent.memory_agent import TurnResult as TurnResult
    from vecmem.agent.writing.adding import AddResolution as AddResolution
    from vecmem.agent.writing.learn import Learner as Learner

__all__ = ["AddResolution", "Learner", "MemoryAgent", "TurnResult"]

_HOMES = {"AddResolution": "vecmem.agent.writing.adding", "Learner": "vecmem.agent.writing.learn",
          "MemoryAgent": "vecmem.agent.memory_agent", "TurnResult": "vecmem.agent.memory_agent"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
