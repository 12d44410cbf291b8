"""Listing a user's memories a page at a time, in the order a person asks for (``MemoryBank.page_memories``;
the panel's table, ``GET /memories``).

A page is cut from one scan of the memories the filter lets through, sorted by one field (``SORT_FIELDS``),
ascending or, with a leading ``-``, descending; ties are broken by id in the same direction, so the order is
total and pages neither repeat nor skip a memory while nothing changes. The scan counts them all anyway, so the
page carries ``total`` at no extra cost: a client learns how many pages there are from the page it asked for.

Access statistics live apart from the rows (storage/state/access.py): they are applied to the page only, or to every
memory first when the order is by them (``last_accessed``, ``access_count``). A memory never used sorts as the
least recently used (``last_accessed`` null), whichever the direction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vecmem.errors import InvalidInputError
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.validation import check_type_names, require_positive_int

if TYPE_CHECKING:  # a client of the store's owner reads MemoryPage and DEFAULT_SORT without the store's modules
    from vecmem.storage.state.access import AccessStats

__all__ = ["DEFAULT_SORT", "SORTS", "SORT_FIELDS", "MemoryPage", "listed", "page"]

DEFAULT_SORT = "-created_at"  # newest first, as list_memories has always listed
_KEYS: dict[str, Callable[[MemoryRecord], Any]] = {
    "created_at": lambda r: r.created_at,
    "last_accessed": lambda r: r.last_accessed.timestamp() if r.last_accessed is not None else float("-inf"),
    "access_count": lambda r: r.access_count,
    "importance": lambda r: r.importance,
    "confidence": lambda r: r.confidence,
    "type": lambda r: r.type,
    "scope": lambda r: r.scope,
    "source": lambda r: r.source,
    "status": lambda r: r.status,
    "content": lambda r: r.content.casefold(),
}
SORT_FIELDS = tuple(_KEYS)
SORTS = tuple(f"{sign}{name}" for name in SORT_FIELDS for sign in ("", "-"))
_BY_USE = frozenset({"last_accessed", "access_count"})  # fields the access statistics hold


@dataclass(frozen=True)
class MemoryPage:
    """One page of a listing: ``memories`` (at most the limit asked for, from ``offset`` on, in ``sort`` order)
    and ``total``, how many memories the listing holds in all (every page together)."""

    memories: tuple[MemoryRecord, ...]
    total: int
    offset: int = 0
    sort: str = DEFAULT_SORT

    def to_dict(self) -> dict[str, Any]:
        return {"memories": [record.to_dict() for record in self.memories], "total": self.total,
                "offset": self.offset, "sort": self.sort}


def listed(session_id: str | None, types: Iterable[str] | None, include_superseded: bool,
           statuses: Iterable[str]) -> MemoryFilter:
    """The filter of a listing: with ``session_id`` what that session sees (global + its own), else every scope."""
    if isinstance(statuses, str) or not isinstance(statuses, Iterable):
        raise InvalidInputError("statuses", f"must be a list of statuses, got {statuses!r}")
    return MemoryFilter(session_id=session_id, all_sessions=session_id is None, types=check_type_names(types),
                        include_superseded=include_superseded, statuses=frozenset(statuses))


def page(listed: Callable[[str, MemoryFilter], Iterable[MemoryRecord]], access: AccessStats, user: str,
         memory_filter: MemoryFilter, *, sort: str = DEFAULT_SORT, offset: int = 0,
         limit: int | None = None) -> MemoryPage:
    """The memories of ``user`` that pass the filter (``listed``: every one of them, in any order), sorted by
    ``sort`` (one of ``SORTS``), from ``offset`` on, at most ``limit`` of them (None: all), with their access
    statistics, and how many there are in all."""
    if sort not in SORTS:
        raise InvalidInputError("sort", f"must be one of {', '.join(SORTS)}; got {sort!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInputError("offset", f"must be a non-negative integer, got {offset!r}")
    limit = None if limit is None else require_positive_int("limit", limit)
    name = sort.lstrip("-")
    records = list(listed(user, memory_filter))
    if name in _BY_USE:
        records = access.apply(records)
    key = _KEYS[name]
    records.sort(key=lambda record: (key(record), record.id), reverse=sort.startswith("-"))
    chosen = records[offset:] if limit is None else records[offset : offset + limit]
    if name not in _BY_USE:
        chosen = access.apply(chosen)
    return MemoryPage(tuple(chosen), len(records), offset, sort)
