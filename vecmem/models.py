"""Value types shared by every part of vecmem (standard library only).

``MemoryRecord`` validates itself on construction: an invalid value raises ``InvalidInputError`` naming the
field and the reason, so nothing half-valid ever reaches the store.

Importance is stored as a float in [0, 1], given by one rule everywhere (``validation.normalize_importance``):
a value in [0, 1] as it is (``1`` and ``1.0`` are both 1.0), a value above 1 up to 10 on the ten-point scale
(``7`` -> 0.7, ``10`` -> 1.0), anything negative or above 10 refused.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, cast, get_args

from vecmem.errors import InvalidInputError
from vecmem.validation import (
    GLOBAL_SCOPE,
    MAX_CONTENT_CHARS,
    check_choice,
    check_context,
    check_message_id,
    check_speaker,
    check_tags,
    check_text,
    check_time,
    check_unit_interval,
    normalize_importance,
    parse_timestamp,
    validate_identifier,
    validate_session_id,
)

__all__ = ["MemoryType", "MemorySource", "MemoryStatus", "MEMORY_TYPES", "SOURCES", "STATUSES", "GLOBAL_SCOPE",
           "MAX_CONTENT_CHARS", "MemoryRecord", "MemoryFilter", "Provenance", "Hit", "Turn", "PromptPack",
           "ImportReport", "StoreStats", "normalize_importance", "parse_timestamp", "validate_identifier",
           "validate_session_id"]

MemoryType = Literal["fact", "preference", "instruction", "conclusion"]
MemorySource = Literal["user", "extracted", "manual", "template"]
# live: retrieved; archived: left retrieval by the forgetting policy (restorable); pending: an uncertain
# extraction waiting in the review queue (maintenance/hygiene.py)
MemoryStatus = Literal["live", "archived", "pending"]
MEMORY_TYPES: tuple[MemoryType, ...] = get_args(MemoryType)
SOURCES: tuple[MemorySource, ...] = get_args(MemorySource)
STATUSES: tuple[MemoryStatus, ...] = get_args(MemoryStatus)
LIVE: MemoryStatus = "live"
SUPERSEDED = "superseded"  # how a replaced memory's status is shown (to_dict): stored, it is live with superseded_by
MAX_PROVENANCE_MESSAGES = 64


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Provenance:
    """Where an extracted memory came from: the conversation (``session_id``: the chat's session, or the one
    ``add_messages`` was given; None without one), the messages in it that said it (``message_ids``: the chat's
    turn ids; the ids given to ``add_messages``, else the messages' positions in the list) and, in a conversation
    between people, who said them (``speaker``: a ``Turn``'s speaker; None for the user of a chat). A memory with
    a speaker is a turn of a conversation: a name its message addresses ("Hey Anna!") names the listener, not
    what it is about (retrieval/query/speakers.py). Validated like every field: identifiers (a message id may be
    a non-negative integer, kept as text), at most ``MAX_PROVENANCE_MESSAGES`` messages, a speaker on one line,
    and at least a session or a message."""

    session_id: str | None = None
    message_ids: tuple[str, ...] = ()
    speaker: str | None = None

    def __post_init__(self) -> None:
        where, ids = "provenance.message_ids", cast(object, self.message_ids)  # checked: given by anyone
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise InvalidInputError(where, f"must be a list of message ids, got {type(ids).__name__}")
        if len(ids) > MAX_PROVENANCE_MESSAGES:
            raise InvalidInputError(where, f"has {len(ids)} ids; the limit is {MAX_PROVENANCE_MESSAGES}")
        checked = tuple(dict.fromkeys(check_message_id(where, message_id) for message_id in ids))
        session = None if self.session_id is None else validate_identifier("provenance.session_id", self.session_id)
        if session is None and not checked:
            raise InvalidInputError("provenance", "must name a session or at least one message")
        object.__setattr__(self, "session_id", session)
        object.__setattr__(self, "message_ids", checked)
        if self.speaker is not None:
            object.__setattr__(self, "speaker", check_speaker("provenance.speaker", self.speaker))

    def to_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"session_id": self.session_id, "message_ids": list(self.message_ids)}
        if self.speaker is not None:  # a chat's memories, the most of them, read as they did before speakers
            shown["speaker"] = self.speaker
        return shown

    @classmethod
    def of(cls, value: object) -> Provenance | None:
        """None, a Provenance, or a mapping of ``session_id``, ``message_ids`` and ``speaker`` (as ``to_dict``
        writes it)."""
        if value is None or isinstance(value, Provenance):
            return value
        if not isinstance(value, Mapping):
            raise InvalidInputError("provenance", f"must be an object (session_id, message_ids, speaker), got "
                                    f"{type(value).__name__}")
        unknown = sorted(set(value) - {"session_id", "message_ids", "speaker"})
        if unknown:
            raise InvalidInputError(f"provenance.{unknown[0]}", "is not a provenance field")
        return cls(value.get("session_id"), value.get("message_ids") or (), value.get("speaker"))


@dataclass(frozen=True)
class MemoryRecord:
    """One long-term memory. Construction validates and normalises every field."""

    id: str
    content: str
    type: MemoryType = "fact"
    tags: tuple[str, ...] = ()
    importance: float = 0.5
    scope: str = GLOBAL_SCOPE  # "global", or the id of the one session the memory belongs to
    created_at: datetime = field(default_factory=_utc_now)
    last_accessed: datetime | None = None  # None until a search first returns it
    access_count: int = 0
    source: MemorySource = "manual"
    confidence: float = 1.0
    superseded_by: str | None = None
    user_id: str = "default"
    context: str = ""  # found-by text for keyword search only (surrounding turns); never shown to the model
    status: MemoryStatus = LIVE  # live | archived | pending: only live memories (not superseded) are retrieved
    # 1 when created, one more with every write that changes it: an update built on an older version is refused
    # (``MemoryBank.update(expected_version=...)``, HTTP 409) instead of overwriting what another client wrote
    version: int = 1
    provenance: Provenance | None = None  # where an extracted memory came from: session and messages

    def __post_init__(self) -> None:
        normalised = {
            "id": validate_identifier("id", self.id),
            "content": check_text("content", self.content, max_chars=MAX_CONTENT_CHARS),
            "type": check_choice("type", self.type, MEMORY_TYPES),
            "tags": check_tags(self.tags),
            "importance": normalize_importance(self.importance),
            "scope": validate_identifier("scope", self.scope),
            "created_at": parse_timestamp("created_at", self.created_at),
            "last_accessed": None
            if self.last_accessed is None
            else parse_timestamp("last_accessed", self.last_accessed),
            "source": check_choice("source", self.source, SOURCES),
            "confidence": check_unit_interval("confidence", self.confidence),
            "superseded_by": None
            if self.superseded_by in (None, "")
            else validate_identifier("superseded_by", self.superseded_by),
            "user_id": validate_identifier("user_id", self.user_id),
            "context": check_context(self.context),
            "status": check_choice("status", self.status, STATUSES),
            "provenance": Provenance.of(self.provenance),
        }
        if isinstance(self.access_count, bool) or not isinstance(self.access_count, int) or self.access_count < 0:
            raise InvalidInputError("access_count", f"must be a non-negative integer, got {self.access_count!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise InvalidInputError("version", f"must be a positive integer, got {self.version!r}")
        if normalised["superseded_by"] == normalised["id"]:
            raise InvalidInputError("superseded_by", "a memory cannot supersede itself")
        for name, value in normalised.items():
            object.__setattr__(self, name, value)

    @classmethod
    def trusted(cls, **fields: Any) -> MemoryRecord:
        """Build a record from values the store already validated on the way in, without checking them again
        (reading rows back is on the search hot path). Everything else goes through the constructor."""
        record = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(record, name, value)
        return record

    @property
    def session_id(self) -> str | None:
        """The session this memory is scoped to, or None for a global memory."""
        return None if self.scope == GLOBAL_SCOPE else self.scope

    @property
    def superseded(self) -> bool:
        return self.superseded_by is not None

    @property
    def retrievable(self) -> bool:
        """Live and not superseded: what search and build_context may return."""
        return self.status == LIVE and self.superseded_by is None

    @property
    def last_used(self) -> datetime:
        """The later of created_at and last_accessed: what recency is counted from."""
        if self.last_accessed is None:
            return self.created_at
        return max(self.created_at, self.last_accessed)

    def with_changes(self, **changes: Any) -> MemoryRecord:
        """A copy with some fields replaced, validated like a new record."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 UTC); the format of `vecmem export`. A memory a newer one replaced
        shows ``"status": "superseded"`` (read back as live and superseded: ``superseded_by`` holds the link)."""
        data = asdict(self)
        if self.superseded_by is not None:
            data["status"] = SUPERSEDED
        data["tags"] = list(self.tags)
        data["created_at"] = self.created_at.isoformat()
        data["last_accessed"] = None if self.last_accessed is None else self.last_accessed.isoformat()
        data["provenance"] = None if self.provenance is None else self.provenance.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **defaults: Any) -> MemoryRecord:
        """Build a record from a mapping such as one line of an export file.

        ``session_id`` is accepted as another way to give a session scope; keys in ``defaults`` fill what the
        mapping leaves out (the CLI passes the user and a generated id this way). Unknown keys are refused so a
        misspelt field is not silently dropped.
        """
        if not isinstance(data, Mapping):
            raise InvalidInputError("record", f"must be a JSON object, got {type(data).__name__}")
        values = {**defaults, **{k: v for k, v in data.items() if v is not None or k == "superseded_by"}}
        if values.get("status") == SUPERSEDED:  # as to_dict shows a replaced memory: superseded_by says by what
            if not values.get("superseded_by"):
                raise InvalidInputError("status", "is 'superseded' but superseded_by names no memory")
            values["status"] = LIVE
        session = values.pop("session_id", None)
        if session not in (None, ""):
            if values.get("scope", GLOBAL_SCOPE) not in (GLOBAL_SCOPE, session):
                raise InvalidInputError("session_id", "conflicts with scope")
            values["scope"] = session
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidInputError(unknown[0], "is not a memory field")
        for required in ("id", "content"):
            if required not in values:
                raise InvalidInputError(required, "is required")
        if "tags" in values and isinstance(values["tags"], list):
            values["tags"] = tuple(values["tags"])
        return cls(**values)


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories of one user an operation may see.

    ``session_id=None`` with ``all_sessions=False`` means global memories only; with a session id, the
    global memories plus that session's. ``all_sessions=True`` (listing, export) ignores scope.
    """

    session_id: str | None = None
    all_sessions: bool = False
    types: frozenset[str] | None = None
    include_superseded: bool = False
    statuses: frozenset[str] | None = frozenset({LIVE})  # None: every status (export)

    def __post_init__(self) -> None:
        if self.session_id is not None:
            validate_session_id(self.session_id)
        if self.types is not None:
            types = frozenset(self.types)
            if not types:
                raise InvalidInputError("types", "must name at least one type when given")
            for memory_type in types:
                check_choice("types", memory_type, MEMORY_TYPES)
            object.__setattr__(self, "types", types)
        if self.statuses is not None:
            statuses = frozenset(self.statuses)
            for status in statuses:
                check_choice("statuses", status, STATUSES)
            object.__setattr__(self, "statuses", statuses)

    @property
    def scopes(self) -> tuple[str, ...] | None:
        """The scopes visible through this filter, or None when scope is not restricted."""
        if self.all_sessions:
            return None
        return (GLOBAL_SCOPE,) if self.session_id is None else (GLOBAL_SCOPE, self.session_id)

    def matches(self, record: MemoryRecord) -> bool:
        """The same predicate the store applies, checked again in memory so no filter bug can leak."""
        if record.superseded and not self.include_superseded:
            return False
        if self.statuses is not None and record.status not in self.statuses:
            return False
        if self.types is not None and record.type not in self.types:
            return False
        scopes = self.scopes
        return scopes is None or record.scope in scopes


@dataclass(frozen=True)
class Hit:
    """One retrieved memory with the parts of its score: score = w_s·similarity + w_r·recency + w_i·importance
    (gated: the priors times max(1 - similarity, 0.2), retrieval/rank.py). ``similarity``: from the query's typical
    candidate (0) to its best evidence (retrieval/fusion.py), relative to
    its own query (``closeness`` compares across queries); in hybrid mode it fuses ``dense`` (cosine) and
    ``keyword`` (BM25 relative to the query's best keyword match); either is None when its side did not run. ``relevance`` (retrieval/relevance.py) is how much the
    memory has to do with the query whatever the mode and language, in [0, 1]: what the relevance floor of a
    prompt compares (None when nothing was asked: an empty query). ``matched_terms``: the query's words that the
    memory's keyword tokens hold (content, tags or context), as the query wrote them (retrieval/query/tokenize.py).
    """

    id: str
    content: str
    type: MemoryType
    score: float
    similarity: float
    recency: float
    importance: float
    record: MemoryRecord
    dense: float | None = None
    keyword: float | None = None
    relevance: float | None = None
    matched_terms: tuple[str, ...] = ()
    # how alike memory and query are on the model's calibrated scale (retrieval/embedding/calibration.py: 0 unrelated, 0.8 a
    # paraphrase, 1 the same statement), comparable across queries, languages and models: what duplicates,
    # supersession and thresholds compare; None where the model cannot tell (or the dense side did not run)
    closeness: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "type": self.type,
            "score": self.score,
            "similarity": self.similarity,
            "recency": self.recency,
            "importance": self.importance,
            "dense": self.dense,
            "keyword": self.keyword,
            "relevance": self.relevance,
            "closeness": self.closeness,
            "matched_terms": list(self.matched_terms),
            "scope": self.record.scope,
            "tags": list(self.record.tags),
        }


@dataclass(frozen=True)
class Turn:
    """One message of a conversation; ``id``, when the caller gives one, is what a memory learnt from it names as
    its provenance (``MemoryBank.add_messages``). ``speaker``: who said it, when a conversation has several people
    in it (what is learnt from it is about them by name, not about "the user"); ``time``: when it was said, the
    day its "yesterday" and "last week" are read from (else the time it is learnt)."""

    role: str
    content: str
    id: str | None = None
    speaker: str | None = None
    time: datetime | None = None

    def __post_init__(self) -> None:
        check_choice("role", self.role, ("user", "assistant", "system"))
        if not isinstance(self.content, str):
            raise InvalidInputError("content", f"must be a string, got {type(self.content).__name__}")
        if self.id is not None:
            object.__setattr__(self, "id", check_message_id("id", self.id))
        if self.speaker is not None:
            object.__setattr__(self, "speaker", check_speaker("speaker", self.speaker))
        if self.time is not None:
            object.__setattr__(self, "time", check_time("time", self.time))


@dataclass(frozen=True)
class PromptPack:
    """Messages ready for a chat-completions call, with what each section costs.

    ``tokens`` and ``limits`` are keyed ``system``, ``long_term``, ``short_term`` and ``current``.
    ``long_term`` is the text of the long-term section (its own system message, absent when empty);
    ``memories`` are the hits that made it into it, best first; ``dropped_ids`` the ones the budget left out;
    ``truncated_ids`` the ones cut short (with a visible marker) to fit; ``below_floor_ids`` the ones retrieved but
    left out for a relevance under the floor (``VECMEM_RELEVANCE_FLOOR``).
    """

    messages: tuple[dict[str, str], ...]
    tokens: dict[str, int]
    limits: dict[str, int]
    long_term: str = ""
    memories: tuple[Hit, ...] = ()
    dropped_ids: tuple[str, ...] = ()
    truncated_ids: tuple[str, ...] = ()
    below_floor_ids: tuple[str, ...] = ()

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens.values())


@dataclass(frozen=True)
class ImportReport:
    """What an import or seed did; ``errors`` holds (line number, message) for each refused line."""

    added: int = 0
    skipped: int = 0
    errors: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class StoreStats:
    """Counts for one user, or for the whole store when ``user_id`` is None."""

    user_id: str | None
    count: int
    live: int  # retrievable: live and not superseded
    superseded: int
    by_type: dict[str, int]
    by_scope: dict[str, int]
    users: tuple[str, ...]
    embed_model: str
    embed_dim: int
    location: str
    archived: int = 0
    pending: int = 0  # waiting in the review queue

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["users"] = list(self.users)
        return data


def normalize_for_hash(text: str) -> str:
    """Case- and width-insensitive form used to recognise the same memory written twice."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())
