"""Moving a user's memories between the two layouts, and reindexing each; every step restartable.

Each move first records where it is going in the user's registry entry (``to-shared``, ``to-dedicated``),
then copies every row with its vector, and only then deletes the source and records the end state. A process
that dies midway leaves the entry saying so, and the next open of the user (``ChromaCollections.typed``)
runs the move again: copying is idempotent, and a row already in the user's own collections is never
overwritten by the shared copy (the dedicated one wins), so nothing is lost or doubled.

A reindex of a shared user writes the re-embedded rows into the shared collection of the new model
(``shared_name``), deleting first whatever an abandoned reindex left of this user there; only once every row
is there does the user's entry point at it, and the rows in the old one are deleted. After every user is
rebuilt, ``drop_stale_shared`` drops shared collections of other models, along with any rows a crash left
in them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vecmem.errors import StoreError
from vecmem.storage.chroma_client import chroma_errors
from vecmem.storage.chroma_shared import (
    PLACE_KEY,
    SharedPlace,
    collection_name,
    model_of,
    pages,
    user_key,
)

if TYPE_CHECKING:
    from vecmem.storage.chroma_layout import ChromaCollections

__all__ = ["REBUILD_SUFFIX", "copy_embedded", "move_to_dedicated", "move_to_shared", "rebuild_dedicated",
           "rebuild_shared", "split_legacy"]

REBUILD_SUFFIX = "-reindex"  # a user's collection being rebuilt by a reindex

_ROWS = ["documents", "metadatas", "embeddings"]


def _copy(source: Any, target: Any, action: str, *, keep_existing: bool) -> None:
    """Every row of ``source`` into ``target`` with its vector; ``keep_existing``: rows ``target`` already
    holds stay as they are."""
    for rows in pages(source, _ROWS, action):
        positions = list(range(len(rows["ids"])))
        if keep_existing:
            with chroma_errors(action):
                present = set(target.get(ids=list(rows["ids"]), include=[])["ids"])
            positions = [p for p in positions if rows["ids"][p] not in present]
        if not positions:
            continue
        with chroma_errors(action, sends_vectors=True):
            target.upsert(ids=[rows["ids"][p] for p in positions],
                          embeddings=np.asarray(rows["embeddings"], dtype=np.float32)[positions],
                          documents=[rows["documents"][p] for p in positions],
                          metadatas=[rows["metadatas"][p] for p in positions])


def split_legacy(layout: ChromaCollections, user_id: str) -> None:
    """Move a one-collection-per-user store (schema 1) into the per-type layout, rows with their vectors."""
    legacy = layout.get(user_key(user_id))
    if legacy is None:
        return
    meta = legacy.metadata or {}
    dimension = model_of(meta)[1]
    action = f"moving the memories of user {user_id!r} to the per-type layout"
    targets: dict[str, Any] = {}
    for rows in pages(legacy, ["documents", "metadatas", "embeddings"], action):
        by_type: dict[str, list[int]] = {}
        for position, metadata in enumerate(rows["metadatas"]):
            by_type.setdefault((metadata or {}).get("type", "fact"), []).append(position)
        for memory_type, positions in by_type.items():
            if memory_type not in targets:
                name = collection_name(user_id, memory_type)
                targets[memory_type] = layout.get(name) or layout.create(
                    name, {**layout.user_metadata(user_id, dimension, memory_type),
                           "embed_model": meta.get("embed_model", layout.model_name)},
                )
            with chroma_errors(action, sends_vectors=True):
                targets[memory_type].upsert(
                    ids=[rows["ids"][p] for p in positions],
                    embeddings=np.asarray([rows["embeddings"][p] for p in positions], dtype=np.float32),
                    documents=[rows["documents"][p] for p in positions],
                    metadatas=[rows["metadatas"][p] for p in positions],
                )
    layout.delete(legacy.name)  # only now: every row is in its new home
    layout.announce_reset(user_id)


def move_to_shared(layout: ChromaCollections, user_id: str, dedicated: Mapping[str, Any]) -> dict[str, Any]:
    """Move a user's own collections into the shared collection of their model; returns their places."""
    model, dimension = model_of(next(iter(dedicated.values())).metadata)
    shared = layout.shared_for(model, dimension, user_id)
    entry = layout.entry(user_id) or {}
    types = sorted(set(dedicated) | set(str(entry.get("types", "")).split()))
    action = f"moving the memories of user {user_id!r} into the shared collection"
    layout.put_entry(user_id, "to-shared", shared.name, types)
    places = {t: layout.place(shared, user_id, t) for t in types}
    for memory_type, collection in dedicated.items():
        _copy(collection, places[memory_type], action, keep_existing=False)  # the user's own rows win
    for collection in dedicated.values():
        layout.delete(collection.name)
    layout.put_entry(user_id, "shared", shared.name, types)
    layout.announce_reset(user_id)
    return places


def move_to_dedicated(layout: ChromaCollections, user_id: str, places: Mapping[str, SharedPlace]) -> dict[str, Any]:
    """Move a user's shared rows into collections of their own (one per type); returns those."""
    types = sorted(places)
    shared = next(iter(places.values())).shared
    model, dimension = model_of(shared.metadata)
    action = f"moving the memories of user {user_id!r} into collections of their own"
    layout.put_entry(user_id, "to-dedicated", shared.name, types)
    collections: dict[str, Any] = {}
    for memory_type, place in places.items():
        name = collection_name(user_id, memory_type)
        collections[memory_type] = layout.get(name) or layout.create(
            name, {**layout.user_metadata(user_id, dimension, memory_type), "embed_model": model})
        _copy(place, collections[memory_type], action, keep_existing=True)  # a restarted move: dedicated wins
    for place in places.values():
        with chroma_errors(action):
            place.delete()
    layout.put_entry(user_id, "dedicated", "", types)
    layout.announce_reset(user_id)
    return collections


def copy_embedded(
    source: Any,
    target: Any,
    embed_documents: Callable[[Sequence[str]], np.ndarray],
    batch_size: int,
    progress: Callable[[int], None] | None,
    action: str,
) -> int:
    """Copy every row of ``source`` into ``target`` with its document embedded anew; returns how many."""
    copied = 0
    for rows in pages(source, ["documents", "metadatas"], action, size=batch_size):
        embeddings = np.asarray(embed_documents(rows["documents"]), dtype=np.float32)
        if embeddings.ndim != 2 or embeddings.shape[0] != len(rows["ids"]):  # the embedder's bug, refused here
            raise StoreError(f"{action} failed: {len(rows['ids'])} documents gave embeddings of shape "
                             f"{embeddings.shape}")
        with chroma_errors(action, sends_vectors=True):
            target.upsert(ids=rows["ids"], embeddings=embeddings, documents=rows["documents"],
                          metadatas=rows["metadatas"])
        copied += len(rows["ids"])
        if progress is not None:
            progress(len(rows["ids"]))
    return copied


def rebuild_shared(
    layout: ChromaCollections,
    user_id: str,
    places: Mapping[str, SharedPlace],
    embed_documents: Callable[[Sequence[str]], np.ndarray],
    dimension: int,
    *,
    batch_size: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Re-embed a shared user's memories into the shared collection of ``layout.model_name``; returns how many."""
    action = f"reindexing user {user_id!r}"
    old = next(iter(places.values())).shared
    target = layout.shared_for(layout.model_name, dimension, user_id)
    moving = target.name != old.name
    new_places = {t: layout.place(target, user_id, t) for t in places}
    names = [place.name for place in new_places.values()]
    if moving:  # what an abandoned reindex left of this user in the new collection
        with chroma_errors(action):
            target.delete(where={PLACE_KEY: {"$in": names}} if len(names) > 1 else {PLACE_KEY: names[0]})
    copied = 0
    try:
        for memory_type, place in places.items():
            # a shared user is small (below VECMEM_DEDICATED_AT): their rows are read whole, so rewriting
            # them in place (same model) cannot disturb the paging
            rows = place.get(include=["documents", "metadatas"])
            whole = _Rows(rows)
            copied += copy_embedded(whole, new_places[memory_type], embed_documents, batch_size, progress, action)
    except BaseException:
        if moving:
            with chroma_errors(action):
                target.delete(where={PLACE_KEY: {"$in": names}} if len(names) > 1 else {PLACE_KEY: names[0]})
        raise
    layout.put_entry(user_id, "shared", target.name, sorted(places))
    if moving:
        for place in places.values():
            with chroma_errors(action):
                place.delete()
    layout.refresh(user_id)
    layout.announce_reset(user_id)
    return copied


class _Rows:
    """Rows already read, paged as ``pages`` pages a collection (``get`` with limit and offset)."""

    def __init__(self, rows: Mapping[str, Any]) -> None:
        self._rows = rows

    def get(self, where: Any = None, limit: int | None = None, offset: int | None = None,
            include: Sequence[str] = ()) -> dict[str, Any]:
        start = offset or 0
        end = len(self._rows["ids"]) if limit is None else start + limit
        return {field: list(self._rows[field][start:end]) for field in ("ids", *include)}


def rebuild_dedicated(
    layout: ChromaCollections,
    user_id: str,
    current: Mapping[str, Any],
    embed_documents: Callable[[Sequence[str]], np.ndarray],
    dimension: int,
    *,
    batch_size: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Re-embed every memory of a user of their own collections into fresh ones, swapping each in.

    An old collection stays untouched until its new one is complete; if the process dies after the old one is
    dropped, the next open finds the complete rebuild (marked ``vecmem_rebuild_complete``) and renames it into
    place (``ChromaCollections._finish_interrupted_rebuild``).
    """
    action = f"reindexing user {user_id!r}"
    copied = 0
    for memory_type, old in current.items():
        name = collection_name(user_id, memory_type)
        staging_name = name + REBUILD_SUFFIX
        if layout.get(staging_name) is not None:
            layout.delete(staging_name)  # a rebuild that died before it was complete
        staging = layout.create(
            staging_name, layout.user_metadata(user_id, dimension, memory_type, vecmem_rebuild_complete=False)
        )
        try:
            copied += copy_embedded(old, staging, embed_documents, batch_size, progress, action)
        except BaseException:
            layout.delete(staging_name)  # the old collection was never touched
            raise
        with chroma_errors(action):
            staging.modify(metadata=layout.user_metadata(user_id, dimension, memory_type,
                                                       vecmem_rebuild_complete=True))
            layout.client.delete_collection(name)
            staging.modify(name=name)
            renamed = layout.client.get_collection(name, embedding_function=None)
            renamed.modify(metadata=layout.user_metadata(user_id, dimension, memory_type))
    layout.refresh(user_id)
    layout.announce_reset(user_id)
    return copied
