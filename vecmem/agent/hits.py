"""The memory hit rate: of the memories a turn put into the prompt, those the answer used.

An injected memory counts as used when at least 30% of its content terms (words; for Chinese, character bigrams)
appear in the answer. The running rate per session warns below 30% and hints at retrieving more above 70%, each
time another ``HIT_RATE_MIN_INJECTED`` memories have been injected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vecmem.models import PromptPack
from vecmem.storage.state.sessions import SessionStore
from vecmem.text import char_bigrams, cjk_runs

__all__ = ["HIT_RATE_MIN_INJECTED", "USED_OVERLAP", "HitReport", "measure_hits", "memory_used"]

USED_OVERLAP = 0.3
HIT_RATE_MIN_INJECTED = 10


@dataclass(frozen=True)
class HitReport:
    used_ids: tuple[str, ...]
    injected: int
    session_rate: float | None
    notice: str | None


_LATIN_WORD = re.compile(r"[a-z0-9][a-z0-9+#.\-]{2,}")
_IGNORED_TERMS = {"the", "user", "user's", "and", "for", "with", "that", "this", "用户"}


def _terms(text: str) -> set[str]:
    lowered = text.lower()
    terms = {word.strip(".-") for word in _LATIN_WORD.findall(lowered)} - _IGNORED_TERMS
    for run in cjk_runs(lowered.replace("用户", " ")):  # Chinese terms: character bigrams, as retrieval's
        terms.update(char_bigrams(run))
    return terms


def memory_used(memory: str, answer: str) -> bool:
    """The documented hit measure: >= 30% of the memory's terms appear in the answer."""
    wanted = _terms(memory)
    return bool(wanted) and len(wanted & _terms(answer)) / len(wanted) >= USED_OVERLAP


def measure_hits(sessions: SessionStore, user_id: str, session_id: str, pack: PromptPack, answer: str) -> HitReport:
    """Which injected memories the answer used, counted into the session's hit rate (with a notice when the rate
    crosses a bound after another ``HIT_RATE_MIN_INJECTED`` injected memories)."""
    used = tuple(hit.id for hit in pack.memories if memory_used(hit.content, answer))
    counters = sessions.record_hits(user_id, session_id, injected=len(pack.memories), used=len(used))
    rate = counters.hit_rate
    notice = None
    crossed = counters.injected // HIT_RATE_MIN_INJECTED > (counters.injected - len(pack.memories)) // HIT_RATE_MIN_INJECTED
    if rate is not None and crossed:  # once per 10 newly injected memories, not on every turn
        if rate < 0.3:
            notice = (f"memory hit rate {rate:.0%} in this session: most injected memories go unused; "
                      "retrieval may be bringing noise")
        elif rate > 0.7:
            notice = (f"memory hit rate {rate:.0%} in this session: answers use most injected memories; "
                      "consider retrieving more (a larger k or long-term share)")
    return HitReport(used, len(pack.memories), rate, notice)
