"""What a process killed mid-write left behind, settled by the next process that opens the store, before it
serves anything: no command to run, and nothing acknowledged is lost.

A SIGKILL can stop a write between its two announcements on the change feed (``begin``, ``end``), or between
the store's write and the access statistics' (``forget``, ``forget_all``: a memory deleted, its statistics
not yet). Moves between layouts and reindexes record each step in the store and are finished when a user is
first opened (chroma/layout.py, chroma/moves.py); a torn HNSW segment is rebuilt where it is found
(chroma/repair.py). Here, at open:

* the writes left open are ended (``ChangeFeed.recover``: only those of writers that died, proved by taking
  their users' write locks, so a live worker of a shared PostgreSQL state and Chroma server is never cut off);
* the users those writes were of are examined by the doctor and mended as ``vecmem doctor --repair`` would
  (doctor.py): a memory whose type changed stored in both types' collections keeps one copy, the access
  statistics of deleted memories go, keyword tokens are rewritten. This reads those users' memories once,
  and only after a kill.

What was settled is said in one log line. ``vecmem doctor --repair`` still settles what this cannot reach (a
store opened without its state, or a write lock another process keeps).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from vecmem.maintenance.doctor import examine_users
from vecmem.models import MemoryRecord
from vecmem.storage.base import MemoryStore
from vecmem.storage.state.access import AccessStats
from vecmem.storage.state.database import WriteLocks

__all__ = ["recover"]

log = logging.getLogger("vecmem")


def recover(store: MemoryStore, access: AccessStats, locks: WriteLocks,
            rewrite: Callable[[str, list[MemoryRecord]], object], *, model: str) -> dict[str, list[str]]:
    """Settle what killed writers left (module docstring); {user: memory ids whose writes were settled}.
    ``rewrite``: the bank's write path, as the doctor's repairs take it, embedding with ``model``. A bank whose
    model is not the store's (opened to reindex it) settles only: a repair would store vectors of another model."""
    if store.changes is None:
        return {}
    settled = store.changes.recover(locks.holding)
    if not settled:
        return {}
    stored = store.stored_model()  # read only after a kill: an open after a clean exit stops above
    if stored is not None and stored[0] != model:
        log.warning("vecmem: settled %d writes of %d users that a killed process left unfinished; what the store "
                    "holds is kept, not yet mended (this process's model is not the store's): `vecmem doctor "
                    "--repair` mends it", sum(map(len, settled.values())), len(settled))
        return settled
    with locks.holding(settled):
        report = examine_users(store, access, store.changes, sorted(settled), repair=True, rewrite=rewrite)
    mended = [f"{finding.kind} ({len(finding.memory_ids)})" for finding in report.findings if finding.repaired]
    log.warning("vecmem: settled %d writes of %d users that a killed process left unfinished; what the store "
                "holds is kept%s", sum(map(len, settled.values())), len(settled),
                f", and mended: {', '.join(mended)}" if mended else "")
    return settled
