"""A feed of which memories were changed, in order, by every bank writing to one store, in every process.

A search keeps each user's memories in memory (the keyword index, the catalogue of scopes and types, the
records themselves, and for long-running processes the vectors) because every Chroma call has a fixed cost
and each record read adds to it. Those copies are only as good as their knowledge of other banks'
writes, so every write to the store is announced here, and before each search a bank reads what others
changed since it last looked (one indexed query: a small fraction of a millisecond in SQLite, a little more
in PostgreSQL) and re-reads just those memories from Chroma. The feed lives in the state database (database.py):
``VECMEM_HOME/changes.sqlite3`` for the processes of one machine, or the PostgreSQL database every worker of a
Chroma server shares, so a worker's copies see every other worker's writes.

A write is announced twice: ``begin`` before Chroma is touched, ``end`` after it returned or failed. A reader
that sees a ``begin`` without its ``end`` treats the memory as unsettled and reads it from Chroma on every
search until the ``end`` arrives; if the writer was killed in between, the memory stays read from Chroma
until the next process to open the store settles the write (``recover``, below). So a copy is never older than the last write that finished, and a write in flight or interrupted is
never served from a copy.

**Rows are numbered in the order they commit.** A reader remembers the last number it read and next asks for
the rows after it, so a row that committed after a higher-numbered one would never be read. SQLite's write
lock serialises appends; in PostgreSQL, where numbers are handed out before commit, each append first takes
one advisory lock for the feed (``Transaction.exclusive``), held until it commits.

The feed keeps its newest ``KEEP_ROWS`` rows. A reader that fell further behind than that (or that sees a
``reset``, written by a reindex or a move between layouts) rebuilds its copy from the store.

**Writes a killed process left open are settled by the next process that opens the store** (``recover``). The
feed counts the rows of writes begun and not yet ended (``open_rows`` in the ``feed`` table, moved in the
transaction of each append), so an open after a clean exit costs one read. When the count is not zero, the
feed is read whole to find whose writes are open, and those users' write locks are taken (database.py): every
writer holds its user's write lock from before its ``begin`` until after its ``end``, and the kernel (flock) or
PostgreSQL (a transaction's advisory lock) lets go of a dead writer's lock, so once the opener holds the lock, a
write of that user still open belongs to a process that died, never to a live one on this or another machine.
Those are ended as failed (what Chroma holds is what there is; readers re-read the memories). The count is then
recomputed from the feed, which also corrects it for a feed written before it was kept. Where workers write all
the time (a shared PostgreSQL state), a worker that starts mid-write reads the feed whole once and waits for
those writes to end.

The feed also names the state it belongs to (``identity``): a random id made once, which a Chroma store
records so that two processes with different state (two homes, or a home and a PostgreSQL database) cannot
both write to it (chroma/registry.py, ``claim``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vecmem.storage.state.database import Database, Transaction
from vecmem.storage.state.sqlite import SQLiteFile

__all__ = ["ChangeFeed", "Changes", "RESET"]

Holding = Callable[[Iterable[str]], contextlib.AbstractContextManager[None]]  # WriteLocks.holding

RESET = "*"  # memory_id of a row meaning "everything of this user changed" (a reindex); written into SQL below
KEEP_ROWS = 200_000  # rows kept; a reader further behind rebuilds (two rows per memory written)
_PRUNE_EVERY = 5_000  # rows written between two checks of the feed's length
_LOOKS_KEPT = 10_000  # users whose last look is remembered (read_recently)
_BEGIN, _DONE, _FAILED = 0, 1, 2
_FEED_LOCK = "vecmem change feed"  # what an append holds until it commits (PostgreSQL), see the docstring
_OPEN_ROWS = "open_rows"  # key in ``feed``: rows of writes begun and not ended (see ``recover``)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS changes (
    seq {serial}, user_id TEXT NOT NULL, memory_id TEXT NOT NULL,
    writer TEXT NOT NULL, phase INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS changes_by_user ON changes (user_id, seq);
CREATE INDEX IF NOT EXISTS changes_resets ON changes (user_id, seq) WHERE memory_id = '*';
CREATE TABLE IF NOT EXISTS feed (key TEXT PRIMARY KEY, value {bigint} NOT NULL){rowid};
CREATE TABLE IF NOT EXISTS state_identity (key TEXT PRIMARY KEY, value TEXT NOT NULL){rowid};
"""


@dataclass
class Changes:
    """What other writers did to one user's memories since a reader last looked."""

    seen: int  # the newest row read; the next look starts after it
    changed: set[str] = field(default_factory=set)  # finished writes: re-read these
    begun: list[str] = field(default_factory=list)  # writes started (unsettled until their end)
    ended: list[str] = field(default_factory=list)  # writes finished, in order (settling a begun one)
    rebuild: bool = False  # history no longer covers what was missed, or a reset: re-read everything


class ChangeFeed:
    """The feed in a state database: a path (its SQLite file) or a ``Database`` (the shared PostgreSQL one)."""

    def __init__(self, where: Path | Database, *, _owns: bool = True) -> None:
        self.writer = uuid.uuid4().hex  # this feed object's writes, which its own reader has applied already
        # WAL + synchronous NORMAL: a power cut may drop the last rows
        self._db: Database = (SQLiteFile(where, "", label="change feed", timeout=30, synchronous="NORMAL")
                              if isinstance(where, Path) else where)
        if _owns:
            self._db.create(_SCHEMA)
        self._owns = _owns
        self.where = self._db.where
        self._written = 0
        self._identity: str | None = None
        self._read_at: dict[str, float] = {}  # user -> when this reader last looked for their changes

    def reader(self) -> ChangeFeed:
        """Another reader of the same feed, with a writer id of its own: its ``since`` leaves out none of this
        feed's writes (a saved replica must learn this process's own writes too, persisted.py)."""
        return ChangeFeed(self._db, _owns=False)

    def identity(self) -> str:
        """The state's id: made by the first process that asks, the same for every process afterwards."""
        if self._identity is None:
            self._identity = self._made_identity()
        return self._identity

    def _made_identity(self) -> str:
        with self._db.transaction() as db:
            db.exclusive(_FEED_LOCK)
            row = db.execute("SELECT value FROM state_identity WHERE key = 'id'").fetchone()
            if row is not None:
                return str(row[0])
            made = uuid.uuid4().hex
            db.execute("INSERT INTO state_identity (key, value) VALUES ('id', ?)", (made,))
            return made

    # ------------------------------------------------------------------------------------------ writing

    def writing(self, user_id: str, memory_ids: Sequence[str]) -> contextlib.AbstractContextManager[None]:
        """Announce a write of these memories around the block that does it (``begin``, then ``end``)."""
        return self.writing_many({user_id: memory_ids})

    @contextlib.contextmanager
    def writing_many(self, ids_by_user: Mapping[str, Sequence[str]]) -> Iterator[None]:
        """Announce a write of several users' memories: one transaction for every ``begin``, one for every
        ``end`` (each transaction costs a commit; a batch of 256 users' writes is two, not 512)."""
        rows = [(user_id, memory_id) for user_id, ids in ids_by_user.items() for memory_id in dict.fromkeys(ids)]
        if not rows:
            yield
            return
        self._append(rows, _BEGIN, opened=len(rows))
        try:
            yield
        except BaseException:
            self._append(rows, _FAILED, opened=-len(rows))  # part of it may have landed: readers re-read these ids
            raise
        self._append(rows, _DONE, opened=-len(rows))

    @contextlib.contextmanager
    def sole_writer(self, collection: str) -> Iterator[None]:
        """Around one write of a Chroma collection: no other process writes it meanwhile (PostgreSQL: an
        advisory lock for the collection, held in a transaction of its own). A Chroma server runs the writes of
        different collections side by side, but writes of one collection sent at the same moment slow each
        other down (each costs it more than both one after the other), and a writer that waits meanwhile
        gathers more rows for its next write (storage/grouped.py). A SQLite feed holds nothing: its lock would
        stop every announcement of every process for the length of the write."""
        if self._db.dialect != "postgresql":
            yield
            return
        with self._db.transaction() as db:
            db.exclusive(f"vecmem collection {collection}")
            yield

    def settle(self, user_id: str, open_writes: Mapping[str, int]) -> None:
        """End writes whose writers died before ending them (``recover``, ``vecmem doctor``), ``open_writes``
        being {memory id: writes begun and not ended}: one end per begin, so a memory two killed writers left
        open is settled whole. Readers re-read and settle. The rows name a writer of their own, so that every
        reader, this one too, counts them as ends."""
        rows = [(user_id, memory_id) for memory_id, left in open_writes.items() for _ in range(max(left, 0))]
        self._append(rows, _FAILED, opened=-len(rows), writer=uuid.uuid4().hex)

    def reset(self, user_id: str) -> None:
        """Tell every reader that all of this user's memories changed (after a reindex)."""
        self._append([(user_id, RESET)], _DONE)

    def _append(self, changed: Sequence[tuple[str, str]], phase: int, *, opened: int = 0,
                writer: str | None = None) -> None:
        """One transaction adding a row per (user, memory id) in this phase; ``opened``: how many rows of open
        writes this adds (a begin) or ends (negative), counted in ``open_rows`` (a feed that has no count yet
        gets one from ``recover``)."""
        rows = [(user_id, memory_id, writer or self.writer, phase) for user_id, memory_id in changed]
        with self._db.transaction() as db:
            db.exclusive(_FEED_LOCK)
            db.executemany("INSERT INTO changes (user_id, memory_id, writer, phase) VALUES (?, ?, ?, ?)", rows)
            if opened:
                db.execute("UPDATE feed SET value = value + ? WHERE key = ?", (opened, _OPEN_ROWS))
            self._written += len(rows)  # under the feed's lock, as the transaction is
            if self._written >= _PRUNE_EVERY:
                self._written = 0
                self._prune(db)

    @staticmethod
    def _prune(db: Transaction) -> None:
        """Drop the rows older than the newest KEEP_ROWS, noting how far (inside the caller's transaction)."""
        newest = db.execute("SELECT max(seq) FROM changes").fetchone()[0] or 0
        cut = newest - KEEP_ROWS
        row = db.execute("SELECT value FROM feed WHERE key = 'pruned_through'").fetchone()
        if cut > (int(row[0]) if row else 0):
            db.execute("DELETE FROM changes WHERE seq <= ?", (cut,))
            db.execute("INSERT INTO feed (key, value) VALUES ('pruned_through', ?) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (cut,))

    # ------------------------------------------------------------------------------------------ recovery

    def recover(self, holding: Holding) -> dict[str, list[str]]:
        """Settle the writes that processes killed mid-write left open (the module docstring says how a live
        writer's are told apart): {user: memory ids settled}. ``holding``: the state's write locks (``WriteLocks
        .holding``). Costs one read when no write is open."""
        counted = self._db.fetch("SELECT value FROM feed WHERE key = ?", (_OPEN_ROWS,))
        if counted and int(counted[0][0]) <= 0:
            return {}
        settled: dict[str, list[str]] = {}
        users = sorted(user for user, open_writes in self._open_writes().items() if open_writes)
        if users:
            with holding(users):  # every writer of these users that is alive has ended its writes now
                open_now = self._open_writes(users)
                for user in users:
                    if open_now.get(user):
                        settled[user] = sorted(open_now[user])
                        self.settle(user, open_now[user])
        self._recount()
        return settled

    def _open_writes(self, users: Sequence[str] | None = None) -> dict[str, dict[str, int]]:
        """{user: {memory id: writes begun and not ended}} over the whole feed, or for these users only."""
        sql = "SELECT user_id, memory_id, phase FROM changes WHERE memory_id != '*'"
        params: tuple[str, ...] = ()
        if users is not None:
            sql += f" AND user_id IN ({', '.join('?' * len(users))})"
            params = tuple(users)
        open_writes: dict[str, dict[str, int]] = {}
        for user_id, memory_id, phase in self._db.fetch(sql + " ORDER BY seq", params):
            _settle(open_writes.setdefault(user_id, {}), memory_id, +1 if phase == _BEGIN else -1)
        return open_writes

    def _recount(self) -> None:
        """Set ``open_rows`` from the feed itself, appends waiting meanwhile (they move the count)."""
        with self._db.transaction() as db:
            db.exclusive(_FEED_LOCK)
            open_writes: dict[tuple[str, str], int] = {}
            for user_id, memory_id, phase in db.execute(
                "SELECT user_id, memory_id, phase FROM changes WHERE memory_id != '*' ORDER BY seq"
            ):
                key = (user_id, memory_id)
                left = open_writes.get(key, 0) + (1 if phase == _BEGIN else -1)
                if left > 0:
                    open_writes[key] = left
                else:
                    open_writes.pop(key, None)
            db.execute("INSERT INTO feed (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = "
                       "excluded.value", (_OPEN_ROWS, sum(open_writes.values())))

    # ------------------------------------------------------------------------------------------ reading

    def head(self) -> int:
        """The newest row's number: a reader that copies the store after reading it misses nothing later."""
        return int(self._db.fetch("SELECT max(seq) FROM changes")[0][0] or 0)

    def others_wrote(self, user_id: str, since: int) -> bool:
        """Whether another writer touched the user's memories after row ``since``."""
        return bool(self._db.fetch("SELECT 1 FROM changes WHERE user_id = ? AND seq > ? AND writer != ? LIMIT 1",
                               (user_id, since, self.writer)))

    def read_recently(self, user_id: str, seconds: float) -> bool:
        """Whether this reader looked for the user's changes (``since``, ``reset_since``) in the last ``seconds``:
        a caller of ``since`` acts on a reset it finds (the replica rebuilds, and forgets the user's layout)."""
        return time.monotonic() - self._read_at.get(user_id, float("-inf")) < seconds

    def _looked(self, user_id: str) -> None:
        if len(self._read_at) > _LOOKS_KEPT:  # bounded: only recent looks matter
            self._read_at.clear()
        self._read_at[user_id] = time.monotonic()

    def reset_since(self, user_id: str, since: int) -> bool:
        """Whether another writer announced a reset of the user (a move between layouts, a reindex) after row
        ``since``."""
        self._looked(user_id)
        # memory_id as a literal, so that both databases use the small index of resets (changes_resets)
        return bool(self._db.fetch("SELECT 1 FROM changes WHERE user_id = ? AND seq > ? AND memory_id = '*' "
                                   "AND writer != ? LIMIT 1", (user_id, since, self.writer)))

    def unsettled(self, user_id: str, up_to: int, *, others_only: bool = False) -> dict[str, int]:
        """{memory id: writes begun and not ended} among the rows up to ``up_to``: writes in flight when a
        reader copies the store, or whose writer died. ``others_only`` leaves out this feed's own writes (in
        flight in this process, which is alive: what ``vecmem doctor`` asks, run inside a serving process)."""
        open_writes: dict[str, int] = {}
        mine = " AND writer != ?" if others_only else ""
        params = (user_id, up_to, self.writer) if others_only else (user_id, up_to)
        for memory_id, phase in self._db.fetch(
            f"SELECT memory_id, phase FROM changes WHERE user_id = ? AND seq <= ?{mine} ORDER BY seq", params
        ):
            _settle(open_writes, memory_id, +1 if phase == _BEGIN else -1)
        return open_writes

    def since(self, user_id: str, seen: int) -> Changes:
        """Other writers' changes to the user's memories after row ``seen``. This reader's own finished
        writes are left out (the bank applied them to its copy itself); its failed ones are not."""
        self._looked(user_id)
        # One statement (one round trip to PostgreSQL, before every search), so also one snapshot: the first row
        # says how far the feed was pruned, the others are the user's rows after ``seen``.
        pruned, *rows = self._db.fetch(
            "SELECT 0, coalesce((SELECT value FROM feed WHERE key = 'pruned_through'), 0), '', '', 0 UNION ALL "
            "SELECT 1, seq, memory_id, writer, phase FROM changes WHERE user_id = ? AND seq > ? ORDER BY 1, 2",
            (user_id, seen))
        if seen < int(pruned[1]):
            return Changes(seen=self.head(), rebuild=True)
        changes = Changes(seen=rows[-1][1] if rows else seen)
        for _, _, memory_id, writer, phase in rows:
            if memory_id == RESET:
                changes.rebuild = True
            elif writer == self.writer and phase in (_DONE, _BEGIN):
                continue
            elif phase == _BEGIN:
                changes.begun.append(memory_id)
            else:
                changes.changed.add(memory_id)
                if writer != self.writer:
                    changes.ended.append(memory_id)
        return changes

    def close(self) -> None:
        if self._owns:
            self._db.close()


def _settle(open_writes: dict[str, int], memory_id: str, step: int) -> None:
    """Count a begin (+1) or an end (-1) of a write of ``memory_id``; a memory with none open is settled."""
    left = open_writes.get(memory_id, 0) + step
    if left > 0:
        open_writes[memory_id] = left
    else:
        open_writes.pop(memory_id, None)


def settle(open_writes: dict[str, int], changes: Changes) -> None:
    """Apply a reader's new begins and ends to its count of open writes per memory."""
    for memory_id in changes.begun:
        _settle(open_writes, memory_id, +1)
    for memory_id in changes.ended:
        _settle(open_writes, memory_id, -1)
