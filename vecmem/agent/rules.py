"""Deterministic language rules (Chinese and English) that make every memory feature work without a model.

Used by the write gate (is this filler? what kind of statement is it?), extraction (type, importance, scope,
tags, third-person rewrite), conflict handling (change cues and topic slots), type routing and proactive
recall. Everything here is a pure function of the text, so it is tested with tables of real messages.

Classification of a statement, first match wins:
1. a conclusion cue ("结论", "原来", "turns out", "the fix was") -> conclusion;
2. an instruction cue aimed at how the assistant answers ("以后回答…", "请用中文", "please reply…") -> instruction;
3. a preference cue, including a switch of tool or language ("我喜欢", "以后都用 X", "I prefer") -> preference;
4. any other instruction cue ("不要…", "always…", "never…") -> instruction;
5. a first-person fact cue ("我是", "我的", "I work", "my …") -> fact;
6. nothing: not a memory. Questions without a first-person statement are not memories either.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from vecmem.text import has_cjk

__all__ = [
    "Classification",
    "classify",
    "content_problem",
    "is_emphatic",
    "is_task_context",
    "has_change_cue",
    "topic_slots",
    "query_intent",
    "points_to_past",
    "rewrite_first_person",
    "split_sentences",
    "keyword_tags",
    "text_units",
    "cut_to_units",
    "looks_like_injection",
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


def _is_filler(text: str) -> bool:
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


def content_problem(text: str, *, min_chars: int = 6) -> str | None:
    """Why a message is not worth judging at all, or None. The first stage of the write gate."""
    stripped = text.strip()
    if not _strip_symbols(stripped):
        return "only punctuation or emoji"
    if _is_filler(stripped):
        return "pure filler (greeting, thanks or acknowledgement)"
    if len(stripped) < min_chars:
        return f"shorter than {min_chars} characters"
    return None


# ---------------------------------------------------------------------------------------------- cues

_CONCLUSION = _any(
    r"结论", r"总结(?:一下)?[:：]", r"原来是", r"原来", r"问题出在", r"根因", r"根本原因", r"最后发现", r"发现是",
    r"解决了", r"搞定了", r"我们决定", r"决定(?:了)?用", r"最终方案",
    r"\bconclusion\b", r"\bturns? out\b", r"\bit turned out\b", r"\bthe (?:real )?(?:fix|cause|root cause|problem|issue|culprit) (?:was|is)\b",
    r"\bwe decided\b", r"\bdecided to\b", r"\bwe concluded\b", r"\bthat (?:fixed|solved) it\b", r"\blesson learned\b",
)
_INSTRUCTION = _any(
    r"以后", r"今后", r"从现在(?:开始|起)", r"总是", r"每次", r"不要", r"别再?", r"请(?!问)", r"务必", r"一定要", r"必须",
    r"\balways\b", r"\bnever\b", r"(?<!\bi )\bdon'?t\b", r"(?<!\bi )\bdo not\b", r"\bplease\b", r"\bfrom now on\b", r"\bmake sure\b",
    r"\bmust\b", r"\bstop (?:using|saying|adding)\b", r"\bavoid\b",
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
    r"\blet'?s use\b", r"\bswitch(?:ed|ing)? (?:over )?to\b", r"\bi (?:now |mostly |usually )?use\b",
)
_FACT = _any(
    r"我是", r"我叫", r"我在", r"我的", r"我们的", r"我有", r"我住", r"我用", r"我们用", r"我正在", r"我学过", r"我会",
    r"我做", r"我负责", r"我家", r"我今年", r"我来自", r"我们公司", r"我们团队", r"我对", r"我从事", r"我毕业",
    r"\bi am\b", r"\bi'm\b", r"\bmy\b", r"\bi (?:work|live|have|own|study|studied|learned|built|run|deploy|wrote|speak|know)\b",
    r"\bwe (?:use|run|deploy|have|build)\b", r"\bour\b", r"我们(?:正)?在",
    # any other first-person statement, except opinions about the conversation and questions in disguise
    r"^我(?!觉得|想|问|猜|看看|试试)", r"^i\b(?! (?:think|guess|wonder|want|need help|see|mean)\b)",
)
_FIRST_PERSON = _any(r"我", r"\bi\b", r"\bi'm\b", r"\bmy\b", r"\bwe\b", r"\bour\b")
_QUESTION = _any(
    r"[?？]\s*$", r"^(?:what|why|how|when|where|who|which|can|could|would|should|is|are|do|does|did|will)\b",
    r"吗[?？]?\s*$", r"什么", r"怎么", r"为什么", r"如何", r"哪个", r"能不能", r"可以.*吗", r"是不是",
)
# A question that asks about the user is still a question: it opens with a question word (or, in Chinese,
# holds one) and ends with a question mark. "I like tea, you know?" opens with neither and is kept.
_ASKED = _any(
    r"^(?:what|why|how|when|where|who|whom|whose|which|can|could|would|should|is|are|am|do|does|did|will|have|has)\b"
    r".*[?？]\s*$",
    r"(?:什么|怎么|为什么|如何|哪|谁|多少|几|吗|呢).*[?？]\s*$",
)
_REQUEST = _any(r"^帮我", r"^请帮", r"^给我写", r"^写一个", r"^(?:can|could) you\b", r"^write\b", r"^help me\b", r"^show me\b")
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
_CHANGE = _any(
    r"以后", r"今后", r"从现在(?:开始|起)", r"改用", r"换成", r"换用", r"改成", r"不再", r"不用\S*了", r"现在用", r"现在改",
    r"其实", r"更正", r"改为",
    r"\bfrom now on\b", r"\bswitch(?:ed|ing)? (?:over )?to\b", r"\binstead\b", r"\bno longer\b", r"\banymore\b",
    r"\bnow (?:i |we )?(?:use|prefer)\b", r"\bactually\b", r"\bchanged? to\b", r"\bmov(?:ed|ing) to\b", r"\blet'?s use\b",
)

# Topic slots: two statements naming values of the same slot talk about the same thing.
SLOTS: dict[str, tuple[str, ...]] = {
    "programming language": (
        "python", "typescript", "javascript", "java", "golang", "go语言", "rust", "c++", "c#", "kotlin", "swift", "ruby",
        "php", "scala", "dart", "elixir", "haskell", "lua", "julia", "r语言",
    ),
    "editor": ("vs code", "vscode", "neovim", "nvim", "vim", "emacs", "intellij", "pycharm", "webstorm", "sublime",
               "cursor", "zed", "xcode", "android studio"),
    "operating system": ("macos", "mac", "windows", "linux", "ubuntu", "debian", "fedora", "arch linux", "wsl"),
    "shell": ("zsh", "bash", "fish", "powershell", "nushell"),
    "package manager": ("npm", "pnpm", "yarn", "bun", "pip", "poetry", "uv", "conda", "cargo", "homebrew", "brew"),
    "indentation": ("tabs", "spaces", "tab", "制表符", "空格", "2 spaces", "4 spaces", "两个空格", "四个空格"),
    "reply language": ("中文", "英文", "chinese", "english", "日语", "japanese"),
    "answer length": ("简洁", "简短", "详细", "啰嗦", "concise", "brief", "short answers", "detailed", "verbose", "long answers"),
    "test framework": ("jest", "vitest", "pytest", "mocha", "unittest", "junit"),
    "database": ("postgres", "postgresql", "mysql", "sqlite", "mongodb", "redis", "oracle"),
    "framework": ("react", "vue", "angular", "svelte", "django", "flask", "fastapi", "express", "next.js", "nextjs",
                  "spring", "rails", "nestjs"),
    "cloud": ("aws", "gcp", "azure", "阿里云", "腾讯云", "华为云", "vercel", "heroku"),
}
_SLOT_PATTERNS = {
    slot: re.compile("|".join(
        rf"(?<![a-z0-9]){re.escape(value)}(?![a-z0-9+#])" if value[0].isascii() else re.escape(value)
        for value in values
    ), re.IGNORECASE)
    for slot, values in SLOTS.items()
}

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
    r"我们聊过", r"还记得", r"你记得", r"之前的",
    r"\blast time\b", r"\bas i (?:said|mentioned)\b", r"\bi (?:said|mentioned|told you) (?:before|earlier)\b",
    r"\bearlier\b", r"\bpreviously\b", r"\bwe discussed\b", r"\bwe talked about\b", r"\bremember when\b",
    r"\byou suggested\b", r"\bthe (?:plan|approach|solution) (?:we|you)\b", r"\bwhat we discussed\b",
)


@dataclass(frozen=True)
class Classification:
    """What the rules make of a statement: a memory type (or None) and why."""

    memory_type: str | None
    reason: str


def classify(text: str) -> Classification:
    """Does the text hold a fact, a preference, an instruction or a conclusion? (see the module docstring)"""
    stripped = _REMEMBER_PREFIX.sub("", text.strip()) or text.strip()
    if _REQUEST.search(stripped) and not _REMEMBER.search(text):
        return Classification(None, "a request to the assistant, not a statement to remember")
    if _QUESTION.search(stripped) and (not _FIRST_PERSON.search(stripped) or _ASKED.search(stripped)):
        return Classification(None, "a question, not a statement to remember")
    if match := _CONCLUSION.search(stripped):
        return Classification("conclusion", f"conclusion cue '{match.group(0)}'")
    instruction = _INSTRUCTION.search(stripped)
    if instruction and _ANSWER_DIRECTED.search(stripped):
        return Classification("instruction", f"instruction to the assistant '{instruction.group(0)}'")
    if match := _PREFERENCE.search(stripped):
        return Classification("preference", f"preference cue '{match.group(0)}'")
    if instruction:
        return Classification("instruction", f"instruction cue '{instruction.group(0)}'")
    if match := _FACT.search(stripped):
        return Classification("fact", f"first-person fact cue '{match.group(0)}'")
    return Classification(None, "no fact, preference, instruction or conclusion cue")


def is_emphatic(text: str) -> bool:
    return bool(_EMPHASIS.search(text))


# Text that tries to steer the assistant itself rather than tell it about the user: "ignore previous
# instructions", "you are now ...", "system prompt", 忽略之前的指令. Whatever is extracted from it is kept, if
# at all, as a low-importance fact the user said, never as an instruction (extract.py).
_INJECTION = _any(
    r"\b(?:ignore|disregard|forget|override)\b.{0,40}\b(?:previous|prior|above|earlier|all|any|your|the)\b.{0,25}"
    r"\b(?:instructions?|rules|prompts?|guidelines|directions)\b",
    r"\bsystem prompt\b", r"\byou are now\b", r"\bjailbreak", r"\bdeveloper mode\b",
    r"\bnew instructions?\s*:", r"\bact as (?:an? )?(?:unrestricted|unfiltered)\b",
    r"(?:忽略|无视|忘记|忘掉|不要理会).{0,10}(?:之前|以前|前面|以上|上面|所有|全部|你的)?.{0,6}(?:指令|指示|规则|提示词?|设定|要求)",
    r"系统提示", r"你现在是", r"越狱", r"开发者模式",
)


def looks_like_injection(text: str) -> bool:
    """The text tries to give the assistant instructions that override its own (prompt injection)."""
    return bool(_INJECTION.search(text))


def is_task_context(text: str) -> bool:
    """Context of the task at hand ("this session", "今天"), which belongs to the session, not the user."""
    return bool(_TASK_CONTEXT.search(text))


def has_change_cue(text: str) -> bool:
    """The statement revises an earlier one ("以后都用", "改用", "from now on", "switch to", "no longer")."""
    return bool(_CHANGE.search(text))


def topic_slots(text: str) -> frozenset[str]:
    """Which topic slots (programming language, editor, shell, ...) the text names a value of."""
    return frozenset(slot for slot, pattern in _SLOT_PATTERNS.items() if pattern.search(text))


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


# ---------------------------------------------------------------------------------------------- rewriting

_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])\s*|(?<=[.])\s+|\n+")
_TRAILING_PARTICLES = re.compile(r"[吧啊呀哦呢嘛啦]+[。！!.~～]*$")
_ADVERBS = {"usually", "always", "never", "really", "also", "still", "now", "mostly", "often", "sometimes", "just"}
_THIRD_PERSON = {
    "am": "is", "have": "has", "do": "does", "don't": "doesn't", "can't": "can't", "cannot": "cannot",
    "prefer": "prefers", "like": "likes", "love": "loves", "hate": "hates", "dislike": "dislikes", "enjoy": "enjoys",
    "use": "uses", "want": "wants", "work": "works", "live": "lives", "need": "needs", "speak": "speaks",
    "know": "knows", "study": "studies", "run": "runs", "deploy": "deploys", "own": "owns", "write": "writes",
    "build": "builds", "learned": "learned", "studied": "studied", "built": "built", "wrote": "wrote",
    "switched": "switched", "moved": "moved", "started": "started", "stopped": "stopped", "was": "was",
}
_CONTRACTIONS = {"i'm": ["i", "am"], "i've": ["i", "have"], "i'd": ["i", "would"]}


def _rewrite_english(text: str) -> str:
    words = text.rstrip(".!").split()
    first = words[0].lower() if words else ""
    if first in _CONTRACTIONS:
        words = [*_CONTRACTIONS[first][:1], _CONTRACTIONS[first][1], *words[1:]]
        first = "i"
    if first == "my":
        return "The user's " + " ".join(words[1:]) + "."
    if first != "i":
        return f'The user said: "{text}"'
    rest = words[1:]
    adverbs = []
    while rest and rest[0].lower() in _ADVERBS:
        adverbs.append(rest.pop(0))
    if not rest or (rest[0].lower() not in _THIRD_PERSON and rest[0].lower() != "would"):
        return f'The user said: "{text}"'
    verb = "would" if rest[0].lower() == "would" else _THIRD_PERSON[rest[0].lower()]
    sentence = " ".join(["The user", *adverbs, verb, *rest[1:]])
    sentence = re.sub(r"\bmy\b", "the user's", sentence, flags=re.IGNORECASE)
    return re.sub(r"\bme\b", "the user", sentence, flags=re.IGNORECASE) + "."


def split_sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


_REMEMBER_PREFIX = re.compile(
    r"^(?:请)?(?:记住|记一下|别忘了|注意)[，,：:\s]*|^(?:please )?(?:remember|note|keep in mind)(?: that)?[,:]?\s+",
    re.IGNORECASE,
)


def rewrite_first_person(sentence: str) -> str:
    """A statement about the user in the third person, so memories read alike whoever said them.

    "我喜欢用 TypeScript" -> "用户喜欢用 TypeScript"; "以后都用 JavaScript 吧" -> "用户：以后都用 JavaScript";
    "I prefer tabs" -> "The user prefers tabs"; what the rules cannot rewrite is quoted: 'The user said: "..."'.
    """
    text = _REMEMBER_PREFIX.sub("", sentence.strip()) or sentence.strip()
    if not has_cjk(text):
        return _rewrite_english(text)
    text = _TRAILING_PARTICLES.sub("", text.rstrip("。！？；!?; ")).rstrip("，, ")
    if text.startswith(("我们团队", "我们公司", "我们项目", "我们组")):
        return "用户的" + text[2:]
    if text.startswith("我们"):
        return "用户和团队" + text[2:]
    if text.startswith("我"):
        return "用户" + text[1:].replace("我的", "用户的")
    return "用户：" + text


_LATIN_TERM = re.compile(r"[A-Za-z][A-Za-z0-9+#.\-]*[A-Za-z0-9+#]|[A-Za-z]{2,}")
_STOPWORDS = {
    "the", "and", "for", "with", "that", "this", "from", "use", "using", "user", "users", "said", "like", "likes",
    "prefer", "prefers", "always", "never", "please", "don't", "not", "now", "all", "are", "was", "is", "you", "your",
    "have", "has", "will", "would", "should", "when", "what", "our", "their", "them", "they", "let's", "lets",
}


def keyword_tags(text: str, *, limit: int = 4) -> list[str]:
    """Tags for an extracted memory: its topic slots, then the technical terms it names."""
    tags = sorted(topic_slots(text))
    for term in _LATIN_TERM.findall(text):
        if term.lower() not in _STOPWORDS and len(term) >= 2 and term not in tags and (
            term[0].isupper() or any(ch in term for ch in "+#.") or term.isupper()
        ):
            tags.append(term)
    return tags[:limit]


# ---------------------------------------------------------------------------------------------- length

_UNIT = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\s\u3400-\u9fff\uf900-\ufaff]+")


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
