"""The answers of ``vecmem serve``: every response body of the HTTP API as a pydantic model with a description per
field (the requests, and the error shape every failure has, are http/schemas.py's)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from vecmem.interfaces.http.schemas import MemorySource, MemoryStatus, MemoryType
from vecmem.models import PromptPack

__all__ = [
    "AddedOut",
    "BulkItemOut",
    "BulkOut",
    "ContextOut",
    "ErasedOut",
    "HitOut",
    "HitRate",
    "MemoryOut",
    "MessagesOut",
    "PruneCandidateOut",
    "ReplacedMemoryOut",
    "ReplacedOut",
    "SkippedOut",
    "StatsOut",
    "context_out",
]


class ProvenanceOut(BaseModel):
    """Where an extracted memory came from."""

    session_id: str | None = Field(description="The conversation: the chat's session, or the session_id the "
                                               "messages were sent with; null without one.")
    message_ids: list[str] = Field(description="The messages that said it: the chat's turn ids, or the ids the "
                                               "messages were sent with (else their positions in the list).")
    speaker: str | None = Field(default=None, description="Who said them, in a conversation between people (the "
                                                          "message's speaker); absent for the user of a chat.")


class MemoryOut(BaseModel):
    """One stored memory."""

    id: str = Field(description="Its id.")
    content: str = Field(description="The statement.")
    type: MemoryType = Field(description="Its kind.")
    tags: list[str] = Field(description="Its labels.")
    importance: float = Field(description="How much it matters, in [0, 1].")
    scope: str = Field(description="'global', or the id of the one session it belongs to.")
    created_at: str = Field(description="When it was stored (ISO 8601, UTC).")
    last_accessed: str | None = Field(description="When a search last returned it (ISO 8601, UTC); null: never.")
    access_count: int = Field(description="How often searches returned it.")
    source: MemorySource = Field(description="Where it came from.")
    confidence: float = Field(description="How sure the source was, in [0, 1].")
    superseded_by: str | None = Field(description="The memory that replaced it; null while it is current.")
    user_id: str = Field(description="Whose memory it is.")
    context: str = Field(description="Text it is also found by (keyword search only).")
    status: MemoryStatus | Literal["superseded"] = Field(
        description="live, archived (by the forgetting policy), pending (review), or superseded (a newer memory, "
                    "superseded_by, replaced it).")
    version: int = Field(description="1 when stored, one more with every change: send it back with an update "
                                     "to refuse overwriting a change made since.")
    provenance: ProvenanceOut | None = Field(description="Where an extracted memory came from (the conversation "
                                                         "and its messages); null for one added directly.")


class ReplacedMemoryOut(BaseModel):
    """A memory an added one replaced: kept for history (superseded_by the new one), no longer retrieved."""

    id: str = Field(description="The replaced memory's id (POST /memories/{id}/restore undoes the replacement).")
    content: str = Field(description="What it said.")


class AddedOut(MemoryOut):
    """The memory an add stored, or the one that already said it, and what the add did."""

    action: Literal["added", "replaced", "unchanged"] = Field(
        description="added: a new memory; replaced: a new memory that supersedes the memories in replaced; "
                    "unchanged: this stored memory already said it, nothing was written.")
    replaced: list[ReplacedMemoryOut] = Field(description="The memories it replaced (empty unless replaced).")
    revised: list[ReplacedMemoryOut] = Field(description="Memories of several facts of which it changed one, "
                                                         "rewritten to keep the others (their earlier text is in "
                                                         "their history).")
    reason: str = Field(description="Why, in words: what it revises, or which memory already says it.")
    type_inferred: MemoryType | None = Field(description="The kind the memory agent's rules gave it when the request "
                                                         "named none; null when the request chose it.")
    type_reason: str = Field(description="Why the rules chose that kind (the cue they found); empty when the "
                                         "request chose it.")


class HitOut(BaseModel):
    """One search result with the parts of its score: score = w_s·similarity + w_r·recency + w_i·importance."""

    id: str = Field(description="The memory's id.")
    content: str = Field(description="The statement.")
    type: MemoryType = Field(description="Its kind.")
    score: float = Field(description="The rank score.")
    similarity: float = Field(description="Similarity to the query (dense and keyword fused in hybrid mode).")
    recency: float = Field(description="How recently it was used, in [0, 1].")
    importance: float = Field(description="Its importance, in [0, 1].")
    dense: float | None = Field(description="Cosine similarity; null when the dense side did not run.")
    keyword: float | None = Field(description="BM25 share of the best keyword match; null when it did not run.")
    relevance: float | None = Field(description="How much it has to do with the query, in [0, 1], on one scale "
                                                "whatever the mode and language: what a prompt's relevance floor "
                                                "compares; null for an empty query.")
    matched_terms: list[str] = Field(description="Why it was found: the query's words its keyword tokens hold (its "
                                                 "content, tags or context), as the query wrote them; [] for an empty "
                                                 "query.")
    scope: str = Field(description="'global' or its session.")
    tags: list[str] = Field(description="Its labels.")


class ReplacedOut(BaseModel):
    """A supersession: the older memory is kept for history and no longer retrieved."""

    old_id: str = Field(description="The memory replaced.")
    new_id: str = Field(description="The memory that replaced it.")


class SkippedOut(BaseModel):
    """A user message nothing was stored for, and why."""

    index: int = Field(description="Its position in the messages sent (0 the first).")
    content: str = Field(description="What it said.")
    stage: str = Field(description="Who decided: rules, lexicon or model (the write gate), or extraction.")
    reason: str = Field(description="Why it was not kept.")


class MessagesOut(BaseModel):
    """What learning from a conversation did."""

    written: list[MemoryOut] = Field(description="The memories stored, as they are now (pending ones wait for "
                                                 "review; one replaced by a later message shows superseded_by).")
    replaced: list[ReplacedOut] = Field(description="Each memory a newer statement replaced.")
    skipped: list[SkippedOut] = Field(description="The user messages nothing was stored for, and why.")
    unchanged: list[str] = Field(description="Ids of stored memories that already said what a message said.")


class ContextOut(BaseModel):
    """The prompt, ready for a chat-completions call, and what each section costs."""

    messages: list[dict[str, str]] = Field(description="The messages to send: system prompt, long-term memories "
                                                       "(as data, with their dates), recent turns, the query.")
    tokens: dict[str, int] = Field(description="Tokens per section: system, long_term, short_term, current.")
    limits: dict[str, int] = Field(description="Each section's share of the window, in tokens.")
    long_term: str = Field(description="The long-term section's text ('' when no memory made it in).")
    memories: list[HitOut] = Field(description="The memories injected, best first, with their score parts.")
    dropped_ids: list[str] = Field(description="Memories retrieved but left out to fit the budget.")
    truncated_ids: list[str] = Field(description="Memories cut short (with a visible marker) to fit.")
    below_floor_ids: list[str] = Field(description="Memories retrieved but left out for a relevance under the floor "
                                                   "(VECMEM_RELEVANCE_FLOOR).")


class ErasedOut(BaseModel):
    """What forgetting every memory of a user (or of one of its sessions) deleted."""

    user_id: str = Field(description="Whose memories were deleted.")
    session_id: str | None = Field(description="The session whose memories were deleted; null: every memory.")
    deleted: int = Field(description="How many memories were deleted (revisions and superseded ones included).")


class PruneCandidateOut(BaseModel):
    """A memory the forgetting policy archives (or, in a dry run, would), and why."""

    id: str = Field(description="The memory's id.")
    content: str = Field(description="The statement.")
    type: MemoryType = Field(description="Its kind.")
    scope: str = Field(description="'global' or its session.")
    retention: float = Field(description="Its retention value (weight times freshness).")
    reason: str = Field(description="Why it was selected.")


class HitRate(BaseModel):
    injected: int = Field(description="Memories the chat put into prompts.")
    used: int = Field(description="Of those, the ones the answers used.")
    rate: float | None = Field(description="used / injected; null before the chat recorded any.")


class StatsOut(BaseModel):
    """Counts for one user, or for the whole store when ``user_id`` is null."""

    user_id: str | None = Field(description="The user counted; null: every user.")
    count: int = Field(description="Every memory.")
    live: int = Field(description="Retrievable: live and not superseded.")
    superseded: int = Field(description="Replaced by a newer memory.")
    by_type: dict[str, int] = Field(description="Count per kind.")
    by_scope: dict[str, int] = Field(description="Count per scope ('global' or a session id).")
    users: list[str] = Field(description="The users counted.")
    embed_model: str = Field(description="The embedding model of the store.")
    embed_dim: int = Field(description="Its vector size.")
    location: str = Field(description="Where the memories live.")
    archived: int = Field(description="Archived by the forgetting policy.")
    pending: int = Field(description="Waiting in the review queue.")
    hits: HitRate = Field(description="The user's chat hit rate.")


class BulkItemOut(BaseModel):
    """What a bulk action did to one memory."""

    id: str = Field(description="The memory's id, as named.")
    status: int = Field(description="What the route for this one memory would have answered: 200 done, 404 no such "
                                    "memory, 409 not in the state the action needs (approve and reject: pending; "
                                    "unarchive: archived), 422 refused, 500 the store failed.",
                        json_schema_extra={"enum": [200, 404, 409, 422, 500]})
    error: str | None = Field(description="Why it failed, for a person; null when it was done.")
    field: str | None = Field(description="The field at fault when it failed, or null.")
    memory: MemoryOut | None = Field(description="The memory after the action (approve, unarchive), or as it was "
                                                 "deleted (forget, reject); null when it failed.")


class BulkOut(BaseModel):
    """A bulk action's outcome, memory by memory."""

    action: str = Field(description="The action done.")
    done: int = Field(description="How many of the memories it was done to.")
    failed: int = Field(description="How many it failed for (see each result).")
    results: list[BulkItemOut] = Field(description="One per id sent, in the order sent.")


def context_out(pack: PromptPack) -> dict[str, Any]:
    """A prompt pack as ``ContextOut`` (and the MCP ``build_context`` tool) return it."""
    return {"messages": [dict(message) for message in pack.messages], "tokens": dict(pack.tokens),
            "limits": dict(pack.limits), "long_term": pack.long_term,
            "memories": [hit.to_dict() for hit in pack.memories], "dropped_ids": list(pack.dropped_ids),
            "truncated_ids": list(pack.truncated_ids), "below_floor_ids": list(pack.below_floor_ids)}
