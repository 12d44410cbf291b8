"""Partial revision: what is left of a memory of several facts once the new statement revises some of them.

A value in a list loses its place in the list ("我喜欢吃红烧肉和火锅" -> "我喜欢吃火锅"); otherwise its clause goes,
and the words that lead into it (its subject, "回答我的时候请") lead into the next clause ("回答我的时候请用中文，
简洁一点" -> "回答我的时候请简洁一点"; "I live in Austin and work at Dell" -> "I work at Dell").
"""

from __future__ import annotations

import re

from vecmem.agent.writing import topics
from vecmem.agent.writing.claims import Claim, clauses_of
from vecmem.text import has_cjk

__all__ = ["without_claims"]

_JOINER = re.compile(r"^\s*(?:和|与|跟|及|以及|、|,|，|and|or|&|/)\s*", re.IGNORECASE)
_JOINER_BEFORE = re.compile(r"\s*(?:和|与|跟|及|以及|、|,|，|and|or|&|/)\s*$", re.IGNORECASE)
_LEAD_VERB = re.compile(r"(?:平时|一般|主要|也|都|还)?(?:用|使用|改用|爱用|喜欢用|\buses?\b|\busing\b|\bin\b|\bwith\b)\s*$",
                        re.IGNORECASE)
_SUBJECT_WORDS = re.compile(r"^(?:其实|现在|平时)?(?:我们|咱们|用户的?|我的?)(?:女儿|儿子|妹妹|姐姐|哥哥|弟弟|妈妈|爸爸|老婆|老公)?|"
                            r"^(?:the user(?:'s)?|i|we|my|our)\b(?:\s+(?:daughter|son|sister|brother|wife|husband))?",
                            re.IGNORECASE)


def without_claims(text: str, gone: list[Claim]) -> str | None:
    """The text with what ``gone`` claims taken out, the rest kept as it was said: a value in a list loses its
    place in the list ("红烧肉和火锅" -> "火锅"); otherwise its clause goes, and the words that lead into it (its
    subject, "回答我的时候请") lead into the next clause. None when nothing worth keeping is left."""
    clauses = clauses_of(text)
    cuts: set[tuple[int, int]] = set()
    frames: dict[int, str] = {}
    for claim in gone:
        start, end = claim.span
        clause_at = next(((s, c) for s, c in clauses if s <= start < s + len(c)), None)
        if clause_at is None:
            continue
        clause_start, clause = clause_at
        clause_end = clause_start + len(clause)
        after, before = _JOINER.match(text[end:clause_end]), _JOINER_BEFORE.search(text[clause_start:start])
        if after and end + after.end() < clause_end:  # "红烧肉和火锅": the value and its joiner
            cuts.add((start, end + after.end()))
            continue
        if before and before.start() > 0:  # "火锅和红烧肉"
            cuts.add((clause_start + before.start(), end))
            continue
        following = next((s for s, _c in clauses if s >= clause_end), None)
        cuts.add((clause_start, following if following is not None else clause_end))
        if claim.attribute.split("@")[0] in topics.SLOTS:  # "回答我的时候请用中文": what leads to the value
            lead = _LEAD_VERB.search(text[clause_start:start])
            frame = text[clause_start:start if lead is None else clause_start + lead.start()].strip()
        else:  # "我住在苏州": only who it is about leads into the next clause
            subject = _SUBJECT_WORDS.match(text[clause_start:start])
            frame = subject.group(0).strip() if subject else ""
        if following is not None and re.search(r"\w", frame) and not _starts_own(text[following:]):
            frames[following] = frame + ("" if has_cjk(frame[-1:]) else " ")
    pieces = []
    cursor = 0
    for start, end in sorted(cuts):
        if start < cursor:
            start = cursor
        pieces.append(text[cursor:start])
        cursor = max(cursor, end)
        if cursor in frames:
            pieces.append(frames.pop(cursor))
    pieces.append(text[cursor:])
    return _finish("".join(pieces))


def _starts_own(clause: str) -> bool:
    """The clause has a subject of its own, so no words need to lead into it."""
    return bool(re.match(r"(?:我|用户|i\b|i'm|the user|my\b|we\b|our\b)", clause.strip(), re.IGNORECASE))


def _finish(text: str) -> str | None:
    text = re.sub(r"^[\s，,;；。.、]+|[\s，,;；、]+$", "", text)
    text = re.sub(r"([，,;；])\s*[，,;；]+", r"\1", text)
    text = re.sub(r"\s{2,}", " ", text)
    if not re.search(r"[\w\u4e00-\u9fff]{2}", text):
        return None
    return text
