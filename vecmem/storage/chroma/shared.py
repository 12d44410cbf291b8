"""The collections small users share: one user's memories of one type seen through it as if it were a
collection of their own (``SharedPlace``), an exact search over a user's rows, and the naming of rows.

A shared row is the row a user's own collection would hold, with two changes: its Chroma id is
``<place>:<memory id>``, where the place is the name the user's own collection of that type would have
(``vecmem-u-<hash of user>-<type>``), so ids that collide between users (or between types of one user, which
the doctor must be able to see) stay distinct rows; and its metadata carries the place (``vecmem_place``), so
one equality filter finds a user's rows of a type. Every row read back is checked twice, by its id's prefix and
by the place in its metadata, so a filter that went wrong can never hand one user another's memory.

The shared collections are named after the embedding model and dimension they hold and a bucket of users
(``vecmem-shared-<hash>-<bucket>``, see ``SHARED_BUCKETS``): a reindex to another model writes into another
shared collection and moves each user's pointer (the registry, ``chroma/layout.py``) once their rows are
complete there.

A user's rows are searched exactly here (cosine on normalised vectors) rather than by the shared
collection's HNSW index, which would walk every user's rows to find one user's; so that index is built as
cheaply as Chroma allows.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from vecmem.errors import StoreError
from vecmem.storage.chroma.client import DIMENSION_HINT, chroma_errors

log = logging.getLogger(__name__)

__all__ = [
    "REBUILD_SUFFIX",
    "PLACE_KEY", "SHARED_BUCKETS", "SHARED_HNSW", "SHARED_PREFIX", "USER_PREFIX", "SharedPlace", "collection_name",
    "documents_of", "typed_rows", "model_of", "pages", "shared_model_prefix", "shared_name", "shared_nearest",
    "user_key", "with_vectors",
]

REBUILD_SUFFIX = "-reindex"  # a user's collection being rebuilt by a reindex

USER_PREFIX = "vecmem-u-"
_PAGE = 1000  # rows per Chroma get() page when scanning a collection
PLACE_KEY = "vecmem_place"
SHARED_PREFIX = "vecmem-shared-"
# Chroma's metadata filter costs in proportion to the collection's rows, so small users are spread over several
# shared collections; but each costs disk and a first read in a process, and many of them cost more disk a
# memory than one, so 8 (the figures: docs/benchmarks.md, *Why the store is built as it is*)
SHARED_BUCKETS = 8
# never searched by HNSW (see above): the fewest links and the cheapest construction Chroma accepts
SHARED_HNSW = {"space": "cosine", "max_neighbors": 4, "ef_construction": 8}


def user_key(user_id: str) -> str:
    """The user's name in Chroma (and the name of their collection in the first layout)."""
    # Chroma names allow [a-zA-Z0-9._-] only, so the user id is hashed and kept in the collection metadata.
    return USER_PREFIX + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:32]


def collection_name(user_id: str, memory_type: str) -> str:
    """The collection holding the user's memories of one type (and the place of their shared rows of it)."""
    return f"{user_key(user_id)}-{memory_type}"


def model_of(metadata: Mapping[str, Any] | None) -> tuple[str, int]:
    """(embedding model, dimension) as a collection's metadata records them."""
    meta = metadata or {}
    return str(meta.get("embed_model", "")), int(meta.get("embed_dim", 0) or 0)


def pages(
    collection: Any, include: list[str], action: str, *, where: dict[str, Any] | None = None, size: int = _PAGE
) -> Iterator[Mapping[str, Any]]:
    """Every row of a collection or place (those passing ``where``), a Chroma ``get`` result of up to ``size``
    rows at a time; empty pages are not yielded."""
    offset = 0
    while True:
        with chroma_errors(action):
            rows = collection.get(where=where, limit=size, offset=offset, include=include)
        if rows["ids"]:
            yield rows
        if len(rows["ids"]) < size:
            return
        offset += size


def documents_of(collection: Any, action: str, where: dict[str, Any] | None = None) -> Iterator[tuple[Any, ...]]:
    """(id, document, metadata) of every row of a collection or place that passes ``where``."""
    for rows in pages(collection, ["documents", "metadatas"], action, where=where):
        yield from zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)


def typed_rows(collections: Mapping[str, Any], action: str,
               where: Mapping[str, Any] | None = None) -> Iterator[tuple[str, str, Any, Any]]:
    """(type, memory id, document, metadata) of every row of one user's collections or places that passes
    ``where``. A shared user's places are read together, a page at a time: one filtered read of the shared
    collection, where a place at a time would cost one per type (a user's first search reads this)."""
    places = [c for c in collections.values() if isinstance(c, SharedPlace)]
    if len(places) < 2 or len(places) != len(collections):
        for memory_type, collection in collections.items():
            for memory_id, document, metadata in documents_of(collection, action, None if where is None else dict(where)):
                yield memory_type, memory_id, document, metadata
        return
    by_name = {place.name: place for place in places}
    in_places: dict[str, Any] = {PLACE_KEY: {"$in": sorted(by_name)}}
    for rows in pages(places[0].shared, ["documents", "metadatas"], action,
                      where=in_places if not where else {"$and": [in_places, dict(where)]}):
        for row_id, document, metadata in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True):
            name, _, memory_id = str(row_id).partition(":")
            place = by_name.get(name)
            if place is None or (metadata or {}).get(PLACE_KEY) != name:  # checked twice, as SharedPlace does
                continue
            yield place.memory_type, memory_id, document, {k: v for k, v in metadata.items() if k != PLACE_KEY}


def shared_model_prefix(model_name: str, dimension: int) -> str:
    """What the names of the shared collections of vectors of this model and dimension start with."""
    return SHARED_PREFIX + hashlib.sha256(f"{model_name}\n{dimension}".encode()).hexdigest()[:16] + "-"


def shared_name(model_name: str, dimension: int, user_id: str) -> str:
    """The shared collection a new shared user of this model and dimension goes into (one of SHARED_BUCKETS)."""
    bucket = int(hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:8], 16) % SHARED_BUCKETS
    return f"{shared_model_prefix(model_name, dimension)}{bucket:02d}"


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0.0, 1.0, norms)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector if norm == 0.0 else vector / norm


class SharedPlace:
    """One user's memories of one type in a shared collection, answering the calls the store makes on a
    collection (``get``, ``add``, ``upsert``, ``update``, ``delete``, ``count``, ``query``, ``metadata``)."""

    def __init__(self, shared: Any, user_id: str, memory_type: str, name: str) -> None:
        self.shared = shared
        self.user_id = user_id
        self.memory_type = memory_type
        self.name = name  # the place: what the user's own collection of this type is called
        self._prefix = name + ":"

    @property
    def metadata(self) -> dict[str, Any]:
        """The shared collection's (model, dimension, schema) with this place's user and type."""
        return {**(self.shared.metadata or {}), "vecmem_user": self.user_id, "vecmem_type": self.memory_type}

    def row_ids(self, ids: Sequence[str]) -> list[str]:
        return [self._prefix + memory_id for memory_id in ids]

    def _where(self, where: Mapping[str, Any] | None) -> dict[str, Any]:
        place: dict[str, Any] = {PLACE_KEY: self.name}
        return place if not where else {"$and": [place, dict(where)]}

    def _placed(self, metadatas: Sequence[Mapping[str, Any] | None] | None) -> list[dict[str, Any]] | None:
        return None if metadatas is None else [{**(m or {}), PLACE_KEY: self.name} for m in metadatas]

    # ------------------------------------------------------------------------------------------ reads

    def get(
        self,
        ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        include: Sequence[str] = ("documents", "metadatas"),
    ) -> dict[str, Any]:
        """The place's rows, as ``Collection.get`` returns them, with memory ids and without the place key."""
        if ids is not None and not ids:
            return {"ids": [], **{field: [] for field in include}}
        rows = self.shared.get(ids=None if ids is None else self.row_ids(ids), where=self._where(where),
                               limit=limit, offset=offset, include=list(include))
        return self._own(rows, include)

    def _own(self, rows: Mapping[str, Any], include: Sequence[str]) -> dict[str, Any]:
        """Only rows of this place, checked by id and by metadata; the ids given back are memory ids."""
        metadatas = rows.get("metadatas") if "metadatas" in include else None
        keep = [position for position, row_id in enumerate(rows["ids"])
                if row_id.startswith(self._prefix)
                and (metadatas is None or (metadatas[position] or {}).get(PLACE_KEY) == self.name)]
        owned: dict[str, Any] = {"ids": [rows["ids"][p][len(self._prefix):] for p in keep]}
        for field in include:
            values = rows.get(field)
            if field == "embeddings":
                owned[field] = (np.zeros((0, 0), dtype=np.float32) if values is None or not keep
                                else np.asarray(values, dtype=np.float32)[keep])
            elif field == "metadatas":
                stored = values if values is not None else [None] * len(rows["ids"])
                owned[field] = [{k: v for k, v in (stored[p] or {}).items() if k != PLACE_KEY} for p in keep]
            else:
                owned[field] = [] if values is None else [values[p] for p in keep]
        return owned

    def count(self) -> int:
        return len(self.shared.get(where=self._where(None), include=[])["ids"])

    def query(
        self,
        query_embeddings: Sequence[np.ndarray],
        n_results: int,
        ids: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        include: Sequence[str] = ("distances",),
    ) -> dict[str, Any]:
        """``Collection.query`` for one query vector, answered by an exact scan of the place's rows."""
        wanted = ["embeddings", *(f for f in include if f in ("documents", "metadatas"))]
        rows = self.get(ids=ids, where=where, include=wanted)
        order, distances = _ranked(rows["ids"], rows["embeddings"], np.asarray(query_embeddings[0]), n_results)
        found: dict[str, Any] = {"ids": [[rows["ids"][p] for p in order]], "distances": [distances]}
        for field in ("documents", "metadatas"):
            if field in include:
                found[field] = [[rows[field][p] for p in order]]
        return found

    # ------------------------------------------------------------------------------------------ writes

    def add(self, ids: Sequence[str], embeddings: Any = None, documents: Sequence[str] | None = None,
            metadatas: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        self.shared.add(ids=self.row_ids(ids), embeddings=embeddings, documents=documents,
                        metadatas=self._placed(metadatas))

    def upsert(self, ids: Sequence[str], embeddings: Any = None, documents: Sequence[str] | None = None,
               metadatas: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        self.shared.upsert(ids=self.row_ids(ids), embeddings=embeddings, documents=documents,
                           metadatas=self._placed(metadatas))

    def update(self, ids: Sequence[str], embeddings: Any = None, documents: Sequence[str] | None = None,
               metadatas: Sequence[Mapping[str, Any] | None] | None = None) -> None:
        self.shared.update(ids=self.row_ids(ids), embeddings=embeddings, documents=documents,
                           metadatas=self._placed(metadatas))

    def delete(self, ids: Sequence[str] | None = None) -> None:
        """Delete these memories of the place; every one of them when ``ids`` is None."""
        if ids is None:
            self.shared.delete(where=self._where(None))
        elif ids:
            self.shared.delete(ids=self.row_ids(ids))


def with_vectors(read: Any, action: str = "searching memories", *, torn_is_error: bool = False) -> Any:
    """A read whose ids and vectors pair up. A Chroma server can answer a read that races a write with the new
    ids but not yet their vectors (seen in the conformance suite's threaded test, under load, and between two
    workers, one searching while the other forgets); read once more, and if the answer is still torn, count
    those rows as not yet written: the caller then sees the state before that write, which is a state the store
    passed through. ``torn_is_error``: raise StoreError instead (a reader that would take the missing rows for
    deleted ones: the replica re-reading another writer's memories)."""
    for _ in range(2):
        with chroma_errors(action):
            rows = read()
        vectors = rows.get("embeddings")
        if vectors is not None and len(vectors) == len(rows["ids"]):
            return rows
    if torn_is_error:
        raise StoreError(f"{action} failed: the Chroma server returned {len(rows['ids'])} rows without their vectors "
                         "twice (a write was in progress); try again")
    log.warning("the Chroma server returned %d rows without their vectors twice; reading on without them",
                len(rows["ids"]))
    return {"ids": [], "embeddings": [], "documents": [], "metadatas": []}


def _ranked(ids: Sequence[str], matrix: np.ndarray, query: np.ndarray, n_results: int) -> tuple[list[int], list[float]]:
    """Positions of the ``n_results`` rows nearest ``query`` by cosine distance (ties by id), and the distances."""
    if not ids:
        return [], []
    if matrix.shape[1] != query.shape[-1]:  # what Chroma says of a query of another dimension, said the same
        raise StoreError(f"searching memories failed: a query of dimension {query.shape[-1]} for vectors of "
                         f"dimension {matrix.shape[1]} ({DIMENSION_HINT})")
    distances = 1.0 - _unit_rows(np.asarray(matrix, dtype=np.float32)) @ _unit(query.astype(np.float32))
    order = sorted(range(len(ids)), key=lambda p: (float(distances[p]), ids[p]))[:n_results]
    return order, [float(distances[p]) for p in order]


def shared_nearest(
    places: Sequence[SharedPlace], vector: np.ndarray, n_results: int,
    among: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[float, str]]:
    """(cosine distance, memory id) of the ``n_results`` nearest rows of these places (one user's, all in one
    shared collection), with one Chroma read; ``among`` (type -> ids) restricts it to those ids."""
    if not places:
        return []
    by_prefix = {place.name + ":": place for place in places}
    if among is None:
        names = [place.name for place in places]
        where: dict[str, Any] = {PLACE_KEY: names[0]} if len(names) == 1 else {PLACE_KEY: {"$in": names}}

        def read() -> Any:
            return places[0].shared.get(where=where, include=["embeddings"])
    else:
        row_ids = [row_id for place in places for row_id in place.row_ids(among.get(place.memory_type, ()))]
        if not row_ids:
            return []

        def read() -> Any:
            return places[0].shared.get(ids=row_ids, include=["embeddings"])
    rows = with_vectors(read)
    keep = [p for p, row_id in enumerate(rows["ids"]) if row_id.split(":", 1)[0] + ":" in by_prefix]
    if not keep:
        return []
    memory_ids = [rows["ids"][p].split(":", 1)[1] for p in keep]
    matrix = np.asarray(rows["embeddings"], dtype=np.float32)[keep]
    order, distances = _ranked(memory_ids, matrix, vector, n_results)
    return [(distance, memory_ids[p]) for p, distance in zip(order, distances, strict=True)]
