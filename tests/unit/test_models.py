from datetime import UTC, datetime

import pytest

from vecmem import InvalidInputError, MemoryRecord
from vecmem.models import MAX_CONTENT_CHARS, MemoryFilter, normalize_importance


def record(**fields) -> MemoryRecord:
    return MemoryRecord(**{"id": "m1", "content": "The user likes tea", **fields})


def test_defaults_are_valid():
    memory = record()
    assert memory.type == "fact" and memory.scope == "global" and memory.session_id is None
    assert memory.importance == 0.5 and memory.confidence == 1.0 and memory.access_count == 0
    assert memory.created_at.tzinfo is not None and memory.last_accessed is None
    assert not memory.superseded


@pytest.mark.parametrize(
    ("given", "stored"),
    [(9, 0.9), (10, 1.0), (0, 0.0), (1, 1.0), (0.7, 0.7), (1.0, 1.0), (0.0, 0.0), (1.5, 0.15), (7.0, 0.7)],
)
def test_importance_above_one_is_the_ten_point_scale(given, stored):
    assert record(importance=given).importance == pytest.approx(stored)


@pytest.mark.parametrize("bad", [11, -1, 10.5, -0.1, float("nan"), float("inf"), "high", True, None])
def test_bad_importance_is_refused_naming_the_field(bad):
    with pytest.raises(InvalidInputError) as excinfo:
        record(importance=bad)
    assert excinfo.value.field == "importance"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", ""),
        ("content", "   \n\t "),
        ("content", "x" * (MAX_CONTENT_CHARS + 1)),
        ("content", "bad \ud800 surrogate"),
        ("content", "bell \x07 inside"),
        ("content", 42),
        ("type", "opinion"),
        ("source", "internet"),
        ("confidence", 1.2),
        ("confidence", float("nan")),
        ("tags", "not-a-list"),
        ("tags", ["ok", ""]),
        ("tags", ["t"] * 33),
        ("scope", ""),
        ("id", " padded "),
        ("id", ""),
        ("user_id", "two\nlines"),
        ("created_at", "yesterday"),
        ("access_count", -1),
        ("superseded_by", "m1"),
    ],
)
def test_invalid_values_name_field_and_reason(field, value):
    with pytest.raises(InvalidInputError) as excinfo:
        record(**{field: value})
    assert excinfo.value.field == field
    assert excinfo.value.reason
    assert str(excinfo.value).startswith(f"{field}: ")


def test_content_is_stripped_and_tags_deduplicated():
    memory = record(content="  hello world  ", tags=["a", "b", "a"])
    assert memory.content == "hello world"
    assert memory.tags == ("a", "b")


def test_times_accept_iso_naive_and_epoch():
    assert record(created_at="2026-01-02T03:04:05Z").created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert record(created_at=datetime(2026, 1, 2)).created_at.tzinfo == UTC
    assert record(created_at=0).created_at == datetime(1970, 1, 1, tzinfo=UTC)


def test_last_used_is_the_later_of_created_and_accessed():
    created = datetime(2026, 1, 1, tzinfo=UTC)
    accessed = datetime(2026, 2, 1, tzinfo=UTC)
    assert record(created_at=created).last_used == created
    assert record(created_at=created, last_accessed=accessed).last_used == accessed
    assert record(created_at=accessed, last_accessed=created).last_used == accessed


def test_dict_round_trip_and_session_id_alias():
    memory = record(type="preference", tags=["x"], scope="s1", importance=0.8, superseded_by="m2")
    data = memory.to_dict()
    assert data["created_at"].endswith("+00:00")
    assert MemoryRecord.from_dict(data) == memory
    aliased = MemoryRecord.from_dict({"id": "a", "content": "c", "session_id": "s9"})
    assert aliased.scope == "s9" and aliased.session_id == "s9"


def test_from_dict_refuses_unknown_and_missing_fields():
    with pytest.raises(InvalidInputError, match="colour: is not a memory field"):
        MemoryRecord.from_dict({"id": "a", "content": "c", "colour": "red"})
    with pytest.raises(InvalidInputError, match="content: is required"):
        MemoryRecord.from_dict({"id": "a"})
    with pytest.raises(InvalidInputError, match="session_id"):
        MemoryRecord.from_dict({"id": "a", "content": "c", "scope": "s1", "session_id": "s2"})


def test_with_changes_validates():
    with pytest.raises(InvalidInputError):
        record().with_changes(type="nonsense")


def test_normalize_importance_directly():
    assert normalize_importance(7) == pytest.approx(0.7)


class TestMemoryFilter:
    def test_no_session_sees_global_only(self):
        flt = MemoryFilter()
        assert flt.scopes == ("global",)
        assert flt.matches(record())
        assert not flt.matches(record(scope="s1"))

    def test_session_sees_global_and_its_own(self):
        flt = MemoryFilter(session_id="s1")
        assert flt.matches(record(scope="s1")) and flt.matches(record())
        assert not flt.matches(record(scope="s2"))

    def test_superseded_and_types(self):
        assert not MemoryFilter().matches(record(superseded_by="m2"))
        assert MemoryFilter(include_superseded=True).matches(record(superseded_by="m2"))
        assert not MemoryFilter(types=frozenset({"preference"})).matches(record())

    def test_all_sessions(self):
        assert MemoryFilter(all_sessions=True).matches(record(scope="anything"))

    @pytest.mark.parametrize(
        "kwargs", [{"session_id": "global"}, {"types": frozenset()}, {"types": frozenset({"x"})}, {"session_id": ""}]
    )
    def test_invalid_filters(self, kwargs):
        with pytest.raises(InvalidInputError):
            MemoryFilter(**kwargs)
