"""Held vectors give a search exactly the cosines Chroma's stored vectors give, and stay in step with writes."""

import random

import numpy as np
import pytest

import vecmem.retrieval.index.replica as replica
from tests.conftest import FakeEmbedder
from vecmem.errors import StoreError
from vecmem.retrieval.index.held import HeldVectors

pytestmark = pytest.mark.chroma  # held vectors are loaded from and checked against real Chroma

WORDS = "heron crane stork ibis egret swan goose duck teal wigeon".split()


def _stock(bank, count=300):
    rng = random.Random(3)
    for i in range(count):
        bank.add(" ".join(rng.choices(WORDS, k=5)) + f" {i}", memory_id=f"b{i}", resolve=False,
                 memory_type=rng.choice(["fact", "preference", "instruction", "conclusion"]))


def _ranked(bank, query):
    return [(hit.id, round(hit.score, 6), None if hit.dense is None else round(hit.dense, 5))
            for hit in bank.search(query, 4, record_access=False)]


@pytest.fixture
def stocked_pair(make_bank, monkeypatch):
    """A bank holding its vectors, and one on the same store that reads every vector from Chroma."""
    embedder = FakeEmbedder(dimension=32)
    held = make_bank(embedder=embedder)
    _stock(held)
    held.warm_up()
    assert held._retriever.hold_vectors("default")
    monkeypatch.setattr(replica, "HOLD_AT_MOST_BYTES", 0)  # the second one never holds
    reading = make_bank(embedder=embedder)
    reading.warm_up()
    assert reading._retriever._current("default").vectors is None
    return held, reading


def test_held_vectors_rank_exactly_as_stored_ones(stocked_pair, monkeypatch):
    held, reading = stocked_pair
    vectors = held._retriever._current("default").vectors
    assert len(vectors) == 300
    answered, scanned = [], []
    original, nearest = vectors.cosines, vectors.nearest
    monkeypatch.setattr(vectors, "cosines", lambda ids, query: answered.append(len(ids)) or original(ids, query))
    monkeypatch.setattr(vectors, "nearest", lambda *args: scanned.append(1) or nearest(*args))
    for query in ("heron crane", "teal wigeon goose 17", "duck", "egret swan ibis stork", "17 23 42 99"):
        assert _ranked(held, query) == _ranked(reading, query)
    assert len(scanned) == 5  # the dense side scanned the held vectors exactly, no index asked


def test_held_vectors_follow_edits_here_and_in_another_process(stocked_pair):
    held, reading = stocked_pair
    held.update("b3", content="a pelican in the harbour")
    reading.update("b4", content="a pelican on the pier")
    reading.forget("b5")
    for query in ("pelican harbour", "pelican pier", "heron crane"):
        assert _ranked(held, query) == _ranked(reading, query)
    vectors = held._retriever._current("default").vectors
    assert "b5" not in vectors
    expected = held.embedder.embed_documents(["a pelican on the pier"])[0]
    cosine = vectors.cosines(["b4"], expected)["b4"]
    assert cosine == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_nearest_is_the_exact_top_among_those_kept(seed):
    rng = np.random.default_rng(seed)
    held = HeldVectors()
    ids = [f"m{i}" for i in range(500)]
    matrix = rng.normal(size=(500, 16)).astype(np.float32)
    held.put(ids, matrix)
    held.remove(ids[:50])  # freed rows are never answered
    query = rng.normal(size=16).astype(np.float32)
    kept = {i for i in ids[50:] if int(i[1:]) % 3}  # a filter that hides a third
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    exact = sorted(((float(unit[int(i[1:])] @ (query / np.linalg.norm(query))), i) for i in kept), reverse=True)
    found = held.nearest(query, 20, kept.__contains__)
    assert list(found) == [i for _, i in exact[:20]]
    assert list(found.values()) == pytest.approx([c for c, _ in exact[:20]], abs=1e-5)
    assert len(held.nearest(query, 1000, kept.__contains__)) == len(kept)  # fewer kept than wanted: all of them
    assert held.nearest(query, 5, lambda memory_id: False) == {}


def test_the_loader_never_replaces_a_newer_vector():
    vectors = HeldVectors()
    vectors.put(["a"], np.array([[1.0, 0.0]]))
    vectors.put(["a", "b"], np.array([[0.0, 1.0], [0.0, 2.0]]), unless_held=True)
    assert vectors.cosines(["a", "b"], np.array([1.0, 0.0])) == {"a": 1.0, "b": 0.0}
    vectors.put(["a"], np.array([[0.0, 3.0]]))  # a write replaces
    assert vectors.cosines(["a"], np.array([0.0, 1.0])) == {"a": 1.0}


def test_rows_of_removed_memories_are_reused_and_the_matrix_grows():
    vectors = HeldVectors()
    vectors.put([f"m{i}" for i in range(1500)], np.eye(1500, 4, dtype=np.float32) + 0.5)
    vectors.remove(["m0", "m1"])
    vectors.put(["n0", "n1"], np.ones((2, 4)))
    assert len(vectors) == 1500 and "m0" not in vectors and vectors._used == 1500
    assert vectors.cosines(["n0", "m0"], np.ones(4)) == {"n0": pytest.approx(1.0)}


def test_closing_stops_the_loader_and_a_build_in_progress(make_bank):
    bank = make_bank(embedder=FakeEmbedder(dimension=32))
    _stock(bank, 50)
    bank.warm_up()
    retriever = bank._retriever
    loader = retriever._copies["default"].loader
    retriever.close()  # what bank.close() and the interpreter's exit do
    assert not retriever._copies and loader is not None and not loader.is_alive()
    with pytest.raises(StoreError, match="closed while it read the store"):
        retriever.keyword_index("default")  # a build after close stops at its first row
    bank.close()


def test_vectors_held_at_once_answer_as_those_put_and_keep_growing():
    rng = np.random.default_rng(3)
    ids = [f"m{i}" for i in range(300)]
    matrix = rng.normal(size=(300, 8)).astype(np.float32)
    put, whole = HeldVectors(), HeldVectors.of(ids, matrix)
    put.put(ids, matrix)
    query = rng.normal(size=8).astype(np.float32)
    assert whole.complete and len(whole) == 300
    assert whole.nearest(query, 10, lambda memory_id: True) == put.nearest(query, 10, lambda memory_id: True)
    assert whole.cosines(ids[:5], query) == put.cosines(ids[:5], query)
    assert whole.rows(["m7"])["m7"] == pytest.approx(put.rows(["m7"])["m7"])
    whole.remove(["m0"])
    whole.put(["new", "m1"], np.ones((2, 8)))  # a write after the load: a new row, a replaced one
    assert len(whole) == 300 and whole.cosines(["new", "m1", "m0"], np.ones(8)) == {
        "new": pytest.approx(1.0), "m1": pytest.approx(1.0)}


def test_ties_are_broken_by_id_as_a_store_breaks_them():
    held = HeldVectors()
    held.put(["c", "a", "d", "b"], np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]))
    assert list(held.nearest(np.array([0.0, 1.0]), 2, lambda memory_id: memory_id != "a")) == ["b", "d"]
