"""What the owner of an embedded store and its clients say to each other (endpoint.py serves, remote.py asks).

**owner.json.** ``VECMEM_HOME/owner.json`` says where the owner answers: ``{"pid", "port", "secret",
"program", "started"}``, mode 0600, written atomically by the owner while it holds the store lock and removed
when it stops. ``read_owner`` reads it back, or None when it is missing, not ours or not in this form.

**Values.** A call is ``{"method": name, "args": {name: value}}`` and its answer ``{"result": value}``, each
value in this codec: JSON's own values as they are (lists are lists), and everything else a tagged object
``{"$t": kind, "v": ...}``: ``tuple``, ``dict`` (key-value pairs, so keys keep their type), ``datetime`` (ISO
8601) or one of the value types in ``VALUE_TYPES`` by its class name, with its fields. ``decode`` builds
exactly the object that was encoded (equal to it), and only from those names: a name that is not on the list is
refused before any class is looked up, and nothing else in the wire can make it build anything (no pickle).

**Errors.** A ``VecmemError`` travels as ``{"error": class name, "message", "field", "current_version", ...}``
and is raised again on the other side as the same class with the same message and attributes, from the list
of vecmem.errors' classes; any other name (the owner failed unexpectedly, or speaks another version) is a
``StoreError``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from vecmem import errors
from vecmem.errors import InvalidInputError, StoreError, VecmemError
from vecmem.models import MemoryRecord

__all__ = ["OWNER_FILE", "VALUE_TYPES", "VALUE_TYPE_HOMES", "OwnerInfo", "decode", "encode", "error_from",
           "error_payload", "read_owner", "remove_owner"]

OWNER_FILE = "owner.json"
# Each value type by its class name, and the module that defines it (imported when needed: _ValueTypes)
VALUE_TYPE_HOMES: dict[str, str] = {
    **dict.fromkeys(("MemoryRecord", "Hit", "Turn", "PromptPack", "ImportReport", "StoreStats", "Provenance"),
                    "vecmem.models"),
    "DoctorReport": "vecmem.maintenance.doctor", "Finding": "vecmem.maintenance.doctor",
    "PruneCandidate": "vecmem.maintenance.hygiene",
    "AddMessagesResult": "vecmem.bank.learning", "SkippedMessage": "vecmem.bank.learning",
    "MemoryPage": "vecmem.bank.listing", "AddResult": "vecmem.bank.resolving",
}


class _ValueTypes(Mapping[str, type[Any]]):
    """VALUE_TYPE_HOMES' classes, each imported when a value of it is first sent or read: a command that goes
    through the owner then imports what its answer holds (a search: models.py), not the doctor's and the
    store's modules and numpy with them (a tenth of a second of its start). Only names on the list are looked
    up, so nothing from the wire chooses what is imported."""

    def __getitem__(self, name: str) -> type[Any]:
        cls: type[Any] = getattr(importlib.import_module(VALUE_TYPE_HOMES[name]), name)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(VALUE_TYPE_HOMES)

    def __len__(self) -> int:
        return len(VALUE_TYPE_HOMES)


VALUE_TYPES: Mapping[str, type[Any]] = _ValueTypes()
_TAG, _VALUE = "$t", "v"
_ERRORS: dict[str, type[VecmemError]] = {
    name: cls for name in errors.__all__
    if isinstance(cls := getattr(errors, name), type) and issubclass(cls, VecmemError)}
# what instances of these classes (and their subclasses) carry besides their message, most specific first
_ERROR_ATTRIBUTES: tuple[tuple[type[VecmemError], tuple[str, ...]], ...] = (
    (errors.ConflictError, ("field", "reason", "current_version")),
    (errors.InvalidInputError, ("field", "reason")),
    (errors.EmbeddingMismatchError, ("stored_model", "stored_dim", "configured_model")),
)


def encode(value: object) -> Any:
    """``value`` as JSON-ready data (see the module docstring); anything else is an ``InvalidInputError``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [encode(item) for item in value]
    if isinstance(value, tuple):
        return {_TAG: "tuple", _VALUE: [encode(item) for item in value]}
    if isinstance(value, dict):
        return {_TAG: "dict", _VALUE: [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, datetime):
        return {_TAG: "datetime", _VALUE: value.isoformat()}
    kind = type(value).__name__
    if kind in VALUE_TYPE_HOMES and VALUE_TYPES[kind] is type(value):
        return {_TAG: kind, _VALUE: {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(VALUE_TYPES[kind])}}
    raise InvalidInputError("value", f"a {kind} cannot be sent between processes")


def decode(data: Any, *, trusted: bool = False) -> Any:
    """The value ``encode`` made ``data`` from. ``trusted``: ``data`` comes from the owner, whose memories its store
    validated already, so records are rebuilt as read (``MemoryRecord.trusted``: one stored before a rule was
    tightened stays readable, as it does in the owner); otherwise every value type is built by its constructor,
    which validates it. Anything but this codec's shapes is an ``InvalidInputError``."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(item, trusted=trusted) for item in data]
    if not isinstance(data, dict) or set(data) != {_TAG, _VALUE} or not isinstance(data[_TAG], str):
        raise InvalidInputError("value", f"not a value of the owner's wire format: {_shown(data)}")
    kind, body = data[_TAG], data[_VALUE]
    if kind == "tuple" and isinstance(body, list):
        return tuple(decode(item, trusted=trusted) for item in body)
    if kind == "dict" and isinstance(body, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in body):
        try:
            return {decode(key, trusted=trusted): decode(item, trusted=trusted) for key, item in body}
        except TypeError:  # a key that decodes to a list
            raise InvalidInputError("value", "a dict key must be a string, number or tuple") from None
    if kind == "datetime" and isinstance(body, str):
        try:
            return datetime.fromisoformat(body)
        except ValueError:
            raise InvalidInputError("value", f"not a time: {_shown(body)}") from None
    cls = VALUE_TYPES.get(kind)
    if cls is None or not isinstance(body, dict):
        raise InvalidInputError("value", f"{_shown(kind)} is not a type the owner's wire carries")
    names = {f.name for f in dataclasses.fields(cls)}
    if not set(body) <= names:
        raise InvalidInputError("value", f"{kind} has no field {_shown(sorted(set(body) - names)[0])}")
    fields = {name: decode(item, trusted=trusted) for name, item in body.items()}
    if trusted and cls is MemoryRecord:
        if set(fields) != names:
            raise InvalidInputError("value", f"MemoryRecord lacks {_shown(sorted(names - set(fields)))}")
        return MemoryRecord.trusted(**fields)
    try:
        return cls(**fields)
    except TypeError as exc:  # a required field missing
        raise InvalidInputError("value", f"{kind}: {exc}") from None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _attributes(cls: type[VecmemError]) -> tuple[str, ...]:
    """The attributes instances of ``cls`` carry besides their message (vecmem/errors.py)."""
    return next((names for base, names in _ERROR_ATTRIBUTES if issubclass(cls, base)), ())


def error_payload(error: VecmemError) -> dict[str, Any]:
    """The error as the owner sends it: its class, message, ``field`` and ``current_version`` (None where the class
    has none) and the other attributes its class carries."""
    payload: dict[str, Any] = {"error": type(error).__name__, "message": str(error), "field": None,
                               "current_version": None}
    payload.update({name: getattr(error, name, None) for name in _attributes(type(error))})
    return payload


def error_from(payload: object) -> VecmemError:
    """The error the owner sent, as the same class (from vecmem.errors only) with the same message and attributes;
    anything else is a ``StoreError`` saying what came back."""
    if not isinstance(payload, dict) or not isinstance(payload.get("message"), str):
        return StoreError(f"the store's owner answered something that is not an error: {_shown(payload)}")
    cls = _ERRORS.get(str(payload.get("error")))
    if cls is None:
        return StoreError(f"the store's owner failed: {payload['message']}")
    error = cls.__new__(cls)
    Exception.__init__(error, payload["message"])  # the message as sent, whatever the class builds it from
    for name in _attributes(cls):
        value = payload.get(name)
        setattr(error, name, value if value is None or isinstance(value, (str, int)) else str(value))
    return error


@dataclass(frozen=True)
class OwnerInfo:
    """What owner.json says: the owner's process, its loopback port and the secret its calls must carry."""

    pid: int
    port: int
    secret: str
    program: str
    started: str

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def read_owner(home: Path) -> OwnerInfo | None:
    """owner.json of the store in ``home``, or None when there is none, or it is not this user's own private file
    (mode 0600), or not in the form an owner writes."""
    path = home / OWNER_FILE
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
                return None
            data = json.loads(handle.read(4096))
        owner = OwnerInfo(**data)
    except (OSError, ValueError, TypeError):
        return None
    types_ok = all(isinstance(getattr(owner, name), kind) for name, kind in (
        ("pid", int), ("port", int), ("secret", str), ("program", str), ("started", str)))
    return owner if types_ok and 0 < owner.port < 65536 and owner.pid > 0 and owner.secret else None


def remove_owner(home: Path, info: OwnerInfo) -> None:
    """Remove owner.json if it still says ``info`` (a newer owner's stays)."""
    if read_owner(home) == info:
        with contextlib.suppress(FileNotFoundError):
            (home / OWNER_FILE).unlink()
