"""The SQLite files beside the store (access statistics, the change feed, chat sessions, API keys): the default
``Database`` (database.py), one file each.

Each file is one connection shared by the threads of a process (``check_same_thread=False``), serialised by
a lock: sqlite3 connections are not safe to use from two threads at once, and the statements are short (well
under a millisecond), so a lock costs less than a connection per thread. The connection runs in autocommit
mode (``isolation_level=None``): a single statement commits by itself, and several that must land together
run in ``transaction()``. Journal mode is WAL, so readers in other processes never wait for a writer.

Every ``sqlite3.Error`` (a locked or corrupt file, a full disk, a closed connection) becomes a ``StoreError``
naming the file; anything else raised inside a transaction rolls it back and propagates as it is.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from vecmem.errors import StoreError
from vecmem.storage.files import private_file
from vecmem.storage.state.database import Cursor, ddl

__all__ = ["SQLiteFile"]


class _Statements:
    """A transaction's statements on the file's connection (database.Transaction)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self._db.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)

    def exclusive(self, name: str) -> None:
        """A transaction of a file is exclusive already (BEGIN IMMEDIATE takes the file's write lock)."""


class SQLiteFile:
    """One SQLite file, opened (and its schema created) on construction.

    ``label`` names the file in error messages ("change feed"). ``schema`` is written for ``database.ddl``.
    ``timeout``: seconds a statement waits for another process's write lock before failing. ``synchronous``:
    the ``PRAGMA synchronous`` level, or None for SQLite's default (FULL); with WAL, NORMAL can lose the last
    commits to a power cut, never the file.
    """

    dialect = "sqlite"

    def __init__(
        self, path: Path, schema: str, *, label: str, timeout: float = 5.0, synchronous: str | None = None
    ) -> None:
        self.path = path
        self.label = label
        self.where = str(path)
        try:
            private_file(path)  # 0600 before SQLite opens it; its -wal and -shm files take the same mode
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=timeout)
            self._db.execute("PRAGMA journal_mode=WAL")
            if synchronous is not None:
                self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.executescript(ddl(schema, self.dialect))
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the {label} {path}: {exc}") from exc
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise StoreError(f"{self.label} {self.path}: {exc}") from exc

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (committed by itself) and return the rows it produced."""
        with self._locked() as db:
            return db.execute(sql, tuple(params)).fetchall()

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one INSERT (committed by itself) and return the new row's id."""
        with self._locked() as db:
            return int(db.execute(sql, tuple(params)).lastrowid or 0)

    def create(self, schema: str) -> None:
        """Create what ``schema`` declares (``CREATE ... IF NOT EXISTS``: another process may have, too)."""
        with self._locked() as db:
            db.executescript(ddl(schema, self.dialect))

    @contextlib.contextmanager
    def reading(self) -> Iterator[_Statements]:
        """Several reads in a row, none of another thread's statements between them."""
        with self._locked() as db:
            yield _Statements(db)

    @contextlib.contextmanager
    def transaction(self, *, immediate: bool = True) -> Iterator[_Statements]:
        """Statements that land together or not at all. ``immediate`` takes the write lock at the start
        (``BEGIN IMMEDIATE``), so a transaction that reads before it writes cannot fail halfway on a lock
        another process took meanwhile; a transaction that only writes can start deferred."""
        with self._locked() as db:
            db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            try:
                yield _Statements(db)
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
