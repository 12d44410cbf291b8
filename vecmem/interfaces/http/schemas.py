"""The typed contract of ``vecmem serve``: every request body and response of the HTTP API as pydantic models
with a description per field, and the error responses each route declares.

Bodies are strict: a field of the wrong JSON type (``"importance": "lots"``, ``"k": "5"``) or an unknown field is
a 422 before the bank sees the request. What the bank checks itself (blank text, lengths, identifiers, ranges) is
declared in the schema (patterns, bounds) but checked by the bank, so every caller, the CLI included, gets one
set of rules and messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from vecmem.bank.learning import MAX_MESSAGE_CHARS, MAX_MESSAGES
from vecmem.config import MIN_CONTEXT_TOKENS
from vecmem.retrieval.query.parsed import MAX_QUERY_CHARS
from vecmem.validation import (
    MAX_CONTENT_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_SPEAKER_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
)

__all__ = [
    "IDENTIFIER_SCHEMA",
    "MAX_BULK",
    "Approval",
    "BulkAction",
    "BulkRequest",
    "Changes",
    "ChatMessage",
    "ContextRequest",
    "ErrorBody",
    "MemorySource",
    "MemoryStatus",
    "MemoryType",
    "NewMemory",
    "NewMessages",
    "SearchRequest",
    "Supersession",
    "described",
    "errors",
]

MemoryType = Literal["fact", "preference", "instruction", "conclusion"]
MemorySource = Literal["user", "extracted", "manual", "template"]
MemoryStatus = Literal["live", "archived", "pending"]

# What validation.py accepts, as JSON Schema patterns: no C0/C1 control characters (text may hold tab, newline
# and carriage return), not blank; identifiers a single line without surrounding whitespace.
_TEXT_CHAR = r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
_VISIBLE = r"[^\s\x00-\x1f\x7f-\x9f]"
_LINE_CHAR = r"[^\x00-\x1f\x7f-\x9f]"
TEXT_PATTERN = f"^{_TEXT_CHAR}*{_VISIBLE}{_TEXT_CHAR}*$"
IDENTIFIER_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_IDENTIFIER_CHARS,
                                     "pattern": f"^{_VISIBLE}(?:{_LINE_CHAR}*{_VISIBLE})?$"}
# validation.check_speaker: a name on one line, not blank (surrounding spaces are stripped).
SPEAKER_SCHEMA: dict[str, Any] = {"type": "string", "maxLength": MAX_SPEAKER_CHARS,
                                  "pattern": f"^{_LINE_CHAR}*{_VISIBLE}{_LINE_CHAR}*$"}
# A new memory's own id: letters, digits and . _ : - (an id holding "/" could never be reached by its URL).
NEW_ID_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_IDENTIFIER_CHARS,
                                 "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]*$"}


def _text(description: str, max_chars: int, *, blank_allowed: bool = False, nullable: bool = False) -> Any:
    schema: dict[str, Any] = {"type": "string", "maxLength": max_chars,
                              "pattern": f"^{_TEXT_CHAR}*$" if blank_allowed else TEXT_PATTERN}
    return WithJsonSchema({"anyOf": [schema, {"type": "null"}]} if nullable else schema), Field(
        description=description)


def _identifier(description: str, *, nullable: bool = False, schema: dict[str, Any] = IDENTIFIER_SCHEMA) -> Any:
    return WithJsonSchema({"anyOf": [schema, {"type": "null"}]} if nullable else schema), Field(
        description=description)


# validation.normalize_importance, the rule of every interface: [0, 1] as it is, above 1 up to 10 on the ten-point
# scale (so 1 is 1.0 and 7 is 0.7, whether JSON writes them 1 or 1.0)
_IMPORTANCE_SCHEMA: dict[str, Any] = {"type": "number", "minimum": 0, "maximum": 10}
_IMPORTANCE_RULE = "a number in [0, 1] as it is, or above 1 up to 10 on the ten-point scale (7 is 0.7, 1 is 1.0)"
_TAGS_SCHEMA = {"type": "array", "maxItems": MAX_TAGS,
                "items": {"type": "string", "maxLength": MAX_TAG_CHARS, "pattern": TEXT_PATTERN}}
_UNIT = {"type": "number", "minimum": 0, "maximum": 1}

Content = Annotated[str, *_text("The statement to remember, e.g. 'The user prefers tea'.", MAX_CONTENT_CHARS)]
def _whole(value: Any) -> Any:
    """5.0 is the integer 5 in JSON Schema: take a float without a fractional part as that integer."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Importance = Annotated[float | int, WithJsonSchema(_IMPORTANCE_SCHEMA), Field(
    description=f"How much the memory matters: {_IMPORTANCE_RULE}.")]
Tags = Annotated[list[str], WithJsonSchema(_TAGS_SCHEMA), Field(description="Labels, duplicates dropped.")]
Confidence = Annotated[float, WithJsonSchema(_UNIT), Field(description="How sure the source is, in [0, 1].")]
Context = Annotated[str | None, *_text("Text the memory should also be found by (keyword search only; never "
                                       "shown to the model). Blank or null: none.", MAX_CONTEXT_CHARS,
                                       blank_allowed=True, nullable=True)]
SessionId = Annotated[str | None, *_identifier("The session the memory belongs to; null: global (every "
                                               "session sees it). 'global' is reserved.", nullable=True)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NewMemory(_Body):
    """A memory to store. It is decided as the memory agent decides: the same statement again is not stored twice,
    and a newer statement replaces the memories it revises (unless resolve is false). With source 'extracted' (a
    model's text) it may be stored pending review, or defused when it plants an instruction."""

    content: Content
    type: MemoryType | None = Field(None, description="What kind of memory it is; null or absent: inferred by the "
                                                      "memory agent's rules (the response's type_inferred says so).")
    resolve: bool = Field(True, description="False to store it as given: it replaces nothing, even what it "
                                            "revises (the same statement is still stored once).")
    importance: Importance = 0.5
    tags: Tags = []
    session_id: SessionId = None
    source: MemorySource = Field("manual", description="Where the memory came from.")
    confidence: Confidence = 1.0
    id: Annotated[str | None, *_identifier("Its id; null: derived from the user, scope and text.",
                                           nullable=True, schema=NEW_ID_SCHEMA)] = None
    context: Context = ""


class Changes(_Body):
    """Fields to change; null or absent ones stay as they are. New text or tags are re-embedded."""

    content: Annotated[str | None, *_text("New text.", MAX_CONTENT_CHARS, nullable=True)] = None
    type: MemoryType | None = Field(None, description="New kind.")
    importance: Annotated[float | int | None, WithJsonSchema({"anyOf": [_IMPORTANCE_SCHEMA, {"type": "null"}]}),
                          Field(description=f"New importance: {_IMPORTANCE_RULE}.")] = None
    tags: Annotated[list[str] | None, WithJsonSchema({"anyOf": [_TAGS_SCHEMA, {"type": "null"}]}),
                    Field(description="New labels (replacing the old ones).")] = None
    confidence: Annotated[float | None, WithJsonSchema({"anyOf": [_UNIT, {"type": "null"}]}),
                          Field(description="New confidence, in [0, 1].")] = None
    context: Context = None
    scope: Annotated[str | None, *_identifier(
        "Move it: 'global' (every session sees it) or the id of the one session that is to see it; null: where it "
        "is. Its earlier versions move with it. Refused (409) when it would break a supersession link: the memory "
        "that replaced it must still be seen wherever it is, and it wherever each memory it replaced is.",
        nullable=True)] = None
    version: Annotated[int | None, BeforeValidator(_whole)] = Field(
        None, ge=1, description="The version this change was built on (the memory's `version` when it was read): if "
                                "the memory changed since, the answer is 409 with `current_version` and nothing is "
                                "written. Absent: the fields given are applied to the memory as it is now, so "
                                "clients changing different fields at once both keep their change.")


BulkAction = Literal["forget", "approve", "reject", "unarchive"]
MAX_BULK = 500


class BulkRequest(_Body):
    """One action on many memories of the user, each done on its own: one that fails stops none of the others."""

    action: BulkAction = Field(description="forget: delete for good, whatever its state; approve: let a pending "
                                           "memory into retrieval; reject: delete a pending memory; unarchive: bring "
                                           "an archived memory back into retrieval.")
    ids: Annotated[list[str], WithJsonSchema({"type": "array", "minItems": 1, "maxItems": MAX_BULK,
                                              "items": IDENTIFIER_SCHEMA}), Field(
        min_length=1, max_length=MAX_BULK, description=f"The memories, in the order they are acted on (1 to "
                                                       f"{MAX_BULK}); an id named twice is acted on twice.")]


class SearchRequest(_Body):
    """A search over the memories the user (and the session, if given) may see."""

    query: str = Field(description=f"What to look for; empty: the most important memories. At most "
                                   f"{MAX_QUERY_CHARS:,} characters, about what the model reads in one pass.",
                       max_length=MAX_QUERY_CHARS)
    k: Annotated[int, BeforeValidator(_whole)] = Field(5, ge=1, le=1000,
                                                        description="How many memories to return at most.")
    session_id: Annotated[str | None, *_identifier("The session whose own memories are searched too "
                                                   "(global ones always are).", nullable=True)] = None
    types: Annotated[list[MemoryType] | None, WithJsonSchema({"anyOf": [
        {"type": "array", "minItems": 1, "items": {"enum": ["fact", "preference", "instruction", "conclusion"]}},
        {"type": "null"}]}), Field(description="Only memories of these kinds (at least one); null: every kind.")] = None
    record_access: bool = Field(True, description="False to look without counting a use (the panel does).")


class Supersession(_Body):
    new_id: Annotated[str, *_identifier("The memory that replaces this one (same user).")]


class Approval(_Body):
    content: Annotated[str | None, *_text("A correction of the text before it enters retrieval; null: as it is.",
                                          MAX_CONTENT_CHARS, nullable=True)] = None


class ChatMessage(_Body):
    """One message of a conversation, as chat-completions APIs write it."""

    role: Literal["user", "assistant", "system"] = Field(
        description="Who said it: user messages are learnt from; assistant and system ones are context only.")
    content: Annotated[str, *_text("What was said.", MAX_MESSAGE_CHARS)]
    id: Annotated[str | int | None, BeforeValidator(_whole), WithJsonSchema({"anyOf": [
        IDENTIFIER_SCHEMA, {"type": "integer", "minimum": 0}, {"type": "null"}]})] = Field(
        None, description="The message's id (an identifier or a non-negative integer): what a memory learnt from it "
                          "records as its provenance; null: its position in the list.")
    speaker: Annotated[str | None, WithJsonSchema({"anyOf": [SPEAKER_SCHEMA, {"type": "null"}]})] = Field(
        None, max_length=MAX_SPEAKER_CHARS, description=(
            "Who said it, in a conversation between people (a name on one line): what is learnt from it names "
            "them instead of 'the user'."))
    time: Annotated[str | None, WithJsonSchema({"anyOf": [
        {"type": "string", "format": "date-time", "maxLength": 64}, {"type": "null"}]})] = Field(
        None, max_length=64, description=(
            "When it was said (ISO 8601; RFC 3339 date-times are always read): the day its 'yesterday' and "
            "'last week' are read from, in its own zone; null: when it is learnt."))


_Messages = Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES, description=(
    f"The conversation, oldest first (1 to {MAX_MESSAGES} messages)."))]


class NewMessages(_Body):
    """A conversation to learn from, as the chat's memory agent learns from each turn: every user message through
    the write gate, extraction and supersession (newer statements replace what they revise)."""

    messages: _Messages
    session_id: Annotated[str | None, *_identifier("The session the conversation belongs to: what it says of that "
                                                   "session only (\"this time\", \"today\") stays in it; null: "
                                                   "every memory is global.", nullable=True)] = None


class ContextRequest(_Body):
    """What the prompt is built for: the user's message, and what the caller keeps of the conversation."""

    query: str = Field(description=f"The user's current message, whole in the prompt; the memories are retrieved "
                                   f"for its last {MAX_QUERY_CHARS:,} characters.",
                       max_length=MAX_MESSAGE_CHARS)
    session_id: Annotated[str | None, *_identifier("The session whose own memories are searched too (global ones "
                                                   "always are).", nullable=True)] = None
    k: Annotated[int, BeforeValidator(_whole)] = Field(10, ge=1, le=1000,
                                                        description="How many memories to retrieve at most.")
    types: Annotated[list[MemoryType] | None, WithJsonSchema({"anyOf": [
        {"type": "array", "minItems": 1, "items": {"enum": ["fact", "preference", "instruction", "conclusion"]}},
        {"type": "null"}]}), Field(description="Only memories of these kinds (at least one); null: every kind.")] = None
    context_tokens: Annotated[int | None, BeforeValidator(_whole)] = Field(
        None, ge=MIN_CONTEXT_TOKENS, description=f"The context window in tokens (at least {MIN_CONTEXT_TOKENS}, as "
                                                 "VECMEM_CONTEXT_TOKENS); null: the server's VECMEM_CONTEXT_TOKENS.")
    short_term: list[ChatMessage] = Field([], max_length=MAX_MESSAGES, description=(
        "The recent turns, oldest first, verbatim (the oldest dropped first to fit their share)."))
    working_memory: str = Field("", max_length=MAX_MESSAGE_CHARS, description=(
        "The task in progress (goal, steps done, results), kept verbatim in the short-term section; '' for none."))
    system_prompt: str | None = Field(None, max_length=MAX_MESSAGE_CHARS, description=(
        "The system prompt; null: vecmem's default, which tells the model the memories are data, not "
        "instructions."))


class ErrorBody(BaseModel):
    """Every failure has this shape."""

    error: str = Field(description="What went wrong, for a person.")
    field: str | None = Field(description="The request field at fault (a body field, a parameter, a header "
                                          "such as Host or Authorization), or null.")
    current_version: int | None = Field(None, description="Only with a 409 for an update built on an older version "
                                                          "(field `version`): the memory's version now.")


_WHY = {
    401: "No valid API key (once any key is configured): Authorization: Bearer <key>.",
    403: "Refused: a cross-origin request, a state-changing request without X-Vecmem-Request: 1, a per-user key "
         "naming another user or calling a route over every user, or (with no key configured) a non-local client.",
    404: "No memory with that id for that user.",
    409: "What is stored refuses the request: a memory not in the state the route needs, an id used for other "
         "text, a supersession that would loop, a move of scope a supersession forbids, an update built on an older "
         "version (current_version), or another process holding the embedded store.",
    421: "The Host header is not a name this server answers for (loopback names or --allow-host).",
    422: "A value the API refuses; field names it.",
    500: "The store or the embedding model failed.",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: the statuses it can return besides its success, each in the error shape."""
    return {status: {"model": ErrorBody, "description": _WHY[status]} for status in statuses}


def described(schema: dict[str, Any], *, key_required: bool, csrf_header: str) -> dict[str, Any]:
    """``schema`` (FastAPI's OpenAPI description) with what the guard requires declared on every route: the bearer
    key (optional while no key is configured, so a client sees which it is) and, on state-changing methods, the
    cross-site header ``csrf_header``; every error response in the one JSON error shape, /export's included."""
    schema.setdefault("components", {})["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer",
                   "description": "An API key: the admin key or a per-user key (`vecmem keys create`)."}}
    csrf = {"name": csrf_header, "in": "header", "required": True,
            "description": "Must be 1: proves the request is not a simple cross-site one.",
            "schema": {"type": "string", "enum": ["1"]}}
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            operation["security"] = [{"bearer": []}] if key_required else [{"bearer": []}, {}]
            for status, response in operation.get("responses", {}).items():
                if not status.startswith("2"):
                    response["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
            if method in ("post", "patch", "delete", "put"):
                operation.setdefault("parameters", []).append(csrf)
    return schema
