"""Listing a page at a time (``MemoryBank.page_memories``, bank/listing.py): every sort order, ties broken
by id so pages neither repeat nor skip a memory, the total whatever the page, access statistics sorted on, and
what is refused."""

import pytest

from vecmem import InvalidInputError
from vecmem.bank.listing import SORT_FIELDS, SORTS


@pytest.fixture
def five(bank, clock):
    """Five memories, a minute apart, with importance, type, scope, source and confidence all mixed up."""
    made = []
    for content, kind, importance, session, source, confidence in [
        ("b likes tea", "preference", 0.3, None, "manual", 1.0),
        ("D lives in Hangzhou", "fact", 0.9, "s1", "user", 0.6),
        ("a works at Acme", "fact", 0.5, None, "extracted", 0.8),
        ("e always answer briefly", "instruction", 0.9, None, "manual", 1.0),
        ("C decided on Postgres", "conclusion", 0.1, "s2", "manual", 0.9),
    ]:
        made.append(bank.add(content, memory_type=kind, importance=importance, session_id=session, source=source,
                             confidence=confidence))
        clock.advance(minutes=1)
    return made


def ids(page):
    return [record.id for record in page.memories]


def test_the_default_is_newest_first_as_list_memories_lists(bank, five):
    page = bank.page_memories()
    assert ids(page) == [r.id for r in reversed(five)] == [r.id for r in bank.list_memories()]
    assert page.total == 5 and page.offset == 0 and page.sort == "-created_at"


@pytest.mark.parametrize("sort", SORTS)
def test_every_order_is_total_and_pages_cover_it_exactly(bank, five, sort):
    name = sort.lstrip("-")
    whole = bank.page_memories(sort=sort).memories
    keys = [(getattr(r, name).casefold() if name == "content" else getattr(r, name), r.id) for r in whole]
    assert keys == sorted(keys, reverse=sort.startswith("-"))  # ties (importance 0.9, type fact, ...) by id
    pages = [bank.page_memories(sort=sort, offset=offset, limit=2) for offset in (0, 2, 4)]
    assert [r.id for page in pages for r in page.memories] == [r.id for r in whole]
    assert [len(page.memories) for page in pages] == [2, 2, 1] and {page.total for page in pages} == {5}


def test_content_sorts_without_regard_to_case(bank, five):
    assert [r.content[0] for r in bank.page_memories(sort="content").memories] == ["a", "b", "C", "D", "e"]


def test_sorted_by_use_with_the_access_statistics(bank, five, clock):
    bank.search("Acme", 1)  # a used once, last
    clock.advance(minutes=1)
    bank.search("tea", 1)
    clock.advance(minutes=1)
    bank.search("tea", 1)  # b used twice, most recently
    by_use = bank.page_memories(sort="-access_count").memories
    assert [r.content[0] for r in by_use[:2]] == ["b", "a"] and by_use[0].access_count == 2
    recent = bank.page_memories(sort="-last_accessed").memories
    assert [r.content[0] for r in recent[:2]] == ["b", "a"]
    assert all(r.last_accessed is None for r in recent[2:])  # never used: the least recently used
    assert [r.content[0] for r in bank.page_memories(sort="last_accessed", offset=3).memories] == ["a", "b"]


def test_filters_apply_before_the_page_is_cut(bank, five):
    page = bank.page_memories(types=["fact"], limit=1)
    assert page.total == 2 and len(page.memories) == 1
    assert bank.page_memories(session_id="s1").total == 4  # global ones and s1's own
    assert bank.page_memories(statuses=["pending"]).total == 0


def test_an_offset_past_the_end_is_an_empty_page_with_the_total(bank, five):
    page = bank.page_memories(offset=10, limit=3)
    assert page.memories == () and page.total == 5


@pytest.mark.parametrize(("arguments", "field"), [
    ({"sort": "importance!"}, "sort"), ({"sort": "id"}, "sort"), ({"sort": "--content"}, "sort"),
    ({"offset": -1}, "offset"), ({"offset": True}, "offset"), ({"offset": 1.5}, "offset"), ({"limit": 0}, "limit"),
    ({"statuses": "live"}, "statuses"),
])
def test_what_is_refused_names_its_field(bank, five, arguments, field):
    with pytest.raises(InvalidInputError) as refused:
        bank.page_memories(**arguments)
    assert refused.value.field == field


def test_the_sort_fields_are_fields_of_a_memory():
    from vecmem.models import MemoryRecord

    assert set(SORT_FIELDS) <= set(MemoryRecord.__dataclass_fields__)
    assert len(SORTS) == 2 * len(SORT_FIELDS)
