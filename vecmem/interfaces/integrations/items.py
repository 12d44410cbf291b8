"""Keyed JSON items as memories: the SDK-free half of the LangGraph store (langgraph_store.py, item_bank.py).

A LangGraph item is ``(namespace, key) -> value``: a tuple of labels (any text but ``.``), any key, a JSON object.
Each is one memory, laid out so that vecmem's own rules hold and nothing of the item is lost:

* **user and session**: the label at ``Layout.user_label`` (default 0) names the vecmem user, the first other
  label (if any) the session; deeper labels live in the memory only. ``("alice", "prefs", "ui")`` is user
  ``alice``, session ``prefs``; ``("alice",)`` is a global memory of ``alice``; LangMem's ``("memories",
  "{user_id}")`` wants ``user_label=1``. A search under a prefix that names the user and the session is one
  vecmem search of that session; items of other namespaces that it also sees (the user's global memories) are
  filtered out here.
* **names**: a label that is a safe identifier (1 to 64 of ``A-Z a-z 0-9 _ : -``, not the reserved ``global``)
  is used as it is, so ``vecmem list --user alice`` shows alice's items; any other is ``@`` and 32 hex digits of
  its SHA-256 (a safe name cannot begin with ``@``, so the two never meet).
* **id**: ``lg-`` and 40 hex digits of the SHA-256 of the namespace and key: unique per item, within
  ``validation.NEW_ID_RULE`` whatever the key holds.
* **content**: the item's text (the fields it is indexed by, else every string in it), what the model is shown
  and what both retrieval sides find it by.
* **context** (found-by text, never shown to the model): the item itself as JSON, ``{"namespace", "key",
  "value", "updated_at_us", "indexed"}``, so get, search and list give back exactly the value that was put.
  The keyword side therefore also finds an item by the rest of its value.

The JSON must fit a memory's context (``MAX_CONTEXT_CHARS``, 8,000 characters); a value that is not exactly
JSON (a tuple, a set, a key that is not a string, NaN) is refused rather than stored changed.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from vecmem.errors import InvalidInputError
from vecmem.models import GLOBAL_SCOPE, MemoryRecord
from vecmem.validation import MAX_CONTENT_CHARS, MAX_CONTEXT_CHARS

__all__ = ["ID_PREFIX", "Layout", "StoredItem", "check_filter", "context_of", "could_name", "holds", "item_id",
           "listed", "matches", "searchable_text", "string_leaves", "vecmem_name"]

ID_PREFIX = "lg-"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_:-]{1,64}")
_HASHED_NAME = re.compile(r"@[0-9a-f]{32}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # what validation.check_text refuses
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NEEDS_ESCAPE = re.compile(r"[\x7f-\x9f\ud800-\udfff]")  # left raw by json.dumps(ensure_ascii=False)
_COMPARISONS = ("$gt", "$gte", "$lt", "$lte")
_OPERATORS = ("$eq", "$ne", *_COMPARISONS)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def vecmem_name(label: str) -> str:
    """The vecmem user or session id of a namespace label (the module docstring)."""
    return label if _SAFE_NAME.fullmatch(label) and label != GLOBAL_SCOPE else "@" + _digest(label)[:32]


def could_name(user_id: str) -> bool:
    """Whether a vecmem user id is one ``vecmem_name`` makes (only such users can hold items)."""
    return bool(_SAFE_NAME.fullmatch(user_id) or _HASHED_NAME.fullmatch(user_id))


def item_id(namespace: Sequence[str], key: str) -> str:
    return ID_PREFIX + _digest(json.dumps([list(namespace), key], ensure_ascii=False))[:40]


@dataclass(frozen=True)
class Layout:
    """Which namespace label names the vecmem user (``user_label``); the first other label names the session."""

    user_label: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.user_label, bool) or not isinstance(self.user_label, int) or self.user_label < 0:
            raise InvalidInputError("user_label", f"must be a label position (0, 1, ...), got {self.user_label!r}")

    def place(self, namespace: Sequence[str]) -> tuple[str, str | None]:
        """(user, session or None for global) of an item's namespace."""
        if len(namespace) <= self.user_label:
            raise InvalidInputError("namespace", f"{tuple(namespace)!r} has no label at position {self.user_label} "
                                                 "to name its vecmem user (user_label)")
        user, session = self.pinned(namespace)
        assert user is not None  # the namespace is long enough
        return user, session

    def pinned(self, prefix: Sequence[str], *, wildcards: bool = False) -> tuple[str | None, str | None]:
        """The user and the session that every namespace under ``prefix`` has, each None where the prefix leaves
        it open (too short, or, with ``wildcards``, a listing pattern's ``*``)."""
        user, session = self._labels(prefix)
        return (None if user is None or (wildcards and user == "*") else vecmem_name(user),
                None if session is None or (wildcards and session == "*") else vecmem_name(session))

    def _labels(self, labels: Sequence[str]) -> tuple[str | None, str | None]:
        """The label naming the user and the one naming the session, None where ``labels`` stop before them."""
        position = self.user_label
        rest = [*labels[:position], *labels[position + 1:]]
        return labels[position] if len(labels) > position else None, rest[0] if rest else None


@dataclass(frozen=True)
class StoredItem:
    """One item as its memory holds it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    indexed: bool  # False: put with index=False, so it is never ranked (listed after the ranked ones, unscored)
    user_id: str
    memory_id: str

    @classmethod
    def of(cls, record: MemoryRecord, layout: Layout) -> StoredItem | None:
        """The item a memory holds, or None when the memory is not one (the user's own memories, say)."""
        if not record.id.startswith(ID_PREFIX) or not record.context.startswith("{"):
            return None
        try:
            held = json.loads(record.context)
            namespace, key, value = tuple(held["namespace"]), held["key"], held["value"]
            updated = _EPOCH + timedelta(microseconds=held["updated_at_us"])
            indexed = held["indexed"]
        except (ValueError, TypeError, KeyError, OverflowError):
            return None
        if not (isinstance(key, str) and isinstance(value, dict) and isinstance(indexed, bool)
                and all(isinstance(label, str) for label in namespace) and record.id == item_id(namespace, key)):
            return None
        try:
            if layout.place(namespace) != (record.user_id, record.session_id):
                return None
        except InvalidInputError:
            return None
        return cls(namespace, key, value, record.created_at, updated, indexed, record.user_id, record.id)


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def context_of(namespace: Sequence[str], key: str, value: Mapping[str, Any], updated_at: datetime,
               indexed: bool) -> str:
    """The memory context that holds an item: JSON, with what a memory may not hold raw (C1 controls, lone
    surrogates) written as JSON escapes, which read back as the same characters."""
    if not isinstance(value, Mapping):
        raise InvalidInputError("value", f"must be a JSON object (a dict), got {type(value).__name__}")
    value = dict(value)
    try:
        exact = json.loads(json.dumps(value, allow_nan=False)) == value
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: nested past Python's own limit
        raise InvalidInputError("value", f"must be JSON (dicts with string keys, lists, strings, numbers, "
                                         f"booleans, null): {exc}") from exc
    if not exact:
        raise InvalidInputError("value", "must be JSON exactly: a tuple, or a key that is not a string, would "
                                         "come back changed")
    held = {"namespace": list(namespace), "key": key, "value": value,
            "updated_at_us": (updated_at - _EPOCH) // timedelta(microseconds=1), "indexed": indexed}
    text = _NEEDS_ESCAPE.sub(_escaped, json.dumps(held, ensure_ascii=False, separators=(",", ":")))
    if len(text) > MAX_CONTEXT_CHARS:
        raise InvalidInputError("value", f"the item is {len(text):,} characters as JSON with its namespace and "
                                         f"key; a memory holds at most {MAX_CONTEXT_CHARS:,}")
    return text


def string_leaves(value: Any) -> Iterator[str]:
    """Every string in a JSON value, in order (keys are names, not text)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for inner in value.values():
            yield from string_leaves(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from string_leaves(inner)


def searchable_text(texts: Iterable[str], value: Mapping[str, Any]) -> str:
    """A memory's content: the texts, one a line, with control characters and lone surrogates blanked, cut to
    ``MAX_CONTENT_CHARS``; the value's JSON when they hold no text (``{"count": 3}``)."""
    lines = [line for text in texts if (line := _SURROGATE.sub("\ufffd", _CONTROL.sub(" ", text)).strip())]
    if not lines:
        lines = [_SURROGATE.sub("\ufffd", json.dumps(value, ensure_ascii=False, sort_keys=True))]
    return "\n".join(lines)[:MAX_CONTENT_CHARS]


def check_filter(conditions: Mapping[str, Any] | None) -> None:
    """Refuse a filter the comparisons below cannot apply: an unknown ``$`` operator, a comparison with
    something that is not a number, a key that is not a string."""
    if conditions is None:
        return
    if not isinstance(conditions, Mapping):
        raise InvalidInputError("filter", f"must be a dict, got {type(conditions).__name__}")
    for name, wanted in conditions.items():
        if not isinstance(name, str):
            raise InvalidInputError("filter", f"keys must be strings, got {name!r}")
        if isinstance(wanted, Mapping) and any(str(op).startswith("$") for op in wanted):
            for op, operand in wanted.items():
                if op not in _OPERATORS:
                    raise InvalidInputError("filter", f"{name}: {op!r} is not one of {', '.join(_OPERATORS)}")
                if op in _COMPARISONS and _number(operand) is None:
                    raise InvalidInputError("filter", f"{name}: {op} needs a number, got {operand!r}")
        elif isinstance(wanted, Mapping):
            check_filter(wanted)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return None if math.isnan(number) else number


def matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a LangGraph filter (checked first): each key's value equal to the one
    given; a dict of ``$eq $ne $gt $gte $lt $lte`` compares (``$gt`` and the like numerically: a value that is
    missing or not a number passes none of them); another dict matches a nested object key by key; a list
    matches an equal list."""
    return not conditions or all(_compare(value.get(name), wanted) for name, wanted in conditions.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(op).startswith("$") for op in wanted):
            return all(_apply(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(actual, list | tuple) and len(actual) == len(wanted)
                and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True)))
    return bool(actual == wanted)


def _apply(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    number, bound = _number(actual), _number(operand)
    if number is None or bound is None:
        return False
    return {"$gt": number > bound, "$gte": number >= bound, "$lt": number < bound, "$lte": number <= bound}[op]


def holds(namespace: Sequence[str], match_type: str, path: Sequence[str]) -> bool:
    """Whether a namespace matches a listing's pattern: ``prefix`` from its start, ``suffix`` from its end, ``*``
    any one label."""
    if match_type not in ("prefix", "suffix"):
        raise InvalidInputError("match_type", f"must be prefix or suffix, got {match_type!r}")
    if len(namespace) < len(path):
        return False
    labels = namespace[:len(path)] if match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(wanted in ("*", label) for label, wanted in zip(labels, path, strict=True))


def listed(namespaces: Iterable[tuple[str, ...]], conditions: Sequence[tuple[str, Sequence[str]]],
           max_depth: int | None, limit: int, offset: int) -> list[tuple[str, ...]]:
    """LangGraph's ``list_namespaces`` over the namespaces that hold items: those matching every pattern, cut to
    ``max_depth`` labels, sorted, one page."""
    if max_depth is not None and (isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0):
        raise InvalidInputError("max_depth", f"must be a non-negative integer, got {max_depth!r}")
    kept = {namespace[:max_depth] if max_depth is not None else namespace for namespace in namespaces
            if all(holds(namespace, match_type, path) for match_type, path in conditions)}
    return sorted(kept)[offset:offset + limit]
