"""The vecmem exception tree.

Every error vecmem raises on purpose is a ``VecmemError``; third-party exceptions are converted at the one
module that imports that SDK (``raise ... from exc``), so callers only ever catch these::

    VecmemError
    ├── ConfigError              a setting or environment variable has an invalid value
    ├── InvalidInputError        a caller passed a bad value (``.field`` names it)
    ├── NotFoundError            no memory with that id for that user
    ├── ConflictError            well formed, but the memory's state refuses it (not pending, not superseded,
    │                            an id already used for other text, a supersession that would loop)
    ├── StoreError               the vector store failed or could not be reached
    │   ├── EmbeddingMismatchError   the store was built with another embedding model
    │   └── StoreInUseError          another process has this embedded store open
    ├── EmbeddingError           the embedding model could not be loaded or failed
    ├── LLMError                 the chat model failed: timeout, 429, 5xx, unreachable, empty answer
    │   ├── ExtractionError          its reply was not the JSON the schema asks for
    │   └── UpstreamError            a request `vecmem proxy` forwarded failed (``.status``: what to answer)
    └── BudgetError              a prompt section cannot fit its share of the context window

``is_user_error`` tells the CLI which of them are the user's to fix (exit code 2) rather than an
operational failure (exit code 1).
"""

from __future__ import annotations

__all__ = [
    "VecmemError",
    "ConfigError",
    "InvalidInputError",
    "NotFoundError",
    "ConflictError",
    "StoreError",
    "EmbeddingMismatchError",
    "StoreInUseError",
    "EmbeddingError",
    "LLMError",
    "ExtractionError",
    "UpstreamError",
    "BudgetError",
    "is_user_error",
]


class VecmemError(Exception):
    """Base class of every error vecmem raises on purpose."""


class ConfigError(VecmemError):
    """A setting (usually an environment variable) has a value vecmem cannot use."""


class InvalidInputError(VecmemError, ValueError):
    """A caller passed a value vecmem refuses; ``field`` names the offending field."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class NotFoundError(VecmemError, KeyError):
    """No memory with the given id exists for the given user."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else "not found"


class ConflictError(VecmemError):
    """The request is well formed, but what is stored refuses it: approving a memory that is not pending,
    restoring one that is not superseded, reusing an id for other text, a supersession that would form a cycle
    or cross scopes, an update built on a version of the memory that is no longer the stored one (then
    ``current_version`` says which is). Trying again will not help until the state changes; ``field`` names what
    conflicts. HTTP answers 409."""

    def __init__(self, field: str, reason: str, *, current_version: int | None = None) -> None:
        self.field = field
        self.reason = reason
        self.current_version = current_version
        super().__init__(f"{field}: {reason}")


class StoreError(VecmemError):
    """The vector store failed, is unreachable, or holds data vecmem cannot read."""


class EmbeddingMismatchError(StoreError):
    """The store was built with a different embedding model than the one configured."""

    def __init__(self, stored_model: str, stored_dim: int, configured_model: str) -> None:
        self.stored_model = stored_model
        self.stored_dim = stored_dim
        self.configured_model = configured_model
        dims = f", {stored_dim} dims" if stored_dim else ""
        super().__init__(
            f"this store was built with embedding model '{stored_model}'{dims} but the configured model is "
            f"'{configured_model}'; run `vecmem reindex` to re-embed every memory with '{configured_model}', "
            f"or set VECMEM_EMBED_MODEL={stored_model} to keep the old one"
        )


class StoreInUseError(StoreError):
    """Another process has this embedded store open. Chroma's embedded mode serves one process: a second one
    would search a stale index (it does not see the first one's writes until it writes itself)."""


class EmbeddingError(VecmemError):
    """The embedding model could not be found, loaded or run."""


class LLMError(VecmemError):
    """The chat model could not be reached or did not give a usable answer."""


class ExtractionError(LLMError):
    """The model answered, but not with JSON that passes the schema; nothing was written."""


class UpstreamError(LLMError):
    """A chat-completions request forwarded as the client sent it (``vecmem proxy``) failed. ``status`` is the HTTP
    status to answer the client with: the model server's own (400, 401, 404, 429, 500, ...), 504 when it did not
    answer in time, 502 when it could not be reached or its reply could not be read. ``kind``, ``code`` and
    ``param`` are the server's error ``type``, ``code`` and ``param`` when it sent them; ``retry_after`` its
    ``Retry-After`` header."""

    def __init__(self, message: str, *, status: int, kind: str | None = None, code: str | None = None,
                 param: str | None = None, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.code, self.param, self.retry_after = status, kind, code, param, retry_after


class BudgetError(VecmemError):
    """A prompt section that cannot be shortened does not fit its share of the context window."""


_USER_ERRORS = (ConfigError, InvalidInputError, NotFoundError, ConflictError, EmbeddingMismatchError, StoreInUseError, BudgetError)


def is_user_error(error: BaseException) -> bool:
    """True when the error is the user's to fix (bad input or configuration), not a failure of ours."""
    return isinstance(error, _USER_ERRORS)
