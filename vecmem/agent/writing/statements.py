"""Statements: what a careful note-taker writes down from one user message, without a model.

1. **Sentences** (。！？；!? and new lines, and a full stop where a sentence ends, never one that closes an
   initial, a title or an abbreviation: "Ursula K. Le Guin", "Dr. Smith", "St. Louis"; ``vecmem.text``). A "记住，" / "remember that" opening is set aside; it makes the
   sentence emphatic.
2. **Clauses**: a sentence is cut at commas, and at "and"/"but" (但是, 不过, 而且) where what follows stands on its
   own: its own subject ("我用 macOS", "and I live in Hangzhou"), a predicate whose subject was left out
   ("在阿里云工作" after "我是李伟"; "and live in Hangzhou"), a directive ("以后…", "please…"), or a question
   ("…, you know?"). Anything else stays with the clause before it: "我住在杭州，离西湖很近", "I use Python, Go
   and Rust", "我喜欢 TypeScript，因为类型安全".
3. **Judgement** of each clause alone (``rules.classify``): questions ("what package manager should I use?",
   "能不能推荐…？") and one-off requests ("帮我写一个函数") are never stored, nor a clause with too little
   information to be worth a memory ("I'm so excited", "我很累": ``rules.information_units``; who the user is,
   "I'm a nurse", is information enough: ``rules.is_identity``); the rest keeps its type.
4. **Third person**, every pronoun of the clause (``person.py``): "我住在杭州" -> "用户住在杭州", "I work at
   Alibaba Cloud" -> "The user works at Alibaba Cloud."
5. **One memory per fact** (one per message when it names its speaker, a conversation between people:
   ``_as_one``): clauses about different slots (``topics.py``) are separate memories, so "I'm Li Wei,
   I work at Alibaba Cloud and I live in Hangzhou" gives name, employer and city; clauses of one message about
   the same slot are one fact and are joined: "我不用 Windows，我用 macOS 和 zsh" -> "用户不用 Windows，用户用
   macOS 和 zsh" (so a message never replaces a part of itself).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from vecmem.agent import rules
from vecmem.agent.writing.events import dated, event_reason
from vecmem.agent.writing.person import named, third_person
from vecmem.agent.writing.topics import facets
from vecmem.text import drop_full_stop, has_cjk, split_sentences

__all__ = ["Statement", "split_sentences", "clauses", "statements", "why_not"]

# where a sentence may be cut into clauses; the separator is kept to join back what does not stand alone
_BREAK = re.compile(
    r"(\s*[，,]\s*|\s+[-–—]\s+"
    r"|\s+(?:and|but)\s+(?=(?:also\s+|now\s+)?(?:I|I'm|I've|I'd|I'll|my|we|our)\b)"
    r"|\s+(?:and|but)\s+(?=(?:also\s+|now\s+|still\s+)?(?:live|lives|work|works|use|uses|like|likes|love|loves|"
    r"prefer|prefers|have|has|speak|speaks|own|owns|moved|switched|started|stopped|joined|worked|lived|used|am)\b)"
    r"|(?=(?:但是|不过|而且|并且|同时|然后)(?:我|以后|现在)))")
# an opening that belongs to the clause after it: "From now on, use pnpm", "其实，我更喜欢 Go"
_LEADING = re.compile(r"^(?:from now on|going forward|in (?:the )?future|by default|also|actually|honestly|btw|"
                      r"by the way|so|well|ok|okay|anyway|以后|今后|从现在起|从现在开始|往后|另外|其实|对了|还有|顺便说一下|"
                      r"说实话|老实说|平时|一般来说)$", re.IGNORECASE)
# a phrase that leads into the clause after it: "As a frontend developer, I prefer TypeScript"
_PHRASE = re.compile(r"^(?:as|for|in|at|on|with|after|before|since|during|when|while|because|if|like|being)\s|"
                     r"^(?:作为|身为|因为|由于|对于|关于|为了|如果|虽然)|^在\S{1,12}(?:上|里|中|时|时候|后|之后|前|期间)$",
                     re.IGNORECASE)
_GREETING = re.compile(r"^(?:hi|hey|hello|yo|dear|嗨|你好|您好|哈喽|早上好|晚上好)\b|^(?:嗨|你好|您好|哈喽)", re.IGNORECASE)
# openings that carry nothing ("actually" and 其实 stay: they mark a correction, a change cue)
_OPENERS = re.compile(r"^(?:(?:and|but|so|also|oh|well|anyway|btw|by the way)[,\s]+)+|"
                      r"^(?:但是|可是|但(?!是)|不过|而且|并且|同时|然后|另外|还有|对了|所以|因此)[，,\s]*", re.IGNORECASE)
# its own subject, maybe after a time word or adverb ("平时我用 Vim"); "因为那是我的" is a reason, not a subject
_OWN_SUBJECT = re.compile(r"^(?:其实|平时|现在|目前|以前|之前|后来|最近|今天|昨天|明天|上次|这次|那时候|当时|以后|今后|可是|但是|不过|"
                          r"而且|所以|但|也|还|就|那)?(?:我|咱们)|^(?:(?:also|now|still|actually)\s+)?(?:i|i'm|i've|i'd|"
                          r"i'll|my|we|our)\b", re.IGNORECASE)
_ZH_PREDICATE = re.compile(
    r"^(?:也|还|都|现在|目前|平时|一般|通常|主要|每天|经常|已经|刚|正在|一直|最近|以前|之前|本来|这次|今天|这周|本周|暂时)*"
    r"(?:是|叫|在|住|来自|用|不用|使用|喜欢|不喜欢|爱|讨厌|偏好|习惯|负责|从事|做|有|养|会|学过|毕业|不再|改用|换成|换用|搬|入职|跳槽|"
    r"打算|准备|计划|不吃|不喝|擅长|熟悉|参与|对\S{1,8}过敏)")
_EN_PREDICATE = re.compile(
    r"^(?:(?:also|now|still|just|recently|currently|usually|mostly)\s+)*(?-i:(?:live|lives|lived|work|works|worked|"
    r"use|uses|used|like|likes|liked|love|loves|prefer|prefers|preferred|have|has|had|speak|speaks|own|owns|moved|"
    r"switched|started|stopped|joined|learned|studied|graduated|grew|built|wrote|run|runs|ran|deploy|deploys)\b)",
    re.IGNORECASE)
_PAST_START = re.compile(r"^(?:(?:also|now|just|recently|finally)\s+)*(?:moved|switched|started|stopped|joined|"
                         r"learned|studied|graduated|grew|built|wrote|worked|lived|used|quit|changed|went|got)\b",
                         re.IGNORECASE)
_DIRECTIVE_START = re.compile(r"^(?:以后|今后|从现在|往后|每次|总是|请|不要|别|务必|一定要|please\b|always\b|never\b|"
                              r"don'?t\b|do not\b|from now on\b|let'?s\b)", re.IGNORECASE)
# a change over time: a clause placing a value in the past, and the next one giving the present one
_THEN = re.compile(r"以前|之前|曾经|原来|过去|\bused to\b|\bpreviously\b|\bformerly\b|\b(?:was|were)\b.*\buntil\b|"
                   r"\b(?:was|were)\s+\w+ing\b", re.IGNORECASE)
_NOW = re.compile(r"^(?:(?:and|but|so)\s+)?(?:now|these days|nowadays|today)\b|^(?:但是?|不过|可是)?(?:现在|如今|目前|后来)",
                  re.IGNORECASE)
_PRONOUN_OBJECT = re.compile(r"^\w+\s+(?:it|that|this|them|those)\W*$", re.IGNORECASE)


# content units a statement of a conversation between people needs (``rules.information_units``): their replies
# to each other are full of short first-person remarks that a question will never ask about
CONVERSATION_INFORMATION = 3


@dataclass(frozen=True)
class Statement:
    """One memory the rules would write: third-person content, type, emphasis, scope, and the user's words."""

    content: str
    memory_type: str
    emphatic: bool
    session_scoped: bool
    said: str  # the user's own words for it (kept as the memory's retrieval context)
    reason: str


@dataclass(frozen=True)
class _Clause:
    text: str
    elided: bool  # its subject was left out: the speaker's


def _stands_alone(piece: str, *, first: bool) -> tuple[bool, bool]:
    """(starts a clause of its own, its subject was left out)."""
    text = _OPENERS.sub("", piece)
    if _OWN_SUBJECT.match(text) or _DIRECTIVE_START.match(text) or rules.is_question(text):
        return True, False
    if has_cjk(text[:2]) and _ZH_PREDICATE.match(text):
        return True, True
    if first:
        return True, bool(_PAST_START.match(text))
    if _EN_PREDICATE.match(text) and text[:1].islower() and not _PRONOUN_OBJECT.match(text):
        return True, True  # ", live in Hangzhou" but not ", Go and Rust" nor ", love it"
    return False, False


def _pieces(sentence: str) -> list[tuple[str, str]]:
    """(separator before it, piece) pairs; greetings dropped, leading adverbials moved onto what follows."""
    parts = _BREAK.split(sentence)
    pairs = [("", parts[0])] + [(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
    pairs = [(sep, piece.strip()) for sep, piece in pairs if piece.strip()]
    merged: list[tuple[str, str]] = []
    carry = trail = ""
    for index, (sep, piece) in enumerate(pairs):
        if len(pairs) > 1 and (rules.is_filler(piece) or (index == 0 and _GREETING.match(piece))):
            continue  # "是的，…", "好！对了，…", "Hey Mel, …": nothing to keep, and no subject to lend
        if carry:
            piece, carry = carry + piece, ""
        if trail:  # "Before pushing, run the tests" -> "run the tests before pushing": the directive first
            piece, trail = f"{piece} {trail[:1].lower()}{trail[1:]}", ""
        following = pairs[index + 1][1] if index + 1 < len(pairs) else ""
        if index == 0 and following and _PHRASE.match(piece) and rules.is_imperative(following):
            trail = piece
            continue
        opening = _LEADING.match(piece) or (index == 0 and _PHRASE.match(piece) and _OWN_SUBJECT.match(following))
        if opening and following:
            carry = piece + (pairs[index + 1][0] or " ")
            continue
        if merged and sep.strip() in ("and", "but") and len(merged[-1][1].split()) < 3:
            merged[-1] = (merged[-1][0], merged[-1][1] + sep + piece)  # "My sister and I run a bakery"
            continue
        merged.append((sep, piece))
    return merged


def clauses(sentence: str) -> list[_Clause]:
    """The clauses of one sentence (see the module docstring, step 2)."""
    found: list[_Clause] = []
    for index, (sep, piece) in enumerate(_pieces(sentence)):
        alone, elided = _stands_alone(piece, first=index == 0)
        if (alone and elided and found and not facets(piece)
                and rules.is_task_context(piece) == rules.is_task_context(found[-1].text)):
            alone = False  # "我是后端工程师，有五年经验": a continuation naming no topic of its own elaborates
        if alone and found and _NOW.match(piece) and _THEN.search(found[-1].text):
            alone = False  # "I used to live in Paris, now I'm in Rome": one change over time, told as one fact
        if alone or not found:
            found.append(_Clause(_OPENERS.sub("", piece) or piece, elided))
        else:
            found[-1] = _Clause(found[-1].text + sep + piece, found[-1].elided)
    return found


def _judge(clause: _Clause, now: datetime | None = None, *, to_assistant: bool = True) -> tuple[str | None, str]:
    """The clause's type and why, or None and why not. ``to_assistant``: said to an assistant (not between people),
    where what the user tells of their work is worth keeping however it is phrased (``rules.work_statement``)."""
    text = clause.text
    if rules.is_question(text):
        return None, "a question, not a statement to remember"
    if rules.is_request(text):
        return None, "a request to the assistant, not a statement to remember"
    if clause.elided:  # judged with the subject it left out: "在阿里云工作" is "我在阿里云工作"
        text = ("我" if has_cjk(text[:1]) else "I ") + text
    found = rules.classify(text)
    if found.memory_type is None and found.reason == rules.NO_CUE and (event := event_reason(text, now)):
        return "fact", event  # "went to a support group yesterday": what happened is a fact about its speaker
    if found.memory_type is None and found.reason == rules.NO_CUE and to_assistant:
        work = rules.work_statement(clause.text)
        if work is not None:
            return work.memory_type, work.reason
    if (found.memory_type is not None and rules.information_units(clause.text) < rules.MIN_INFORMATION
            and not rules.is_identity(text)):  # "I'm a nurse" is a fact, as "我是护士" is
        return None, f"too little information ({found.reason}, fewer than {rules.MIN_INFORMATION} content units)"
    return found.memory_type, found.reason


def _slot_keys(content: str) -> set[tuple[str, str]]:
    return {(facet.slot, facet.holder) for facet in facets(content)}


def _judged(message: str, now: datetime | None = None, *,
            to_assistant: bool = True) -> Iterator[tuple[_Clause, str, str | None, str]]:
    """(clause, the sentence's remember-opening, type or None, reason) for every clause of the message."""
    for sentence in split_sentences(message) or [message]:
        opening = rules.REMEMBER_PREFIX.match(sentence)
        body = sentence[opening.end():] if opening else sentence
        for clause in clauses(body or sentence):
            yield (clause, opening.group(0) if opening else "", *_judge(clause, now, to_assistant=to_assistant))


def why_not(message: str, now: datetime | None = None) -> str:
    """Why no clause of the message is worth keeping (the first clause's reason)."""
    reasons = [reason for _clause, _opening, _type, reason in _judged(message, now)]
    return reasons[0] if reasons else rules.NO_CUE


def statements(message: str, *, speaker: str | None = None, now: datetime | None = None) -> list[Statement]:
    """The statements worth keeping from one user message, one per fact (see the module docstring): about
    ``speaker`` by name when given (else "the user"), a relative date read against ``now`` (``events.dated``)."""
    found: list[Statement] = []
    keys: list[set[tuple[str, str]]] = []
    for clause, opening_text, memory_type, reason in _judged(message, now, to_assistant=speaker is None):
        if memory_type is None:
            continue
        if speaker is not None and memory_type == "instruction" and not rules.has_first_person(clause.text):
            continue  # between people, "don't quit!" is said to the other one: no instruction to the assistant
        if speaker is not None and rules.information_units(clause.text) < CONVERSATION_INFORMATION:
            continue  # "I definitely will!", "Plus my full support": a reply in a talk, no fact about anyone
        content = third_person(clause.text, memory_type, elided=clause.elided)
        if memory_type in ("fact", "conclusion"):  # what happened, not a standing choice ("以后都用 pnpm")
            content = dated(content, now)
        if speaker is not None:
            content = named(content, speaker)
        if memory_type == "fact" and (speaker is not None or reason.startswith("an event")):
            content = _attributed(content, speaker)
        said = opening_text + clause.text
        statement = Statement(content, memory_type, rules.is_emphatic(said), rules.is_task_context(said),
                              clause.text, reason)
        slots = _slot_keys(content)
        earlier = next((i for i, k in enumerate(keys) if k & slots), None)
        if earlier is None:
            found.append(statement)
            keys.append(slots)
            continue
        found[earlier] = _joined(found[earlier], statement)
        keys[earlier] |= slots
    return _as_one(found) if speaker is not None and len(found) > 1 else found


def _as_one(found: list[Statement]) -> list[Statement]:
    """A named speaker's message as one memory: in a conversation between people a question asks about one
    moment of it, and one memory per message keeps the top k from being a few messages cut into pieces."""
    kinds = [s.memory_type for s in found]
    memory_type = max(kinds, key=kinds.count)  # the most of its clauses say; the first of a tie
    content = " ".join(s.content if s.content[-1:] in ".!?。！？" else s.content + ("。" if has_cjk(s.content) else ".")
                       for s in found)
    return [Statement(content, memory_type, any(s.emphatic for s in found), all(s.session_scoped for s in found),
                      " ".join(s.said for s in found), found[0].reason)]


def _joined(first: Statement, second: Statement) -> Statement:
    """Two clauses of one message about the same slot: one memory ("用户不用 Windows，用户用 macOS")."""
    if drop_full_stop(second.content) in first.content:  # said twice in one message: once is enough
        return first
    chinese = has_cjk(first.content)
    head = drop_full_stop(first.content)
    content = head + ("，" if chinese else ", ") + (second.content if chinese else _lower_first(second.content))
    return Statement(content, first.memory_type, first.emphatic or second.emphatic,
                     first.session_scoped and second.session_scoped, first.said + " " + second.said, first.reason)


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text.startswith("The user") else text


def _attributed(content: str, speaker: str | None) -> str:
    """A fact that does not say whose it is ("Had an audition on 7 May 2023", its subject left out) with its
    speaker in front: in a conversation between people, a fact without its person answers no question."""
    subject = speaker or ("用户" if has_cjk(content) else "The user")
    if subject.casefold() in content.casefold() or "the user" in content.casefold() or "用户" in content:
        return content
    return f"{subject}：{content}" if has_cjk(content) else f"{subject}: {content}"
