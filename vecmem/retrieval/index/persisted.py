"""Replicas saved beside the store, so a new process serves a big user's first search without reading the store.

Building a replica reads every row of the user from Chroma and indexes it with BM25: tens of seconds for
100,000 memories, paid by every new process (each ``vecmem search`` from the shell). So a replica of
``PERSIST_AT_LEAST`` memories or more is saved in ``VECMEM_HOME/replicas`` (folder 0700, files 0600), one file
per user, and a new process loads it instead (``replica.py`` decides when to save and how a load is brought
up to date: the change feed says what changed since, and only that is re-read). Loading a file takes a small
part of a build, saving it seconds of a background thread (the figures, and the file's size: docs/benchmarks.md,
*Why retrieval is built as it is*).

What a file is trusted for. It records the change feed's row its contents reflect (``seen``) and what it was
saved from: the format, the embedding model, the store's location and the change feed file itself. A file
that does not match the store being opened, or that is damaged or truncated (every part of an ``.npz`` is
checked by its CRC, and every offset, code and length here before use), is deleted and the replica rebuilt:
a warning for damage, silently for a mismatch. Without a change feed (a Chroma server: other clients write
without telling this one) nothing could say whether a file is current, so nothing is saved or loaded.

The format (index/replica_file.py): one ``.npz`` of plain arrays and a JSON header, read with ``allow_pickle=False``,
so loading a file runs no code from it. A file also keeps the memories' vectors when they are at hand (held by
the process, or read from the store as the file is written), and the ids of the Chroma collections the user's
memories were in (``residence``).

A search without the store (``SavedReplica``). A one-off command would spend most of its second importing and
opening Chroma; when the user's file holds every vector, its identity matches, the feed has no row for the user
after the file's and no write of the user is open, and the collections it names still exist in the store's own
``chroma.sqlite3`` (a store deleted or made anew under the same folder has others), the file is what the store
holds, and a search is answered from it alone. Anything the file cannot answer raises ``NotInSavedReplica``;
the command then opens the store and asks again (interfaces/cli/command.py).

Saving writes a temporary file in the same folder and renames it over the old one (``os.replace``), so a
reader sees the old file or the new one, never half of one. Without an fsync a power cut can leave a file
that fails its CRC; it is then rebuilt like any damaged one.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vecmem.errors import StoreError
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.retrieval.index.held import HOLD_AT_MOST_BYTES
from vecmem.retrieval.index.keyword import KeywordIndex
from vecmem.retrieval.index.replica_file import Capture, Loaded, Mismatch, checked_header, decode, encode
from vecmem.storage.base import IndexedRow, MemoryStore, RawRow, UserWrite
from vecmem.storage.chroma.formats import collections_present
from vecmem.storage.files import private_dir
from vecmem.storage.state.changes import ChangeFeed, Changes

__all__ = ["PERSIST_AT_LEAST", "Capture", "Loaded", "NotInSavedReplica", "ReplicaFiles", "SavedReplica",
           "replica_path"]

log = logging.getLogger(__name__)

PERSIST_AT_LEAST = 1_000  # memories; below this a build is quick and a file would cost more than it saves
VECTORS_SAVED_AT_MOST = 100_000  # memories: a file keeps no more vectors than a search scans exactly (retriever.py)
SPOT_CHECKS = 8  # memories of a loaded replica compared with the store's, as a check it is this store's


class ReplicaFiles:
    """The saved replicas of one store: where they live, and saving (now or in a thread) and loading them."""

    def __init__(self, store: MemoryStore, home: Path) -> None:
        self.store = store
        self.folder = home / "replicas"
        self._lock = threading.Lock()
        self._epoch = 0  # raised by discard_all: a save begun before it must not land after it
        self._savers: dict[str, threading.Thread] = {}
        self._reader: ChangeFeed | None = None

    @property
    def enabled(self) -> bool:
        return self.store.changes is not None

    def path(self, user: str) -> Path:
        return replica_path(self.folder, user)

    def _identity(self) -> dict[str, Any]:
        feed = self.store.changes
        state = feed.identity() if feed is not None else None  # a feed deleted and made anew differs
        return {"model": self.store.model_name, "location": self.store.location, "feed": state}

    def every_change(self, user: str, seen: int) -> Changes:
        """Every writer's changes after row ``seen``, this process's own included: a file saved earlier does not
        hold what this process wrote since, and the store's feed leaves a bank's own writes out (it applied
        them itself). Read through a second reader of the feed, whose own writer never writes."""
        feed = self.store.changes
        assert feed is not None, "files are used only with a change feed"
        with self._lock:
            if self._reader is None:
                self._reader = feed.reader()
            reader = self._reader
        return reader.since(user, seen)

    def others_only_since(self, user: str, since: int) -> int | None:
        """The feed's last row of the user, when every row after ``since`` is another writer's (so this bank has
        no write there its replica might not hold yet); None when one is this bank's, or a reset."""
        feed = self.store.changes
        assert feed is not None, "files are used only with a change feed"
        theirs = feed.since(user, since)  # read first: a row appended in between makes the counts differ
        every = self.every_change(user, since)
        seen = len(theirs.begun) + len(theirs.ended)  # others' rows (this bank's own are left out of it)
        return theirs.seen if not every.rebuild and seen == len(every.begun) + len(every.ended) else None

    # ------------------------------------------------------------------------------------------ saving

    def save(self, user: str, capture: Capture, vectors: VectorSource | None = None, *,
             background: bool = False) -> None:
        """Write the capture as the user's file, here or in a thread (one per user at a time; a close waits).
        ``vectors``: called as the file is written, the memories' vectors by id (None: the store's are read).

        Vectors are taken after the capture, never before: one newer than the capture's feed row belongs to a
        write after that row, which the next load re-reads, vector included."""
        with self._lock:
            epoch = self._epoch
            if background:
                running = self._savers.get(user)
                if running is None or not running.is_alive():  # else: the next change or the close saves
                    saver = threading.Thread(target=self._write, args=(user, capture, epoch, vectors),
                                             name="vecmem-save-replica")  # not a daemon: exiting waits for it
                    self._savers[user] = saver
                    saver.start()
                return
        self._write(user, capture, epoch, vectors)

    def _vectors(self, user: str, source: VectorSource | None) -> dict[str, np.ndarray] | None:
        """The user's vectors for the file, or None when they cannot be had (the file is useful without them)."""
        try:
            if source is not None and (held := source()) is not None:
                return dict(held)
            return {memory_id: vector for ids, matrix in self.store.scan_vectors(user)
                    for memory_id, vector in zip(ids, matrix, strict=True)}
        except StoreError as exc:
            log.debug("the replica of user %r is saved without its vectors: %s", user, exc)
            return None

    def _vectors_fit(self, memories: int) -> bool:
        """Whether a file of this many memories keeps their vectors: no more than a search scans exactly, and no
        more bytes than a process holds for one user (held.py)."""
        stored = self.store.stored_model()
        return stored is not None and 0 < memories <= VECTORS_SAVED_AT_MOST and (
            memories * stored[1] * 4 <= HOLD_AT_MOST_BYTES)

    def _write(self, user: str, capture: Capture, epoch: int, vectors: VectorSource | None = None) -> None:
        started = time.perf_counter()
        temporary: str | None = None
        try:
            residence = self.store.residence(user)  # as of now: a collection made since the capture came with a
            # write after its feed row, which keeps a search from the file alone anyway (SavedReplica.trusted)
            arrays = encode(capture, {**self._identity(), "user": user, "residence": residence},
                            self._vectors(user, vectors) if self._vectors_fit(len(capture.records)) else None)
            private_dir(self.folder)
            self._sweep()
            descriptor, temporary = tempfile.mkstemp(dir=self.folder, prefix=".saving-", suffix=".tmp")  # 0600
            with os.fdopen(descriptor, "wb") as out:
                np.savez(out, allow_pickle=False, **arrays)
            with self._lock:  # under the lock discard_all takes: a discarded epoch's save never lands
                if epoch == self._epoch:
                    os.replace(temporary, self.path(user))
                    temporary = None
            log.debug("saved the replica of user %r in %.2f s", user, time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001  # a failed save costs the next process a rebuild, nothing more
            log.warning("could not save the replica of user %r in %s: %s", user, self.folder, exc)
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    def _sweep(self) -> None:
        """Delete what saves of processes killed half-way left (an hour old: no save takes that long)."""
        with contextlib.suppress(OSError):
            for left in self.folder.glob(".saving-*.tmp"):
                if time.time() - left.stat().st_mtime > 3600:
                    left.unlink(missing_ok=True)

    def wait(self) -> None:
        """Let the saves in progress finish."""
        with self._lock:
            savers = list(self._savers.values())
            self._savers.clear()
        for saver in savers:
            saver.join()

    def discard(self, user: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path(user))

    def discard_all(self) -> None:
        """Delete every file (the store was mended or re-embedded under them); saves in progress never land."""
        with self._lock:
            self._epoch += 1
            with contextlib.suppress(OSError):
                for path in self.folder.glob("*.npz"):
                    path.unlink(missing_ok=True)

    def close(self) -> None:
        self.wait()
        with self._lock:
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    # ------------------------------------------------------------------------------------------ loading

    def matches_store(self, user: str, index: KeywordIndex, records: Mapping[str, MemoryRecord],
                      unsettled: Iterable[str]) -> bool:
        """Whether a loaded replica, brought up to date, holds what the store holds: as many memories, and a few
        of them (spread over the slots) equal to the store's records. The file's identity matched already; this
        catches a store emptied or replaced under the same name, or one whose memories lived in another
        process's memory."""
        if len(index) != self.store.count(user):
            return False
        snapshot = index.snapshot(merge=False)
        alive = np.flatnonzero(snapshot.alive[: snapshot.count])
        spread = alive[np.linspace(0, alive.size - 1, SPOT_CHECKS).astype(int)] if alive.size else alive
        picked = sorted({snapshot.id_array[slot] for slot in spread.tolist()} - set(unsettled))
        stored = self.store.get(user, picked)
        return all(memory_id in records and stored.get(memory_id) == records[memory_id] for memory_id in picked)

    def load(self, user: str) -> Loaded | None:
        """The user's saved replica as it was saved, or None: no file, or one deleted as unusable."""
        if isinstance(self.store, SavedReplica) and self.store.user == user:
            return self.store.loaded  # read and trusted already
        path = self.path(user)
        if not self.enabled or not path.exists():
            return None
        started = time.perf_counter()
        collecting = gc.isenabled()
        gc.disable()  # as a build does: the 100,000s of strings and ints made here would set off full collections
        try:
            with np.load(path, allow_pickle=False) as parts:
                loaded = decode(parts, {**self._identity(), "user": user})
        except Mismatch as exc:
            log.info("the saved replica of user %r is not this store's (%s): rebuilding it", user, exc)
        except Exception as exc:  # noqa: BLE001  # whatever a damaged file breaks, the store still has every memory
            log.warning("the saved replica of user %r (%s) is unreadable, rebuilding it from the store: %s",
                        user, path, exc)
        else:
            log.debug("loaded the replica of user %r in %.2f s", user, time.perf_counter() - started)
            return loaded
        finally:
            if collecting:
                gc.enable()
        self.discard(user)
        return None


VectorSource = Callable[[], Mapping[str, np.ndarray] | None]


def replica_path(folder: Path, user: str) -> Path:
    """The user's file: named by a hash (user ids may hold any printable character), the id inside."""
    return folder / f"{hashlib.sha256(user.encode('utf-8')).hexdigest()[:32]}.npz"


class NotInSavedReplica(StoreError):
    """What a search asked of ``SavedReplica`` is not in the file: the store must be opened for it."""


class SavedReplica:
    """An embedded store as one user's saved replica tells it, for a search that need not open Chroma (module
    docstring). Its count and records are the file's; everything else raises ``NotInSavedReplica``."""

    def __init__(self, model_name: str, location: str, changes: ChangeFeed, user: str, loaded: Loaded) -> None:
        self.model_name = model_name
        self.location = location
        self.changes: ChangeFeed | None = changes
        self.user = user
        self.loaded = loaded

    @classmethod
    def trusted(cls, home: Path, chroma_folder: Path, model_name: str, changes: ChangeFeed,
                user: str) -> SavedReplica | None:
        """The user's saved replica as a store, when it holds all the store holds of the user; else None."""
        path = replica_path(home / "replicas", user)
        if not path.exists():
            return None
        location = str(chroma_folder)
        identity = {"model": model_name, "location": location, "feed": changes.identity(), "user": user}
        try:
            with np.load(path, allow_pickle=False) as parts:
                # the header first (a member is read only when asked for): a file that cannot answer alone is not
                # decoded here, only by the store's own load after (a big user's takes a fraction of a second)
                if not cls._answers_alone(parts, identity, chroma_folder, changes):
                    return None
                loaded = decode(parts, identity)
        except Exception as exc:  # noqa: BLE001  # mismatched, damaged: the store is opened, and it deals with the file
            log.debug("the saved replica of user %r does not answer alone: %s", user, exc)
            return None
        if loaded.vectors is None or not loaded.vectors.complete or loaded.unsettled:
            return None
        return cls(model_name, location, changes, user, loaded)

    @staticmethod
    def _answers_alone(parts: Any, identity: Mapping[str, Any], chroma_folder: Path, changes: ChangeFeed) -> bool:
        """What the header says: this store's file, with every vector, no write open in it, nothing on the feed
        after it, and the collections it names still in the store's own files."""
        header = checked_header(parts, identity)
        seen, residence = header.get("seen"), header.get("residence")
        if not header.get("vectors_complete") or header.get("unsettled") or not isinstance(seen, int):
            return False
        after = changes.since(str(identity["user"]), seen)
        return (not after.rebuild and after.seen == seen and not after.begun and changes.head() >= seen
                and isinstance(residence, list) and bool(residence)
                and collections_present(chroma_folder / "chroma.sqlite3", [str(i) for i in residence]))

    def _refuse(self, what: str) -> NotInSavedReplica:
        return NotInSavedReplica(f"{what} needs the store, not only user {self.user!r}'s saved replica")

    def _records_of(self, user_id: str) -> Mapping[str, MemoryRecord]:
        if user_id != self.user:
            raise self._refuse("another user")
        return self.loaded.records

    def stored_model(self) -> tuple[str, int] | None:
        vectors = self.loaded.vectors
        return None if vectors is None else (self.model_name, int(vectors.matrix.shape[1]))

    def check_model(self) -> None:
        """Nothing to check: the file matched this model (``trusted``)."""

    def users(self) -> list[str]:
        raise self._refuse("listing users")

    def count(self, user_id: str) -> int:
        return len(self._records_of(user_id))

    def refresh(self, user_id: str) -> None:
        """Nothing cached about the layout."""

    def close(self) -> None:
        """The change feed is the caller's to close."""

    def residence(self, user_id: str) -> list[str]:
        return [str(i) for i in self.loaded.header.get("residence", [])] if user_id == self.user else []

    def get(self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str] | None = None
            ) -> dict[str, MemoryRecord]:
        records = self._records_of(user_id)
        return {memory_id: records[memory_id] for memory_id in ids if memory_id in records}

    def get_indexed(self, user_id: str, ids: Sequence[str]) -> dict[str, IndexedRow]:
        raise self._refuse("reading memories with their vectors")

    def vectors(self, user_id: str, ids: Sequence[str], *, type_of: Mapping[str, str]) -> dict[str, np.ndarray]:
        raise self._refuse("reading vectors")

    def scan(self, user_id: str, memory_filter: MemoryFilter) -> Iterator[MemoryRecord]:
        raise self._refuse("scanning memories")

    def scan_keywords(self, user_id: str) -> Iterator[tuple[MemoryRecord, list[str] | None]]:
        raise self._refuse("scanning memories")

    def scan_vectors(self, user_id: str, page: int = 5_000) -> Iterator[tuple[list[str], np.ndarray]]:
        raise self._refuse("scanning vectors")

    def raw_rows(self, user_id: str) -> Iterator[RawRow]:
        raise self._refuse("reading raw rows")

    def collection_models(self, user_id: str) -> dict[str, tuple[str, int]]:
        raise self._refuse("reading collection models")

    def replaced_by(self, user_id: str, memory_id: str) -> list[MemoryRecord]:
        raise self._refuse("reading replacements")

    def nearest(self, user_id: str, embedding: np.ndarray, n_results: int, *, types: Iterable[str] | None = None,
                among: Mapping[str, Sequence[str]] | None = None, sizes: Mapping[str, int] | None = None,
                ) -> tuple[list[str], list[float]]:
        raise self._refuse("an approximate nearest-neighbour search")

    def upsert(self, user_id: str, records: Sequence[MemoryRecord], embeddings: np.ndarray,
               keywords: Sequence[Sequence[str]], *, new: bool = False) -> None:
        raise self._refuse("writing")

    def upsert_many(self, writes: Sequence[UserWrite], *, new: bool = False) -> None:
        raise self._refuse("writing")

    def stored_ids(self, ids_by_user: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
        raise self._refuse("checking stored ids")

    def update_metadata(self, user_id: str, records: Sequence[MemoryRecord]) -> None:
        raise self._refuse("writing")

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        raise self._refuse("deleting")

    def rebuild(self, user_id: str, embed_documents: Callable[[Sequence[str]], np.ndarray], dimension: int, *,
                batch_size: int = 256, progress: Callable[[int], None] | None = None) -> int:
        raise self._refuse("re-embedding")

    def finish_rebuild(self, dimension: int) -> None:
        raise self._refuse("re-embedding")
