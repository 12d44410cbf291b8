"""Field validation shared by the value types and the facade (standard library only).

Each check returns the value as vecmem stores it, or raises ``InvalidInputError`` naming the field and the
reason, so a caller's mistake is one clear message and nothing half-valid goes further.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from vecmem.errors import InvalidInputError

__all__ = [
    "GLOBAL_SCOPE",
    "MAX_CONTENT_CHARS",
    "MAX_CONTEXT_CHARS",
    "MAX_IDENTIFIER_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "NEW_ID_RULE",
    "MAX_SPEAKER_CHARS",
    "check_choice",
    "check_message_id",
    "check_context",
    "check_query",
    "check_type_names",
    "check_tags",
    "check_speaker",
    "check_text",
    "check_time",
    "check_unicode",
    "check_unit_interval",
    "normalize_importance",
    "parse_timestamp",
    "require_positive_int",
    "validate_identifier",
    "validate_new_id",
    "validate_session_id",
]

GLOBAL_SCOPE = "global"
MAX_CONTENT_CHARS = 8_000  # a memory is a statement, not a document; long text belongs in a RAG index
MAX_CONTEXT_CHARS = 8_000
MAX_IDENTIFIER_CHARS = 128
MAX_TAGS = 32
MAX_TAG_CHARS = 64

# C0/C1 control characters other than tab, newline and carriage return.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# The ids a caller may give a new memory: what a URL path segment, a shell argument and a JSON key carry as is
# (no "/", no "?", no "%", no spaces), so every route can name every memory created since. Content-derived ids
# (m-<hex>) and the eval sets' ids (LoCoMo's "D1:3") fit. Rows stored before the rule keep their ids: reading,
# editing and forgetting them go through ``validate_identifier`` only.
_NEW_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
NEW_ID_RULE = "1 to 128 of the characters A-Z a-z 0-9 . _ : @ -"


def check_unicode(field_name: str, value: object) -> str:
    """``value`` when it is valid Unicode text; a lone surrogate (a JSON ``"\\ud800"``, or the bytes of argv that
    do not decode, under Python's surrogateescape) is refused before anything tries to encode it."""
    if not isinstance(value, str):
        raise InvalidInputError(field_name, f"must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(field_name, "contains a lone surrogate and is not valid Unicode text") from None
    return value


def check_text(field_name: str, value: object, *, max_chars: int) -> str:
    """Return ``value`` stripped, or raise InvalidInputError saying why it cannot be stored."""
    if not isinstance(value, str):
        raise InvalidInputError(field_name, f"must be a string, got {type(value).__name__}")
    check_unicode(field_name, value)
    if _CONTROL_CHARS.search(value):
        raise InvalidInputError(field_name, "contains control characters")
    text = value.strip()
    if not text:
        raise InvalidInputError(field_name, "must not be empty or only whitespace")
    if len(text) > max_chars:
        raise InvalidInputError(field_name, f"is {len(text):,} characters; the limit is {max_chars:,}")
    return text


def validate_identifier(field_name: str, value: object) -> str:
    """Ids, user ids and session ids: short, printable, no surrounding whitespace."""
    text = check_text(field_name, value, max_chars=MAX_IDENTIFIER_CHARS)
    if text != value:
        raise InvalidInputError(field_name, "must not start or end with whitespace")
    if any(ch in "\t\r\n" for ch in text):
        raise InvalidInputError(field_name, "must be a single line")
    return text


def check_message_id(field_name: str, value: object) -> str:
    """The id of a message a memory came from: an identifier, or a non-negative integer (a position, a turn
    number), kept as its decimal text."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise InvalidInputError(field_name, f"must not be negative, got {value}")
        return str(value)
    if not isinstance(value, str):
        raise InvalidInputError(field_name, f"must be a string or an integer, got {type(value).__name__}")
    return validate_identifier(field_name, value)


MAX_SPEAKER_CHARS = 100


def check_speaker(field_name: str, value: object) -> str:
    """Who said a message ("Caroline", "李伟"): a name on one line; it becomes the subject of what is learnt."""
    text = check_text(field_name, value, max_chars=MAX_SPEAKER_CHARS)
    if any(ch in "\t\r\n" for ch in str(value)):  # the whole value, not only what is left once stripped
        raise InvalidInputError(field_name, "must be a single line")
    return text


def check_time(field_name: str, value: object) -> datetime:
    """When a message was said, as ``parse_timestamp`` reads it, but an aware time keeps its own zone: its
    calendar is the one its "yesterday" is read in."""
    return _aware_moment(field_name, value)


def validate_new_id(value: object) -> str:
    """The id a caller gives a memory it creates (add, import, add_records): an identifier in NEW_ID_RULE."""
    memory_id = validate_identifier("id", value)
    if not _NEW_ID.fullmatch(memory_id):
        raise InvalidInputError("id", f"{memory_id!r} is not a valid new id: use {NEW_ID_RULE}")
    return memory_id


def check_query(value: object, *, max_chars: int) -> str:
    """A search query: any text (empty too) up to ``max_chars``, valid Unicode."""
    if not isinstance(value, str):
        raise InvalidInputError("query", f"must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise InvalidInputError("query", f"is {len(value):,} characters; the limit is {max_chars:,}")
    return check_unicode("query", value)


def validate_session_id(value: object) -> str:
    """A session id: an identifier other than the reserved word for global memories."""
    session = validate_identifier("session_id", value)
    if session == GLOBAL_SCOPE:
        raise InvalidInputError("session_id", f"'{GLOBAL_SCOPE}' is reserved for global memories")
    return session


def normalize_importance(value: object) -> float:
    """The one importance rule of every interface (Python, CLI, HTTP, MCP, the panel): a number in [0, 1] is
    taken as it is (so 1 and 1.0 are both the top); a number above 1 and up to 10 is on the ten-point scale
    and divided by ten (7 -> 0.7, 10 -> 1.0); a negative number or one above 10 is refused.

    The test is the value, never its Python or JSON type: a form field, a shell argument and a model's tool call
    cannot be relied on to keep ``1`` and ``1.0`` apart, and reading ``1`` as 0.1 while ``1.0`` is 1.0 (as an
    earlier rule did) stored the opposite of what people meant. Nothing is lost by it: on the ten-point scale 1
    would be 0.1, which is written 0.1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError("importance", f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidInputError("importance", f"must be a finite number, got {value}")
    if value < 0:
        raise InvalidInputError("importance", f"{value} is negative; use a number in [0, 1], or 1-10 on the "
                                              "ten-point scale")
    if value > 10:
        raise InvalidInputError("importance", f"{value} is above 10; use a number in [0, 1], or 1-10 on the "
                                              "ten-point scale")
    return float(value) if value <= 1 else value / 10


def check_unit_interval(field_name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(field_name, f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(field_name, f"must be between 0 and 1, got {value}")
    return float(value)


def parse_timestamp(field_name: str, value: object) -> datetime:
    """Accept an aware datetime, a naive one (read as UTC), an ISO 8601 string or epoch seconds; the time in UTC."""
    moment = _aware_moment(field_name, value)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is a valid time whose UTC is before year 1
        raise InvalidInputError(field_name, f"is out of range in UTC: {value!r}") from None


def _aware_moment(field_name: str, value: object) -> datetime:
    """The moment ``value`` names, in its own zone (a naive one read as UTC)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if text[-1:] in ("Z", "z"):  # RFC 3339's UTC designator, either case
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInputError(field_name, f"is not an ISO 8601 time: {value!r}") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        try:
            moment = datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidInputError(field_name, f"epoch seconds out of range: {value}") from None
    else:
        raise InvalidInputError(field_name, f"must be a time, got {type(value).__name__}")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def check_context(value: object) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    return check_text("context", value, max_chars=MAX_CONTEXT_CHARS)


def check_tags(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInputError("tags", "must be a list of strings")
    if len(value) > MAX_TAGS:
        raise InvalidInputError("tags", f"has {len(value)} tags; the limit is {MAX_TAGS}")
    tags: list[str] = []
    for tag in value:
        text = check_text("tags", tag, max_chars=MAX_TAG_CHARS)
        if text not in tags:
            tags.append(text)
    return tuple(tags)


def check_choice(field_name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidInputError(field_name, f"must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


def require_positive_int(field_name: str, value: object) -> int:
    """A count the caller chose (k, a limit, a token window): an int >= 1, never a bool or a float."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(field_name, f"must be a positive integer, got {value!r}")
    return value


def check_type_names(types: Iterable[str] | str | None) -> frozenset[str] | None:
    """One memory type name or several, as a set (MemoryFilter checks the names themselves); None is any type."""
    if types is None:
        return None
    if isinstance(types, str):
        return frozenset([types])
    if isinstance(types, Mapping) or not isinstance(types, Iterable):
        raise InvalidInputError("types", f"must be a type name or a list of them, got {type(types).__name__}")
    try:
        return frozenset(types)
    except TypeError:  # an unhashable element, a list inside the list
        raise InvalidInputError("types", f"must be a type name or a list of them, got {types!r}") from None
