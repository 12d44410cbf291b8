"""The fast search path returns exactly what Chroma's own filtered query would (recall is not traded away)."""

import random

import numpy as np
import pytest

from tests.conftest import FakeEmbedder
from vecmem import MemoryRecord
from vecmem.models import MemoryFilter

pytestmark = pytest.mark.both_stores  # in memory, embedded, and on a real `chroma run` server

WORDS = "tea coffee python rust deploy docker cat dog editor neovim shell zsh macos linux memory budget".split()


@pytest.fixture
def stocked(make_bank):
    rng = random.Random(5)
    bank = make_bank(embedder=FakeEmbedder(dimension=64))
    records = []
    for i in range(400):
        records.append(MemoryRecord(
            id=f"r{i}", content=" ".join(rng.choices(WORDS, k=6)) + f" {i}",
            type=rng.choice(["fact", "preference", "instruction", "conclusion"]),
            scope="global" if rng.random() < 0.6 else f"s{rng.randrange(8)}",
            superseded_by="r0" if i and rng.random() < 0.1 else None,
        ))
    bank.add_records(records)
    return bank


FILTERS = [
    MemoryFilter(),
    MemoryFilter(session_id="s3"),
    MemoryFilter(types=frozenset({"preference", "instruction"})),
    MemoryFilter(session_id="s1", types=frozenset({"fact"})),
    MemoryFilter(session_id="s-unknown", types=frozenset({"conclusion"})),
]


def _filtered_nearest(store, vector, n, memory_filter):
    """Chroma's own filtered query; on the in-memory store, which has none, the exact nearest of every memory
    the filter lets through (what the in-memory store's search promises)."""
    if hasattr(store, "query"):
        return {record.id: cosine for record, cosine in store.query("default", vector, n, memory_filter)}
    records = list(store.scan("default", memory_filter))
    stored = store.vectors("default", [r.id for r in records], type_of={r.id: r.type for r in records})
    cosines = {i: float(v @ vector) / float(np.linalg.norm(v) * np.linalg.norm(vector)) for i, v in stored.items()}
    return dict(sorted(cosines.items(), key=lambda pair: (-pair[1], pair[0]))[:n])


@pytest.mark.parametrize("memory_filter", FILTERS)
@pytest.mark.parametrize("max_unfiltered", [320, 1])  # 1: always the id-restricted branch
def test_dense_candidates_equal_chromas_filtered_query(stocked, memory_filter, max_unfiltered, monkeypatch):
    import vecmem.retrieval.retriever as retrieval

    monkeypatch.setattr(retrieval, "MAX_UNFILTERED", max_unfiltered)
    retriever = stocked._retriever
    view = retriever.keyword_index("default").view(memory_filter)
    for query in ("tea python", "docker shell zsh", "cat memory budget 17"):
        vector = stocked.embedder.embed_query(query)
        fast = retriever._dense_candidates("default", vector, 20, view)
        exact = _filtered_nearest(stocked._store, vector, 20, memory_filter)
        # the same similarities, and the same memories except for a tie straddling the cut-off
        assert sorted(round(c, 5) for c in fast.values()) == sorted(round(c, 5) for c in exact.values())
        cutoff = min(exact.values())
        assert {i for i, c in fast.items() if c > cutoff + 1e-6} == {i for i, c in exact.items() if c > cutoff + 1e-6}


def test_hits_always_pass_the_filter(stocked):
    for memory_filter in FILTERS:
        hits = stocked.search("tea python docker", 30, session_id=memory_filter.session_id,
                              types=memory_filter.types, record_access=False)
        assert hits and all(memory_filter.matches(hit.record) for hit in hits)


def test_memories_hidden_by_another_process_are_skipped_and_replaced(make_bank, settings):
    """The catalogue of this process still calls the best matches live; another bank superseded them.
    The search fetches further down its ranking until it has k live memories, and returns none of those."""
    embedder = FakeEmbedder(dimension=64)
    this = make_bank(embedder=embedder, settings=settings.with_changes(index_check_seconds=3600))
    for i in range(30):
        this.add(f"tea note {i}", memory_id=f"t{i}", importance=round(1 - i / 40, 3))
    newest = this.add("coffee replaces the tea notes", memory_id="coffee")
    before = [hit.id for hit in this.search("tea note", 5, record_access=False)]
    other = make_bank(embedder=embedder)
    for memory_id in before[:4]:
        other.supersede(memory_id, newest.id)
    after = this.search("tea note", 5, record_access=False)
    assert len(after) == 5
    assert not {hit.id for hit in after} & set(before[:4])
    assert all(not hit.record.superseded for hit in after)
