"""The bank of a long-running process (the chat, `vecmem serve`, `vecmem mcp`): it carries on when the owner goes.

A long-running process either holds the embedded store and serves it (owner.py), or goes through the process that
does (remote.py). ``HandoverBank`` is that bank, and when the owner stops or is killed it takes its place without
a restart: the first call that finds the owner gone (``OwnerGoneError``) tries to take the store's lock. The
process that gets it opens the store, starts the owner endpoint and writes owner.json, as a process that found
no owner at its start does; every other one cannot take the lock (the kernel gives it to one process: there are
never two writers), waits for the new owner.json and goes through that owner. Within a process one thread does
this; the calls of the others wait for it and go to the new bank. The wait is bounded by ``HANDOVER_WAIT``; a
call that outlasts it gets the ``StoreInUseError`` a command gets, and the next call tries again.

Which calls are sent again: an owner that is gone cannot say whether it did a call it had read. A call it never
read (the connection was refused, it answered 503 while closing, another process is on its port) is sent again
to the new owner, whatever it is. A call it may have read is sent again only when doing it twice is doing it
once: reads (a search's access count aside) and ``doctor`` without repair, ``prune`` as a dry run. A write in
that state is not repeated: the caller gets a ``StoreError`` saying it may or may not have been done, and the
next call goes to the new owner. (Request ids would not help: the owner that knew which ids it had done is
the process that is gone.) A kept-alive connection the owner closed is replaced before a request is sent on it
(remote.py), so a call made after the owner went is one it never read, and is repeated.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vecmem.bank.api import MemoryApi
from vecmem.config import Settings
from vecmem.errors import StoreError, StoreInUseError
from vecmem.interfaces.owner.opening import BankFactory, choose_bank, find_owner, open_here
from vecmem.interfaces.owner.remote import OwnerGoneError, RemoteBank
from vecmem.interfaces.owner.wire import read_owner, remove_owner

if TYPE_CHECKING:
    from vecmem.interfaces.owner.endpoint import OwnerEndpoint

__all__ = ["HANDOVER_WAIT", "HandoverBank", "holder_name", "long_running_bank"]

HANDOVER_WAIT = 30.0  # seconds: the new owner opens the store (loads the model) before it serves
_POLL = 0.1
_TRIES = 3  # a call is sent to at most this many owners in a row
# calls that do nothing when done twice (a search counts an access once more)
_REPEATABLE = frozenset({"location", "embed_model", "search", "get", "history", "list_memories", "page_memories",
                         "count", "stats", "export", "review_queue", "build_context", "warm_up"})
# what is handed to whichever bank holds the store now: MemoryApi's members (vecmem/bank/api.py), derived from
# it so that a member added there is handed over too; settings and close are this object's own
_PROPERTIES = frozenset(name for name, member in vars(MemoryApi).items()
                        if isinstance(member, property) and name != "settings")
_API = _PROPERTIES | frozenset(name for name, member in vars(MemoryApi).items()
                               if inspect.isfunction(member) and not name.startswith("_") and name != "close")


def holder_name(program: str) -> str:
    """How a message names the process that holds the store."""
    return "the chat" if program.endswith("vecmem.chat") else f"`{program}`"


class HandoverBank:
    """``MemoryApi`` of a long-running process (see the module docstring): ``bank`` is what opening.py chose for
    it, ``endpoint`` the owner endpoint it started when it opened the store itself. ``say`` is told, in one
    line, when the process takes the store over or goes through a new owner."""

    def __init__(self, settings: Settings, bank: MemoryApi, endpoint: OwnerEndpoint | None, *, program: str,
                 factory: BankFactory | None = None, say: Callable[[str], None] | None = None) -> None:
        self._settings, self._program, self._factory = settings, program, factory
        self._say = say or (lambda line: None)
        self._bank, self._endpoint = bank, endpoint
        self._switching = threading.Lock()
        self._closed = False

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def bank(self) -> MemoryApi:
        """The bank calls go to now: the store opened here, or a ``RemoteBank`` of its owner."""
        return self._bank

    @property
    def serving(self) -> bool:
        """Whether this process holds the store (and serves it to the others)."""
        return self._endpoint is not None

    def whose(self) -> str:
        """Whose store this process uses, for its messages: "held by this process", "through the chat (pid N)"."""
        bank = self._bank
        if isinstance(bank, RemoteBank):
            return f"through {holder_name(bank.owner.program)} (pid {bank.owner.pid})"
        if self._settings.chroma_url:
            return "on the Chroma server"  # any number of processes: no owner, nothing to hand over
        return "held by this process" if self._endpoint is not None else "opened in this process"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _PROPERTIES:
            return self._run(name, {}, lambda bank: getattr(bank, name))
        if name in _API:
            def call(*args: Any, **kwargs: Any) -> Any:
                # a call may be made again through the next owner: what can be read once (a file's lines, a
                # generator of records) is read here, so the second try sends what the first did
                args = tuple(_replayable(value) for value in args)
                kwargs = {key: _replayable(value) for key, value in kwargs.items()}
                return self._run(name, kwargs, lambda bank: getattr(bank, name)(*args, **kwargs))

            return call
        return getattr(self._bank, name)  # what only the bank opened here has (its users(), say): as it is

    def _run(self, name: str, kwargs: dict[str, Any], call: Callable[[MemoryApi], Any]) -> Any:
        for attempt in range(_TRIES):
            bank = self._bank
            try:
                return call(bank)
            except OwnerGoneError as gone:
                if attempt == _TRIES - 1:
                    raise
                self._recover(bank)
                if gone.delivered and not _repeatable(name, kwargs):
                    raise StoreError(
                        f"the process holding the store stopped during this {name}: it may or may not have been "
                        f"done; this process now goes {self.whose()}: look, then do it again if it is not there"
                    ) from None
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------------------------------ the hand-over

    def _recover(self, failed: MemoryApi) -> None:
        """After ``failed`` (the owner's client) found the owner gone: go through the new owner, or become it."""
        with self._switching:
            if self._closed:
                raise StoreError("this process is closing its bank")
            if self._bank is not failed or not isinstance(failed, RemoteBank):
                return  # another thread re-pointed already
            deadline = time.monotonic() + HANDOVER_WAIT
            while not self._take_over_or_follow(failed):
                if time.monotonic() >= deadline:
                    raise StoreInUseError(
                        f"the process holding the store in {self._settings.home} ({failed.owner.program}, pid "
                        f"{failed.owner.pid}) is gone and another one holds it without serving it yet; run the "
                        "command again in a moment")
                time.sleep(_POLL)

    def _take_over_or_follow(self, failed: RemoteBank) -> bool:
        """One try: the new owner's client, or the store opened here and served; False when neither is there yet."""
        remote = find_owner(self._settings)
        if remote is not None:
            if remote.owner == failed.owner:  # the same owner answers again: its connection was what failed
                remote.close()
                return True
            self._switch(remote, None)
            self._say(f"vecmem: {holder_name(failed.owner.program)} (pid {failed.owner.pid}) has gone; this "
                      f"process now goes {self.whose()}")
            return True
        from vecmem.interfaces.owner.endpoint import OwnerEndpoint  # the server side, only once this process serves

        stale = read_owner(self._settings.home)
        try:
            bank = open_here(self._settings, verify_model=True, factory=self._factory)
        except StoreInUseError:
            return False  # another process took it: it writes owner.json once it serves
        try:
            if stale is not None:
                remove_owner(self._settings.home, stale)  # its process is gone: this one holds the store
            endpoint = OwnerEndpoint(bank, self._settings.home, program=self._program).start()
        except BaseException:
            bank.close()
            raise
        self._switch(bank, endpoint)
        self._say(f"vecmem: {holder_name(failed.owner.program)} (pid {failed.owner.pid}) has gone; this process "
                  f"took the store over: serving {bank.location}, held by this process")
        return True

    def _switch(self, bank: MemoryApi, endpoint: OwnerEndpoint | None) -> None:
        before = self._bank
        self._bank, self._endpoint = bank, endpoint
        before.close()  # a RemoteBank: its connections only

    def close(self) -> None:
        """Stop serving (owner.json goes first) and close the bank; a hand-over under way finishes first."""
        with self._switching:
            self._closed = True
            endpoint, self._endpoint = self._endpoint, None
            try:
                if endpoint is not None:
                    endpoint.stop()
            finally:
                self._bank.close()

    def __enter__(self) -> HandoverBank:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _replayable(value: Any) -> Any:
    return list(value) if isinstance(value, Iterator) else value


def _repeatable(name: str, kwargs: dict[str, Any]) -> bool:
    if name == "doctor":
        return not kwargs.get("repair", False)
    if name == "prune":
        return bool(kwargs.get("dry_run", False))
    return name in _REPEATABLE


@contextlib.contextmanager
def long_running_bank(settings: Settings, *, program: str, factory: BankFactory | None = None,
                      say: Callable[[str], None] | None = None) -> Iterator[HandoverBank]:
    """The bank of a process that stays (``program`` names it in owner.json): the owner's when there is one, else
    the store opened here and served to other processes until the block ends; closed then. When the owner goes,
    this process takes the store over or goes through the one that did (handover.py), and tells ``say``."""
    from vecmem.interfaces.owner.endpoint import OwnerEndpoint  # the server side, only for a process that may serve

    bank, owned = choose_bank(settings, True, factory)
    try:
        endpoint = OwnerEndpoint(bank, settings.home, program=program).start() if owned else None
    except BaseException:
        bank.close()
        raise
    with HandoverBank(settings, bank, endpoint, program=program, factory=factory, say=say) as handover:
        yield handover  # closed at the end: owner.json goes before the store does
