"""Every replica of a process lives inside one budget (VECMEM_CACHE_MB): touching many users never grows the
process past it, and a user whose replica was dropped is searched exactly as before."""

from __future__ import annotations

from vecmem import MemoryRecord
from vecmem.retrieval.index.replica import BYTES_PER_MEMORY, BYTES_PER_REPLICA

BUDGET_MB = 16  # the smallest budget VECMEM_CACHE_MB takes
PER_USER = 30
ONE_USER = BYTES_PER_REPLICA + BYTES_PER_MEMORY * PER_USER
USERS = int(1.5 * BUDGET_MB * 1024 * 1024 / ONE_USER)  # half as many again as fit


def _bank_with_many_users(make_bank, settings):
    bank = make_bank(settings=settings.with_changes(cache_mb=BUDGET_MB))
    bank.add_records(
        MemoryRecord(id=f"m{i}", content=f"user {user} remembers item {i} about topic{i % 5}", user_id=f"u{user}")
        for user in range(USERS) for i in range(PER_USER)
    )
    return bank


def test_touching_many_users_stays_inside_the_budget(make_bank, settings) -> None:
    bank = _bank_with_many_users(make_bank, settings)
    replicas = bank._retriever._replicas
    first = [hit.id for hit in bank.search("topic3 item 8", k=3, user_id="u0")]
    peak = 0
    for user in range(USERS):
        hits = bank.search("topic3 item", k=3, user_id=f"u{user}")
        assert len(hits) == 3 and all(hit.record.user_id == f"u{user}" for hit in hits)
        peak = max(peak, replicas.held_bytes())
    assert peak <= BUDGET_MB * 1024 * 1024 + ONE_USER
    assert replicas.evicted >= USERS - BUDGET_MB * 1024 * 1024 // ONE_USER - 1
    assert "u0" not in replicas.copies  # the first user's replica made room for later ones
    assert [hit.id for hit in bank.search("topic3 item 8", k=3, user_id="u0")] == first  # rebuilt, same answer
