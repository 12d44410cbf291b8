"""A process killed mid-write leaves writes begun and never ended; the next process to open the store settles
them before it serves anything (maintenance/recovery.py), without a command, and never a live writer's."""

import logging
import threading

import numpy as np
import pytest

import vecmem.storage.state.changes as changes_module
from tests.conftest import FakeEmbedder
from vecmem.errors import StoreError
from vecmem.storage.chroma import batch as chroma_batch
from vecmem.storage.chroma import store as chroma_store
from vecmem.storage.chroma.repair import may_be_torn
from vecmem.storage.chroma.rows import to_metadata
from vecmem.storage.state.changes import ChangeFeed
from vecmem.storage.state.database import FileWriteLocks


def _killed_mid_write(feed: ChangeFeed, user: str, ids: list[str]) -> None:
    """What a writer killed between its begin and its end leaves on the feed."""
    feed._append([(user, memory_id) for memory_id in ids], changes_module._BEGIN, opened=len(ids))


def test_a_write_left_open_by_a_killed_writer_is_settled_when_the_store_is_next_opened(tmp_path):
    locks = FileWriteLocks(tmp_path / "locks")
    killed = ChangeFeed(tmp_path / "changes.sqlite3")
    _killed_mid_write(killed, "u", ["m1", "m2"])
    killed.close()
    feed = ChangeFeed(tmp_path / "changes.sqlite3")
    assert sorted(feed.unsettled("u", feed.head())) == ["m1", "m2"]
    assert feed.recover(locks.holding) == {"u": ["m1", "m2"]}
    assert feed.unsettled("u", feed.head()) == {}
    assert feed.recover(locks.holding) == {}  # settled once: the count says nothing is open now
    reader = feed.reader()
    assert reader.since("u", 0).changed == {"m1", "m2"}  # every reader re-reads what the killed write touched


def test_a_memory_two_killed_writers_left_open_is_settled_whole(tmp_path):
    locks, path = FileWriteLocks(tmp_path / "locks"), tmp_path / "changes.sqlite3"
    for _ in range(2):
        killed = ChangeFeed(path)
        _killed_mid_write(killed, "u", ["m1"])
        killed.close()
    feed = ChangeFeed(path)
    assert feed.unsettled("u", feed.head()) == {"m1": 2}
    assert feed.recover(locks.holding) == {"u": ["m1"]}
    assert feed.unsettled("u", feed.head()) == {}
    assert feed.recover(locks.holding) == {}


def test_a_live_writers_write_is_never_settled_it_is_waited_for(tmp_path):
    locks, path = FileWriteLocks(tmp_path / "locks"), tmp_path / "changes.sqlite3"
    writer, opener = ChangeFeed(path), ChangeFeed(path)
    writing, recovered = threading.Event(), {}
    finish = threading.Event()

    def write() -> None:
        with locks.holding(["u"]), writer.writing("u", ["live"]):  # as the bank writes: lock, begin ... end
            writing.set()
            finish.wait(10)

    thread = threading.Thread(target=write)
    thread.start()
    writing.wait(10)
    recovering = threading.Thread(target=lambda: recovered.update(opener.recover(locks.holding)))
    recovering.start()
    recovering.join(0.5)
    assert recovering.is_alive()  # waiting on the live writer's lock, not settling its write
    finish.set()
    thread.join(10)
    recovering.join(10)
    assert recovered == {}
    assert opener.unsettled("u", opener.head()) == {}


def test_a_feed_written_before_open_writes_were_counted_is_read_once(tmp_path):
    locks = FileWriteLocks(tmp_path / "locks")
    feed = ChangeFeed(tmp_path / "changes.sqlite3")
    feed._append([("u", "old")], changes_module._BEGIN)  # an older version counted nothing
    feed._db.fetch("DELETE FROM feed WHERE key = ?", (changes_module._OPEN_ROWS,))
    assert feed.recover(locks.holding) == {"u": ["old"]}
    assert feed._db.fetch("SELECT value FROM feed WHERE key = ?", (changes_module._OPEN_ROWS,)) == [(0,)]


def test_an_open_after_a_clean_exit_reads_only_the_count(tmp_path, monkeypatch):
    locks = FileWriteLocks(tmp_path / "locks")
    feed = ChangeFeed(tmp_path / "changes.sqlite3")
    with feed.writing("u", ["a", "b"]):
        pass
    feed.recover(locks.holding)  # counts the feed once
    monkeypatch.setattr(ChangeFeed, "_open_writes", lambda *_: pytest.fail("the feed was read whole"))
    assert feed.recover(locks.holding) == {}


@pytest.mark.chroma
def test_reopening_settles_and_mends_a_type_change_killed_half_way(make_bank, caplog):
    bank = make_bank()
    bank.add("the user keeps bees", memory_id="bee", memory_type="fact")
    store, record = bank._store, bank._store.get("default", ["bee"])["bee"]
    # the write that moves it to "preference" was killed after the new copy landed, before the old one went
    _killed_mid_write(bank._changes, "default", ["bee"])
    place = store._typed("default", ["preference"], create_with_dimension=64)["preference"]
    moved = record.with_changes(type="preference", content="the user likes bees", version=record.version + 1)
    place.add(ids=["bee"], embeddings=np.ones((1, 64), dtype=np.float32),
              documents=[moved.content], metadatas=[{**to_metadata(moved), "keywords": "bees likes user"}])
    bank.close()
    with caplog.at_level(logging.WARNING, logger="vecmem"):
        reopened = make_bank()
    assert any("settled 1 writes of 1 users" in line and "misplaced-copies (1)" in line for line in caplog.messages)
    assert reopened.doctor().findings == ()
    (kept,) = reopened.export(user_id="default")
    assert (kept.id, kept.type, kept.content) == ("bee", "preference", "the user likes bees")  # the newer copy
    assert [hit.id for hit in reopened.search("bees", 3, record_access=False)] == ["bee"]


@pytest.mark.chroma
def test_a_write_that_changes_a_type_stops_before_deleting_the_old_copy_if_the_new_one_fails(make_bank, settings,
                                                                                            monkeypatch):
    bank = make_bank(settings=settings.with_changes(dedicated_at=1))  # collections per type, one write each
    bank.add("the user keeps bees", memory_id="bee", memory_type="fact")
    moved = bank.get("bee").with_changes(type="preference")
    sent = chroma_batch._Rows.send

    def killed_at_preference(rows):
        if rows.collection.name.endswith("preference"):
            raise KeyboardInterrupt  # stands for the kill: nothing after this point runs
        sent(rows)

    monkeypatch.setattr(chroma_batch._Rows, "send", killed_at_preference)
    with pytest.raises(KeyboardInterrupt):  # a new fact first, so the fact collection is written to first
        bank.add_records([bank.get("bee").with_changes(id="wasp", content="the user keeps wasps"), moved],
                         overwrite=True)
    monkeypatch.undo()
    assert bank.get("bee").type == "fact"  # the old copy is still there


@pytest.mark.parametrize(("message", "is_torn"), [
    ("Error executing plan: Error sending backfill request to compactor: Error constructing hnsw segment reader: "
     "Error creating hnsw segment reader: Error loading hnsw index", True),
    ("Failed to apply logs to the hnsw segment writer", True),
    ("Error executing plan: Internal error: Error finding id", True),
    ("Error executing plan: Internal error: Error getting embedding", True),
    ("Collection [vecmem-u-1-fact] does not exist", False),
    ("cannot reach the Chroma server", False),
])
def test_what_chroma_says_of_a_torn_segment_is_told_from_other_failures(message, is_torn):
    try:
        try:
            raise RuntimeError(message)  # stands for chromadb's InternalError
        except RuntimeError as exc:
            raise StoreError("reading memories failed") from exc
    except StoreError as wrapped:
        assert may_be_torn(wrapped) is is_torn


@pytest.mark.chroma
def test_a_call_that_met_a_segment_another_thread_already_rebuilt_runs_again(make_bank, monkeypatch):
    """Two threads meet one torn segment; the first to take the lock rebuilds it. The second then finds every
    collection reading again and runs its call once more instead of raising the error it met."""
    bank = make_bank()
    bank.add("the user keeps bees", memory_id="bee")
    store, refresh = bank._store, bank._store.refresh
    failures = iter([StoreError("Error loading hnsw index")])

    def torn_once(user_id):
        for error in failures:
            raise error
        return refresh(user_id)

    monkeypatch.setattr(store, "refresh", torn_once)
    assert store.count("default") == 1


@pytest.mark.chroma
def test_a_read_that_fails_on_a_sound_segment_twice_in_a_row_is_run_again_a_moment_later(make_bank, monkeypatch):
    """An embedded read under the process's own writes met "Error getting embedding", and the check of the
    segment that followed at once met it again though its files were sound: no tear to mend, so the call is run
    once more after a pause, as a server's is, and a failure that persists is raised then."""
    bank = make_bank()
    bank.add("the user keeps bees", memory_id="bee")
    store, refresh = bank._store, bank._store.refresh
    failing = {"reads": 1}

    def unreadable_for_a_moment(user_id):
        if failing["reads"] > 0:
            failing["reads"] -= 1
            raise StoreError("reading memories failed: Error executing plan: Internal error: Error getting embedding")
        return refresh(user_id)

    def sound_files_failing_read(collection, folder):
        raise StoreError("checking a collection failed: Error executing plan: Internal error: Error getting embedding")

    monkeypatch.setattr(store, "refresh", unreadable_for_a_moment)
    monkeypatch.setattr(chroma_store, "torn_because", sound_files_failing_read)
    assert store.count("default") == 1
    failing["reads"] = 2  # it persists: raised after the one more run
    with pytest.raises(StoreError, match="Error getting embedding"):
        store.count("default")


@pytest.mark.chroma
def test_a_bank_of_another_model_settles_what_a_kill_left_but_stores_no_vectors_of_its_own(make_bank, caplog):
    bank = make_bank()
    bank.add("the user keeps bees", memory_id="bee")
    _killed_mid_write(bank._changes, "default", ["bee"])
    fact = bank._store._typed("default", ["fact"])["fact"]
    record = bank._store.get("default", ["bee"])["bee"]
    fact.update(ids=["bee"], metadatas=[{**to_metadata(record), "keywords": "stale"}])  # a repair would rewrite it
    bank.close()
    with caplog.at_level(logging.WARNING, logger="vecmem"):
        other = make_bank(embedder=FakeEmbedder(name="another-model"), verify_model=False)
    assert any("not yet mended" in line for line in caplog.messages)
    assert other._store.get("default", ["bee"])["bee"].version == record.version  # nothing rewritten
    other.close()
    kinds = {finding.kind for finding in make_bank().doctor().findings}
    assert kinds == {"keyword-index-out-of-step"}  # settled; the repair is left to a bank of the store's model
