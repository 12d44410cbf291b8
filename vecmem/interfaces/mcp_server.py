"""``vecmem mcp``: memory as Model Context Protocol tools over stdio. The only importer of the MCP SDK (2.x).

Tools: ``recall`` (the budgeted long-term context for a query, ready to put in a prompt, with the memories it
holds; ``limit`` and ``threshold`` bound it), ``remember`` (store a statement, typed and resolved as the agent
does: the same statement is stored once, a newer one replaces what it revises, and the answer says which; screened
as a model's extraction is: a planted instruction is never stored as one, a doubtful statement waits for review), ``remember_messages``
(learn from a conversation as the chat's memory agent does: write gate, extraction, supersession),
``build_context`` (the whole prompt with token counts), ``update_memory`` (change fields of one memory, or
refuse when it changed since it was read), ``supersede`` (one memory replaced by another), ``list_memories``,
``forget`` (one memory) and ``forget_all`` (every memory of a named user, or of one session). Each takes an
optional ``user_id`` (``forget_all`` a required one).

Written for the model that calls them: every parameter has a description and, where there is a choice, an
enum; descriptions are plain sentences (no markup, no indentation); each tool says whether it reads, writes or
destroys (MCP's annotations: a host asks the person before a destructive call). A refusal (bad input, unknown
id, an argument of the wrong type) comes back as a tool error with one line naming the field ("importance: must be
a number"), never pydantic's report; ``serverInfo.version`` is vecmem's version. Nothing but protocol messages goes to stdout,
and stderr carries warnings only (retrieval/index/keyword.py quietens bm25s's line per index build). The model and the
user's index load in the background when the server starts, so the first call does not wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from vecmem import __version__
from vecmem.bank.api import MemoryApi
from vecmem.bank.learning import chat_messages
from vecmem.config import MIN_CONTEXT_TOKENS
from vecmem.errors import InvalidInputError, VecmemError
from vecmem.interfaces.http.responses import context_out
from vecmem.retrieval.query.parsed import searchable

__all__ = ["create_server", "warm_start"]

# A model's word about the user is not the user's own: it weighs a little less (the reranker multiplies
# importance by confidence), as the chat's rule-based extraction does, and stays above the review confidence.
MODEL_CONFIDENCE = 0.8
INSTRUCTIONS = (
    "Long-term memory about the user. Before answering, call recall with the user's message and put the "
    "returned context in your prompt; when the user states a lasting fact, preference or instruction, call "
    "remember with one short sentence about the user; when the user corrects something remembered, call "
    "update_memory or supersede."
)

MemoryType = Literal["fact", "preference", "instruction", "conclusion"]
UserId = Annotated[str | None, Field(description="Whose memories: an id of your application's user. Leave it "
                                                 "out for the server's default user.")]
SessionId = Annotated[str | None, Field(description="A conversation or task id. Memories stored with it are "
                                                    "seen in that session only; reads with it see the global "
                                                    "memories and that session's.")]
MemoryId = Annotated[str, Field(description="The memory's id, as recall, remember or list_memories returned it.")]
Importance = Annotated[float, Field(json_schema_extra={"minimum": 0, "maximum": 10}, description="How much it matters: 0 to 1, or above 1 up to 10 on "
                                                              "the ten-point scale (7 means 0.7). 1.0 for what the "
                                                              "user stressed, 0.7 for a preference or instruction, "
                                                              "0.5 for a plain fact.")]
Tokens = Annotated[int | None, Field(ge=MIN_CONTEXT_TOKENS, description="The model's context window in tokens; memories get their "
                                                        "share of it (25% by default). Leave it out for the "
                                                        "server's setting.")]

_READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
_CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def _said(text: str) -> str:
    """A description as one plain paragraph (a docstring's line breaks and indentation would reach the model)."""
    return " ".join(text.split())


def warm_start(bank: MemoryApi) -> threading.Thread:
    """Load the model and the default user's index in the background, so the first call answers quickly."""
    def warm() -> None:
        try:
            bank.warm_up()
        except VecmemError:
            pass  # the first call meets the same error and reports it as a tool error

    thread = threading.Thread(target=warm, name="vecmem-mcp-warm-up", daemon=True)
    thread.start()
    return thread


def create_server(bank: MemoryApi) -> MCPServer:
    server = _Server(name="vecmem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(annotations=_READS, description=_said("""The user's long-term memories relevant to the query,
        trimmed to their token share of context_tokens. Returns context (the text to put in your prompt, each
        memory as a dated line) and memories (each with its id and score parts). Call it before answering."""))
    def recall(query: Annotated[str, Field(description="The user's message, or what to look for.")],
               session_id: SessionId = None, user_id: UserId = None, context_tokens: Tokens = None,
               limit: Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 50}, description="The most memories to return.")] = 10,
               threshold: Annotated[float, Field(json_schema_extra={"minimum": 0, "maximum": 1}, description=(
                   "Leave out memories whose relevance to the query is below this (0 to 1, the same scale for every "
                   "model and language); 0 keeps the best limit whatever their relevance."))] = 0.0) -> dict[str, Any]:
        def build() -> Any:
            if not 0.0 <= threshold <= 1.0:
                raise InvalidInputError("threshold", f"must be between 0 and 1, got {threshold!r}")
            hits = [hit for hit in bank.search(searchable(query), limit, session_id=session_id, user_id=user_id,
                                               record_access=False) if (hit.relevance or 0.0) >= threshold]
            return bank.build_context(query, session_id=session_id, user_id=user_id, context_tokens=context_tokens,
                                      hits=hits)

        pack = _vecmem(build)
        return {"context": pack.long_term, "tokens": pack.tokens["long_term"],
                "memories": [hit.to_dict() for hit in pack.memories]}

    @server.tool(annotations=_WRITES, description=_said("""Store one lasting statement about the user, as one short
        sentence in the third person ("The user prefers tea"). It is decided as the memory agent decides: the same
        statement again is not stored twice (action unchanged), and a newer statement replaces what it revises
        ("The user moved to Shanghai" replaces "The user lives in Hangzhou": action replaced, with the replaced
        memories, which stay in the history). Leave memory_type out to have it inferred. Returns its id, what the
        call did and its status: live, or pending when it waits for a person's approval (low confidence). A text
        that tries to give the assistant instructions is stored only as a note that the user said it."""))
    def remember(content: Annotated[str, Field(description="The statement, one short sentence about the user.")],
                 memory_type: Annotated[MemoryType | None, Field(description=(
                     "fact: about the user or their situation; preference: what they like or choose; instruction: "
                     "how the assistant should behave; conclusion: something established together. Leave it out "
                     "to have it inferred from the statement."))] = None,
                 importance: Importance = 0.5, session_id: SessionId = None, user_id: UserId = None,
                 confidence: Annotated[float, Field(json_schema_extra={"minimum": 0, "maximum": 1}, description=(
                     "How sure you are the user means it (0 to 1); below the review confidence (0.5) it waits for "
                     "approval."))] = MODEL_CONFIDENCE) -> dict[str, Any]:
        # What a model relays is untrusted (it may be repeating a planted instruction): stored as extracted, so
        # the bank screens it as it screens the chat's extraction (bank/intake.py).
        result = _vecmem(lambda: bank.remember(content, memory_type=memory_type, importance=importance,
                                               session_id=session_id, user_id=user_id, source="extracted",
                                               confidence=confidence))
        record = result.record
        return {"id": record.id, "content": record.content, "type": record.type, "scope": record.scope,
                "status": record.status, "version": record.version, "action": result.action,
                "replaced": [{"id": old.id, "content": old.content} for old in result.replaced],
                "revised": [{"id": old.id, "content": old.content} for old in result.revised],
                "reason": result.reason, "type_inferred": result.type_inferred}

    @server.tool(annotations=_WRITES, description=_said("""Learn from a conversation, oldest message first: each
        user message goes through the write gate (greetings, questions and requests are skipped), extraction (one
        clean statement per fact) and supersession (a newer statement replaces what it revises); assistant and
        system messages are context only. Returns the memories written, the (old_id, new_id) pairs replaced, the
        messages skipped and why, and the ids already remembered."""))
    def remember_messages(messages: Annotated[list[dict[str, Any]], Field(description=(
                              'The conversation: [{"role": "user" or "assistant" or "system", "content": text}], '
                              "oldest first."))],
                          session_id: SessionId = None, user_id: UserId = None) -> dict[str, Any]:
        # What a model relays is untrusted: extraction stores source "extracted", so the bank screens every
        # memory as it screens remember's (bank/intake.py): planted instructions, doubtful statements.
        learnt = _vecmem(lambda: bank.add_messages(messages, session_id=session_id, user_id=user_id))
        return dict(learnt.to_dict())

    @server.tool(annotations=_READS, description=_said("""The whole prompt for the user's message, ready for a
        chat-completions call: messages (system prompt, the relevant memories as dated data lines within their
        token share, the recent turns, then the query), tokens and limits per section, and the memories
        injected with their score parts."""))
    def build_context(query: Annotated[str, Field(description="The user's message.")],
                      session_id: SessionId = None, user_id: UserId = None, context_tokens: Tokens = None,
                      k: Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 50}, description="The most memories to consider.")] = 10,
                      short_term: Annotated[list[dict[str, Any]] | None, Field(description=(
                          'Recent turns to include verbatim: [{"role": "user" or "assistant", "content": text}], '
                          "oldest first."))] = None) -> dict[str, Any]:
        def build() -> dict[str, Any]:
            recent = chat_messages(short_term or [], field="short_term", empty_ok=True)
            return context_out(bank.build_context(query, session_id=session_id, user_id=user_id, k=k,
                                                  context_tokens=context_tokens, short_term=recent))

        return dict(_vecmem(build))

    @server.tool(annotations=_CHANGES, description=_said("""Change fields of one memory (it keeps its id; what it
        said before stays in its history). Give only the fields to change. With version (as remember or
        list_memories returned it), the change is refused if the memory changed since, so you never overwrite
        what someone else wrote; read it again then."""))
    def update_memory(memory_id: MemoryId,
                      content: Annotated[str | None, Field(description="What it says now.")] = None,
                      memory_type: Annotated[MemoryType | None, Field(description="Its new kind.")] = None,
                      importance: Annotated[float | None, Field(json_schema_extra={"minimum": 0, "maximum": 10}, description=(
                          "Its new importance (0 to 1, or up to 10 on the ten-point scale)."))] = None,
                      tags: Annotated[list[str] | None, Field(description="Its new labels (replacing the old).")] = None,
                      version: Annotated[int | None, Field(json_schema_extra={"minimum": 1}, description=(
                          "The version the change was built on."))] = None,
                      user_id: UserId = None) -> dict[str, Any]:
        record = _vecmem(lambda: bank.update(memory_id, user_id=user_id, content=content, memory_type=memory_type,
                                             importance=importance, tags=tags, expected_version=version))
        return {"id": record.id, "content": record.content, "type": record.type, "importance": record.importance,
                "tags": list(record.tags), "version": record.version}

    @server.tool(annotations=_CHANGES, description=_said("""Mark one memory as replaced by a newer one (the user
        changed their mind): the old one stays in the history and is never recalled again. Refused when it would
        make a loop, or when the newer one is not seen everywhere the old one is."""))
    def supersede(old_id: Annotated[str, Field(description="The memory that no longer holds.")],
                  new_id: Annotated[str, Field(description="The memory that replaces it.")],
                  user_id: UserId = None) -> dict[str, Any]:
        record = _vecmem(lambda: bank.supersede(old_id, new_id, user_id=user_id))
        return {"id": record.id, "superseded_by": record.superseded_by}

    @server.tool(annotations=_READS, description=_said("""The user's live memories, newest first: of every
        session, or with session_id what that session sees."""))
    def list_memories(session_id: SessionId = None, user_id: UserId = None,
                      limit: Annotated[int, Field(json_schema_extra={"minimum": 1, "maximum": 500}, description="The most memories to list.")] = 50,
                      ) -> dict[str, Any]:
        records = _vecmem(lambda: bank.list_memories(session_id=session_id, user_id=user_id, limit=limit))
        return {"memories": [{"id": r.id, "content": r.content, "type": r.type, "scope": r.scope,
                              "importance": r.importance, "version": r.version} for r in records]}

    @server.tool(annotations=ToolAnnotations(title="Forget one memory", read_only_hint=False, destructive_hint=True,
                                             idempotent_hint=True, open_world_hint=False),
                 description=_said("""Delete one memory for good, with its history. There is no undo: use it when
                 the person asks to forget something, or for a memory that is wrong and not merely outdated (then
                 supersede it)."""))
    def forget(memory_id: MemoryId, user_id: UserId = None) -> dict[str, Any]:
        record = _vecmem(lambda: bank.forget(memory_id, user_id=user_id))
        return {"forgotten": record.id, "content": record.content}

    @server.tool(annotations=ToolAnnotations(title="Forget every memory of a user", destructive_hint=True,
                                             idempotent_hint=True, read_only_hint=False, open_world_hint=False),
                 description=_said("""Delete EVERY memory of user_id for good, with their history (with session_id:
                 only that session's memories). There is no undo. Use only when the person asked to be forgotten;
                 returns how many memories were deleted."""))
    def forget_all(user_id: Annotated[str, Field(description=(
                       "Whose memories to delete, named in full: no default user stands in for it."))],
                   session_id: Annotated[str | None, Field(description=(
                       "Only the memories of this session; leave it out for every memory of the user."))] = None,
                   ) -> dict[str, Any]:
        deleted = _vecmem(lambda: bank.forget_all(user_id, session_id=session_id))
        return {"user_id": user_id, "session_id": session_id, "deleted": deleted}

    return server


class _Server(MCPServer):
    """The SDK's server, with its refusals in vecmem's words: the arguments' validation (pydantic's report, of
    several lines and a link, would reach the model) and vecmem's errors become one line naming the field,
    without the SDK's "Error executing tool NAME:" before it. A crash stays the SDK's generic line."""

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, reading stdin through ``_Lines`` (the SDK's own reader cannot be cancelled),
        every request read answered before the end of the input reaches the SDK (``_Unanswered``)."""
        unanswered = _Unanswered()
        async with stdio_server(stdin=cast(Any, _Lines(sys.stdin.fileno(), unanswered))) as (read_stream,
                                                                                          write_stream):
            await self._lowlevel_server.run(read_stream, cast(Any, _Answering(write_stream, unanswered)),
                                            self._lowlevel_server.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_refusal(cause)) from cause
            if isinstance(cause, ToolError) and isinstance(cause.__cause__, VecmemError):
                raise ToolError(str(cause.__cause__)) from cause.__cause__
            raise


class _Unanswered:
    """The requests read from the client and not answered yet, by id. At the end of its input the SDK cancels the
    requests still in flight (its dispatcher's task group), so a client that writes its requests and closes the
    pipe (``printf ... | vecmem mcp``) lost every answer but the first: ``_Lines`` holds the end back until each
    request read has its answer, a cancellation from the client, or DRAIN_SECONDS have passed."""

    DRAIN_SECONDS = 120.0  # longer than any one call takes, the model's first load on a loaded machine included

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._settled = asyncio.Event()
        self._settled.set()

    def read(self, line: str) -> None:
        """Note the request a line of input holds, if it holds one (a notification has no id)."""
        try:
            message = json.loads(line)
        except ValueError:
            return  # the SDK answers a line it cannot parse without an id: nothing to wait for
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict):
                continue
            if "method" in item and isinstance(item.get("id"), (str, int)):  # JSON-RPC's ids; a null one is no request
                self._ids.add(json.dumps(item["id"]))
                self._settled.clear()
            elif item.get("method") == "notifications/cancelled" and isinstance(item.get("params"), dict):
                self._done(item["params"].get("requestId"))  # a cancelled request may get no answer

    def answered(self, message: Any) -> None:
        """Note a message the server sends: an answer (a response or an error) settles its request."""
        if not hasattr(message, "method"):  # the server's own requests and notifications settle nothing
            self._done(getattr(message, "id", None))

    def _done(self, request_id: object) -> None:
        if request_id is not None:
            self._ids.discard(json.dumps(request_id))
        if not self._ids:
            self._settled.set()

    async def settled(self) -> None:
        """Until every request read is answered, or DRAIN_SECONDS."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), self.DRAIN_SECONDS)


class _Answering:
    """The SDK's write stream, telling ``_Unanswered`` of each message sent; everything else is the stream's."""

    def __init__(self, stream: Any, unanswered: _Unanswered) -> None:
        self._stream = stream
        self._unanswered = unanswered

    async def send(self, item: Any) -> None:
        await self._stream.send(item)
        self._unanswered.answered(getattr(item, "message", item))

    async def __aenter__(self) -> _Answering:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        return cast(bool | None, await self._stream.__aexit__(*exc))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Lines:
    """The protocol's input, line by line, read from the descriptor by a thread of its own and handed to the event
    loop. A stop (SIGTERM, Ctrl-C: stopping.py) cancels the wait for the next line at once; the SDK's reader, an
    anyio worker thread that cannot be cancelled, kept the server waiting until the client wrote or closed its
    end. The thread is a daemon blocked in read(2) on the raw descriptor, holding no lock (not sys.stdin's, which
    the interpreter's shutdown takes): the process ends without waiting for it. The input's end is passed on once
    every request read is answered (``_Unanswered``)."""

    def __init__(self, descriptor: int, unanswered: _Unanswered) -> None:
        self._descriptor = descriptor
        self._unanswered = unanswered

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[bytes] = asyncio.Queue()

        def read() -> None:
            chunk = b"x"
            while chunk:
                try:
                    chunk = os.read(self._descriptor, 1 << 16)
                except OSError:
                    chunk = b""
                try:
                    loop.call_soon_threadsafe(chunks.put_nowait, chunk)
                except RuntimeError:  # the loop is closed: the server has stopped
                    return

        threading.Thread(target=read, name="vecmem-mcp-stdin", daemon=True).start()
        pending = b""
        while chunk := await chunks.get():
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                text = line.decode("utf-8", "replace")
                self._unanswered.read(text)
                yield text + "\n"
        if pending:
            text = pending.decode("utf-8", "replace")
            self._unanswered.read(text)
            yield text
        await self._unanswered.settled()


_PLAIN = {"missing": "is required", "extra_forbidden": "is not a parameter of this tool"}


def _refusal(error: ValidationError) -> str:
    """One line for a tool's arguments that failed validation: the first field at fault and why (pydantic's
    wording, without its input echo and link), and how many more there are."""
    problems = error.errors(include_url=False, include_input=False)
    if not problems:
        return "the arguments are not valid"
    first = problems[0]
    field = ".".join(str(part) for part in first["loc"]) or "arguments"
    reason = _PLAIN.get(first["type"]) or first["msg"][:1].lower() + first["msg"][1:]
    more = len(problems) - 1
    return f"{field}: {reason}" + (f" (and {more} more {'problems' if more > 1 else 'problem'})" if more else "")


def _vecmem(call: Any) -> Any:
    try:
        return call()
    except VecmemError as error:
        raise ToolError(str(error)) from error
