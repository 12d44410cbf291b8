"""Writers and searchers at once: a search reads one snapshot, and every answer is one the store could give.

The stress runs (scripts/stress.py's, on a bank and on the HTTP app) check whole answers under real threads;
the tests before them pin down each guarantee deterministically: a snapshot never changes under a search, an
edit copies what a snapshot shares once per call, held vectors never pair an id with another memory's row,
and the retriever owns its query-embedding threads.
"""

import importlib.util
import random
import sys
import threading
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.conftest import REPO, FakeEmbedder
from vecmem import MemoryRecord
from vecmem.interfaces.http.app import create_app
from vecmem.models import MemoryFilter
from vecmem.retrieval.index.held import HeldVectors
from vecmem.retrieval.index.keyword import IndexedMemory, KeywordIndex
from vecmem.retrieval.query.tokenize import memory_tokens, tokenize

pytestmark = pytest.mark.chroma  # concurrency on the real store: Chroma's own threads take part

spec = importlib.util.spec_from_file_location("stress", REPO / "scripts" / "stress.py")
stress_script = importlib.util.module_from_spec(spec)
sys.modules["stress"] = stress_script  # dataclasses look their module up while the class is built
spec.loader.exec_module(stress_script)


def record(memory_id, content, **fields):
    return MemoryRecord(id=memory_id, content=content, **fields)


def indexed(*records):
    index = KeywordIndex()
    index.replace_all((r.id, IndexedMemory.of(r, memory_tokens(r))) for r in records)
    return index


# ------------------------------------------------------------------------------------------ snapshots


def test_a_keyword_result_keeps_its_snapshot_while_the_index_is_edited():
    """The race once reproduced: a put() between the keyword search and the fusion made score_of read the
    index's live slot map past the end of its score array (IndexError)."""
    index = indexed(record("a", "apples and pears"), record("b", "apple pie"), record("c", "bananas"))
    view = index.view(MemoryFilter())
    result = index.search([(tokenize("apple"), 1.0)], view, 10)
    before = {memory_id: result.score_of(memory_id) for memory_id in "abc"}
    index.put("a", IndexedMemory.of(record("a", "apple apple apple"), tokenize("apple apple apple")))  # new slot
    index.put("d", IndexedMemory.of(record("d", "apple cider"), tokenize("apple cider")))
    index.remove(["b"])
    index.refresh_filters([record("c", "bananas", superseded_by="a")])
    assert {memory_id: result.score_of(memory_id) for memory_id in "abc"} == before
    assert result.score_of("d") == 0.0  # unknown to the snapshot
    assert view.visible("b") is True and view.visible("c") is True and view.visible("d") is None
    assert view.ranking_fields("b") is not None and view.type_of("b") == "fact"
    assert set(view.visible_ids()["fact"]) == {"a", "b", "c"}
    fresh = index.view(MemoryFilter())
    assert fresh.visible("b") is None and fresh.visible("c") is False and fresh.visible("d") is True


def test_a_snapshot_survives_the_merge_that_renumbers_slots():
    index = KeywordIndex(min_merge=1, merge_fraction=0.0)
    index.replace_all([("a", IndexedMemory.of(record("a", "otters"), tokenize("otters")))])
    index.put("b", IndexedMemory.of(record("b", "otters swim"), tokenize("otters swim")))
    old = index.snapshot()  # merges the delta first
    index.remove(["a"])
    index.put("c", IndexedMemory.of(record("c", "otters play"), tokenize("otters play")))
    index.snapshot()  # merges again: every slot renumbered
    result = old.search([(tokenize("otters"), 1.0)], old.view(MemoryFilter()), 5)
    assert {memory_id for memory_id, _ in result.top} == {"a", "b"} and result.score_of("c") == 0.0


def test_an_edit_copies_what_a_snapshot_shares_once_per_call(monkeypatch):
    index = indexed(*(record(f"m{i}", f"memory number {i}") for i in range(300)))
    copies = []
    original = KeywordIndex._own

    def counted(self):
        copies.append(self._shared)
        original(self)

    monkeypatch.setattr(KeywordIndex, "_own", counted)
    index.snapshot()
    batch = [record(f"n{i}", f"new memory {i}") for i in range(256)]
    index.put_many((r.id, IndexedMemory.of(r, memory_tokens(r))) for r in batch)
    index.put_many((r.id, IndexedMemory.of(r, memory_tokens(r))) for r in batch[:3])  # no snapshot since: no copy
    assert copies == [True, False] and len(index) == 556


def test_a_batch_written_through_the_bank_costs_one_copy_of_the_records(make_bank, monkeypatch):
    from vecmem.retrieval.index.replica import HeldRecords

    bank = make_bank()
    bank.add("a first memory")
    bank.search("first", 1)  # builds the copy and takes a snapshot of it
    copied = []
    original = HeldRecords._own
    monkeypatch.setattr(HeldRecords, "_own", lambda self: copied.append(self._shared) or original(self))
    bank.add_records([record(f"r{i}", f"record {i} of a batch") for i in range(256)])
    assert copied.count(True) == 1
    assert len(bank.search("batch", 300, record_access=False)) == 257  # the batch and the first memory


def test_held_vectors_never_pair_an_id_with_a_reused_row():
    """Rows freed by remove() are handed to other memories by put(); a reader racing them gets each id's own
    vector or nothing."""
    dimension = 16
    own = {f"m{i}": np.eye(dimension, dtype=np.float32)[i % dimension] * (1 + i) for i in range(64)}
    held = HeldVectors()
    held.put(list(own), np.stack(list(own.values())))
    stop = threading.Event()
    wrong = []

    def churn():
        rng = random.Random(1)
        while not stop.is_set():
            chosen = rng.sample(list(own), 8)
            held.remove(chosen)
            held.put(chosen[::-1], np.stack([own[i] for i in chosen[::-1]]))

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        for i in range(1000):
            query = np.eye(dimension, dtype=np.float32)[i % dimension]
            for memory_id, value in held.cosines(list(own), query).items():
                expected = float(own[memory_id] @ query) / float(np.linalg.norm(own[memory_id]))
                if abs(value - expected) > 1e-5:
                    wrong.append((memory_id, value, expected))
    finally:
        stop.set()
        writer.join()
    assert not wrong


def test_the_retriever_owns_its_query_embedding_threads(make_bank):
    bank = make_bank()
    bank.add("tea in the morning", resolve=False)  # resolving searches: the pool would exist already
    retriever = bank._retriever
    assert retriever._pool is None  # made on the first search that embeds a query
    bank.search("tea", 1)
    pool = retriever._pool
    assert pool is not None
    bank.close()
    assert retriever._pool is None and pool._shutdown


# ------------------------------------------------------------------------------------------ under real threads


def test_writers_and_searchers_on_one_bank(make_bank):
    bank = make_bank(embedder=FakeEmbedder())
    figures = stress_script.stress(bank, threads=8, operations=1200, seconds=10)
    assert figures.exceptions == [], figures.exceptions[0]
    assert figures.violations == [], figures.violations[:3]
    assert figures.searches >= 100 and figures.writes >= 20 and figures.results >= figures.searches


def _client(app):
    """A client of its own per thread, calling as a local program does (on loopback, a loopback Host, and the
    header the server asks of every state-changing request), as test_server.py's clients do."""
    return TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                      headers={"X-Vecmem-Request": "1"})


def test_the_server_answers_concurrent_requests_without_a_5xx(bank):
    app = create_app(bank)
    seeded = [_client(app).post("/memories", json={"content": f"heron crane note {i}", "id": f"m{i}"}).json()["id"]
              for i in range(40)]
    ids = list(seeded)
    failures, answers = [], []
    deadline = time.monotonic() + 6
    lock = threading.Lock()

    def writer(number):
        client, rng = _client(app), random.Random(number)
        step = 0
        while time.monotonic() < deadline and step < 60:
            step += 1
            with lock:
                target = rng.choice(ids)
            choice = rng.randrange(5)
            if choice == 0:
                reply = client.post("/memories", json={"content": f"heron note {number}-{step}", "id": f"w{number}-{step}"})
                if reply.status_code == 201:
                    with lock:
                        ids.append(reply.json()["id"])
            elif choice == 1:
                reply = client.patch(f"/memories/{target}", json={"content": f"crane note {number}-{step}"})
            elif choice == 2:
                reply = client.delete(f"/memories/{target}")
            elif choice == 3:
                reply = client.post(f"/memories/{target}/supersede", json={"new_id": rng.choice(seeded)})
            else:
                reply = client.post(f"/memories/{target}/restore")
            answers.append(reply.status_code)

    def searcher(number):
        client, rng = _client(app), random.Random(100 + number)
        while time.monotonic() < deadline:
            k = rng.randint(1, 8)
            if rng.random() < 0.8:
                reply = client.post("/search", json={"query": rng.choice(["heron", "crane note", "note 3"]), "k": k})
            else:
                reply = client.get("/memories", params={"limit": k})
            answers.append(reply.status_code)
            if reply.status_code >= 500:
                failures.append(reply.text)
            elif reply.status_code == 200:
                found = reply.json()
                parts = [hit.get(name) for hit in found for name in ("similarity", "dense", "keyword", "recency")]
                if len(found) > k or len({hit["id"] for hit in found}) != len(found) or any(
                        value is not None and not 0 <= value <= 1 for value in parts):
                    failures.append(f"inconsistent answer: {found}")

    def guarded(work, number):
        try:
            work(number)
        except Exception as exc:  # the test's point: any exception in a client thread fails it
            failures.append(repr(exc))

    threads = [threading.Thread(target=guarded, args=(writer, i)) for i in range(2)]
    threads += [threading.Thread(target=guarded, args=(searcher, i)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    assert not [status for status in answers if status >= 500]
    assert answers.count(200) > 50 and 201 in answers  # searches answered, and writes made while they ran
