"""vecmem: long-term memory for LLM agents.

Memories are embedded locally, kept in Chroma, retrieved with a 0.6/0.2/0.2 blend of similarity, recency and
importance, and handed to the model inside a token budget. Start with ``MemoryBank``, or ``connect()`` where the
store may be open in the chat, `vecmem serve` or `vecmem mcp` (it goes through that process, as `vecmem` does).

Every name below is loaded when it is first used (PEP 562 ``__getattr__``), so ``import vecmem`` and whatever
imports a part of it (`vecmem --help`, a command served by the store's owner: interfaces/owner/opening.py) pay only
for what they use; ``from vecmem import MemoryBank`` works as it always did. That ``MemoryBank`` is the assembled
one (vecmem/assembly.py): the bank declares what ``add`` and ``add_messages`` need, the memory agent implements
it, and the assembly hands one to the other. Importing vecmem registers nothing and runs nothing else.

What is named here is the public API (docs/api.md says what each name is for): what the docs teach, and every type
a public method of these returns or raises. It is declared once, in ``_PUBLIC``; ``__all__`` and the loader are
derived from it. Everything else stays importable from its own module (``vecmem.storage.state.sessions``, ...) but
is not promised: it may move or change between releases.
"""

import importlib
import typing

_PUBLIC: dict[str, tuple[str, ...]] = {  # the public API, declared once: module -> the names it gives
    # the bank, its async twin, the protocol both share, and the bank a program gets where an owner may hold the store
    "vecmem.assembly": ("MemoryBank",),
    "vecmem.aio": ("AsyncMemoryBank",),
    "vecmem.bank.api": ("MemoryApi",),
    "vecmem.interfaces.owner.opening": ("connect",),
    # the integrations' entry points
    "vecmem.interfaces.integrations.langgraph_store": ("VecmemStore",),
    "vecmem.interfaces.integrations.langchain_retriever": ("VecmemRetriever",),
    # the memory agent and what a turn returns
    "vecmem.agent.memory_agent": ("MemoryAgent", "TurnResult", "TurnWrite"),
    "vecmem.agent.hits": ("HitReport",),
    "vecmem.agent.writing.conflict": ("Written",),
    "vecmem.agent.writing.gate": ("GateDecision",),
    "vecmem.agent.llm": ("ModelUsage",),
    # settings, and the embedder a bank is given or builds
    "vecmem.config": ("Settings", "RankWeights", "BudgetShares"),
    "vecmem.retrieval.embedding.embedders": ("Embedder", "embedder_for"),
    "vecmem.retrieval.budget": ("TokenCounter",),
    "vecmem.retrieval.query.dialogue": ("dialogue_query",),
    # the value objects the bank takes and returns
    "vecmem.models": (
        "MemoryRecord", "Hit", "Turn", "PromptPack", "Provenance", "ImportReport", "StoreStats", "MemoryType",
        "MemorySource", "MemoryStatus",
    ),
    "vecmem.bank.resolving": ("AddResult",),
    "vecmem.bank.learning": ("AddMessagesResult", "SkippedMessage"),
    "vecmem.bank.listing": ("MemoryPage",),
    "vecmem.maintenance.doctor": ("DoctorReport", "Finding"),
    "vecmem.maintenance.hygiene": ("PruneCandidate",),
    # the errors a caller handles: one tree under VecmemError
    "vecmem.errors": (
        "VecmemError", "ConfigError", "InvalidInputError", "NotFoundError", "ConflictError", "StoreError",
        "EmbeddingMismatchError", "StoreInUseError", "EmbeddingError", "LLMError", "ExtractionError", "UpstreamError",
        "BudgetError",
    ),
}

if typing.TYPE_CHECKING:  # the same names for type checkers, which cannot read _PUBLIC (a test keeps them equal)
    from vecmem.agent.hits import HitReport as HitReport
    from vecmem.agent.llm import ModelUsage as ModelUsage
    from vecmem.agent.memory_agent import MemoryAgent as MemoryAgent
    from vecmem.agent.memory_agent import TurnResult as TurnResult
    from vecmem.agent.memory_agent import TurnWrite as TurnWrite
    from vecmem.agent.writing.conflict import Written as Written
    from vecmem.agent.writing.gate import GateDecision as GateDecision
    from vecmem.aio import AsyncMemoryBank as AsyncMemoryBank
    from vecmem.assembly import MemoryBank as MemoryBank
    from vecmem.bank.api import MemoryApi as MemoryApi
    from vecmem.bank.learning import AddMessagesResult as AddMessagesResult
    from vecmem.bank.learning import SkippedMessage as SkippedMessage
    from vecmem.bank.listing import MemoryPage as MemoryPage
    from vecmem.bank.resolving import AddResult as AddResult
    from vecmem.config import BudgetShares as BudgetShares
    from vecmem.config import RankWeights as RankWeights
    from vecmem.config import Settings as Settings
    from vecmem.errors import BudgetError as BudgetError
    from vecmem.errors import ConfigError as ConfigError
    from vecmem.errors import ConflictError as ConflictError
    from vecmem.errors import EmbeddingError as EmbeddingError
    from vecmem.errors import EmbeddingMismatchError as EmbeddingMismatchError
    from vecmem.errors import ExtractionError as ExtractionError
    from vecmem.errors import InvalidInputError as InvalidInputError
    from vecmem.errors import LLMError as LLMError
    from vecmem.errors import NotFoundError as NotFoundError
    from vecmem.errors import StoreError as StoreError
    from vecmem.errors import StoreInUseError as StoreInUseError
    from vecmem.errors import UpstreamError as UpstreamError
    from vecmem.errors import VecmemError as VecmemError
    from vecmem.interfaces.integrations.langchain_retriever import VecmemRetriever as VecmemRetriever
    from vecmem.interfaces.integrations.langgraph_store import VecmemStore as VecmemStore
    from vecmem.interfaces.owner.opening import connect as connect
    from vecmem.maintenance.doctor import DoctorReport as DoctorReport
    from vecmem.maintenance.doctor import Finding as Finding
    from vecmem.maintenance.hygiene import PruneCandidate as PruneCandidate
    from vecmem.models import Hit as Hit
    from vecmem.models import ImportReport as ImportReport
    from vecmem.models import MemoryRecord as MemoryRecord
    from vecmem.models import MemorySource as MemorySource
    from vecmem.models import MemoryStatus as MemoryStatus
    from vecmem.models import MemoryType as MemoryType
    from vecmem.models import PromptPack as PromptPack
    from vecmem.models import Provenance as Provenance
    from vecmem.models import StoreStats as StoreStats
    from vecmem.models import Turn as Turn
    from vecmem.retrieval.budget import TokenCounter as TokenCounter
    from vecmem.retrieval.embedding.embedders import Embedder as Embedder
    from vecmem.retrieval.embedding.embedders import embedder_for as embedder_for
    from vecmem.retrieval.query.dialogue import dialogue_query as dialogue_query

__version__ = "0.1.0"

_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = [*_WHERE, "__version__"]  # derived from _PUBLIC, the one declaration


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'vecmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
