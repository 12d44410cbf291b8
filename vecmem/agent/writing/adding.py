"""A direct ``MemoryBank.add``, typed and decided as the memory agent types and decides what it extracts.

``AddResolution`` is the agent layer's ``AddResolver`` (bank/resolving.py says why the bank asks for one
instead of importing it). A statement added without a type is typed by ``rules.classify``, the rules the write
gate and extraction use: "I prefer concise code" is a preference, "Always answer in Chinese" an instruction,
"turns out the fix was X" a conclusion, and anything without a cue of those a fact (a person asked for it to be
stored, so "no cue" is no reason to refuse it). Its text is stored as given: the agent's third-person rewrite is
for what a model or the rules extract from a conversation, not for what a caller chose to write.

The decision is ``decide.py``'s pure function, the one a chat turn and ``add_messages`` reach too (they store
what they extract through ``MemoryBank.remember``). No model is asked, whatever is configured: a direct add is
one statement the caller already chose, and the rules decide it in milliseconds, offline.
"""

from __future__ import annotations

from collections.abc import Sequence

from vecmem.agent import rules
from vecmem.agent.writing import decide
from vecmem.agent.writing.claims import claims
from vecmem.bank.resolving import Known, Plan, TypeGuess
from vecmem.models import MemoryRecord

__all__ = ["AddResolution"]


class AddResolution:
    """Types and decides one statement added to a bank (``MemoryBank.remember``)."""

    def infer_type(self, content: str) -> TypeGuess:
        found = rules.classify(content)
        if found.memory_type is None:
            return TypeGuess("fact", f"a fact: {found.reason}")
        return TypeGuess(found.memory_type, found.reason)

    def reads_slots(self, content: str) -> bool:
        return bool(claims(content))

    def decide(self, record: MemoryRecord, candidates: Sequence[Known]) -> Plan:
        return decide.decide(record, candidates)
