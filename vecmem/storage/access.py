"""Access statistics (``access_count``, ``last_accessed``) in a small SQLite table beside the store.

Every search that returns memories counts an access. Writing that into Chroma would cost a write per search
(5 to 16 ms, and at 100,000 memories a batch of them stalls concurrent searches by 100 ms and more), so the
counts live in ``VECMEM_HOME/access.sqlite3`` instead: an upsert per returned memory, well under a
millisecond, atomic across processes (``count = count + 1``). Records read through the bank carry these
values; Chroma's copy of the two fields is only the starting point (an imported count, or 0). With a Chroma
server, each client machine keeps its own table.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Sequence

from vecmem.errors import StoreError
from vecmem.models import MemoryRecord

__all__ = ["AccessStats"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS access (
    user_id TEXT NOT NULL, memory_id TEXT NOT NULL, count INTEGER NOT NULL, last REAL NOT NULL,
    PRIMARY KEY (user_id, memory_id)) WITHOUT ROWID;
"""
_CHUNK = 500  # ids per IN (...) query, inside SQLite's variable limit


class AccessStats:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the access statistics {path}: {exc}") from exc
        self._lock = threading.Lock()

    def _execute(self, sql: str, rows: Sequence[tuple[object, ...]] | None = None) -> None:
        with self._lock:
            try:
                if rows is None:
                    self._db.execute(sql)
                else:
                    self._db.execute("BEGIN")
                    self._db.executemany(sql, rows)
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"access statistics {self.path}: {exc}") from exc

    def record(self, records: Sequence[MemoryRecord], when: datetime) -> None:
        """Count one access of each record (its stored count is the start for a first access)."""
        self._execute(
            "INSERT INTO access (user_id, memory_id, count, last) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (user_id, memory_id) DO UPDATE SET count = count + 1, last = max(last, excluded.last)",
            [(r.user_id, r.id, r.access_count + 1, when.timestamp()) for r in records],
        )

    def forget(self, user_id: str, memory_ids: Iterable[str]) -> None:
        self._execute("DELETE FROM access WHERE user_id = ? AND memory_id = ?",
                      [(user_id, memory_id) for memory_id in memory_ids])

    def lookup(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, tuple[int, float]]:
        """{id: (access_count, last_accessed epoch)} of the memories that were ever returned by a search."""
        found: dict[str, tuple[int, float]] = {}
        ids = list(dict.fromkeys(memory_ids))
        with self._lock:
            try:
                for start in range(0, len(ids), _CHUNK):
                    chunk = ids[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    for memory_id, count, last in self._db.execute(
                        f"SELECT memory_id, count, last FROM access WHERE user_id = ? AND memory_id IN ({marks})",
                        (user_id, *chunk),
                    ):
                        found[memory_id] = (count, last)
            except sqlite3.Error as exc:
                raise StoreError(f"access statistics {self.path}: {exc}") from exc
        return found

    def lookup_all(self, user_id: str) -> list[str]:
        """Ids of every memory of the user that has statistics (``vecmem doctor`` looks for stale ones)."""
        with self._lock:
            try:
                return [row[0] for row in self._db.execute("SELECT memory_id FROM access WHERE user_id = ?",
                                                           (user_id,))]
            except sqlite3.Error as exc:
                raise StoreError(f"access statistics {self.path}: {exc}") from exc

    def apply(self, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """The records with their access statistics (records of one or several users)."""
        by_user: dict[str, list[str]] = {}
        for record in records:
            by_user.setdefault(record.user_id, []).append(record.id)
        found = {user_id: self.lookup(user_id, ids) for user_id, ids in by_user.items()}
        return [_with_stats(record, found[record.user_id].get(record.id)) for record in records]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _with_stats(record: MemoryRecord, stats: tuple[int, float] | None) -> MemoryRecord:
    if stats is None:
        return record
    count, last = stats
    moment = datetime.fromtimestamp(last, timezone.utc)
    if record.last_accessed is not None:
        moment = max(moment, record.last_accessed)
    return MemoryRecord.trusted(**{**record.__dict__, "access_count": max(count, record.access_count),
                                   "last_accessed": moment})
