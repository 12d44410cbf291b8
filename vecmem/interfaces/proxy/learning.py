"""`vecmem proxy`'s write side: what each exchange taught, learnt in the background, in order per user.

The client gets its answer without waiting for the write gate, the extraction and the store; the exchange (the
user's message and the answer) is queued instead, and ``MemoryApi.add_messages`` runs on it in a worker thread:

* **In order, per user.** A user's exchanges are learnt one at a time, in the order they were answered (a later
  statement supersedes an earlier one only if it is learnt later); different users are learnt side by side, up to
  ``workers`` at once.
* **Before the same user's next request.** ``settle(user)`` waits until every exchange queued for the user has
  been learnt (or failed); the proxy calls it before it recalls memories for the user's next request, so the
  second request of a conversation carries what the first one taught. It waits at most ``wait`` seconds, then the
  request goes ahead without (a warning in the log says so) rather than hang behind a learn that hangs.
* **Never lost silently.** A failure (the model down, a store error, a message ``add_messages`` refuses) is
  logged with the user and the reason, and the worker goes on with the next exchange. ``close`` learns what is
  still queued before it returns, so stopping the proxy loses nothing that was answered.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from vecmem.bank.api import MemoryApi
from vecmem.errors import VecmemError

__all__ = ["Exchange", "ExchangeLearner"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exchange:
    """One answered request: the user's message, the answer (empty when the model answered with tool calls only),
    and ``message_id``, what the memories learnt from it record as their provenance (the completion's id)."""

    user_id: str
    session_id: str | None
    message: str
    answer: str
    message_id: str | None = None

    def messages(self) -> list[dict[str, object]]:
        said: dict[str, object] = {"role": "user", "content": self.message}
        if self.message_id is not None:
            said["id"] = self.message_id
        answer: dict[str, object] = {"role": "assistant", "content": self.answer}
        return [said, answer] if self.answer.strip() else [said]


class ExchangeLearner:
    """Learns from exchanges in worker threads, in order per user (module docstring)."""

    def __init__(self, bank: MemoryApi, *, workers: int = 2, wait: float = 60.0) -> None:
        self._bank = bank
        self._wait = wait
        self._queues: dict[str, deque[Exchange]] = {}  # a user's exchanges not learnt yet; the first is in hand
        self._changed = threading.Condition()
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vecmem-proxy-learn")

    def submit(self, exchange: Exchange) -> None:
        """Queue the exchange behind the user's earlier ones (once closed: learn it now, in this thread)."""
        with self._changed:
            closed = self._closed
            if not closed:
                queue = self._queues.get(exchange.user_id)
                if queue is None:  # no worker on this user: start one
                    self._queues[exchange.user_id] = deque([exchange])
                    self._pool.submit(self._drain, exchange.user_id)
                else:
                    queue.append(exchange)
        if closed:  # a request answered while the proxy stops
            self._learn(exchange)

    def pending(self, user_id: str) -> int:
        with self._changed:
            return len(self._queues.get(user_id, ()))

    def settle(self, user_id: str) -> bool:
        """Wait until the user's queued exchanges are learnt; False when that took longer than ``wait`` seconds."""
        with self._changed:
            settled = self._changed.wait_for(lambda: user_id not in self._queues, self._wait)
        if not settled:
            log.warning("vecmem proxy: the earlier exchanges of user %r are still being learnt after %g s; answering "
                        "without what they teach", user_id, self._wait)
        return settled

    def close(self) -> None:
        """Learn everything still queued, then stop the workers."""
        with self._changed:
            self._closed = True
            left = sum(len(queue) for queue in self._queues.values())
        if left:
            log.warning("vecmem proxy: learning the %d exchange(s) still queued before stopping", left)
        self._pool.shutdown(wait=True)

    def _drain(self, user_id: str) -> None:
        while True:
            with self._changed:
                queue = self._queues[user_id]
                exchange = queue[0]
            self._learn(exchange)
            with self._changed:
                queue.popleft()
                if not queue:
                    del self._queues[user_id]
                self._changed.notify_all()
                if user_id not in self._queues:
                    return

    def _learn(self, exchange: Exchange) -> None:
        try:
            self._bank.add_messages(exchange.messages(), user_id=exchange.user_id, session_id=exchange.session_id)
        except VecmemError as exc:
            log.warning("vecmem proxy: could not learn from an exchange of user %r (%s): %s", exchange.user_id,
                        _preview(exchange.message), exc)
        except Exception:  # a worker must outlive any failure; log.exception records the traceback
            log.exception("vecmem proxy: learning from an exchange of user %r (%s) failed", exchange.user_id,
                          _preview(exchange.message))


def _preview(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
