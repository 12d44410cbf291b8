"""``vecmem mcp``: memory as Model Context Protocol tools over stdio. The only importer of the MCP SDK (2.x).

Tools: ``remember`` (store a statement, screened as a model's extraction is: a planted instruction is never
stored as one, a doubtful statement waits for review), ``recall`` (the budgeted long-term context for a query,
ready to put in a prompt, with the memories it holds), ``forget`` (by id) and ``list_memories``. Each takes an optional
``user_id`` and ``session_id``; a refusal (bad input, unknown id) comes back as a tool error with vecmem's
message, so the calling model can read it. Nothing but protocol messages goes to stdout.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from vecmem.bank import MemoryBank
from vecmem.errors import VecmemError

__all__ = ["create_server"]

# A model's word about the user is not the user's own: it weighs a little less (the reranker multiplies
# importance by confidence), as the chat's rule-based extraction does, and stays above the review confidence.
MODEL_CONFIDENCE = 0.8
INSTRUCTIONS = (
    "Long-term memory about the user. Before answering, call recall with the user's message and put the "
    "returned context in your prompt; when the user states a lasting fact, preference or instruction, call "
    "remember with one short sentence about the user."
)


def create_server(bank: MemoryBank) -> MCPServer:
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
