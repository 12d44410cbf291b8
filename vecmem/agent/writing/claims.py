"""The statement model: what a statement claims, read without a model, in Chinese, English and a mix of the two.

A **claim** is (holder, attribute, value, negated, past) and the span of the text that says it:

* **holder**: whom or what it is about. "user" for the speaker (我, I, the user, a subject left out), "group"
  for their team or company (我们, our team), else the subject the statement names: a relative or a pet ("我女儿",
  "my sister": ``女儿``, ``sister``), a person by name ("Alice works at Google": ``alice``), a thing ("our
  standup", "测试账号 alice01"). Claims about different holders never contradict each other.
* **attribute**: what is said of the holder. The slots of ``topics.py`` (residence, employer, age, name, role,
  hometown, the tool for a job: editor, shell, language, package manager, …, and the language and length of the
  assistant's replies), and three that need more than a lexicon: ``diet`` (vegetarian or not; a meat dish the
  holder likes implies "not vegetarian"), ``schedule:<activity>`` (the time of a recurring activity: "我每天早上
  七点跑步", "our standup is at 9:30"), ``has:<thing>`` ("my phone plan is with Verizon"), ``how:<thing>`` and
  ``language of <thing>`` (how the assistant is to write it: "format dates as YYYY-MM-DD", "注释用中文写"),
  ``<verb>:`` of a named thing ("the staging server is stg-02", "the freeze starts on Dec 22") and
  ``does:<deed>`` (what the holder denies, stopped or did before: "I quit smoking", "我不学日语了", "I was
  training for a marathon"), which an earlier statement of the deed contradicts (``mentions``).
* **value**: canonical, lowercase; numbers in digits (三十岁 = 30岁), times as HH:MM.
* **negated**: the value is denied or given up ("I don't live in Hangzhou", "我不再用 Windows 了", "no longer").
* **past**: the statement places the value in the past ("I used to live in Paris", "我以前在阿里工作"): history,
  not the current value. In a timeline ("I used to live in Paris, now I'm in Rome", "我以前在阿里工作，现在在字节")
  the present clause inherits the attribute of the past one.

What is left of a memory when some of its claims are revised is ``revision.py``'s. ``value_tokens`` are what makes two statements different however close their vectors are: numbers, versions,
identifiers (web-01, OPS-1432, alice02), code spans and commands, names, times and dates, and polarity.
``normalized`` is the form two wordings of the same statement share (case, width, punctuation, contractions,
我/用户 and I/the user, the verb's person).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache

from vecmem.agent.writing import topics
from vecmem.text import has_cjk

__all__ = ["Claim", "claims", "content_words", "looks_like_code", "mentions", "times", "normalized", "states_change", "value_tokens", "clauses_of"]


@dataclass(frozen=True)
class Claim:
    holder: str
    attribute: str
    value: str
    negated: bool = False
    past: bool = False
    span: tuple[int, int] = (0, 0)  # where the text says it (predicate and value), for a partial revision
    implied: bool = False  # read from another claim (a meat dish liked implies "not vegetarian")
    elided: bool = False  # about the user only because the statement names no subject ("需求管理以后都用 Linear")

    @property
    def key(self) -> tuple[str, str, str, bool, bool]:
        return (self.holder, self.attribute, self.value, self.negated, self.past)


# ---------------------------------------------------------------------------------------------- numbers, times

_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def zh_number(text: str) -> int | None:
    """一 … 九十九 (and 一百 …) as an int; digits as they are; None for anything else."""
    if text.isdigit():
        return int(text)
    if not text or any(ch not in _ZH_DIGITS and ch not in "十百" for ch in text):
        return None
    total, current = 0, 0
    for ch in text:
        if ch == "百":
            total += (current or 1) * 100
            current = 0
        elif ch == "十":
            total += (current or 1) * 10
            current = 0
        else:
            current = _ZH_DIGITS[ch]
    return total + current


_ZH_NUM = "[0-9零〇一二两三四五六七八九十]"
_ZH_TIME = re.compile(rf"(?P<part>早上|上午|中午|下午|晚上|傍晚|凌晨|夜里)?(?P<hour>{_ZH_NUM}{{1,3}})(?:点|時|时)"
                      rf"(?:(?P<half>半)|(?P<minute>{_ZH_NUM}{{1,3}})分?|(?P<quarter>一刻))?")
_EN_TIME = re.compile(r"\b(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>a\.?m\.?|p\.?m\.?)(?![a-z])|"
                      r"\b(?P<hour2>\d{1,2}):(?P<minute2>\d{2})\b|\b(?P<hour3>\d{1,2})\s*o'?clock\b|\b(?P<named>midnight|noon)\b",
                      re.IGNORECASE)
_WEEKDAY = re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|(?:周|星期|礼拜)[一二三四五六日天]", re.IGNORECASE)
_DATE = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}\b|\d{1,2}月\d{1,2}[日号]|"
                   r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?\b|"
                   r"\b\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|"
                   r"明天|后天|下周|今天|昨天", re.IGNORECASE)


def _clock(hour: int, minute: int, afternoon: bool) -> str:
    if afternoon and hour < 12:
        hour += 12
    return f"{hour:02d}:{minute:02d}"


def times(text: str) -> list[tuple[str, tuple[int, int]]]:
    """Every time of day (as HH:MM) and weekday the text names, with its span."""
    found: list[tuple[str, tuple[int, int]]] = []
    for match in _ZH_TIME.finditer(text):
        hour = zh_number(match.group("hour"))
        if hour is None or hour > 24:
            continue
        minute = 30 if match.group("half") else 15 if match.group("quarter") else (
            zh_number(match.group("minute")) or 0 if match.group("minute") else 0)
        found.append((_clock(hour, minute, match.group("part") in ("下午", "晚上", "傍晚", "夜里") and hour < 12),
                      match.span()))
    for match in _EN_TIME.finditer(text):
        if match.group("named"):
            found.append(("00:00" if match.group("named").lower() == "midnight" else "12:00", match.span()))
            continue
        hour = int(match.group("hour") or match.group("hour2") or match.group("hour3"))
        minute = int(match.group("minute") or match.group("minute2") or 0)
        ampm = (match.group("ampm") or "").lower()
        if hour > 24 or minute > 59:
            continue
        found.append((_clock(hour % 12 if ampm else hour, minute, ampm.startswith("p")), match.span()))
    for match in _WEEKDAY.finditer(text):
        day = match.group(0).lower()
        found.append((day.rstrip("s") if day.isascii() else day[-1].replace("天", "日"), match.span()))
    return sorted(found, key=lambda item: item[1])


# ---------------------------------------------------------------------------------------------- normal form

_CONTRACTIONS = (("n't", " not"), ("'m", " am"), ("'re", " are"), ("'ve", " have"), ("'ll", " will"), ("'d", " would"))
_EN_SELF = re.compile(r"\b(?:the user's|my|mine)\b|\b(?:the user|i|me|myself)\b", re.IGNORECASE)
_BE = re.compile(r"\b(?:am|is|are)\b")
_EN_WORDS = re.compile(r"[a-z0-9]+(?:[.\-_/:][a-z0-9]+)*")
_CJK_CHARS = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_ZH_SELF = re.compile(r"用户|我")
_ZH_FILLER = re.compile(r"[的了吧啊呀呢哦嘛啦]|都会|都")


def _stem(word: str) -> str:
    """A crude English stem, enough to equate "works" with "work" and "lives" with "live"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if (len(word) > 3 and word.endswith("es") and word[-3] in "sxz") or word.endswith(("ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@lru_cache(maxsize=4096)
def normalized(text: str) -> str:
    """The form two wordings of the same statement share (module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    text = re.sub(r"(?<=[a-z])'s\b", "", text)  # "the user's daughter's name": whose, not a word of its own
    for short, long in _CONTRACTIONS:
        text = text.replace(short, long)
    text = _EN_SELF.sub(lambda m: "user's" if m.group(0) in ("the user's", "my", "mine") else "user", text)
    text = _BE.sub("be", text)
    text = _ZH_FILLER.sub("", _ZH_SELF.sub("用户", text))
    parts = []
    for match in re.finditer(rf"{_CJK_CHARS.pattern}|{_EN_WORDS.pattern}", text):
        piece = match.group(0)
        parts.append(piece if _CJK_CHARS.match(piece) else _stem(piece))
    return " ".join(parts)


_STOP = frozenset("""
a an the to of in on at for with about and or but so too very really just also still now here there be been being
do does did doing have has had user user's will would shall should can could may might must not no that this it
its them they their these those than then from by as into over up out off again always usually currently please
""".split())


def content_words(text: str) -> frozenset[str]:
    """The words of the normal form that carry content (for English), and its Chinese characters."""
    return frozenset(word for word in normalized(text).split() if word not in _STOP and word != "用户")


# ---------------------------------------------------------------------------------------------- value tokens

_CODE_SPAN = re.compile(r"`([^`]+)`")
_IDENTIFIER = re.compile(r"(?<![\w.])(?=[\w.\-/:@]*\d)[A-Za-z0-9][\w.\-/:@]*[A-Za-z0-9]|(?<![\w.])\d(?![\w.])|"
                         r"\b[A-Za-z]+(?:[_\-./:@][A-Za-z0-9]+)+\b|\b--?[a-z][\w\-]*")
_CAPITALISED = re.compile(r"(?<![\w'])(?:[A-Z][a-z0-9]+|[A-Z]{2,}[a-z]*)(?:\s+[A-Z][a-z0-9]+)*")
_NOT_NAMES = frozenset("""
i i'm i've i'd i'll the a an my our we he she they it this that these those user please always never from when
if run use set add don't do not no yes also and but so then there here what which who how why where mr ms dr
""".split())
_CODE_LIKE = re.compile(r"^\s*(?:select|insert|update|delete|create|drop|alter|with)\b|\b(?:npm|pnpm|yarn|pip|git|"
                        r"docker|kubectl|make|cargo|go|python3?|pytest|curl|ssh|sudo|brew|apt(?:-get)?)\s+[\w\-]",
                        re.IGNORECASE)
def looks_like_code(text: str) -> bool:
    """A code span, a command or a query ("SELECT * FROM users WHERE id = 1", "npm run lint")."""
    return bool(_CODE_SPAN.search(text) or _CODE_LIKE.search(_CODE_SPAN.sub(" ", text)))


_NEGATION_MARK = re.compile(r"\b(?:not|no|never|no longer|none|nothing|without)\b|n't\b|不|没|别|无|非|戒|未", re.IGNORECASE)


@lru_cache(maxsize=4096)
def value_tokens(text: str) -> frozenset[str]:
    """What makes a statement say something else when it changes (module docstring), lowercase."""
    text = unicodedata.normalize("NFKC", text).replace("’", "'")
    found: set[str] = set()
    for span in _CODE_SPAN.findall(text):
        found.add("`" + " ".join(span.casefold().split()))
    plain = _CODE_SPAN.sub(" ", text)
    if _CODE_LIKE.search(plain):  # a command or a query: every word of it is a value
        found.update("~" + word for word in _EN_WORDS.findall(plain.casefold()))
    found.update(match.group(0).casefold() for match in _IDENTIFIER.finditer(plain))
    for match in _CAPITALISED.finditer(plain):
        words = [w for w in match.group(0).split() if w.casefold() not in _NOT_NAMES]
        if words:
            found.add(" ".join(words).casefold())
    found.update("@" + value for value, _span in times(plain))
    found.update("#" + str(zh_number(m.group(0))) for m in re.finditer(f"{_ZH_NUM}+(?=岁|个|只|年|月|号|天|次|人|位|块|元)",
                                                                       plain) if not m.group(0).isdigit())
    if _NEGATION_MARK.search(plain):
        found.add("¬")
    return frozenset(found)


# ---------------------------------------------------------------------------------------------- clauses, holders

_CLAUSE = re.compile(r"[，,;；。！!？?\n]+|\s+(?:and|but|while)\s+|\.(?:\s+|$)|(?=(?:但是|不过|而且|可是)\S)|\s+-\s+")
_KIN_ZH = ("女儿|儿子|孩子|大儿子|小儿子|大女儿|小女儿|闺女|宝宝|老大|老二|妹妹|姐姐|哥哥|弟弟|妈妈|母亲|爸爸|父亲|老婆|妻子|老公|丈夫|"
           "男朋友|女朋友|对象|爱人|爷爷|奶奶|外公|外婆|老板|领导|上司|经理|同事|朋友|室友|邻居|导师|猫|狗|猫咪|小狗|宠物|"
           "团队|公司|项目|组|部门")
_ZH_HOLDER = re.compile(rf"^(?:其实|现在|目前)?(?:用户|我)(?:的|家)?(?:的)?(?P<holder>{_KIN_ZH})")
_ZH_NAMED_HOLDER = re.compile(r"^(?P<holder>(?:测试)?(?:账号|服务器|主机|机器|数据库|接口|分支|仓库|表|库|环境)\s*[A-Za-z0-9][\w\-.]*|"
                              r"[A-Za-z0-9][\w\-.]*\d[\w\-.]*)\s*(?=的|是|在|用|跑|住|有|叫|每)")
_KIN_EN = (r"daughters?|sons?|kids?|child|children|wife|husband|partner|spouse|sisters?|brothers?|mom|mother|dad|father|"
           r"parents|boss|manager|friends?|roommates?|cats?|dogs?|pets?|puppy|kitten|girlfriend|boyfriend|fianc[eé]e?|"
           r"grandma|grandmother|grandpa|grandfather|colleagues?|coworkers?|co-workers?|neighbou?rs?|mentor|baby|"
           r"(?:older|younger|little|big|eldest|youngest) (?:sister|brother|son|daughter)")
_EN_HOLDER = re.compile(rf"^(?:(?:so|and|but|well|actually|also|now|btw)[,\s]+)*(?:(?:my|the user's|our|his|her|their)\s+"
                        rf"(?P<owned>{_KIN_EN})(?:,?\s+(?P<owned_name>(?-i:[A-Z][a-z]+)))?|(?:the|this|that)\s+(?P<thing>(?:[\w\-]+\s+){{0,2}}?[\w\-]+)|"
                        r"(?P<name>(?-i:[A-Z][a-z]+)|[\w]*\d[\w\-.]*|(?-i:host|server)\s+[\w\-.]+))"
                        r"(?='s\b|\s+(?:is|are|was|were|has|have|had|lives?|lived|works?|worked|uses?|used|runs?|"
                        r"starts?|turned|turns|moved|just|now|still|also|joined|prefers?|likes?|loves?|eats?|"
                        r"goes|go|named|called|(?:\w+ly)\s))", re.IGNORECASE)
_EN_USER_SUBJECT = re.compile(r"^(?:i|i'm|i've|i'd|i'll|the user|me|my name|myself)\b", re.IGNORECASE)
_EN_GROUP = re.compile(r"^(?:we|our (?:team|company|group|org)|the user's (?:team|company)|the user and (?:their|the) "
                       r"team)\b", re.IGNORECASE)
_ZH_GROUP = re.compile(r"^(?:我们|咱们|用户的?(?:团队|公司)|用户和团队)")
_EN_PRONOUN_HOLDERS = frozenset({"he", "she", "they", "it", "his", "her"})


def clauses_of(text: str) -> list[tuple[int, str]]:
    """(start, clause) pairs of the text: cut at punctuation, "and"/"but" and 但是/不过."""
    found, start = [], 0
    for match in _CLAUSE.finditer(text):
        if match.start() > start:
            found.append((start, text[start:match.start()]))
        start = match.end()
    if start < len(text):
        found.append((start, text[start:]))
    return [(start + len(clause) - len(clause.lstrip()), clause.strip()) for start, clause in found if clause.strip()]


_LEAD = re.compile(r"^(?:(?:from now on|going forward|actually|it turns out(?: that)?|turns out|honestly|btw|so|and|but|"
                   r"well|also|oh|these days|nowadays|lately|recently|anyway|by the way|其实|另外|对了|说实话|顺便说一下)"
                   r"[,，\s]+)+", re.IGNORECASE)
_NOT_HOLDER_NAMES = frozenset("""
from please always never use run set keep show format give write make let actually also so and but then now
today yesterday tomorrow this that these those there here it its what when where which who how why yes no
""".split())


# one name for a relative or a pet in either language, so "我女儿今年5岁" and "My daughter is 6 now" are about one
# person; 姐姐 and 妹妹 stay apart (older and younger), as "my sister" stays apart from both
_KIN = {"女儿": "daughter", "闺女": "daughter", "儿子": "son", "老婆": "wife", "妻子": "wife", "爱人": "spouse",
        "老公": "husband", "丈夫": "husband", "妈妈": "mother", "母亲": "mother", "mom": "mother", "爸爸": "father",
        "父亲": "father", "dad": "father", "老板": "boss", "上司": "boss", "领导": "boss", "经理": "manager",
        "同事": "colleague", "coworker": "colleague", "co-worker": "colleague", "猫": "cat", "猫咪": "cat", "狗": "dog",
        "小狗": "dog", "puppy": "dog", "kitten": "cat", "男朋友": "boyfriend", "女朋友": "girlfriend", "室友": "roommate",
        "朋友": "friend", "邻居": "neighbour", "neighbor": "neighbour", "宠物": "pet", "孩子": "child", "kid": "child",
        "kids": "children", "宝宝": "baby", "姐姐": "older sister", "妹妹": "younger sister", "哥哥": "older brother",
        "弟弟": "younger brother", "big sister": "older sister", "little sister": "younger sister",
        "big brother": "older brother", "little brother": "younger brother"}


def _holder(clause: str) -> tuple[str, int, bool]:
    holder, cut, named = _holder_words(clause)
    return _KIN.get(holder, holder), cut, named


def _holder_words(clause: str) -> tuple[str, int, bool]:
    """(holder, where the rest of the clause starts after the holder's words, whether the clause names its
    subject: a clause that leaves it out is about the holder of the clause before it)."""
    if _ZH_GROUP.match(clause) or _EN_GROUP.match(clause) or re.match(r"^our\b", clause, re.IGNORECASE):
        return "group", 0, True
    if match := _ZH_HOLDER.match(clause):
        holder = match.group("holder")
        return ("group", 0, True) if holder in ("团队", "公司", "项目", "组", "部门") else (holder, match.end(), True)
    match = _EN_HOLDER.match(clause)
    if (match is None or not match.group("owned")) and (_EN_USER_SUBJECT.match(clause)
                                                        or clause.startswith(("我", "用户"))):
        return "user", 0, True
    if match is not None:
        holder = (match.group("owned_name") or match.group("owned") or match.group("thing")
                  or match.group("name")).casefold()
        if holder not in _EN_PRONOUN_HOLDERS and holder not in ("user", "name") and holder not in _NOT_HOLDER_NAMES:
            return " ".join(holder.split()), match.end(), True
    if re.match(r"^(?:my|the user's)\b", clause, re.IGNORECASE):
        return "user", 0, True
    if has_cjk(clause[:3]) and (match := _ZH_NAMED_HOLDER.match(clause)):
        return " ".join(match.group("holder").casefold().split()), match.end(), True
    return "user", 0, False


# ---------------------------------------------------------------------------------------------- attributes

_PAST = re.compile(r"以前|之前(?!先)|曾经|过去|原来|早年|那时|\bused to\b|\bpreviously\b|\bformerly\b|\bback then\b|"
                   r"\bonce\b|\b(?:lived|worked)\s+(?:in|at|for)\b|\b(?:was|were)\s+\w+ing\b|\b(?:was|were)\b.*\buntil\b",
                   re.IGNORECASE)
_PERFECT = re.compile(r"\b(?:have|has|'ve)\s+(?:lived|worked)\b", re.IGNORECASE)
_PRESENT = re.compile(r"现在|如今|目前|眼下|\bnow\b|\bthese days\b|\bcurrently\b|\btoday\b", re.IGNORECASE)
_CLAIM_NEGATION = re.compile(r"\b(?:not|never|no longer|don't|doesn't|didn't|isn't|aren't|wasn't|do not|does not|quit|"
                             r"stopped)\b|n't\b|不再|不(?!错|过|久|少|多|同|管|然|如|仅|但|光|够|断|停|止|好|会|能|要|想|太)|没(?:有)?(?=住|在|用)|已经不",
                             re.IGNORECASE)
_VEGETARIAN = re.compile(r"素食|吃素|茹素|不吃肉|\bvegetarian\b|\bvegan\b|\bplant-based\b|\b(?:don't|do not|doesn't|no "
                         r"longer|never|stopped|quit) eat(?:s|ing)? (?:any )?meat\b|\bgave up meat\b", re.IGNORECASE)
_MEAT = re.compile(r"(?:红烧|回锅|东坡|卤|腊|五花|牛|猪|羊|鸡|鸭|鹅|驴|兔|烤|炖|肥)?肉(?:丝|片|串|饼|包|末|丸|夹馍)?|排骨|牛排|火腿|培根|烤鸭|鸡翅|香肠|腊肠|炸鸡|烤串|羊排|"
                   r"\b(?:meat|steak|steaks|beef|pork|bacon|ham|chicken|burgers?|sausages?|lamb|ribs|brisket|"
                   r"barbecue|bbq|salami|pepperoni|hot dogs?)\b", re.IGNORECASE)
_LIKES = re.compile(r"喜欢|爱吃|最爱|常吃|\blove|\blike|\benjoy|\bfavou?rite", re.IGNORECASE)
_RECURRING = re.compile(r"每天|每周|每晚|每早|每个?(?:月|周|星期|工作日|早上|晚上)|天天|平时|通常|一般|\bevery\b|\beach\b|\bdaily\b|"
                        r"\bweekly\b|\busually\b|\bon (?:mon|tues|wednes|thurs|fri|satur|sun)days\b|\bis at\b|\bstarts at\b|"
                        r"\bruns at\b|\bat \d|\bat (?:midnight|noon)\b", re.IGNORECASE)
_SCHEDULE_NOISE = re.compile(r"用户|我们|我|每天|每周|每晚|每早|每个|天天|平时|通常|一般|现在|如今|目前|改成|改到|改为|换成|挪到|调到|"
                             r"提前到|推迟到|开始|都|在|了|的|是|也|还|会|要|去|早上|上午|中午|下午|晚上|傍晚|凌晨|夜里|左右|"
                             r"[0-9零〇一二两三四五六七八九十半刻点分时:]|\s+", re.IGNORECASE)
_EN_SCHEDULE_STOP = _STOP | frozenset("""
i i'm
every each daily weekly morning mornings evening evenings night nights afternoon am pm a.m p.m o'clock clock
around about usually normally moved changed switched start starts started go goes going get gets got we our
is are at on now instead every day days week weeks sharp later earlier time
""".split())


def _schedule(clause: str, holder: str, past: bool, offset: int) -> list[Claim]:
    found = times(clause)
    if not found or _DATE.search(clause):
        return []  # a day on the calendar is one occasion, not the time of something that recurs
    if not _RECURRING.search(clause) and not has_cjk(clause):
        return []
    rest = clause
    for _value, (start, end) in reversed(found):
        rest = rest[:start] + " " + rest[end:]
    rest = _WEEKDAY.sub(" ", rest)
    if has_cjk(rest):
        activity = _SCHEDULE_NOISE.sub("", rest)
        activity = re.sub(r"[^\u4e00-\u9fffA-Za-z]", "", activity)
    else:
        words = [_stem(w.strip(".")) for w in re.findall(r"[a-z][a-z'.\-]*", rest.casefold())]
        words = [w.removesuffix("ing") if w.endswith("ning") is False else w[:-4] for w in words]
        activity = " ".join(sorted({w for w in words if w and w not in _EN_SCHEDULE_STOP and not w.endswith("ly")}))
    if not activity:
        return []
    value = " ".join(value for value, _span in found)
    first, last = found[0][1][0], found[-1][1][1]
    return [Claim(holder, f"schedule:{activity}", value, False, past, (offset + first, offset + last))]


def _diet(clause: str, holder: str, negated: bool, past: bool, offset: int) -> list[Claim]:
    if match := _VEGETARIAN.search(clause):
        # "不吃肉" is vegetarian in itself; "I'm not vegetarian" denies it
        denied = bool(re.search(r"\b(?:not|no longer|n't)\b[^.]{0,20}\b(?:vegetarian|vegan)\b|不(?:再)?(?:吃素|是素食)|"
                                r"不吃素", clause, re.IGNORECASE))
        return [Claim(holder, "diet", "vegetarian", denied, past, (offset + match.start(), offset + match.end()))]
    if _LIKES.search(clause) and not negated:
        return [Claim(holder, "diet", "vegetarian", True, past, (offset + m.start(), offset + m.end()), implied=True)
                for m in _MEAT.finditer(clause)]
    if re.search(r"(?:又|重新)?开始吃(?:肉|鱼|海鲜)|现在(?:也)?吃(?:肉|鱼|海鲜)|\b(?:eat|eats|eating) (?:meat|fish|seafood|chicken|"
                 r"beef|pork)\b.*\b(?:again|now)\b|\b(?:started|start) eating (?:meat|fish|seafood)\b", clause, re.IGNORECASE):
        return [Claim(holder, "diet", "vegetarian", True, past, (offset, offset + len(clause)))]
    return []


_STOP_VERB = re.compile(r"\b(?:quit|stopped|gave up|give up|cancel+ed|sold|ended|left|dropped)\b|戒|卖掉|退掉|取消", re.IGNORECASE)
_DOES_NOISE_EN = _STOP | frozenset("""
i i'm im am was were used don't doesn't didn't isn't aren't wasn't weren't never not no longer anymore any more
previously formerly once until ago last year years month months week after all it turns out turned quit stopped gave
give cancelled canceled sold ended left dropped got then there since before my our we the user's yet really
january february march april may june july august september october november december
""".split())
_DOES_NOISE_ZH = re.compile(r"用户|我们|我|已经|最近|现在|以前|之前|曾经|原来|过去|后来|不再|不|没有|没|再|了|过|的|也|还|就|都|会|去|在|"
                            r"一只|一个|一辆|一家|一位|一名|一|只|个|辆|戒掉|戒|卖掉|退掉|取消|掉|啦|呢|吧|那|这")


def _does_key(clause: str) -> tuple[str, ...]:
    """The words that say what is done in a clause, without its subject, negation, time and particles."""
    if has_cjk(clause):
        return tuple(dict.fromkeys(_DOES_NOISE_ZH.sub("", "".join(_CJK_CHARS.findall(clause)))))
    words = re.findall(r"[a-z][a-z'\-]*", clause.casefold().replace("’", "'"))
    return tuple(sorted({_root(w) for w in words if w not in _DOES_NOISE_EN and not w.endswith("ly") and len(w) > 1}))


def _root(word: str) -> str:
    """"smoking", "smokes", "smoke" -> "smok": enough to find a deed under another form of its verb."""
    word = _stem(word)
    for suffix in ("ing", "ed", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _does(clause: str, holder: str, cut: int, past: bool, offset: int) -> list[Claim]:
    """A clause denying, ending or placing in the past something its holder does ("I don't drink coffee anymore",
    "I quit smoking", "我不学日语了", "我以前养过一只金毛", "I was training for a marathon"): a claim that what
    an earlier statement says the holder does is no longer so. It needs enough words to name the deed (two, or
    one after a verb of stopping) so that "I was tired" denies nothing."""
    key = _does_key(clause[cut:])
    stop = bool(_STOP_VERB.search(clause))
    named = len(key) == 1 and key[0].isascii() and re.search(  # "I was at Netflix until March"
        rf"\b{re.escape(key[0][:1].upper() + key[0][1:])}", clause)
    if len(key) < 2 and not (stop and key) and not named:
        return []
    negated = bool(_CLAIM_NEGATION.search(clause)) or stop
    return [Claim(holder, "does:" + " ".join(key), "yes", negated, past and not negated,
                  (offset, offset + len(clause)))]


def _with_subject(rest: str) -> str:
    """The clause after its holder's words, with the user as subject, so the slot patterns of topics.py read it."""
    rest = rest.lstrip()
    if rest.startswith(("'s ", "’s ")):  # "My daughter's name is Lily": her name
        return "my " + rest[3:]
    if rest.startswith("的"):  # "我女儿的名字叫朵朵"
        return "我" + rest
    return ("我" if has_cjk(rest[:2]) else "I ") + rest


def _slot_claims(clause: str, holder: str, cut: int, whole: str, past: bool, offset: int) -> list[Claim]:
    rest = clause[cut:]
    text = _with_subject(rest) if cut else clause
    text = re.sub(r"\bI'm\b", "I am", re.sub(r"\bI've\b", "I have", text.replace("’", "'")), flags=re.IGNORECASE)
    negated_clause = bool(_CLAIM_NEGATION.search(clause))
    found = []
    for facet in topics.facets(text, context=whole):
        position = _value_span(clause, facet.value)
        negated = facet.negated or (negated_clause and facet.slot not in topics.SLOTS
                                    and bool(_CLAIM_NEGATION.search(clause[:position[0]])))
        value = str(zh_number(facet.value)) if zh_number(facet.value) is not None else facet.value
        value = _COMMUTE.get(value, value) if facet.slot == "commute" else value
        end = position[1]
        if facet.slot in topics.SLOTS and (version := _VERSION.match(clause, end)):  # "macOS 13" is not "macOS 14"
            value, end = f"{value} {version.group(1)}", version.end()
        attribute = facet.slot
        if facet.slot in topics.SLOTS and facet.slot not in topics.SINGLE_VALUED and (when := _QUALIFIER.search(clause)):
            attribute = f"{facet.slot}@{_QUALIFIERS.get(when.group(0).casefold(), when.group(0).casefold())}"
        found.append(Claim(holder if facet.holder == "user" else facet.holder, attribute, value, negated, past,
                           (offset + position[0], offset + end)))
    return found


_VERSION = re.compile(r"\s*v?(\d+(?:\.\d+)*)\b")
# a part of the day or a place that scopes a choice: coffee in the morning and green tea in the evening are two
_QUALIFIER = re.compile(r"早上|上午|中午|下午|晚上|周末|工作日|在公司|在家|\bin the (?:morning|afternoon|evening)s?\b|"
                        r"\bmornings?\b|\bevenings?\b|\bat night\b|\bweekends?\b|\bweekdays?\b|\bat work\b|\bat home\b",
                        re.IGNORECASE)
_QUALIFIERS = {"上午": "早上", "in the morning": "早上", "morning": "早上", "mornings": "早上", "in the mornings": "早上",
               "in the evening": "晚上", "evening": "晚上", "evenings": "晚上", "at night": "晚上", "in the evenings": "晚上",
               "weekend": "周末", "weekends": "周末", "weekday": "工作日", "weekdays": "工作日", "at work": "在公司",
               "at home": "在家", "in the afternoon": "下午"}
_COMMUTE = {"车": "car", "drive": "car", "drives": "car", "drove": "car", "地铁": "subway", "metro": "subway",
            "tube": "subway", "公交": "bus", "公交车": "bus", "班车": "bus", "电动车": "e-bike", "自行车": "bike", "单车": "bike",
            "bikes": "bike", "biked": "bike", "bicycle": "bike", "cycle": "bike", "cycles": "bike", "cycled": "bike",
            "高铁": "train", "火车": "train", "walks": "walk", "walked": "walk", "foot": "walk", "出租车": "taxi",
            "摩托车": "motorbike"}


def _value_span(text: str, value: str) -> tuple[int, int]:
    at = text.casefold().find(value.casefold())
    if at < 0:
        for alias, _slot, canonical in topics.ALIASES:
            if canonical == value and (at := text.casefold().find(alias.lstrip("=").casefold())) >= 0:
                return at, at + len(alias.lstrip("="))
        return 0, len(text)
    return at, at + len(value)


_ZH_OWNED = re.compile(r"^(?:其实|现在|目前)?(?P<owner>我们|咱们|我|用户)?(?:的|家的?)?(?P<attr>[\u4e00-\u9fffA-Za-z]{1,8}?)\s*"
                       r"(?:现在|目前|已经|也)?(?P<verb>用的是|换成了?|改成了?|变成了?|改为|换到了?|升级到了?|是|叫)\s*(?P<value>.+)$")
_EN_OWNED = re.compile(r"^(?:(?:so|and|but|well|actually|also|now)[,\s]+)*(?P<owner>my|our|the user's)\s+"
                       r"(?P<attr>(?:[\w\-]+\s+){0,3}?[\w\-]+)\s+(?P<verb>is|are|was|has been|is now|are now|changed to|"
                       r"moved to|switched to)\s+(?:now\s+)?(?:with\s+|at\s+|on\s+|in\s+)?(?P<value>.+)$", re.IGNORECASE)
_EN_OWNED_SWITCH = re.compile(r"^(?P<owner>i|we|the user)\s+(?:just\s+|recently\s+|finally\s+)?(?:switched|changed|moved|"
                              r"migrated|upgraded|updated)\s+(?:my|our|the user's|the)\s+(?P<attr>(?:[\w\-]+\s+){0,3}?"
                              r"[\w\-]+)\s+(?:over\s+)?to\s+(?P<value>.+)$", re.IGNORECASE)
_VALUE_TAIL = re.compile(r"(?:\s*(?:now|these days|already|了|啦|呢|吧|了吧|for now|since last \w+|last \w+|this \w+))+\s*$",
                         re.IGNORECASE)
_NOT_ATTRIBUTES = frozenset({"name", "用户", "我", "人", "一个", "一名", "一位"})


def _owned(clause: str, offset: int) -> list[Claim]:
    """"我的英文名叫 Kevin", "My phone plan is with Verizon", "手机换成了 iPhone 15", "I switched my plan to
    T-Mobile": an attribute the holder has one of at a time, named by the statement itself."""
    text = clause.rstrip("。.!！")
    match = _EN_OWNED.match(text) or _EN_OWNED_SWITCH.match(text)
    if match is None and has_cjk(text[:4]):
        match = _ZH_OWNED.match(text)
        if match is not None and not match.group("owner") and match.group("verb") in ("是", "叫"):
            return []  # "手机是…" with no owner: not said to be the user's
    if match is None:
        return []
    attribute = " ".join(match.group("attr").casefold().split())
    value = _VALUE_TAIL.sub("", match.group("value")).strip(" .。,，").casefold()
    value = re.sub(r"^(?:the|a|an)\s+", "", value)
    if not value or attribute in _NOT_ATTRIBUTES or len(value) > 40:
        return []
    owner = (match.group("owner") or "我").casefold()
    holder = "group" if owner in ("our", "we", "我们", "咱们") else "user"
    return [Claim(holder, f"has:{attribute}", value, False, False,
                  (offset + match.start("attr"), offset + match.end("value")))]


_LANGUAGES = {"中文": "zh", "汉语": "zh", "chinese": "zh", "英文": "en", "英语": "en", "english": "en", "日文": "ja",
              "日语": "ja", "japanese": "ja"}
_WRITTEN_THINGS = {"代码注释": "comments", "注释": "comments", "comments": "comments", "code comments": "comments",
                   "提交信息": "commit messages", "commit message": "commit messages", "commit messages": "commit messages",
                   "commit 信息": "commit messages", "变量名": "variable names", "variable names": "variable names",
                   "文档": "docs", "docs": "docs", "documentation": "docs", "日志": "logs", "logs": "logs",
                   "log messages": "logs", "pr 描述": "pr descriptions", "pr descriptions": "pr descriptions"}
_ZH_WRITTEN_IN = re.compile(r"(?P<attr>代码注释|注释|提交信息|commit messages?|commit 信息|变量名|文档|日志|PR 描述)\s*"
                            r"(?:以后|今后|都|统一|一律|全部|改|请|要|也|还是)*(?:用|使用|写成)\s*(?P<value>中文|英文|英语|汉语|日文|日语)",
                            re.IGNORECASE)
_EN_WRITTEN_IN = re.compile(r"(?:write|writing|keep)\s+(?:all\s+|the\s+|my\s+|your\s+)?(?P<attr>code comments|comments|commit "
                            r"messages?|variable names|docs|documentation|log messages|logs|pr descriptions)\s+in\s+"
                            r"(?P<value>english|chinese|japanese)|(?P<attr2>code comments|comments|commit messages?|variable "
                            r"names|docs|documentation|logs|pr descriptions)\s+(?:should|must)\s+be\s+(?:written\s+)?in\s+"
                            r"(?P<value2>english|chinese|japanese)", re.IGNORECASE)
_EN_HOW = re.compile(r"^(?:the user wants the assistant to\s+)?(?:(?:always|please|and)\s+)*(?:format|write|show|display|give|express|report|put|print|render)\s+"
                     r"(?P<attr>[\w\s\-]{2,30}?)\s+(?:as|in|using|with)\s+(?P<value>[^,;]+?)"
                     r"(?:\s+(?:from now on|going forward|please|by default|instead))?\s*[.!]?$", re.IGNORECASE)
_EN_USE_FOR = re.compile(r"^(?:the user wants the assistant to\s+)?(?:(?:always|please|and)\s+)*(?:use|prefer)\s+(?P<value>[\w\s\-/+#.]{2,30}?)\s+(?:for|in|when "
                         r"writing)\s+(?P<attr>[^,;]+?)(?:\s+(?:from now on|going forward|please|by default|instead))?\s*[.!]?$",
                         re.IGNORECASE)


def _how(clause: str, offset: int) -> list[Claim]:
    """How the assistant is to write something: "代码注释以后都用中文写", "Format dates as YYYY-MM-DD", "Use
    single quotes for Python strings". One way at a time for each thing."""
    if match := _ZH_WRITTEN_IN.search(clause) or _EN_WRITTEN_IN.search(clause):
        groups = match.groupdict()
        thing = (groups.get("attr") or groups.get("attr2") or "").casefold()
        value = (groups.get("value") or groups.get("value2") or "").casefold()
        attribute = _WRITTEN_THINGS.get(" ".join(thing.split()), thing)
        return [Claim("user", f"language of {attribute}", _LANGUAGES.get(value, value), False, False,
                      (offset + match.start(), offset + match.end()))]
    match = _EN_HOW.match(clause) or _EN_USE_FOR.match(clause)
    if match is None:
        return []
    key = " ".join(sorted({_root(w) for w in re.findall(r"[a-z][a-z\-]*", match.group("attr").casefold())
                           if w not in _STOP and w not in ("file", "files", "code")}))
    value = " ".join(match.group("value").casefold().split())
    if not key or not value:
        return []
    return [Claim("user", f"how:{key}", value, False, False, (offset + match.start("value"), offset + match.end("value")))]


_THING_IS = re.compile(r"^\s*(?:'s\s+|is\s+|are\s+|是|为|在)(?:now\s+|现在|目前)?(?P<verb>(?:set\s+|scheduled\s+|moved\s+)?"
                       r"(?:to|for|on|at)\s+|)?(?P<value>[^,，;；。]+?)\s*(?:now|了)?\s*[.!。]?$", re.IGNORECASE)
_THING_VERB = re.compile(r"^\s*(?P<verb>starts?|begins?|ends?|runs?|opens?|closes?|is due|expires?|lands?|ships?)\s+"
                         r"(?:on|at|in|by)?\s*(?P<value>[^,，;；。]+?)\s*(?:now|instead)?\s*[.!。]?$", re.IGNORECASE)


def _thing_is(clause: str, holder: str, cut: int, offset: int) -> list[Claim]:
    """What a named thing is, or when it starts ("The staging server is stg-02.acme.io", "The deploy freeze starts
    on Dec 22"): one value at a time. Never a person ("Melanie is going to Paris" and "Melanie is Caroline's
    friend" both hold), and only a value that names something (a number, an identifier, a name, a date)."""
    rest = clause[cut:]
    person = holder in _KIN.values() or (holder.isalpha() and " " not in holder)  # "Melanie is …", "my sister is …"
    match = _THING_VERB.match(rest) or _THING_IS.match(rest)
    if match is None or person or holder in _EN_PRONOUN_HOLDERS:
        return []  # what is said of a person in a word is many things at once, not one value replacing another
    value = " ".join(match.group("value").casefold().split())
    if not value or len(value) > 40 or not (re.search(r"\d", value) or value_tokens(match.group("value"))
                                             - {"¬"}):
        return []
    verb = (match.groupdict().get("verb") or "is").split()[0].casefold()
    verb = "is" if verb in ("to", "for", "on", "at", "", "is") else verb.removesuffix("s")
    return [Claim(holder, f"{verb}:", value, False, False, (offset + cut + match.start("value"),
                                                              offset + cut + match.end("value")))]


_TIMELINE_LEAD = re.compile(r"^(?:(?:and|but|so)\s+)?(?:现在|如今|目前|后来|now|these days|today|but now)[，,\s]*"
                            r"(?:(?:i'm|i am|i|the user is|the user|我|用户)\s*)?(?:(?:am|is|now|也|又)\s*)?"
                            r"(?:(?:in|at|to|for|a|an|在|到|是|去了?)\s*)?", re.IGNORECASE)


def _inherited(clause: str, before: list[Claim], offset: int) -> list[Claim]:
    """"…, now I'm in Rome", "…，现在在字节": a present clause of a timeline takes the past clause's attribute."""
    past = [claim for claim in before if claim.past]
    match = _TIMELINE_LEAD.match(clause)
    if not past or match is None or not _PRESENT.search(clause[:match.end()] or "x"):
        return []
    value = re.sub(r"(?:工作|上班|任职|了|呢|啦)+$", "", clause[match.end():]).strip(" .。!")
    value = re.sub(r"^(?:the|a|an)\s+", "", value, flags=re.IGNORECASE).casefold()
    if not value or len(value) > 30:
        return []
    template = past[-1]
    return [Claim(template.holder, template.attribute, value, False, False,
                  (offset + match.end(), offset + len(clause)))]


@lru_cache(maxsize=8192)
def claims(text: str) -> tuple[Claim, ...]:
    """Every claim of a statement (module docstring), in order."""
    found: list[Claim] = []
    previous = ("user", False)
    for offset, clause in clauses_of(text):
        if lead := _LEAD.match(clause):
            offset, clause = offset + lead.end(), clause[lead.end():]
        if not clause:
            continue
        holder, cut, named = _holder(clause)
        if not named and previous[1]:  # "我女儿叫朵朵，今年4岁": the daughter is four
            holder = previous[0]
        previous = (holder, named or previous[1])
        past = bool(_PAST.search(clause)) and not _PERFECT.search(clause) and not _PRESENT.search(clause)
        negated = bool(_CLAIM_NEGATION.search(clause))
        these = _slot_claims(clause, holder, cut, text, past, offset)
        these += _diet(clause, holder, negated, past, offset)
        if not these:
            these += _schedule(clause, holder, past, offset)
        if holder in ("user", "group"):
            these += (_owned(clause, offset) if not these else []) or _how(clause, offset)
        elif not these:
            these += _thing_is(clause, holder, cut, offset)
        if not these:
            these = _inherited(clause, found, offset)
        if (negated or past or _STOP_VERB.search(clause)) and not any(claim.negated or claim.past for claim in these):
            these += _does(clause, holder, cut, past, offset)
        found.extend(claim if named or claim.holder != "user" else replace(claim, elided=True) for claim in these)
    return tuple(dict.fromkeys(found))


_CHANGE_ZH = re.compile(r"(?:现在|如今|已经|目前|最近|开始|后来|改|换|搬|调|升级|迁)[^，。,]*了[。！!.]?$|^(?:现在|如今)|开始|改成|改到|换到|调到|挪到|"
                        r"提前到|推迟到")
_CHANGE_EN = re.compile(r"\bnow\b|\bthese days\b|\bnowadays\b|\bstarted\b|\banymore\b|\bno longer\b|\bmoved\b|"
                        r"\bchanged\b|\bswitched\b|\binstead\b|\bbecame\b|\bbecome\b|\bhas been moved\b|\bupdated\b",
                        re.IGNORECASE)


def states_change(text: str) -> bool:
    """The statement says something changed ("我现在在腾讯工作了", "I work at Stripe now", "switched to", "以后")."""
    return topics.has_change_cue(text) or bool(_CHANGE_ZH.search(text.strip()) or _CHANGE_EN.search(text))


def mentions(text: str, deed: Claim) -> Claim | None:
    """The clause of ``text`` in which its holder does what ``deed`` (a ``does:`` claim) denies or ends, as the
    claim it makes ("I smoke a pack a day" for "I quit smoking"), or None."""
    key = deed.attribute.removeprefix("does:").split(" ") if " " in deed.attribute else [
        deed.attribute.removeprefix("does:")]
    previous = "user"
    for offset, clause in clauses_of(text):
        holder, cut, named = _holder(clause)
        holder = holder if named else previous
        previous = holder
        if holder != deed.holder or _CLAIM_NEGATION.search(clause) or _STOP_VERB.search(clause) or _PAST.search(clause):
            continue
        said = _does_key(clause[cut:])
        found = set("".join(key)) <= set("".join(said)) if has_cjk("".join(key)) else set(key) <= set(said)
        if found:
            return Claim(holder, deed.attribute, "yes", False, False, (offset, offset + len(clause)))
    return None
