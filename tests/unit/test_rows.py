"""The Chroma row layout: a record survives the round trip, rows of the first layout still read, bad rows fail
clearly, and only the filtered fields are metadata keys of their own."""

import json
from datetime import UTC, datetime

import pytest

from vecmem import MemoryRecord, StoreError
from vecmem.storage.chroma.rows import from_row, to_metadata

WHEN = datetime(2026, 3, 4, 5, 6, 7, 891_000, tzinfo=UTC)


def sample(**changes):
    base = dict(id="m1", content="用户喜欢 TypeScript", type="preference", tags=("lang", "代码"), importance=0.7,
                scope="s-9", created_at=WHEN, last_accessed=WHEN, access_count=3, source="extracted",
                confidence=0.8, superseded_by="m2", user_id="alice", context="我喜欢用 TypeScript")
    base.update(changes)
    return MemoryRecord(**base)


@pytest.mark.parametrize("record", [sample(), sample(tags=(), context="", superseded_by=None, last_accessed=None)])
def test_round_trip(record):
    assert from_row(record.id, record.content, to_metadata(record)) == record


def test_only_filtered_fields_are_keys_of_their_own():
    metadata = to_metadata(sample())
    assert set(metadata) == {"type", "scope", "superseded", "superseded_by", "fields"}
    assert metadata["superseded"] is True and metadata["superseded_by"] == "m2"
    assert json.loads(metadata["fields"])["tags"] == ["lang", "代码"]


def test_rows_of_the_first_layout_still_read():
    first_layout = {
        "type": "preference", "scope": "s-9", "importance": 0.7, "confidence": 0.8, "source": "extracted",
        "created_at": WHEN.timestamp(), "last_accessed": WHEN.timestamp(), "access_count": 3, "superseded": True,
        "superseded_by": "m2", "user_id": "alice", "tags": ["lang", "代码"], "context": "我喜欢用 TypeScript",
        "keywords": "ignored here",
    }
    assert from_row("m1", "用户喜欢 TypeScript", first_layout) == sample()


def test_an_update_of_a_first_layout_row_reads_as_the_update():
    """Chroma merges metadata on update: the old keys stay beside ``fields``, which wins."""
    merged = {"importance": 0.1, "tags": ["stale"], **to_metadata(sample(importance=0.9))}
    assert from_row("m1", "用户喜欢 TypeScript", merged).importance == 0.9
    assert from_row("m1", "用户喜欢 TypeScript", merged).tags == ("lang", "代码")


@pytest.mark.parametrize("fields", ["{not json", "[1, 2]", json.dumps({"importance": "high"})])
def test_unreadable_rows_raise_store_error(fields):
    with pytest.raises(StoreError, match="m1 in the store is unreadable"):
        from_row("m1", "text", {"type": "fact", "scope": "global", "fields": fields})
