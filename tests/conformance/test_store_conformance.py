"""One suite every MemoryStore passes: the in-memory store, embedded Chroma and Chroma on a `chroma run` server.

Each test states a promise of ``vecmem/storage/base.py`` (or a behaviour the layers above rely on) and checks it
on every implementation, with small deterministic vectors, so the in-memory store the unit tests run on is held
to exactly what Chroma does. The Chroma runs carry the ``chroma`` marker (``-m "not chroma"`` leaves them out).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from vecmem.errors import EmbeddingError, EmbeddingMismatchError, InvalidInputError, StoreError
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.storage.base import MemoryStore, UserWrite
from vecmem.storage.chroma.rows import from_row, to_metadata
from vecmem.storage.chroma.store import ChromaStore
from vecmem.storage.memory import InMemoryStore
from vecmem.storage.state.changes import ChangeFeed

MODEL = "conformance-model"
DIM = 8
T0 = datetime(2026, 6, 1, 12, 0, 0, 123_456, tzinfo=UTC)

Opener = Callable[..., MemoryStore]  # opener(model_name=MODEL, changes=None): a client of the test's one store


@pytest.fixture(params=["memory", pytest.param("embedded", marks=pytest.mark.chroma),
                        pytest.param("server", marks=pytest.mark.chroma)])
def opener(request, tmp_path) -> Opener:
    """Opens clients of one empty store of the kind under test (several clients share its memories)."""
    if request.param == "memory":
        shared = InMemoryStore(model_name=MODEL)
        return lambda model_name=MODEL, changes=None: shared.sharing(model_name=model_name, changes=changes)
    if request.param == "embedded":
        return lambda model_name=MODEL, changes=None: ChromaStore(model_name=model_name, path=tmp_path / "chroma",
                                                                  changes=changes)
    url = request.getfixturevalue("chroma_server")
    database = f"test-{uuid.uuid4().hex[:16]}"  # an empty store per test on the shared server
    return lambda model_name=MODEL, changes=None: ChromaStore(model_name=model_name, url=url, database=database,
                                                              changes=changes)


@pytest.fixture
def store(opener: Opener) -> MemoryStore:
    return opener()


def unit(*values: float, dimension: int = DIM) -> np.ndarray:
    vector = np.zeros(dimension, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def rec(memory_id: str, user: str = "alice", **fields: object) -> MemoryRecord:
    options: dict[str, object] = {"content": f"content of {memory_id}", "created_at": T0, **fields}
    return MemoryRecord(id=memory_id, user_id=user, **options)  # type: ignore[arg-type]


def write(store: MemoryStore, records: Sequence[MemoryRecord], vectors: Sequence[np.ndarray] | None = None,
          keywords: Sequence[Sequence[str]] | None = None, user: str = "alice") -> None:
    matrix = np.stack(vectors) if vectors is not None else \
        np.stack([unit(1.0, float(i)) for i in range(len(records))])
    words = keywords if keywords is not None else [r.content.split() for r in records]
    store.upsert(user, records, matrix, words)


def as_read(record: MemoryRecord) -> MemoryRecord:
    """The record as a store keeps it (times as epoch-second floats)."""
    return from_row(record.id, record.content, to_metadata(record))


def ids(records) -> set[str]:
    return {r.id for r in records}


# ----------------------------------------------------------------------------------------- round trips

def test_every_field_of_a_record_round_trips_through_every_read(store: MemoryStore) -> None:
    full = MemoryRecord(
        id="m-full", content="Prefers 深色 mode; tabs over spaces", type="preference", tags=("ui", "editor"),
        importance=0.8, scope="s1", created_at=T0, last_accessed=T0 + timedelta(days=1, microseconds=654_321),
        access_count=3, source="extracted", confidence=0.7, superseded_by="m-next", user_id="alice",
        context="we talked about editors", status="archived",
    )
    vector = unit(0.2, 0.9, 0.1)
    store.upsert("alice", [full], vector[None, :], [["prefers", "深色", "tabs"]])
    expected = as_read(full)
    for name in ("id", "content", "type", "tags", "importance", "scope", "access_count", "source", "confidence",
                 "superseded_by", "user_id", "context", "status"):
        assert getattr(expected, name) == getattr(full, name), name
    assert abs(expected.created_at - full.created_at) < timedelta(microseconds=2)
    assert expected.last_accessed is not None and full.last_accessed is not None
    assert abs(expected.last_accessed - full.last_accessed) < timedelta(microseconds=2)

    assert store.get("alice", ["m-full"]) == {"m-full": expected}
    assert store.get("alice", ["m-full"], type_of={"m-full": "preference"}) == {"m-full": expected}
    record, stored_vector, words = store.get_indexed("alice", ["m-full"])["m-full"]
    assert record == expected and words == ["prefers", "深色", "tabs"]
    np.testing.assert_allclose(stored_vector, vector, atol=1e-6)
    np.testing.assert_allclose(store.vectors("alice", ["m-full"], type_of={"m-full": "preference"})["m-full"],
                               vector, atol=1e-6)
    everything = MemoryFilter(all_sessions=True, include_superseded=True, statuses=None)
    assert list(store.scan("alice", everything)) == [expected]
    assert list(store.scan_keywords("alice")) == [(expected, ["prefers", "深色", "tabs"])]
    assert list(store.raw_rows("alice")) == [
        ("preference", "m-full", full.content, {**to_metadata(full), "keywords": "prefers 深色 tabs"})
    ]


def test_reads_of_ids_not_stored_return_nothing(store: MemoryStore) -> None:
    assert store.get("alice", ["nope"]) == {} and store.get_indexed("alice", ["nope"]) == {}
    write(store, [rec("m1")])
    assert store.get("alice", ["nope", "m1", "m1"]).keys() == {"m1"}
    assert store.get("alice", []) == {}
    assert store.vectors("alice", ["m1", "nope"], type_of={"m1": "fact"}).keys() == {"m1"}
    assert store.vectors("alice", ["m1"], type_of={}) == {}  # no type: skipped


# ----------------------------------------------------------------------------------------- isolation

def test_users_are_isolated_whatever_ids_collide(store: MemoryStore) -> None:
    write(store, [rec("m1", content="alice's secret")], [unit(1.0)])
    write(store, [rec("m1", "bob", content="bob's note"), rec("m2", "bob", superseded_by="m9")],
          [unit(0.0, 1.0), unit(1.0)], user="bob")
    assert [r.content for r in store.get("alice", ["m1", "m2"]).values()] == ["alice's secret"]
    assert store.get_indexed("alice", ["m2"]) == {}
    assert store.count("alice") == 1 and store.count("bob") == 2 and store.count("carol") == 0
    assert ids(store.scan("alice", MemoryFilter(all_sessions=True, include_superseded=True))) == {"m1"}
    assert [r.id for r, _ in store.scan_keywords("bob")] != [] and \
        all(r.user_id == "alice" for r, _ in store.scan_keywords("alice"))
    assert store.nearest("alice", unit(1.0), 10)[0] == ["m1"]
    assert [page for page, _ in store.scan_vectors("alice")] == [["m1"]]
    assert store.replaced_by("alice", "m9") == [] and ids(store.replaced_by("bob", "m9")) == {"m2"}
    store.delete("alice", ["m1", "m2"])
    assert store.count("alice") == 0 and store.count("bob") == 2
    assert store.get("bob", ["m1"])["m1"].content == "bob's note"
    assert store.users() == ["alice", "bob"]  # alice keeps her places, as Chroma keeps her collections


def test_writing_a_record_of_another_user_is_refused(store: MemoryStore) -> None:
    with pytest.raises(InvalidInputError):
        write(store, [rec("m1", "bob")])
    assert store.count("alice") == 0 and store.count("bob") == 0
    write(store, [rec("m1")])
    with pytest.raises(InvalidInputError):
        store.update_metadata("alice", [rec("m1", "bob")])


# ----------------------------------------------------------------------------------------- one place per id

def test_writing_an_id_again_replaces_it_whole_even_across_types(store: MemoryStore) -> None:
    write(store, [rec("m1", content="old words")], [unit(1.0)], [["old", "words"]])
    write(store, [rec("m1", content="new words", type="preference", importance=0.9)], [unit(0.0, 1.0)],
          [["new", "words"]])
    record, vector, words = store.get_indexed("alice", ["m1"])["m1"]
    assert (record.content, record.type, record.importance, words) == ("new words", "preference", 0.9, ["new", "words"])
    np.testing.assert_allclose(vector, unit(0.0, 1.0), atol=1e-6)
    assert store.count("alice") == 1
    assert [(t, i) for t, i, _, _ in store.raw_rows("alice")] == [("preference", "m1")]
    assert list(store.scan("alice", MemoryFilter(types=frozenset({"fact"})))) == []
    assert store.nearest("alice", unit(1.0), 5, types=["fact"]) == ([], [])
    assert store.nearest("alice", unit(1.0), 5, types=["preference"])[0] == ["m1"]
    assert store.vectors("alice", ["m1"], type_of={"m1": "fact"}) == {}
    assert store.vectors("alice", ["m1"], type_of={"m1": "preference"}).keys() == {"m1"}


# ----------------------------------------------------------------------------------------- writes

def test_update_metadata_rewrites_fields_and_keeps_vector_and_tokens(store: MemoryStore) -> None:
    original = rec("m1", tags=("a",))
    write(store, [original, rec("m2")], [unit(1.0), unit(0.0, 1.0)], [["alpha", "beta"], ["gamma"]])
    updated = original.with_changes(importance=0.9, status="archived", superseded_by="m2", access_count=4,
                                    last_accessed=T0 + timedelta(hours=5), confidence=0.4)
    store.update_metadata("alice", [updated])
    record, vector, words = store.get_indexed("alice", ["m1"])["m1"]
    assert record == as_read(updated) and words == ["alpha", "beta"]
    np.testing.assert_allclose(vector, unit(1.0), atol=1e-6)
    assert ids(store.replaced_by("alice", "m2")) == {"m1"}
    store.update_metadata("alice", [])  # nothing to do
    store.update_metadata("alice", [rec("ghost")])  # not stored: left alone
    assert store.get("alice", ["ghost"]) == {} and store.count("alice") == 2
    with pytest.raises(StoreError):  # alice never wrote an instruction
        store.update_metadata("alice", [rec("m1", type="instruction")])


def test_delete_removes_only_the_given_ids(store: MemoryStore) -> None:
    write(store, [rec("m1"), rec("m2"), rec("m3", type="instruction")])
    store.delete("alice", ["m1", "m3", "ghost"])
    store.delete("alice", [])
    assert store.get("alice", ["m1", "m2", "m3"]).keys() == {"m2"}
    assert store.count("alice") == 1
    assert store.nearest("alice", unit(1.0), 10)[0] == ["m2"]
    assert ids(r for r, _ in store.scan_keywords("alice")) == {"m2"}


# ----------------------------------------------------------------------------------------- scans

def test_scan_applies_scopes_types_supersession_and_statuses(store: MemoryStore) -> None:
    write(store, [rec("g1"), rec("s1a", scope="s1"), rec("s2a", scope="s2"), rec("sup", superseded_by="g1"),
                  rec("arch", status="archived"), rec("pend", type="preference", status="pending")])

    def scan(**fields: object) -> set[str]:
        return ids(store.scan("alice", MemoryFilter(**fields)))  # type: ignore[arg-type]

    assert scan() == {"g1"}
    assert scan(session_id="s1") == {"g1", "s1a"}
    assert scan(all_sessions=True) == {"g1", "s1a", "s2a"}
    assert scan(all_sessions=True, include_superseded=True) == {"g1", "s1a", "s2a", "sup"}
    assert scan(all_sessions=True, include_superseded=True, statuses=None) == {"g1", "s1a", "s2a", "sup", "arch",
                                                                               "pend"}
    assert scan(all_sessions=True, statuses=frozenset({"pending", "archived"})) == {"arch", "pend"}
    assert scan(types=frozenset({"preference"}), statuses=None) == {"pend"}
    assert scan(types=frozenset({"fact"}), session_id="s2") == {"g1", "s2a"}
    assert scan(types=frozenset({"instruction"})) == set()
    assert store.scan("nobody", MemoryFilter(all_sessions=True)) is not None and scan(session_id="s3") == {"g1"}


def test_scan_keywords_and_scan_vectors_cover_every_memory_in_pages(store: MemoryStore) -> None:
    facts = [rec(f"f{i}") for i in range(5)]
    prefs = [rec(f"p{i}", type="preference") for i in range(2)]
    vectors = [unit(1.0, float(i), 0.5) for i in range(7)]
    write(store, facts + prefs, vectors, [[f"word{i}"] for i in range(7)])
    assert {r.id: words for r, words in store.scan_keywords("alice")} == {
        r.id: [f"word{i}"] for i, r in enumerate(facts + prefs)}
    pages = list(store.scan_vectors("alice", page=2))
    assert sorted(len(page) for page, _ in pages) == [1, 2, 2, 2]  # each type's place on pages of its own
    written = {r.id: v for r, v in zip(facts + prefs, vectors, strict=True)}
    seen = {}
    for page_ids, matrix in pages:
        assert matrix.shape == (len(page_ids), DIM)
        seen.update(zip(page_ids, matrix, strict=True))
    assert seen.keys() == written.keys()
    for memory_id, vector in seen.items():
        np.testing.assert_allclose(vector, written[memory_id], atol=1e-6)
    assert list(store.scan_vectors("nobody")) == []


def test_replaced_by_finds_the_memories_pointing_at_one(store: MemoryStore) -> None:
    write(store, [rec("new"), rec("old1", superseded_by="new"), rec("old2", type="preference", superseded_by="new"),
                  rec("other", superseded_by="old1")])
    assert ids(store.replaced_by("alice", "new")) == {"old1", "old2"}
    assert store.replaced_by("alice", "nothing") == []
    assert all(r.superseded_by == "new" for r in store.replaced_by("alice", "new"))


# ----------------------------------------------------------------------------------------- nearest

NEAREST = {"a": unit(1.0), "b": unit(1.0, 1.0), "c": unit(0.0, 1.0), "d": unit(-1.0, 0.2), "t2": unit(0.3, 0.0, 1.0),
           "t1": unit(0.3, 0.0, 1.0)}  # t1 and t2: the same vector, a tie broken by id


def _nearest_store(store: MemoryStore) -> None:
    write(store, [rec(i) for i in NEAREST] + [rec("e", type="preference")],
          [*NEAREST.values(), unit(1.0, 0.5)])


def _exact(query: np.ndarray, candidates: dict[str, np.ndarray]) -> list[tuple[str, float]]:
    cosines = {i: float(np.dot(v, query) / np.linalg.norm(v) / np.linalg.norm(query)) for i, v in candidates.items()}
    return sorted(cosines.items(), key=lambda pair: (-round(pair[1], 6), pair[0]))


def test_nearest_returns_exact_cosines_best_first_ties_by_id(store: MemoryStore) -> None:
    _nearest_store(store)
    query = unit(1.0, 0.2, 0.1)
    found, cosines = store.nearest("alice", query, 10)
    expected = _exact(query, {**NEAREST, "e": unit(1.0, 0.5)})
    assert found == [i for i, _ in expected]
    np.testing.assert_allclose(cosines, [c for _, c in expected], atol=1e-5)
    found, cosines = store.nearest("alice", unit(0.3, 0.0, 1.0), 2)
    assert found == ["t1", "t2"]
    np.testing.assert_allclose(cosines, [1.0, 1.0], atol=1e-5)
    assert store.nearest("alice", query, 0) == ([], [])
    assert store.nearest("nobody", query, 5) == ([], [])


def test_nearest_keeps_to_types_and_among(store: MemoryStore) -> None:
    _nearest_store(store)
    query = unit(1.0, 0.2)
    assert store.nearest("alice", query, 5, types=["preference"])[0] == ["e"]
    assert store.nearest("alice", query, 10, types=["instruction"]) == ([], [])
    found, cosines = store.nearest("alice", query, 10, among={"fact": ["c", "d", "e", "ghost"], "preference": ["e"]})
    expected = _exact(query, {"c": NEAREST["c"], "d": NEAREST["d"], "e": unit(1.0, 0.5)})
    assert found == [i for i, _ in expected]  # "e" is not a fact: found among the preferences only
    np.testing.assert_allclose(cosines, [c for _, c in expected], atol=1e-5)
    sizes = {"fact": 6, "preference": 1}
    assert store.nearest("alice", query, 1, among={"fact": ["c", "d"]}, sizes=sizes)[0] == ["c"]
    assert store.nearest("alice", query, 10, among={"fact": []}) == ([], [])
    assert store.nearest("alice", query, 10, among={"preference": ["a"]}) == ([], [])


def test_nearest_gives_cosines_for_vectors_not_of_unit_length(store: MemoryStore) -> None:
    stored = {"long": np.array([3.0, 0, 0, 0, 0, 0, 0, 0], dtype=np.float32),
              "short": np.array([0.5, 0.5, 0, 0, 0, 0, 0, 0], dtype=np.float32)}
    write(store, [rec(i) for i in stored], list(stored.values()))
    query = np.array([2.0, 1.0, 0, 0, 0, 0, 0, 0], dtype=np.float32)
    expected = _exact(query, stored)
    for among in (None, {"fact": list(stored)}):
        found, cosines = store.nearest("alice", query, 5, among=among)
        assert found == [i for i, _ in expected], among
        np.testing.assert_allclose(cosines, [c for _, c in expected], atol=1e-5)


# ----------------------------------------------------------------------------------------- store-wide

def test_count_and_users(store: MemoryStore) -> None:
    assert store.users() == [] and store.count("alice") == 0
    write(store, [rec("m1"), rec("m2", type="conclusion", superseded_by="m1"), rec("m3", status="pending")])
    write(store, [rec("m1", "bob")], user="bob")
    assert store.count("alice") == 3 and store.count("bob") == 1
    assert store.users() == ["alice", "bob"]
    store.refresh("alice")
    assert store.count("alice") == 3


def test_the_first_write_records_the_model_and_another_model_is_refused(opener: Opener) -> None:
    store = opener()
    assert store.stored_model() is None and store.collection_models("alice") == {}
    store.check_model()
    write(store, [rec("m1")])
    assert store.stored_model() == (MODEL, DIM)
    assert store.collection_models("alice") == {"fact": (MODEL, DIM)}
    store.check_model()
    other = opener(model_name="another-model")
    assert other.stored_model() == (MODEL, DIM)
    with pytest.raises(EmbeddingMismatchError) as raised:
        other.check_model()
    assert (raised.value.stored_model, raised.value.stored_dim, raised.value.configured_model) == \
        (MODEL, DIM, "another-model")
    for write_other in ([rec("m2")], [rec("m2", type="preference")]):  # an existing place, a new one
        with pytest.raises(EmbeddingMismatchError):
            write(other, write_other)
    with pytest.raises(EmbeddingMismatchError):
        other.nearest("alice", unit(1.0), 3)
    assert other.get("alice", ["m1"]).keys() == {"m1"}  # records stay readable (for the doctor and reindex)
    assert store.count("alice") == 1


def test_a_vector_of_another_dimension_is_a_store_error(store: MemoryStore) -> None:
    write(store, [rec("m1")])
    with pytest.raises(StoreError):
        write(store, [rec("m2")], [unit(1.0, dimension=DIM + 4)])
    with pytest.raises(StoreError):
        store.nearest("alice", unit(1.0, dimension=DIM + 4), 3)
    assert store.get("alice", ["m1", "m2"]).keys() == {"m1"}


# ----------------------------------------------------------------------------------------- reindex

def _small_embedding(documents: Sequence[str]) -> np.ndarray:
    return np.stack([unit(1.0, float(len(d) % 7), 0.5, dimension=4) for d in documents])


def test_rebuild_re_embeds_every_memory_and_keeps_records_and_tokens(opener: Opener) -> None:
    store = opener()
    records = [rec("f1"), rec("f2", content="a longer fact"), rec("f3", content="x"), rec("p1", type="preference")]
    write(store, records, keywords=[["k1"], ["k2"], ["k3"], ["k4"]])
    before = store.get("alice", [r.id for r in records])
    reindexer = opener(model_name="model-2")
    batches: list[int] = []
    assert reindexer.rebuild("alice", _small_embedding, 4, batch_size=2, progress=batches.append) == 4
    assert sum(batches) == 4 and max(batches) <= 2
    # until every user is rebuilt, the store is the old model's, whole
    assert reindexer.collection_models("alice") == {"fact": (MODEL, DIM), "preference": (MODEL, DIM)}
    assert reindexer.stored_model() == (MODEL, DIM)
    assert store.get_indexed("alice", ["f1"])["f1"][1].shape == (DIM,)
    reindexer.finish_rebuild(4)
    assert reindexer.collection_models("alice") == {"fact": ("model-2", 4), "preference": ("model-2", 4)}
    assert reindexer.stored_model() == ("model-2", 4)
    reindexer.check_model()
    with pytest.raises(EmbeddingMismatchError):
        opener().check_model()
    indexed = reindexer.get_indexed("alice", [r.id for r in records])
    assert {i: record for i, (record, _, _) in indexed.items()} == before
    assert {i: words for i, (_, _, words) in indexed.items()} == {"f1": ["k1"], "f2": ["k2"], "f3": ["k3"],
                                                                  "p1": ["k4"]}
    for memory_id, (record, vector, _) in indexed.items():
        np.testing.assert_allclose(vector, _small_embedding([record.content])[0], atol=1e-6, err_msg=memory_id)
    assert reindexer.nearest("alice", _small_embedding(["x"])[0], 1)[0] == ["f3"]


def test_a_failed_rebuild_leaves_the_memories_as_they_were(opener: Opener) -> None:
    store = opener()
    write(store, [rec("m1")], [unit(1.0)])

    def broken(documents: Sequence[str]) -> np.ndarray:
        raise EmbeddingError("the model fell over")

    with pytest.raises(EmbeddingError, match="fell over"):  # the embedder's own error, as it is
        opener(model_name="model-2").rebuild("alice", broken, 4)
    _, vector, _ = store.get_indexed("alice", ["m1"])["m1"]
    np.testing.assert_allclose(vector, unit(1.0), atol=1e-6)
    assert store.collection_models("alice") == {"fact": (MODEL, DIM)}


class _Interrupted(Exception):
    """What a reindex killed midway looks like to the test: the embedder stops answering."""


def test_an_interrupted_rebuild_resumes_embedding_only_what_is_left(opener: Opener) -> None:
    store = opener()
    write(store, [rec(f"f{n}", content=f"fact number {n}") for n in range(7)] + [rec("p1", type="preference")])
    write(store, [rec("b1", "bob"), rec("b2", "bob", type="instruction")], user="bob")
    embedded: list[str] = []

    def embed(documents: Sequence[str]) -> np.ndarray:
        if stop_after is not None and len(embedded) >= stop_after:
            raise _Interrupted
        embedded.extend(documents)
        return _small_embedding(documents)

    stop_after: int | None = 4  # two batches of alice's
    reindexer = opener(model_name="model-2")
    with pytest.raises(_Interrupted):
        for user in reindexer.users():
            reindexer.rebuild(user, embed, 4, batch_size=2)
    first = list(embedded)
    # the old model still reads every memory, with its own vectors, and writes on meanwhile
    store.check_model()
    assert store.collection_models("alice") == {"fact": (MODEL, DIM), "preference": (MODEL, DIM)}
    assert store.nearest("alice", unit(1.0), 8)[0]
    write(store, [rec("f0", content="fact number 0, corrected"), rec("f8", content="a fact written meanwhile")])
    store.delete("alice", ["f6"])
    store.update_metadata("alice", [rec(first_id := "f1", content="fact number 1", importance=0.9)])

    stop_after, embedded[:] = None, []
    done = {user: reindexer.rebuild(user, embed, 4, batch_size=2) for user in reindexer.users()}
    reindexer.finish_rebuild(4)
    assert done == {"alice": 8, "bob": 2}
    again = [d for d in embedded if d in first]
    assert again == ["fact number 0, corrected"] or not again  # only a changed text is embedded twice
    assert sorted(first + embedded) == sorted({*first, *embedded})  # nothing else was embedded twice
    assert "a fact written meanwhile" in embedded and len(first) == 4
    reindexer.check_model()
    with pytest.raises(EmbeddingMismatchError):
        opener().check_model()
    alice = reindexer.get_indexed("alice", [f"f{n}" for n in range(9)] + ["p1"])
    assert sorted(alice) == ["f0", "f1", "f2", "f3", "f4", "f5", "f8", "p1"]
    assert alice[first_id][0].importance == 0.9
    for memory_id, (record, vector, _) in {**alice, **reindexer.get_indexed("bob", ["b1", "b2"])}.items():
        np.testing.assert_allclose(vector, _small_embedding([record.content])[0], atol=1e-6, err_msg=memory_id)
    assert reindexer.collection_models("bob") == {"fact": ("model-2", 4), "instruction": ("model-2", 4)}
    assert len(reindexer.nearest("alice", _small_embedding(["x"])[0], 20)[0]) == 8


# ----------------------------------------------------------------------------------------- the change feed

def test_writes_are_announced_on_the_change_feed(opener: Opener, tmp_path) -> None:
    store = opener(changes=ChangeFeed(tmp_path / "changes.sqlite3"))
    reader = ChangeFeed(tmp_path / "changes.sqlite3")  # another bank's feed object
    seen = reader.head()

    def changed() -> set[str]:
        nonlocal seen
        changes = reader.since("alice", seen)
        seen = changes.seen
        assert not changes.rebuild and sorted(changes.begun) == sorted(changes.ended)
        return changes.changed

    write(store, [rec("m1"), rec("m2")])
    assert changed() == {"m1", "m2"}
    write(store, [rec("m1", "bob")], user="bob")
    assert changed() == set()
    store.update_metadata("alice", [rec("m1", importance=0.9)])
    assert changed() == {"m1"}
    store.delete("alice", ["m2"])
    assert changed() == {"m2"}
    store.rebuild("alice", lambda documents: np.stack([unit(1.0) for _ in documents]), DIM)
    assert reader.since("alice", seen).rebuild
    assert reader.unsettled("alice", reader.head()) == {}


# ----------------------------------------------------------------------------------------- many users at once

def test_upsert_many_equals_one_upsert_after_another(opener: Opener) -> None:
    batched, reference = opener(), InMemoryStore(model_name=MODEL)
    users = [f"user-{n}" for n in range(12)]
    write(batched, [rec("old", "user-0", type="preference")], user="user-0")  # moves to fact below
    write(reference, [rec("old", "user-0", type="preference")], user="user-0")
    writes = []
    for n, user in enumerate(users):
        records = [rec(f"m{i}", user, type=("fact", "preference", "instruction")[(n + i) % 3]) for i in range(3)]
        if user == "user-0":
            records.append(rec("old", user, type="fact", importance=0.9))
        writes.append(UserWrite(user, records, np.stack([unit(1.0, float(n), float(i)) for i in range(len(records))]),
                                [[user, r.id] for r in records]))
    writes.append(UserWrite("user-3", [rec("m0", "user-3", content="said again")], np.stack([unit(0.0, 1.0)]),
                            [["again"]]))  # a user twice: the later write of an id wins, as one after another
    batched.upsert_many(writes)
    reference.upsert_many(writes)
    every = MemoryFilter(all_sessions=True, include_superseded=True, statuses=None)
    for user in users:
        assert batched.count(user) == reference.count(user)
        assert sorted(batched.scan(user, every), key=lambda r: r.id) == sorted(reference.scan(user, every),
                                                                                 key=lambda r: r.id)
        assert dict(batched.collection_models(user)).keys() == dict(reference.collection_models(user)).keys()
        tokens = {r.id: words for r, words in batched.scan_keywords(user)}
        assert tokens == {r.id: words for r, words in reference.scan_keywords(user)}
    assert batched.get("user-3", ["m0"])["m0"].content == "said again"
    assert batched.get("user-0", ["old"])["old"].type == "fact"
    assert [t for t, i, *_ in batched.raw_rows("user-0") if i == "old"] == ["fact"]  # one place per id
    found, cosines = batched.nearest("user-5", unit(1.0, 5.0, 1.0), 1)
    assert found == ["m1"] and cosines[0] == pytest.approx(1.0, abs=1e-5)


def test_upsert_many_refuses_a_record_of_another_user_and_writes_nothing(store: MemoryStore) -> None:
    good = UserWrite("alice", [rec("a1")], np.stack([unit(1.0)]), [["a"]])
    bad = UserWrite("bob", [rec("b1", "mallory")], np.stack([unit(1.0)]), [["b"]])
    with pytest.raises(InvalidInputError):
        store.upsert_many([good, bad])
    assert store.count("alice") == 0 and store.count("bob") == 0
    with pytest.raises(InvalidInputError):
        store.upsert_many([UserWrite("alice", [rec("a1")], np.stack([unit(1.0)]), [["a"], ["b"]])])


def test_stored_ids_answers_per_user_whatever_ids_collide(store: MemoryStore) -> None:
    write(store, [rec("m1"), rec("m2", type="instruction")])
    write(store, [rec("m2", "bob")], user="bob")
    assert store.stored_ids({"alice": ["m1", "m2", "m3"], "bob": ["m1", "m2"], "carol": ["m1"]}) == {
        "alice": {"m1", "m2"}, "bob": {"m2"}}
    assert store.stored_ids({}) == {}


def test_upsert_many_announces_every_users_writes(opener: Opener, tmp_path) -> None:
    store = opener(changes=ChangeFeed(tmp_path / "changes.sqlite3"))
    reader = ChangeFeed(tmp_path / "changes.sqlite3")
    seen = reader.head()
    store.upsert_many([UserWrite(user, [rec("m1", user), rec("m2", user)], np.stack([unit(1.0), unit(0.0, 1.0)]),
                                 [["a"], ["b"]]) for user in ("alice", "bob")])
    for user in ("alice", "bob"):
        changes = reader.since(user, seen)
        assert changes.changed == {"m1", "m2"} and sorted(changes.begun) == sorted(changes.ended)
    assert reader.unsettled("alice", reader.head()) == {}


# ----------------------------------------------------------------------------------------- threads

def test_writers_and_readers_in_threads_lose_nothing(store: MemoryStore) -> None:
    failures: list[BaseException] = []

    def guarded(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:
                failures.append(exc)
        return run

    def writer(user: str) -> Callable[[], None]:
        def run() -> None:
            for i in range(12):  # one write at a time, in two types: places are created while others read
                write(store, [rec(f"m{i}", user, type="fact" if i % 2 else "preference")], [unit(1.0, float(i))],
                      user=user)
        return run

    def reader() -> None:
        for _ in range(12):
            assert all(r.user_id == "u0" for r in store.scan("u0", MemoryFilter(all_sessions=True)))
            found, _ = store.nearest("u1", unit(1.0), 50)
            assert set(found) <= {f"m{i}" for i in range(12)}

    threads = [threading.Thread(target=guarded(writer(f"u{k}"))) for k in range(3)]
    threads.append(threading.Thread(target=guarded(reader)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert [store.count(f"u{k}") for k in range(3)] == [12, 12, 12]
    assert store.users() == ["u0", "u1", "u2"]


# ----------------------------------------------------------------------------------------- the protocol

def test_the_store_is_a_memory_store_and_closes(opener: Opener) -> None:
    store = opener()
    assert isinstance(store, MemoryStore)
    assert store.model_name == MODEL and store.location and store.changes is None
    write(store, [rec("m1")])
    store.close()
    assert opener().get("alice", ["m1"]).keys() == {"m1"}  # closing a client loses no memory
