"""Where a process is assembled: the bank (vecmem/bank/) declares what ``add`` and ``add_messages`` need, an
``AddResolver`` and a ``MessageLearner``; the memory agent (vecmem/agent/) implements both; this module hands
one to the other. ``from vecmem import MemoryBank`` is this module's ``MemoryBank``, and so is every bank the
programs open (interfaces/owner/opening.py, aio.py, the LangGraph store).

Nothing is registered and nothing happens on import: the bank below cannot import the agent above it (the layer
contract in pyproject.toml), so the agent's parts are given to it here, from above. They load when a bank first
adds or learns, so a process that only searches never pays for the agent's rules.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from vecmem.bank.facade import MemoryBank as _Bank
from vecmem.bank.learning import MessageLearner
from vecmem.bank.opening import open_saved
from vecmem.bank.resolving import AddResolver
from vecmem.config import Settings
from vecmem.retrieval.embedding.embedders import Embedder, canonical_model_name, default_model
from vecmem.validation import validate_identifier

__all__ = ["MemoryBank", "reading_saved"]


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


def reading_saved(settings: Settings | None = None, *, user_id: str | None = None, embedder: Embedder | None = None,
                  clock: Callable[[], datetime] | None = None) -> MemoryBank | None:
    """A bank that searches one user's memories from the user's saved replica alone, without importing or opening
    Chroma (retrieval/index/persisted.py: when the file holds all the store holds of the user), or None when it
    cannot. Anything the file cannot answer raises ``NotInSavedReplica`` (a ``StoreError``): open the store for
    it. The configured model (or ``embedder``'s) only: a store of another model is opened as usual."""
    settings = settings if settings is not None else Settings.from_env()
    user = validate_identifier("user_id", settings.default_user if user_id is None else user_id)
    model_name = embedder.name if embedder is not None else canonical_model_name(
        settings.embed_model or default_model())
    store = open_saved(settings, model_name, user)
    if store is None:
        return None
    try:
        return MemoryBank(settings, store=store, recover=False, embedder=embedder, clock=clock)
    except BaseException:
        if store.changes is not None:
            store.changes.close()
        raise
