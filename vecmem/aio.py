"""``AsyncMemoryBank``: the bank's calls as coroutines that never block the event loop.

    abank = await AsyncMemoryBank.open()                     # the store opened in a thread
    abank = AsyncMemoryBank()                                # the same, opened here (what MemoryBank() opens)
    abank = AsyncMemoryBank(bank)                            # a MemoryBank of the caller's, or a RemoteBank
    await abank.add("The user prefers concise code", memory_type="preference")
    hits = await abank.search("write me a sleep function", k=3)
    await abank.aclose()                                     # or: async with AsyncMemoryBank(bank) as abank: ...

Each coroutine runs the same method of the bank it wraps (any ``MemoryApi``: a ``MemoryBank``, or the
``RemoteBank`` of a store another process owns) in a thread pool of its own, so an asyncio application (FastAPI,
LangGraph, the OpenAI Agents SDK) awaits it while its other tasks keep running. Signatures, defaults, results
and errors are the bank's (``test_aio.py`` holds them equal); ``export`` returns a list (a generator would read
the store on the loop as it is iterated), ``close`` is ``aclose``. The caller's context variables go with each
call. A call whose awaiting task is cancelled still finishes in its thread (a write is never left half-done);
only its result is dropped.

Why threads rather than Chroma's ``AsyncHttpClient`` on a Chroma server: what a search waits for is mostly not
Chroma. The query is embedded by a local model (ONNX Runtime or torch: CPU work that releases the GIL, and has no
asyncio API at all), BM25 and the ranking run in numpy over the user's in-memory replica, and the replica is
kept current by the change feed in the state database (SQLite or PostgreSQL, through sync drivers), so most
searches send Chroma nothing; writes hold the process's write lock and the users' shared write locks (a
``threading.RLock`` and database locks) across the reads they check and Chroma's write. An async Chroma client
would therefore need a second, async implementation of the store protocol, the write path, the locks and the
change feed, and every CPU step would still need a thread. What it would change: a search or write waiting on
a slow Chroma server would hold no thread while it waits, so more such calls could be in flight than the pool
has threads (``max_workers``). With one sync code path for embedded Chroma, a server and the in-memory store,
the pool gives the same guarantee, the loop never waits, at the price of one thread per call in flight.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from vecmem.bank.api import MemoryApi
from vecmem.bank.facade import MemoryBank
from vecmem.config import Settings
from vecmem.errors import InvalidInputError, StoreError
from vecmem.models import MemoryRecord

__all__ = ["AsyncMemoryBank", "bank_of"]

DEFAULT_WORKERS = 4  # calls in flight at once; the bank serialises writes itself, reads run side by side

_P = ParamSpec("_P")
_R = TypeVar("_R")


def bank_of(bank: MemoryApi | Settings | None, settings: Settings | None, bank_options: dict[str, Any]) -> MemoryApi:
    """The bank a wrapper (``AsyncMemoryBank``, ``VecmemStore``) was given, or the ``MemoryBank`` it opens from
    ``settings`` and ``MemoryBank``'s other arguments when it was given none (a ``Settings`` in the bank's place
    is the settings)."""
    if isinstance(bank, Settings):
        if settings is not None:
            raise InvalidInputError("settings", "given twice: as the first argument and as settings=")
        bank, settings = None, bank
    if bank is None:
        return MemoryBank(settings, **bank_options)
    if settings is not None or bank_options:
        named = ", ".join(sorted([*(["settings"] if settings is not None else []), *bank_options]))
        raise InvalidInputError("bank", f"a bank was given, so there is no bank to open with {named}: give one "
                                        "or the other")
    return bank


def _twin(method: Callable[Concatenate[MemoryBank, _P], _R]
          ) -> Callable[Concatenate[AsyncMemoryBank, _P], Coroutine[Any, Any, _R]]:
    """The coroutine that runs the wrapped bank's method of the same name in the pool (typed, named and
    documented as ``MemoryBank``'s)."""
    name = method.__name__

    async def call(self: AsyncMemoryBank, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        bound: Callable[..., _R] = getattr(self.bank, name)
        return await self._run(bound, *args, **kwargs)

    functools.update_wrapper(call, method, assigned=("__name__", "__qualname__", "__doc__"))
    call.__qualname__ = f"AsyncMemoryBank.{name}"
    return call


class AsyncMemoryBank:
    """Every ``MemoryApi`` call of ``bank`` as a coroutine run in a pool of ``max_workers`` threads. Closing it
    (``aclose``, or leaving ``async with``) waits for the calls in flight, then closes ``bank``."""

    def __init__(self, bank: MemoryApi | Settings | None = None, *, settings: Settings | None = None,
                 max_workers: int = DEFAULT_WORKERS, **bank_options: Any) -> None:
        """``bank``: the bank to wrap; without one, ``MemoryBank(settings, **bank_options)`` is opened here (the
        environment's settings when none are given, as ``MemoryBank()``; a ``Settings`` may come first too) and
        closed with this one. ``open`` opens it in a thread instead, for a caller on the event loop."""
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="vecmem-async")
        self._closed = False
        self.bank = bank_of(bank, settings, bank_options)  # last: nothing else to release if opening fails

    @classmethod
    async def open(cls, settings: Settings | None = None, *, max_workers: int = DEFAULT_WORKERS,
                   **bank_options: Any) -> AsyncMemoryBank:
        """A ``MemoryBank(settings, **bank_options)`` opened in a thread (opening a store takes a while), wrapped."""
        bank = await asyncio.to_thread(MemoryBank, settings, **bank_options)
        return cls(bank, max_workers=max_workers)

    @property
    def settings(self) -> Settings:
        return self.bank.settings

    async def _run(self, function: Callable[..., _R], /, *args: Any, **kwargs: Any) -> _R:
        if self._closed:
            raise StoreError("this AsyncMemoryBank is closed")
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(context.run, function, *args, **kwargs))

    # writing
    add = _twin(MemoryBank.add)
    remember = _twin(MemoryBank.remember)
    add_messages = _twin(MemoryBank.add_messages)
    update = _twin(MemoryBank.update)
    supersede = _twin(MemoryBank.supersede)
    restore = _twin(MemoryBank.restore)
    forget = _twin(MemoryBank.forget)
    forget_all = _twin(MemoryBank.forget_all)
    import_jsonl = _twin(MemoryBank.import_jsonl)
    # reading
    get = _twin(MemoryBank.get)
    history = _twin(MemoryBank.history)
    list_memories = _twin(MemoryBank.list_memories)
    page_memories = _twin(MemoryBank.page_memories)
    search = _twin(MemoryBank.search)
    build_context = _twin(MemoryBank.build_context)
    warm_up = _twin(MemoryBank.warm_up)
    count = _twin(MemoryBank.count)
    stats = _twin(MemoryBank.stats)
    # hygiene and the store as a whole
    prune = _twin(MemoryBank.prune)
    unarchive = _twin(MemoryBank.unarchive)
    review_queue = _twin(MemoryBank.review_queue)
    approve = _twin(MemoryBank.approve)
    reject = _twin(MemoryBank.reject)
    doctor = _twin(MemoryBank.doctor)
    reindex = _twin(MemoryBank.reindex)

    async def export(self, *, user_id: str | None = None) -> list[MemoryRecord]:
        """Every memory (superseded ones included) of one user, or of every user when ``user_id`` is None, read
        in full in the pool."""
        return await self._run(lambda: list(self.bank.export(user_id=user_id)))

    async def aclose(self) -> None:
        """Wait for the calls in flight, then close the bank, in a thread (closing waits for its vector loaders)."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._pool.shutdown, wait=True)
        await asyncio.to_thread(self.bank.close)

    async def __aenter__(self) -> AsyncMemoryBank:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
