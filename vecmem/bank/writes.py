"""The one write path: every change to a memory goes to the store and to the retriever's in-memory copies
together, so a search never ranks a copy that disagrees with the store.

The bank writes through it (``add``, ``update``, ``forget``, imports), and so does each maintenance operation
the bank hands it to (the doctor's repairs, the policy's archiving, supersession and review moves). Callers
hold the bank's write lock around each call; this class takes none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from vecmem.errors import ConflictError
from vecmem.models import MemoryRecord, normalize_for_hash
from vecmem.retrieval.index.keyword import memory_tokens
from vecmem.retrieval.retriever import Retriever
from vecmem.storage.base import MemoryStore, UserWrite
from vecmem.storage.state.access import AccessStats

__all__ = ["WritePath", "next_versions"]


def next_versions(records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """Each record as the next version of itself (the caller read it, under the user's write lock, from the
    store: no other writer can have moved the stored version past it meanwhile)."""
    return [MemoryRecord.trusted(**{**record.__dict__, "version": record.version + 1}) for record in records]


class WritePath:
    """Writes to ``store`` that keep ``retriever`` and ``access`` in step; ``embed_documents`` embeds content."""

    def __init__(self, store: MemoryStore, retriever: Retriever, access: AccessStats,
                 embed_documents: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.store = store
        self.retriever = retriever
        self.access = access
        self.embed_documents = embed_documents

    def write(self, records: Sequence[MemoryRecord], *, vectors: np.ndarray | None = None,
              new: bool = False) -> list[MemoryRecord]:
        """Embed (unless ``vectors`` are given), tokenize and store records of any users: vectors and keywords
        of every user in one store write (a few Chroma calls for a batch of many small users). ``new``: the ids
        are known not to be stored yet (nothing to move), and the records are stored as given; otherwise each is
        the next version of what it replaces (``version`` one higher). Returns the records as stored."""
        if not records:
            return []
        if not new:
            records = next_versions(records)
        if vectors is None:
            vectors = self.embed_documents([r.content for r in records])
        tokens = [memory_tokens(r) for r in records]
        by_user: dict[str, list[int]] = {}
        for index, record in enumerate(records):
            by_user.setdefault(record.user_id, []).append(index)
        batch = [UserWrite(user, [records[i] for i in indexes], vectors[indexes], [tokens[i] for i in indexes])
                 for user, indexes in by_user.items()]
        self.store.upsert_many(batch, new=new)
        for write in batch:
            self.retriever.on_written(write.user_id, write.records, write.keywords, write.embeddings)
        return list(records)

    def rewrite_fields(self, user: str, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Store changed fields of memories whose content, tags and context (so vector and keywords) stay, each
        as the next version of what it was; returns them as stored."""
        records = next_versions(records)
        self.store.update_metadata(user, records)
        self.retriever.on_fields_changed(user, records)
        return records

    def add(self, record: MemoryRecord, *, stored: Sequence[MemoryRecord] | None = None) -> MemoryRecord | None:
        """Store a new memory and return None; when its id is stored already, return the stored memory (with
        its access statistics) if it says the same thing, and refuse the id otherwise. ``stored``: what the
        caller has just read under the id (empty when free), so it is not read again."""
        existing = (self.store.get(record.user_id, [record.id]).get(record.id) if stored is None
                    else next(iter(stored), None))
        if existing is None:
            self.write([record], new=True)
            return None
        if normalize_for_hash(existing.content) != normalize_for_hash(record.content):
            raise ConflictError("id", f"{record.id} is already used by another memory; use update()")
        return self.access.apply([existing])[0]

    def update(self, record: MemoryRecord, changes: Mapping[str, object]) -> MemoryRecord:
        """``record`` with ``changes`` applied and stored: re-embedded and re-indexed when its words or its type
        (so its collection) changed, its fields rewritten when only they did, untouched when nothing did."""
        updated = record.with_changes(**changes)
        if (updated.content, updated.tags, updated.context, updated.type) != (
            record.content, record.tags, record.context, record.type
        ):
            return self.write([updated])[0]
        if updated != record:
            return self.rewrite_fields(updated.user_id, [updated])[0]
        return updated

    def delete(self, record: MemoryRecord) -> None:
        """Delete a memory for good: its row, its access statistics and the retriever's copies of it."""
        self.store.delete(record.user_id, [record.id])
        self.access.forget(record.user_id, [record.id])
        self.retriever.on_forgotten(record.user_id, [record.id])

    def reembed_all(self, users: Sequence[str], dimension: int, batch_size: int,
                    progress: Callable[[int], None] | None) -> dict[str, int]:
        """Re-embed every memory of these users (``vecmem reindex``), record the model for the store, and drop
        the retriever's copies (built again from the new vectors). Returns memories per user."""
        done = {user: self.store.rebuild(user, self.embed_documents, dimension, batch_size=batch_size,
                                         progress=progress) for user in users}
        self.store.finish_rebuild(dimension)
        self.retriever.clear()
        return done
