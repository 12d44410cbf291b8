"""The one module that imports chromadb (and httpx, its HTTP client): opening a client, and what they raise
turned into vecmem's errors by one table applied at one boundary.

Every Chroma call of the Chroma store runs inside ``chroma_errors(action)``. An exception whose type is in
``_table()`` becomes a ``StoreError`` (``raise ... from exc``); the first entry that matches wins, so the most
specific types come first. Anything else, vecmem's own errors and its bugs (a ``TypeError``, a ``KeyError``,
and the ``ValueError`` chromadb raises when vecmem hands it a malformed argument) propagates untouched.

What chromadb 1.5 raises, found by provoking each case, embedded and against ``chroma run``:

* a missing collection or database: ``NotFoundError``, both ways;
* creating a collection that exists: ``InternalError`` embedded, a bare ``ChromaError`` over HTTP (the server
  names no more specific type); ``UniqueConstraintError`` is what the type tree means for it. Only a lookup
  afterwards can tell a lost race from another failure, which ``create_or_existing`` does;
* a vector of the wrong dimension: ``InvalidArgumentError`` (``InvalidDimensionException`` is defined but not
  raised); an invalid collection name is one too, so the ``vecmem reindex`` hint goes on it only for calls
  that send vectors (``sends_vectors``);
* an unreachable or vanished server: ``httpx.ConnectError`` (an ``httpx.HTTPError``); a slow one:
  ``httpx.TimeoutException``; an error response whose body is not a Chroma error (a proxy's 502 page): a bare
  ``Exception`` carrying the body, recognised by its exact type;
* ``HttpClient(...)`` itself turns the failure of its first request into a ``ValueError`` raised while
  handling it; that one is recognised by the type of the exception it was raised from (``connecting``).

chromadb is imported when a client is opened, and the exception types only once an exception is being
mapped, so importing the store stays cheap (``vecmem --help`` loads no chromadb).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from vecmem.errors import InvalidInputError, StoreError
from vecmem.storage.files import private_dir

__all__ = [
    "DEFAULT_DATABASE",
    "DIMENSION_HINT",
    "chroma_errors",
    "chromadb_version",
    "create_or_existing",
    "found_or_none",
    "open_client",
    "store_error",
]

DEFAULT_DATABASE = "default_database"  # Chroma's own default

DIMENSION_HINT = "the embedding model changed its output size; run `vecmem reindex`"

_Found = TypeVar("_Found")
# (exception type, what it means for the user, or "" when the exception says it well enough)
_Entry = tuple[type[BaseException], str]


@functools.cache
def _table() -> tuple[_Entry, ...]:
    """The mapping, most specific type first."""
    import httpx
    from chromadb import errors

    return (
        (errors.InvalidDimensionException, DIMENSION_HINT),
        (errors.ChromaAuthError, "the Chroma server refused the credentials"),
        (errors.AuthorizationError, "the Chroma server refused the credentials"),
        (errors.NotFoundError, ""),  # another client dropped it, or a database was never created
        (errors.ChromaError, ""),  # InternalError, InvalidArgumentError, DuplicateIDError, RateLimitError, ...
        (httpx.TimeoutException, "the Chroma server did not answer in time"),
        (httpx.ConnectError, "cannot reach the Chroma server"),
        (httpx.HTTPError, "the connection to the Chroma server failed"),
    )


def _describe(exc: BaseException, *, sends_vectors: bool, connecting: bool) -> str | None:
    """What went wrong, for the StoreError's message; None for an exception that is not the SDK's to map."""
    from chromadb.errors import InvalidArgumentError

    if sends_vectors and isinstance(exc, InvalidArgumentError):
        return DIMENSION_HINT
    for kind, meaning in _table():
        if isinstance(exc, kind):
            return meaning
    # chromadb's HTTP client raises exactly Exception for an error response that is not a Chroma error;
    # vecmem never raises a bare one, and every other exception type is a subclass, so the test is exact
    if type(exc) is Exception:
        return "the Chroma server answered with an error"
    if connecting and isinstance(exc, ValueError) and exc.__context__ is not None:
        cause = _describe(exc.__context__, sends_vectors=False, connecting=False)
        if cause is not None:
            return cause or str(exc.__context__)
    return None


def store_error(
    exc: BaseException, action: str, *, sends_vectors: bool = False, connecting: bool = False
) -> StoreError | None:
    """The StoreError for an exception chromadb or httpx raised during ``action``; None when the exception is
    not one of theirs (it is then re-raised as it is).

    ``sends_vectors``: the call sent embeddings, so an invalid argument is their dimension.
    ``connecting``: the call opened a client, whose failed first request chromadb re-raises as a ValueError.
    """
    meaning = _describe(exc, sends_vectors=sends_vectors, connecting=connecting)
    if meaning is None:
        return None
    message = f"{action} failed: {str(exc) or type(exc).__name__}"
    return StoreError(f"{message} ({meaning})" if meaning else message)


@contextlib.contextmanager
def chroma_errors(action: str, *, sends_vectors: bool = False, connecting: bool = False) -> Iterator[None]:
    """Run Chroma calls, turning what chromadb and httpx raise into StoreError (see ``store_error``)."""
    try:
        yield
    except Exception as exc:
        error = store_error(exc, action, sends_vectors=sends_vectors, connecting=connecting)
        if error is None:
            raise
        raise error from exc


def found_or_none(fetch: Callable[[], _Found], action: str) -> _Found | None:
    """``fetch()``'s result, or None when Chroma says what it looks up does not exist (``NotFoundError``)."""
    from chromadb.errors import NotFoundError

    with chroma_errors(action):
        try:
            return fetch()
        except NotFoundError:
            return None


def create_or_existing(create: Callable[[], _Found], fetch: Callable[[], _Found], action: str) -> _Found:
    """``create()``'s result; when that fails because another client created the same thing first, what
    ``fetch()`` finds. chromadb 1.5 reports "already exists" only by a generic type (``InternalError``
    embedded, a bare ``ChromaError`` over HTTP), so a failure of those types is a lost race exactly when the
    lookup finds the thing; otherwise the creation's own error is raised."""
    from chromadb.errors import ChromaError, InternalError, UniqueConstraintError

    with chroma_errors(action):
        try:
            return create()
        except ChromaError as exc:
            if type(exc) not in (UniqueConstraintError, InternalError, ChromaError):
                raise  # a more specific type (InvalidArgumentError, NotFoundError, ...) is no race
            existing = found_or_none(fetch, action)
            if existing is None:
                raise
            return existing


# ----------------------------------------------------------------------------------------------- clients


def chromadb_version() -> str:
    """The installed chromadb's version (chroma/formats.py reads Chroma's private files only for known ones)."""
    import chromadb

    return str(chromadb.__version__)


def open_client(*, path: Path | None = None, url: str | None = None, database: str = DEFAULT_DATABASE) -> Any:
    """A Chroma client: embedded on the folder ``path``, or on the server at ``url`` (its ``database``, created
    when missing: one server can hold many vecmem stores). Telemetry is off."""
    try:
        import chromadb
        from chromadb.config import Settings as ChromaSettings
    except ImportError as exc:  # pragma: no cover - chromadb is a hard dependency
        raise StoreError(f"chromadb is not installed: {exc}") from exc
    if url is not None:
        parsed = urlparse(url)
        https = parsed.scheme == "https"
        port = parsed.port or (443 if https else 8000)
        host = parsed.hostname or "localhost"
        with chroma_errors(f"connecting to the Chroma server at {url}", connecting=True):
            if database != DEFAULT_DATABASE:
                admin = chromadb.AdminClient(ChromaSettings(
                    anonymized_telemetry=False, chroma_api_impl="chromadb.api.fastapi.FastAPI",
                    chroma_server_host=host, chroma_server_http_port=port, chroma_server_ssl_enabled=https,
                ))
                _ensure_database(admin, database)
            return chromadb.HttpClient(host=host, port=port, ssl=https, database=database,
                                       settings=ChromaSettings(anonymized_telemetry=False))
    if path is None:
        raise InvalidInputError("path", "a Chroma store needs a folder or a server URL")
    try:
        private_dir(path)  # Chroma's own files inside take the umask's mode; the folder keeps others out
    except OSError as exc:
        raise StoreError(f"cannot create the store folder {path}: {exc}") from exc
    with chroma_errors(f"opening the store in {path}"):
        return chromadb.PersistentClient(path=str(path), settings=ChromaSettings(anonymized_telemetry=False))


def _ensure_database(admin: Any, database: str) -> None:
    """Create the server's database unless it exists (another client may create it at the same moment)."""
    action = f"opening the database {database!r}"
    if found_or_none(lambda: admin.get_database(database), action) is None:
        create_or_existing(lambda: admin.create_database(database), lambda: admin.get_database(database), action)
