"""A collection whose HNSW segment Chroma can no longer load, rebuilt from the rows it still holds.

A SIGKILL while Chroma's embedded backend writes an HNSW segment can tear it (chroma-core/chroma#7678, open
upstream; #7238 and #5925 show the same shapes). Chroma then fails every call that loads the segment with an
``InternalError`` whose message names the HNSW index or segment ("Error loading hnsw index", "Failed to apply
logs to the hnsw segment writer") or, when only the vectors' file is cut short, a lookup in it ("Error finding
id", "Error getting embedding"); ``torn`` recognises these. The collection's other data (ids, documents,
metadata) lives in ``chroma.sqlite3`` and survives, but its vectors live only in the torn segment: Chroma purges
its write-ahead log once the segment has them. vecmem's document is the memory's text, the very text its
vector was embedded from, so the vectors are made again with the store's model.

``rebuild`` (embedded stores only: a server's files are not ours) reads the rows through Chroma, or, when
Chroma cannot serve even those, from ``chroma.sqlite3`` directly (read-only), and builds a copy beside the
torn collection as a reindex does (``-reindex``, marked complete once full), drops the torn one and renames the
copy into place. A kill before the mark leaves the torn collection as it was (the next rebuild starts over); a
kill after the drop leaves the complete copy, which the next open renames into place (chroma/layout.py,
chroma/registry.py). One log line says what was rebuilt.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vecmem.errors import StoreError
from vecmem.storage.chroma.client import chroma_errors
from vecmem.storage.chroma.shared import REBUILD_SUFFIX, SHARED_PREFIX, pages

__all__ = ["probe", "rebuild", "torn"]

log = logging.getLogger("vecmem")

# what chromadb 1.5's messages say of a segment it cannot load or read (found by tearing the files of one)
_TORN_SIGNS = ("hnsw", "error finding id", "error getting embedding", "segment reader", "segment writer")
_BATCH = 256  # rows embedded and written at a time


def torn(exc: BaseException | None) -> bool:
    """Whether an exception (or one it was raised from) is Chroma failing to load or read an HNSW segment."""
    seen = 0
    while exc is not None and seen < 5:
        if any(sign in str(exc).lower() for sign in _TORN_SIGNS):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def probe(collection: Any) -> bool:
    """Whether the collection's segment loads and serves every vector (reads them all: called after a failure,
    never on the way of a search)."""
    try:
        for rows in pages(collection, ["embeddings"], "checking a collection"):
            if rows.get("embeddings") is None or len(rows["embeddings"]) != len(rows["ids"]):
                return False
    except StoreError as exc:
        if torn(exc):
            return False
        raise
    return True


def rebuild(layout: Any, collection: Any, folder: Path, embed_documents: Callable[[Sequence[str]], np.ndarray],
            hnsw: dict[str, Any]) -> int:
    """Rebuild a torn collection in place (module docstring); returns how many rows it holds. ``layout``: the
    store's ``ChromaRegistry``; ``folder``: the embedded store's; ``hnsw``: the collection's configuration."""
    name, metadata = collection.name, dict(collection.metadata or {})
    rows = list(_rows(collection, folder))
    staging_name = name + REBUILD_SUFFIX
    if layout.get(staging_name) is not None:
        layout.delete(staging_name)  # a rebuild that died before it was complete
    staging = layout.create(staging_name, {**metadata, "vecmem_rebuild_complete": False}, hnsw)
    action = f"rebuilding collection {name}"
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        vectors = np.asarray(embed_documents([document for _, document, _ in batch]), dtype=np.float32)
        with chroma_errors(action, sends_vectors=True):
            staging.upsert(ids=[row_id for row_id, _, _ in batch], embeddings=vectors,
                           documents=[document for _, document, _ in batch],
                           metadatas=[row_metadata for _, _, row_metadata in batch])
    with chroma_errors(action):
        staging.modify(metadata={**metadata, "vecmem_rebuild_complete": True})
        layout.client.delete_collection(name)
        staging.modify(name=name)
        layout.client.get_collection(name, embedding_function=None).modify(metadata=metadata)
    log.warning("vecmem: rebuilt collection %s (%d rows) from its stored rows, with fresh vectors: Chroma could "
                "not load its HNSW segment (torn by a kill: chroma-core/chroma#7678)", name, len(rows))
    return len(rows)


def is_shared(name: str) -> bool:
    return name.startswith(SHARED_PREFIX)


def _rows(collection: Any, folder: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(row id, document, metadata) of every row: through Chroma, or from its SQLite file when Chroma fails."""
    try:
        found = [(row_id, document, dict(row_metadata or {}))
                 for rows in pages(collection, ["documents", "metadatas"], "reading a torn collection")
                 for row_id, document, row_metadata in zip(rows["ids"], rows["documents"], rows["metadatas"],
                                                           strict=True)]
    except StoreError:
        found = _sqlite_rows(folder / "chroma.sqlite3", str(collection.id))
    yield from found


def _sqlite_rows(path: Path, collection_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The rows of a collection's metadata segment, read from Chroma's SQLite file (read-only): each row's id
    (``embedding_id``), its document (the key ``chroma:document``) and its other metadata."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
            found: dict[int, tuple[str, str, dict[str, Any]]] = {}
            for key, row_id in db.execute(
                "SELECT e.id, e.embedding_id FROM embeddings e JOIN segments s ON e.segment_id = s.id "
                "WHERE s.collection = ? AND s.scope = 'METADATA'", (collection_id,)
            ):
                found[key] = (row_id, "", {})
            for key, name, text, integer, number, flag in db.execute(
                "SELECT m.id, m.key, m.string_value, m.int_value, m.float_value, m.bool_value FROM "
                "embedding_metadata m JOIN embeddings e ON m.id = e.id JOIN segments s ON e.segment_id = s.id "
                "WHERE s.collection = ? AND s.scope = 'METADATA'", (collection_id,)
            ):
                row_id, _, row_metadata = found[key]
                if name == "chroma:document":
                    found[key] = (row_id, text or "", row_metadata)
                elif not name.startswith("chroma:"):
                    row_metadata[name] = (text if text is not None else integer if integer is not None
                                          else number if number is not None else bool(flag))
            return list(found.values())
    except sqlite3.Error as exc:
        raise StoreError(f"reading the rows of a torn collection from {path} failed: {exc}") from exc
