"""The storage boundary: ``MemoryStore`` is exactly what the layers above ask of a store.

Two implementations pass one conformance suite (``tests/conformance``): ``InMemoryStore`` (``memory.py``),
the reference, which upper-layer unit tests run on in milliseconds; and ``ChromaStore`` (``chroma/store.py``),
embedded or on a Chroma server.

What every implementation promises:

* **Isolation by user.** Every call names the user; nothing of another user is ever read, written, counted or
  returned, whatever ids collide.
* **One place per id.** A memory id is stored once per user; writing it again replaces it whole (vector,
  document, fields and keyword tokens), even when its type changed.
* **Records as they will be read back.** ``get`` and ``scan`` return records equal to what was written, times
  at the precision the store keeps (Chroma keeps epoch seconds as floats).
* **Cosine similarity**, 1 - cosine distance, from ``nearest`` and ``vectors``; ``nearest`` returns the best
  first, ties broken by id.
* **The model record.** The first write records the embedding model's name and dimension; ``check_model``
  raises ``EmbeddingMismatchError`` when the store was built with another model.
* **Errors from the tree.** Failures of the store itself are ``StoreError`` (or a subclass); a record of
  another user is ``InvalidInputError``. vecmem's own bugs and what a callback raises (the embedder given to
  ``rebuild``) propagate as they are: they are not the store's failures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from vecmem.errors import InvalidInputError
from vecmem.models import MemoryFilter, MemoryRecord

if TYPE_CHECKING:
    from vecmem.storage.state.changes import ChangeFeed

__all__ = ["IndexedRow", "MemoryStore", "RawRow", "UserWrite", "announced", "announced_many", "check_owner",
           "check_write"]

# (record, its stored embedding, its stored keyword tokens or None when written before tokens were stored)
IndexedRow = tuple[MemoryRecord, np.ndarray, list[str] | None]
# (the type it is filed under, id, document, metadata) as the store holds it: what the doctor examines
RawRow = tuple[str, str, str | None, dict[str, Any] | None]


@dataclass(frozen=True)
class UserWrite:
    """One user's part of a write of several users' memories (``MemoryStore.upsert_many``)."""

    user_id: str
    records: Sequence[MemoryRecord]
    embeddings: np.ndarray  # one row per record
    keywords: Sequence[Sequence[str]]  # one token list per record


@runtime_checkable
class MemoryStore(Protocol):
    """Memories of many users: records with their embeddings and keyword tokens."""

    model_name: str  # the embedding model this store is opened with
    location: str  # where the memories live, for messages
    changes: ChangeFeed | None  # the change feed writes are announced on, when the store has one

    # --- the model record
    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the store was built with; None for a store never written."""
        ...

    def check_model(self) -> None:
        """Raise EmbeddingMismatchError when the store was built with another model than ``model_name``."""
        ...

    # --- store-wide
    def users(self) -> list[str]:
        """Every user with at least one memory place in the store, sorted."""
        ...

    def count(self, user_id: str) -> int:
        """How many memories the user has, superseded, archived and pending included."""
        ...

    def refresh(self, user_id: str) -> None:
        """Forget what is cached about the user's layout (another client may have written since)."""
        ...

    def close(self) -> None:
        """Let go of threads and connections; the store is not used afterwards."""
        ...

    def residence(self, user_id: str) -> list[str]:
        """Ids of the places (Chroma collections) that hold the user's memories, as the store's own files name
        them; a store without files: none (a saved replica records them: retrieval/index/persisted.py)."""
        ...

    # --- reads
    def get(
        self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str] | None = None
    ) -> dict[str, MemoryRecord]:
        """The stored memories among ``ids``; ``type_of`` (id -> type) is a hint that saves looking elsewhere."""
        ...

    def get_indexed(self, user_id: str, ids: Sequence[str]) -> dict[str, IndexedRow]:
        """The stored memories among ``ids`` with their embeddings and keyword tokens."""
        ...

    def vectors(self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str]) -> dict[str, np.ndarray]:
        """The stored embeddings of these memories; ids without a type in ``type_of`` are skipped."""
        ...

    def scan(self, user_id: str, memory_filter: MemoryFilter) -> Iterator[MemoryRecord]:
        """Every memory of the user that passes the filter."""
        ...

    def scan_keywords(self, user_id: str) -> Iterator[tuple[MemoryRecord, list[str] | None]]:
        """Every memory of the user with its stored keyword tokens (None when written before they existed)."""
        ...

    def scan_vectors(self, user_id: str, page: int = 5_000) -> Iterator[tuple[list[str], np.ndarray]]:
        """Every stored embedding of the user, a page (ids, matrix) at a time."""
        ...

    def raw_rows(self, user_id: str) -> Iterator[RawRow]:
        """Every row as stored, unreadable ones included (what ``vecmem doctor`` examines)."""
        ...

    def collection_models(self, user_id: str) -> dict[str, tuple[str, int]]:
        """{type: (embedding model, dimension)} as each of the user's places records it."""
        ...

    def replaced_by(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        """The memories whose ``superseded_by`` points at ``memory_id``."""
        ...

    def nearest(
        self,
        user_id: str,
        embedding: np.ndarray,
        n_results: int,
        *,
        types: Iterable[str] | None = None,
        among: Mapping[str, Sequence[str]] | None = None,
        sizes: Mapping[str, int] | None = None,
    ) -> tuple[list[str], list[float]]:
        """Ids and cosines of the ``n_results`` nearest memories of ``types`` (all when None), best first;
        ``among`` (type -> ids) restricts the search to those ids; ``sizes`` (type -> count) is a cost hint."""
        ...

    # --- writes
    def upsert(
        self,
        user_id: str,
        records: Sequence[MemoryRecord],
        embeddings: np.ndarray,
        keywords: Sequence[Sequence[str]],
        *,
        new: bool = False,
    ) -> None:
        """Write memories whole with their embeddings and keyword tokens; ``new``: the ids are not stored yet."""
        ...

    def upsert_many(self, writes: Sequence[UserWrite], *, new: bool = False) -> None:
        """Several users' ``upsert``s, the same as one after another, in as few store calls as the store can
        make them (an import of many small users costs a few calls a batch, not a few a user)."""
        ...

    def stored_ids(self, ids_by_user: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
        """Which of these ids each user has stored (a user with none of them is left out)."""
        ...

    def update_metadata(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the fields of stored memories whose content, tags, context and type did not change."""
        ...

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        """Delete these memories (ids not stored are ignored)."""
        ...

    # --- reindex
    def rebuild(
        self,
        user_id: str,
        embed_documents: Callable[[Sequence[str]], np.ndarray],
        dimension: int,
        *,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Re-embed every memory of the user with ``embed_documents``; returns how many."""
        ...

    def finish_rebuild(self, dimension: int) -> None:
        """After every user is rebuilt, record ``model_name`` and ``dimension`` for the whole store."""
        ...


# --- what every implementation does the same way

def check_owner(user_id: str, records: Sequence[MemoryRecord]) -> None:
    """Refuse a write of another user's records (the isolation promise, enforced on the way in)."""
    for record in records:
        if record.user_id != user_id:
            raise InvalidInputError("user_id", f"memory {record.id} belongs to {record.user_id!r}, not {user_id!r}")


def check_write(user_id: str, records: Sequence[MemoryRecord], embeddings: np.ndarray,
                keywords: Sequence[Sequence[str]]) -> np.ndarray:
    """The write's embeddings as a float32 matrix, after refusing another user's records and embeddings or token
    lists that do not pair one to one with the records."""
    check_owner(user_id, records)
    if len(keywords) != len(records):
        raise InvalidInputError("keywords", f"{len(keywords)} token lists for {len(records)} records")
    vectors = np.asarray(embeddings, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(records):
        raise InvalidInputError("embeddings", f"one embedding per record, got shape {vectors.shape}")
    return vectors


def announced(changes: ChangeFeed | None, user_id: str, ids: Sequence[str]) -> contextlib.AbstractContextManager[None]:
    """The write of these memories announced on the change feed (begin before, end after), when there is one."""
    return contextlib.nullcontext() if changes is None else changes.writing(user_id, ids)


def announced_many(changes: ChangeFeed | None, ids_by_user: Mapping[str, Sequence[str]],
                   ) -> contextlib.AbstractContextManager[None]:
    """The write of several users' memories announced on the change feed as one begin and one end."""
    return contextlib.nullcontext() if changes is None else changes.writing_many(ids_by_user)
