""""What did we discuss last time?" in a new session: the summaries and memories of the user's latest sessions,
the most recent first, through proactive recall (agent/earlier.py), in the chat and in the prompt it builds."""

from __future__ import annotations

import io
import time

import pytest

from vecmem.agent.earlier import SUMMARIES_PER_SESSION
from vecmem.agent.recall import recall
from vecmem.interfaces.chat import main
from vecmem.models import Provenance
from vecmem.storage.state.sessions import SessionStore

TRIP = ["我住在杭州西湖区", "我打算下个月去日本旅行"]  # two kept turns: one local summary (summary_every=2)
BILLING = ["I work at Acme on the billing team", "My favourite database is PostgreSQL"]
LAST_TIME = ["what did we discuss last time?", "上次我们聊到哪了？", "where did we leave off?", "我们上次说到哪儿了"]


@pytest.fixture
def agent(make_agent):
    return make_agent(summary_every=2, session="trip")


def talk(agent, session, messages):
    agent.switch_session(session)
    for message in messages:
        agent.turn(message)
    time.sleep(0.002)  # the session store orders sessions by their last turn's time


def summaries_of(agent, session):
    return [agent.bank.get(i, user_id=agent.user_id)
            for i in agent.sessions.counters(agent.user_id, session).local_summaries]


def recalled(agent, message):
    return [hit.record for hit in agent.turn(message).pack.memories]


@pytest.mark.parametrize("question", LAST_TIME)
def test_a_new_session_recalls_the_last_sessions_summaries_and_what_was_learnt_there(agent, question):
    talk(agent, "trip", TRIP)
    (summary,) = summaries_of(agent, "trip")
    assert summary.scope == "trip"  # unseen from another session but for proactive recall
    agent.switch_session("work")
    assert summary.id not in {hit.id for hit in agent.turn("推荐一本书").pack.memories}
    result = agent.turn(question)
    memories = [hit.record for hit in result.pack.memories]
    assert result.proactive and memories[0].id == summary.id
    contents = [m.content for m in memories]
    assert "用户住在杭州西湖区" in contents and "用户打算下个月去日本旅行" in contents
    assert "杭州" in result.pack.long_term and "日本" in result.pack.long_term


def test_the_most_recent_session_comes_first(agent):
    talk(agent, "trip", TRIP)
    talk(agent, "billing", BILLING)
    agent.switch_session("work")
    memories = recalled(agent, "what did we discuss last time?")
    (trip,), (billing,) = summaries_of(agent, "trip"), summaries_of(agent, "billing")
    ids = [m.id for m in memories]
    assert ids[0] == billing.id and ids.index(billing.id) < ids.index(trip.id)
    sessions = [m.provenance.session_id for m in memories if m.provenance is not None]
    assert sessions.index("billing") < sessions.index("trip")
    talk(agent, "trip", ["I prefer window seats on long flights"])  # trip is the latest again
    agent.switch_session("work")
    assert recalled(agent, "上次我们聊到哪了？")[0].provenance.session_id == "trip"


def test_sessions_that_left_nothing_do_not_crowd_out_those_that_did(agent):
    talk(agent, "trip", TRIP)
    talk(agent, "billing", BILLING)
    for session in ("hello", "work", "work2"):
        talk(agent, session, ["你好", "what did we discuss last time?"])
    agent.switch_session("work3")
    shown = {m.provenance.session_id for m in recalled(agent, "where did we leave off?") if m.provenance}
    assert {"trip", "billing"} <= shown


def test_only_the_newest_summaries_of_a_session_and_none_once_forgotten(agent):
    talk(agent, "trip", [*TRIP, *BILLING, "I prefer window seats on long flights", "我每天早上跑步"])
    made = summaries_of(agent, "trip")
    assert len(made) == 3 > SUMMARIES_PER_SESSION
    agent.switch_session("work")
    ids = [m.id for m in recalled(agent, "where did we leave off?")]
    assert ids[:2] == [made[2].id, made[1].id] and made[0].id not in ids
    agent.bank.forget(made[2].id, user_id=agent.user_id)
    agent.switch_session("work2")
    ids = [m.id for m in recalled(agent, "where did we leave off?")]
    assert ids[:2] == [made[1].id, made[0].id] and made[2].id not in ids


def test_another_sessions_own_memories_never_come_only_its_summary(agent):
    talk(agent, "trip", TRIP)
    bank = agent.bank
    # scoped to trip after its summary: no summary holds it, and the session's own memories stay there
    private = bank.add("用户这次会话在看去东京的机票", session_id="trip", memory_type="fact",
                       provenance=Provenance("trip", ("99",)))
    tagged = bank.add("a summary-looking note of the trip session", session_id="trip", memory_type="conclusion",
                      tags=["summary", "local"], provenance=Provenance("trip"))
    agent.switch_session("work")
    for question in LAST_TIME:
        ids = {m.id for m in recalled(agent, question)}
        assert private.id not in ids and tagged.id not in ids  # not one the session store recorded as its summary
        assert summaries_of(agent, "trip")[0].id in ids


def test_another_users_sessions_are_never_shown(agent, make_agent):
    talk(agent, "trip", TRIP)
    theirs = {m.id for m in agent.bank.list_memories(user_id=agent.user_id)}
    bob = make_agent(session="work", user="bob", bank=agent.bank)  # the same store and session file
    for question in LAST_TIME:
        result = bob.turn(question)
        assert result.proactive and not {hit.id for hit in result.pack.memories} & theirs
    talk(bob, "trip", ["我喜欢喝乌龙茶", "我养了一只猫叫年糕"])  # bob's own session of the same name
    bob.switch_session("work")
    shown = recalled(bob, "上次我们聊到哪了？")
    assert shown and all(m.user_id == "bob" for m in shown) and not {m.id for m in shown} & theirs
    assert "乌龙茶" in shown[0].content


def test_through_recall_and_build_context(agent):
    talk(agent, "trip", TRIP)
    talk(agent, "billing", BILLING)
    bank, sessions, user = agent.bank, agent.sessions, agent.user_id
    (billing,) = summaries_of(agent, "billing")
    for question in ("what did we discuss last time?", "我们上次说到哪儿了"):
        found = recall(bank, question, user_id=user, session_id="work", k=8, routes={}, sessions=sessions)
        pack = bank.build_context(question, user_id=user, session_id="work", hits=found.hits)
        assert found.proactive and pack.memories[0].id == billing.id
        assert "PostgreSQL" in pack.long_term and "杭州" in pack.long_term
        # without the session store, a new session has only what it sees (no global summary yet)
        alone = recall(bank, question, user_id=user, session_id="work", k=8, routes={})
        assert billing.id not in {hit.id for hit in alone.hits}


def test_the_current_session_is_not_an_earlier_one(agent):
    talk(agent, "trip", TRIP)
    memories = recalled(agent, "上次我们聊到哪了？")  # still in trip: its own summary, once
    ids = [m.id for m in memories]
    assert ids[0] == summaries_of(agent, "trip")[0].id and len(ids) == len(set(ids))


def test_recent_sessions_of_the_session_store(tmp_path):
    sessions = SessionStore(tmp_path / "sessions.sqlite3")
    for user, session in (("ann", "a"), ("ann", "b"), ("bob", "c"), ("ann", "a")):
        sessions.add_turn(user, session, "user", "hello")
    assert [s.session_id for s in sessions.recent_sessions("ann")] == ["a", "b"]
    assert [s.session_id for s in sessions.recent_sessions("ann", excluding="a")] == ["b"]
    assert [s.session_id for s in sessions.recent_sessions("ann", limit=1)] == ["a"]
    assert sessions.recent_sessions("ann", limit=0) == [] and sessions.recent_sessions("nobody") == []
    latest = sessions.recent_sessions("bob")[0]
    assert latest.session_id == "c" and latest.last_active.tzinfo is not None


def run_chat(bank, session, lines, user="default"):
    out, err = io.StringIO(), io.StringIO()
    code = main(["--session", session, "--user", user], stdin=io.StringIO("\n".join(lines) + "\n"), stdout=out,
                stderr=err, bank=bank, model=None)
    assert code == 0 and err.getvalue() == ""
    time.sleep(0.002)
    return out.getvalue()


def recalled_lines(out):
    return [line for line in out.splitlines() if line.startswith("  recalled (")]


def test_last_time_in_the_chat(make_bank, settings):
    bank = make_bank(settings=settings.with_changes(summary_every=2))
    run_chat(bank, "trip", [*TRIP, "这次会话我在看去东京的机票"])  # the third: the session's own, never summarised
    run_chat(bank, "billing", BILLING)
    run_chat(bank, "billing", ["我喜欢喝乌龙茶", "我养了一只猫叫年糕"], user="bob")  # another user, the latest session
    lines = recalled_lines(run_chat(bank, "work", LAST_TIME))
    assert len(lines) == len(LAST_TIME)
    for line in lines:
        assert line.startswith("  recalled (proactive recall")
        assert line.index("PostgreSQL") < line.index("杭州")  # billing, the latest session, first
        assert "东京" not in line and "乌龙茶" not in line and "年糕" not in line
    private = [m for m in bank.list_memories() if "东京" in m.content]
    assert private and all(m.scope == "trip" for m in private)
    for line in recalled_lines(run_chat(bank, "work", ["what did we discuss last time?", "上次我们聊到哪了？"],
                                        user="bob")):
        assert "乌龙茶" in line and "年糕" in line
        assert not any(word in line for word in ("PostgreSQL", "Acme", "杭州", "日本", "东京"))
