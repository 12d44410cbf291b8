"""Offline extraction writes what a careful note-taker would: whole third-person statements, one per fact, no
questions or requests, an instruction as an instruction, tags that name the topic, and a length rule that counts
information (issue 16, item 2)."""

import pytest

from vecmem.agent import rules
from vecmem.agent.writing.extract import EMPHASIS_IMPORTANCE, FACT_IMPORTANCE, PREFERENCE_IMPORTANCE, Extractor
from vecmem.agent.writing.gate import WriteGate
from vecmem.agent.writing.statements import clauses, statements


def contents(message):
    return [statement.content for statement in statements(message)]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("我住在杭州", ["用户住在杭州"]),
        ("I work at Alibaba Cloud", ["The user works at Alibaba Cloud."]),
        # every clause rewritten, never only the first; same slot (operating system) -> one memory
        ("我不用 Windows，我用 macOS 和 zsh", ["用户不用 Windows，用户用 macOS 和 zsh"]),
        ("I don't use Windows, I use macOS", ["The user doesn't use Windows, the user uses macOS."]),
        # one memory per fact: name, employer, city
        ("I'm Li Wei, I work at Alibaba Cloud and I live in Hangzhou",
         ["The user's name is Li Wei.", "The user works at Alibaba Cloud.", "The user lives in Hangzhou."]),
        ("我是李伟，在阿里云工作，住在杭州", ["用户是李伟", "用户在阿里云工作", "用户住在杭州"]),
        ("I work at Acme and live in Berlin", ["The user works at Acme.", "The user lives in Berlin."]),
        # a continuation naming no topic of its own elaborates the clause before it
        ("我是后端工程师，有五年经验", ["用户是后端工程师，有五年经验"]),
        ("我住在杭州，离西湖很近", ["用户住在杭州，离西湖很近"]),
        ("I use Python, Go and Rust", ["The user uses Python, Go and Rust."]),
        # pronouns inside the clause too, and the verb after each "I"
        ("I use zsh because I like it", ["The user uses zsh because the user likes it."]),
        ("My sister and I run a bakery", ["The user's sister and the user run a bakery."]),
        ("平时我用 Vim 写代码", ["平时用户用 Vim 写代码"]),
        ("我们公司用的是 PostgreSQL", ["用户的公司用的是 PostgreSQL"]),
        # a directive is an instruction, written as one
        ("以后都用 pnpm", ["用户要求以后都用 pnpm"]),
        ("from now on answer in Chinese", ["The user wants the assistant to answer in Chinese from now on."]),
        ("From now on, use pnpm", ["The user wants the assistant to use pnpm from now on."]),
        ("请用中文回答我", ["用户要求用中文回答"]),
        ("我希望你以后用中文回答", ["用户希望助手以后用中文回答"]),  # in an instruction, "you" is the assistant
        ("Don't use emoji in replies", ["The user wants the assistant not to use emoji in replies."]),
        # an elided subject is the speaker's
        ("switched to bun, no longer pnpm", ["The user switched to bun, no longer pnpm."]),
        # statement kept, softening tag or trailing question dropped
        ("I like green tea, you know?", ["The user likes green tea."]),
        ("我住在杭州，你呢？", ["用户住在杭州"]),
        ("帮我写个查询 PostgreSQL 的函数，我们公司用的是 PostgreSQL", ["用户的公司用的是 PostgreSQL"]),
        ("Hey Gus, I went hiking with my kids", ["The user went hiking with the user's kids."]),
        ("是的，我记得那次比赛", ["用户记得那次比赛"]),  # the acknowledgement lends no subject and is not kept
        ("我不想分享，因为那是我的生日礼物", ["用户不想分享，因为那是用户的生日礼物"]),  # a reason stays with its clause
        ("我们周末去爬山了", ["用户和其他人周末去爬山了"]),  # 我们 away from work is not a team
        ("Actually we moved to Munich", ["Actually the user and others moved to Munich."]),
    ],
)
def test_whole_statements_in_the_third_person(message, expected):
    assert contents(message) == expected


@pytest.mark.parametrize(
    "message",
    ["我住在杭州", "以后都用 JavaScript 吧", "结论：问题出在连接池没有释放", "我们在重构检索接口", "这次我们在排查内存泄漏",
     "记住，我对花生过敏", "其实我更喜欢 Go", "我不用 Windows，我用 macOS 和 zsh"],
)
def test_no_bare_prefix_is_glued_to_first_person_text(message):
    for content in contents(message):
        assert not content.startswith("用户：") and "我" not in content


@pytest.mark.parametrize(
    "message",
    ["what package manager should I use?", "Actually I'm not sure, what package manager should I use?",
     "Should I use pnpm or yarn", "帮我写一个函数", "能不能推荐一个好用的编辑器？", "推荐一本关于历史的书", "用什么包管理器好",
     "我应该用哪个数据库", "write me a sleep function", "Can you explain closures?", "I need help with my resume",
     "Could you recommend a good editor", "你觉得 Rust 怎么样？", "这个问题怎么解决", "我在哪里工作？", "I'm not sure yet",
     "I wonder if I should learn Go", "用 Python 写一个爬虫"],
)
def test_questions_and_requests_are_never_stored(message):
    assert statements(message) == []
    assert not WriteGate().judge(message).keep


@pytest.mark.parametrize(
    ("message", "memory_type"),
    [("以后都用 pnpm", "instruction"), ("from now on answer in Chinese", "instruction"),
     ("以后写代码都加类型注解", "instruction"), ("Always explain with an example", "instruction"),
     ("Let's use bun from now on", "instruction"), ("我以后都用 pnpm", "preference"),
     ("I switched to bun", "preference"), ("我住在杭州", "fact"), ("The fix was a missing index", "conclusion")],
)
def test_standing_directives_are_instructions_and_habits_preferences(message, memory_type):
    (statement,) = statements(message)
    assert statement.memory_type == memory_type
    assert WriteGate().judge(message).memory_type == memory_type


@pytest.mark.parametrize(
    ("message", "memory_type"),
    [("是呀，我还给它画了个特别大的轮子", "fact"),  # 特别 is not 别 ("don't")
     ("我觉得我们家的猫最近有点奇怪，它总是躲在角落里", None),  # the cat's habit, and an opinion
     ("嗯，赢了就特别开心！", None), ("I always walk to work", "fact"), ("你以后回答要简洁", "instruction"),
     ("I want you to always reply in Chinese", "instruction")],
)
def test_instruction_cues_inside_a_statement_do_not_make_it_an_instruction(message, memory_type):
    assert [s.memory_type for s in statements(message)] == ([memory_type] if memory_type else [])


@pytest.mark.parametrize(
    ("message", "wanted", "unwanted"),
    [
        ("我喜欢用 TypeScript 写前端", {"typescript", "前端"}, set()),
        ("As a frontend developer, I prefer TypeScript", {"typescript", "frontend developer"}, {"as"}),
        ("Actually, I live in Hangzhou now", {"hangzhou", "residence"}, {"actually", "now", "live"}),
        ("I work at Alibaba Cloud", {"alibaba cloud", "employer"}, {"work", "the", "user"}),
        ("用户每天早上跑步", {"跑步"}, {"用户", "每天"}),
        ("我现在用Go写后端", {"go", "后端", "programming language"}, set()),
    ],
)
def test_tags_name_the_topic_lowercase_without_stop_words(message, wanted, unwanted):
    (statement,) = statements(message) or [None]
    text = statement.content if statement else message
    tags = rules.keyword_tags(text)
    assert wanted <= set(tags), tags
    assert not unwanted & set(tags), tags
    assert all(tag == tag.lower() for tag in tags)


class TestLengthCountsInformation:
    @pytest.mark.parametrize("message", ["我住在杭州", "我叫李伟", "我用Go", "I use vim"])
    def test_a_short_statement_is_kept(self, message):
        decision = WriteGate().judge(message)
        assert decision.keep, decision.reason

    @pytest.mark.parametrize("message", ["你好", "嗯嗯", "ok", "thanks", "好的", "我是猫", "我饿了", "我很累", "I'm so excited!",
                                         "I'm doing well, thanks"])
    def test_filler_and_statements_without_information_go(self, message):
        assert not WriteGate().judge(message).keep

    def test_units(self):
        assert rules.information_units("我住在杭州") == 3  # 住 杭 州
        assert rules.information_units("我是猫") == 1
        assert rules.information_units("I'm so excited") == 1
        assert rules.content_problem("我住在杭州") is None
        assert "shorter than 6" in rules.content_problem("我是猫")


def test_clauses_keep_what_does_not_stand_alone_with_the_clause_before():
    assert [c.text for c in clauses("我喜欢 TypeScript，因为类型安全")] == ["我喜欢 TypeScript，因为类型安全"]
    assert [(c.text, c.elided) for c in clauses("我叫王芳，在字节跳动做前端开发")] == [
        ("我叫王芳", False), ("在字节跳动做前端开发", True)]


def test_the_extractor_offline_gives_candidates_with_the_rubric():
    gate = WriteGate()
    message = "记住，我一定不吃香菜。我喜欢喝乌龙茶。我是产品经理，这次在排查支付系统的内存泄漏"
    candidates = Extractor().extract(message, None, gate.judge(message), [])
    by_content = {c.content: c for c in candidates}
    assert list(by_content) == ["用户一定不吃香菜", "用户喜欢喝乌龙茶", "用户是产品经理", "用户这次在排查支付系统的内存泄漏"]
    assert by_content["用户一定不吃香菜"].importance == EMPHASIS_IMPORTANCE
    assert by_content["用户喜欢喝乌龙茶"].importance == PREFERENCE_IMPORTANCE
    assert by_content["用户是产品经理"].importance == FACT_IMPORTANCE
    assert by_content["用户喜欢喝乌龙茶"].context.rstrip("。") == "我喜欢喝乌龙茶"  # the user's own words, for keyword search
    assert "乌龙茶" in by_content["用户喜欢喝乌龙茶"].tags
    assert [c.session_scoped for c in candidates] == [False, False, False, True]  # "这次": the task at hand
