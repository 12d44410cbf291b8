"""What the memory agent puts in the prompt (agent/recall.py, the relevance floor): a scripted Chinese and English
conversation through the offline agent; routing that prefers types without hiding what the message is about;
where each memory came from (its provenance)."""

from __future__ import annotations

import pytest

from tests.conftest import WideFakeEmbedder
from vecmem.agent.recall import CODING_TOPICS, STRONG_RELEVANCE


@pytest.fixture
def agent(make_agent, make_bank, settings):
    # cold_start off: the three template memories are about answering, not what these tests look at
    bank = make_bank(settings=settings.with_changes(cold_start=False), embedder=WideFakeEmbedder())
    return make_agent(bank=bank)


CONVERSATION = {
    "我住在杭州西湖区": "用户住在杭州西湖区",
    "我们公司用的是 PostgreSQL": "用户的公司用的是 PostgreSQL",
    "我养了一只猫叫年糕": "用户养了一只猫叫年糕",
    "I work at Acme on the billing team": "The user works at Acme on the billing team.",
    "I have two kids and a dog named Rex": "The user has two kids and a dog named Rex.",
}


def injected(result) -> list[str]:
    return [hit.content for hit in result.pack.memories]


def test_a_conversation_is_stored_as_clean_statements_and_found_by_questions(agent):
    for said, statement in CONVERSATION.items():
        (write,) = agent.turn(said).writes
        assert [item.record.content for item in write.written] == [statement]
    stored = [r.content for r in agent.bank.list_memories() if "summary" not in r.tags]  # the fifth turn summarised
    assert sorted(stored) == sorted(CONVERSATION.values())
    asked = {"我住在哪里？": "用户住在杭州西湖区", "我的猫叫什么名字？": "用户养了一只猫叫年糕",
             "Where do I work?": "The user works at Acme on the billing team.",
             "What is my dog called?": "The user has two kids and a dog named Rex."}
    for question, statement in asked.items():
        result = agent.turn(question)
        assert injected(result)[0] == statement, (question, injected(result))
        assert result.pack.long_term.count("\n- ") == len(result.pack.memories)  # one dated line per memory
        assert f"] {statement}" in result.pack.long_term and result.pack.long_term.split("\n- ")[1][:4].isdigit()


@pytest.mark.parametrize("filler", ["thanks", "谢谢", "ok", "thank you!", "嗯嗯"])
def test_thanks_injects_nothing(agent, filler):
    for said in CONVERSATION:
        agent.turn(said)
    result = agent.turn(filler)
    assert result.pack.memories == () and result.pack.long_term == "" and result.pack.tokens["long_term"] == 0
    assert len(result.pack.below_floor_ids) >= 1  # retrieved, and held back by the floor


def test_a_coding_request_still_gets_the_fact_it_is_about(agent):
    for said in CONVERSATION:
        agent.turn(said)
    result = agent.turn("帮我写一个查询 PostgreSQL 的函数")
    assert result.intent == "coding" and result.types == ("preference", "instruction")  # routing still prefers
    assert "用户的公司用的是 PostgreSQL" in injected(result)
    postgres = next(hit for hit in result.pack.memories if "PostgreSQL" in hit.content)
    assert postgres.type == "fact" and postgres.relevance is not None and postgres.relevance >= STRONG_RELEVANCE
    assert not any("猫" in text or "Acme" in text for text in injected(result))  # what it is not about stays out


def test_a_coding_request_gets_the_users_coding_preferences_whatever_its_words(agent):
    for said in ("我喜欢用 TypeScript", "我养了一只猫叫年糕", "我喜欢喝乌龙茶", "以后都用 JavaScript 吧"):
        agent.turn(said)
    result = agent.turn("帮我写一个 sleep 函数")
    assert "用户要求以后都用 JavaScript" in injected(result)  # a preference about coding: JavaScript names a language
    assert not any(word in text for text in injected(result) for word in ("TypeScript", "乌龙茶", "猫"))
    for said in ("I like to go hiking on weekends", "I love poetry and a mocha in the morning"):
        assert agent.turn(said).writes[0].written[0].record.type == "preference"
    english = agent.turn("write me a retry helper")
    assert "用户要求以后都用 JavaScript" in injected(english)
    # Go, Poetry and Mocha name tools too, but a memory that has the word is seldom about them
    assert not any("hiking" in text or "poetry" in text for text in injected(english)), injected(english)
    names = set(CODING_TOPICS.split())
    assert {"javascript", "postgresql", "neovim", "pnpm", "代码"} <= names and not {"go", "poetry", "mocha", "c"} & names


def test_small_talk_routes_to_facts_without_hiding_a_preference_it_is_about(agent):
    agent.turn("我住在杭州西湖区")
    agent.turn("我喜欢喝乌龙茶")
    result = agent.turn("你好，最近怎么样，今天喝什么乌龙茶好")
    assert result.types == ("fact",) and "用户喜欢喝乌龙茶" in injected(result)


def test_each_memory_records_the_session_and_turn_it_came_from(agent):
    result = agent.turn("我住在杭州西湖区，我养了一只猫叫年糕")
    (write,) = result.writes
    records = [item.record for item in write.written]
    assert len(records) == 2
    for record in records:
        assert record.provenance is not None
        assert (record.provenance.session_id, record.provenance.message_ids) == ("s1", (str(write.turn_id),))
        assert agent.bank.get(record.id).provenance == record.provenance  # as stored
    agent.switch_session("s2")
    later = agent.turn("I work at Acme on the billing team").writes[0]
    assert later.written[0].record.provenance.session_id == "s2"
    assert later.written[0].record.provenance.message_ids == (str(later.turn_id),) != (str(write.turn_id),)
