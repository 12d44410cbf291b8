"""Speakers in a conversation between people: a name a turn addresses names its listener, not its topic.

A memory learnt from a turn said by a named speaker (``Provenance.speaker``: ``add_messages`` with ``Turn``s
that name theirs, or a record written with one) is a turn of a conversation. In a conversation between two
people each addresses the other by name ("Hey Anna!", "That's great, Anna!") and speaks of them as "you", so
every name in the other speaker's turns (and in the message kept as the memory's ``context``) pulled those turns
to a question about Anna, level with Anna's own. Such a name is a *vocative*, set off from the sentence: after a
greeting ("hey", "hi", "thanks", ...) or a comma, or opening a sentence, and followed by punctuation
(``, Anna!``, ``Hey Ben,``, ``Anna, ...``). In such a memory each vocative is kept as an address token
(``ADDRESS`` + the name's token) instead of the name's own token: the memory still counts its words (its length
is unchanged for BM25), but a question naming Anna no longer matches the turns that merely speak to her. Names
mentioned in the third person ("I told Anna about it") are not set off this way and still count.

What a memory's text looks like decides nothing: only its provenance says it is a turn. (Its measured effect:
docs/benchmarks.md, *Why retrieval is built as it is*.)
"""

from __future__ import annotations

import re

__all__ = ["ADDRESS", "split_addresses"]

ADDRESS = "@"  # no tokenizer output begins with it: a name addressed never matches a query's word
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


def split_addresses(text: str, speaker: str | None = None) -> tuple[str, list[str]]:
    """``text`` with its vocatives blanked out (each character a space, so nothing else moves), and the names
    they addressed, in order. The ``speaker``'s own name is never one: nobody addresses themselves."""
    names: list[str] = []
    own = (speaker or "").casefold()

    def blank(found: re.Match[str]) -> str:
        group = next(i for i in (1, 2, 3) if found.group(i) is not None)
        if found.group(group).casefold() == own:
            return found.group(0)
        names.append(found.group(group))
        start, end = found.span(group)
        whole, offset = found.group(0), start - found.start()
        return whole[:offset] + " " * (end - start) + whole[offset + end - start:]

    return _VOCATIVE.sub(blank, text), names
