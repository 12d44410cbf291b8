"""Deterministic language rules (Chinese and English) that make every memory feature work without a model.

Used by the write gate (is this filler? what kind of statement is it?), extraction (type, importance, scope),
type routing and proactive recall. Everything here is a pure function of the text, so it is tested with tables
of real messages. Splitting a message into clauses and rewriting them in the third person is ``statements.py``;
topic slots, change cues and tags are ``topics.py`` (re-exported here).

Classification of one clause, first match wins:
1. a request to the assistant for a one-off task ("帮我写一个函数", "能不能推荐…", "write me a sleep function")
   or a question ("what package manager should I use?", "用什么包管理器好") -> not a memory;
2. a conclusion cue ("结论", "原来", "turns out", "the fix was") -> conclusion;
3. an instruction cue aimed at how the assistant answers ("以后回答…", "请用中文", "please reply…") -> instruction;
4. a standing directive without a first-person subject ("以后都用 pnpm", "from now on, use pnpm",
   "let's use bun") -> instruction; with one ("我以后都用 pnpm") it is the user's own habit -> preference;
5. a preference cue, including a switch of tool or language ("我喜欢", "改用 X", "I prefer") -> preference;
6. any other instruction cue ("不要…", "always…", "never…") -> instruction;
7. a first-person fact cue ("我是", "我的", "I work", "my …") -> fact;
8. nothing: not a memory.
A one-off request stays a request whatever it holds; with a standing cue ("以后写代码都加类型注解", "always
explain with an example") it is an instruction.

Length counts information, not characters (``information_units``: Chinese characters other than pronouns and
particles, other words other than function words): a statement needs at least ``MIN_INFORMATION`` of them.
"我住在杭州" (住, 杭, 州) is kept though it is under ``min_chars`` characters (``content_problem``); "我是猫" (猫),
"我饿了" (饿), "I'm so excited" (excited) and "I'm doing well" (none) are not; 你好, 嗯嗯, ok, thanks and 好的
are filler at any length. One English word can say who the user is as several Chinese characters do ("I'm a
nurse", "I am vegetarian" beside 我是护士, 我是素食者): such an identity is a whole fact (``is_identity``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from vecmem.agent.writing.claims import looks_like_code, times
from vecmem.agent.writing.topics import has_change_cue, keyword_tags, topic_slots

# the one planted-instruction rule, which every write path applies (intake.py); re-exported for the agent
from vecmem.bank.intake import looks_like_injection

__all__ = [
    "Classification",
    "MIN_INFORMATION",
    "NO_CUE",
    "classify",
    "content_problem",
    "information_units",
    "work_statement",
    "is_imperative",
    "is_identity",
    "is_emphatic",
    "is_filler",
    "is_question",
    "is_request",
    "is_task_context",
    "has_change_cue",
    "has_first_person",
    "topic_slots",
    "query_intent",
    "points_to_past",
    "keyword_tags",
    "text_units",
    "cut_to_units",
    "looks_like_injection",
    "REMEMBER_PREFIX",
]


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


# ---------------------------------------------------------------------------------------------- filler

FILLER = {
    # Chinese greetings, thanks and acknowledgements
    "你好", "您好", "你好呀", "嗨", "哈喽", "早", "早上好", "中午好", "下午好", "晚上好", "晚安", "再见", "拜拜",
    "谢谢", "谢谢你", "谢谢您", "多谢", "感谢", "辛苦了", "好的", "好", "好吧", "好滴", "好嘞", "行", "行吧", "可以",
    "没问题", "嗯", "嗯嗯", "嗯嗯嗯", "哦", "哦哦", "噢", "啊", "哈", "哈哈", "哈哈哈", "呵呵", "嘿嘿", "收到",
    "明白", "明白了", "知道了", "了解", "懂了", "对", "对的", "是的", "是", "不是", "没事", "不客气",
    # English
    "ok", "okay", "k", "kk", "thanks", "thank you", "thank u", "thx", "ty", "tysm", "lol", "lmao", "haha", "hahaha",
    "hi", "hello", "hey", "yo", "bye", "goodbye", "good night", "good morning", "yes", "yeah", "yep", "yup", "no",
    "nope", "sure", "cool", "nice", "great", "awesome", "got it", "i see", "right", "fine", "alright", "all right",
    "sounds good", "no problem", "np", "welcome", "you're welcome", "cheers", "hmm", "hm", "uh", "um", "oh", "ah",
}
_FILLER_BY_LENGTH = sorted(FILLER, key=len, reverse=True)


def _strip_symbols(text: str) -> str:
    """Letters, digits and spaces only: punctuation, symbols and emoji removed."""
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if category[0] in "LN":
            kept.append(ch)
        elif category[0] == "Z" or ch.isspace():
            kept.append(" ")
    return " ".join("".join(kept).split())


def is_filler(text: str) -> bool:
    """True when the text is made only of filler words ("好的谢谢", "ok thanks!", "嗯嗯 好")."""
    rest = _strip_symbols(text).casefold()
    while rest:
        rest = rest.strip()
        for word in _FILLER_BY_LENGTH:
            if rest.startswith(word) and (len(rest) == len(word) or not rest[len(word)].isascii()
                                          or not rest[len(word)].isalnum() or not word.isascii()):
                rest = rest[len(word):]
                break
        else:
            return False
    return True


MIN_INFORMATION = 2
# what carries no information on its own: pronouns, particles, the copula, measure words
_FUNCTION_CHARS = frozenset("我你您他她它们的地得了着过是在吧啊呀呢吗嘛啦哦嗯也都就很还个这那")
_FUNCTION_WORDS = frozenset("""
i i'm i've i'd i'll me my we we're us our you your it it's that that's this is am are was were be been being
do does did doing have has had a an the to of in on at for with about and or but so too very really just also
still now here there well good great fine ok okay yes yeah no not oh wow thanks thank pretty quite gonna going
""".split())
_UNIT = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\s\u3400-\u9fff\uf900-\ufaff]+")


_INFORMATION_UNIT = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[a-z0-9]+(?:'[a-z]+)?")


def information_units(text: str) -> int:
    """Content units: Chinese characters other than pronouns and particles, and other words not stop words."""
    units = _INFORMATION_UNIT.findall(text.casefold().replace("’", "'"))
    return sum(1 for unit in units if unit not in _FUNCTION_CHARS and unit not in _FUNCTION_WORDS)


# "I'm a nurse", "I am vegetarian": who the user is, in one English word where Chinese takes several characters
# (我是护士, 我是素食者), so a whole fact however few units it counts; a passing state ("I'm tired", "I'm so
# excited", "I'm doing well") is not one
_IDENTITY = re.compile(r"^(?:i'm|i am|i have|i've got|i own)\s+(?:(an?|two|three|four|\d+)\s+)?([a-z][a-z-]*[a-z])\s*[.!。！]*$",
                       re.IGNORECASE)
_DEGREE = frozenset("so very really too quite pretty kinda sorta bit little such just".split())
_PASSING_STATES = frozenset("""
happy sad sorry fine sure ready busy hungry thirsty sick ill late early back here there home ok okay glad angry
upset afraid scared awake asleep alone free well good great bad cold hot warm lost done full new right wrong
curious nervous anxious lonely sleepy weak strong calm mad fun funny serious kidding joking in out off on up down
""".split())
# the lasting statuses that look like passing ones (a participle)
_LASTING_PARTICIPLES = frozenset("""
married divorced engaged separated widowed retired unemployed employed self-employed disabled vaccinated
left-handed right-handed colorblind color-blind colour-blind
""".split())


def is_identity(text: str) -> bool:
    """Whether the text says, in a word, who or what the user is: "I'm a nurse", "I am vegetarian", "I'm
    married"; not a passing state ("I'm tired", "I'm so excited") nor a name ("I'm Li")."""
    found = _IDENTITY.match(text.strip().replace("’", "'"))
    if found is None:
        return False
    article, word = found.group(1), found.group(2).casefold()
    if word in _DEGREE or word in _FUNCTION_WORDS or word in _PASSING_STATES:
        return False
    if article:  # "a nurse", "an engineer": a noun says what the user is
        return True
    if word in _LASTING_PARTICIPLES:
        return True
    return not word.endswith(("ed", "ing")) and found.group(2)[0].islower()


def content_problem(
    text: str, *, min_chars: int = 6, is_statement: Callable[[str], bool] | None = None
) -> str | None:
    """Why a message is not worth judging at all, or None. The first stage of the write gate.
    ``is_statement`` judges a short message (default: ``classify`` finds a type; the gate asks statements.py)."""
    stripped = text.strip()
    if not _strip_symbols(stripped):
        return "only punctuation or emoji"
    if is_filler(stripped):
        return "pure filler (greeting, thanks or acknowledgement)"
    if len(stripped) < min_chars:
        # short is fine when it says something: "我住在杭州" is five characters and a fact worth keeping
        states = is_statement(stripped) if is_statement is not None else classify(stripped).memory_type is not None
        if not states:
            return f"shorter than {min_chars} characters and no statement"
        if information_units(stripped) < MIN_INFORMATION and not is_identity(stripped):
            return f"shorter than {min_chars} characters and fewer than {MIN_INFORMATION} units of information"
    return None


# ---------------------------------------------------------------------------------------------- cues

_CONCLUSION = _any(
    r"结论", r"总结(?:一下)?[:：]", r"原来是", r"原来", r"问题出在", r"根因", r"根本原因", r"最后发现", r"发现是",
    r"解决了", r"搞定了", r"我们决定", r"决定(?:了)?用", r"最终方案",
    r"\bconclusion\b", r"\bturns? out\b", r"\bit turned out\b", r"\bthe (?:real )?(?:fix|cause|root cause|problem|issue|culprit) (?:was|is)\b",
    r"\bwe decided\b", r"\bdecided to\b", r"\bwe concluded\b", r"\bthat (?:fixed|solved) it\b", r"\blesson learned\b",
)
# an instruction cue: a directive opening the clause, or one addressed to the assistant anywhere in it. "别" and
# "总是" inside a statement ("特别开心", "它总是躲着") are not instructions.
_INSTRUCTION = _any(
    r"^(?:你)?(?:以后|今后|从现在(?:开始|起)|往后|总是|每次|永远|始终|不要|别|千万别|请(?!问)|务必|一定要|必须|记得)",
    r"(?<!申)请(?!问|教|假|客|求|你帮|帮)", r"(?:回答|回复|解释|写代码|写\s*\w+\s*代码|代码|提交|部署|推送|上线)\S{0,4}(?:时|的时候|前|之前)",
    r"统一(?:用|使用|写|为)|一律|尽量|多(?:举|写|用|给|加)|少(?:用|写|说)",
    r"(?:你|助手)(?:以后|今后)?(?:要|得|必须|一定要|务必|不要|别|总是|每次|永远|始终)",
    r"^(?:please|always|never|don'?t|do not|from now on|make sure|stop (?:using|saying|adding)|avoid|must)\b",
    r"\b(?:you|the assistant) (?:should|must|always|never|need to|have to)\b", r"\bplease\b", r"\bfrom now on\b",
    r"\bi (?:want|need|would like|'d like) you to\b", r"我(?:希望|要|想让|需要)你",
)
_ANSWER_DIRECTED = _any(
    r"回答", r"回复", r"答复", r"解释", r"输出", r"给我", r"告诉我", r"你", r"用中文", r"用英文", r"表情", r"格式",
    r"\banswer", r"\brepl(?:y|ies)\b", r"\brespond", r"\bresponses?\b", r"\bexplain", r"\boutput\b", r"\btell me\b",
    r"\byou\b", r"\byour\b", r"\bemoji", r"\bformat",
)
_PREFERENCE = _any(
    r"喜欢", r"偏好", r"偏爱", r"更爱", r"爱用", r"习惯(?:用|于)?", r"讨厌", r"受不了", r"倾向于?", r"宁愿", r"最爱", r"常用",
    r"以后都用", r"以后用", r"改用", r"换成", r"换用", r"改成", r"不再用", r"不用\S+了", r"现在用",
    r"\bi (?:really |do |also |still |don'?t |do not |never )?(?:like|love|prefer|enjoy|hate|dislike|can'?t stand)\b",
    r"\bi'?d rather\b", r"\bmy (?:favou?rite|preferred)\b", r"\bprefer(?:s|red)?\b",
    r"\blet'?s use\b", r"\bswitch(?:ed|ing)? (?:over )?(?:to|from)\b", r"\bi (?:now |mostly |usually )?use\b",
)
_FACT = _any(
    r"我是", r"我叫", r"我在", r"我的", r"我们的", r"我有", r"我住", r"我用", r"我们用", r"我正在", r"我学过", r"我会",
    r"我做", r"我负责", r"我家", r"我今年", r"我来自", r"我们公司", r"我们团队", r"我对", r"我从事", r"我毕业",
    r"\bi am\b", r"\bi'm\b", r"\bmy\b", r"\bi (?:work|live|have|own|study|studied|learned|built|run|deploy|wrote|speak|know)\b",
    r"\bwe (?:use|run|deploy|have|build)\b", r"\bour\b", r"我们(?:正)?在",
    # any other first-person statement, except opinions about the conversation and questions in disguise
    r"^我(?!觉得|想|问|猜|看看|试试)", r"^(?:the user|用户)(?:'s)?\b",
    r"^(?:actually,? |honestly,? )?(?:i|we)\b(?! (?:think|guess|wonder|want|need help|see|mean|should|could|can)\b)",
)
_FIRST_PERSON = _any(r"我", r"\bi\b", r"\bi'm\b", r"\bmy\b", r"\bwe\b", r"\bour\b")
# a question asked about anything, the user included: "what package manager should I use?", "用什么包管理器好"
_QUESTION = _any(
    r"[?？]\s*$",
    r"^(?:(?:so|and|but|also|ok|okay|well|hey|hi|oh|then)[,\s]+)*(?:(?:what|why|how|when|where|who|whom|whose|which)"
    r"\s+(?:do|does|did|is|are|am|was|were|can|could|should|would|will|shall|may|might|must|have|has|had)\b|"
    r"(?:do|does|did|is|are|am|was|were|can|could|should|would|will|shall|may|might|have|has)\s+(?:i|you|we|they|he|"
    r"she|it|there|this|that|these|those|my|your|the|a|an|any|anyone|someone|somebody)\b|(?:what|which|who|how)"
    r"(?:'s|\s+about|\s+many|\s+much|\s+long|\s+often)\b)",
    r"吗\s*[。.!！~～]*$", r"能不能", r"可不可以", r"要不要", r"是不是", r"有没有", r"会不会", r"行不行", r"好不好", r"用不用",
    r"该不该", r"对不对", r"(?:应该|该|要|可以|能|会|用|选|推荐)\S{0,6}(?:什么|哪|怎么|如何|多少)", r"^(?:什么|怎么|为什么|如何|哪|谁)",
    r"(?:聊|说|讲|谈|做|写|进行)到(?:哪|什么地方)",  # "我们上次说到哪儿了": where things stand, asked
)
# "you know?", "对吧？": a tag that softens a statement, not a question of its own
_TAG_QUESTION = _any(r"^(?:you know|right|ok(?:ay)?|isn'?t it|don'?t you think|eh|huh|对吧|是吧|对不对|好吗|行吗|可以吗|"
                     r"好不好|你知道吗|知道吧)\s*[?？!！.。]*\s*$")
# a one-off task for the assistant: not a memory, unless a standing cue (_HABIT) makes it an instruction
_REQUEST = _any(
    r"^(?:请|麻烦|劳驾|能不能|可不可以|能否|可以|能)?(?:你)?(?:帮我|帮忙|帮|给我|替我|为我|跟我)?"
    r"(?:写|推荐|解释|翻译|生成|查|找|搜|看看|看一下|分析|检查|总结|介绍|讲讲|讲一下|说说|列出|列一下|改(?!用|成|为)|修改|优化|"
    r"实现|设计|算(?!了)|画|整理|对比|比较|评估|演示|举个例子)",
    r"^(?:(?:please|pls|hey|so|ok|okay|now)[,\s]+)*(?:(?:can|could|would|will)\s+you\b|(?:write|give|show|tell|explain|"
    r"recommend|suggest|help|find|fix|generate|create|make|translate|summari[sz]e|list|check|review|describe|draft|"
    r"compose|implement|refactor|debug|build|design|compare|convert|rewrite|calculate|look up|search)\b|"
    r"i(?:'d| would)? (?:like|want|need) you to\b|i need (?:help|a hand|some help)\b|help me\b|let me know\b|"
    r"i(?:'d| would) like (?:a|an|some|to know|to see)\b|i want (?:a|an|to know|to see)\b)",
)
# "用 Python 写一个爬虫": something to make, asked without a subject ("我在写一个爬虫" is a statement)
_MAKE_ONE = _any(r"(?:写|来|做|生成|搞|弄)(?:一个|个|一段|段|一份|份|一下)")
_HABIT = _any(
    r"以后", r"今后", r"从现在(?:开始|起)", r"往后", r"每次", r"总是", r"一直", r"始终", r"永远", r"时候", r"时[，,]?(?:都|要|请|用|先)",
    r"一律", r"都要", r"都用", r"默认", r"统一",
    r"\balways\b", r"\bnever\b", r"\bfrom now on\b", r"\bwhenever\b", r"\bevery time\b", r"\beach time\b",
    r"\bby default\b", r"\bin (?:the )?future\b", r"\bgoing forward\b", r"\bfrom here on\b", r"\binstead\b",
    # a way of doing a kind of thing, not one thing to do: "Write code examples in JavaScript"
    r"^(?:write|give me|show|use)\s+(?:\w+\s+)?\w+s\s+(?:in|with|as|using)\b",
)
_HEDGE = _any(r"\bi'?m not (?:sure|certain)\b", r"\bi am not (?:sure|certain)\b", r"\bi (?:don'?t|do not) know\b",
              r"\bi dunno\b", r"\bi have no idea\b", r"^(?:我)?(?:也|还)?不(?:太)?(?:知道|确定|清楚)", r"^我(?:也|还)?没想好")
# a standing directive: a forward cue with no first-person subject ("以后都用 pnpm", "from now on, use pnpm")
_DIRECTIVE = _any(r"^(?:你)?(?:以后|今后|从现在(?:开始|起)|往后)", r"^(?:(?:ok|okay|so)[,\s]+)?(?:from now on|going forward|"
                  r"in (?:the )?future|from here on)\b", r"^let'?s\b", r"\bfrom now on\s*[.!]?$")
_REMEMBER = _any(r"记住", r"记一下", r"别忘", r"\bremember\b", r"\bnote that\b", r"\bkeep in mind\b")
_EMPHASIS = _any(
    r"一定", r"务必", r"必须", r"千万", r"永远", r"记住", r"切记", r"重要", r"绝对", r"始终", r"！{2,}", r"!{2,}",
    r"\balways\b", r"\bnever\b", r"\bmust\b", r"\bremember\b", r"\bimportant\b", r"\babsolutely\b", r"\bcritical\b",
)
_TASK_CONTEXT = _any(
    r"这次", r"本次", r"这个会话", r"这轮", r"当前任务", r"这个任务", r"暂时", r"今天", r"刚才", r"眼下", r"目前在",
    r"\bthis session\b", r"\bthis time\b", r"\bfor now\b", r"\bfor this task\b", r"\bright now\b", r"\btoday\b",
    r"\bcurrently\b", r"\btemporarily\b", r"\bin this (?:task|chat|conversation)\b",
)
_CODING = _any(
    r"代码", r"函数", r"写一个", r"写个", r"实现", r"报错", r"脚本", r"编程", r"调试", r"重构", r"接口", r"正则", r"算法",
    r"编译", r"单元测试", r"bug", r"sql",
    r"\bcode\b", r"\bfunction\b", r"\bscript\b", r"\bimplement", r"\bwrite (?:a|an|me|some)\b", r"\berror\b",
    r"\brefactor", r"\bdebug", r"\bclass\b", r"\bregex", r"\bapi\b", r"\bcompile", r"\bunit tests?\b", r"\bsnippet",
    r"\bprogram\b", r"\bexception\b", r"\bstack trace\b",
)
_SMALL_TALK = _any(
    r"^你好", r"最近怎么样", r"最近好吗", r"天气", r"心情", r"周末", r"吃饭", r"聊聊", r"好累", r"无聊", r"开心", r"难过",
    r"\bhow are you\b", r"\bwhat'?s up\b", r"\bweather\b", r"\bweekend\b", r"\bhow was your\b", r"\bi feel\b",
    r"\btired\b", r"\bbored\b", r"\blet'?s chat\b", r"\bgood (?:morning|evening)\b",
)
_PAST = _any(
    r"上次", r"之前(?:说|提|讨论|聊|那个)", r"以前说", r"刚才说", r"前面说", r"那个方案", r"我说过", r"我提过", r"我们讨论过?",
    r"我们聊过", r"还记得", r"你记得", r"之前的", r"上一次", r"上一?回", r"(?:聊|说|讲|谈|做)到哪",
    r"(?:上个|上一个|前一个)(?:会话|对话)",
    r"\blast time\b", r"\bwhere (?:did )?we (?:leave|left) off\b", r"\bwhere were we\b", r"\bpick up where\b",
    r"\b(?:last|previous|earlier) (?:session|conversation|chat)s?\b", r"\bas i (?:said|mentioned)\b", r"\bi (?:said|mentioned|told you) (?:before|earlier)\b",
    r"\bearlier\b", r"\bpreviously\b", r"\bwe discussed\b", r"\bwe talked about\b", r"\bremember when\b",
    r"\byou suggested\b", r"\bthe (?:plan|approach|solution) (?:we|you)\b", r"\bwhat we discussed\b",
)


NO_CUE = "no fact, preference, instruction or conclusion cue"


@dataclass(frozen=True)
class Classification:
    """What the rules make of a statement: a memory type (or None) and why."""

    memory_type: str | None
    reason: str


def has_first_person(text: str) -> bool:
    return bool(_FIRST_PERSON.search(text))


def is_question(clause: str) -> bool:
    """A question, about the user or not; a softening tag alone ("you know?") is one too, and is dropped."""
    stripped = clause.strip()
    return bool(_QUESTION.search(stripped) or _TAG_QUESTION.search(stripped))


def is_request(clause: str) -> bool:
    """A one-off task for the assistant ("帮我写一个函数", "write me a sleep function"), not a standing one."""
    stripped = REMEMBER_PREFIX.sub("", clause.strip())
    asked = _REQUEST.search(stripped) or (_MAKE_ONE.search(stripped) and not _FIRST_PERSON.search(stripped))
    return bool(asked) and not _HABIT.search(stripped) and not _REMEMBER.search(clause)


def classify(text: str) -> Classification:
    """Does the clause hold a fact, a preference, an instruction or a conclusion? (see the module docstring)"""
    stripped = REMEMBER_PREFIX.sub("", text.strip()) or text.strip()
    if is_request(stripped):
        return Classification(None, "a request to the assistant, not a statement to remember")
    if is_question(stripped):
        return Classification(None, "a question, not a statement to remember")
    if _HEDGE.search(stripped):
        return Classification(None, "uncertainty, not a statement to remember")
    if match := _CONCLUSION.search(stripped):
        return Classification("conclusion", f"conclusion cue '{match.group(0)}'")
    instruction = _INSTRUCTION.search(stripped)
    if instruction and _ANSWER_DIRECTED.search(stripped):
        return Classification("instruction", f"instruction to the assistant '{instruction.group(0)}'")
    if (directive := _DIRECTIVE.search(stripped)) and not _FIRST_PERSON.search(stripped):
        return Classification("instruction", f"standing directive '{directive.group(0).strip()}'")
    if match := _PREFERENCE.search(stripped):
        return Classification("preference", f"preference cue '{match.group(0)}'")
    if instruction:
        return Classification("instruction", f"instruction cue '{instruction.group(0)}'")
    if match := _FACT.search(stripped):
        return Classification("fact", f"first-person fact cue '{match.group(0)}'")
    return Classification(None, NO_CUE)


# what a user tells an assistant about their work, however it is phrased: a convention or a command to follow
# ("Run pytest -x before you push", "部署前先跑一遍单元测试"), and facts naming a server, a ticket, a version, a
# table, a tool ("Host web-02 runs nginx 1.26", "工单 OPS-1432 是支付超时的问题")
_WORK_WORDS = _any(
    r"代码|函数|变量|注释|提交|分支|部署|上线|发布|测试|单测|接口|服务|服务器|数据库|表|字段|日志|配置|环境|集群|仓库|工单|需求|版本|"
    r"脚本|依赖|镜像|容器|后端|前端|账号|密码|端口|域名|项目|团队|文档|流水线|构建|编译|缩进|格式|命名",
    r"\b(?:code|function|variable|comment|commit|branch|deploy|release|test|tests|api|service|server|host|database|db|"
    r"table|column|log|logs|config|env|environment|cluster|repo|repository|ticket|issue|version|script|dependency|"
    r"image|container|backend|frontend|account|password|port|domain|project|team|docs|pipeline|build|ci|cd|lint|"
    r"staging|prod|production|bucket|queue|cron|job|endpoint|schema|migration|yaml|json|indentation|push|pr)s?\b",
)
_IMPERATIVE = _any(
    r"^(?:(?:always|please|never|just)\s+)?(?:run|use|write|give|show|explain|commit|push|deploy|format|keep|add|put|name|prefix|follow|include|"
    r"mention|answer|reply|respond|test|lint|tag|merge|rebase|squash|bump|pin|install|set|wrap|indent|sort|cite|store|"
    r"save|avoid|prefer|document|branch|ping|call|open|close|label|assign|mark|ship|stick|default)\b",
    r"^(?:先|统一|一律|都|尽量|多|少|记得|提交前|部署前|上线前|推送前|发布前)",
)
_IDENTIFIER_LIKE = re.compile(r"`[^`]+`|(?<![\w.])(?=[\w.\-/:@]*\d)[A-Za-z][\w.\-/:@]*[A-Za-z0-9]|\b[A-Za-z]+(?:[_\-./:@]"
                              r"[A-Za-z0-9]+)+\b|\b\d+(?:\.\d+)+\b|(?<![\w.])\d{2,}(?![\w.])")
_MANNER = re.compile(r"\b(?:as|in|for|with|using|instead|by default)\b", re.IGNORECASE)
_NAMED_SUBJECT = re.compile(r"^(?-i:[A-Z][a-z]+)\s+(?-i:[a-z]+s)\b")


def is_imperative(text: str) -> bool:
    """The clause tells someone to do something ("run the tests", "先跑单元测试")."""
    return bool(_IMPERATIVE.search(text.strip()))


def work_statement(text: str) -> Classification | None:
    """A statement to an assistant about the user's work or world that no first-person cue marks: an imperative
    about work is an instruction, a statement naming an identifier, a version or a work noun a fact ("Host web-02
    runs nginx 1.26", "Emma plays the cello now"); None for what carries too little (chit-chat, "today is
    nice")."""
    stripped = text.strip()
    if is_question(stripped) or is_request(stripped) or is_filler(stripped) or _SMALL_TALK.search(stripped):
        return None
    if information_units(stripped) < 3:
        return None
    work = _WORK_WORDS.search(stripped)
    if _IMPERATIVE.search(stripped) and (work or _IDENTIFIER_LIKE.search(stripped) or _MANNER.search(stripped)):
        return Classification("instruction", f"a convention to follow '{(work or _IMPERATIVE.search(stripped)).group(0)}'")  # type: ignore[union-attr]
    if looks_like_code(stripped):
        return Classification("fact", "a command or a query")
    if ident := _IDENTIFIER_LIKE.search(stripped):
        return Classification("fact", f"names '{ident.group(0)}'")
    if times(stripped) or (re.search(r"\d", stripped) and information_units(stripped) >= 4):
        return Classification("fact", "a time, a date or a number")
    if work:
        return Classification("fact", f"about work '{work.group(0)}'")
    if _NAMED_SUBJECT.search(stripped):
        return Classification("fact", "about someone by name")
    return None


def is_emphatic(text: str) -> bool:
    return bool(_EMPHASIS.search(text))




def is_task_context(text: str) -> bool:
    """Context of the task at hand ("this session", "今天"), which belongs to the session, not the user."""
    return bool(_TASK_CONTEXT.search(text))


def query_intent(text: str) -> str:
    """'coding', 'small_talk' or 'general' (used to route retrieval to memory types)."""
    if _CODING.search(text):
        return "coding"
    if _SMALL_TALK.search(text):
        return "small_talk"
    return "general"


def points_to_past(text: str) -> bool:
    """The user refers to something said before ("上次那个方案", "as I said before")."""
    return bool(_PAST.search(text))


REMEMBER_PREFIX = re.compile(
    r"^(?:请)?(?:记住|记一下|别忘了|注意)[，,：:\s]*|^(?:please )?(?:remember|note|keep in mind)(?: that)?[,:]?\s+",
    re.IGNORECASE,
)


# ---------------------------------------------------------------------------------------------- length

def text_units(text: str) -> int:
    """Length for summaries: each Chinese character counts one, each other word counts one."""
    return len(_UNIT.findall(text))


def cut_to_units(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that is at most ``limit`` units (see text_units)."""
    count = 0
    for match in _UNIT.finditer(text):
        count += 1
        if count > limit:
            return text[: match.start()].rstrip(" ，,;；")
    return text
