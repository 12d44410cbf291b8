"""``ItemBank``: LangGraph's store operations (get, put, delete, search, list namespaces) over a vecmem bank, on the
memories items.py lays out; langgraph_store.py turns them into LangGraph's ``BaseStore``.

* **get, put, delete** touch one memory: its user, session and id follow from the namespace and key. A put of a
  new item adds a memory; of a stored one, rewrites its content and context (the memory's id and ``created_at``
  stay, no revision is kept: LangGraph replaces); a delete forgets it.
* **search with a query** is vecmem's ranking (``MemoryBank.search``: dense and keyword similarity fused, then
  ``0.6·similarity + max(1 - similarity, 0.2)·(0.2·recency + 0.2·importance)``); each item's score is its cosine (``_item_score``, as LangGraph's stores score:
  comparable between the searches one LangGraph search merges, which a hit's similarity is not). A prefix that names the
  user and the session is one search of that session (repeated with a larger ``k`` while the hits that belong
  under the prefix and pass the filter are fewer than wanted and more remain); a shorter prefix first lists the
  items under it, then ranks each session they are in and merges. Items put with ``index=False`` are never
  ranked: they follow the ranked ones, unscored (as in LangGraph's ``InMemoryStore``). Searches do not count as
  uses of a memory (``record_access=False``): a store read changes nothing.
* **search without a query** lists the items under the prefix that pass the filter, the most recently updated
  first (then by namespace and key), one page.
* **list namespaces** reads the items of the users the pattern allows (all users when it does not name one).

Reading "every user" asks the bank for its users, so the bank must have ``users()`` (``MemoryBank`` has;
``ItemsApi``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from vecmem.bank.api import MemoryApi
from vecmem.errors import ConflictError, InvalidInputError, NotFoundError
from vecmem.interfaces.integrations.items import (
    Layout,
    StoredItem,
    check_filter,
    context_of,
    could_name,
    item_id,
    matches,
    searchable_text,
    string_leaves,
)
from vecmem.models import Hit, MemoryRecord
from vecmem.retrieval.query.parsed import searchable

__all__ = ["FIRST_K", "ItemBank", "ItemsApi", "PreparedPut"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_K = 10  # the first search of a session asks for this many hits at least; each retry for four times more


class ItemsApi(MemoryApi, Protocol):
    """What the store needs of a bank: the ``MemoryApi`` and the list of its users."""

    def users(self) -> list[str]: ...


@dataclass(frozen=True)
class PreparedPut:
    """A put checked and laid out, ready to write (a batch checks every put before it writes any)."""

    namespace: tuple[str, ...]
    key: str
    user_id: str
    session_id: str | None
    memory_id: str
    content: str
    context: str
    at: datetime  # when it was put: the item's updated_at, and its created_at if it is new
    delete: bool  # a put of None


class ItemBank:
    def __init__(self, bank: ItemsApi, layout: Layout, clock: Callable[[], datetime]) -> None:
        self.bank = bank
        self.layout = layout
        self.clock = clock

    # ------------------------------------------------------------------------------------------ one item

    def get(self, namespace: Sequence[str], key: str) -> StoredItem | None:
        if len(namespace) <= self.layout.user_label:
            return None  # no item can be there
        user, _ = self.layout.place(namespace)
        record = self._record(user, item_id(namespace, key))
        item = None if record is None else self._item(record)
        return item if item is not None and item.namespace == tuple(namespace) and item.key == key else None

    def prepare(self, namespace: Sequence[str], key: str, value: Mapping[str, Any] | None,
                texts: Sequence[str] | None, indexed: bool) -> PreparedPut:
        """A put (``value`` None: a delete) checked and laid out; ``texts``: what the item is found by (None: every
        string in the value)."""
        namespace = tuple(namespace)
        user, session = self.layout.place(namespace)
        if not isinstance(key, str):
            raise InvalidInputError("key", f"must be a string, got {type(key).__name__}")
        at = self.clock()
        if value is None:
            return PreparedPut(namespace, key, user, session, item_id(namespace, key), "", "", at, delete=True)
        context = context_of(namespace, key, value, at, indexed)
        content = searchable_text(string_leaves(value) if texts is None else texts, value)
        return PreparedPut(namespace, key, user, session, item_id(namespace, key), content, context, at,
                           delete=False)

    def write(self, put: PreparedPut) -> None:
        stored = self._record(put.user_id, put.memory_id)
        if put.delete:
            if stored is not None:
                self._forget(stored)
            return
        if stored is not None and (not stored.retrievable or self._item(stored) is None):
            self._forget(stored)  # archived by a forgetting policy, say: the put makes it anew
            stored = None
        if stored is None:
            try:
                # an item under its key, stored as put: a put never supersedes another key's item
                stored = self.bank.add(put.content, user_id=put.user_id, session_id=put.session_id,
                                       memory_id=put.memory_id, context=put.context, created_at=put.at,
                                       memory_type="fact", resolve=False)
            except ConflictError:  # another writer stored other text under the id meanwhile: the put replaces it
                stored = None
            if stored is not None and stored.context == put.context:
                return
        self.bank.update(put.memory_id, user_id=put.user_id, content=put.content, context=put.context,
                         keep_history=False)

    def _record(self, user: str, memory_id: str) -> MemoryRecord | None:
        try:
            return self.bank.get(memory_id, user_id=user)
        except NotFoundError:
            return None

    def _forget(self, record: MemoryRecord) -> None:
        try:
            self.bank.forget(record.id, user_id=record.user_id)
        except NotFoundError:  # another writer deleted it first
            pass

    def _item(self, record: MemoryRecord) -> StoredItem | None:
        return StoredItem.of(record, self.layout) if record.retrievable else None

    # ------------------------------------------------------------------------------------------ many items

    def search(self, prefix: Sequence[str], *, query: str | None, conditions: Mapping[str, Any] | None,
               limit: int, offset: int) -> list[tuple[StoredItem, float | None]]:
        """One page of the items under ``prefix`` that pass ``conditions``: ranked for ``query`` (then the
        unranked ones, scored None), or the most recently updated first."""
        for name, number in (("limit", limit), ("offset", offset)):
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise InvalidInputError(name, f"must be a non-negative integer, got {number!r}")
        check_filter(conditions)
        prefix = tuple(prefix)
        wanted = offset + limit
        if wanted == offset:
            return []

        def keep(item: StoredItem) -> bool:
            return item.namespace[:len(prefix)] == prefix and matches(item.value, conditions)

        user, session = self.layout.pinned(prefix)
        if not query:
            return [*_unranked(self._items(prefix, keep))][offset:wanted]
        if user is not None and session is not None:
            ranked, rest = self._rank(query, user, session, keep, wanted)
            return [*ranked, *_unranked(rest)][offset:wanted]
        under = self._items(prefix, keep)
        kept = {(item.user_id, item.memory_id) for item in under}
        best: dict[tuple[str, str], tuple[StoredItem, float]] = {}
        for place in sorted({(item.user_id, self.layout.place(item.namespace)[1] or "") for item in under}):
            ranked, _ = self._rank(query, place[0], place[1] or None,
                                   lambda item: (item.user_id, item.memory_id) in kept, wanted)
            for item, score in ranked:  # the user's global items are seen from each of its sessions: the best
                if (found := best.get((item.user_id, item.memory_id))) is None or found[1] < score:
                    best[(item.user_id, item.memory_id)] = (item, score)
        ranked = sorted(best.values(), key=lambda pair: (-pair[1], pair[0].namespace, pair[0].key))
        rest = [item for item in under if (item.user_id, item.memory_id) not in best]
        return [*ranked, *_unranked(rest)][offset:wanted]

    def _rank(self, query: str, user: str, session: str | None, keep: Callable[[StoredItem], bool],
              wanted: int) -> tuple[list[tuple[StoredItem, float]], list[StoredItem]]:
        """The best ``wanted`` indexed items ``keep`` lets through of one vecmem search (the user's global
        memories and the session's), and the unindexed ones it met; every such item once the search ran out."""
        k = max(wanted, FIRST_K)
        while True:
            hits = self.bank.search(searchable(query), k, user_id=user, session_id=session, record_access=False)
            found = [(item, _item_score(hit)) for hit in hits
                     if (item := self._item(hit.record)) is not None and keep(item)]
            ranked = [(item, score) for item, score in found if item.indexed]
            if len(ranked) >= wanted or len(hits) < k:
                ranked.sort(key=lambda pair: (-pair[1], pair[0].namespace, pair[0].key))
                return ranked, [item for item, _ in found if not item.indexed]
            k *= 4

    def _items(self, prefix: Sequence[str], keep: Callable[[StoredItem], bool]) -> list[StoredItem]:
        user, session = self.layout.pinned(prefix)
        return [item for user_id in self.users(user) for item in self.items_of(user_id, session) if keep(item)]

    def users(self, pinned: str | None) -> list[str]:
        """The users that may hold items: the one a prefix names, else every user a label could name."""
        return [pinned] if pinned is not None else [user for user in self.bank.users() if could_name(user)]

    def items_of(self, user: str, session: str | None) -> list[StoredItem]:
        """Every item of the user (``session`` given: of its global memories and that session)."""
        return [item for record in self.bank.list_memories(user_id=user, session_id=session)
                if (item := self._item(record)) is not None]

    def namespaces(self, pinned_user: str | None) -> Iterable[tuple[str, ...]]:
        """The namespaces holding items, of one user or of all."""
        return {item.namespace for user in self.users(pinned_user) for item in self.items_of(user, None)}


def _unranked(items: Iterable[StoredItem]) -> list[tuple[StoredItem, float | None]]:
    """Items without a score: the most recently updated first, then by namespace and key."""
    return [(item, None) for item in sorted(items, key=lambda item: (_EPOCH - item.updated_at, item.namespace,
                                                                        item.key))]


def _item_score(hit: Hit) -> float:
    """An item's score as LangGraph's own stores give it: the raw cosine (else the keyword match relative to the
    query's best), so results merged from several searches compare and the differential tests hold."""
    if hit.dense is not None:
        return hit.dense
    return hit.keyword if hit.keyword is not None else hit.similarity
