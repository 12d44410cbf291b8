"""A user's own Chroma collections carry the HNSW settings chosen for them (``DEDICATED_HNSW``, measured by
scripts/bench_ann.py), whether made new, by a move out of the shared collection or found from before."""

from pathlib import Path

import numpy as np
import pytest

from vecmem.models import MemoryRecord
from vecmem.storage.chroma.registry import DEDICATED_HNSW
from vecmem.storage.chroma.shared import collection_name
from vecmem.storage.chroma.store import ChromaStore

pytestmark = pytest.mark.chroma

DIM = 8
_FIXED = ("space", "ef_construction", "max_neighbors", "ef_search")


def _open(path: Path, dedicated_at: int) -> ChromaStore:
    return ChromaStore(model_name="model", path=path / "chroma", dedicated_at=dedicated_at)


def _write(store: ChromaStore, user: str, ids: list[str], memory_type: str = "fact") -> None:
    vectors = np.random.default_rng(len(ids)).standard_normal((len(ids), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    records = [MemoryRecord(id=i, content=f"{user} says {i}", user_id=user, type=memory_type) for i in ids]
    store.upsert(user, records, vectors, [[i] for i in ids])


def _hnsw(store: ChromaStore, name: str) -> dict[str, object]:
    hnsw = store._client.get_collection(name, embedding_function=None).configuration["hnsw"]
    return {key: hnsw[key] for key in _FIXED}


def test_a_new_collection_of_a_users_own_carries_the_dedicated_settings(tmp_path):
    store = _open(tmp_path, dedicated_at=1)
    _write(store, "alice", ["a1"])
    assert _hnsw(store, collection_name("alice", "fact")) == {key: DEDICATED_HNSW[key] for key in _FIXED}


def test_a_user_moved_out_of_the_shared_collection_gets_the_dedicated_settings(tmp_path):
    store = _open(tmp_path, dedicated_at=3)
    _write(store, "alice", ["a1", "a2", "a3"], memory_type="preference")  # the threshold: a move
    assert _hnsw(store, collection_name("alice", "preference")) == {key: DEDICATED_HNSW[key] for key in _FIXED}


def test_an_older_collection_gets_the_dedicated_ef_search_when_opened(tmp_path):
    store = _open(tmp_path, dedicated_at=1)
    _write(store, "alice", ["a1"])
    name = collection_name("alice", "fact")
    lower = int(DEDICATED_HNSW["ef_search"]) // 2  # as a collection made before the dedicated settings has it
    store._client.get_collection(name, embedding_function=None).modify(configuration={"hnsw": {"ef_search": lower}})
    store.close()
    reopened = _open(tmp_path, dedicated_at=1)
    assert reopened.count("alice") == 1  # opens alice's collections
    hnsw = _hnsw(reopened, name)
    assert hnsw["ef_search"] == DEDICATED_HNSW["ef_search"]
    assert hnsw["ef_construction"] == DEDICATED_HNSW["ef_construction"]  # built with it: untouched


def test_a_higher_ef_search_set_by_hand_is_left_alone(tmp_path):
    store = _open(tmp_path, dedicated_at=1)
    _write(store, "alice", ["a1"])
    name = collection_name("alice", "fact")
    higher = int(DEDICATED_HNSW["ef_search"]) * 2
    store._client.get_collection(name, embedding_function=None).modify(configuration={"hnsw": {"ef_search": higher}})
    store.close()
    reopened = _open(tmp_path, dedicated_at=1)
    assert reopened.count("alice") == 1
    assert _hnsw(reopened, name)["ef_search"] == higher
