"""A direct ``MemoryBank.add``, typed and resolved as the memory agent types and resolves what it extracts.

``AddResolution`` is the agent layer's ``AddResolver`` (bank/resolving.py says why the bank asks for one
instead of importing it). A statement added without a type is typed by ``rules.classify``, the rules the write
gate and extraction use: "I prefer concise code" is a preference, "Always answer in Chinese" an instruction,
"turns out the fix was X" a conclusion, and anything without a cue of those a fact (a person asked for it to be
stored, so "no cue" is no reason to refuse it). Its text is stored as given: the agent's third-person rewrite is
for what a model or the rules extract from a conversation, not for what a caller chose to write.

It is then decided by ``ConflictResolver``'s rules, the ones a chat turn and ``add_messages`` apply without a
model (conflict.py): the same statement again is no new memory; one that revises a slot ("我住在上海" after
"我住在杭州", "I moved to Shanghai" after "I live in Hangzhou") supersedes every live memory of the slot it
revises, within scope; else it is added. No model is asked, whatever is configured: a direct add is one
statement the caller already chose, and the rules decide it in milliseconds, offline.
"""

from __future__ import annotations

from vecmem.agent import rules
from vecmem.agent.writing.conflict import ConflictResolver
from vecmem.agent.writing.extract import Candidate
from vecmem.bank.api import MemoryApi
from vecmem.bank.resolving import AddResult, TypeGuess, Write
from vecmem.models import GLOBAL_SCOPE, MemoryRecord

__all__ = ["AddResolution"]


class AddResolution:
    """Types and resolves one statement added directly to a bank (``MemoryBank.remember``)."""

    def infer_type(self, content: str) -> TypeGuess:
        found = rules.classify(content)
        if found.memory_type is None:
            return TypeGuess("fact", f"a fact: {found.reason}")
        return TypeGuess(found.memory_type, found.reason)

    def resolve(self, bank: MemoryApi, record: MemoryRecord, write: Write) -> AddResult:
        session = None if record.scope == GLOBAL_SCOPE else record.scope
        user = record.user_id
        candidate = Candidate(content=record.content, memory_type=record.type, importance=record.importance,
                              tags=record.tags, session_scoped=session is not None, confidence=record.confidence,
                              context=record.context)
        resolver = ConflictResolver(bank, threshold=bank.settings.supersede_threshold)
        resolution = resolver.resolve(candidate, user_id=user, session_id=session)
        if resolution.action == "NONE" and resolution.target is not None:
            # as stored now (a hit shows it as it was ranked)
            return AddResult("unchanged", bank.get(resolution.target.id, user_id=user), reason=resolution.reason)
        stored, new = write(record)
        successor = stored.superseded_by  # stated again after a newer memory replaced it: restoring replaces that
        written = resolver.settle(stored, resolution, user_id=user)
        current = written.record or stored
        gone = [old.id for old in (written.replaced, *written.also_replaced) if old is not None]
        reason = written.reason
        if successor is not None and not current.superseded:
            gone.insert(0, successor)
            reason = f"stated again: {stored.id} is current again and replaces {successor}"
        # as stored now: superseded by the new memory (one replaced meanwhile by another writer is not listed)
        replaced = tuple(old for old in (bank.get(old_id, user_id=user) for old_id in dict.fromkeys(gone))
                         if old.superseded_by == current.id)
        if replaced:
            return AddResult("replaced", current, replaced, reason)
        if new:
            return AddResult("added", current, reason=reason)
        return AddResult("unchanged", current, reason=f"already stored as {current.id}")
