"""PostgreSQL as the state database several workers share (``VECMEM_DATABASE_URL``). The only psycopg importer.

Every table lives in one schema (``VECMEM_DATABASE_SCHEMA``, default ``vecmem``), created on first use, so one
database can hold the state of several stores side by side. A process opens one connection pool per URL and
schema, shared by every part that keeps state there (the change feed, access statistics, sessions, keys) and
closed when the last of them closes. Connections run in autocommit; ``transaction`` is an explicit one.

**Write locks** are transaction-level advisory locks (``pg_advisory_xact_lock``) taken on a connection of a
pool of their own: a lock holder then needs connections of the main pool for the writes it announces, and
nothing that waits for a main-pool connection ever holds a lock, so the two pools cannot wait on each other.
The server lets a lock go when its transaction ends, and when the connection drops (a killed worker).

Errors: every ``psycopg.Error`` and a pool that gives no connection in time become ``StoreError`` naming the
database (never its password); what this module does not know propagates as it is.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql as pg_sql
from psycopg_pool import ConnectionPool, PoolTimeout

from vecmem.errors import ConfigError, StoreError
from vecmem.storage.state.database import Cursor, ddl, lock_key, stripe

__all__ = ["PostgresDatabase", "PostgresWriteLocks", "describe"]

POOL_SIZE = 12  # connections of the main pool: a worker's threads share them (each statement holds one briefly)
LOCK_POOL_SIZE = 4  # connections that hold write locks (a bank holds one at a time: its writes are serialised)
CONNECT_TIMEOUT_S = 10.0
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_CREATE_LOCK = "vecmem: creating the schema"


def describe(url: str) -> str:
    """The database a URL names, for messages: host, port and database, never the user's password."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"postgresql://{host}{port}{parts.path or '/'}"


@contextlib.contextmanager
def _mapped(where: str, doing: str) -> Iterator[None]:
    """psycopg's failures, and a pool that gives no connection in time, as StoreError (most specific first)."""
    try:
        yield
    except PoolTimeout as exc:
        raise StoreError(f"{doing}: no connection to the state database {where} within {CONNECT_TIMEOUT_S:.0f} s "
                         f"({exc})") from exc
    except psycopg.OperationalError as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreError(f"{doing}: the state database {where} cannot be reached or failed: {first_line}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"{doing}: the state database {where}: {str(exc).strip() or type(exc).__name__}") from exc


def _postgres_sql(sql: str) -> str:
    """SQL written with ``?`` placeholders, as psycopg takes it (``%s``; a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Statements:
    """A transaction's statements on one connection (database.Transaction)."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self._connection.execute(_postgres_sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._connection.cursor() as cursor:
            cursor.executemany(_postgres_sql(sql), [tuple(row) for row in rows])

    def exclusive(self, name: str) -> None:
        self._connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(name),))


class _Pools:
    """The pools of one URL and schema in this process, and how many parts use them."""

    def __init__(self, url: str, schema: str, where: str) -> None:
        options = f"-c search_path={schema}"

        def pool(size: int, name: str) -> ConnectionPool:
            return ConnectionPool(url, min_size=1, max_size=size, open=False, name=name, timeout=CONNECT_TIMEOUT_S,
                                  kwargs={"autocommit": True, "options": options,
                                          "connect_timeout": int(CONNECT_TIMEOUT_S)})

        with _mapped(where, "opening the state database"):
            # one plain connection first: a refused connection, a wrong password or a missing database is said
            # at once, in PostgreSQL's words, where a pool would retry quietly until its timeout
            psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT_S), options=options).close()
        self.main = pool(POOL_SIZE, "vecmem-state")
        self.locks = pool(LOCK_POOL_SIZE, "vecmem-locks")
        try:
            with _mapped(where, "opening the state database"):
                self.main.open(wait=True, timeout=CONNECT_TIMEOUT_S)
                self.locks.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except BaseException:
            self.close()  # a pool left open would keep trying to connect in its threads
            raise
        self.users = 0

    def close(self) -> None:
        self.locks.close()
        self.main.close()


_OPEN: dict[tuple[str, str], _Pools] = {}
_OPEN_LOCK = threading.Lock()


class PostgresDatabase:
    """The state tables in one schema of a PostgreSQL database (database.Database)."""

    dialect = "postgresql"

    def __init__(self, url: str, schema: str, *, label: str = "state database") -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError(f"VECMEM_DATABASE_SCHEMA: must be a lower-case SQL name (letters, digits, _), "
                              f"got {schema!r}")
        self.label = label
        self.schema = schema
        self.where = describe(url)
        self._key = (url, schema)
        with _OPEN_LOCK:
            pools = _OPEN.get(self._key)
            if pools is None:
                pools = _Pools(url, schema, self.where)
                try:
                    self._ensure_schema(pools)
                except BaseException:
                    pools.close()
                    raise
                _OPEN[self._key] = pools
            pools.users += 1
        self._pools = pools
        self._closed = False

    def _ensure_schema(self, pools: _Pools) -> None:
        with _mapped(self.where, "creating the state schema"), pools.main.connection() as connection:
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(_CREATE_LOCK),))
                connection.execute(pg_sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pg_sql.Identifier(self.schema)))

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with _mapped(self.where, self.label), self._pools.main.connection() as connection:
            cursor = connection.execute(_postgres_sql(sql), tuple(params))
            return cursor.fetchall() if cursor.description is not None else []

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        with _mapped(self.where, self.label), self._pools.main.connection() as connection:
            row = connection.execute(_postgres_sql(sql) + " RETURNING id", tuple(params)).fetchone()
        return row[0] if row is not None and isinstance(row[0], int) else 0

    def create(self, schema: str) -> None:
        """Create the tables ``schema`` declares; concurrent creators wait for each other (two sessions running
        the same ``CREATE TABLE IF NOT EXISTS`` at once can otherwise collide on PostgreSQL's catalogue)."""
        with _mapped(self.where, f"creating the {self.label}"), self._pools.main.connection() as connection:
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(_CREATE_LOCK),))
                for statement in re.sub(r"--[^\n]*", "", ddl(schema, self.dialect)).split(";"):
                    if statement.strip():
                        connection.execute(statement)

    @contextlib.contextmanager
    def reading(self) -> Iterator[_Statements]:
        with _mapped(self.where, self.label), self._pools.main.connection() as connection:
            yield _Statements(connection)

    @contextlib.contextmanager
    def transaction(self, *, immediate: bool = True) -> Iterator[_Statements]:
        """A transaction (READ COMMITTED); ``immediate`` means nothing here: rows are locked as they are written,
        and ``exclusive`` serialises what must not interleave."""
        with _mapped(self.where, self.label), self._pools.main.connection() as connection:
            with connection.transaction():
                yield _Statements(connection)

    def write_locks(self) -> PostgresWriteLocks:
        """Users' write locks on this database's lock pool; closing them closes this database object."""
        return PostgresWriteLocks(self, self._pools.locks)

    def close(self) -> None:
        with _OPEN_LOCK:
            if self._closed:
                return
            self._closed = True
            self._pools.users -= 1
            if self._pools.users == 0:
                _OPEN.pop(self._key, None)
                self._pools.close()


class PostgresWriteLocks:
    """Users' write locks as advisory locks, held in a transaction on a connection of the lock pool
    (database.WriteLocks). A thread that holds a user's lock does not take it again."""

    def __init__(self, database: PostgresDatabase, pool: ConnectionPool) -> None:
        self._database = database
        self._pool = pool
        self._where = database.where
        self._held = threading.local()

    @contextlib.contextmanager
    def holding(self, user_ids: Iterable[str]) -> Iterator[None]:
        held: set[int] = self._held.__dict__.setdefault("keys", set())
        wanted = sorted({lock_key(f"vecmem user stripe {stripe(user)}") for user in user_ids} - held)
        if not wanted:
            yield
            return
        with _mapped(self._where, "taking a write lock"), self._pool.connection() as connection:
            with connection.transaction():
                for key in wanted:  # in one order, so two holders of several users never wait on each other
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
                held.update(wanted)
                try:
                    yield
                finally:
                    held.difference_update(wanted)

    def close(self) -> None:
        self._database.close()
