"""How vecmem splits Chinese (and other CJK ideographs) out of mixed text: one definition for every part.

Retrieval's keyword tokens (``retrieval/keyword.py``), the memory hit rate (a memory counts as used when
enough of its terms appear in the answer), the offline rules and the summaries all ask the same questions:
which characters are Chinese, where the runs of them are, and what their character bigrams are. Answering
them in one place keeps a query, a memory and an answer split alike.
"""

from __future__ import annotations

import re

__all__ = ["CJK_RUN", "char_bigrams", "cjk_runs", "has_cjk", "without_cjk"]

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
