"""The Chroma store's two layouts: small users in one shared collection, big ones in collections of their own,
the moves between them (interrupted and finished on the next open), and the migration of older stores."""

from pathlib import Path

import numpy as np
import pytest

from vecmem.errors import EmbeddingMismatchError, InvalidInputError
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.storage.chroma.rows import to_metadata
from vecmem.storage.chroma.shared import (
    PLACE_KEY,
    SHARED_PREFIX,
    SharedPlace,
    collection_name,
    shared_name,
    user_key,
)
from vecmem.storage.chroma.store import ChromaStore

pytestmark = pytest.mark.chroma  # what is examined is how rows sit in Chroma's collections

DIM = 8


def _vectors(count: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _write(store: ChromaStore, user: str, ids: list[str], *, seed: int = 0, memory_type: str = "fact") -> np.ndarray:
    records = [MemoryRecord(id=i, content=f"{user} says {i}", user_id=user, type=memory_type) for i in ids]
    vectors = _vectors(len(ids), seed)
    store.upsert(user, records, vectors, [[user, i] for i in ids])
    return vectors


def _open(path: Path, dedicated_at: int = 500) -> ChromaStore:
    return ChromaStore(model_name="model", path=path / "chroma", dedicated_at=dedicated_at)


def _names(store: ChromaStore) -> set[str]:
    return {c.name for c in store._client.list_collections()}


def _own_collections(store: ChromaStore, user: str) -> set[str]:
    return {name for name in _names(store) if name.startswith(collection_name(user, ""))}


def _shared_rows(store: ChromaStore) -> list[str]:
    return sorted(row_id for collection in store._client.list_collections() if collection.name.startswith(SHARED_PREFIX)
                  for row_id in collection.get(include=[])["ids"])


def _neighbour_of(user: str) -> str:
    """A user who shares ``user``'s shared collection."""
    return next(f"{user}-{n}" for n in range(1000)
                if shared_name("model", DIM, f"{user}-{n}") == shared_name("model", DIM, user))


def test_small_users_share_one_collection_with_rows_named_by_user_and_type(tmp_path):
    store = _open(tmp_path)
    _write(store, "alice", ["m1", "m2"])
    _write(store, "bob", ["m1"], memory_type="preference")
    assert {n for n in _names(store) if n.startswith("vecmem-u-")} == set()  # no collection of their own
    assert {n for n in _names(store) if n.startswith(SHARED_PREFIX)} == {shared_name("model", DIM, u)
                                                                         for u in ("alice", "bob")}
    assert sorted(_shared_rows(store)) == sorted([f"{collection_name('alice', 'fact')}:m1",
                                                  f"{collection_name('alice', 'fact')}:m2",
                                                  f"{collection_name('bob', 'preference')}:m1"])
    assert store.collection_models("bob") == {"preference": ("model", DIM)}
    assert [(t, i) for t, i, _, metadata in store.raw_rows("bob")] == [("preference", "m1")]
    assert all(PLACE_KEY not in (metadata or {}) for _, _, _, metadata in store.raw_rows("alice"))
    assert store.users() == ["alice", "bob"]


def test_colliding_ids_of_many_users_never_cross(tmp_path):
    store = _open(tmp_path)
    users = [f"user-{n}" for n in range(40)]
    vectors = {user: _write(store, user, ["a", "b", "c"], seed=n) for n, user in enumerate(users)}
    for user in users:
        assert {r.content for r in store.get(user, ["a", "b", "c", "d"]).values()} == {
            f"{user} says {i}" for i in "abc"}
        assert store.count(user) == 3
        assert {r.user_id for r in store.scan(user, MemoryFilter(include_superseded=True))} == {user}
        ids, cosines = store.nearest(user, vectors[user][1], 3)
        assert ids[0] == "b" and cosines[0] == pytest.approx(1.0, abs=1e-5) and sorted(ids) == ["a", "b", "c"]
        assert store.nearest(user, vectors[user][2], 1, among={"fact": ["c"]})[0] == ["c"]
        indexed = store.get_indexed(user, ["a"])["a"]
        np.testing.assert_allclose(indexed[1], vectors[user][0], atol=1e-6)
        assert indexed[2] == [user, "a"]
    store.delete("user-3", ["a", "b"])
    assert store.count("user-3") == 1 and store.count("user-4") == 3
    assert store.users() == sorted(users)
    with pytest.raises(InvalidInputError):
        store.upsert("user-1", [MemoryRecord(id="x", content="x", user_id="user-2")], _vectors(1, 9), [[]])


def test_a_row_is_read_back_only_when_its_id_and_its_metadata_both_name_the_user(tmp_path):
    store = _open(tmp_path)
    bob = _neighbour_of("alice")  # in alice's shared collection
    _write(store, "alice", ["m1"])
    _write(store, bob, ["m1"])
    shared = store._client.get_collection(shared_name("model", DIM, "alice"))
    assert len(shared.get(include=[])["ids"]) == 2
    # a row whose id is in bob's place but whose metadata says alice's: a bug of some writer, seen by nobody
    SharedPlace(shared, bob, "fact", collection_name(bob, "fact")).upsert(
        ids=["planted"], embeddings=_vectors(1, 5), documents=["planted"], metadatas=[{"type": "fact"}])
    shared.update(ids=[f"{collection_name(bob, 'fact')}:planted"],
                  metadatas=[{PLACE_KEY: collection_name("alice", "fact")}])
    for user in ("alice", bob):
        assert "planted" not in store.get(user, ["m1", "planted"])
        assert "planted" not in {r.id for r in store.scan(user, MemoryFilter(include_superseded=True))}
        assert store.nearest(user, _vectors(1, 5)[0], 5)[0] == ["m1"]


def test_a_user_past_the_threshold_moves_to_collections_of_their_own(tmp_path):
    store = _open(tmp_path, dedicated_at=6)
    facts = _write(store, "alice", [f"f{i}" for i in range(4)])
    _write(store, "bob", ["b1"])
    assert _own_collections(store, "alice") == set()
    prefs = _write(store, "alice", ["p1", "p2"], seed=1, memory_type="preference")  # 6: the threshold
    assert _own_collections(store, "alice") == {collection_name("alice", t) for t in ("fact", "preference")}
    assert _shared_rows(store) == [f"{collection_name('bob', 'fact')}:b1"]  # alice's shared rows are gone
    assert store.count("alice") == 6 and store.users() == ["alice", "bob"]
    assert store.nearest("alice", prefs[1], 1)[0] == ["p2"]
    assert store.nearest("alice", facts[2], 1, types=["fact"])[0] == ["f2"]
    assert store.get_indexed("alice", ["f0"])["f0"][2] == ["alice", "f0"]
    reopened = _open(tmp_path, dedicated_at=6)
    assert reopened.count("alice") == 6 and set(reopened.get("alice", ["f0", "p1"])) == {"f0", "p1"}


def test_an_interrupted_move_to_own_collections_is_finished_on_the_next_open(tmp_path, monkeypatch):
    store = _open(tmp_path, dedicated_at=4)
    _write(store, "alice", ["m1", "m2", "m3"])

    def killed(self, ids=None):
        raise RuntimeError("killed mid-move")

    monkeypatch.setattr(SharedPlace, "delete", killed)  # every row copied, none deleted from the shared one
    with pytest.raises(RuntimeError, match="killed"):
        _write(store, "alice", ["m4"], seed=2)
    monkeypatch.undo()
    reopened = _open(tmp_path, dedicated_at=4)
    assert sorted(reopened.get("alice", ["m1", "m2", "m3", "m4"])) == ["m1", "m2", "m3", "m4"]
    assert reopened.count("alice") == 4  # nothing doubled
    assert _own_collections(reopened, "alice") == {collection_name("alice", "fact")}
    assert _shared_rows(reopened) == []


def test_an_interrupted_move_into_the_shared_collection_is_finished_on_the_next_open(tmp_path, monkeypatch):
    old = _open(tmp_path, dedicated_at=1)  # every user in collections of their own: the layout before sharing
    _write(old, "alice", ["f1", "f2"])
    _write(old, "alice", ["p1"], seed=1, memory_type="preference")
    assert len(_own_collections(old, "alice")) == 2
    dropped: list[str] = []
    original = old._layout.delete

    def dies_after_one(self, name):
        if dropped:
            raise RuntimeError("killed mid-move")
        dropped.append(name)
        original(name)

    from vecmem.storage.chroma.layout import ChromaCollections
    monkeypatch.setattr(ChromaCollections, "delete", dies_after_one)
    with pytest.raises(RuntimeError, match="killed"):
        _open(tmp_path).count("alice")
    monkeypatch.undo()
    assert len(_own_collections(old, "alice")) == 1  # one of the two was dropped before the crash
    reopened = _open(tmp_path)
    assert reopened.count("alice") == 3
    assert _own_collections(reopened, "alice") == set()
    assert sorted(i.split(":", 1)[1] for i in _shared_rows(reopened)) == ["f1", "f2", "p1"]


def test_a_store_of_the_per_type_layout_moves_into_the_shared_collection_on_open(tmp_path):
    old = _open(tmp_path, dedicated_at=1)
    small = _write(old, "small", ["s1", "s2"])
    _write(old, "big", [f"b{i}" for i in range(5)], seed=3)
    assert old.users() == ["big", "small"]
    store = _open(tmp_path, dedicated_at=8)  # "big" (5) is past half the threshold: it stays where it is
    assert store.count("small") == 2 and store.count("big") == 5
    assert _own_collections(store, "small") == set()
    assert _own_collections(store, "big") == {collection_name("big", "fact")}
    indexed = store.get_indexed("small", ["s2"])["s2"]
    np.testing.assert_allclose(indexed[1], small[1], atol=1e-6)
    assert indexed[2] == ["small", "s2"] and indexed[0].content == "small says s2"
    assert store.nearest("small", small[0], 1)[0] == ["s1"]
    assert store.users() == ["big", "small"]


def test_a_reindex_moves_shared_users_to_the_new_models_collection_and_drops_the_old(tmp_path):
    store = _open(tmp_path)
    _write(store, "alice", ["m1", "m2"])
    _write(store, "bob", ["m1"], memory_type="instruction")
    reindexer = ChromaStore(model_name="model-2", path=tmp_path / "chroma")

    def embed(documents):
        return np.stack([np.eye(4, dtype=np.float32)[len(d) % 4] for d in documents])

    assert sum(reindexer.rebuild(user, embed, 4) for user in reindexer.users()) == 3
    reindexer.finish_rebuild(4)
    assert {n for n in _names(reindexer) if n.startswith(SHARED_PREFIX)} == {shared_name("model-2", 4, u)
                                                                             for u in ("alice", "bob")}
    assert reindexer.collection_models("bob") == {"instruction": ("model-2", 4)}
    assert sorted(reindexer.get("alice", ["m1", "m2"])) == ["m1", "m2"]
    assert reindexer.get("bob", ["m1"])["m1"].type == "instruction"


def test_a_store_of_one_collection_per_user_goes_to_the_shared_collection_on_open(tmp_path):
    client = _open(tmp_path)._client  # the store's folder, written below as vecmem's first layout did
    client.get_or_create_collection("vecmem-registry", metadata={"embed_model": "model", "embed_dim": DIM,
                                                                 "vecmem_schema": 1}, embedding_function=None)
    legacy = client.create_collection(user_key("alice"), configuration={"hnsw": {"space": "cosine"}},
                                      metadata={"vecmem_user": "alice", "embed_model": "model", "embed_dim": DIM,
                                                "vecmem_schema": 1}, embedding_function=None)
    records = [MemoryRecord(id="a", content="likes tea", user_id="alice", type="preference"),
               MemoryRecord(id="b", content="lives in Lisbon", user_id="alice", type="fact")]
    legacy.add(ids=["a", "b"], embeddings=_vectors(2, 4), documents=[r.content for r in records],
               metadatas=[{**to_metadata(r), "keywords": r.content} for r in records])
    store = _open(tmp_path)
    assert {r.type for r in store.scan("alice", MemoryFilter(include_superseded=True))} == {"preference", "fact"}
    assert store.nearest("alice", _vectors(2, 4)[0], 1, types=["preference"])[0] == ["a"]
    assert {n for n in _names(store) if n.startswith("vecmem-u-")} == set()  # neither the old nor the per-type
    assert store.users() == ["alice"]


def test_a_reindex_killed_while_switching_users_reads_as_the_new_model_and_a_rerun_embeds_nothing(tmp_path):
    old = _open(tmp_path, dedicated_at=4)
    _write(old, "big", [f"b{n}" for n in range(6)])  # past dedicated_at: collections of its own
    _write(old, "small", ["s1"], memory_type="instruction")
    embedded: list[str] = []

    def embed(documents):
        embedded.extend(documents)
        return np.stack([np.eye(4, dtype=np.float32)[len(d) % 4] for d in documents])

    def reindexer() -> ChromaStore:
        return ChromaStore(model_name="model-2", path=tmp_path / "chroma", dedicated_at=4)

    first = reindexer()
    assert {user: first.rebuild(user, embed, 4) for user in first.users()} == {"big": 6, "small": 1}
    assert len(embedded) == 7
    # killed in finish_rebuild after the registry took the new model and only "big" was switched
    first._layout.record_model(4, replace=True, reindex_from="model")
    first._layout.refresh("big")
    first._layout.typed("big", verify=False)
    assert first.collection_models("big") == {"fact": ("model-2", 4)}
    assert not [n for n in _names(first) if n.endswith("-reindex")]
    with pytest.raises(EmbeddingMismatchError):
        _open(tmp_path).check_model()

    reader = reindexer()  # a process of the new model switches "small" as it opens them
    reader.check_model()
    assert reader.collection_models("small") == {"instruction": ("model-2", 4)}
    assert sorted(reader.get("big", [f"b{n}" for n in range(6)])) == [f"b{n}" for n in range(6)]
    np.testing.assert_allclose(reader.get_indexed("small", ["s1"])["s1"][1], embed(["small says s1"])[0])

    embedded.clear()
    rerun = reindexer()
    assert {user: rerun.rebuild(user, embed, 4) for user in rerun.users()} == {"big": 6, "small": 1}
    rerun.finish_rebuild(4)
    assert embedded == []
    assert {n for n in _names(rerun) if n.startswith(SHARED_PREFIX)} == {shared_name("model-2", 4, "small")}
    assert rerun._layout.reindex_pending() is None and rerun.stored_model() == ("model-2", 4)
    assert not [n for n in _names(rerun) if n.endswith("-reindex")]
