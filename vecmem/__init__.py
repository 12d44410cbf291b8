"""vecmem: long-term memory for LLM agents.

Memories are embedded locally, kept in Chroma, retrieved with a 0.6/0.2/0.2 blend of similarity, recency and
importance, and handed to the model inside a token budget. Start with ``MemoryBank``.
"""

from vecmem.agent.gate import GateDecision
from vecmem.agent.llm import ChatModel, OpenAIChatModel
from vecmem.agent.memory_agent import MemoryAgent, TurnResult
from vecmem.bank import MemoryBank, content_id
from vecmem.config import BudgetShares, RankWeights, Settings
from vecmem.errors import (
    BudgetError,
    ConfigError,
    EmbeddingError,
    EmbeddingMismatchError,
    ExtractionError,
    InvalidInputError,
    LLMError,
    NotFoundError,
    StoreError,
    VecmemError,
)
from vecmem.models import (
    MEMORY_TYPES,
    SOURCES,
    Hit,
    ImportReport,
    MemoryFilter,
    MemoryRecord,
    PromptPack,
    StoreStats,
    Turn,
)
from vecmem.retrieval.budget import DEFAULT_SYSTEM_PROMPT, EstimatingCounter, TiktokenCounter, TokenCounter
from vecmem.retrieval.embedders import Embedder, SentenceTransformerEmbedder
from vecmem.storage.sessions import SessionStore, Task

__version__ = "0.1.0"

__all__ = [
    "MemoryBank",
    "MemoryAgent",
    "TurnResult",
    "SessionStore",
    "Task",
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
    "ImportReport",
    "StoreStats",
    "MEMORY_TYPES",
    "SOURCES",
    "VecmemError",
    "ConfigError",
    "InvalidInputError",
    "NotFoundError",
    "StoreError",
    "EmbeddingMismatchError",
    "EmbeddingError",
    "LLMError",
    "ExtractionError",
    "BudgetError",
    "__version__",
]
