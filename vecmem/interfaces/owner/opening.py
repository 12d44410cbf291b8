"""Which bank a process gets: the store itself, or the process that holds it (its owner).

An embedded store is held by one process at a time (storage/state/lock.py). So that the chat, `vecmem serve` (and
its panel), `vecmem mcp` and `vecmem` commands can all be open on one store, the long-running one that holds it
serves the others (owner.py), and every interface opens its bank here:

* ``VECMEM_CHROMA_URL`` set: a ``MemoryBank`` on the server, as many processes as like; no owner.
* owner.json names a live owner (its process exists and it answers ``hello`` with the secret): a
  ``RemoteBank`` (remote.py). Nothing heavy is imported or loaded: no Chroma, no model.
* otherwise the store is opened here. If another process has just taken it (``StoreInUseError``), this waits
  up to ``OWNER_WAIT`` seconds for it to announce itself as owner (a chat or `vecmem serve` starting) or to
  let go (another command finishing), then gives up with that error, as before. A store opened here clears an
  owner.json left by an owner that was killed (this process holds the store, so that one is gone).

``open_bank`` is for one-shot commands, which never serve. ``long_running_bank`` is for the processes that stay:
when they opened the store themselves, they serve it until they stop.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from vecmem.config import Settings
from vecmem.errors import StoreError, StoreInUseError
from vecmem.interfaces.owner.remote import RemoteBank
from vecmem.interfaces.owner.wire import read_owner, remove_owner

if TYPE_CHECKING:
    from vecmem.bank.api import MemoryApi

__all__ = ["OWNER_WAIT", "BankFactory", "find_owner", "long_running_bank", "open_bank"]

BankFactory = Callable[..., "MemoryApi"]  # (settings, verify_model=...) -> the store opened in this process
OWNER_WAIT = 5.0  # seconds: a chat or `vecmem serve` takes about a second from taking the store to serving it
_POLL = 0.1


def open_bank(settings: Settings, *, verify_model: bool = True, factory: BankFactory | None = None) -> MemoryApi:
    """The bank for a one-shot command: the owner's when there is one, else the store opened here."""
    return _choose(settings, verify_model, factory)[0]


@contextlib.contextmanager
def long_running_bank(settings: Settings, *, program: str, factory: BankFactory | None = None) -> Iterator[MemoryApi]:
    """The bank of a process that stays (``program`` names it in owner.json): the owner's when there is one, else
    the store opened here and served to other processes until the block ends; closed then."""
    from vecmem.interfaces.owner.endpoint import OwnerEndpoint  # the server side, only for a process that may serve

    bank, owned = _choose(settings, True, factory)
    endpoint = OwnerEndpoint(bank, settings.home, program=program).start() if owned else None
    try:
        yield bank
    finally:
        if endpoint is not None:
            endpoint.stop()  # owner.json goes before the store does
        bank.close()


def find_owner(settings: Settings) -> RemoteBank | None:
    """A client of the live owner of the store in ``settings.home``, or None when there is none."""
    info = read_owner(settings.home)
    if info is None or not _alive(info.pid):
        return None
    remote = RemoteBank(settings, info)
    try:
        remote.hello()
    except StoreError:
        remote.close()
        return None
    return remote


def _choose(settings: Settings, verify_model: bool, factory: BankFactory | None) -> tuple[MemoryApi, bool]:
    """(the bank, whether it is an embedded store opened here, which a long-running process then serves)."""
    if settings.chroma_url:
        return _opened(settings, verify_model, factory), False
    deadline = time.monotonic() + OWNER_WAIT
    while True:
        remote = find_owner(settings)
        if remote is not None:
            return remote, False
        stale = read_owner(settings.home)  # not live: its owner was killed, or is just gone
        try:
            bank = _opened(settings, verify_model, factory)
        except StoreInUseError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(_POLL)
            continue
        if stale is not None:
            remove_owner(settings.home, stale)
        return bank, True


def _opened(settings: Settings, verify_model: bool, factory: BankFactory | None) -> MemoryApi:
    if factory is not None:
        return factory(settings, verify_model=verify_model)
    from vecmem.bank.facade import MemoryBank  # Chroma and the model only once the store is opened here

    return MemoryBank(settings, verify_model=verify_model)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and the secret decides
        return True
    return True
