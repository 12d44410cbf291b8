"""Topics: what a statement about the user is about (its slots), and whether a newer one revises an older one.

The slot model, small enough to explain a decision in one line:

* A **facet** of a statement is (slot, value, negated, holder). A *slot* is a category that holds the user's
  current choice or state; there are two kinds.
  - **Lexicon slots**: the statement names a known value of the category: programming language
    (TypeScript, Go, ...), editor, operating system, shell, package manager, test framework, database,
    framework, cloud, indentation. *Reply language* (中文, English) and *answer length* (简洁, detailed) count
    only in a statement about answering ("用中文回答", "reply in English"), so "I speak English" and
    "我喜欢简洁的代码风格" fill neither. Aliases share one canonical value ("VS Code" = "vscode").
    A value named after a learning verb ("学过 Rust", "I learned Go") is a skill, not a choice: no facet.
  - **Predicate slots**: the predicate right after the user as subject says what the statement is about,
    whatever the value: residence (住在, 搬到, lives in, moved to), employer (在…工作, works at, joined), name
    (叫, my name is), age (…岁, years old), role (是…工程师, I'm a … engineer), hometown (来自, I'm from).
    "用户妈妈住在上海" is not the user's residence: the subject must be the user.
* **Negated**: the value follows a negation in its clause (不用, 不再, no longer, don't, instead of, over in
  "X over Y", the "from" of "from X to Y"); a switch marker (改用, 换成, switched to) starts a positive stretch.
* **Holder**: "group" when the subject is the user's team or company (我们, 我们公司, our team, we), else "user".
* **Single-valued** slots (residence, employer, name, age, role, hometown, reply language, answer length,
  indentation) hold one value at a time; the others hold several (a person uses more than one language).
* A **change cue** marks a statement that revises an earlier one: 以后, 今后, 从现在起, 改用, 换成, 不再, 不用…了,
  其实, 搬到, from now on, switched to, no longer, instead of, anymore, actually, moved to, changed to.

``revises(newer, older)`` (no longer on the write path: the write decision is decide.py's, over claims.py's
statement model, which reads these facets; ``revises`` is what its tests still check): the newer statement replaces
the older when it speaks of every (slot, holder) the older one does (else replacing the older would lose what
the newer does not restate: "switched to Cursor" leaves "平时用 Neovim 写 Python" live, with its Python) and,
for a slot they share, one of: (1) the newer has a change cue and names a value of the slot positively (a new
choice replaces every older one of the slot); (2) the newer negates a value the older affirms ("I don't use
Windows any more"); (3) the slot is single-valued and the values differ ("I moved to Shanghai" after "I live
in Hangzhou"). Anything else -- sharing a word, a value, or a slot without one of these -- is not a revision.

Tags (``keyword_tags``) name the topic: the entities and nouns a statement names, found RAKE-style between stop
words ("The user works at Alibaba Cloud" -> "alibaba cloud"; "用户喜欢用 TypeScript 写前端" -> "typescript",
"前端"), lowercase, then its slots ("employer", "programming language"); never a sentence's first word as such.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from vecmem.validation import MAX_TAG_CHARS

__all__ = ["Facet", "SLOTS", "SINGLE_VALUED", "facets", "has_change_cue", "keyword_tags", "revises", "topic_slots"]

# slot -> canonical value -> aliases (the canonical value is an alias of itself). An alias starting with "=" is
# matched case-sensitively: "Go", "Swift" and "Windows" are values, "go", "swift" and "windows" ordinary words.
SLOTS: dict[str, dict[str, tuple[str, ...]]] = {
    "programming language": {v: (v,) for v in (
        "python", "typescript", "javascript", "java", "rust", "c++", "c#", "kotlin", "scala", "php", "elixir",
        "haskell", "lua")} | {"go": ("=Go", "golang", "go语言"), "swift": ("=Swift",), "ruby": ("=Ruby",),
                              "julia": ("=Julia",), "dart": ("=Dart",), "r": ("r语言",)},
    "editor": {"vscode": ("vs code", "vscode", "visual studio code"), "neovim": ("neovim", "nvim"), "vim": ("vim",),
               "emacs": ("emacs",), "intellij": ("intellij",), "pycharm": ("pycharm",), "webstorm": ("webstorm",),
               "sublime": ("sublime text", "=Sublime"), "cursor": ("=Cursor",), "zed": ("=Zed",),
               "xcode": ("xcode",), "android studio": ("android studio",), "helix": ("=Helix", "helix editor"),
               "goland": ("goland",), "eclipse": ("eclipse",), "notepad++": ("notepad++",)},
    "operating system": {"macos": ("macos", "mac", "os x"), "windows": ("=Windows", "win11", "win10"),
                         "linux": ("linux",), "ubuntu": ("ubuntu",), "debian": ("debian",), "fedora": ("fedora",),
                         "arch linux": ("arch linux",), "wsl": ("wsl",)},
    "shell": {"zsh": ("zsh",), "bash": ("bash",), "fish shell": ("fish shell",), "powershell": ("powershell",),
              "nushell": ("nushell",)},
    "package manager": {v: (v,) for v in ("npm", "pnpm", "yarn", "bun", "pip", "poetry", "uv", "conda", "cargo")}
    | {"homebrew": ("homebrew", "brew")},
    "indentation": {"tabs": ("tabs", "tab", "制表符"), "spaces": ("spaces", "空格", "两个空格", "四个空格")},
    "reply language": {"zh-hant": ("繁体中文", "繁体字", "繁體中文", "traditional chinese"),
                       "zh-hans": ("简体中文", "简体字", "simplified chinese"), "zh": ("中文", "汉语", "chinese"), "en": ("英文", "英语", "english"),
                       "ja": ("日语", "日文", "japanese")},
    "answer length": {"short": ("简洁", "简短", "简明", "concise", "concisely", "brief", "briefly", "short"),
                      "long": ("详细", "详尽", "detailed", "verbose", "thorough", "long")},
    "test framework": {v: (v,) for v in ("jest", "vitest", "pytest", "mocha", "unittest", "junit")},
    "database": {"postgresql": ("postgresql", "postgres"), "mysql": ("mysql",), "sqlite": ("sqlite",),
                 "tidb": ("tidb",), "oceanbase": ("oceanbase",), "clickhouse": ("clickhouse",), "mariadb": ("mariadb",),
                 "sql server": ("sql server", "mssql"), "dynamodb": ("dynamodb",), "cassandra": ("cassandra",),
                 "mongodb": ("mongodb",), "redis": ("redis",), "oracle": ("=Oracle",)},
    "framework": {v: (v,) for v in ("react", "vue", "angular", "svelte", "django", "flask", "fastapi", "rails",
                                    "nestjs")} | {"next.js": ("next.js", "nextjs"), "express": ("=Express",),
                                                  "spring": ("spring boot", "=Spring")},
    "cloud": {"aws": ("aws",), "gcp": ("gcp",), "azure": ("azure",), "aliyun": ("阿里云", "aliyun"),
              "tencent cloud": ("腾讯云",), "huawei cloud": ("华为云",), "vercel": ("vercel",), "heroku": ("heroku",),
              "fly.io": ("fly.io",), "netlify": ("netlify",), "render": ("=Render",), "railway": ("=Railway",),
              "cloudflare": ("cloudflare",), "digitalocean": ("digitalocean",)},
    "browser": {"chrome": ("=Chrome", "chrome浏览器", "谷歌浏览器"), "firefox": ("firefox", "火狐"), "safari": ("=Safari",),
                "edge": ("=Edge",), "arc": ("=Arc",), "brave": ("=Brave",)},
    "chat app": {"dingtalk": ("钉钉", "dingtalk"), "feishu": ("飞书", "lark"), "wecom": ("企业微信", "wecom"),
                 "slack": ("slack",), "teams": ("microsoft teams", "=Teams"), "discord": ("discord",)},
    "issue tracker": {"jira": ("jira",), "linear": ("=Linear",), "trello": ("trello",), "asana": ("asana",),
                      "tapd": ("tapd",), "github issues": ("github issues",), "禅道": ("禅道",)},
    "ci": {"jenkins": ("jenkins",), "github actions": ("github actions",), "gitlab ci": ("gitlab ci", "gitlab-ci"),
           "circleci": ("circleci",), "travis": ("travis ci", "travis"), "buildkite": ("buildkite",)},
    "phone": {"iphone": ("iphone", "苹果手机"), "pixel": ("=Pixel",), "huawei phone": ("华为手机", "华为 mate", "=Mate"),
              "xiaomi phone": ("小米手机",), "samsung": ("samsung", "三星"), "oneplus": ("oneplus", "一加")},
    "instrument": {"violin": ("violin", "小提琴"), "cello": ("cello", "大提琴"), "piano": ("piano", "钢琴"),
                   "guitar": ("guitar", "吉他"), "drums": ("drums", "架子鼓"), "flute": ("flute", "长笛"),
                   "saxophone": ("saxophone", "sax", "萨克斯"), "trumpet": ("trumpet", "小号"), "ukulele": ("ukulele", "尤克里里"),
                   "guzheng": ("guzheng", "古筝"), "erhu": ("erhu", "二胡")},
    "drink": {"coffee": ("coffee", "black coffee", "咖啡", "黑咖啡", "美式"), "tea": ("tea", "green tea", "black tea", "茶",
                                                                                   "绿茶", "红茶", "乌龙茶"),
              "soy milk": ("soy milk", "豆浆"), "milk": ("=milk", "牛奶"), "juice": ("juice", "果汁"), "beer": ("beer", "啤酒"),
              "wine": ("=wine", "红酒", "葡萄酒"), "water": ("=water", "白开水")},
    "work shift": {"day shift": ("day shifts", "白班"), "night shift": ("night shifts", "夜班"),
                   "early shift": ("早班",), "late shift": ("晚班",)},
    "english variant": {"british english": ("uk english", "british spelling"),
                        "american english": ("us english", "american spelling")},
    "code hosting": {"github": ("github",), "gitlab": ("gitlab",), "gitee": ("gitee", "码云"),
                     "bitbucket": ("bitbucket",), "gerrit": ("gerrit",)},
    "notes app": {"notion": ("notion",), "obsidian": ("obsidian",), "evernote": ("evernote", "印象笔记"),
                  "onenote": ("onenote",), "语雀": ("语雀",)},
}
SINGLE_VALUED = frozenset({"residence", "employer", "name", "age", "role", "hometown", "reply language",
                           "answer length", "indentation", "team", "car", "phone", "browser", "chat app",
                           "issue tracker", "ci", "work shift", "english variant", "commute", "grade"})
_ANSWERING = r"回答|回复|答复|解释|跟用户说|和用户说|跟我说|和我说|对我说|\banswer|\brepl(?:y|ies)\b|\brespond|\bresponses?\b|" \
             r"\bexplanations?\b|\bexplain\b|\btalk to (?:me|the user)\b"
# lexicon slots whose values are ordinary words elsewhere count only in a statement of their context
_CONTEXT = {
    "reply language": re.compile(_ANSWERING, re.IGNORECASE),
    "answer length": re.compile(_ANSWERING, re.IGNORECASE),
    "phone": re.compile(r"手机|phone", re.IGNORECASE),
    "indentation": re.compile(r"缩进|制表符|indent|\btabs?\b.{0,30}\bspaces\b|\bspaces\b.{0,30}\btabs?\b", re.IGNORECASE),
}


def _alias_pattern(alias: str) -> str:
    exact = alias.startswith("=")
    alias = alias.lstrip("=")
    return f"(?-i:{re.escape(alias)})" if exact else re.escape(alias)


def _values_pattern(aliases: list[str]) -> str:
    """One alternation of the aliases, longest first. A Latin value is a whole word: "java" is not in "javascript",
    "go" not in "good"; Chinese may touch it: "用Go写". The word test is written once around the Latin ones (not
    once per alias, which made compiling the pattern a sizeable part of a command's start): an alias's first
    character decides its group, so at any position only one group can match, and within it the order is kept."""
    latin = [_alias_pattern(alias) for alias in aliases if alias.lstrip("=")[0].isascii()]
    other = [_alias_pattern(alias) for alias in aliases if not alias.lstrip("=")[0].isascii()]
    return "|".join([rf"(?<![A-Za-z0-9+#.\-])(?:{'|'.join(latin)})(?![A-Za-z0-9+#]|\.[a-z])", *other])


def _aliases() -> list[tuple[str, str, str]]:
    """(alias, slot, canonical value); the canonical value is an alias too unless a case-sensitive one stands in."""
    found = []
    for slot, values in SLOTS.items():
        for value, aliases in values.items():
            exact = {alias[1:].casefold() for alias in aliases if alias.startswith("=")}
            found += [(alias, slot, value) for alias in dict.fromkeys(
                [*([] if value in exact else [value]), *aliases])]
    return sorted(found, key=lambda item: (-len(item[0].lstrip("=")), item[0]))  # "arch linux" before "linux"


ALIASES = _aliases()  # (alias, slot, canonical value), longest first
_LOOKUP = {alias.lstrip("=").casefold(): (slot, value) for alias, slot, value in ALIASES}
_VALUE = re.compile(_values_pattern([alias for alias, _slot, _value in ALIASES]), re.IGNORECASE)
_SKILL = re.compile(r"学过|学习|在学|正在学|会写|会用|懂|熟悉|了解|\blearn(?:ed|ing|t)?\b|\bstud(?:y|ied|ying)\b|"
                    r"\bfamiliar with\b|\bexperience (?:with|in)\b|\byears of\b", re.IGNORECASE)
_NEGATION = re.compile(r"不再用|不再|不用|不想用|不喜欢|不爱|讨厌|受不了|别(?!人)再?用?|不要用|不要|弃用|放弃|抛弃|没再用|而不是|"
                       r"\bno longer\b|\bnot\b|n't\b|\bnever\b|\binstead of\b|\brather than\b|\bover\b|"
                       r"\bstop(?:ped)? using\b|\bquit\b|\banymore\b", re.IGNORECASE)
_FROM_TO = re.compile(r"\bfrom\b.{1,40}?\bto\b|从.{1,20}?(?:换成|改成|改用|换到|转到|迁移到|到)", re.IGNORECASE)
_POSITIVE = re.compile(r"改用|换成|换用|改成|改为|转向|迁到|迁移到|改喝|改吃|\bswitch(?:ed|ing)? (?:over )?to\b|\bmov(?:ed|ing) to\b|"
                       r"\bchanged? to\b|\bnow (?:use|prefer)s?\b", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[，,;；。!?！？]\s*|\.(?:\s|$)|\bbut\b|但是|不过|而是", re.IGNORECASE)
_CHANGE = re.compile(
    r"以后|今后|从现在(?:开始|起)|往后|改用|换成|换用|改成|改为|不再|不用\S*了|不\S{1,6}了|现在(?:改)?用|其实|更正|搬到|搬去|搬家|跳槽|"
    r"\bfrom now on\b|\bgoing forward\b|\bswitch(?:ed|ing)? (?:over )?(?:to|from)\b|\binstead\b|\bno longer\b|\banymore\b|"
    r"\bany more\b|\bnow (?:i |we |the user )?(?:use|prefer)s?\b|\bactually\b|\bchanged? to\b|\bmov(?:ed|ing) to\b|"
    r"\brelocated\b|\blet'?s use\b|\bnot .{1,30} but\b|\brewr(?:ote|itten)\b|\bmigrated\b|重写|迁到|迁移到|升级到|改喝|改吃",
    re.IGNORECASE)

_ZH_SUBJECT = (r"(?:^|用户和其他人|用户|我)(?:现在|目前|如今|一直|也|还|已经|刚|刚刚|平时|本人|以前|之前|曾经|原来|过去|不再|不|没有|没|"
               r"上个月|上周|去年|今年|最近|前段时间|刚才|也已经|\d{4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{1,2}月(?:\d{1,2}[日号])?|于)*")
_EN_SUBJECT = r"(?:^|\b(?:the user and others|the user|i|user)\s+)(?:(?:now|currently|still|also|just|recently|finally|actually|" \
              r"don't|do not|doesn't|does not|didn't|no longer|never|used to|previously|formerly|once)\s+)*"
_ROLE_ZH = (r"工程师|程序员|开发者?|经理|设计师|学生|老师|教师|医生|护士|研究员|分析师|架构师|顾问|作家|律师|会计|创始人|实习生|"
            r"运营|科学家|博士生?|研究生|本科生|主管|总监|负责人")
_ROLE_EN = (r"engineer|developer|programmer|scientist|manager|designer|student|teacher|professor|doctor|nurse|"
            r"researcher|analyst|architect|consultant|writer|lawyer|accountant|founder|ceo|cto|intern|freelancer|"
            r"artist|musician|photographer|chef|lead|administrator|admin|devops|sre")
_ZH_VALUE = r"(?P<value>[^，,。；;！!？?\s了的]{1,12})"
_EN_VALUE = r"(?P<value>[\w.'&\-]+(?: (?!(?:and|but|on|in|at|for|with|since|because|near|as|to|from|of|now|last|this|next|" \
            r"yesterday|recently|ago|these|a|an|the|two|three|few|several|for)\b)[\w.'&\-]+){0,3})"
_PREDICATES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((slot, re.compile(pattern, re.IGNORECASE)) for slot, pattern in (
    ("residence", _ZH_SUBJECT + r"(?:住在|居住在|住于|现居|定居在?|生活在|搬到了?|搬去了?|搬家到了?)" + _ZH_VALUE),
    ("residence", _EN_SUBJECT + r"(?:lives?|lived|living|am living|is living|moved|has moved|have moved|relocated|"
                                r"am based|is based|resides?)\s+(?:in|to|at)\s+(?:the city of\s+)?" + _EN_VALUE),
    ("employer", _ZH_SUBJECT + r"在(?!家|公司|这|那|远程)(?P<value>[^，,。；;\s]{1,12}?)(?:工作|上班|任职|实习)"),
    ("employer", _ZH_SUBJECT + r"(?:入职了?|跳槽到了?|就职于|供职于)" + _ZH_VALUE),
    ("employer", _EN_SUBJECT + r"(?:works?|worked|am working|is working|started working|joined|has joined|have joined)"
                               r"\s+(?:at\s+|for\s+)?(?!home\b|night\b|nights\b|the weekend|weekends|a living|myself|"
                               r"themselves|remotely|hard|late|early|on\b|with\b|as\b|in\b|out\b|from\b)" + _EN_VALUE),
    ("employer", r"\b(?:the user's|my)\s+(?:employer|company) is\s+" + _EN_VALUE),
    ("name", _ZH_SUBJECT + r"(?:叫|名叫|的名字(?:是|叫))(?P<value>[^，,。；;！!？?\s]{1,12})"),
    ("name", r"(?:^|用户|我)是(?P<value>[李王张刘陈杨赵黄周吴徐孙胡朱高林何郭马罗梁宋郑谢韩唐冯于董萧程曹袁邓许傅沈曾彭吕苏卢蒋蔡贾"
             r"丁魏薛叶阎余潘杜戴夏钟汪田任姜范方石姚谭廖邹熊金陆郝孔白崔康毛邱秦江史顾侯邵孟龙万段章钱汤尹黎易常武乔贺赖龚文]"
             r"[\u4e00-\u9fff]{1,2})(?:$|[，,。；;！!])"),
    ("name", r"\b(?:the user's|my) name is\s+" + _EN_VALUE),
    ("name", _EN_SUBJECT + r"(?:am|is) (?:named|called)\s+" + _EN_VALUE),
    ("name", r"\b(?:call me|calls? themselves)\s+" + _EN_VALUE),
    ("age", _ZH_SUBJECT + r"(?:今年)?(?P<value>\d{1,3}|[一二三四五六七八九十]{1,3})岁"),
    ("age", _EN_SUBJECT + r"(?:am|is|turned|just turned)\s+(?P<value>\d{1,3})(?:\s+years?\s+old)?"
                          r"(?=\s*(?:$|[.!,;]|now\b|already\b|this\b|last\b|today\b|yesterday\b|in\b|on\b))"),
    ("grade", _ZH_SUBJECT + r"(?:在)?(?:上|读)(?P<value>[一二三四五六七八九十\d]{1,2}年级|初[一二三]|高[一二三]|大[一二三四])"),
    ("grade", _EN_SUBJECT + r"(?:is|am|'s)\s+(?:now\s+)?in\s+(?P<value>\d{1,2}(?:st|nd|rd|th)|first|second|third|fourth|fifth|"
                            r"sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)\s+grade"),
    ("employer", _ZH_SUBJECT + r"在(?!家|公司|这|那|远程)(?P<value>[^，,。；;\s]{2,12}?)(?:做|当|担任)(?:一名|一个|一位)?"
                               r"[^，,。；;\s]{0,6}?(?:" + _ROLE_ZH + ")"),
    ("role", _ZH_SUBJECT + r"在[^，,。；;\s]{2,12}?(?:做|当|担任)(?:一名|一个|一位)?(?P<value>[^，,。；;\s]{0,6}?(?:" + _ROLE_ZH + "))"),
    ("role", _ZH_SUBJECT + r"(?:在[^，,。；;\s]{1,8}?)?(?:转岗|转行|改行|转)?(?:是|做|当|担任)(?:一名|一个|一位|个)?(?P<value>[^，,。；;\s]{0,8}?(?:" + _ROLE_ZH + "))"),
    ("role", _EN_SUBJECT + r"(?:am|is|works? as|worked as)\s+(?:a|an)\s+(?P<value>(?:[\w\-]+ ){0,3}?(?:" + _ROLE_EN + r"))\b"),
    ("team", _EN_SUBJECT + r"(?:am|is|'m)\s+(?:now\s+)?on\s+the\s+(?P<value>[\w\-]+(?: [\w\-]+)?)\s+team\b"),
    ("team", _ZH_SUBJECT + r"在(?P<value>[^，,。；;\s]{1,8}?)(?:组|团队|小组)(?:$|[，,。；;了])"),
    ("car", _EN_SUBJECT + r"(?:drives?|drove)\s+(?:a|an)\s+(?P<value>(?:[\w\-]+ ){0,3}[\w\-]+)"),
    ("car", _ZH_SUBJECT + r"开(?:的是)?(?:一辆)?(?P<value>[^，,。；;！!？?]{2,16}?)(?:上班)?(?:$|[，,。；;了])"),
    ("name", r"(?:称呼我为|称呼我|叫我|称呼用户为|叫用户)(?P<value>[^，,。；;！!？?\s了就吧]{1,8})"),
    ("commute", _ZH_SUBJECT + r"(?:每天|平时|一般|都|改|现在|也)*(?:坐|乘|搭|骑|开|打)(?:着)?(?P<value>地铁|公交车?|电动车|自行车|单车|"
                              r"车|出租车|高铁|火车|摩托车|班车)?(?:去)?(?:上班|上学|通勤)"),
    ("commute", _EN_SUBJECT + r"(?:commutes?|commuted|go|goes|get|gets)\s+(?:to work\s+)?(?:by|on)\s+(?:the\s+)?"
                              r"(?P<value>car|bus|train|subway|metro|tube|bike|bicycle|foot|ferry|scooter)"),
    ("commute", _EN_SUBJECT + r"(?:take|takes|took|ride|rides|rode)\s+(?:the\s+|a\s+|my\s+)?"
                              r"(?P<value>train|bus|subway|metro|tube|bike|ferry|scooter)(?:\s+to work)?\b"),
    ("commute", _EN_SUBJECT + r"(?P<value>drive|drives|drove|bike|bikes|biked|walk|walks|walked|cycle|cycles|cycled)\s+to\s+work"),
    ("hometown", _ZH_SUBJECT + r"(?:来自|老家(?:在|是)|出生在|出生于)" + _ZH_VALUE),
    ("hometown", _ZH_SUBJECT + r"是(?P<value>[^，,。；;\s的]{2,6})人$"),
    ("hometown", _EN_SUBJECT + r"(?:am from|is from|comes? from|came from|grew up in|was born in)\s+" + _EN_VALUE),
))
_GROUP_ZH = re.compile(r"\s*(?:用户的(?:团队|公司|项目组|组|部门)|用户和团队|用户和其他人|我们|咱们)")
_GROUP_EN = re.compile(r"\s*(?:the user's (?:team|company|group)|the user and (?:their|the) team|the user and others|"
                       r"our (?:team|company|group)|we)\b", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Facet:
    """One thing a statement says about the user: a value of a slot, negated or not, and whose it is."""

    slot: str
    value: str
    negated: bool
    holder: str  # "user" or "group"


def _marks(pattern: re.Pattern[str], text: str, *, at_end: bool, state: bool) -> list[tuple[int, bool]]:
    return [(m.end() if at_end else m.start(), state) for m in pattern.finditer(text)]


def _negations(text: str) -> list[tuple[int, bool]]:
    """(position, negated-from-here) marks: negations turn a stretch negative; breaks and switches reset it."""
    marks = _marks(_NEGATION, text, at_end=False, state=True) + _marks(_FROM_TO, text, at_end=False, state=True)
    for pattern in (_CLAUSE_BREAK, _POSITIVE, _FROM_TO):
        marks += _marks(pattern, text, at_end=True, state=False)
    return sorted(marks)


def _last_mark(marks: list[tuple[int, bool]], position: int) -> bool:
    state = False
    for at, value in marks:
        if at > position:
            break
        state = value
    return state


def _clean_value(value: str) -> str:
    return _ARTICLE.sub("", value.strip(" .,'\"")).casefold()


def _holder(text: str) -> str:
    return "group" if _GROUP_ZH.match(text) or _GROUP_EN.match(text) else "user"


@lru_cache(maxsize=8192)  # a pure function of the text, asked again for the same memories on every write
def facets(text: str, context: str | None = None) -> tuple[Facet, ...]:
    """Every facet of a statement (see the module docstring), in order of appearance. ``context``: the whole
    statement when ``text`` is one clause of it ("回答我的时候请用中文，简洁一点": 简洁 is about answering)."""
    holder = _holder(text)
    negations = _negations(text)
    # a learning verb makes the rest of its clause a skill ("学过 Rust", "I learned Go"), not a choice
    skills = sorted(_marks(_SKILL, text, at_end=False, state=True) + _marks(_CLAUSE_BREAK, text, at_end=True,
                                                                            state=False))
    found: list[Facet] = []
    named: list[tuple[tuple[int, int], Facet | None]] = []  # each lexicon value's span, and its facet if it counts
    for match in _VALUE.finditer(text):
        slot, value = _LOOKUP[match.group(0).casefold()]
        needs = _CONTEXT.get(slot)
        counts = (needs is None or needs.search(context or text)) and not _last_mark(skills, match.start())
        facet = Facet(slot, value, _last_mark(negations, match.start()), holder) if counts else None
        named.append((match.span(), facet))
        if facet is not None:
            found.append(facet)
    for slot, pattern in _PREDICATES:
        for match in pattern.finditer(text):
            start, end = match.span("value")
            inside = {facet for (s, e), facet in named if s < end and start < e}
            if inside and slot == "residence":  # "moved to Neovim" is a switch of editor, not a residence
                continue
            value = _clean_value(match.group("value"))
            if value and not any(f.slot == slot for f in found):
                # "在阿里云工作": 阿里云 is the employer here, not a choice of cloud
                found = [f for f in found if f not in inside]
                found.append(Facet(slot, value, _last_mark(negations, start), "user"))
    return tuple(dict.fromkeys(found))


def topic_slots(text: str) -> frozenset[str]:
    """Which slots (programming language, editor, residence, ...) the text says something about."""
    return frozenset(facet.slot for facet in facets(text))


def has_change_cue(text: str) -> bool:
    """The statement revises an earlier one ("以后都用", "改用", "不再", "from now on", "switched to", "no longer")."""
    return bool(_CHANGE.search(text))


def _same_value(left: str, right: str) -> bool:
    return left == right or left in right or right in left


def revises(newer: str, older: str, *, change: bool | None = None) -> str | None:
    """Why the newer statement replaces the older one (the rule of the module docstring), or None.
    ``change``: whether the newer one carries a change cue, when known better than its text shows."""
    new_facets, old_facets = facets(newer), facets(older)
    if not new_facets or not {(f.slot, f.holder) for f in old_facets} <= {(f.slot, f.holder) for f in new_facets}:
        return None  # the older one says more than the newer restates: replacing it would lose that
    change = has_change_cue(newer) if change is None else change
    for new in new_facets:
        for old in (old for old in old_facets if (old.slot, old.holder) == (new.slot, new.holder)):
            slot = new.slot
            if change and not new.negated:
                return f"a new choice of {slot} ({new.value}) with a change cue"
            if new.negated and not old.negated and _same_value(new.value, old.value):
                return f"no longer {old.value} ({slot})"
            if slot in SINGLE_VALUED and not new.negated and not old.negated and not _same_value(new.value, old.value):
                return f"{slot} is now {new.value} (was {old.value})"
    return None


# ---------------------------------------------------------------------------------------------- tags

# RAKE-style keyword extraction: stop words and punctuation delimit candidate phrases; what is left between them
# names the topic ("The user works at Alibaba Cloud" -> "alibaba cloud"). Chinese is cut at function words,
# common verbs and time words ("用户喜欢用 TypeScript 写前端" -> "前端").
_EN_STOP = frozenset("""
a about above after again against all also always am an and any are as at be because been before being below
between both but by can can't cannot could did didn't do does doesn't doing don't down during each even ever every
few for from further had has have having he her here hers him his how however i i'd i'll i'm i've if in into is
isn't it it's its itself just let let's like likes liked love loves loved me more most much must my myself never no
nor not now of off often on once only or other our ours out over own please prefer prefers preferred rather really
same she should so some still such than that that's the their them then there these they this those through to too
under until up us usually very was we were what when where which while who whom why will with would you your yours
user user's users assistant assistant's wants want wanted use uses used using work works worked working live lives
lived living is was get gets got go goes went make makes made put puts take takes took said say says tell tells told
know knows knew think thinks thought feel feels felt keep keeps kept need needs needed try tries tried start starts
started stop stops stopped switch switches switched moved move moves called named name today yesterday tomorrow
tonight week weekend month year years day days time times lot lots thing things stuff way ways something anything
everything one ones yes yeah ok okay oh well actually maybe perhaps sure quite pretty lately recently currently
longer anymore instead turns turned out last next ago based back answer answers reply replies respond explain add
added others
""".split())
_ZH_STOP = sorted("""
用户 要求 希望 以后 今后 从现在起 从现在开始 往后 都 用 使用 喜欢 不喜欢 讨厌 偏好 习惯 住在 在 是 的 了 和 与 跟 也 还 很 非常
一个 一只 一名 一位 一些 一点 不 不要 别 再 写 做 叫 有 养 负责 工作 上班 对 把 被 给 让 从 到 换成 改用 不再 现在 目前 每天 早上
晚上 平时 一般 通常 经常 已经 正在 过 会 能 可以 想 要 去 来 这次 这个 那个 吧 啊 呢 吗 回答 回复 时候 时 得 地 着 又 就 才 更
最 比较 今天 昨天 明天 其实 因为 所以 但是 不过 而且 或者 还是 我 我们 你 他 她 它 他们 们 个 些 自己 今年 岁 觉得 感觉 真的
有关 关于 用户和团队 用户和其他人 用户的 助手 一定 务必 必须 吃 喝 没有 没 出在 本次 结论 发现 问题
""".split(), key=len, reverse=True)
_ZH_CUT = re.compile("|".join(map(re.escape, _ZH_STOP)))
_EN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#.'\-]*[A-Za-z0-9+#]|[A-Za-z]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_PHRASE_BREAK = re.compile(r"[^\w\s+#.'\-]|\.(?:\s|$)|\s-\s")


def _latin_phrases(text: str) -> list[str]:
    phrases: list[str] = []
    for chunk in _PHRASE_BREAK.split(_CJK_RUN.sub(" , ", text)):
        words: list[str] = []
        for word in [*_EN_WORD.findall(chunk), ""]:
            lowered = word.casefold().strip(".'")
            if not lowered or lowered in _EN_STOP or lowered.endswith("ly") or lowered.isdigit():
                if words:
                    phrases.append(" ".join(words[-3:]))
                words = []
            elif len(lowered) > 1 or word[0].isupper():
                words.append(lowered)
    return phrases


def _chinese_phrases(text: str) -> list[str]:
    return [piece for run in _CJK_RUN.findall(text) for piece in _ZH_CUT.split(run) if 2 <= len(piece) <= 6]


def keyword_tags(text: str, *, limit: int = 6) -> list[str]:
    """Tags naming the topic of a statement, lowercase: the entities and nouns it names, then its slots."""
    found = facets(text)
    values = [facet.value for facet in found if facet.slot in SLOTS]  # "Go" is a value even where "go" is a verb
    named = [*_latin_phrases(text), *_chinese_phrases(text)]
    named += [value for value in values if not any(value in phrase for phrase in named)]
    tags = [tag for tag in named if len(tag) <= MAX_TAG_CHARS]  # a run of letters is no topic (and the bank refuses it)
    return list(dict.fromkeys([*tags, *(facet.slot for facet in found)]))[:limit]
