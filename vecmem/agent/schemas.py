"""JSON schemas of what vecmem asks a chat model for. The only module that imports pydantic.

A reply that does not validate raises ``ExtractionError`` naming the first wrong field; nothing is written
and the turn stays in short-term memory to be tried again.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vecmem.errors import ExtractionError

__all__ = ["GateReply", "ExtractedItem", "ExtractionReply", "WriteReply", "SummaryReply", "validate_reply",
           "schema_text"]

MemoryTypeName = Literal["fact", "preference", "instruction", "conclusion"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class GateReply(_Strict):
    keep: bool
    type: MemoryTypeName | None = None
    reason: str = Field(min_length=1, max_length=300)

    @model_validator(mode="after")
    def _type_when_kept(self) -> GateReply:
        if self.keep and self.type is None:
            raise ValueError("a kept message needs a type")
        return self


class ExtractedItem(_Strict):
    content: str = Field(min_length=1, max_length=500)
    type: MemoryTypeName
    importance: float = Field(ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list, max_length=8)
    scope: Literal["global", "session"]
    confidence: float = Field(ge=0.0, le=1.0)
    action: Literal["ADD", "UPDATE", "NONE"]
    target: int | None = None  # the alias of the existing memory it updates (UPDATE) or repeats (NONE)

    @model_validator(mode="after")
    def _target_for_update(self) -> ExtractedItem:
        if self.action == "UPDATE" and self.target is None:
            raise ValueError("UPDATE needs the alias of the memory it replaces in 'target'")
        return self


class ExtractionReply(_Strict):
    memories: list[ExtractedItem] = Field(max_length=10)


class WriteReply(_Strict):
    """The write side of a turn in one call: the gate's decision and the extraction together. ``keep`` and
    ``reason`` may be left out (a model that answers the extraction's shape alone): then what it extracted is
    the decision."""

    keep: bool | None = None
    reason: str | None = Field(None, max_length=300)
    memories: list[ExtractedItem] = Field(max_length=10)

    @model_validator(mode="after")
    def _nothing_when_dropped(self) -> WriteReply:
        if self.keep is False and self.memories:
            raise ValueError("a message that is not kept has no memories")
        return self


class SummaryReply(_Strict):
    summary: str = Field(min_length=1, max_length=2000)


_Reply = TypeVar("_Reply", bound=BaseModel)


def validate_reply(schema: type[_Reply], data: Any, *, what: str) -> _Reply:
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "reply"
        raise ExtractionError(f"the model's {what} failed validation at '{where}': {first.get('msg')}") from exc


def schema_text(schema: type[BaseModel]) -> str:
    """The JSON schema, compact, for the model's instructions."""
    import json

    return json.dumps(schema.model_json_schema(), separators=(",", ":"))
