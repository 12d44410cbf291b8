"""Where this process keeps the state it shares with the others (database.py says what and why): SQLite files in
``VECMEM_HOME``, or the PostgreSQL database of ``VECMEM_DATABASE_URL``. psycopg is imported only when a URL is
configured, so a command on the default files never pays for it.
"""

from __future__ import annotations

from pathlib import Path

from vecmem.config import Settings
from vecmem.storage.state.database import Database, FileWriteLocks, WriteLocks

__all__ = ["state_database", "write_locks"]


def state_database(settings: Settings, file_name: str, label: str) -> Path | Database:
    """Where one part of the state lives: its SQLite file in VECMEM_HOME (the part opens it with its own
    options), or the shared PostgreSQL database."""
    if settings.database_url is None:
        return settings.home / file_name
    from vecmem.storage.state.postgres import PostgresDatabase

    return PostgresDatabase(settings.database_url, settings.database_schema, label=label)


def write_locks(settings: Settings) -> WriteLocks:
    """Users' write locks: lock files in VECMEM_HOME (the processes of one machine), or advisory locks in the
    shared PostgreSQL database (every worker)."""
    if settings.database_url is None:
        return FileWriteLocks(settings.home / "locks")
    from vecmem.storage.state.postgres import PostgresDatabase

    return PostgresDatabase(settings.database_url, settings.database_schema, label="write locks").write_locks()
