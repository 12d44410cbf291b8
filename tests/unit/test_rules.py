"""The deterministic rules, on tables of real Chinese and English messages."""

import pytest

from vecmem.agent import rules
from vecmem.agent.writing.gate import WriteGate
from vecmem.agent.writing.statements import statements

FILLER = ["你好", "谢谢", "嗯嗯", "好的", "ok", "OK!", "thanks", "Thank you!", "lol", "好的谢谢", "ok thanks!",
          "嗯嗯，好的", "哈哈哈", "收到", "got it", "👍", "👍👍🎉", "。。。", "？？", "...", "!!!"]

# (message, kept, type when kept) — offline, the lexicon judges what the rules let through
GATE_TABLE = [
    ("我喜欢用 TypeScript", True, "preference"),
    ("以后都用 JavaScript 吧", True, "instruction"),  # a standing directive to the assistant
    ("我以后都用 JavaScript", True, "preference"),  # the user's own habit
    ("我不喜欢过长的解释", True, "preference"),
    ("请用中文回答我", True, "instruction"),
    ("以后回答不要用表情符号", True, "instruction"),
    ("我是后端工程师，有五年经验", True, "fact"),
    ("我的操作系统是 macOS", True, "fact"),
    ("记住，我对花生过敏", True, "fact"),
    ("结论：问题出在连接池没有释放", True, "conclusion"),
    ("原来是时区配置错了", True, "conclusion"),
    ("帮我写一个 sleep 函数", False, None),
    ("这个问题怎么解决？", False, None),
    ("今天天气不错啊", False, None),
    ("I prefer tabs over spaces", True, "preference"),
    ("I don't like long explanations", True, "preference"),
    ("Let's use pnpm from now on", True, "instruction"),
    ("I switched to bun, no longer pnpm", True, "preference"),
    ("Always answer in English", True, "instruction"),
    ("Never put API keys in code examples", True, "instruction"),
    ("I'm a data scientist at Acme", True, "fact"),
    ("My cat is called Miso", True, "fact"),
    ("The fix was to add a retry with backoff", True, "conclusion"),
    ("turns out the bug was a race condition", True, "conclusion"),
    ("write me a sleep function", False, None),
    ("what is async/await?", False, None),
    ("how do I see running processes?", False, None),
    ("can you explain closures?", False, None),
    ("I think so too", False, None),
    ("which keyboard do I use?", False, None),  # asks about the user; the "I use" inside is not a statement
    ("what do I work on in Berlin?", False, None),
    ("我在哪里工作？", False, None),
    ("我喜欢什么颜色？", False, None),
    ("我们上次说到哪儿了", False, None),  # asks where things stand, without a question mark
    ("上次我们聊到哪了", False, None),
    ("where did we leave off", False, None),
    ("I like green tea, you know?", True, "preference"),
]


@pytest.mark.parametrize("message", FILLER)
def test_filler_never_passes_the_rules(message):
    decision = WriteGate().judge(message)
    assert not decision.keep and decision.stage == "rules" and decision.reason


def test_short_messages_are_dropped_by_length():
    decision = WriteGate().judge("我是猫")
    assert not decision.keep and "shorter than 6" in decision.reason
    assert WriteGate(min_chars=2).judge("我是后端").keep


@pytest.mark.parametrize(("message", "kept", "memory_type"), GATE_TABLE)
def test_gate_table(message, kept, memory_type):
    decision = WriteGate().judge(message)
    assert decision.keep is kept, decision.reason
    assert decision.memory_type == memory_type
    assert decision.stage == "lexicon" and decision.reason


@pytest.mark.parametrize(
    ("sentence", "rewritten"),
    [
        ("我喜欢用 TypeScript", "用户喜欢用 TypeScript"),
        ("以后都用 JavaScript 吧", "用户要求以后都用 JavaScript"),
        ("记住，我对花生过敏", "用户对花生过敏"),
        ("我们团队用 Go", "用户的团队用 Go"),
        ("我们在重构检索接口", "用户和团队在重构检索接口"),
        ("I prefer tabs over spaces", "The user prefers tabs over spaces."),
        ("I'm a data scientist at Acme", "The user is a data scientist at Acme."),
        ("I don't like long explanations", "The user doesn't like long explanations."),
        ("I usually work late at night", "The user usually works late at night."),
        ("My cat is called Miso", "The user's cat is called Miso."),
        ("Remember that my deadline is Friday", "The user's deadline is Friday."),
        ("Never put keys in code", "The user wants the assistant to never put keys in code."),
    ],
)
def test_rewrite_in_third_person(sentence, rewritten):
    assert [s.content for s in statements(sentence)] == [rewritten]


def test_change_cues_and_topic_slots():
    assert rules.has_change_cue("以后都用 JavaScript 吧") and rules.has_change_cue("I switched to Neovim")
    assert not rules.has_change_cue("我喜欢用 TypeScript")
    assert rules.topic_slots("我喜欢用 TypeScript") == {"programming language"}
    assert rules.topic_slots("以后都用 JavaScript 吧") == {"programming language"}
    assert rules.topic_slots("uses VS Code on macOS with zsh") == {"editor", "operating system", "shell"}
    assert rules.topic_slots("java") and not rules.topic_slots("javascripting is fun")
    assert rules.topic_slots("C++ and C#") == {"programming language"}


@pytest.mark.parametrize(
    ("query", "intent"),
    [
        ("帮我写一个 sleep 函数", "coding"),
        ("write me a sleep function", "coding"),
        ("这段代码报错了", "coding"),
        ("how do I fix this TypeError exception", "coding"),
        ("你好，最近怎么样", "small_talk"),
        ("how are you today?", "small_talk"),
        ("what is the capital of France?", "general"),
        ("推荐一本书", "general"),
    ],
)
def test_query_intent(query, intent):
    assert rules.query_intent(query) == intent


@pytest.mark.parametrize(
    ("query", "past"),
    [
        ("上次那个方案还能用吗", True),
        ("按我之前说的来", True),
        ("as I said before, keep it short", True),
        ("what we discussed last time", True),
        ("what did we discuss last time?", True),
        ("where did we leave off?", True),
        ("Where were we?", True),
        ("let's pick up where we stopped in our last session", True),
        ("上次我们聊到哪了？", True),
        ("我们上次说到哪儿了", True),
        ("上回的事情办完了吗", True),
        ("接着上一次的对话", True),
        ("我们聊到哪了", True),
        ("where is the config file?", False),
        ("这个函数做什么", False),
        ("写一个排序函数", False),
        ("what is async/await?", False),
    ],
)
def test_points_to_the_past(query, past):
    assert rules.points_to_past(query) is past


def test_text_units_count_chinese_characters_and_words():
    assert rules.text_units("用户喜欢 TypeScript and Go") == 7
    assert rules.cut_to_units("一二三四五 six seven", 6) == "一二三四五 six"
    assert rules.cut_to_units("short", 10) == "short"


def test_keyword_tags():
    assert rules.keyword_tags("用户以后都用 JavaScript 写 Node.js 服务") == ["javascript", "node.js", "服务",
                                                                       "programming language"]
