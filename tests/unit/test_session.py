import pytest

from vecmem import InvalidInputError
from vecmem.storage.state.sessions import SessionStore, Task


@pytest.fixture
def store(tmp_path):
    return SessionStore(tmp_path / "sessions.sqlite3")


def test_turns_statuses_and_recent_exchanges(store):
    ids = []
    for i in range(4):
        ids.append(store.add_turn("u", "s", "user", f"question {i}"))
        store.add_turn("u", "s", "assistant", f"answer {i}", status="done")
    store.add_turn("u", "other", "user", "elsewhere")
    recent = store.recent_turns("u", "s", 2)
    assert [t.content for t in recent] == ["question 2", "answer 2", "question 3", "answer 3"]
    assert store.recent_turns("u", "s", 0) == []
    assert [t.content for t in store.pending_turns("u", "s")] == [f"question {i}" for i in range(4)]
    store.set_status(ids[0], "kept")
    assert len(store.pending_turns("u", "s")) == 3
    assert store.reply_to(ids[1]) == "answer 1"
    assert store.has_history("u") and not store.has_history("nobody")


def test_tasks(store):
    assert store.task("u", "s") is None
    with pytest.raises(InvalidInputError):
        store.add_to_task("u", "s", step="x")
    store.start_task("u", "s", "ship it")
    store.add_to_task("u", "s", step="wrote code")
    task = store.add_to_task("u", "s", result="tests pass")
    assert task == Task("ship it", ("wrote code",), ("tests pass",))
    assert "Steps done:\n- wrote code" in task.render() and "Intermediate results:\n- tests pass" in task.render()
    assert store.task("u", "other") is None
    assert store.finish_task("u", "s").goal == "ship it" and store.task("u", "s") is None
    with pytest.raises(InvalidInputError):
        store.start_task("u", "s", "   ")


def test_decisions_and_counters_survive_reopening(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    store = SessionStore(path)
    store.log_decision("u", "s", text="你好", kept=False, stage="rules", memory_type=None, reason="filler")
    store.log_decision("u", "s2", text="我是工程师", kept=True, stage="lexicon", memory_type="fact", reason="cue")
    assert store.note_kept_turn("u", "s", ["m1", "m2"]) == 1
    assert store.note_kept_turn("u", "s", ["m2", "m3"]) == 2
    assert store.window_memories("u", "s") == ["m1", "m2", "m3"]
    assert store.note_local_summary("u", "s", "sum1") == 1
    assert store.window_memories("u", "s") == []
    store.record_hits("u", "s", injected=4, used=1)
    reopened = SessionStore(path)
    assert [d.text for d in reopened.decisions("u")] == ["你好", "我是工程师"]
    assert [d.text for d in reopened.decisions("u", "s")] == ["你好"]
    counters = reopened.counters("u", "s")
    assert counters.kept_turns == 2 and counters.local_summaries == ("sum1",) and counters.hit_rate == 0.25
    assert reopened.counters("u", "new").hit_rate is None
