"""How a nearest-neighbour search of the Chroma store is split into Chroma calls, and what each one costs.

A search runs once per collection it looks in (one per memory type). A search restricted to some ids
(``among``) either reads the allowed ids' vectors and compares them here, or asks HNSW to search only among
them. Reading costs a fixed part and a little more per id; a restricted HNSW search a fixed part and a part
that grows with the collection's size over the number of allowed ids, up to a cap, because the graph walk must
pass many disallowed nodes to find allowed ones. The cheaper one is chosen per collection, by the costs the
``_READ_MS`` and ``_RESTRICTED_MS`` constants hold (measured on two cores: docs/benchmarks.md, *Why the store
is built as it is*).

Only ids and distances are asked for: documents and metadata too cost several times as much for a few hundred
neighbours. The caller filters and fetches the few it keeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.storage.chroma.client import chroma_errors
from vecmem.storage.chroma.rows import from_row, where_clause

__all__ = ["Search", "SearchThreads", "filtered_search", "plan_searches"]

_SEARCH_THREADS = 4  # collections searched at once (an untyped search reads four)
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")

_READ_MS, _READ_MS_PER_ID = 0.6, 0.05
_RESTRICTED_MS, _RESTRICTED_MS_PER_SPARSITY, _RESTRICTED_MS_MOST = 1.5, 0.1, 45.0
_FETCH_AT_MOST = 32  # without the collection's size, read the vectors of up to this many ids
_RESTRICT_CHUNK = 50_000  # ids per id-restricted query (90,000 at once worked; stay well inside the limits)


def _read_is_cheaper(allowed: int, collection_size: int | None) -> bool:
    """Whether reading ``allowed`` vectors beats an HNSW search restricted to them (see the costs above)."""
    if collection_size is None:
        return allowed <= _FETCH_AT_MOST
    sparsity = collection_size / max(allowed, 1)
    restricted = _RESTRICTED_MS + min(_RESTRICTED_MS_MOST, _RESTRICTED_MS_PER_SPARSITY * sparsity)
    return _READ_MS + _READ_MS_PER_ID * allowed < restricted


@dataclass(frozen=True)
class Search:
    """One Chroma call of a search: a collection, the ids it is restricted to (None: all), its size if known."""

    collection: Any
    among: Sequence[str] | None = None
    size: int | None = None

    def run(self, vector: np.ndarray, n_results: int) -> list[tuple[float, str]]:
        """(cosine distance, id) of up to ``n_results`` nearest rows."""
        if self.among is not None and _read_is_cheaper(len(self.among), self.size):
            with chroma_errors("searching memories"):
                rows = self.collection.get(ids=list(self.among), include=["embeddings"])
            if not rows["ids"]:
                return []
            matrix = np.asarray(rows["embeddings"], dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(vector)), 1e-30)
            cosines = (matrix @ vector) / np.where(norms == 0.0, 1.0, norms)  # a cosine whatever the lengths
            return [(1.0 - float(c), i) for i, c in zip(rows["ids"], cosines, strict=True)]
        with chroma_errors("searching memories", sends_vectors=True):
            rows = self.collection.query(query_embeddings=[vector], n_results=n_results, ids=self.among,
                                         include=["distances"])
        return [(float(d), i) for i, d in zip(rows["ids"][0], rows["distances"][0], strict=True)]


def plan_searches(
    collections: Mapping[str, Any],
    among: Mapping[str, Sequence[str]] | None,
    sizes: Mapping[str, int] | None,
) -> list[Search]:
    """The calls of a search of ``collections`` (type -> collection); ``among`` (type -> ids) restricts each
    to those ids (a type without any is not searched), ``sizes`` (type -> rows) lets it pick its cheaper way."""
    if among is None:
        return [Search(collection) for collection in collections.values()]
    searches: list[Search] = []
    for memory_type, collection in collections.items():
        allowed = among.get(memory_type, ())
        size = None if sizes is None else sizes.get(memory_type)
        searches.extend(Search(collection, allowed[i : i + _RESTRICT_CHUNK], size)
                        for i in range(0, len(allowed), _RESTRICT_CHUNK))
    return searches


def filtered_search(
    collections: Mapping[str, Any], embedding: np.ndarray, n_results: int, memory_filter: MemoryFilter
) -> list[tuple[MemoryRecord, float]]:
    """Up to ``n_results`` nearest memories passing the filter, with Chroma's where-filter (exact, but at
    100,000 memories far slower than a plain search: only the benchmark uses it)."""
    vector = [np.asarray(embedding, dtype=np.float32)]
    found: list[tuple[MemoryRecord, float]] = []
    for collection in collections.values():
        with chroma_errors("searching memories", sends_vectors=True):
            rows = collection.query(
                query_embeddings=vector,
                n_results=n_results,
                where=where_clause(memory_filter),
                include=["documents", "metadatas", "distances"],
            )
        for memory_id, document, metadata, distance in zip(
            rows["ids"][0], rows["documents"][0], rows["metadatas"][0], rows["distances"][0], strict=True
        ):
            record = from_row(memory_id, document, metadata)
            if memory_filter.matches(record):  # defence in depth: never trust a filter we did not write
                found.append((record, 1.0 - float(distance)))
    found.sort(key=lambda pair: -pair[1])
    return found[:n_results]


class SearchThreads:
    """The threads a search of several collections runs on, created on the first such search (a write of several
    collections runs on threads of its own: ``size`` and ``name``)."""

    def __init__(self, size: int = _SEARCH_THREADS, name: str = "vecmem-search") -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._size, self._name = size, name

    def map(self, work: Callable[[_Item], _Result], items: Sequence[_Item]) -> list[_Result]:
        """``work`` on every item, at once when there are several (Chroma releases the GIL while it searches)."""
        if len(items) <= 1:
            return [work(item) for item in items]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._size, thread_name_prefix=self._name)
            pool = self._pool
        return list(pool.map(work, items))

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
