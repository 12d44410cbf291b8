"""How a MemoryRecord is laid out in a Chroma row: the document is the content, the rest is metadata.

Only what Chroma's where-filters look at gets a metadata key of its own (``type``, ``scope``, ``superseded``,
``superseded_by``), besides the keyword tokens (``keywords``, written with the vector); every other field is one
JSON string under ``fields``. Chroma keeps one SQLite row per metadata key and reads them back one by one, so the
14 keys of the first layout made every read and write pay for 14: at 100,000 memories a scan of the metadata (what
rebuilding the keyword index reads) took many seconds. Rows in that first layout (no ``fields`` key) are still read
as they are.

Times are epoch seconds (``last_accessed`` 0 for never); ``superseded`` is a boolean beside ``superseded_by``
so the filter is one equality test. No chromadb import: this is plain data.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from vecmem.errors import StoreError
from vecmem.models import MemoryFilter, MemoryRecord, Provenance

__all__ = ["where_clause", "to_metadata", "from_row"]


def where_clause(memory_filter: MemoryFilter) -> dict[str, Any] | None:
    """Translate a MemoryFilter into a Chroma ``where`` (Chroma wants ``$and`` only for 2+ clauses)."""
    clauses: list[dict[str, Any]] = []
    if not memory_filter.include_superseded:
        clauses.append({"superseded": False})
    scopes = memory_filter.scopes
    if scopes is not None:
        clauses.append({"scope": {"$in": list(scopes)}})
    if memory_filter.types is not None:
        clauses.append({"type": {"$in": sorted(memory_filter.types)}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _epoch(moment: datetime | None) -> float:
    return 0.0 if moment is None else moment.timestamp()


def to_metadata(record: MemoryRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "importance": record.importance,
        "confidence": record.confidence,
        "source": record.source,
        "created_at": _epoch(record.created_at),
        "last_accessed": _epoch(record.last_accessed),
        "access_count": record.access_count,
        "user_id": record.user_id,
        "tags": list(record.tags),
        "context": record.context,
        "status": record.status,
        "version": record.version,
    }
    if record.provenance is not None:  # only extracted memories have one: the others' rows stay as they were
        fields["provenance"] = record.provenance.to_dict()
    return {
        "type": record.type,
        "scope": record.scope,
        "superseded": record.superseded,
        "superseded_by": record.superseded_by or "",
        "fields": json.dumps(fields, ensure_ascii=False, separators=(",", ":")),
    }


def from_row(memory_id: str, document: str | None, metadata: dict[str, Any] | None) -> MemoryRecord:
    meta = metadata or {}
    try:
        if "fields" in meta:  # the current layout; a row without it is in the first one (a key per field)
            meta = {**meta, **json.loads(meta["fields"])}
        last_accessed = float(meta.get("last_accessed") or 0.0)
        return MemoryRecord.trusted(
            id=memory_id,
            content=document or "",
            type=str(meta.get("type", "fact")),
            tags=tuple(meta.get("tags") or ()),
            importance=float(meta.get("importance", 0.5)),
            scope=str(meta.get("scope", "global")),
            created_at=datetime.fromtimestamp(float(meta.get("created_at", 0.0)), UTC),
            last_accessed=None if last_accessed <= 0 else datetime.fromtimestamp(last_accessed, UTC),
            access_count=int(meta.get("access_count", 0)),
            source=str(meta.get("source", "manual")),
            confidence=float(meta.get("confidence", 1.0)),
            superseded_by=meta.get("superseded_by") or None,
            user_id=str(meta.get("user_id", "default")),
            context=meta.get("context") or "",
            status=str(meta.get("status") or "live"),
            version=int(meta.get("version", 1)),
            provenance=Provenance.of(meta.get("provenance")),
        )
    except (TypeError, ValueError, OverflowError) as exc:  # a JSONDecodeError, a bad provenance: ValueErrors
        raise StoreError(f"memory {memory_id} in the store is unreadable: {exc}") from exc
