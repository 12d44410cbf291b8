"""How a MemoryRecord is laid out in a Chroma row: the document is the content, the rest is metadata.

Times are epoch seconds (``last_accessed`` 0 for never); ``superseded`` is a boolean beside ``superseded_by``
so the filter is one equality test; empty tags and context are left out (Chroma refuses empty lists, and
``None`` removes a stale key when metadata is merged on update). No chromadb import: this is plain data.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .errors import StoreError
from .models import MemoryFilter, MemoryRecord

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
    return {
        "type": record.type,
        "scope": record.scope,
        "importance": record.importance,
        "confidence": record.confidence,
        "source": record.source,
        "created_at": _epoch(record.created_at),
        "last_accessed": _epoch(record.last_accessed),
        "access_count": record.access_count,
        "superseded": record.superseded,
        "superseded_by": record.superseded_by or "",
        "user_id": record.user_id,
        # Chroma refuses empty lists and merges metadata on update; None removes a stale key.
        "tags": list(record.tags) or None,
        "context": record.context or None,
    }


def from_row(memory_id: str, document: str | None, metadata: dict[str, Any] | None) -> MemoryRecord:
    meta = metadata or {}
    try:
        last_accessed = float(meta.get("last_accessed") or 0.0)
        return MemoryRecord.trusted(
            id=memory_id,
            content=document or "",
            type=str(meta.get("type", "fact")),
            tags=tuple(meta.get("tags") or ()),
            importance=float(meta.get("importance", 0.5)),
            scope=str(meta.get("scope", "global")),
            created_at=datetime.fromtimestamp(float(meta.get("created_at", 0.0)), timezone.utc),
            last_accessed=None if last_accessed <= 0 else datetime.fromtimestamp(last_accessed, timezone.utc),
            access_count=int(meta.get("access_count", 0)),
            source=str(meta.get("source", "manual")),
            confidence=float(meta.get("confidence", 1.0)),
            superseded_by=meta.get("superseded_by") or None,
            user_id=str(meta.get("user_id", "default")),
            context=meta.get("context") or "",
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise StoreError(f"memory {memory_id} in the store is unreadable: {exc}") from exc
