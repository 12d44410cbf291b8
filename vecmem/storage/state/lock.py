"""One process at a time on an embedded store: an exclusive lock on ``VECMEM_HOME/store.lock``.

Chroma's embedded mode keeps each collection's HNSW index in the memory of the process that opened it and does
not read other processes' writes into it: measured with chromadb 1.x, a process that had a collection open
did not find 50 memories another process added (its searches missed them and reading their vectors failed
with "Error finding id") until it wrote to the collection itself. Two processes on one folder would each search
a stale index. So the first process to open a store holds this lock until it closes the bank or exits (the
kernel lets go of it even after SIGKILL), and a second one gets ``StoreInUseError`` saying who has it. Banks of
one process share the lock (and Chroma's in-process client, which does see every write). Several processes on
one store is what a Chroma server is for (``VECMEM_CHROMA_URL``).
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import threading
from pathlib import Path

from vecmem.errors import StoreError, StoreInUseError
from vecmem.storage.files import FILE_MODE, private_dir

__all__ = ["StoreLock"]

_HELD: dict[Path, tuple[int, int]] = {}  # lock file -> (descriptor, banks of this process using it)
_GUARD = threading.Lock()


class StoreLock:
    """This process's hold on one embedded store; ``release`` when the bank closes."""

    def __init__(self, home: Path) -> None:
        self.path = (home / "store.lock").resolve()
        self._released = False
        self.taken = False  # this one took the lock: no bank of this process had the store open
        with _GUARD:
            held = _HELD.get(self.path)
            if held is not None:
                _HELD[self.path] = (held[0], held[1] + 1)
                return
            descriptor = self._take()
            _HELD[self.path] = (descriptor, 1)
            self.taken = True

    def _take(self) -> int:
        try:
            private_dir(self.path.parent)
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise StoreError(f"cannot open the store lock {self.path}: {exc}") from exc
        if os.fstat(descriptor).st_uid == os.getuid():
            os.fchmod(descriptor, FILE_MODE)  # a lock file an older vecmem left 0644
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(descriptor)
            os.close(descriptor)
            raise StoreInUseError(
                f"the store in {self.path.parent} is open in another process ({holder}); an embedded store "
                "serves one process at a time: close that one; in Python, vecmem.connect() rather than "
                "MemoryBank() goes through a chat, `vecmem serve` or `vecmem mcp` that holds it; or run a Chroma "
                "server for several (`chroma run --path DIR --port N` and VECMEM_CHROMA_URL=http://127.0.0.1:N)"
            ) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"pid {os.getpid()}: {_program()}\n".encode("utf-8", "replace"))
        return descriptor

    def release(self) -> None:
        with _GUARD:
            if self._released:
                return
            self._released = True
            descriptor, users = _HELD[self.path]
            if users > 1:
                _HELD[self.path] = (descriptor, users - 1)
                return
            del _HELD[self.path]
            os.close(descriptor)  # closing the descriptor releases the flock


_COMMAND_WORD = re.compile(r"[a-z][a-z-]{0,30}")


def _program() -> str:
    """Who holds the store, for the message a second process gets: the program and its subcommand only.

    Never the whole command line: `vecmem serve --token S` or `vecmem add "private text"` would put a secret
    or a memory into a file other processes read and into their error messages."""
    words = [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"]
    if len(sys.argv) > 1 and _COMMAND_WORD.fullmatch(sys.argv[1]):
        words.append(sys.argv[1])
    return " ".join(words)


_HOLDER = re.compile(r"pid \d+: [\w.+-]{1,100}( [a-z][a-z-]{0,30})?")


def _read_holder(descriptor: int) -> str:
    """What the holder wrote about itself, if it is in the form this version writes: an older vecmem wrote its
    whole command line, which may hold a token, and that must not be echoed into our message."""
    try:
        text = os.pread(descriptor, 300, 0).decode("utf-8", "replace")
    except OSError:
        text = ""
    return _holder_text(text)


def _holder_text(text: str) -> str:
    text = text.strip()
    return text if _HOLDER.fullmatch(text) else "a process that did not say which"
