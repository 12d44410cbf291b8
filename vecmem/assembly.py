"""Where a process is assembled: the bank (vecmem/bank/) declares what ``add`` and ``add_messages`` need, an
``AddResolver`` and a ``MessageLearner``; the memory agent (vecmem/agent/) implements both; this module hands
one to the other. ``from vecmem import MemoryBank`` is this module's ``MemoryBank``, and so is every bank the
programs open (interfaces/owner/opening.py, aio.py, the LangGraph store).

Nothing is registered and nothing happens on import: the bank below cannot import the agent above it (the layer
contract in pyproject.toml), so the agent's parts are given to it here, from above. They load when a bank first
adds or learns, so a process that only searches never pays for the agent's rules.
"""

from __future__ import annotations

from vecmem.bank.facade import MemoryBank as _Bank
from vecmem.bank.learning import MessageLearner
from vecmem.bank.resolving import AddResolver

__all__ = ["MemoryBank"]


class MemoryBank(_Bank):
    """The bank with the memory agent's parts: ``add`` types and resolves a statement as the agent does
    (agent/writing/adding.py), ``add_messages`` learns as the chat's agent learns from a turn
    (agent/writing/learn.py). ``learner=`` and ``resolver=`` still replace either."""

    def _default_learner(self) -> MessageLearner:
        from vecmem.agent.writing.learn import Learner

        return Learner()

    def _default_resolver(self) -> AddResolver:
        from vecmem.agent.writing.adding import AddResolution

        return AddResolution()
