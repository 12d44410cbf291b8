"""Which bank a process gets: the store itself, or the process that holds it (its owner).

An embedded store is held by one process at a time (storage/state/lock.py). So that the chat, `vecmem serve` (and
its panel), `vecmem mcp` and `vecmem` commands can all be open on one store, the long-running one that holds it
serves the others (endpoint.py), and every interface opens its bank here:

* ``VECMEM_CHROMA_URL`` set: a ``MemoryBank`` on the server, as many processes as like; no owner.
* owner.json names a live owner (its process exists and it answers ``hello`` with the secret): a
  ``RemoteBank`` (remote.py). Nothing heavy is imported or loaded: no Chroma, no model.
* otherwise the store is opened here. If another process has just taken it (``StoreInUseError``), this waits
  up to ``OWNER_WAIT`` seconds for it to announce itself as owner (a chat or `vecmem serve` starting) or to
  let go (another command finishing), then gives up with that error, as before. A store opened here clears an
  owner.json left by an owner that was killed (this process holds the store, so that one is gone).

A one-shot search with no owner may not need the store at all: ``saved_bank`` answers it from the user's saved
replica when that holds all the store holds of the user (interfaces/cli/command.py, ``Context.reading``).

``open_bank`` is for one-shot commands, which never serve (``connect`` is the same for Python code: what
``MemoryBank`` cannot be beside a running owner). ``long_running_bank`` (handover.py) is for the processes that stay: when they
opened the store themselves, they serve it until they stop; when they go through an owner and it goes, one of
them takes the store over and the others go through that one (handover.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from vecmem.config import Settings
from vecmem.errors import StoreError, StoreInUseError
from vecmem.interfaces.owner.remote import RemoteBank
from vecmem.interfaces.owner.wire import read_owner, remove_owner

if TYPE_CHECKING:
    from vecmem.bank.api import MemoryApi

__all__ = ["OWNER_WAIT", "BankFactory", "connect", "choose_bank", "find_owner", "open_bank",
           "open_here", "saved_bank"]

BankFactory = Callable[..., "MemoryApi"]  # (settings, verify_model=...) -> the store opened in this process
OWNER_WAIT = 5.0  # seconds: a chat or `vecmem serve` takes about a second from taking the store to serving it
_POLL = 0.1


def open_bank(settings: Settings, *, verify_model: bool = True, factory: BankFactory | None = None) -> MemoryApi:
    """The bank for a one-shot command: the owner's when there is one, else the store opened here."""
    return choose_bank(settings, verify_model, factory)[0]


def connect(settings: Settings | None = None) -> MemoryApi:
    """The bank of a Python program, as a `vecmem` command gets it: the owner's (the chat, `vecmem serve` or
    `vecmem mcp` holding the store) when there is one, else the store opened here. ``settings``: from the
    environment when not given."""
    return open_bank(settings or Settings.from_env())


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


def choose_bank(settings: Settings, verify_model: bool, factory: BankFactory | None) -> tuple[MemoryApi, bool]:
    """(the bank, whether it is an embedded store opened here, which a long-running process then serves)."""
    if settings.chroma_url:
        return open_here(settings, verify_model, factory), False
    deadline = time.monotonic() + OWNER_WAIT
    while True:
        remote = find_owner(settings)
        if remote is not None:
            return remote, False
        stale = read_owner(settings.home)  # not live: its owner was killed, or is just gone
        try:
            bank = open_here(settings, verify_model, factory)
        except StoreInUseError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(_POLL)
            continue
        if stale is not None:
            remove_owner(settings.home, stale)
        return bank, True


def open_here(settings: Settings, verify_model: bool, factory: BankFactory | None) -> MemoryApi:
    if factory is not None:
        return factory(settings, verify_model=verify_model)
    from vecmem.assembly import MemoryBank  # Chroma and the model only once the store is opened here

    return MemoryBank(settings, verify_model=verify_model)


def saved_bank(settings: Settings, user: str | None) -> MemoryApi | None:
    """A bank that searches ``user``'s saved replica without importing Chroma (vecmem/assembly.py,
    ``reading_saved``: it raises ``NotInSavedReplica`` for anything the file cannot answer), or None."""
    from vecmem.assembly import reading_saved

    return reading_saved(settings, user_id=user)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and the secret decides
        return True
    return True
