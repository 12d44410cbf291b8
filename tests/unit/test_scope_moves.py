"""Moving a memory between global and a session (``update(scope=...)``, chains.moving, edits.edit): it keeps its id,
its revisions move with it, a supersession link that the move would break refuses it (nothing is written), and
what depends on scope (search, dedupe of a re-added statement, erasing a session) follows the memory."""

import pytest

from vecmem import ConflictError, InvalidInputError
from vecmem.bank import chains

pytestmark = pytest.mark.both_stores  # scope is a field Chroma filters on: embedded, and a `chroma run` server


def test_a_move_keeps_the_id_and_changes_where_it_is_seen(bank):
    memory = bank.add("The user is debugging the billing export")
    moved = bank.update(memory.id, scope="work")
    assert moved.id == memory.id and moved.scope == "work" and moved.version == memory.version + 1
    assert bank.search("billing export", 3) == []  # no longer global
    assert [hit.id for hit in bank.search("billing export", 3, session_id="work")] == [memory.id]
    assert bank.search("billing export", 3, session_id="home") == []
    assert [r.id for r in bank.history(memory.id)] == [memory.id]  # where it is seen is not what it says
    back = bank.update(memory.id, scope="global")
    assert back.session_id is None and [hit.id for hit in bank.search("billing export", 3)] == [memory.id]


def test_revisions_move_with_their_memory_and_a_session_is_erased_whole(bank, clock):
    memory = bank.add("The user likes TypeScript", memory_type="preference")
    clock.advance(hours=1)
    bank.update(memory.id, content="The user likes Rust")
    clock.advance(hours=1)
    moved = bank.update(memory.id, content="The user likes Zig", scope="work")
    history = bank.history(memory.id)
    assert [r.content for r in history] == ["The user likes TypeScript", "The user likes Rust", "The user likes Zig"]
    assert {r.scope for r in history} == {"work"} and moved.scope == "work"
    bank.restore(history[0].id)  # reverts what it says, not where it is
    assert bank.get(memory.id).content == "The user likes TypeScript" and bank.get(memory.id).scope == "work"
    assert bank.forget_all("default", session_id="work") == 4  # the memory and its three earlier versions
    assert list(bank.export()) == []


def test_a_revision_left_in_another_scope_goes_with_its_memory_and_is_never_made_live(bank):
    memory = bank.add("The user likes TypeScript")
    bank.update(memory.id, content="The user likes Rust")
    (revision,) = [r for r in bank.history(memory.id) if chains.revision_number(r) is not None]
    # as a crash half-way through a move could leave it: the memory in the session, its revision still global
    stored = bank.get(memory.id)
    bank.add_records([stored.with_changes(scope="work")], overwrite=True)
    assert bank.get(revision.id).scope == "global"
    assert bank.forget_all("default", session_id="work") == 2
    assert list(bank.export()) == []


def test_a_memory_that_replaced_a_global_one_stays_global(bank):
    old = bank.add("The user writes TypeScript", memory_type="preference")
    new = bank.add("The user writes JavaScript now", memory_type="preference")
    bank.supersede(old.id, new.id)
    with pytest.raises(ConflictError) as refused:
        bank.update(new.id, scope="work", content="The user writes Elm now")
    assert refused.value.field == "scope" and old.id in str(refused.value)
    assert bank.get(new.id) == new.with_changes(version=new.version)  # nothing written, no revision either
    assert [r.id for r in bank.history(new.id)] == [old.id, new.id]


def test_a_replaced_memory_moves_only_where_its_successor_is_seen(bank):
    old = bank.add("Use tabs in this repo", session_id="work")
    newer = bank.add("Use spaces in this repo", session_id="work")
    bank.supersede(old.id, newer.id)
    with pytest.raises(ConflictError) as refused:
        bank.update(old.id, scope="global")  # its successor, a work memory, would not be seen everywhere
    assert refused.value.field == "scope" and newer.id in str(refused.value)
    bank.update(newer.id, scope="global")  # a global memory may replace one of any session
    assert bank.update(old.id, scope="home").scope == "home"
    assert bank.get(old.id).superseded_by == newer.id


def test_a_memory_of_a_session_that_replaced_another_of_it_may_become_global(bank):
    old = bank.add("Deploy on Fridays", session_id="work")
    newer = bank.add("Never deploy on Fridays", session_id="work")
    bank.supersede(old.id, newer.id)
    assert bank.update(newer.id, scope="global").scope == "global"
    with pytest.raises(ConflictError):
        bank.update(newer.id, scope="home")  # it replaced a memory of work, which home's memories cannot
    assert bank.get(newer.id).scope == "global"


def test_the_same_statement_added_where_a_memory_moved_from_is_a_new_memory_then_a_dedupe(bank):
    memory = bank.add("The user prefers green tea")
    bank.update(memory.id, scope="work")
    again = bank.add("The user prefers green tea")
    assert again.id != memory.id and again.scope == "global"
    assert bank.add("The user prefers green tea").id == again.id
    # stored as given, dedupe goes by the derived id, as after an edit: the moved memory's id came from where it
    # was added
    assert bank.add("The user prefers green tea", session_id="work", resolve=False).id not in (memory.id, again.id)
    # resolved (the default), the statement is recognised where the moved memory now is
    assert bank.remember("The user prefers green tea", session_id="work").action == "unchanged"


@pytest.mark.parametrize("scope", ["", " work", "a/b\n"])
def test_a_scope_that_is_not_an_identifier_is_refused(bank, scope):
    memory = bank.add("The user prefers green tea")
    with pytest.raises(InvalidInputError) as refused:
        bank.update(memory.id, scope=scope)
    assert refused.value.field == "scope" and bank.get(memory.id).scope == "global"


def test_a_move_built_on_an_older_version_is_refused(bank):
    memory = bank.add("The user prefers green tea")
    bank.update(memory.id, importance=0.9)
    with pytest.raises(ConflictError) as refused:
        bank.update(memory.id, scope="work", expected_version=memory.version)
    assert refused.value.current_version == memory.version + 1 and bank.get(memory.id).scope == "global"
