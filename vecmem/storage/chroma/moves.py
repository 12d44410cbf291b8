"""Moving a user's memories between the two layouts, and reindexing each; every step restartable.

Each move first records where it is going in the user's registry entry (``to-shared``, ``to-dedicated``),
then copies every row with its vector, and only then deletes the source and records the end state. A process
that dies midway leaves the entry saying so, and the next open of the user (``ChromaCollections.typed``)
runs the move again: copying is idempotent, and a row already in the user's own collections is never
overwritten by the shared copy (the dedicated one wins), so nothing is lost or doubled.

A reindex to the same model rewrites a user in place (shared) or swaps in fresh collections (dedicated):
vectors of one model mix safely. A reindex to another model works in two steps, so that the store answers
with the old model, whole, until every memory has a vector of the new one:

* staging (``stage_user``): each user's rows are copied, embedded anew, into the shared collection of the
  new model (``shared_name``; the user's registry entry still points at the old one) or into ``-reindex``
  collections of the user's own. Nothing the old model reads changes. ``sync_embedded`` makes a staging
  copy equal to its source while re-embedding only rows it lacks or whose text changed, so a reindex killed
  midway, run again, embeds only what is left (and whatever was written meanwhile by the old model);
* switching (``ChromaStore.finish_rebuild``): the registry records the new model along with the one it
  replaces (``vecmem_reindex_from``), then each user is switched (``switch_shared``, ``swap_in``). A process
  killed meanwhile leaves that mark, and any process of the new model that opens a user not yet switched
  switches them first (``ChromaCollections._open``), so the store reads as the new model throughout; the next
  ``vecmem reindex`` switches the rest, drops the old shared collections and clears the mark.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vecmem.errors import StoreError
from vecmem.storage.chroma.client import chroma_errors
from vecmem.storage.chroma.shared import (
    PLACE_KEY,
    SharedPlace,
    collection_name,
    model_of,
    pages,
    user_key,
)

if TYPE_CHECKING:
    from vecmem.storage.chroma.layout import ChromaCollections

__all__ = ["REBUILD_SUFFIX", "copy_embedded", "move_to_dedicated", "move_to_shared", "rebuild_dedicated",
           "rebuild_shared", "split_legacy", "stage_user", "swap_in", "switch_shared", "sync_embedded"]

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


# ------------------------------------------------------------------------------------------ to another model

def _digest(value: Any) -> bytes:
    """A short fingerprint of a document or a metadata dict, to compare a staged row with its source."""
    text = value if isinstance(value, str) else json.dumps(value or {}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def sync_embedded(
    source: Any,
    target: Any,
    embed_documents: Callable[[Sequence[str]], np.ndarray],
    batch_size: int,
    progress: Callable[[int], None] | None,
    action: str,
) -> int:
    """Make ``target`` hold exactly the rows of ``source``, documents embedded anew, except rows ``target``
    already holds with the same document (an interrupted run embedded them): those keep their vector, their
    metadata brought up to date. Rows of ``target`` that ``source`` no longer has are deleted. ``progress``
    hears of kept rows as of embedded ones. Returns how many rows were embedded."""
    staged: dict[str, tuple[bytes, bytes]] = {}
    for rows in pages(target, ["documents", "metadatas"], action):
        for memory_id, document, metadata in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True):
            staged[memory_id] = (_digest(document or ""), _digest(metadata))
    embedded = 0
    step = max(batch_size, 1)
    for rows in pages(source, ["documents", "metadatas"], action):
        fresh: list[int] = []
        stale: list[int] = []  # kept vectors whose metadata changed
        for position, memory_id in enumerate(rows["ids"]):
            found = staged.pop(memory_id, None)
            if found is None or found[0] != _digest(rows["documents"][position] or ""):
                fresh.append(position)
            elif found[1] != _digest(rows["metadatas"][position]):
                stale.append(position)
        if stale:
            with chroma_errors(action):
                target.update(ids=[rows["ids"][p] for p in stale], metadatas=[rows["metadatas"][p] for p in stale])
        if progress is not None and len(rows["ids"]) > len(fresh):
            progress(len(rows["ids"]) - len(fresh))
        for start in range(0, len(fresh), step):
            batch = {key: [rows[key][p] for p in fresh[start:start + step]] for key in ("ids", "documents", "metadatas")}
            embedded += copy_embedded(_Rows(batch), target, embed_documents, step, progress, action)
    if staged:
        with chroma_errors(action):
            target.delete(ids=list(staged))
    return embedded


def stage_user(
    layout: ChromaCollections,
    user_id: str,
    current: Mapping[str, Any],
    embed_documents: Callable[[Sequence[str]], np.ndarray],
    dimension: int,
    *,
    batch_size: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Copy a user's memories of another model, embedded with ``layout.model_name``, beside the ones in use
    (module docstring); returns how many were embedded (rows an earlier run staged are not)."""
    action = f"reindexing user {user_id!r}"
    embedded = 0
    for memory_type, old in current.items():
        if isinstance(old, SharedPlace):
            target: Any = layout.place(layout.shared_for(layout.model_name, dimension, user_id), user_id, memory_type)
            embedded += sync_embedded(old, target, embed_documents, batch_size, progress, action)
            continue
        staging_name = collection_name(user_id, memory_type) + REBUILD_SUFFIX
        staging = layout.get(staging_name)
        if staging is not None and model_of(staging.metadata) != (layout.model_name, dimension):
            layout.delete(staging_name)  # left by a reindex to yet another model
            staging = None
        unfinished = layout.user_metadata(user_id, dimension, memory_type, vecmem_rebuild_complete=False)
        if staging is None:
            staging = layout.create(staging_name, unfinished)
        else:
            with chroma_errors(action):
                staging.modify(metadata=unfinished)  # it changes below: not to be swapped in until complete
        embedded += sync_embedded(old, staging, embed_documents, batch_size, progress, action)
        with chroma_errors(action):
            staging.modify(metadata=layout.user_metadata(user_id, dimension, memory_type,
                                                         vecmem_rebuild_complete=True))
    return embedded


def swap_in(layout: ChromaCollections, user_id: str, memory_type: str, staging: Any) -> Any:
    """Put a complete staging collection in the place of the user's collection of this type; returns it."""
    name = collection_name(user_id, memory_type)
    dimension = model_of(staging.metadata)[1]
    with chroma_errors(f"reindexing user {user_id!r}"):
        layout.client.delete_collection(name)  # a kill from here to the rename: ``_finish_interrupted_rebuild``
        staging.modify(name=name)
        renamed = layout.client.get_collection(name, embedding_function=None)
        renamed.modify(metadata=layout.user_metadata(user_id, dimension, memory_type))
    return renamed


def switch_shared(layout: ChromaCollections, user_id: str, places: Mapping[str, SharedPlace],
                  dimension: int) -> dict[str, SharedPlace]:
    """Point a shared user's entry at their staged rows in the shared collection of ``layout.model_name``, and
    delete their rows in the old one; returns their new places."""
    target = layout.shared_for(layout.model_name, dimension, user_id)
    layout.put_entry(user_id, "shared", target.name, sorted(places))
    for place in places.values():  # a kill before this leaves rows ``drop_stale_shared`` drops with the collection
        with chroma_errors(f"reindexing user {user_id!r}"):
            place.delete()
    return {memory_type: layout.place(target, user_id, memory_type) for memory_type in places}
