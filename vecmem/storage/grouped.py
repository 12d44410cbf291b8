"""Group commit: the writes several threads of one process make at the same moment go to the store as one.

A Chroma write costs about the same whether it carries one row or a few dozen (the server commits its log once
per call, and its calls are serialised: concurrent upserts of one server do not run side by side, they queue), so
one process's writes are worth gathering. Each thread that writes hands its ``UserWrite``s to ``GroupCommit``
and waits. One thread at a time leads: it takes every write waiting (of the same kind, ``new`` or not, up to
``MAX_ROWS`` rows), writes them in one ``upsert_many`` (one ``begin`` and one ``end`` on the change feed, one
upsert per collection) and wakes their writers; if more arrived meanwhile it hands the lead to the first of
them and returns, so no writer waits for more than the group before its own and its own.

Writers keep holding their users' write locks while they wait (bank/facade.py), so a group never holds two writes of
one user, and what each writer read and checked under its lock is still true when its write lands. A group
that fails is written again one writer at a time, so each writer gets its own write's outcome: one bad write
fails alone, and a failure of the store reaches every writer as its own error. Upserts are idempotent, so
writing again what may have partly landed is safe (the feed's ``failed`` rows tell readers to re-read it).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence

from vecmem.errors import StoreError
from vecmem.storage.base import UserWrite

__all__ = ["GroupCommit", "MAX_ROWS"]

MAX_ROWS = 256  # rows in one group: a larger import is written in batches of its own (transfer.py) anyway


class _Waiting:
    """One writer's writes, and what became of them."""

    __slots__ = ("error", "finished", "new", "rows", "wake", "writes")

    def __init__(self, writes: Sequence[UserWrite], new: bool) -> None:
        self.writes = list(writes)
        self.new = new
        self.rows = sum(len(write.records) for write in self.writes)
        self.wake = threading.Event()  # set when its write is done, or when it is to lead
        self.finished = False
        self.error: BaseException | None = None


class GroupCommit:
    """Calls ``write(writes, new=...)`` (a store's ``upsert_many``) for the writes of every thread at once."""

    def __init__(self, write: Callable[..., None]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self._queue: deque[_Waiting] = deque()
        self._busy = False  # a leader is writing; while it is, the queue's first writer is the next leader

    def __call__(self, writes: Sequence[UserWrite], *, new: bool = False) -> None:
        mine = _Waiting(writes, new)
        with self._lock:
            self._queue.append(mine)
            leading = not self._busy
            self._busy = True
        if not leading:
            try:
                mine.wake.wait()
            except BaseException:
                self._withdraw(mine)
                raise
        if not mine.finished:  # woken to lead: it is the queue's first
            self._lead()
        if mine.error is not None:
            raise mine.error

    def _lead(self) -> None:
        try:
            with self._lock:
                group = self._take()
            self._run(group)
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].wake.set()
                else:
                    self._busy = False

    def _withdraw(self, mine: _Waiting) -> None:
        """A writer interrupted while it waited (KeyboardInterrupt) leaves the queue, so its write is not made
        after it gave up; if it had been woken to lead, the lead passes to the next writer, so nobody waits for a
        leader that is gone. A write already taken into a group is being written and cannot be called back."""
        with self._lock:
            if mine not in self._queue:
                return
            self._queue.remove(mine)
            if mine.wake.is_set():  # it was the next leader
                if self._queue:
                    self._queue[0].wake.set()
                else:
                    self._busy = False

    def _take(self) -> list[_Waiting]:
        """The first writer's writes and every other waiting one of the same kind, up to MAX_ROWS rows (called
        holding the lock)."""
        first = self._queue.popleft()
        group, rows, kept = [first], first.rows, deque[_Waiting]()
        while self._queue:
            waiting = self._queue.popleft()
            if waiting.new == first.new and rows + waiting.rows <= MAX_ROWS:
                group.append(waiting)
                rows += waiting.rows
            else:
                kept.append(waiting)
        self._queue.extendleft(reversed(kept))
        return group

    def _run(self, group: list[_Waiting]) -> None:
        """Write the group at once; if that fails, each writer's writes alone. Every writer is woken."""
        try:
            try:
                self._write([write for waiting in group for write in waiting.writes], new=group[0].new)
            except Exception as exc:  # noqa: BLE001  # handed to its writer, who raises it
                if len(group) == 1:
                    group[0].error = exc
                else:
                    for waiting in group:
                        try:
                            self._write(waiting.writes, new=waiting.new)
                        except Exception as alone:  # noqa: BLE001  # each writer's own outcome, raised by it
                            waiting.error = alone
            except BaseException:  # interrupted (KeyboardInterrupt): the others' writes did not surely land
                for waiting in group[1:]:
                    waiting.error = StoreError("a write was interrupted before it was surely stored; try again")
                raise
        finally:
            for waiting in group:
                waiting.finished = True
                waiting.wake.set()
