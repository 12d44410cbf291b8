"""Which of Chroma's private formats vecmem reads, and the versions it was written and tested against.

Two places read what Chroma does not publish: segments.py walks the HNSW segment files before Chroma loads them
(and cuts a torn one), and repair.py reads ``chroma.sqlite3`` (a collection's segment folder; its rows when
Chroma cannot serve them). A later chromadb may change either, and a walker that misreads a new layout would cut
every segment on every open. So both run only where this table says they were tested: the installed chromadb
in ``TESTED_CHROMADB``, each segment's header of a version in ``HNSW_HEADER_VERSIONS``, the SQLite schema at
``SQLITE_MIGRATIONS``. Anywhere else they do nothing but say so in one log line, and what Chroma raises goes to
the mend through its public API alone (repair.py).

To admit another chromadb: run tests/unit/test_segments.py, tests/integration/test_chroma_formats.py (segments
written by the installed chromadb) and tests/integration/test_torn_segment.py with it, then widen this table and
the pin in pyproject.toml together (test_chroma_formats.py checks that they agree).
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
from pathlib import Path

from vecmem.storage.chroma.client import chromadb_version

__all__ = [
    "HNSW_HEADER_VERSIONS",
    "SQLITE_MIGRATIONS",
    "TESTED_CHROMADB",
    "chromadb_known",
    "collections_present",
    "hnsw_header_known",
    "sqlite_schema_known",
]

log = logging.getLogger("vecmem")

# chromadb releases from the first up to the second (not included); pyproject.toml pins the same range
TESTED_CHROMADB = ((1, 5, 9), (1, 6))
# the version field hnswlib writes first in header.bin, as chromadb 1.5 persists it
HNSW_HEADER_VERSIONS = frozenset({1})
# the newest migration of each of chroma.sqlite3's schemas (its ``migrations`` table), as chromadb 1.5.9 leaves it
SQLITE_MIGRATIONS = {"sysdb": 10, "metadb": 6, "embeddings_queue": 2}

_said: set[str] = set()  # what was logged already: one line a process for each thing this check leaves alone


def chromadb_known() -> bool:
    """Whether the installed chromadb is one the private reads were tested against (else one log line)."""
    version = chromadb_version()
    if TESTED_CHROMADB[0] <= _release(version) < TESTED_CHROMADB[1]:
        return True
    _say_once(f"chromadb {version}", "vecmem: chromadb %s is not one the checks of Chroma's files were tested "
              "against (%s); they are left out, and Chroma's own errors are mended through its API alone", version,
              _range())
    return False


def hnsw_header_known(version: int, where: Path) -> bool:
    """Whether a segment header of this format version is one segments.py knows (else one log line)."""
    if version in HNSW_HEADER_VERSIONS:
        return True
    _say_once(f"hnsw {version}", "vecmem: HNSW segments of header version %d (the first: %s) are left to Chroma: "
              "the check of segments knows %s", version, where.name, sorted(HNSW_HEADER_VERSIONS))
    return False


def sqlite_schema_known(path: Path) -> bool:
    """Whether chroma.sqlite3 at ``path`` has the schema repair.py reads (and chromadb is known); else one log
    line. Reads only its ``migrations`` table, read-only."""
    if not chromadb_known():
        return False
    try:
        with _read_only(path, timeout=30) as db:
            found = dict(db.execute("SELECT dir, max(version) FROM migrations GROUP BY dir").fetchall())
    except sqlite3.Error as exc:
        found = {"error": str(exc)}
    if found == SQLITE_MIGRATIONS:
        return True
    _say_once(f"sqlite {sorted(found.items())}", "vecmem: %s has the schema versions %s, not the %s vecmem reads; "
              "its rows are read through Chroma alone", path, found, SQLITE_MIGRATIONS)
    return False


def collections_present(path: Path, ids: list[str]) -> bool:
    """Whether chroma.sqlite3 at ``path`` holds collections of every one of these ids (a saved replica names the
    collections its user's memories were in: retrieval/index/persisted.py). Read-only, one query, no chromadb:
    any error, a schema without the ``collections`` table included, is False."""
    if not ids or not path.is_file():
        return False
    try:
        with _read_only(path, timeout=5) as db:
            found = {row[0] for row in db.execute(
                f"SELECT id FROM collections WHERE id IN ({', '.join('?' * len(ids))})", ids).fetchall()}
    except sqlite3.Error:
        return False
    return found == set(ids)


def _read_only(path: Path, *, timeout: float) -> contextlib.closing[sqlite3.Connection]:
    """chroma.sqlite3 opened read-only (Chroma's own connections may be writing it), closed after the block."""
    return contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout))


def _release(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of a version string; () (older than any) when it does not start with one."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return () if match is None else tuple(int(part) for part in match.groups(default="0"))


def _range() -> str:
    low, high = (".".join(map(str, bound)) for bound in TESTED_CHROMADB)
    return f">={low},<{high}"


def _say_once(key: str, message: str, *args: object) -> None:
    if key not in _said:
        _said.add(key)
        log.warning(message, *args)
