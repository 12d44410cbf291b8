"""Each user's memories as this process holds them (the replica), kept current, and read one snapshot a search.

A replica is the keyword index (with the catalogue of every memory's scope, type, state and importance), the
records themselves, and for long-running processes the vectors (held.py). It is built from the store on a
user's first search and then kept in step: this process's writes are applied as they are made; other banks'
and other processes' writes come from the change feed (``storage/state/changes.py``), and only those memories are
re-read. A store without a feed (one a caller gave the bank): records are read from it and the index is checked
against the store's count at most every ``VECMEM_INDEX_CHECK_SECONDS``.

Memory is bounded: all replicas of a process share one budget (``VECMEM_CACHE_MB``, the held vectors
included), and when a build or a load passes it the least recently searched users' replicas are dropped
(rebuilt from the store if they are searched again), so a process's memory stays flat however many users it
touches. The replica being used is never dropped, even when it alone is over the budget.

Big users' replicas are saved in this process's home (persisted.py), after a build, after enough changes and
at close; a new process loads the file and re-reads what the feed says changed since, instead of rebuilding. A
file never claims a feed row with a write the replica does not hold (``_after_edit``).

Threads: every edit and every snapshot takes the replicas' lock, so a ``Snapshot`` pairs an index and records
of the same moment. Neither changes afterwards: the index copies what a snapshot shares on its next edit
(keyword.py), and so do the records (``HeldRecords``), one copy per edit call at most, so a batch of 256
writes costs one copy, and a search costs no copy at all.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vecmem.config import Settings
from vecmem.errors import StoreError
from vecmem.models import MemoryRecord
from vecmem.retrieval.index.columns import HeldRecords
from vecmem.retrieval.index.held import HOLD_AT_MOST_BYTES, HeldVectors
from vecmem.retrieval.index.keyword import FilterView, IndexedMemory, IndexSnapshot, KeywordIndex
from vecmem.retrieval.index.persisted import PERSIST_AT_LEAST, Capture, ReplicaFiles
from vecmem.retrieval.index.second_view import SecondView
from vecmem.retrieval.query.tokenize import memory_tokens
from vecmem.storage.base import MemoryStore
from vecmem.storage.chroma.rows import from_row, to_metadata
from vecmem.storage.state.changes import settle

__all__ = ["HOLD_AT_MOST_BYTES", "PERSIST_AT_LEAST", "REREAD_AT_MOST", "HeldRecords", "Replicas", "Snapshot", "UserCopy"]

log = logging.getLogger(__name__)

REREAD_AT_MOST = 2_000  # memories changed by others past which the copy is rebuilt instead of patched
# What a replica costs, estimated for the budget: the keyword index and the records a memory, as measured with
# the bench's memories and rounded up (docs/benchmarks.md, *Why retrieval is built as it is*), and a replica's own
# arrays and BM25 model some kilobytes.
BYTES_PER_MEMORY = 3_000
BYTES_PER_REPLICA = 16_384
# When a file (persisted.py) is written again: a load re-reads what changed since, cheap for a few hundred
# memories, a rebuild past REREAD_AT_MOST; a save of 100,000 takes seconds of a thread, so at most every minute.
SAVE_AFTER_CHANGES, SAVE_INTERVAL_S = 1_000, 60.0  # changes since the file past which a running process saves
SAVE_AT_CLOSE = 200  # changes since the file, past which closing saves again
EVERY_CHANGE_SAVED_AT_MOST = 20_000  # memories: up to this a save at close is quick (VECMEM_REPLICA_FILES=every)


@dataclass
class UserCopy:
    """One user's memories as this process holds them, and how current that is."""

    index: KeywordIndex  # also the catalogue of every memory's scope, type, state and importance
    records: HeldRecords | None  # None without a change feed: records are then read from Chroma
    seen: int = 0  # the change feed's last row applied
    unsettled: dict[str, int] = field(default_factory=dict)  # writes by others begun, not ended: read live
    checked: float = 0.0  # without a feed: when the index was last checked against the store's count
    vectors: HeldVectors | None = None  # once asked for (hold_vectors), with a feed, for users that fit
    loader: threading.Thread | None = None
    loaded: threading.Event = field(default_factory=threading.Event)  # the vectors' loader has finished
    own_mark: int = 0  # a feed row up to which every write of this bank has been applied (see _after_edit)
    unsaved: int = 0  # memories changed since the copy's file was saved (an upper bound)
    saved_at: float = field(default_factory=time.monotonic)  # when its file was last saved
    second: HeldVectors | None = None  # the second view's vectors of every memory, when it is on (second_view.py)

    def cost(self) -> int:
        """Bytes this replica holds, as the budget counts them."""
        held = (0 if self.vectors is None else self.vectors.nbytes) + (0 if self.second is None else self.second.nbytes)
        return BYTES_PER_REPLICA + BYTES_PER_MEMORY * len(self.index) + held


@dataclass(frozen=True)
class Snapshot:
    """What one search reads: the index and records of one moment, and the held vectors (whose own lock pairs
    each id with its own row; a vector newer than the snapshot is that memory's newer vector)."""

    index: IndexSnapshot
    records: Mapping[str, MemoryRecord] | None
    unsettled: frozenset[str]  # written by another bank and not finished: read from the store
    vectors: HeldVectors | None
    second: HeldVectors | None = None  # the second view's (second_view.py), when it is on


class Replicas:
    """Every user's replica in this process."""

    def __init__(self, store: MemoryStore, settings: Settings, second: SecondView | None = None) -> None:
        self.store = store
        self.settings = settings
        self.second = second  # the second view (second_view.py): each copy holds its vectors of every memory
        self.copies: OrderedDict[str, UserCopy] = OrderedDict()  # least recently used first
        self.budget_bytes = settings.cache_mb * 1024 * 1024
        self.evicted = 0  # replicas dropped to stay inside the budget (for the bench and the tests)
        # Edits take the lock too, so an edit made while another thread builds the copy waits for the build and
        # is then applied to the new copy instead of being lost with the old one.
        self._lock = threading.RLock()
        self._holding: set[str] = set()  # users whose vectors this process holds (hold_vectors)
        self.stopping = threading.Event()
        self.files = ReplicaFiles(store, settings.home)  # big users' replicas saved in the home (persisted.py)

    # ------------------------------------------------------------------------------------------ this process's writes

    def on_written(
        self, user: str, records: Sequence[MemoryRecord], tokens: Sequence[Sequence[str]], vectors: np.ndarray,
        second: np.ndarray | None = None,
    ) -> None:
        """``second``: the records' vectors of the second view, when it is on."""
        with self._lock:
            copy = self.copies.get(user)
            if copy is not None:
                copy.index.put_many((record.id, IndexedMemory.of(record, words))
                                    for record, words in zip(records, tokens, strict=True))
                self._keep(copy, records)
                if copy.vectors is not None:
                    copy.vectors.put([record.id for record in records], vectors)
                if copy.second is not None and second is not None:
                    copy.second.put([record.id for record in records], second)
                self._after_edit(user, copy, len(records))

    def on_fields_changed(self, user: str, records: Sequence[MemoryRecord]) -> None:
        with self._lock:
            copy = self.copies.get(user)
            if copy is not None:
                copy.index.refresh_filters(records)
                self._keep(copy, records)
                self._after_edit(user, copy, len(records))

    def on_forgotten(self, user: str, memory_ids: Sequence[str]) -> None:
        with self._lock:
            copy = self.copies.get(user)
            if copy is not None:
                copy.index.remove(memory_ids)
                if copy.records is not None:
                    copy.records.discard(memory_ids)
                if copy.vectors is not None:
                    copy.vectors.remove(memory_ids)
                if copy.second is not None:
                    copy.second.remove(memory_ids)
                self._after_edit(user, copy, len(memory_ids))

    @staticmethod
    def _keep(copy: UserCopy, records: Sequence[MemoryRecord]) -> None:
        if copy.records is not None:  # as Chroma will return them (times pass through epoch seconds)
            copy.records.update((r.id, from_row(r.id, r.content, to_metadata(r))) for r in records)

    def clear(self) -> None:
        """Drop every copy and every saved file: the store changed under them (a repair, a reindex)."""
        with self._lock:
            self.copies.clear()
            self.files.discard_all()

    # ------------------------------------------------------------------------------------------ saved replicas

    def _persisted(self, copy: UserCopy) -> bool:
        smallest = 1 if self.settings.replica_files == "every" else PERSIST_AT_LEAST
        return self.files.enabled and copy.records is not None and len(copy.index) >= smallest

    def _save_at_close(self, copy: UserCopy) -> int:
        """Changes since the file past which closing (or loading) saves again: any, for a one-off command's
        users up to EVERY_CHANGE_SAVED_AT_MOST memories, so the next command's search can read the file alone."""
        if self.settings.replica_files == "every" and len(copy.index) <= EVERY_CHANGE_SAVED_AT_MOST:
            return 1
        return SAVE_AT_CLOSE

    def _after_edit(self, user: str, copy: UserCopy, changed: int) -> None:
        """After this bank applied its own write (caller holds the lock). The bank's writes are serialised and
        each is applied right after the store took it, so every write of this bank up to the feed's head is in
        the copy now: ``own_mark``. A save must never claim a feed row past a write of this bank the copy does
        not hold yet (the feed tells this bank only of others' writes); up to ``own_mark`` it cannot."""
        if not self._persisted(copy) or self.store.changes is None:
            return
        copy.own_mark = self.store.changes.head()
        copy.unsaved += changed
        if copy.unsaved >= SAVE_AFTER_CHANGES and time.monotonic() - copy.saved_at >= SAVE_INTERVAL_S:
            self._save(user, copy, background=True)

    def _save(self, user: str, copy: UserCopy, *, background: bool) -> None:
        """Save the copy as of now (caller holds the lock; taking the capture costs microseconds, writing it is
        done by a thread when ``background``). It reflects the feed up to ``seen``: others' writes up to there
        were applied by current(), and this bank's own up to own_mark, which must not be behind."""
        if not self._persisted(copy) or copy.records is None:
            return
        if copy.own_mark < copy.seen and (mark := self.files.others_only_since(user, copy.own_mark)) is not None:
            copy.own_mark = mark  # only other banks wrote since: this bank has nothing unapplied
        if copy.own_mark < copy.seen:
            return
        if copy.own_mark > copy.seen and (feed := self.store.changes) is not None:
            ahead = feed.since(user, copy.seen)  # leaves this bank's own finished writes out
            if not (ahead.rebuild or ahead.changed or ahead.begun or ahead.ended):
                copy.seen = ahead.seen  # every row since is this bank's own, applied: the file claims them
        capture = Capture(copy.index.snapshot(merge=False).state(), copy.records.snapshot(), copy.seen,
                          dict(copy.unsettled))
        copy.unsaved, copy.saved_at = 0, time.monotonic()
        held = copy.vectors if copy.vectors is not None and copy.vectors.complete else None
        self.files.save(user, capture, None if held is None else lambda: held.rows(capture.records),
                        background=background)

    def _loaded(self, user: str) -> UserCopy | None:
        """The user's copy from its saved file, brought up to date with the feed; None when there is no usable
        file (caller holds the lock). What changed since the file was saved is re-read, as current() re-reads
        what others changed; too much, a reset, or a feed that no longer reaches back that far: rebuilt."""
        feed = self.store.changes
        loaded = self.files.load(user) if feed is not None else None
        if feed is None or loaded is None:
            return None
        self.store.refresh(user)  # as a build does: collections made since this process looked count too
        changes = feed.since(user, loaded.seen)  # others' writes; read first, so every_change covers as much
        every = self.files.every_change(user, loaded.seen)  # this process's own writes since the file, too
        reread = changes.changed | every.changed
        if changes.rebuild or every.rebuild or len(reread) > REREAD_AT_MOST or feed.head() < loaded.seen:
            return None  # the build that follows saves a new file over this one
        held = HeldRecords({}, loaded.records)
        copy = UserCopy(loaded.index, held, seen=changes.seen, unsettled=loaded.unsettled,
                     checked=time.monotonic(), own_mark=changes.seen, unsaved=len(reread))
        settle(copy.unsettled, changes)
        if loaded.vectors is not None and loaded.vectors.complete:  # kept in step from here as the copy is
            copy.vectors = HeldVectors.of(loaded.vectors.ids, loaded.vectors.matrix)
            copy.loaded.set()
        if self.second is not None:
            copy.second = self.second.held(user, [(i, record.content) for i, record in loaded.records.items()])
        if reread:
            self._reread(user, copy, reread)
        if not self.files.matches_store(user, copy.index, held.snapshot(), copy.unsettled):
            self.files.discard(user)
            return None
        self.copies[user] = copy
        if user in self._holding:
            self._start_loading(user, copy)
        if not self._persisted(copy):
            self.files.discard(user)  # the user is small now: a build is cheap, the file only costs disk
        elif copy.unsaved >= self._save_at_close(copy):  # so the next process need not re-read them again
            self._save(user, copy, background=True)
        return copy

    # ------------------------------------------------------------------------------------------ reading

    def snapshot(self, user: str) -> Snapshot:
        """The user's replica, brought up to date, as one search reads it."""
        with self._lock:
            copy = self.current(user)
            records = None if copy.records is None else copy.records.snapshot()
            return Snapshot(copy.index.snapshot(), records, frozenset(copy.unsettled), copy.vectors, copy.second)

    def current(self, user: str) -> UserCopy:
        """The user's copy: built from the store on first use, then kept in step. With a change feed, exactly:
        what other banks changed since the last look is re-read. Without one (a store a caller gave), the copy
        is rebuilt when the store holds a different number of memories, checked every index_check_seconds."""
        with self._lock:
            copy = self.copies.get(user)
            feed = self.store.changes
            if copy is None:
                copy = self._loaded(user) or self._rebuilt(user)
                self._fit_budget(keep=user)
            elif feed is not None:
                changes = feed.since(user, copy.seen)
                if changes.rebuild or len(changes.changed) > REREAD_AT_MOST:
                    copy = self._rebuilt(user)
                else:
                    settle(copy.unsettled, changes)
                    if changes.changed:
                        self._reread(user, copy, changes.changed)
                    copy.seen, copy.unsaved = changes.seen, copy.unsaved + len(changes.changed)
            elif time.monotonic() - copy.checked >= self.settings.index_check_seconds:
                if len(copy.index) != self.store.count(user):  # count() also sees new collections
                    copy = self._rebuilt(user)
                copy.checked = time.monotonic()
            self.copies.move_to_end(user)
            return copy

    def held_bytes(self) -> int:
        """What every replica of this process holds, as the budget counts it."""
        with self._lock:
            return sum(copy.cost() for copy in self.copies.values())

    def _fit_budget(self, keep: str) -> None:
        """Drop the least recently used replicas (never ``keep``'s) until the rest fit the budget (caller holds
        the lock). A dropped replica's loader sees it is no longer current and stops."""
        total = sum(copy.cost() for copy in self.copies.values())
        for user in list(self.copies):
            if total <= self.budget_bytes:
                return
            if user != keep:
                total -= self.copies.pop(user).cost()
                self.evicted += 1

    def records(self, user: str, snapshot: Snapshot, ids: Sequence[str], view: FilterView) -> list[MemoryRecord]:
        """The records of these memories: from the snapshot where it is exact, else from the store (no feed, a
        write by another bank in flight, or a memory the snapshot does not know yet)."""
        held = snapshot.records
        if held is None:
            live = list(ids)
            found = []
        else:
            live = [i for i in ids if i not in held or i in snapshot.unsettled]
            found = [held[i] for i in ids if i in held and i not in snapshot.unsettled]
        if live:
            type_of = {i: t for i in live if (t := view.type_of(i)) is not None}
            found.extend(self.store.get(user, live, type_of=type_of).values())
        return found

    # ------------------------------------------------------------------------------------------ building, re-reading

    def _rebuilt(self, user: str) -> UserCopy:
        """A new copy of the user's memories, in place of any older one (caller holds the lock)."""
        copy = self.copies[user] = self._build(user)
        if user in self._holding:  # started once the copy is in place: the loader stops when it is not
            self._start_loading(user, copy)
        if self._persisted(copy):
            self._save(user, copy, background=True)
        else:
            self.files.discard(user)  # a file left from when the user was bigger would be stale
        return copy

    def _build(self, user: str) -> UserCopy:
        feed = self.store.changes
        seen = 0 if feed is None else feed.head()  # read first: a write finishing during the scan is re-read
        self.store.refresh(user)  # collections another bank or server client created count too
        index = KeywordIndex()
        records: dict[str, MemoryRecord] | None = None if feed is None else {}
        texts: list[tuple[str, str]] = []  # (id, content) for the second view

        def entries() -> Iterator[tuple[str, IndexedMemory]]:
            for record, words in self.store.scan_keywords(user):
                if self.stopping.is_set():  # closing (perhaps the interpreter): leave Chroma at once
                    raise StoreError("the memory bank was closed while it read the store")
                if records is not None:
                    records[record.id] = record
                if self.second is not None:
                    texts.append((record.id, record.content))
                yield record.id, IndexedMemory.of(record, words if words is not None else memory_tokens(record))

        collecting = gc.isenabled()
        gc.disable()  # 100,000 records kept alive set off a dozen full collections, a noticeable share of a build
        try:
            index.replace_all(entries())
        finally:
            if collecting:
                gc.enable()
        unsettled = {} if feed is None else feed.unsettled(user, seen)
        return UserCopy(index, None if records is None else HeldRecords(records), seen=seen, unsettled=unsettled,
                     checked=time.monotonic(), own_mark=seen,
                     second=None if self.second is None else self.second.held(user, texts))

    def _reread(self, user: str, copy: UserCopy, memory_ids: set[str]) -> None:
        """Re-read memories another bank changed: changed ones replace the copy's, deleted ones leave it."""
        found = self.store.get_indexed(user, sorted(memory_ids))
        gone = [memory_id for memory_id in memory_ids if memory_id not in found]
        if gone:
            copy.index.remove(gone)
        copy.index.put_many((memory_id, IndexedMemory.of(record, words if words is not None else memory_tokens(record)))
                            for memory_id, (record, _, words) in found.items())
        if copy.records is not None:
            copy.records.discard(gone)
            copy.records.update((memory_id, record) for memory_id, (record, _, _) in found.items())
        if copy.vectors is not None:
            copy.vectors.remove(gone)
            if found:
                copy.vectors.put(list(found), np.stack([vector for _, vector, _ in found.values()]))
        if copy.second is not None and self.second is not None:
            copy.second.remove(gone)
            if found:
                texts = [(memory_id, record.content) for memory_id, (record, _, _) in found.items()]
                copy.second.put([memory_id for memory_id, _ in texts], self.second.vectors(user, texts))

    # ------------------------------------------------------------------------------------------ held vectors

    def hold_vectors(self, user: str, timeout: float | None = None) -> bool:
        """Hold the user's vectors in memory from now on (held.py), loading them in a background thread, and
        wait up to ``timeout`` for them; True once all are held."""
        with self._lock:
            self._holding.add(user)
            copy = self.current(user)
            if copy.loader is None:
                self._start_loading(user, copy)
        copy.loaded.wait(timeout)
        return copy.vectors is not None and copy.vectors.complete

    def _start_loading(self, user: str, copy: UserCopy) -> None:
        if copy.vectors is not None and copy.vectors.complete:  # its file had them
            copy.loaded.set()
            return
        stored = self.store.stored_model()
        dimension = stored[1] if stored else None
        if self.store.changes is None or not dimension or len(copy.index) * dimension * 4 > HOLD_AT_MOST_BYTES:
            copy.loaded.set()  # without a feed a held vector could go stale; a user this big stays in Chroma
            return
        copy.vectors = HeldVectors()
        copy.loader = threading.Thread(target=self._load_vectors, args=(user, copy), daemon=True,
                                       name="vecmem-load-vectors")
        copy.loader.start()

    def _load_vectors(self, user: str, copy: UserCopy) -> None:
        """Fill the copy's held vectors from the store (a background thread; searches read Chroma meanwhile)."""
        vectors = copy.vectors
        try:
            for ids, matrix in self.store.scan_vectors(user):
                if vectors is None or self.stopping.is_set() or self.copies.get(user) is not copy:
                    return  # closing, or a new copy
                vectors.put(ids, matrix, unless_held=True)
            if vectors is not None:
                vectors.complete = True
                with self._lock:  # the vectors count against the budget now
                    if self.copies.get(user) is copy:
                        self._fit_budget(keep=user)
        except Exception as exc:  # noqa: BLE001  # the vectors are an optimisation: searches read Chroma instead
            log.warning("could not hold the vectors of user %r in memory: %s", user, exc)
        finally:
            copy.loaded.set()

    def close(self) -> None:
        """Stop the vector loaders (each finishes the page it reads, well under a second), save the copies that
        changed much since their files, wait for the saves and drop every copy (their files stay)."""
        self.stopping.set()
        with self._lock:
            loaders = [copy.loader for copy in self.copies.values() if copy.loader is not None]
        for loader in loaders:
            loader.join(timeout=30)
        self.files.wait()  # a save in progress first: its user's newer one below must land after it
        with self._lock:
            for user, copy in self.copies.items():
                if copy.unsaved >= self._save_at_close(copy):
                    self._save(user, copy, background=False)
            self.copies.clear()
        self.files.close()
