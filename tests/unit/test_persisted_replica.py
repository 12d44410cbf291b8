"""A big user's replica is saved beside the store and loaded by the next bank instead of being rebuilt: the loaded
one answers exactly as a fresh build does, what changed since the file was saved (by another bank, or by this
one before its first search) is re-read, and a file that is damaged, foreign or outdated is never served.

The threshold for saving (1,000 memories) is lowered here so a bank of a few dozen memories is saved; the
in-memory store has a change feed like an embedded one, and the slow test at the end runs on embedded Chroma.
"""

from __future__ import annotations

import json
import logging
import stat
from datetime import timedelta

import numpy as np
import pytest

import vecmem.retrieval.index.replica as replica
from tests.conftest import T0, FakeEmbedder
from vecmem import MemoryBank, MemoryRecord
from vecmem.retrieval.query.tokenize import memory_tokens
from vecmem.storage.memory import InMemoryStore

SIZE = 60
QUERIES = ["the otter", "tea in the morning", "rust compiler", "Hangzhou 杭州", "walrus ice", "item 7"]


@pytest.fixture(autouse=True)
def small_users_are_saved(monkeypatch):
    monkeypatch.setattr(replica, "PERSIST_AT_LEAST", 10)


@pytest.fixture
def scans(monkeypatch):
    """How many times a store was read whole to build a replica (a load reads no such thing)."""
    counted = []
    original = InMemoryStore.scan_keywords

    def counting(self, user_id):
        counted.append(user_id)
        return original(self, user_id)

    monkeypatch.setattr(InMemoryStore, "scan_keywords", counting)
    return counted


def _records(user: str = "default", n: int = SIZE) -> list[MemoryRecord]:
    topics = ["the otter floats on its back", "tea in the morning, never coffee", "the rust compiler is strict",
              "用户住在杭州 Hangzhou", "the walrus sleeps on ice", "用户喜欢用 TypeScript 写前端"]
    kinds = ["fact", "preference", "instruction", "conclusion"]
    return [MemoryRecord(id=f"m{i}", content=f"{topics[i % len(topics)]} item {i}", type=kinds[i % 4],
                         importance=round(0.1 + (i % 9) / 10, 2), scope="global" if i % 3 else f"s{i % 2}",
                         created_at=T0 - timedelta(days=i), user_id=user, tags=[kinds[i % 4]],
                         superseded_by="m0" if i in (6, 12) else None, status="archived" if i == 9 else "live")
            for i in range(n)]


def _answers(bank: MemoryBank, user: str = "default") -> list[list[tuple[str, float]]]:
    found = []
    for query in QUERIES:
        for session in (None, "s1"):
            hits = bank.search(query, 8, user_id=user, session_id=session, record_access=False)
            # a loaded file holds the vectors and computes cosines itself (float32 unit vectors): they differ from
            # the store's in the eighth decimal, so scores are compared to the sixth
            found.append([(hit.id, round(hit.score, 6)) for hit in hits])
            found.append([(hit.id, hit.record.content, hit.record.scope) for hit in hits])
    return found


def _saved(make_bank, records=None) -> tuple[list, object]:
    """A bank that wrote the records, searched (built and saved its replica) and closed; its answers."""
    bank = make_bank()
    bank.add_records(records or _records())
    answers = _answers(bank)
    bank.close()
    return answers, bank._retriever._replicas.files.path("default")


def test_a_loaded_replica_answers_as_a_fresh_build_and_reads_no_store(make_bank, settings, scans):
    built, path = _saved(make_bank)
    assert path.exists() and scans == ["default"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    loaded = make_bank()
    assert _answers(loaded) == built
    assert scans == ["default"]  # the second bank loaded the file: no second scan of the store
    copy = loaded._retriever._copies["default"]
    assert copy.records is not None and copy.records.table is not None
    assert loaded.get("m6").superseded_by == "m0" and loaded.get("m9").status == "archived"


def test_writes_after_loading_are_searched_and_saved_again(make_bank, monkeypatch, scans):
    _saved(make_bank)
    monkeypatch.setattr(replica, "SAVE_AT_CLOSE", 1)
    bank = make_bank()
    bank.search("otter", 3)
    bank.add("the sea otter holds hands while sleeping", memory_id="new-otter")
    bank.update("m1", content="tea at noon, still never coffee")
    bank.update("m3", importance=0.95)
    bank.forget("m2")
    assert bank.search("holds hands", 1, record_access=False)[0].id == "new-otter"
    assert "m2" not in {hit.id for hit in bank.search("rust compiler", 20, record_access=False)}
    expected = _answers(bank)
    bank.close()  # saves again: three changes since the file, past SAVE_AT_CLOSE
    again = make_bank()
    assert _answers(again) == expected and scans == ["default"]
    assert again._retriever._copies["default"].unsaved == 0  # the file already held this bank's writes


def test_what_another_bank_changed_since_the_file_is_re_read(make_bank, scans):
    keeper = make_bank()  # holds its replica all along, and learns of the changes from the feed
    keeper.add_records(_records())
    keeper.search("otter", 1)
    keeper._retriever._replicas.files.wait()
    other = make_bank()
    other.add("the heron fishes at dawn", memory_id="heron")
    other.update("m1", content="the go compiler is fast")
    other.forget("m4")
    other.supersede("m5", "heron")
    reader = make_bank()
    ids = {hit.id for hit in reader.search("heron dawn compiler", 20, record_access=False)}
    assert "heron" in ids and "m4" not in ids and "m5" not in ids
    assert "the go compiler is fast" in {hit.content for hit in reader.search("go compiler fast", 3,
                                                                                record_access=False)}
    assert scans == ["default"]  # patched from the feed, not rebuilt
    assert _answers(reader) == _answers(keeper)  # exactly what a replica kept in step answers, scores included


def test_this_banks_own_writes_before_its_first_search_are_re_read(make_bank, scans):
    """The feed leaves a bank's own writes out of what it reports (it applied them itself): a file saved before
    them must still not hide them."""
    _saved(make_bank)
    bank = make_bank()
    bank.add("the kingfisher dives for fish", memory_id="kingfisher")
    bank.update("m7", content="the crow remembers faces")  # global, as m1, m2, m4, m5, m7 and m8 are
    bank.forget("m8")
    found = {hit.content for hit in bank.search("kingfisher crow faces", 20, record_access=False)}
    assert {"the kingfisher dives for fish", "the crow remembers faces"} <= found
    assert "m8" not in {hit.id for hit in bank.search("rust compiler item 8", 60, record_access=False)}
    assert scans == ["default"]


def test_a_save_never_claims_a_write_of_this_bank_its_replica_does_not_hold(make_bank, monkeypatch, scans):
    """Between the store taking a write of this bank and the replica applying it, the feed has the write's rows
    and a search may read past them (they are this bank's own: it skips them). A file saved then must not say
    it reflects that row, or the next process would never re-read the write."""
    _saved(make_bank)
    monkeypatch.setattr(replica, "SAVE_AT_CLOSE", 1)
    bank = make_bank()
    bank.search("otter", 1)
    bank.add("the stork flies south", memory_id="stork")  # applied: the replica holds every write so far
    edited = bank.get("m1").with_changes(content="the swift sleeps on the wing")  # as many memories as before
    bank._store.upsert("default", [edited], bank.embedder.embed_documents([edited.content]),
                       [memory_tokens(edited)])  # taken by the store, not applied yet
    bank.search("otter", 1)  # reads the feed past it
    copy = bank._retriever._copies["default"]
    assert copy.own_mark < copy.seen
    bank.close()  # so it does not save
    reader = make_bank()
    assert reader.search("swift sleeps wing", 1, record_access=False)[0].content == edited.content
    assert reader.search("stork flies south", 1, record_access=False)[0].id == "stork"
    assert scans == ["default"]


def test_a_bank_that_only_read_saves_what_other_banks_wrote(make_bank, monkeypatch, scans):
    _saved(make_bank)
    monkeypatch.setattr(replica, "SAVE_AT_CLOSE", 1)
    reader = make_bank()
    reader.search("otter", 1)
    make_bank().add("the ibis wades in rivers", memory_id="ibis")
    assert reader.search("ibis wades", 1, record_access=False)[0].id == "ibis"  # re-read from the feed
    copy = reader._retriever._copies["default"]
    assert copy.own_mark < copy.seen  # only the other bank's rows since: nothing of its own can be missing
    reader.close()
    loaded = reader._retriever._replicas.files.load("default")
    assert loaded is not None and loaded.seen == copy.seen and "ibis" in loaded.index


def test_too_many_changes_since_the_file_rebuild_it(make_bank, monkeypatch, scans):
    _saved(make_bank)
    monkeypatch.setattr(replica, "REREAD_AT_MOST", 3)
    other = make_bank()
    for i in range(5):
        other.add(f"the gannet number {i} plunges", memory_id=f"gannet{i}")
    reader = make_bank()
    assert {f"gannet{i}" for i in range(5)} <= {hit.id for hit in reader.search("gannet plunges", 10,
                                                                                 record_access=False)}
    assert scans == ["default", "default"]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "bad offsets", "bad header"])
def test_a_damaged_file_is_deleted_rebuilt_and_never_crashes_a_search(make_bank, scans, caplog, damage):
    built, path = _saved(make_bank)
    raw = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(raw[:100] + bytes(range(256)) * 8 + raw[2148:])
    else:
        with np.load(path, allow_pickle=False) as parts:
            arrays = {name: parts[name] for name in parts.files}
        if damage == "bad offsets":
            arrays["token_offsets"] = arrays["token_offsets"][::-1].copy()
        else:
            arrays["header"] = np.frombuffer(b'{"format": 1, "seen": "no"', dtype=np.uint8)
        with path.open("wb") as out:
            np.savez(out, **arrays)
    caplog.set_level(logging.WARNING, logger="vecmem.retrieval.index.persisted")
    bank = make_bank()
    assert _answers(bank) == built
    assert scans == ["default", "default"]
    assert any("unreadable" in message for message in caplog.messages)
    bank.close()
    assert make_bank().search("otter", 1, record_access=False)  # the rebuilt replica was saved anew ...
    assert scans == ["default", "default"]  # ... and loads


def _rewrite_header(path, **changes) -> None:
    with np.load(path, allow_pickle=False) as parts:
        arrays = {name: parts[name] for name in parts.files}
    header = {**json.loads(arrays["header"].tobytes()), **changes}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    with path.open("wb") as out:
        np.savez(out, **arrays)


@pytest.mark.parametrize("changes", [{"model": "another-model"}, {"location": "/elsewhere"}, {"format": 0},
                                     {"feed": -1}, {"user": "someone-else"}])
def test_a_file_of_another_model_store_feed_user_or_format_is_rebuilt(make_bank, scans, caplog, changes):
    built, path = _saved(make_bank)
    _rewrite_header(path, **changes)
    caplog.set_level(logging.INFO, logger="vecmem.retrieval.index.persisted")
    assert _answers(make_bank()) == built
    assert scans == ["default", "default"]
    assert any("not this store's" in message for message in caplog.messages)


def test_a_feed_that_no_longer_reaches_back_to_the_file_rebuilds_it(make_bank, scans):
    built, _ = _saved(make_bank)
    import vecmem.storage.state.changes as changes_module

    bank = make_bank()
    bank._changes._append([("default", "x")] * 3, changes_module._DONE)
    head = bank._changes.head()
    with bank._changes._db.transaction() as db:  # the feed pruned past what the file reflects
        db.execute("INSERT INTO feed (key, value) VALUES ('pruned_through', ?) "
                   "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (head,))
    assert _answers(bank) == built
    assert scans == ["default", "default"]


def test_a_store_emptied_under_the_same_name_is_never_served_from_the_file(make_bank, settings, scans):
    """An in-memory store lives in one process: another process's bank finds the file, the feed and the location
    the same, and no memories. The count check refuses the file."""
    _saved(make_bank)
    from vecmem.storage.state.changes import ChangeFeed

    empty = InMemoryStore(model_name=FakeEmbedder().name, location=str(settings.home),
                          changes=ChangeFeed(settings.home / "changes.sqlite3"))
    bank = make_bank(store=empty)
    assert bank.search("otter", 5, record_access=False) == []
    assert not bank._retriever._replicas.files.path("default").exists()


def test_a_reindex_deletes_the_files(make_bank, scans):
    _, path = _saved(make_bank)
    bank = make_bank()
    bank.reindex()
    assert not path.exists()
    assert len(bank.search("otter", 5, record_access=False)) == 5
    assert scans == ["default", "default"]


def test_a_user_forgotten_below_the_threshold_leaves_no_file(make_bank, scans):
    _, path = _saved(make_bank, _records(n=12))
    other = make_bank()
    for i in range(5):
        other.forget(f"m{i}")
    bank = make_bank()
    assert {hit.id for hit in bank.search("item", 20, record_access=False)} == {"m5", "m7", "m8", "m10", "m11"}
    assert not path.exists()


def test_eviction_drops_the_replica_from_memory_and_the_next_search_loads_its_file(make_bank, settings, monkeypatch,
                                                                                  scans):
    monkeypatch.setattr(replica, "BYTES_PER_MEMORY", 16 * 1024 * 1024 // 100)  # 100 memories fill the budget
    bank = make_bank(settings=settings.with_changes(cache_mb=16))
    bank.add_records(_records("alice") + _records("bob"))
    first = [hit.id for hit in bank.search("otter", 5, user_id="alice", record_access=False)]
    bank.search("otter", 5, user_id="bob", record_access=False)
    assert "alice" not in bank._retriever._copies and bank._retriever._replicas.evicted == 1
    bank._retriever._replicas.files.wait()
    assert [hit.id for hit in bank.search("otter", 5, user_id="alice", record_access=False)] == first
    assert scans == ["alice", "bob"]  # alice came back from her file


def test_nothing_is_saved_without_a_change_feed(make_bank, settings, scans):
    store = InMemoryStore(model_name=FakeEmbedder().name, location=str(settings.home))
    bank = make_bank(store=store)
    bank.add_records(_records())
    assert bank.search("otter", 3, record_access=False)
    bank.close()
    assert not (settings.home / "replicas").exists()


def test_a_running_bank_saves_again_after_enough_changes(make_bank, monkeypatch, scans):
    _saved(make_bank)
    monkeypatch.setattr(replica, "SAVE_AFTER_CHANGES", 3)
    monkeypatch.setattr(replica, "SAVE_INTERVAL_S", 0.0)
    bank = make_bank()
    bank.search("otter", 1)
    bank.add_records([MemoryRecord(id=f"puffin{i}", content=f"the puffin {i} nests in burrows") for i in range(3)])
    bank._retriever._replicas.files.wait()
    copy = bank._retriever._copies["default"]
    assert copy.unsaved == 0 and copy.own_mark >= copy.seen
    reader = make_bank(store=InMemoryStore(model_name=FakeEmbedder().name, location="elsewhere"))
    assert reader._retriever._replicas.files.load("default") is None  # another store's location: not its file
    loaded = bank._retriever._replicas.files.load("default")
    assert loaded is not None and "puffin2" in loaded.index


@pytest.mark.chroma
def test_on_embedded_chroma_a_new_bank_loads_instead_of_scanning(make_bank, monkeypatch):
    from vecmem.storage.chroma.store import ChromaStore

    built, path = _saved(make_bank)
    assert path.exists()
    monkeypatch.setattr(ChromaStore, "scan_keywords", lambda self, user: pytest.fail("the store was scanned"))
    other = make_bank()
    other.add("the heron fishes at dawn", memory_id="heron")
    other.close()
    bank = make_bank()
    assert bank.search("heron dawn", 1, record_access=False)[0].id == "heron"
    bank.forget("heron")
    assert _answers(bank) == built


def test_a_loaded_bm25_model_scores_exactly_as_bm25s():
    """The loaded model scores without bm25s (columns.LoadedBM25); every score must be bm25s's, bit for bit."""
    from vecmem.retrieval.index.columns import LoadedBM25
    from vecmem.retrieval.index.keyword import IndexedMemory, KeywordIndex, tokenize
    from vecmem.retrieval.index.replica_file import bm25_vocabulary

    index = KeywordIndex()
    index.replace_all((r.id, IndexedMemory.of(r, tokenize(r.content))) for r in _records(n=200))
    built = index.snapshot()._model
    scores = built.scores
    loaded = LoadedBM25(bm25_vocabulary(built), scores["data"], scores["indices"], scores["indptr"], scores["num_docs"])
    for query in [*QUERIES, "用户 杭州 住在", "otter otter item", "nothing matches this"]:
        tokens = tokenize(query)
        if tokens:
            assert np.array_equal(loaded.get_scores(tokens), built.get_scores(tokens)), query
