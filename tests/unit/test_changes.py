"""The change feed keeps each bank's in-memory copy of the store exact: what another bank on the same store
wrote, edited, superseded or forgot is what the next search sees."""

import pytest

import vecmem.storage.state.changes as changes_module
from tests.conftest import FakeEmbedder
from vecmem.models import MemoryFilter
from vecmem.retrieval.index.keyword import tokenize

NEVER = 3600  # the count check of feed-less stores must play no part in these tests


@pytest.fixture
def pair(make_bank, settings):
    """Two banks on one store, as two processes would be; the first has built its copy already."""
    embedder = FakeEmbedder(dimension=64)
    patient = settings.with_changes(index_check_seconds=NEVER)
    this = make_bank(embedder=embedder, settings=patient)
    other = make_bank(embedder=embedder, settings=patient)
    return this, other


def _ids(bank, query, **options):
    return [hit.id for hit in bank.search(query, 10, record_access=False, **options)]


def test_an_edit_by_another_process_is_searched_as_edited(pair):
    this, other = pair
    memory = this.add("the walrus sleeps on ice floes", memory_id="walrus")
    assert _ids(this, "walrus") == ["walrus"]
    other.update("walrus", content="the penguin sleeps standing up", importance=0.9)
    (hit,) = this.search("penguin", 1, record_access=False)
    assert hit.id == memory.id and hit.content == "the penguin sleeps standing up" and hit.importance == 0.9
    index = this._retriever.keyword_index("default")
    assert not index.search([(tokenize("walrus"), 1.0)], MemoryFilter(), 5).top  # the old words left the index


def test_what_another_process_forgets_or_supersedes_is_never_returned(pair):
    this, other = pair
    for i in range(6):
        this.add(f"otter note {i}", memory_id=f"o{i}")
    newest = this.add("otters hold hands while sleeping", memory_id="newest")
    assert len(_ids(this, "otter note")) == 7
    other.forget("o0")
    other.supersede("o1", newest.id)
    found = _ids(this, "otter note")
    assert "o0" not in found and "o1" not in found and len(found) == 5
    assert this.get("o1").superseded_by == newest.id


def test_memories_another_process_adds_in_a_new_type_are_found(pair):
    this, other = pair
    this.add("the user likes herons", memory_type="preference")
    other.add("always answer about herons in haiku", memory_type="instruction", memory_id="haiku")
    assert "haiku" in _ids(this, "herons")
    assert "haiku" in _ids(this, "herons", types=["instruction"])


def test_a_write_whose_writer_died_before_announcing_its_end_is_read_from_the_store(pair):
    """A process killed between its `begin` and its `end`: the memory is never served from the copy."""
    this, other = pair
    this.add("the heron fishes at dawn", memory_id="heron")
    assert this.search("heron", 1, record_access=False)[0].importance == 0.5
    other._changes._append([("default", "heron")], changes_module._BEGIN)  # announced ...
    other._store.changes = None  # ... then the write lands, and the writer dies before its end
    other.update("heron", importance=0.8)
    assert this.search("heron", 1, record_access=False)[0].importance == 0.8
    assert "heron" in this._retriever._current("default").unsettled


def test_a_write_in_flight_while_a_copy_is_built_stays_unsettled(make_bank, settings):
    writer = make_bank()
    writer.add("the crane stands on one leg", memory_id="crane")
    writer._changes._append([("default", "crane")], changes_module._BEGIN)
    reader = make_bank()
    assert reader.search("crane", 1, record_access=False)
    assert reader._retriever._current("default").unsettled == {"crane": 1}
    writer._changes._append([("default", "crane")], changes_module._DONE)
    assert reader._retriever._current("default").unsettled == {}


@pytest.mark.chroma  # it makes a Chroma collection's update fail
def test_a_failed_write_of_this_process_is_re_read(pair, monkeypatch):
    this, _ = pair
    this.add("the ibis wades in rivers", memory_id="ibis")
    this.search("ibis", 1)
    original = this._store._typed

    def failing(*args, **kwargs):
        collections = original(*args, **kwargs)
        for collection in collections.values():
            monkeypatch.setattr(collection, "update", lambda **_: (_ for _ in ()).throw(RuntimeError("disk full")))
        return collections

    monkeypatch.setattr(this._store, "_typed", failing)
    with pytest.raises(Exception, match="disk full"):
        this.update("ibis", importance=0.9)
    monkeypatch.undo()
    changes = this._changes.since("default", 0)
    assert changes.changed == {"ibis"}  # its own failed write, to be re-read; its own finished ones are not
    assert this.search("ibis", 1, record_access=False)[0].importance == 0.5


def test_a_reader_behind_the_kept_history_rebuilds(pair, monkeypatch):
    this, other = pair
    this.add("the stork nests on chimneys", memory_id="stork")
    assert _ids(this, "stork") == ["stork"]
    monkeypatch.setattr(changes_module, "KEEP_ROWS", 4)
    monkeypatch.setattr(changes_module, "_PRUNE_EVERY", 1)
    for i in range(5):
        other.add(f"storks migrate to Africa {i}", memory_id=f"m{i}")
    assert other._changes.since("default", 0).rebuild
    assert len(_ids(this, "stork")) == 6


def test_a_reindex_by_another_process_resets_every_copy(pair):
    this, other = pair
    this.add("the swan mates for life", memory_id="swan")
    this.search("swan", 1)
    before = this._retriever._current("default")
    other.reindex()
    assert this._retriever._current("default") is not before
    assert _ids(this, "swan") == ["swan"]


def test_the_feed_keeps_only_its_newest_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(changes_module, "KEEP_ROWS", 10)
    monkeypatch.setattr(changes_module, "_PRUNE_EVERY", 1)
    feed = changes_module.ChangeFeed(tmp_path / "changes.sqlite3")
    for i in range(20):
        with feed.writing("u", [f"m{i}"]):
            pass
    rows = feed._db.fetch("SELECT count(*) FROM changes")[0][0]
    assert rows <= 10 + 1 and feed.since("u", 0).rebuild and not feed.since("u", feed.head() - 2).rebuild


@pytest.mark.chroma  # ChromaStore's cache of which collections exist
def test_a_collection_another_process_creates_is_seen_by_listing_export_and_get(pair):
    this, other = pair
    this.add("the user keeps bees", memory_type="fact")
    assert [r.type for r in this.export()] == ["fact"]  # this bank now knows the user has no other types
    other.add("answer beekeeping questions briefly", memory_type="instruction", memory_id="bees")
    assert this.get("bees").type == "instruction"
    assert {r.type for r in this.export()} == {"fact", "instruction"}
    assert {r.id for r in this.list_memories(types=["instruction"])} == {"bees"}
