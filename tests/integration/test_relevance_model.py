"""The relevance floor and routing with the real model (all-MiniLM-L6-v2, English-only: its Chinese cosines carry
no signal), through the offline memory agent on embedded Chroma: what a conversation stores is found by a
question about it, in Chinese and in English; filler injects nothing; a coding request gets the fact it is about."""

from __future__ import annotations

import pytest

from vecmem import MemoryAgent, MemoryBank, Settings
from vecmem.storage.state.sessions import SessionStore

SAID = ["我在一家做跨境电商的公司上班，我们用的是 MySQL", "我女儿今年上小学三年级", "I moved to Berlin last spring",
        "I'm allergic to shellfish", "我每天骑自行车上班"]
# "Which city do I live in now?" shares no word with the Berlin memory but "I", which counted until the keyword
# side left function words out of queries; by meaning alone the English model gives it relevance 0.09, just under
# the 0.1 floor. A question with a word of the memory's:
ASKED = {"我们公司用什么数据库？": "MySQL", "我女儿几年级了？": "三年级", "Which city did I move to?": "Berlin",
         "Can you suggest a dinner recipe? Keep my allergy in mind.": "shellfish", "我怎么去上班？": "自行车"}
FILLER = ["thanks", "谢谢", "ok", "好的", "明白了", "thank you so much!", "got it", "嗯嗯", "收到"]


@pytest.fixture
def agent(tmp_path, real_embedder):
    bank = MemoryBank(Settings(home=tmp_path / "home", cold_start=False), embedder=real_embedder)
    agent = MemoryAgent(bank, SessionStore(tmp_path / "sessions.sqlite3"), model=None, session_id="s1")
    for message in SAID:
        assert agent.turn(message).writes[0].written, message
    yield agent
    bank.close()


def test_questions_inject_what_they_ask_about_and_filler_nothing(agent):
    for question, needle in ASKED.items():
        injected = [hit.content for hit in agent.turn(question).pack.memories]
        assert any(needle in text for text in injected[:2]), (question, injected)
    for filler in FILLER:
        pack = agent.turn(filler).pack
        assert pack.memories == () and pack.long_term == "", (filler, [hit.content for hit in pack.memories])


def test_a_coding_request_gets_the_fact_it_names(agent):
    result = agent.turn("帮我写一个查询 MySQL 的函数")
    assert result.types == ("preference", "instruction")
    assert any("MySQL" in hit.content and hit.type == "fact" for hit in result.pack.memories)
    assert not any("三年级" in hit.content or "shellfish" in hit.content for hit in result.pack.memories)
