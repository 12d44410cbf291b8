"""A search (and a listing) answered from the user's saved replica alone (vecmem/assembly.py, ``reading_saved``;
the file: retrieval/index/persisted.py): exactly what the store answers, without opening Chroma; never when the
file may be behind the store (a write after it, a store deleted or made anew under the same folder); and anything
the file cannot answer raises ``NotInSavedReplica``, so the caller opens the store. On embedded Chroma: the fast
path exists only there.
"""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest

import vecmem.storage.chroma.client as chroma_client
from tests.conftest import T0, FakeEmbedder
from vecmem import MemoryBank, MemoryRecord
from vecmem.assembly import reading_saved
from vecmem.bank import listing
from vecmem.errors import StoreError
from vecmem.retrieval.index.persisted import NotInSavedReplica

pytestmark = pytest.mark.embedded_only

QUERIES = ["the otter", "tea in the morning", "rust compiler", "Hangzhou 杭州"]


def _records(n: int = 24) -> list[MemoryRecord]:
    topics = ["the otter floats on its back", "tea in the morning, never coffee", "the rust compiler is strict",
              "用户住在杭州 Hangzhou"]
    return [MemoryRecord(id=f"m{i}", content=f"{topics[i % len(topics)]} item {i}", importance=0.1 + (i % 9) / 10,
                         scope="global" if i % 3 else "s1", created_at=T0 - timedelta(days=i), user_id="default",
                         superseded_by="m0" if i == 6 else None)
            for i in range(n)]


def _answers(bank) -> list[list[tuple[str, float]]]:
    return [[(hit.id, round(hit.score, 6)) for hit in bank.search(query, 5, session_id=session, record_access=False)]
            for query in QUERIES for session in (None, "s1")]


@pytest.fixture
def every(settings):
    """The settings of a one-off command: every user's replica saved (interfaces/cli/command.py)."""
    return settings.with_changes(replica_files="every")


@pytest.fixture
def saved_bank(every, clock):
    def open_saved() -> MemoryBank | None:
        return reading_saved(every, embedder=FakeEmbedder(), clock=clock)
    return open_saved


def _seeded(make_bank, every) -> list:
    bank = make_bank(settings=every)
    bank.add_records(_records())
    answers = _answers(bank)
    bank.close()  # saves the file, vectors included
    return answers


def test_it_answers_as_the_store_does_without_opening_chroma(make_bank, every, saved_bank, monkeypatch):
    built = _seeded(make_bank, every)

    def refuse(**_options):
        raise AssertionError("Chroma was opened")

    monkeypatch.setattr(chroma_client, "open_client", refuse)
    monkeypatch.setattr("vecmem.storage.chroma.store.open_client", refuse)
    saved = saved_bank()
    assert saved is not None
    assert _answers(saved) == built
    listings = [saved.list_memories(), saved.list_memories(session_id="s1", types=["fact"]),
                saved.list_memories(include_superseded=True), saved.get("m6")]
    saved.close()
    monkeypatch.undo()
    bank = make_bank()

    def scanned(session_id=None, types=None, include_superseded=False) -> list[MemoryRecord]:
        """The listing as a scan of Chroma gives it (what list_memories read before the replica did)."""
        return list(listing.page(lambda user, memory_filter: bank._store.scan(user, memory_filter), bank._access,
                                 "default", listing.listed(session_id, types, include_superseded, ["live"])).memories)

    assert listings == [scanned(), scanned("s1", ["fact"]), scanned(include_superseded=True), bank.get("m6")]


def test_a_write_after_the_file_sends_the_search_to_the_store_until_saved_again(make_bank, every, saved_bank):
    _seeded(make_bank, every)
    writer = make_bank(settings=every)
    writer.add("the heron fishes at dawn", memory_id="heron")
    assert saved_bank() is None  # the feed has a row after the file's
    writer.close()  # saves again
    saved = saved_bank()
    assert saved is not None and saved.search("heron dawn", 1, record_access=False)[0].id == "heron"
    saved.close()


def test_what_the_file_cannot_answer_raises_not_in_saved_replica(make_bank, every, saved_bank):
    _seeded(make_bank, every)
    saved = saved_bank()
    assert saved is not None
    with pytest.raises(NotInSavedReplica):
        saved.users()
    with pytest.raises(NotInSavedReplica):
        saved.search("", 3)  # the most important: a scan of the store
    with pytest.raises(NotInSavedReplica) as raised:
        saved.add("the kingfisher dives for fish")
    assert isinstance(raised.value, StoreError)
    saved.close()
    assert make_bank().count() == len(_records())  # nothing was written


def test_a_store_deleted_or_made_anew_under_the_same_folder_is_never_answered_from_the_file(
        make_bank, every, saved_bank):
    _seeded(make_bank, every)
    shutil.rmtree(every.home / "chroma")
    assert saved_bank() is None
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()  # this process's client of the deleted folder: as a new process
    anew = make_bank()
    anew.add("a memory of the new store", memory_id="new")
    anew.close()
    assert saved_bank() is None


def test_no_file_of_this_model_and_user_no_saved_search(make_bank, every, clock):
    _seeded(make_bank, every)

    class OtherModel(FakeEmbedder):
        name = "another-model"

    assert reading_saved(every, embedder=OtherModel(), clock=clock) is None
    assert reading_saved(every.with_changes(default_user="nobody"), embedder=FakeEmbedder(),
                                    clock=clock) is None
