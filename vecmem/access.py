"""Write-behind access statistics: a search notes which memories it returned; the store is updated later.

Updating ``access_count`` and ``last_accessed`` costs a Chroma write (5 to 16 ms), which would be most of a
search. So searches only note their hits here; notes for the same memory coalesce, and they are written in
one batch at most ``interval`` seconds later by a background thread, before any read or write of the bank that
could see them, on ``MemoryBank.flush()``, and when the interpreter exits. While a note waits, the bank
applies it to the records it ranks, so recency is always current. A process killed outright (SIGKILL) loses
at most the last ``interval`` seconds of access statistics, never a memory.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Iterable

from .models import MemoryRecord

__all__ = ["AccessLog", "PendingAccess"]

log = logging.getLogger(__name__)
_LOGS: "weakref.WeakSet[AccessLog]" = weakref.WeakSet()


@dataclass
class PendingAccess:
    count: int
    last: datetime


class AccessLog:
    def __init__(self, write: Callable[[str, dict[str, PendingAccess]], None], *, interval: float = 1.0) -> None:
        self._write = write  # (user, {memory id: pending}) -> stores the change
        self._interval = interval
        self._pending: dict[str, dict[str, PendingAccess]] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        _LOGS.add(self)

    def note(self, user_id: str, memory_ids: Iterable[str], when: datetime) -> None:
        with self._lock:
            waiting = self._pending.setdefault(user_id, {})
            for memory_id in memory_ids:
                entry = waiting.get(memory_id)
                if entry is None:
                    waiting[memory_id] = PendingAccess(1, when)
                else:
                    entry.count += 1
                    entry.last = max(entry.last, when)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="vecmem-access", daemon=True)
                self._thread.start()

    def apply(self, record: MemoryRecord) -> MemoryRecord:
        """The record as it will be once the waiting notes are written."""
        with self._lock:
            entry = self._pending.get(record.user_id, {}).get(record.id)
            if entry is None:
                return record
            last = entry.last if record.last_accessed is None else max(record.last_accessed, entry.last)
            count = record.access_count + entry.count
        return MemoryRecord.trusted(**{**record.__dict__, "access_count": count, "last_accessed": last})

    def flush(self) -> None:
        """Write every waiting note now (a no-op when none wait)."""
        if not self._pending:
            return
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, {}
            for user_id, entries in batch.items():
                try:
                    self._write(user_id, entries)
                except Exception:  # the store failed: keep the notes for the next flush rather than lose them
                    with self._lock:
                        waiting = self._pending.setdefault(user_id, {})
                        for memory_id, entry in entries.items():
                            current = waiting.get(memory_id)
                            if current is None:
                                waiting[memory_id] = entry
                            else:
                                current.count += entry.count
                                current.last = max(current.last, entry.last)
                    raise

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            try:
                self.flush()
            except Exception as exc:  # logged, retried on the next round
                log.warning("could not write access statistics: %s", exc)
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return


@atexit.register
def _flush_all() -> None:
    for access_log in list(_LOGS):
        try:
            access_log.flush()
        except Exception as exc:  # at exit there is nobody left to tell but the log
            log.warning("could not write access statistics at exit: %s", exc)
