"""``vecmem mcp``: memory as Model Context Protocol tools over stdio. The only importer of the MCP SDK (2.x).

Tools: ``remember`` (store a statement, screened as a model's extraction is: a planted instruction is never
stored as one, a doubtful statement waits for review), ``remember_messages`` (learn from a conversation as the
chat's memory agent does: write gate, extraction, supersession; what it extracts is screened the same way),
``recall`` (the budgeted long-term context for a query, ready to put in a prompt, with the memories it holds),
``build_context`` (the whole prompt: system prompt, memories, recent turns, the query, with token counts),
``forget`` (by id), ``forget_all`` (every memory of a named user, or of one session: annotated destructive, so a
host asks the person first) and ``list_memories``. Each takes an optional ``user_id`` (``forget_all`` a required
one) and ``session_id``; a refusal (bad input, unknown id) comes back as a tool error with vecmem's message, so
the calling model can read it. Nothing but protocol messages goes to stdout.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from vecmem.api import MemoryApi
from vecmem.errors import VecmemError
from vecmem.interfaces.server_schemas import context_out
from vecmem.maintenance.learning import chat_messages

__all__ = ["create_server"]

# A model's word about the user is not the user's own: it weighs a little less (the reranker multiplies
# importance by confidence), as the chat's rule-based extraction does, and stays above the review confidence.
MODEL_CONFIDENCE = 0.8
INSTRUCTIONS = (
    "Long-term memory about the user. Before answering, call recall with the user's message and put the "
    "returned context in your prompt; when the user states a lasting fact, preference or instruction, call "
    "remember with one short sentence about the user."
)


def create_server(bank: MemoryApi) -> MCPServer:
    server = MCPServer(name="vecmem", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    def remember(content: str, memory_type: str = "fact", importance: float = 0.5, session_id: str | None = None,
                 user_id: str | None = None, confidence: float = MODEL_CONFIDENCE) -> dict[str, Any]:
        """Store one statement about the user (memory_type: fact, preference, instruction or conclusion;
        importance 0 to 1, or above 1 up to 10 on the ten-point scale: 7 is 0.7). With session_id it is visible
        in that session only. confidence (0 to 1): how sure you are the user means it; below the review
        confidence it waits for a person's approval (status "pending")."""
        # What a model relays is untrusted (it may be repeating a planted instruction): stored as extracted, so
        # the bank screens it as it screens the chat's extraction (maintenance/intake.py).
        record = _vecmem(lambda: bank.add(content, memory_type=memory_type, importance=importance,
                                          session_id=session_id, user_id=user_id, source="extracted",
                                          confidence=confidence))
        return {"id": record.id, "content": record.content, "type": record.type, "scope": record.scope,
                "status": record.status}

    @server.tool()
    def remember_messages(messages: list[dict[str, Any]], session_id: str | None = None,
                          user_id: str | None = None) -> dict[str, Any]:
        """Learn from a conversation, oldest message first: each {"role": "user"|"assistant"|"system",
        "content": text}. Every user message goes through the write gate (greetings, questions and requests are
        skipped), extraction (one clean third-person statement per fact) and supersession (a newer statement
        replaces what it revises); assistant and system messages are context only. Returns the memories written,
        the (old_id, new_id) pairs replaced, the messages skipped and why, and ids already remembered. With
        session_id, what holds for that session only stays in it."""
        # What a model relays is untrusted: extraction stores source "extracted", so the bank screens every
        # memory as it screens remember's (maintenance/intake.py): planted instructions, doubtful statements.
        learnt = _vecmem(lambda: bank.add_messages(messages, session_id=session_id, user_id=user_id))
        return dict(learnt.to_dict())

    @server.tool()
    def build_context(query: str, session_id: str | None = None, user_id: str | None = None,
                      context_tokens: int | None = None, k: int = 10,
                      short_term: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The whole prompt for the user's message, ready for a chat-completions call: ``messages`` (system
        prompt, the relevant long-term memories as dated data lines within their token share, the recent turns
        given in short_term as [{"role", "content"}], oldest first, then the query), ``tokens`` and ``limits``
        per section, and the memories injected with their score parts."""
        def build() -> dict[str, Any]:
            recent = chat_messages(short_term or [], field="short_term", empty_ok=True)
            return context_out(bank.build_context(query, session_id=session_id, user_id=user_id, k=k,
                                                  context_tokens=context_tokens, short_term=recent))

        return dict(_vecmem(build))

    @server.tool()
    def recall(query: str, session_id: str | None = None, user_id: str | None = None,
               context_tokens: int | None = None) -> dict[str, Any]:
        """The long-term memories relevant to the query, trimmed to the long-term share of context_tokens:
        ``context`` is the text to put in the prompt, ``memories`` the hits with their score parts."""
        pack = _vecmem(lambda: bank.build_context(query, session_id=session_id, user_id=user_id,
                                                  context_tokens=context_tokens))
        return {"context": pack.long_term, "tokens": pack.tokens["long_term"],
                "memories": [hit.to_dict() for hit in pack.memories]}

    @server.tool()
    def forget(memory_id: str, user_id: str | None = None) -> dict[str, Any]:
        """Delete one memory for good."""
        record = _vecmem(lambda: bank.forget(memory_id, user_id=user_id))
        return {"forgotten": record.id, "content": record.content}

    @server.tool(annotations=ToolAnnotations(title="Forget every memory of a user", destructive_hint=True,
                                             idempotent_hint=True, read_only_hint=False, open_world_hint=False))
    def forget_all(user_id: str, session_id: str | None = None) -> dict[str, Any]:
        """Delete EVERY memory of user_id for good, with their history (with session_id: only that session's
        memories). There is no undo. user_id must be given: no default user stands in for it. Use only when the
        person asked to be forgotten; returns how many memories were deleted."""
        deleted = _vecmem(lambda: bank.forget_all(user_id, session_id=session_id))
        return {"user_id": user_id, "session_id": session_id, "deleted": deleted}

    @server.tool()
    def list_memories(session_id: str | None = None, user_id: str | None = None, limit: int = 50) -> dict[str, Any]:
        """The user's live memories, newest first: of every session, or with session_id what that session sees."""
        records = _vecmem(lambda: bank.list_memories(session_id=session_id, user_id=user_id, limit=limit))
        return {"memories": [{"id": r.id, "content": r.content, "type": r.type, "scope": r.scope,
                              "importance": r.importance} for r in records]}

    return server


def _vecmem(call: Any) -> Any:
    try:
        return call()
    except VecmemError as error:
        raise ToolError(str(error)) from error
