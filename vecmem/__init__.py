"""vecmem: long-term memory for LLM agents.

Memories are embedded locally, kept in Chroma, retrieved with a 0.6/0.2/0.2 blend of similarity, recency and
importance, and handed to the model inside a token budget. Start with ``MemoryBank``.
"""

from vecmem.agent.conflict import Written
from vecmem.agent.gate import GateDecision
from vecmem.agent.learn import Learner
from vecmem.agent.llm import ChatModel, OpenAIChatModel
from vecmem.agent.memory_agent import HitReport, MemoryAgent, TurnResult, TurnWrite
from vecmem.bank import MemoryBank, content_id
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
    VecmemError,
)
from vecmem.maintenance.doctor import DoctorReport, Finding
from vecmem.maintenance.hygiene import PruneCandidate
from vecmem.maintenance.learning import AddMessagesResult, MessageLearner, SkippedMessage
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
from vecmem.retrieval.embedders import Embedder, SentenceTransformerEmbedder
from vecmem.storage.base import MemoryStore, UserWrite
from vecmem.storage.changes import ChangeFeed, Changes
from vecmem.storage.chroma import ChromaStore
from vecmem.storage.database import Cursor, Database, Transaction
from vecmem.storage.memory import InMemoryStore
from vecmem.storage.sessions import LoggedDecision, SessionCounters, SessionStore, StoredTurn, Task

__version__ = "0.1.0"

__all__ = [
    "MemoryBank",
    "AddMessagesResult",
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
    "GateDecision",
    "ChatModel",
    "OpenAIChatModel",
    "content_id",
    "Settings",
    "RankWeights",
    "BudgetShares",
    "Embedder",
    "SentenceTransformerEmbedder",
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
    "BudgetError",
    "__version__",
]
