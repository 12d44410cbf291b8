"""Third-person rewriting of one clause the user said, so memories read alike whoever wrote them.

Every pronoun of the clause is rewritten, not only the first word's, and the verb after each "I" agrees:

* Chinese: 我 -> 用户, 我的 -> 用户的, 我们公司/我们团队 -> 用户的公司/用户的团队, 我们 -> 用户和团队; a clause whose
  subject was left out ("在阿里云工作", said after "我是李伟") gets 用户 in front; a directive to the assistant
  ("以后都用 pnpm", "请用中文回答我") becomes 用户要求… ("用户要求以后都用 pnpm").
* English: I -> the user (with the verb in the third person: work -> works, have -> has, don't -> doesn't;
  past tenses and modals unchanged), I'm/I've/I'd/I'll -> the user is/has/would/will, me -> the user,
  my/mine -> the user's, myself -> themselves, our -> the user's, we -> the user and their team (at work) or
  the user and others; "I'm Li Wei" -> "The user's name is Li Wei."; a directive ("From now on, use pnpm",
  "Never put keys in code") -> "The user wants the assistant to use pnpm from now on", and in an instruction
  you/your -> the assistant/the assistant's.
"""

from __future__ import annotations

import re

from vecmem.text import CJK_RUN, drop_full_stop, has_cjk

__all__ = ["named", "third_person"]

_CJK_CHAR = re.compile(CJK_RUN.pattern.rstrip("+"))
_LATIN_WORD = re.compile(r"[A-Za-z]+")

# ---------------------------------------------------------------------------------------------- Chinese

_ZH_TRAILING = re.compile(r"[吧啊呀哦呢嘛啦哈~～]+$")
_ZH_OPENERS = re.compile(r"^(?:哦|嗯|那个|对了|顺便说一下|顺便说下|话说|另外|还有|然后|而且|并且|但是|不过|同时)[，,：:\s]*")
_ZH_GROUP = re.compile(r"^(?:我们|咱们)(团队|公司|项目组|项目|组|部门)")
_ZH_DIRECTIVE_OPENERS = re.compile(r"^(?:请|麻烦|劳驾)?(?:你)?")
_ZH_WORK = re.compile(r"团队|公司|项目|代码|部署|上线|需求|接口|服务|系统|开发|产品|客户|同事|重构|排查|数据库|测试|版本|线上|架构")
_ZH_ANSWER_OBJECT = re.compile(r"(回答|回复|答复|告诉|提醒|通知)用户$")


def _zh_pronouns(text: str) -> str:
    text = _ZH_GROUP.sub(lambda m: "用户的" + m.group(1), text)
    group = "用户和团队" if _ZH_WORK.search(text) else "用户和其他人"  # 我们 at work is the team
    text = re.sub(r"我们|咱们", group, text)
    return text.replace("我的", "用户的").replace("我", "用户")


def _chinese(clause: str, memory_type: str) -> str:
    # the final full stop goes, never the dot of an abbreviation the clause ends with ("在 U.S.", "Acme Inc.")
    text = _ZH_OPENERS.sub("", drop_full_stop(clause.strip().rstrip("。！？；!?;， ,")).rstrip("。！？；!?;， ,"))
    text = _ZH_TRAILING.sub("", text).rstrip("，, ")
    if memory_type == "instruction":  # in an instruction, "you" is the assistant
        if re.match(r"我|咱们", text):  # "我希望你以后用中文回答" -> "用户希望助手以后用中文回答"
            return _zh_pronouns(text).replace("你们", "助手").replace("你", "助手")
        text = _ZH_ANSWER_OBJECT.sub(r"\1", _zh_pronouns(_ZH_DIRECTIVE_OPENERS.sub("", text, count=1)))
        text = text.replace("你们", "助手").replace("你", "助手")
        return text if text.startswith("用户") else "用户要求" + text
    if memory_type == "conclusion" and not re.match(r"我|咱们", text):
        return _zh_pronouns(text)
    text = _zh_pronouns(text)
    return text if "用户" in text or not _subjectless(text) else "用户" + text


def _subjectless(text: str) -> bool:
    """A Chinese statement with no subject of its own is about the speaker: "住在杭州" -> "用户住在杭州"."""
    return not text.startswith(("用户", "他", "她", "它", "你", "公司", "团队"))


# ---------------------------------------------------------------------------------------------- English

_CONTRACTED = {"i'm": ("the user", "is"), "i've": ("the user", "has"), "i'd": ("the user", "would"),
               "i'll": ("the user", "will"), "i am": ("the user", "is")}
_OBJECTS = {"me": "the user", "my": "the user's", "mine": "the user's", "myself": "themselves", "our": "the user's",
            "ours": "the user's"}
_UNCHANGED = frozenset("""
can could will would shall should may might must can't couldn't won't wouldn't shouldn't mustn't didn't wasn't
was had hadn't did gotta wanna gonna used
went saw got made took came did said told thought felt found gave knew left met ran sat spent stood wrote bought
brought built caught chose drove ate fell flew forgot grew heard held kept lost paid put read rode sang sent slept
spoke swam taught threw understood woke won wore began became broke lit let set hit cut quit shut hurt cost
""".split())
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "go": "goes", "haven't": "hasn't",
              "'m": "is", "are": "is", "aren't": "isn't", "were": "was", "weren't": "wasn't"}
_NOT_ADVERBS = frozenset({"only", "fly", "reply", "apply", "supply", "rely", "family", "italy", "july", "ally"})
_ADVERBS = frozenset("""
also always never really usually often sometimes still just now mostly already even actually definitely totally
no not longer
kind sort pretty recently currently finally honestly generally normally typically personally rarely seldom
""".split())
_WORK = re.compile(r"\b(?:team|company|project|code|deploy|ship|build|service|api|prod|production|repo|stack|"
                   r"sprint|release|customers?|clients?|office|startup|backend|frontend|database|server)\b", re.I)
_TOKEN = re.compile(r"^([\"'(\[]*)([A-Za-z][A-Za-z']*)(.*)$")
_DEMONYMS = frozenset("""
Chinese American British English Canadian Japanese Korean Indian German French Spanish Italian Russian Brazilian
Mexican Australian Dutch Swedish Norwegian Danish Finnish Polish Irish Scottish Welsh Vietnamese Thai Filipino
Indonesian Malaysian Singaporean Turkish Greek Egyptian Nigerian Kenyan Jewish Muslim Christian Catholic Buddhist
Hindu Asian European African Latino Latina Taiwanese Cantonese OK Sorry Good Fine Back Here Done Ready
""".split())
_NAME = re.compile(r"^(?:i'm|i am)\s+((?-i:[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2}))(?:\s+here)?$", re.IGNORECASE)
_EN_DIRECTIVE_LEAD = re.compile(r"^(?:(?:ok|okay|so|and|also|oh)[,\s]+)?(?:please\s+)?(from now on|going forward|"
                                r"in (?:the )?future|from here on|by default|whenever possible)?[,\s]*(?:please\s+)?",
                                re.IGNORECASE)


def _third_person_verb(verb: str) -> str:
    lowered = verb.lower()
    if lowered in _IRREGULAR:
        return _IRREGULAR[lowered]
    if (lowered in _UNCHANGED or lowered.endswith(("ing", "n't", "s")) or
            (lowered.endswith("ed") and not lowered.endswith("eed")) or not lowered.isalpha()):
        return verb
    if lowered.endswith(("sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lowered) > 2 and lowered.endswith("y") and lowered[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _is_adverb(word: str) -> bool:
    lowered = word.lower()
    return lowered in _ADVERBS or (lowered.endswith("ly") and len(lowered) > 4 and lowered not in _NOT_ADVERBS)


def _english_pronouns(text: str, *, instruction: bool) -> str:
    text = re.sub(r"\bI am\b", "I'm", text.replace("’", "'"))
    group = "the user and their team" if _WORK.search(text) else "the user and others"
    out: list[str] = []
    agree = False  # the next verb follows "the user" and must agree with it
    previous = ""
    for token in re.split(r"(\s+)", text):
        if not token.isspace():
            previous, token_before = token.lower(), previous
        else:
            token_before = previous
        match = _TOKEN.match(token)
        if not match:
            out.append(token)
            continue
        lead, word, tail = match.groups()
        lowered = word.lower()
        if agree and not token.isspace():
            if _is_adverb(word):
                out.append(token)
                continue
            agree = False
            out.append(lead + _third_person_verb(word) + tail)
            continue
        if lowered == "i":
            out.append(lead + "the user" + tail)
            agree = not tail and token_before != "and"  # not after "I," nor in "my sister and I run"
        elif lowered in _CONTRACTED:
            subject, verb = _CONTRACTED[lowered]
            out.append(f"{lead}{subject} {verb}{tail}")
        elif lowered in _OBJECTS:
            out.append(lead + _OBJECTS[lowered] + tail)
        elif lowered in ("we", "us"):
            out.append(lead + group + tail)
        elif instruction and lowered in ("you", "your", "yours", "yourself"):
            out.append(lead + {"you": "the assistant", "yourself": "itself"}.get(lowered, "the assistant's") + tail)
        else:
            out.append(token)
    return "".join(out)


def _finish(text: str) -> str:
    text = text.strip().rstrip(",;: ")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def _english(clause: str, memory_type: str, elided: bool) -> str:
    text = clause.strip().rstrip(",;: ")
    if name := _NAME.match(text.rstrip(".!")):
        if not set(name.group(1).split()) & _DEMONYMS:
            return f"The user's name is {name.group(1)}."
    first_person = re.match(r"(?:(?:well|so|oh|and|but|also|actually|honestly)[,\s]+)*(?:i|i'm|i've|i'd|i'll|my|we|our)\b",
                            text, re.IGNORECASE)
    if memory_type == "instruction" and not first_person and not elided:
        lead = _EN_DIRECTIVE_LEAD.match(text)
        when = lead.group(1).lower() if lead and lead.group(1) else ""
        rest = re.sub(r",?\s*please[.!]?$", "", text[lead.end():] if lead else text, flags=re.IGNORECASE)
        rest = _english_pronouns(rest, instruction=True).rstrip(".!")
        rest = rest[0].lower() + rest[1:] if rest[:1].isupper() and not rest[:2].isupper() else rest
        suffix = f" {when}" if when else ""
        if let := re.match(r"let'?s\s+", rest, re.IGNORECASE):
            return _finish(f"The user wants to {rest[let.end():]}{suffix}")
        if negative := re.match(r"(?:don'?t|do not)\s+", rest, re.IGNORECASE):
            return _finish(f"The user wants the assistant not to {rest[negative.end():]}{suffix}")
        if re.match(r"(?:no|less|more|fewer|shorter|longer)\b", rest, re.IGNORECASE):  # "No emojis, please"
            return _finish(f"The user wants {rest}{suffix}")
        return _finish(f"The user wants the assistant to {rest}{suffix}")
    text = _english_pronouns(text, instruction=memory_type == "instruction")
    if elided and not first_person:
        verb, _, rest = text.partition(" ")
        text = f"the user {_third_person_verb(verb.lower())} {rest}".rstrip()
    return _finish(text)


def third_person(clause: str, memory_type: str, *, elided: bool = False) -> str:
    """The clause rewritten about "the user" (see the module docstring). ``elided``: its subject was left out."""
    if len(_CJK_CHAR.findall(clause)) >= len(_LATIN_WORD.findall(clause)):  # the language most of it is in
        return _chinese(clause, memory_type)
    return _english(clause, memory_type, elided)


def named(content: str, speaker: str) -> str:
    """A third-person statement about ``speaker`` by name rather than "the user": in a conversation between
    people ("Caroline", "Melanie") each says things about themselves, and a question asks about them by name."""
    if has_cjk(content):
        return content.replace("用户", speaker)
    content = re.sub(r"\bthe user's\b", f"{speaker}'s", content, flags=re.IGNORECASE)
    return re.sub(r"\bthe user\b", speaker, content, flags=re.IGNORECASE)
