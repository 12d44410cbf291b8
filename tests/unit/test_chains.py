"""The supersession graph as pure functions over records (bank/chains.py): no store, no bank."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import T0
from vecmem import ConflictError, MemoryRecord
from vecmem.bank import chains


def _record(memory_id: str, superseded_by: str | None = None, age_days: int = 0) -> MemoryRecord:
    return MemoryRecord(id=memory_id, content=f"memory {memory_id}", superseded_by=superseded_by,
                        created_at=T0 + timedelta(days=age_days))


def _graph(*records: MemoryRecord) -> dict[str, MemoryRecord]:
    return {record.id: record for record in records}


def test_successors_follow_the_links_and_stop_at_a_dangling_link_or_a_loop():
    linked = _graph(_record("a", "b"), _record("b", "c"), _record("c"))
    assert chains.successors(linked["a"], linked.get) == ["b", "c"]
    dangling = _graph(_record("a", "gone"))
    assert chains.successors(dangling["a"], dangling.get) == ["gone"]
    looped = _graph(_record("a", "b"), _record("b", "a"))
    assert chains.successors(looped["a"], looped.get) == ["b", "a"]


def test_superseding_links_the_old_memory_and_refuses_itself_and_cycles():
    graph = _graph(_record("old"), _record("new", "newest"), _record("newest"))
    assert chains.superseding(graph["old"], graph["new"], graph.get).superseded_by == "new"
    with pytest.raises(ConflictError, match="itself"):
        chains.superseding(graph["old"], graph["old"], graph.get)
    with pytest.raises(ConflictError, match="cycle"):
        chains.superseding(graph["newest"], graph["new"], graph.get)  # new already leads to newest


def test_restoration_makes_the_memory_live_and_supersedes_the_head_of_its_chain():
    graph = _graph(_record("a", "b"), _record("b", "c"), _record("c"))
    restored, head = chains.restoration(graph["a"], graph.get)
    assert restored.id == "a" and restored.superseded_by is None
    assert head.id == "c" and head.superseded_by == "a"
    with pytest.raises(ConflictError, match="nothing to restore"):
        chains.restoration(graph["c"], graph.get)


def test_restoring_past_a_dangling_link_changes_only_the_memory_itself():
    graph = _graph(_record("a", "gone"))
    assert [r.id for r in chains.restoration(graph["a"], graph.get)] == ["a"]


def test_replaced_first_puts_each_memory_before_its_successor_and_the_live_one_last():
    graph = _graph(_record("live", age_days=1), _record("middle", "live", age_days=5),
                   _record("first", "middle", age_days=9), _record("branch", "live", age_days=0))
    assert [r.id for r in chains.replaced_first(graph)] == ["branch", "first", "middle", "live"]


def test_replaced_first_keeps_every_memory_of_a_corrupt_cyclic_chain_oldest_first():
    graph = _graph(_record("x", "y", age_days=2), _record("y", "x", age_days=1), _record("z", "x", age_days=3))
    assert [r.id for r in chains.replaced_first(graph)] == ["z", "y", "x"]  # z leads in; the loop follows by age


def test_cycles_are_found_once_each_with_the_ids_on_them():
    graph = _graph(_record("a", "b"), _record("b", "a"), _record("c", "a"), _record("d", "d2"), _record("d2", "d"),
                   _record("e"))
    assert sorted(sorted(cycle) for cycle in chains.cycles(graph)) == [["a", "b"], ["d", "d2"]]
    assert chains.cycles(_graph(_record("a", "b"), _record("b"))) == []


# ------------------------------------------------------------------------------------------ scopes

def _scoped(memory_id: str, scope: str, superseded_by: str | None = None) -> MemoryRecord:
    return MemoryRecord(id=memory_id, content=f"memory {memory_id}", scope=scope, superseded_by=superseded_by,
                        created_at=T0)


@pytest.mark.parametrize(("older", "newer", "allowed"), [
    ("global", "global", True), ("s1", "global", True), ("s1", "s1", True),
    ("global", "s1", False), ("s1", "s2", False),
])
def test_a_memory_is_replaced_only_by_one_seen_wherever_it_is(older, newer, allowed):
    old, new = _scoped("old", older), _scoped("new", newer)
    assert chains.seen_wherever(old, new) is allowed
    graph = _graph(old, new)
    if allowed:
        assert chains.superseding(old, new, graph.get).superseded_by == "new"
    else:
        with pytest.raises(ConflictError, match="cannot replace old") as refused:
            chains.superseding(old, new, graph.get)
        assert "own session" in str(refused.value) and refused.value.field == "superseded_by"


def test_restoring_a_session_memory_leaves_a_global_head_live():
    graph = _graph(_scoped("note", "s1", "fact"), _scoped("fact", "global"))
    assert [(r.id, r.superseded_by) for r in chains.restoration(graph["note"], graph.get)] == [("note", None)]
    graph = _graph(_scoped("note", "s1", "newer"), _scoped("newer", "s1"))
    assert [(r.id, r.superseded_by) for r in chains.restoration(graph["note"], graph.get)] == [
        ("note", None), ("newer", "note")]


# ------------------------------------------------------------------------------------------ forgetting

def test_unlinking_makes_what_the_forgotten_memory_replaced_live_again():
    graph = _graph(_record("a", "gone"), _record("b", "gone"), _record("gone"), _record("other", "b"))
    replaced = [graph["a"], graph["b"]]
    assert [(r.id, r.superseded_by) for r in chains.unlinking(graph["gone"], replaced, graph.get)] == [
        ("a", None), ("b", None)]


def test_unlinking_hands_what_it_replaced_to_its_own_successor():
    graph = _graph(_record("a", "middle"), _record("middle", "live"), _record("live"))
    assert [(r.id, r.superseded_by) for r in chains.unlinking(graph["middle"], [graph["a"]], graph.get)] == [
        ("a", "live")]


def test_unlinking_never_hands_over_to_a_successor_that_may_not_replace():
    across = _graph(_scoped("global-old", "global", "s1-mid"), _scoped("s1-mid", "s1", "global-new"),
                    _scoped("global-new", "global"))
    assert chains.unlinking(across["s1-mid"], [across["global-old"]], across.get)[0].superseded_by == "global-new"
    scoped = _graph(_scoped("s1-old", "s1", "s1-mid"), _scoped("s1-mid", "s1", "s2-new"), _scoped("s2-new", "s2"))
    assert chains.unlinking(scoped["s1-mid"], [scoped["s1-old"]], scoped.get)[0].superseded_by is None
    dangling = _graph(_record("a", "mid"), _record("mid", "gone"))
    assert chains.unlinking(dangling["mid"], [dangling["a"]], dangling.get)[0].superseded_by is None
    looped = _graph(_record("a", "mid"), _record("mid", "a"))  # a damaged store: no self-link comes of it
    assert chains.unlinking(looped["mid"], [looped["a"]], looped.get)[0].superseded_by is None
