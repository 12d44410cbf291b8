"""Speakers in dialogue-shaped memories: a name a turn addresses names its listener, not its topic.

A dialogue-shaped memory is one turn of a conversation whose content opens with its speaker: ``Caroline said,
"..."`` or ``Caroline: ...``. In a conversation between two people each addresses the other by name ("Hey
Caroline!", "That's cool, Caroline!") and speaks of them as "you", so every name in the other speaker's turns
(and in the neighbouring turns kept as the memory's ``context``) pulled those turns to a question about Caroline,
level with Caroline's own. Such a name is a *vocative*, set off from the sentence: after a greeting ("hey", "hi",
"thanks", ...) or a comma, or opening a sentence, and followed by punctuation (``, Caroline!``, ``Hey Mel,``,
``Caroline, ...``). In a dialogue-shaped memory each vocative is kept as an address token (``ADDRESS`` + the
name's token) instead of the name's own token: the turn still counts its words (its length is unchanged for BM25),
but a question naming Caroline no longer matches the turns that merely speak to her. Names mentioned in the third
person ("I told Caroline about it") are not set off this way and still count.

On LoCoMo this lifts keyword recall and leaves hybrid recall about level. Every category gains but the
adversarial one, whose questions name the wrong speaker on purpose ("What did Melanie research?" of Caroline's
turn): the turns a misattributed question finds are those addressed to the person it names. MADial-Bench
memories are no dialogue turns: unchanged. (Its measured effect: docs/benchmarks.md, *Why retrieval is built as
it is*.)
"""

from __future__ import annotations

import re

__all__ = ["ADDRESS", "is_dialogue_turn", "split_addresses"]

ADDRESS = "@"  # no tokenizer output begins with it: a name addressed never matches a query's word
_TURN = re.compile(r"^\s*(?:[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3} said,\s*[\"“]|[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}:\s)")
_GREETINGS = ("hey|hi|hello|hiya|yo|thanks|thank you|thx|bye|goodbye|congrats|congratulations|good morning|"
              "good night|morning|dear|welcome|cheers")
_NOT_NAMES = ("wow|thanks|thank|yes|yeah|yep|no|nope|oh|ah|aw|aww|well|sure|ok|okay|hey|hi|hello|so|and|but|also|"
              "anyway|honestly|actually|right|great|cool|nice|awesome|amazing|haha|hmm|um|congrats|sorry|please|"
              "look|listen|now|then|indeed|absolutely|definitely|totally|true|exactly|agreed|same|damn|gosh|man|dude")
# a capitalised word, or two, that is not an interjection ("Wow, ...", "Thanks, Mel!")
_NAME = rf"(?!(?i:{_NOT_NAMES})\b)([A-Z][a-z]+(?:[ -][A-Z][a-z]+)?)"
# a name set off as an address: after a greeting and before punctuation ("Hey Mel!", "thanks Caroline,"); after a
# comma and ending the sentence (", Caroline!"); or opening a sentence and followed by a comma ("Caroline, ...").
# A capitalised word between commas ("Paris, London, Rome") or alone ("Thanks!", "Amazing!") is not one.
_VOCATIVE = re.compile(
    rf"\b(?i:{_GREETINGS})\s+{_NAME}(?=\s*[,.!?\"”]|\s*$)"
    rf"|,\s*{_NAME}(?=\s*[.!?\"”]|\s*$)"
    rf"|(?:^|(?<=[\"“.!?:])\s*){_NAME}(?=\s*,)",
)


def is_dialogue_turn(content: str) -> bool:
    """Whether a memory's content opens with its speaker's tag (module docstring)."""
    return _TURN.match(content) is not None


def split_addresses(text: str) -> tuple[str, list[str]]:
    """``text`` with its vocatives blanked out (each character a space, so nothing else moves), and the names
    they addressed, in order."""
    names: list[str] = []

    def blank(found: re.Match[str]) -> str:
        group = next(i for i in (1, 2, 3) if found.group(i) is not None)
        names.append(found.group(group))
        start, end = found.span(group)
        whole, offset = found.group(0), start - found.start()
        return whole[:offset] + " " * (end - start) + whole[offset + end - start:]

    return _VOCATIVE.sub(blank, text), names
