"""Writes to a Chroma store, one user's or many users' at once, in as few Chroma calls as the layout allows.

Every Chroma write costs tens of milliseconds however few rows it carries (embedded chromadb commits its log each
time), so what an import of many small users costs is the number of calls, not of rows. A batch of 256 memories of
256 different users took some 1,300 calls one user at a time (the registry row, the model record, an existence
check, the upsert, a count, each per user); here it takes one registry read and one write for the new users, and
one upsert per shared collection the batch touches (8 at most), whatever the number of users. A user of their own
collections is written one type collection at a time as before.

Writes are announced on the change feed together (one ``begin`` transaction, one ``end``), and each user's
size is counted forward afterwards, which moves a user past ``dedicated_at`` into their own collections.

The collections a write touches are written at once, each on a thread of its own: a Chroma server spends most
of a write waiting for its log to commit, and writes of different collections wait side by side, where writes of
one collection queue (and, sent at the same moment, slow each other down). The ``end`` is announced only once
every collection's write has returned or failed, so no row lands after its memory was announced settled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vecmem.models import MemoryRecord
from vecmem.storage.base import UserWrite, announced_many, check_write
from vecmem.storage.chroma.client import chroma_errors
from vecmem.storage.chroma.layout import ChromaCollections
from vecmem.storage.chroma.rows import to_metadata
from vecmem.storage.chroma.search import SearchThreads
from vecmem.storage.chroma.shared import PLACE_KEY, SharedPlace
from vecmem.storage.state.changes import ChangeFeed

__all__ = ["stored_ids", "write_many"]


class _Rows:
    """Rows bound for one Chroma collection (ids as the collection keys them), and rows to delete from it."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self.ids: list[str] = []
        self.vectors: list[np.ndarray] = []
        self.documents: list[str] = []
        self.metadatas: list[dict[str, Any]] = []
        self.stale: list[str] = []  # row ids of memories that moved to another type

    def add(self, row_id: str, vector: np.ndarray, record: MemoryRecord, metadata: dict[str, Any]) -> None:
        self.ids.append(row_id)
        self.vectors.append(vector)
        self.documents.append(record.content)
        self.metadatas.append(metadata)

    def send(self) -> None:
        if self.ids:
            with chroma_errors("writing memories", sends_vectors=True):
                self.collection.upsert(ids=self.ids, embeddings=np.stack(self.vectors), documents=self.documents,
                                       metadatas=self.metadatas)

    def remove_stale(self) -> None:
        if self.stale:
            with chroma_errors("moving memories between types"):
                self.collection.delete(ids=self.stale)


def write_many(layout: ChromaCollections, changes: ChangeFeed | None, writes: Sequence[UserWrite], *,
               new: bool, threads: SearchThreads | None = None) -> None:
    """Write every user's memories whole, each into their type's collection or place; unless ``new`` (the ids
    are known not to be stored), a memory whose type changed leaves its old type's place. ``threads``: where
    several collections' writes run at once (one after the other without)."""
    merged = _merged(writes)
    if not merged:
        return
    dimension = int(next(iter(merged.values()))[1].shape[1])
    with layout.writing:
        collections = layout.typed_many({user: {r.type for r in records} for user, (records, *_) in merged.items()},
                                        dimension)
        targets: dict[int, _Rows] = {}  # id(Chroma collection) -> its rows

        def rows_for(collection: Any) -> _Rows:
            return targets.setdefault(id(collection), _Rows(collection))

        for user, (records, vectors, tokens) in merged.items():
            places = collections[user]
            for record, vector, words in zip(records, vectors, tokens, strict=True):
                metadata = {**to_metadata(record), "keywords": " ".join(words)}
                place = places[record.type]
                if isinstance(place, SharedPlace):
                    rows_for(place.shared).add(place.row_ids([record.id])[0], vector, record,
                                               {**metadata, PLACE_KEY: place.name})
                else:
                    rows_for(place).add(record.id, vector, record, metadata)
                if not new:
                    for other_type, other in places.items():
                        if other_type != record.type:
                            stale = other.row_ids([record.id])[0] if isinstance(other, SharedPlace) else record.id
                            rows_for(other.shared if isinstance(other, SharedPlace) else other).stale.append(stale)
        with announced_many(changes, {user: [r.id for r in records] for user, (records, *_) in merged.items()}):
            _send_all(list(targets.values()), threads, changes)
            # only then the old copies of memories whose type changed: a kill in between leaves a memory in
            # two places (the recovery on open keeps one), never in none
            for rows in targets.values():
                rows.remove_stale()
        for user, (records, *_) in merged.items():
            layout.after_write(user, len(records))


def _send_all(targets: list[_Rows], threads: SearchThreads | None, changes: ChangeFeed | None) -> None:
    """Every collection's rows, each as its sole writer among processes (``ChangeFeed.sole_writer``), at once
    on ``threads`` when there are several; returns once all have returned, then raises the first failure."""

    def send(rows: _Rows) -> None:
        with contextlib.nullcontext() if changes is None else changes.sole_writer(str(rows.collection.name)):
            rows.send()

    def failure_of(rows: _Rows) -> Exception | None:  # returned, not raised: every write is waited for
        try:
            send(rows)
        except Exception as exc:  # noqa: BLE001  # raised below once every collection's write returned
            return exc
        return None

    if threads is None or len(targets) <= 1:
        for rows in targets:
            send(rows)
        return
    for failure in threads.map(failure_of, targets):
        if failure is not None:
            raise failure


def _merged(writes: Sequence[UserWrite]) -> dict[str, tuple[list[MemoryRecord], np.ndarray, list[Sequence[str]]]]:
    """{user: (records, vectors, keyword tokens)}, each write checked, a user's several writes joined and a
    repeated id written once (the last, as writes one after another would leave it)."""
    merged: dict[str, dict[str, tuple[MemoryRecord, np.ndarray, Sequence[str]]]] = {}
    for write in writes:
        if not write.records:
            continue
        vectors = check_write(write.user_id, write.records, write.embeddings, write.keywords)
        latest = merged.setdefault(write.user_id, {})
        for record, vector, words in zip(write.records, vectors, write.keywords, strict=True):
            latest.pop(record.id, None)
            latest[record.id] = (record, vector, words)
    return {user: ([r for r, _, _ in rows.values()], np.stack([v for _, v, _ in rows.values()]),
                   [w for _, _, w in rows.values()]) for user, rows in merged.items()}


def stored_ids(layout: ChromaCollections, ids_by_user: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
    """Which of these ids each user has stored: one read per shared collection for its users together, one
    per type collection of a user of their own; a user the store has never seen costs nothing."""
    found: dict[str, set[str]] = {}
    asked: dict[int, tuple[Any, dict[str, tuple[str, str]]]] = {}  # id(collection) -> (it, row id -> (user, id))
    collections = layout.typed_many({user: () for user in ids_by_user}, 0, verify=False)
    for user, ids in ids_by_user.items():
        for place in collections[user].values():
            target = place.shared if isinstance(place, SharedPlace) else place
            row_ids = place.row_ids(ids) if isinstance(place, SharedPlace) else list(ids)
            asked.setdefault(id(target), (target, {}))[1].update(
                (row_id, (user, memory_id)) for row_id, memory_id in zip(row_ids, ids, strict=True))
    for collection, wanted in asked.values():
        keys = list(wanted)
        for start in range(0, len(keys), 5_000):
            with chroma_errors("reading memories"):
                rows = collection.get(ids=keys[start:start + 5_000], include=[])
            for row_id in rows["ids"]:
                if row_id in wanted:
                    user, memory_id = wanted[row_id]
                    found.setdefault(user, set()).add(memory_id)
    return found
