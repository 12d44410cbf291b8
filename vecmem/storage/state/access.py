"""Access statistics (``access_count``, ``last_accessed``) in a small SQLite table beside the store.

Every search that returns memories counts an access. Writing that into Chroma would cost a write per search
(milliseconds each, and at 100,000 memories a batch of them stalls concurrent searches for longer than a search
takes), so the counts live in ``VECMEM_HOME/access.sqlite3`` instead: an upsert per returned memory, well under a
millisecond, atomic across processes (``count = count + 1``). Records read through the bank carry these values;
Chroma's copy of the two fields is only the starting point (an imported count, or 0). The table is part of the
state database (database.py): workers sharing a PostgreSQL one count into the same table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from vecmem.models import MemoryRecord
from vecmem.storage.state.database import Database
from vecmem.storage.state.sqlite import SQLiteFile

__all__ = ["AccessStats"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS access (
    user_id TEXT NOT NULL, memory_id TEXT NOT NULL, count {bigint} NOT NULL, last {float} NOT NULL,
    PRIMARY KEY (user_id, memory_id)){rowid};
"""
_CHUNK = 500  # ids per IN (...) query, inside SQLite's variable limit


class AccessStats:
    """The statistics in a state database: a path (its SQLite file) or a ``Database`` (the shared one)."""

    def __init__(self, where: Path | Database) -> None:
        self._db: Database = (SQLiteFile(where, "", label="access statistics", timeout=30, synchronous="NORMAL")
                              if isinstance(where, Path) else where)
        self._db.create(_SCHEMA)

    def _write(self, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
        with self._db.transaction(immediate=False) as db:
            db.executemany(sql, rows)

    def record(self, records: Sequence[MemoryRecord], when: datetime) -> None:
        """Count one access of each record (its stored count is the start for a first access)."""
        # rows in one order (user, id): two searches counting the same memories at once in PostgreSQL lock their
        # rows in that order and wait for each other, where opposite orders would deadlock
        self._write(
            "INSERT INTO access (user_id, memory_id, count, last) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (user_id, memory_id) DO UPDATE SET count = access.count + 1, "
            "last = CASE WHEN excluded.last > access.last THEN excluded.last ELSE access.last END",
            sorted({(r.user_id, r.id): (r.user_id, r.id, r.access_count + 1, when.timestamp())
                    for r in records}.values()),
        )

    def forget(self, user_id: str, memory_ids: Iterable[str]) -> None:
        self._write("DELETE FROM access WHERE user_id = ? AND memory_id = ?",
                    [(user_id, memory_id) for memory_id in sorted(set(memory_ids))])

    def lookup(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, tuple[int, float]]:
        """{id: (access_count, last_accessed epoch)} of the memories that were ever returned by a search."""
        found: dict[str, tuple[int, float]] = {}
        ids = list(dict.fromkeys(memory_ids))
        with self._db.reading() as db:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for memory_id, count, last in db.execute(
                    f"SELECT memory_id, count, last FROM access WHERE user_id = ? AND memory_id IN ({marks})",
                    (user_id, *chunk),
                ):
                    found[memory_id] = (count, last)
        return found

    def lookup_all(self, user_id: str) -> list[str]:
        """Ids of every memory of the user that has statistics (``vecmem doctor`` looks for stale ones)."""
        return [row[0] for row in self._db.fetch("SELECT memory_id FROM access WHERE user_id = ?", (user_id,))]

    def apply(self, records: Sequence[MemoryRecord], *,
              known: Mapping[str, tuple[int, float]] | None = None) -> list[MemoryRecord]:
        """The records with their access statistics (records of one or several users); ``known``: what
        ``lookup`` just gave for these ids of one user (a search reads the statistics once, for its ranking)."""
        if known is not None:
            return [_with_stats(record, known.get(record.id)) for record in records]
        by_user: dict[str, list[str]] = {}
        for record in records:
            by_user.setdefault(record.user_id, []).append(record.id)
        found = {user_id: self.lookup(user_id, ids) for user_id, ids in by_user.items()}
        return [_with_stats(record, found[record.user_id].get(record.id)) for record in records]

    def close(self) -> None:
        self._db.close()


def _with_stats(record: MemoryRecord, stats: tuple[int, float] | None) -> MemoryRecord:
    if stats is None:
        return record
    count, last = stats
    moment = datetime.fromtimestamp(last, UTC)
    if record.last_accessed is not None:
        moment = max(moment, record.last_accessed)
    return MemoryRecord.trusted(**{**record.__dict__, "access_count": max(count, record.access_count),
                                   "last_accessed": moment})
