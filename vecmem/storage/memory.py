"""The in-memory memory store: the reference implementation of ``MemoryStore`` (``base.py``).

It keeps what ``ChromaStore`` keeps, in dictionaries: per user, each memory's row (the type it is filed under,
its document, its metadata as ``rows.to_metadata`` lays it out with the keyword tokens, its vector) and the
"places" a user has (Chroma's collections: one per user and type, created by the first write of that type,
recording the embedding model and dimension, outliving their last memory). Records are written and read
through ``rows.py`` like Chroma rows, so they come back exactly as from Chroma (times as epoch-second floats)
and ``raw_rows`` shows the doctor the same rows. Search is exact cosine with numpy.

Upper-layer unit tests run on it in milliseconds where embedded Chroma costs a second a test; the
conformance suite (``tests/conformance``) holds it and ``ChromaStore`` to the same behaviour.

Several banks can share one store as several banks share one embedded Chroma folder: ``sharing`` gives each
its own client (model name, change feed) on the same memories, and writes are announced on the client's
``ChangeFeed`` around the change as ``ChromaStore`` announces them, so each bank's copies see the others'
writes exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from vecmem.errors import EmbeddingMismatchError, StoreError
from vecmem.models import MEMORY_TYPES, MemoryFilter, MemoryRecord
from vecmem.storage.base import IndexedRow, RawRow, UserWrite, announced, check_owner, check_write
from vecmem.storage.chroma.rows import from_row, to_metadata
from vecmem.storage.memory_state import _Memories, _Row, stage, swap_staged
from vecmem.storage.state.changes import ChangeFeed

__all__ = ["InMemoryStore"]

_DIMENSION_HINT = " (the embedding model changed its output size; run `vecmem reindex`)"  # as ChromaStore says


class InMemoryStore:
    """Memories of many users in this process's memory, behaving as ``ChromaStore`` does."""

    def __init__(self, *, model_name: str, changes: ChangeFeed | None = None, location: str = "memory") -> None:
        self.model_name = model_name
        self.changes = changes
        self.location = location
        self._memories = _Memories()

    def sharing(self, *, model_name: str | None = None, changes: ChangeFeed | None = None) -> InMemoryStore:
        """Another client of these same memories, as a second ``ChromaStore`` on the same folder is: with its
        own model name (this one's by default) and its own change feed (a bank announces its writes on a feed
        object of its own, so that its reader skips only its own writes)."""
        other = InMemoryStore(model_name=model_name or self.model_name, changes=changes, location=self.location)
        other._memories = self._memories
        return other

    # ----------------------------------------------------------------------------------------- model record

    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the store was built with; None for a store never written."""
        return self._memories.model

    def check_model(self) -> None:
        """Raise EmbeddingMismatchError when the store was built with another model than ``model_name``."""
        stored = self.stored_model()
        if stored is not None and stored[0] != self.model_name:
            raise EmbeddingMismatchError(stored[0], stored[1], self.model_name)

    def _record_model(self, dimension: int) -> None:
        """Record the model on the first write; a write with another model than the recorded one is refused."""
        stored = self._memories.model
        if stored is not None and stored[0] != self.model_name:
            raise EmbeddingMismatchError(stored[0], stored[1], self.model_name)
        self._memories.model = (self.model_name, dimension)

    def _places(self, user_id: str, types: Iterable[str] | None = None, *, verify: bool) -> dict[str, tuple[str, int]]:
        """The user's places among ``types`` (all when None) that exist; ``verify``: refuse one recording another
        model (what ChromaStore checks before reading or writing vectors)."""
        known = self._memories.places.get(user_id, {})
        wanted = MEMORY_TYPES if types is None else tuple(types)
        found = {t: known[t] for t in wanted if t in known}
        if verify:
            for model, dimension in found.values():
                if model != self.model_name:
                    raise EmbeddingMismatchError(model, dimension, self.model_name)
        return found

    def _rows(self, user_id: str) -> dict[str, _Row]:
        return self._memories.rows.get(user_id, {})

    # ----------------------------------------------------------------------------------------- store-wide

    def users(self) -> list[str]:
        """Every user with at least one place in the store (all memories deleted still counts), sorted."""
        with self._memories.lock:
            return sorted(user for user, places in self._memories.places.items() if places)

    def count(self, user_id: str) -> int:
        """How many memories the user has, superseded, archived and pending included."""
        with self._memories.lock:
            return len(self._rows(user_id))

    def refresh(self, user_id: str) -> None:
        """Nothing is cached about a user's layout: every call reads the shared dictionaries."""

    def close(self) -> None:
        """Nothing to let go of; the memories stay for the other clients sharing them."""

    def residence(self, user_id: str) -> list[str]:
        """No files: none."""
        return []

    # ----------------------------------------------------------------------------------------- reads

    def get(
        self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str] | None = None
    ) -> dict[str, MemoryRecord]:
        """The stored memories among ``ids``; an id whose ``type_of`` hint names another existing place is
        looked for only there (so not found), as ChromaStore reads only the hinted collection."""
        with self._memories.lock:
            places = self._places(user_id, verify=False)
            return {memory_id: from_row(memory_id, row.document, row.metadata)
                    for memory_id, row in self._found(user_id, ids, type_of, places)}

    def _found(
        self, user_id: str, ids: Sequence[str], type_of: Mapping[str, str] | None, places: Mapping[str, Any]
    ) -> Iterator[tuple[str, _Row]]:
        rows = self._rows(user_id)
        for memory_id in dict.fromkeys(ids):
            row = rows.get(memory_id)
            hint = None if type_of is None else type_of.get(memory_id)
            if row is not None and row.place in places and (hint not in places or hint == row.place):
                yield memory_id, row

    def get_indexed(self, user_id: str, ids: Sequence[str]) -> dict[str, IndexedRow]:
        """The stored memories among ``ids`` with their embeddings and keyword tokens."""
        with self._memories.lock:
            places = self._places(user_id, verify=True)
            return {memory_id: (from_row(memory_id, row.document, row.metadata), row.vector.copy(), _keywords(row))
                    for memory_id, row in self._found(user_id, ids, None, places)}

    def vectors(self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str]) -> dict[str, np.ndarray]:
        """The stored embeddings of these memories; ids without a type in ``type_of`` (or filed under another
        type than it says) are skipped."""
        with self._memories.lock:
            places = self._places(user_id, set(type_of.values()), verify=True)
            rows = self._rows(user_id)
            return {memory_id: row.vector.copy() for memory_id in dict.fromkeys(ids)
                    if (row := rows.get(memory_id)) is not None and type_of.get(memory_id) == row.place
                    and row.place in places}

    def _filed(self, user_id: str, types: Iterable[str] | None = None) -> list[tuple[str, _Row]]:
        """The user's rows of ``types`` (all when None), place by place as ChromaStore reads its collections."""
        places = self._places(user_id, types, verify=False)
        rows = self._rows(user_id)
        return [(memory_id, row) for place in places for memory_id, row in rows.items() if row.place == place]

    def scan(self, user_id: str, memory_filter: MemoryFilter) -> Iterator[MemoryRecord]:
        """Every memory of the user that passes the filter (read at the call: later writes are not seen)."""
        with self._memories.lock:
            records = [from_row(i, row.document, row.metadata) for i, row in self._filed(user_id, memory_filter.types)]
        return iter([record for record in records if memory_filter.matches(record)])

    def scan_keywords(self, user_id: str) -> Iterator[tuple[MemoryRecord, list[str] | None]]:
        """Every memory of the user with its stored keyword tokens."""
        with self._memories.lock:
            return iter([(from_row(i, row.document, row.metadata), _keywords(row)) for i, row in self._filed(user_id)])

    def scan_vectors(self, user_id: str, page: int = 5_000) -> Iterator[tuple[list[str], np.ndarray]]:
        """Every stored embedding of the user, a page (ids, matrix) at a time, each type's place on its own pages."""
        pages: list[tuple[list[str], np.ndarray]] = []
        with self._memories.lock:
            rows = self._rows(user_id)
            for place in self._places(user_id, verify=True):
                filed = [memory_id for memory_id, row in rows.items() if row.place == place]
                for start in range(0, len(filed), max(page, 1)):
                    chunk = filed[start : start + max(page, 1)]
                    pages.append((chunk, np.stack([rows[memory_id].vector for memory_id in chunk])))
        return iter(pages)

    def raw_rows(self, user_id: str) -> Iterator[RawRow]:
        """Every row as stored: (the type it is filed under, id, document, metadata)."""
        with self._memories.lock:
            return iter([(row.place, i, row.document, dict(row.metadata)) for i, row in self._filed(user_id)])

    def collection_models(self, user_id: str) -> dict[str, tuple[str, int]]:
        """{type: (embedding model, dimension)} as each of the user's places records it."""
        with self._memories.lock:
            return self._places(user_id, verify=False)

    def replaced_by(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        """The memories whose ``superseded_by`` points at ``memory_id``."""
        with self._memories.lock:
            return [from_row(i, row.document, row.metadata) for i, row in self._filed(user_id)
                    if row.metadata.get("superseded_by") == memory_id]

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
        """Ids and exact cosines of the ``n_results`` nearest memories of ``types`` (all when None), best first,
        ties by id; ``among`` (type -> ids) restricts the search to those ids. ``sizes`` is a cost hint that an
        exact search has no use for."""
        if n_results <= 0:
            return [], []
        query = np.asarray(embedding, dtype=np.float32).reshape(-1)
        with self._memories.lock:
            rows = self._rows(user_id)
            ids: list[str] = []
            for place in self._places(user_id, types, verify=True):
                if among is None:
                    ids.extend(memory_id for memory_id, row in rows.items() if row.place == place)
                else:
                    ids.extend(memory_id for memory_id in dict.fromkeys(among.get(place, ()))
                               if (row := rows.get(memory_id)) is not None and row.place == place)
            if not ids:
                return [], []
            matrix = np.stack([rows[memory_id].vector for memory_id in ids])
        if matrix.shape[1] != query.shape[0]:
            raise StoreError(f"searching memories failed: a query of dimension {query.shape[0]} against "
                             f"embeddings of dimension {matrix.shape[1]}{_DIMENSION_HINT}")
        norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
        cosines = np.divide(matrix @ query, norms, out=np.zeros(len(ids), dtype=np.float32), where=norms > 0)
        found = sorted((1.0 - float(cosine), memory_id) for memory_id, cosine in zip(ids, cosines, strict=True))
        return [i for _, i in found[:n_results]], [1.0 - d for d, _ in found[:n_results]]

    # ----------------------------------------------------------------------------------------- writes

    def upsert(
        self,
        user_id: str,
        records: Sequence[MemoryRecord],
        embeddings: np.ndarray,
        keywords: Sequence[Sequence[str]],
        *,
        new: bool = False,
    ) -> None:
        """Write memories whole with their embeddings and keyword tokens; a memory whose type changed moves to
        its new type's place (rows are kept by id, so ``new`` changes nothing here)."""
        if not records:
            return
        vectors = check_write(user_id, records, embeddings, keywords)
        dimension = int(vectors.shape[1])
        with self._memories.lock:
            types = list(dict.fromkeys(record.type for record in records))
            known = self._memories.places.setdefault(user_id, {})
            missing = [t for t in types if t not in known]
            if missing:
                self._record_model(dimension)
            for memory_type in missing:
                known[memory_type] = (self.model_name, dimension)
            for _model, place_dimension in self._places(user_id, types, verify=True).values():
                if place_dimension != dimension:
                    raise StoreError(f"writing memories failed: embedding of dimension {dimension}, the store's "
                                     f"have dimension {place_dimension}{_DIMENSION_HINT}")
        with announced(self.changes, user_id, [record.id for record in records]), self._memories.lock:
            rows = self._memories.rows.setdefault(user_id, {})
            for record, vector, words in zip(records, vectors, keywords, strict=True):
                rows[record.id] = _Row(record.type, record.content, {**to_metadata(record), "keywords": " ".join(words)},
                                       vector.copy())

    def upsert_many(self, writes: Sequence[UserWrite], *, new: bool = False) -> None:
        """Each user's write in turn (every one checked first, so a bad one writes nothing): the reference the
        batched writes of other stores are held to."""
        for write in writes:
            check_write(write.user_id, write.records, write.embeddings, write.keywords)
        for write in writes:
            self.upsert(write.user_id, write.records, write.embeddings, write.keywords, new=new)

    def stored_ids(self, ids_by_user: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
        with self._memories.lock:
            found = {user: {i for i in ids if i in self._memories.rows.get(user, {})}
                     for user, ids in ids_by_user.items()}
        return {user: ids for user, ids in found.items() if ids}

    def update_metadata(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the fields of stored memories whose content, tags, context and type did not change (their
        vector, document and keyword tokens stay); ids not stored under their record's type are left alone."""
        if not records:
            return
        check_owner(user_id, records)
        with self._memories.lock:
            places = self._places(user_id, {record.type for record in records}, verify=False)
        with announced(self.changes, user_id, [record.id for record in records]), self._memories.lock:
            rows = self._rows(user_id)
            for record in records:
                row = rows.get(record.id)
                if row is not None and row.place == record.type and row.place in places:
                    row.metadata = {**row.metadata, **to_metadata(record)}
        missing = {record.type for record in records} - set(places)
        if missing:
            raise StoreError(f"user {user_id!r} has no {', '.join(sorted(missing))} memories to update")

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        """Delete these memories (ids not stored are ignored); the user's places stay, as collections do."""
        if not ids:
            return
        with announced(self.changes, user_id, ids), self._memories.lock:
            rows = self._rows(user_id)
            for memory_id in ids:
                rows.pop(memory_id, None)

    # ----------------------------------------------------------------------------------------- reindex

    def rebuild(
        self,
        user_id: str,
        embed_documents: Callable[[Sequence[str]], np.ndarray],
        dimension: int,
        *,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Re-embed every memory of the user. With the same model, a type's place at a time, each swapped in once
        all its memories are re-embedded (a failure leaves it as it was). With another, into a staging copy the
        store does not read until ``finish_rebuild``; memories a failed run staged (same text) are not embedded
        again. Returns how many memories the user has."""
        with self._memories.lock:
            places = self._places(user_id, verify=False)
        if any(model != self.model_name for model, _ in places.values()):
            return stage(self._memories, user_id, list(places), (self.model_name, dimension),
                         lambda documents: _embedded(embed_documents, list(documents)), batch_size, progress)
        copied = 0
        for place in places:
            with self._memories.lock:
                filed = [(memory_id, row.document) for memory_id, row in self._filed(user_id, [place])]
            fresh: dict[str, np.ndarray] = {}
            for start in range(0, len(filed), max(batch_size, 1)):
                batch = filed[start : start + max(batch_size, 1)]
                fresh.update(zip([i for i, _ in batch], _embedded(embed_documents, [d for _, d in batch]), strict=True))
                if progress is not None:
                    progress(len(batch))
            with self._memories.lock:  # the place becomes what was copied, as a swapped-in collection does
                rows = self._memories.rows.setdefault(user_id, {})
                for memory_id in [i for i, row in rows.items() if row.place == place and i not in fresh]:
                    del rows[memory_id]
                for memory_id, vector in fresh.items():
                    if memory_id in rows:
                        rows[memory_id].vector = vector
                self._memories.places[user_id][place] = (self.model_name, dimension)
            copied += len(fresh)
        if self.changes is not None:
            self.changes.reset(user_id)
        return copied

    def finish_rebuild(self, dimension: int) -> None:
        """After every user is rebuilt, record ``model_name`` and ``dimension`` for the whole store, and swap in
        what was staged for it."""
        for user_id in swap_staged(self._memories, (self.model_name, dimension)):
            if self.changes is not None:
                self.changes.reset(user_id)


def _keywords(row: _Row) -> list[str] | None:
    stored = row.metadata.get("keywords")
    return None if stored is None else str(stored).split()


def _embedded(embed_documents: Callable[[Sequence[str]], np.ndarray], documents: list[str]) -> np.ndarray:
    """Embed a batch for a rebuild. What the caller's embedder raises reaches the caller as it is (as from
    ChromaStore); embeddings that do not fit the batch are the store's refusal."""
    vectors = np.asarray(embed_documents(documents), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(documents):
        raise StoreError(f"reindexing failed: {len(documents)} documents gave embeddings of shape {vectors.shape}")
    return vectors
