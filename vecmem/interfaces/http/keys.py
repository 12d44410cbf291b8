"""API keys of ``vecmem serve``: an admin key (every user, store-wide routes) and per-user keys bound to one
``user_id``, created and revoked with ``vecmem keys``.

A key is ``vmk_<id>_<secret>``: ``id`` (12 hex digits) names the key in ``vecmem keys list`` and ``revoke``;
``secret`` is 32 random bytes (URL-safe base64). Only the SHA-256 of the whole key is stored, in
``VECMEM_HOME/keys.sqlite3`` (mode 0600, and SQLite gives its -wal and -shm files the same mode): the secret is
printed once, at creation, and cannot be read back. With ``VECMEM_DATABASE_URL`` the keys live in the shared
PostgreSQL database instead, so a key made on one worker opens every worker. A presented key is looked up by its id and its hash
compared with ``hmac.compare_digest``, so the comparison takes the same time whatever the key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vecmem.config import Settings
from vecmem.errors import InvalidInputError, NotFoundError
from vecmem.storage.state.backend import state_database
from vecmem.storage.state.database import Database
from vecmem.storage.state.sqlite import SQLiteFile
from vecmem.validation import validate_identifier

__all__ = ["ADMIN", "ApiKey", "KeyStore", "Principal", "keys_path"]

_PREFIX = "vmk_"
_ID_HEX_DIGITS = 12
_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    user_id TEXT,              -- NULL: an admin key
    sha256 TEXT NOT NULL,      -- of the whole key; the key itself is never stored
    created_at TEXT NOT NULL,
    revoked_at TEXT            -- NULL while the key is valid
);
"""


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: ``user_id`` None is the admin (any user, store-wide routes)."""

    user_id: str | None
    key_id: str | None = None  # None for the configured token (--token / VECMEM_API_TOKEN) or an open server

    @property
    def admin(self) -> bool:
        return self.user_id is None


ADMIN = Principal(user_id=None)


@dataclass(frozen=True)
class ApiKey:
    """One stored key, as `vecmem keys list` shows it (never its secret)."""

    id: str
    user_id: str | None
    created_at: str
    revoked_at: str | None

    def to_dict(self) -> dict[str, str | bool | None]:
        return {"id": self.id, "user_id": self.user_id, "admin": self.user_id is None,
                "created_at": self.created_at, "revoked_at": self.revoked_at}


def keys_path(home: Path) -> Path:
    return home / "keys.sqlite3"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _owner_only(path: Path) -> None:
    """Create ``path`` readable and writable by its owner only (before SQLite opens it, whatever the umask)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)


class KeyStore:
    """The keys of one store: a path (the key file of a VECMEM_HOME) or a ``Database`` (the shared one)."""

    def __init__(self, where: Path | Database) -> None:
        if isinstance(where, Path):
            _owner_only(where)
            where = SQLiteFile(where, "", label="key file")
        self._db: Database = where
        self._db.create(_SCHEMA)

    @classmethod
    def open(cls, settings: Settings) -> KeyStore:
        """The configured store's keys: VECMEM_HOME's key file, or the shared state database."""
        return cls(state_database(settings, keys_path(settings.home).name, "key store"))

    def create(self, user_id: str | None) -> tuple[ApiKey, str]:
        """A new key for ``user_id`` (None: an admin key); returns it and its secret, shown this once."""
        user = None if user_id is None else validate_identifier("user_id", user_id)
        key_id = secrets.token_hex(_ID_HEX_DIGITS // 2)
        secret = f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        created = datetime.now(UTC).isoformat(timespec="seconds")
        self._db.insert("INSERT INTO api_keys (id, user_id, sha256, created_at) VALUES (?, ?, ?, ?)",
                        (key_id, user, _digest(secret), created))
        return ApiKey(key_id, user, created, None), secret

    def list(self) -> list[ApiKey]:
        rows = self._db.fetch("SELECT id, user_id, created_at, revoked_at FROM api_keys ORDER BY created_at, id")
        return [ApiKey(*row) for row in rows]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key for good (it stays listed, with the time of revocation)."""
        if not isinstance(key_id, str) or not key_id.strip():
            raise InvalidInputError("key_id", "must be the id `vecmem keys list` shows")
        revoked = datetime.now(UTC).isoformat(timespec="seconds")
        with self._db.transaction() as db:
            row = db.execute("SELECT id, user_id, created_at, revoked_at FROM api_keys WHERE id = ?",
                             (key_id.strip(),)).fetchone()
            if row is None:
                raise NotFoundError(f"no API key with id {key_id!r} (see `vecmem keys list`)")
            if row[3] is not None:
                return ApiKey(*row)
            db.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (revoked, row[0]))
        return ApiKey(row[0], row[1], row[2], revoked)

    def any_valid(self) -> bool:
        """Whether any key is valid: then every request must present one."""
        return bool(self._db.fetch("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1"))

    def principal(self, presented: str) -> Principal | None:
        """Who a presented key acts for, or None when it is no valid key of this store."""
        key_id = presented[len(_PREFIX):len(_PREFIX) + _ID_HEX_DIGITS]
        if not presented.startswith(_PREFIX) or presented[len(_PREFIX) + _ID_HEX_DIGITS:][:1] != "_":
            return None
        rows = self._db.fetch("SELECT user_id, sha256 FROM api_keys WHERE id = ? AND revoked_at IS NULL", (key_id,))
        if not rows or not hmac.compare_digest(_digest(presented), rows[0][1]):
            return None
        return Principal(user_id=rows[0][0], key_id=key_id)

    def close(self) -> None:
        self._db.close()
