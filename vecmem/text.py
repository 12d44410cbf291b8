"""How vecmem splits Chinese (and other CJK ideographs) out of mixed text: one definition for every part.

Retrieval's keyword tokens (``retrieval/index/keyword.py``), the memory hit rate (a memory counts as used when
enough of its terms appear in the answer), the offline rules and the summaries all ask the same questions:
which characters are Chinese, where the runs of them are, and what their character bigrams are. Answering
them in one place keeps a query, a memory and an answer split alike.

Where a sentence of mixed text ends is answered here too (``split_sentences``), since a fact cut at "Dr." or
"K." is a fact lost: 。！？ and ! ? ; always end one; a full stop ends one unless it closes an initial ("Ursula
K. Le Guin"), a title ("Dr. Smith", "St. Louis", "No. 5") or an abbreviation ("e.g.", "U.S.", "a.m.", "Inc.").
An abbreviation that may close a sentence ("etc.", "Inc.", "U.S.", "p.m.") ends one only when what follows
plainly starts another ("…at Acme Inc. I live in Paris", "…在 U.S. 我喜欢茶"; not "…Inc. 工作": Chinese ends at 。).
"""

from __future__ import annotations

import re

__all__ = ["CJK_RUN", "char_bigrams", "cjk_runs", "drop_full_stop", "has_cjk", "split_sentences",
           "without_cjk"]

# CJK Unified Ideographs, Extension A and the compatibility block: every Han character a user types.
_IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_RUN = re.compile(f"[{_IDEOGRAPHS}]+")
_ONE_CJK = re.compile(f"[{_IDEOGRAPHS}]")


def has_cjk(text: str) -> bool:
    """Whether the text holds at least one Han character."""
    return _ONE_CJK.search(text) is not None


def cjk_runs(text: str) -> list[str]:
    """The maximal runs of Han characters, in order ("我用 Rust 写代码" -> ["我用", "写代码"])."""
    return CJK_RUN.findall(text)


def without_cjk(text: str, replacement: str = " ") -> str:
    """The text with every run of Han characters replaced (what is left for the Latin-word tokenizer)."""
    return CJK_RUN.sub(replacement, text)


def char_bigrams(run: str) -> list[str]:
    """Every pair of neighbouring characters of a run; none for a single character."""
    return [run[i : i + 2] for i in range(len(run) - 1)]


# ---------------------------------------------------------------------------------------------- sentences

# abbreviations that lead into what follows them, so never close a sentence: titles, "e.g.", "vs."
_LEADING_ABBREVIATIONS = frozenset("""
mr mrs ms mx dr prof rev gov sen gen capt lt sgt cmdr adm mme mlle mt e.g eg i.e ie cf viz vs v approx pp
""".split())
# abbreviations that may close a sentence as well as stand inside one ("…at Acme Inc." / "Acme Inc. in Boston")
_CLOSING_ABBREVIATIONS = frozenset("""
etc inc ltd co corp llc plc jr jnr sr snr bros esq phd md st ave blvd rd dept univ ft a.m p.m am pm
jan feb apr jun jul aug sep sept oct nov dec mon tue tues thu thur thurs fri
""".split())
# words that plainly start a sentence: after them, a full stop that closes an abbreviation or an initial ends one
_OPENERS = re.compile(r"(?:I|I'm|I've|I'd|I'll|My|Me|We|We're|We've|Our|He|She|They|It|It's|Its|This|That|These|"
                      r"Those|There|The|Also|But|And|So|Please|Always|Never|Don't|Do|Remember|From|Actually|Btw|"
                      r"Then|Now|Today|Yesterday|Tomorrow)(?![\w'])|(?i:i|i'm|i've|i'd|i'll)(?![\w'])|我|咱们")
_ALWAYS_ENDS = "。！？!?；;…"
_CLOSERS = "\"'”’)）\\]】」』"  # a quote or bracket closed right after the end belongs to the sentence
_BOUNDARY = re.compile(f"[{_ALWAYS_ENDS}]+[{_CLOSERS}]*\\s*|\\.+[{_CLOSERS}]*(?=\\s|[{_IDEOGRAPHS}]|$)\\s*|\\s*\\n\\s*")
_LAST_WORD = re.compile(r"[^\s(\[\"'“‘（]+$")
_DOTTED = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")  # "U.S", "e.g", "a.m", "Ph.D": the final dot is the stop's


def _last_word(text: str) -> str:
    found = _LAST_WORD.search(text)
    return found.group(0) if found else ""


def _is_abbreviated(word: str) -> bool:
    """Whether a full stop right after ``word`` closes an abbreviation or an initial rather than a sentence."""
    lowered = word.casefold()
    return (lowered in _LEADING_ABBREVIATIONS or lowered in _CLOSING_ABBREVIATIONS or _DOTTED.match(word) is not None
            or (len(word) == 1 and word.isalpha() and word.isupper()))


def _full_stop_ends(before: str, after: str) -> bool:
    """Whether the full stop between ``before`` and ``after`` ends a sentence (see the module docstring)."""
    word = _last_word(before)
    if not word or not after:
        return True
    lowered = word.casefold()
    if lowered in _LEADING_ABBREVIATIONS:
        return False
    if lowered in ("no", "nos"):  # "No. 5" is a number; "No. I live in Paris" is an answer
        return not (after[:1].isdigit() or after.startswith("#"))
    if _is_abbreviated(word):  # "Acme Inc. in Boston", "Ursula K. Le Guin", but "…Acme Inc. I live in Paris"
        return _OPENERS.match(after) is not None
    return True


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, each stripped, their final marks kept; see the module docstring for where a
    full stop ends one."""
    sentences: list[str] = []
    start = 0
    for boundary in _BOUNDARY.finditer(text):
        end = boundary.end()
        if boundary.group(0).lstrip().startswith(".") and not _full_stop_ends(text[:boundary.start()], text[end:]):
            continue
        piece = text[start:end].strip()
        if piece:
            sentences.append(piece)
        start = end
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def drop_full_stop(text: str) -> str:
    """The text without its final full stop (。 or .), unless that dot closes an abbreviation or an initial
    ("U.S.", "etc.", "K."), which would read cut short without it."""
    stripped = text.rstrip()
    if stripped.endswith("。"):
        return stripped[:-1]
    if not stripped.endswith(".") or stripped.endswith("..") or _is_abbreviated(_last_word(stripped[:-1])):
        return stripped
    return stripped[:-1]
