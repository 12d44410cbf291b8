"""MemoryBank's wiring: a constructor that fails half-way releases what it took (above all the store lock, which
would otherwise keep every other process off the store), and close() lets go of every part, newest first, even
when one of them fails to close."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from tests.conftest import FakeEmbedder
from vecmem import EmbeddingMismatchError, MemoryBank, StoreError
from vecmem.retrieval.retriever import Retriever
from vecmem.storage.chroma.store import ChromaStore
from vecmem.storage.memory import InMemoryStore
from vecmem.storage.state.access import AccessStats
from vecmem.storage.state.changes import ChangeFeed
from vecmem.storage.state.lock import StoreLock

pytestmark = pytest.mark.chroma  # the store lock and the change feed are what an embedded Chroma store has


def _lock_is_free(home: Path) -> bool:
    """Whether another process could take the store lock now (flock conflicts between descriptors, so a
    fresh descriptor of this process stands in for another process)."""
    descriptor = os.open(home / "store.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(descriptor)  # closing it also drops the flock just taken
    return True


@pytest.fixture
def closed(monkeypatch):
    """The parts closed so far, in order: each close method of the bank's parts records its part's name."""
    order: list[str] = []
    for cls, name, method in ((Retriever, "retriever", "close"), (AccessStats, "access", "close"),
                              (ChromaStore, "store", "close"), (ChangeFeed, "changes", "close"),
                              (StoreLock, "lock", "release")):
        original = getattr(cls, method)

        def recording(self, *args, _original=original, _name=name, **kwargs):
            order.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, method, recording)
    return order


def test_a_model_mismatch_on_open_leaves_the_lock_free_and_the_store_opens_again(make_bank, settings, closed):
    first = make_bank(embedder=FakeEmbedder("model-a", 64))
    first.add("written with model a", memory_id="a1")
    first.close()
    closed.clear()
    with pytest.raises(EmbeddingMismatchError):
        make_bank(embedder=FakeEmbedder("model-b", 32))
    assert closed == ["store", "changes", "lock"]  # taken before the check, released newest first
    assert _lock_is_free(settings.home)
    reopened = make_bank(embedder=FakeEmbedder("model-a", 64))
    assert reopened.get("a1").content == "written with model a"
    reopened.close()


def test_access_statistics_that_cannot_be_opened_release_the_store(make_bank, settings, closed):
    make_bank().close()
    access_file = settings.home / "access.sqlite3"
    access_file.unlink()
    access_file.mkdir()  # a directory where the database should be: sqlite cannot open it
    closed.clear()
    with pytest.raises(StoreError, match="access statistics"):
        make_bank()
    assert closed == ["store", "changes", "lock"]
    assert _lock_is_free(settings.home)
    access_file.rmdir()
    bank = make_bank()
    assert bank.add("opened after the failure").content == "opened after the failure"
    bank.close()


def test_a_failing_retriever_releases_everything_taken_before_it(make_bank, settings, closed, monkeypatch):
    def failing(*args, **kwargs):
        raise StoreError("the retriever could not start")

    monkeypatch.setattr("vecmem.bank.facade.Retriever", failing)
    with pytest.raises(StoreError, match="retriever"):
        make_bank()
    assert closed == ["access", "store", "changes", "lock"]
    assert _lock_is_free(settings.home)


def test_close_releases_every_part_newest_first_even_when_one_fails(make_bank, settings, closed, monkeypatch):
    recording_close = AccessStats.close

    def failing_close(self):
        recording_close(self)
        raise StoreError("the access statistics could not be closed")

    monkeypatch.setattr(AccessStats, "close", failing_close)
    bank = make_bank()
    bank.add("something to hold", memory_id="x")
    bank.warm_up()
    with pytest.raises(StoreError, match="could not be closed"):
        bank.close()
    assert closed == ["retriever", "access", "store", "changes", "lock"]
    assert _lock_is_free(settings.home)
    bank.close()  # a second close has nothing left to release
    assert closed == ["retriever", "access", "store", "changes", "lock"]


def test_a_given_store_is_closed_by_close_but_left_open_by_a_failed_open(settings, monkeypatch):
    store = InMemoryStore(model_name="fake-hash-64", location="given")
    store_closes: list[str] = []
    monkeypatch.setattr(store, "close", lambda: store_closes.append("store"))
    bank = MemoryBank(settings, embedder=FakeEmbedder(), store=store)
    bank.add("a given store's memory")
    bank.close()
    assert store_closes == ["store"]

    other_model = store.sharing(model_name="model-b")  # the same memories, opened for another model
    monkeypatch.setattr(other_model, "close", lambda: store_closes.append("other"))
    with pytest.raises(EmbeddingMismatchError):
        MemoryBank(settings, embedder=FakeEmbedder("model-b", 32), store=other_model)
    assert store_closes == ["store"]  # still the caller's: no bank was built on it
    reopened = MemoryBank(settings, embedder=FakeEmbedder(), store=store.sharing())
    assert reopened.count() == 1
    reopened.close()
