"""A read of a user's rows while another thread rebuilds one of their collections (a torn segment mended:
chroma/repair.py, say by the thread that saves a replica) goes on in the rebuilt collection: every row once,
none twice, where the collection it had begun to read is deleted under it."""

from pathlib import Path

import numpy as np
import pytest

from vecmem.models import MemoryRecord
from vecmem.storage.chroma.registry import DEDICATED_HNSW
from vecmem.storage.chroma.repair import rebuild
from vecmem.storage.chroma.shared import collection_name
from vecmem.storage.chroma.store import ChromaStore

pytestmark = pytest.mark.chroma

DIM = 8
USER = "alice"


def _embed(texts) -> np.ndarray:
    vectors = np.random.default_rng(len(texts)).standard_normal((len(texts), DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _filled(path: Path, rows: int) -> ChromaStore:
    store = ChromaStore(model_name="model", path=path / "chroma", dedicated_at=1)
    ids = [f"m{n}" for n in range(rows)]
    records = [MemoryRecord(id=i, content=f"memory {i}", user_id=USER, type="fact") for i in ids]
    store.upsert(USER, records, _embed(ids), [[i] for i in ids])
    return store


def _rebuilt_elsewhere(store: ChromaStore) -> None:
    """What another thread's mend does: the fact collection rebuilt under its name, the old one deleted."""
    collection = store._client.get_collection(collection_name(USER, "fact"), embedding_function=None)
    with store._layout.writing:
        rebuild(store._layout, collection, store._folder, _embed, DEDICATED_HNSW, "a test")
        store._layout.forget_collections()


def test_rows_read_on_in_the_rebuilt_collection_each_once(tmp_path):
    store = _filled(tmp_path, 1_100)  # two of Chroma's pages: the second is read after the rebuild
    rows = store.raw_rows(USER)
    read = [next(rows)[1]]
    _rebuilt_elsewhere(store)
    read += [row[1] for row in rows]
    assert sorted(read) == sorted(f"m{n}" for n in range(1_100))


def test_vector_pages_read_on_in_the_rebuilt_collection_each_row_once(tmp_path):
    store = _filled(tmp_path, 250)
    pages = store.scan_vectors(USER, page=100)
    ids, matrix = next(pages)
    read = list(ids)
    _rebuilt_elsewhere(store)
    for ids, matrix in pages:
        assert matrix.shape == (len(ids), DIM)
        read += ids
    assert sorted(read) == sorted(f"m{n}" for n in range(250))
