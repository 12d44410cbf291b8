"""``MemoryApi``: the members of ``MemoryBank`` that the interfaces and the memory agent call, as a protocol.

Two classes have them: ``MemoryBank`` (the store opened in this process) and ``RemoteBank``
(vecmem/interfaces/owner/remote.py: the same calls sent to the process that holds an embedded store, its *owner*).
The CLI, the chat, the HTTP server, the MCP server and the agent are written against this protocol, so each works
on either. ``MemoryBank`` satisfies it structurally (it does not inherit from it); the signatures are its own,
and a test (tests/unit/test_owner_wire.py) checks that they stay the same.

Defaults are written ``...`` here: the values are the implementations' (``build_context``'s system prompt is
``retrieval.budget.DEFAULT_SYSTEM_PROMPT``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from vecmem.bank.learning import AddMessagesResult
from vecmem.bank.listing import MemoryPage
from vecmem.bank.resolving import AddResult
from vecmem.config import Settings
from vecmem.maintenance.doctor import DoctorReport
from vecmem.maintenance.hygiene import PruneCandidate
from vecmem.models import Hit, ImportReport, MemoryRecord, PromptPack, Provenance, StoreStats, Turn

__all__ = ["MemoryApi"]


class MemoryApi(Protocol):
    """What a long-term memory offers its callers: write, read, rank, budget, and look after the store."""

    @property
    def settings(self) -> Settings: ...

    @property
    def location(self) -> str: ...

    @property
    def embed_model(self) -> str:
        """The embedding model the store is searched and written with (recorded in the store)."""

    def add(self, content: str, *, user_id: str | None = ..., memory_type: str | None = ...,
            importance: float = ..., tags: Sequence[str] = ..., session_id: str | None = ..., source: str = ...,
            confidence: float = ..., memory_id: str | None = ..., created_at: datetime | None = ...,
            context: str = ..., status: str = ..., provenance: Provenance | None = ...,
            resolve: bool = ...) -> MemoryRecord: ...

    def remember(self, content: str, *, user_id: str | None = ..., memory_type: str | None = ...,
                 importance: float = ..., tags: Sequence[str] = ..., session_id: str | None = ...,
                 source: str = ..., confidence: float = ..., memory_id: str | None = ...,
                 created_at: datetime | None = ..., context: str = ..., status: str = ...,
                 provenance: Provenance | None = ..., resolve: bool = ...) -> AddResult:
        """``add``, saying what it did: added, replaced which memories, or already remembered (resolving.py)."""

    def add_messages(self, messages: Sequence[Mapping[str, object] | Turn] | str, *, user_id: str | None = ...,
                     session_id: str | None = ...) -> AddMessagesResult: ...

    def update(self, memory_id: str, *, user_id: str | None = ..., content: str | None = ...,
               memory_type: str | None = ..., importance: float | None = ..., tags: Sequence[str] | None = ...,
               confidence: float | None = ..., context: str | None = ..., scope: str | None = ...,
               keep_history: bool = ..., expected_version: int | None = ...) -> MemoryRecord: ...

    def supersede(self, old_id: str, new_id: str, *, user_id: str | None = ...) -> MemoryRecord: ...

    def history(self, memory_id: str, *, user_id: str | None = ...) -> list[MemoryRecord]: ...

    def restore(self, memory_id: str, *, user_id: str | None = ...) -> MemoryRecord: ...

    def forget(self, memory_id: str, *, user_id: str | None = ...) -> MemoryRecord: ...

    def forget_all(self, user_id: str, *, session_id: str | None = ...) -> int: ...

    def get(self, memory_id: str, *, user_id: str | None = ...) -> MemoryRecord: ...

    def list_memories(self, *, user_id: str | None = ..., session_id: str | None = ...,
                      types: Iterable[str] | None = ..., include_superseded: bool = ..., limit: int | None = ...,
                      statuses: Iterable[str] = ...) -> list[MemoryRecord]: ...

    def page_memories(self, *, user_id: str | None = ..., session_id: str | None = ...,
                      types: Iterable[str] | None = ..., include_superseded: bool = ...,
                      statuses: Iterable[str] = ..., sort: str = ..., offset: int = ...,
                      limit: int | None = ...) -> MemoryPage: ...

    def search(self, query: str, k: int = ..., *, user_id: str | None = ..., session_id: str | None = ...,
               types: Iterable[str] | None = ..., record_access: bool = ...) -> list[Hit]: ...

    def warm_up(self, *, user_id: str | None = ...) -> None: ...

    def close(self) -> None: ...

    def build_context(self, query: str, *, user_id: str | None = ..., session_id: str | None = ...,
                      context_tokens: int | None = ..., k: int = ..., types: Iterable[str] | None = ...,
                      system_prompt: str = ..., short_term: Sequence[Turn] = ...,
                      working_memory: str = ..., hits: Sequence[Hit] | None = ...) -> PromptPack: ...

    def count(self, *, user_id: str | None = ...) -> int: ...

    def stats(self, *, user_id: str | None = ...) -> StoreStats: ...

    def export(self, *, user_id: str | None = ...) -> Iterator[MemoryRecord]: ...

    def import_jsonl(self, lines: Iterable[str], *, user_id: str | None = ..., overwrite: bool = ...,
                     progress: Callable[[int], None] | None = ...) -> ImportReport: ...

    def prune(self, *, user_id: str | None = ..., dry_run: bool = ...) -> list[PruneCandidate]: ...

    def unarchive(self, memory_id: str, *, user_id: str | None = ...) -> MemoryRecord: ...

    def review_queue(self, *, user_id: str | None = ...) -> list[MemoryRecord]: ...

    def approve(self, memory_id: str, *, user_id: str | None = ..., content: str | None = ...) -> MemoryRecord: ...

    def reject(self, memory_id: str, *, user_id: str | None = ...) -> MemoryRecord: ...

    def doctor(self, *, repair: bool = ...) -> DoctorReport: ...

    def reindex(self, progress: Callable[[int], None] | None = ...) -> dict[str, int]: ...
