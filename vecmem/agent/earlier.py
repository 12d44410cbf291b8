"""What the user's earlier sessions left: the answer to "what did we discuss last time?" in a new session.

A session's local summaries are scoped to it (memory_agent.py), so a new session sees none of them until a global
summary merges them, every ``VECMEM_GLOBAL_SUMMARY_EVERY`` local ones. When a message points at the past
(``rules.points_to_past``: "上次我们聊到哪了", "where did we leave off?"), proactive recall (recall.py) brings, for
each of the ``EARLIER_SESSIONS`` sessions the user last talked in before this one (the session store, by their
last turn) that left something, the most recent first:

* its newest ``SUMMARIES_PER_SESSION`` local summaries: the ones the session store recorded for it, so only
  summaries the agent wrote of that session for this user. A summary is the user's own account of the session,
  so it may be shown in another session although it is scoped to its own;
* the global memories learnt there (provenance: that session), newest first, at most ``k``.

Never another user's (every read is the user's), and never another session's own memories ("this session I'm
on the billing bug"): a memory scoped to another session comes in only as that session's summary.

The hits are chosen for being the user's latest sessions, not for the message's words ("last time" shares none
with them): they carry no relevance (None), so the relevance floor does not hold them back, and the prompt's
budget keeps as many as its long-term share holds, from the first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice

from vecmem.bank.api import MemoryApi
from vecmem.errors import NotFoundError
from vecmem.models import LIVE, Hit, MemoryRecord
from vecmem.retrieval.rank import rank_by_importance
from vecmem.storage.state.sessions import SessionStore
from vecmem.validation import GLOBAL_SCOPE

__all__ = ["EARLIER_SESSIONS", "LOOKED_AT", "SCANNED", "SUMMARIES_PER_SESSION", "earlier_sessions"]

EARLIER_SESSIONS = 2
# sessions that left nothing (a greeting, a question) are passed over: the latest LOOKED_AT are looked at
LOOKED_AT = 10
SUMMARIES_PER_SESSION = 2
# the user's newest memories looked through for what the earlier sessions learnt: bounded, so a user with a
# hundred thousand memories is not sent whole (a RemoteBank) for a "last time?"; what the last sessions learnt is
# among the newest unless thousands were written since
SCANNED = 2000


def earlier_sessions(bank: MemoryApi, sessions: SessionStore, *, user_id: str, session_id: str | None,
                     k: int) -> list[Hit]:
    """The summaries and learnt memories of the user's latest sessions before ``session_id`` (module docstring),
    the most recent session first. Touches nothing."""
    recent = sessions.recent_sessions(user_id, excluding=session_id, limit=LOOKED_AT)
    if not recent:
        return []
    records = bank.list_memories(user_id=user_id, limit=SCANNED)  # live ones of every scope, newest first
    by_id = {record.id: record for record in records}
    chosen: dict[str, MemoryRecord] = {}
    shown = 0
    for session in recent:
        if shown == EARLIER_SESSIONS:
            break
        newest_first = reversed(sessions.counters(user_id, session.session_id).local_summaries)
        summaries = islice((record for memory_id in newest_first
                            if (record := by_id.get(memory_id) or _live(bank, memory_id, user_id)) is not None
                            and record.scope == session.session_id), SUMMARIES_PER_SESSION)
        learnt = sorted((record for record in records if _learnt_in(record, session.session_id)), key=_said_last,
                        reverse=True)[:k]
        found = [*summaries, *learnt]
        shown += bool(found)
        for record in found:
            chosen.setdefault(record.id, record)
    order = {memory_id: position for position, memory_id in enumerate(chosen)}
    hits = rank_by_importance(chosen.values(), now=datetime.now(UTC), weights=bank.settings.weights,
                              decay_per_day=bank.settings.recency_decay_per_day)
    return sorted(hits, key=lambda hit: order[hit.id])


def _live(bank: MemoryApi, memory_id: str, user_id: str) -> MemoryRecord | None:
    """A summary older than the memories scanned, if it is still live (not forgotten, superseded or archived)."""
    try:
        record = bank.get(memory_id, user_id=user_id)
    except NotFoundError:
        return None
    return record if record.status == LIVE and not record.superseded else None


def _learnt_in(record: MemoryRecord, session_id: str) -> bool:
    """A global memory written from that session's messages (not a summary: those come as the session's own)."""
    return (record.scope == GLOBAL_SCOPE and record.provenance is not None
            and record.provenance.session_id == session_id and "summary" not in record.tags)


def _said_last(record: MemoryRecord) -> tuple[datetime, int]:
    """When a memory was learnt: its time, then its latest message (a chat turn's id) when times are equal."""
    turns = [int(message) for message in record.provenance.message_ids if message.isdigit()] if record.provenance \
        else []
    return record.created_at, max(turns, default=-1)
