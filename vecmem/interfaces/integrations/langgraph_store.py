"""``VecmemStore``: a LangGraph ``BaseStore`` on a vecmem bank, the long-term memory of LangGraph and LangMem agents.

    from langgraph.graph import StateGraph
    from vecmem import MemoryBank, VecmemStore

    store = VecmemStore()                       # a MemoryBank() of its own, closed by store.close(); or VecmemStore(bank)
    store.put(("alice", "memories"), "tea", {"text": "Alice drinks green tea every morning"})
    store.search(("alice", "memories"), query="what does alice drink?")   # ranked by vecmem
    graph = StateGraph(State).add_node(...).compile(store=store)        # nodes reach it as get_store()

The only module that imports LangGraph. Each item is one memory (items.py says how namespaces map onto users
and sessions, and where the value is kept); the operations are item_bank.py's. What LangGraph asks of a store,
and how it is kept:

* ``batch`` runs the operations of one call as LangGraph's own stores do: every read (get, search, list) sees
  the store as it was before the batch, then the puts are written in order, the last put of a namespace and key
  winning. Every put is checked before any is written. ``abatch`` runs ``batch`` in a worker thread, so the
  event loop never waits on the bank.
* ``put``'s ``index``: None indexes the item by the store's ``fields`` (LangGraph's path syntax:
  ``"text"``, ``"notes[*].body"``, ``"$"`` for the whole JSON; default: every string in the value), a list by
  those paths, ``False`` not at all (found by filters and listings, listed after ranked items, unscored).
* A namespace label may not hold ``.`` (LangGraph's rule); a namespace too short to have the label that names
  the user (``user_label``) is refused on put and found empty on get. Both refusals are ``NamespaceError``:
  vecmem's ``InvalidInputError`` and LangGraph's ``InvalidNamespaceError`` at once. TTLs are not supported
  (``supports_ttl`` False: LangGraph's ``put`` refuses a ``ttl``; an op's ``ttl`` is ignored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from vecmem.aio import bank_of
from vecmem.bank.facade import MemoryBank
from vecmem.config import Settings
from vecmem.errors import InvalidInputError
from vecmem.interfaces.integrations.item_bank import ItemBank, PreparedPut
from vecmem.interfaces.integrations.items import Layout, StoredItem, listed

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
        tokenize_path,
        validate_op_namespace,
    )
except ImportError as missing:  # pragma: no cover - the extra is installed wherever the tests run
    raise ImportError("VecmemStore needs LangGraph: pip install 'vecmem[langchain]'") from missing

__all__ = ["NamespaceError", "VecmemStore"]


class NamespaceError(InvalidInputError, InvalidNamespaceError):
    """A namespace vecmem cannot use: caught as vecmem's ``InvalidInputError`` or LangGraph's
    ``InvalidNamespaceError``."""


class VecmemStore(BaseStore):
    """LangGraph's store interface over ``bank`` (a ``MemoryBank``, or anything with its ``MemoryApi`` and
    ``users()``); without one, over ``MemoryBank(settings, **bank_options)`` opened here (the environment's
    settings when none are given, as ``MemoryBank()``; a ``Settings`` may come first too). ``close`` (or leaving
    ``with``) closes the bank, either way. ``user_label``: which namespace label names the vecmem user (0:
    ``("alice", "memories")``; 1: LangMem's ``("memories", "alice")``). ``fields``: the paths an item is indexed by
    when its put names none (default: every string in the value). ``clock``: the time items are created and
    updated at (and the clock of the bank opened here)."""

    __slots__ = ("_bank", "_fields", "_items")

    def __init__(self, bank: MemoryBank | Settings | None = None, *, settings: Settings | None = None,
                 user_label: int = 0, fields: Sequence[str] | None = None,
                 clock: Callable[[], datetime] | None = None, **bank_options: Any) -> None:
        if fields is not None and (isinstance(fields, str) or not all(isinstance(f, str) for f in fields)):
            raise InvalidInputError("fields", f"must be a list of paths, got {fields!r}")
        self._fields = None if fields is None else [(path, _tokens(path)) for path in fields]
        layout = Layout(user_label)  # checked before a bank is opened: a bad label leaves nothing open
        if clock is not None and (bank is None or isinstance(bank, Settings)):
            bank_options["clock"] = clock  # the bank opened here keeps the items' time
        opened = bank_of(bank, settings, bank_options)
        self._bank = cast(MemoryBank, opened)  # a MemoryBank's API and users(), as documented
        self._items = ItemBank(self._bank, layout, clock or (lambda: datetime.now(UTC)))

    def close(self) -> None:
        """Close the bank (the one opened here, or the one given)."""
        self._bank.close()

    def __enter__(self) -> VecmemStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def bank(self) -> MemoryBank:
        return self._bank

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            _check_namespace(op)
        puts: dict[tuple[tuple[str, ...], str], PreparedPut] = {}
        results: list[Result] = []
        for op in ops:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = self._prepare(op)
                results.append(None)
            else:
                results.append(self._read(op))
        for put in puts.values():
            self._items.write(put)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _prepare(self, op: PutOp) -> PreparedPut:
        if op.value is None or op.index is False:
            texts = None
        elif op.index is not None:
            texts = _texts(op.value, [(path, _tokens(path)) for path in op.index])
        else:
            texts = None if self._fields is None else _texts(op.value, self._fields)
        try:
            return self._items.prepare(op.namespace, op.key, op.value, texts, indexed=op.index is not False)
        except InvalidInputError as exc:
            if exc.field == "namespace":
                raise NamespaceError(exc.field, exc.reason) from exc
            raise

    def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self._items.get(op.namespace, op.key)
            return None if found is None else Item(value=found.value, key=found.key, namespace=found.namespace,
                                                   created_at=found.created_at, updated_at=found.updated_at)
        if isinstance(op, SearchOp):
            return [_search_item(item, score) for item, score in self._items.search(
                op.namespace_prefix, query=op.query, conditions=op.filter, limit=op.limit, offset=op.offset)]
        if isinstance(op, ListNamespacesOp):
            conditions = [(condition.match_type, tuple(condition.path)) for condition in op.match_conditions or ()]
            users = {self._items.layout.pinned(path, wildcards=True)[0]
                     for match_type, path in conditions if match_type == "prefix"}
            user = next((u for u in users if u is not None), None)
            return listed(self._items.namespaces(user), conditions, op.max_depth, op.limit, op.offset)
        raise InvalidInputError("op", f"is not a LangGraph store operation: {type(op).__name__}")


def _check_namespace(op: Op) -> None:
    """LangGraph's label rules for ops given to ``batch`` directly (its methods check before batching), and a
    put needs a namespace."""
    try:
        validate_op_namespace(op)
    except InvalidNamespaceError as exc:
        raise NamespaceError("namespace", str(exc)) from exc
    if isinstance(op, PutOp) and not op.namespace:
        raise NamespaceError("namespace", "an item needs a namespace of at least one label")


def _tokens(path: str) -> str | list[str]:
    return path if path == "$" else tokenize_path(path)


def _texts(value: Any, paths: Sequence[tuple[str, str | list[str]]]) -> list[str]:
    return [text for _, tokens in paths for text in get_text_at_path(value, tokens)]


def _search_item(item: StoredItem, score: float | None) -> SearchItem:
    return SearchItem(namespace=item.namespace, key=item.key, value=item.value, created_at=item.created_at,
                      updated_at=item.updated_at, score=score)
