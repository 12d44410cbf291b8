"""A collection whose HNSW segment Chroma can no longer load, rebuilt from the rows it still holds.

A SIGKILL while Chroma's embedded backend writes an HNSW segment can tear it (chroma-core/chroma#7678, open
upstream; #7238 and #5925 show the same shapes). Chroma then fails every call that loads the segment with an
``InternalError`` whose message names the HNSW index or segment ("Error loading hnsw index", "Failed to apply
logs to the hnsw segment writer") or, when only the vectors' file is cut short, a lookup in it ("Error finding
id", "Error getting embedding"). Such a message (``may_be_torn``) is only a reason to look: what decides is the
segment's own evidence (``torn_because``), its files where their format is one vecmem knows (chroma/segments.py,
chroma/formats.py): an empty header, a record or a file cut short; and, either way, rows Chroma returns without
their vectors. Where the format is not known (another chromadb, another header version), Chroma failing when
asked for this collection's vectors alone is evidence too. The collection's other data (ids, documents, metadata) lives in ``chroma.sqlite3``
and survives, but its vectors live only in the torn segment: Chroma purges its write-ahead log once the segment
has them. vecmem's document is the memory's text, the very text its vector was embedded from, so the vectors
are made again with the store's model.

``rebuild`` (embedded stores only: a server's files are not ours) reads the rows through Chroma, or, when
Chroma cannot serve even those and its SQLite schema is the one vecmem knows, from ``chroma.sqlite3`` directly
(read-only), and builds a copy beside the torn collection as a reindex does (``-reindex``, marked complete once
full), drops the torn one and renames the copy into place. A kill before the mark leaves the torn collection as
it was (the next rebuild starts over); a kill after the drop leaves the complete copy, which the next open
renames into place (chroma/layout.py, chroma/registry.py). One log line says what was rebuilt, and why.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vecmem.errors import StoreError
from vecmem.storage.chroma.client import chroma_errors
from vecmem.storage.chroma.formats import sqlite_schema_known
from vecmem.storage.chroma.segments import known_format, torn_evidence
from vecmem.storage.chroma.shared import REBUILD_SUFFIX, SHARED_PREFIX, pages

__all__ = ["may_be_torn", "rebuild", "segment_folder", "torn_because"]

log = logging.getLogger("vecmem")

# what chromadb 1.5's messages say of a segment it cannot load or read (found by tearing the files of one): a
# reason to examine the user's segments, never the decision to rebuild one
_TORN_SIGNS = ("hnsw", "error finding id", "error getting embedding", "segment reader", "segment writer")
_BATCH = 256  # rows embedded and written at a time


def may_be_torn(exc: BaseException | None) -> bool:
    """Whether an exception (or one it was raised from) reads like Chroma failing to load or read an HNSW
    segment: worth asking ``torn_because`` of the collections the call touched."""
    seen = 0
    while exc is not None and seen < 5:
        if any(sign in str(exc).lower() for sign in _TORN_SIGNS):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def torn_because(collection: Any, folder: Path) -> str | None:
    """The evidence that the collection's HNSW segment is torn, from the segment itself (module docstring), or
    None when it shows none; raises the read's StoreError when the segment's files are sound and Chroma still
    fails (a failure of another kind). Reads every vector: called after a failure, never on the way of a search.
    ``folder``: the embedded store's."""
    segment = segment_folder(folder, str(collection.id))
    examined = segment is not None and known_format(segment)
    if segment is not None and examined:
        why = torn_evidence(segment)
        if why is not None:
            return why
    try:
        for rows in pages(collection, ["embeddings"], "checking a collection"):
            if rows.get("embeddings") is None or len(rows["embeddings"]) != len(rows["ids"]):
                return "Chroma returns its rows without their vectors"
    except StoreError as exc:
        if examined:
            raise  # its files show no tear: this failure is not one a rebuild mends
        return f"Chroma cannot read its vectors ({exc})"
    return None


def rebuild(layout: Any, collection: Any, folder: Path, embed_documents: Callable[[Sequence[str]], np.ndarray],
            hnsw: dict[str, Any], why: str = "") -> int:
    """Rebuild a torn collection in place (module docstring); returns how many rows it holds. ``layout``: the
    store's ``ChromaRegistry``; ``folder``: the embedded store's; ``hnsw``: the collection's configuration;
    ``why``: the evidence of the tear, for the log line."""
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
                "not load its HNSW segment (torn by a kill: chroma-core/chroma#7678; %s)", name, len(rows),
                why or "torn")
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
        if not sqlite_schema_known(folder / "chroma.sqlite3"):
            raise
        found = _sqlite_rows(folder / "chroma.sqlite3", str(collection.id))
    yield from found


def segment_folder(folder: Path, collection_id: str) -> Path | None:
    """The folder of the collection's HNSW segment, named in chroma.sqlite3 (read-only); None when the store's
    schema is not the one vecmem knows, or when it names none."""
    path = folder / "chroma.sqlite3"
    if not sqlite_schema_known(path):
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            found = db.execute("SELECT id FROM segments WHERE collection = ? AND scope = 'VECTOR'",
                               (collection_id,)).fetchone()
    except sqlite3.Error as exc:
        log.warning("vecmem: could not find the HNSW segment of collection %s in %s: %s", collection_id, path, exc)
        return None
    return None if found is None else folder / str(found[0])


def _sqlite_rows(path: Path, collection_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The rows of a collection's metadata segment, read from Chroma's SQLite file (read-only): each row's id
    (``embedding_id``), its document (the key ``chroma:document``) and its other metadata."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
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
