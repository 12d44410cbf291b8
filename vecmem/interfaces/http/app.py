"""``vecmem serve``: the MemoryBank facade as a JSON HTTP API (FastAPI), and the memory panel at ``/`` (one
static page, ``panel.html``, calling the API). The only fastapi importer.

Every route takes an optional ``user`` (default: the configured user, or a per-user key's own user). Every
failure is JSON ``{"error": message, "field": name or null}``, unknown routes (404), wrong methods (405) and
malformed JSON (field ``"body"``) included: 401 without a valid key, 403 for a refused origin, a missing
``X-Vecmem-Request: 1`` on a state-changing request or a key acting beyond its user, 421 for a foreign Host,
422 for a value vecmem refuses, 404 for an unknown memory, 409 for a store another process holds, 500 when the
store or the model failed. Each route declares these in the OpenAPI description at ``/openapi.json``; there is
no ``/docs`` page (its assets would come from a CDN, unreachable offline).

Who may call: http/security.py (Host, Origin, the cross-site header, keys, users), checked before a body is
read. With no key configured the API serves loopback clients only; bound to any other address it refuses to
start without one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from importlib import resources
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import AfterValidator
from starlette.exceptions import HTTPException

from vecmem.bank.api import MemoryApi
from vecmem.bank.learning import chat_messages
from vecmem.bank.listing import DEFAULT_SORT, SORTS
from vecmem.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    StoreInUseError,
    VecmemError,
    is_user_error,
)
from vecmem.interfaces.http.keys import KeyStore, Principal
from vecmem.interfaces.http.responses import (
    AddedOut,
    BulkOut,
    ContextOut,
    ErasedOut,
    HitOut,
    MemoryOut,
    MessagesOut,
    PruneCandidateOut,
    StatsOut,
    context_out,
)
from vecmem.interfaces.http.schemas import (
    IDENTIFIER_SCHEMA,
    Approval,
    BulkRequest,
    Changes,
    ContextRequest,
    NewMemory,
    NewMessages,
    SearchRequest,
    Supersession,
    described,
    errors,
)
from vecmem.interfaces.http.security import CSRF_HEADER, PRINCIPAL, Guard, check_binding, is_loopback, keyed
from vecmem.retrieval.budget import DEFAULT_SYSTEM_PROMPT
from vecmem.storage.state.sessions import SessionStore
from vecmem.validation import validate_identifier

__all__ = ["create_app", "is_loopback", "check_binding"]

PANEL = (resources.files(__package__) / "panel.html").read_text(encoding="utf-8")
_READ = errors(401, 403, 421, 422, 500)  # what any guarded route can answer
_ONE = errors(401, 403, 404, 409, 421, 422, 500)  # ... and one naming a memory
_WRITE = errors(401, 403, 409, 421, 422, 500)
# what fits the window is counted in tokens, which no JSON Schema can bound: a valid request may not fit it
_CONTEXT = {**_READ, 422: {**_READ[422], "description": "A value the API refuses (field names it), or a query, "
                           "system prompt or task too long for its share of the context window (field null)."}}


def _identifier(value: str | None) -> str | None:
    """A user, session or memory id in the query or the path, checked as the schema declares it
    (IDENTIFIER_SCHEMA, validation.py's rule): every route, also one that would not read it (nothing to prune)."""
    return None if value is None else validate_identifier("value", value)


_Id = AfterValidator(_identifier)
_User = Annotated[str | None, _Id, Query(
    description="The user whose memories the route reads or writes; absent: the configured user, or a per-user "
                "key's own user. A per-user key may name only its own user.", json_schema_extra=IDENTIFIER_SCHEMA)]
_Session = Annotated[str | None, _Id, Query(description="Only what this session sees (global memories and its "
                                                        "own).", json_schema_extra=IDENTIFIER_SCHEMA)]
_Types = Annotated[list[str] | None, Query(description="Only these kinds (repeatable).", json_schema_extra={
    "items": {"enum": ["fact", "preference", "instruction", "conclusion"]}})]
_Statuses = Annotated[list[str] | None, Query(description="live (the default), archived, pending (repeatable).",
                                              json_schema_extra={"items": {"enum": ["live", "archived", "pending"]}})]
_MemoryId = Annotated[str, _Id, Path(description="The memory's id.", json_schema_extra=IDENTIFIER_SCHEMA)]
_WithSuperseded = Annotated[bool, Query(description="Superseded memories too.")]
_Limit = Annotated[int | None, Query(ge=1, description="At most this many (a page).")]
_Offset = Annotated[int, Query(ge=0, description="Skip this many first (where the page starts).")]
_Sort = Annotated[str, Query(description="The order: a field, ascending, or with '-' first, descending (the "
                                         "default, -created_at: newest first); ties by id, the same way.",
                             json_schema_extra={"enum": list(SORTS)})]
# the total travels in a header, so the body stays the list every client of this route already reads
_TOTAL: dict[int | str, dict[str, Any]] = {200: {"description": "The page of memories.", "headers": {"X-Total-Count": {
    "description": "How many memories the listing holds in all (every page), whatever offset and limit say.",
    "schema": {"type": "string", "pattern": "^[0-9]+$"}}}}}
_DryRun = Annotated[bool, Query(description="Only say what would be archived, and why.")]
_Owner = Annotated[str, _Id, Path(description="The user whose memories are deleted, named in full: this route never "
                                         "falls back to a default user. A per-user key may name only its own.",
                             json_schema_extra=IDENTIFIER_SCHEMA)]
_OneSession = Annotated[str | None, _Id, Query(description="Only the memories of this session (its scope); absent: every "
                                                      "memory of the user.", json_schema_extra=IDENTIFIER_SCHEMA)]


class NdjsonResponse(StreamingResponse):
    media_type = "application/x-ndjson"


def caller_user(request: Request, user: _User = None) -> str | None:
    """The ``user`` a route acts for: as given (the guard let only a key's own user through), else the key's."""
    principal: Principal = request.scope[PRINCIPAL]
    return user if user is not None else principal.user_id


def create_app(bank: MemoryApi, *, token: str | None = None, keys: KeyStore | None = None,
               allowed_hosts: Iterable[str] = ()) -> FastAPI:
    """The API on ``bank``. ``token``: the admin key (--token / VECMEM_API_TOKEN); ``keys``: the key file
    (default: VECMEM_HOME's); ``allowed_hosts``: Host names besides the loopback ones (--allow-host)."""
    sessions = SessionStore.open(bank.settings)  # where the chat records its hit rate
    app = FastAPI(title="vecmem", version="0.1.0", docs_url=None, redoc_url=None,
                  description="Long-term memory for LLM agents: add, search (with score parts), manage. "
                              f"State-changing requests must send `{CSRF_HEADER}: 1`; once any key is "
                              "configured every route needs `Authorization: Bearer <key>`.")
    key_store = keys or KeyStore.open(bank.settings)
    app.add_middleware(Guard, token=token, keys=key_store, allowed_hosts=allowed_hosts)
    schemas: dict[bool, dict[str, Any]] = {}  # with the key required, and without (none configured yet)

    def openapi() -> dict[str, Any]:
        required = keyed(token, key_store)
        if required not in schemas:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schemas[required] = described(schema, key_required=required, csrf_header=CSRF_HEADER)
        return schemas[required]

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(VecmemError)
    def vecmem_error(_: Request, error: VecmemError) -> JSONResponse:
        version = error.current_version if isinstance(error, ConflictError) else None
        return _error(_status_of(error), str(error), _field_of_error(error),
                      extra={} if version is None else {"current_version": version})

    @app.exception_handler(RequestValidationError)
    def malformed(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        first = problems[0] if problems else {}
        where = _field_of(first)
        refused = first.get("ctx", {}).get("error")
        if isinstance(refused, InvalidInputError):  # vecmem's own rule (an id's): its reason, as the bank says it
            return _error(422, f"{where}: {refused.reason}", where)
        return _error(422, f"{where}: {first.get('msg', 'malformed request')}", where)

    @app.exception_handler(HTTPException)
    def http_error(request: Request, error: HTTPException) -> JSONResponse:
        if error.status_code == 400:  # a body FastAPI could not decode: malformed, like invalid JSON
            return _error(422, f"body: {error.detail}", "body")
        if error.status_code == 405:  # Allow: every method of the path, not only those of the route tried first
            allowed = sorted({method for route in app.routes if isinstance(route, APIRoute)
                              and route.path_regex.match(request.url.path) for method in route.methods or ()})
            return _error(405, f"{request.method} is not one of {', '.join(allowed)} here", None,
                          {"Allow": ", ".join(allowed)})
        return _error(error.status_code, str(error.detail), None, error.headers)  # an unknown route (404)

    @app.exception_handler(Exception)
    def unexpected(_: Request, error: Exception) -> JSONResponse:  # still the one shape; the log has the cause
        return _error(500, f"internal error: {type(error).__name__}", None)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def panel() -> str:
        """The memory panel: one static page that calls the routes below (no build step)."""
        return PANEL

    user = Depends(caller_user)

    @app.post("/memories", status_code=201, response_model=AddedOut, responses=_WRITE)
    def add(memory: NewMemory, user: str | None = user) -> dict[str, Any]:
        """Store a memory as the memory agent would: without a type, the agent's rules type it; the same
        statement again returns the stored memory (action ``unchanged``); a newer statement replaces the memories
        it revises, within scope ("I moved to Shanghai" after "I live in Hangzhou": action ``replaced``, with
        what it replaced; each restorable), unless ``resolve`` is false. The response is the memory with what the
        add did. With source ``extracted`` it is screened as the chat's extraction is: below the review confidence
        it waits in the review queue (status ``pending``, replacing nothing yet), and a planted instruction is
        kept only as a fact the message said."""
        return bank.remember(memory.content, user_id=user, memory_type=memory.type, importance=memory.importance,
                             tags=memory.tags, session_id=memory.session_id, source=memory.source,
                             confidence=memory.confidence, memory_id=memory.id, context=memory.context or "",
                             resolve=memory.resolve).to_dict()

    @app.post("/messages", response_model=MessagesOut, responses=_WRITE)
    def add_messages(conversation: NewMessages, user: str | None = user) -> dict[str, Any]:
        """Learn from a conversation (mem0's ``add``): each user message goes through the write gate, extraction
        and supersession as a chat turn's does (offline rules, or the server's configured chat model); assistant
        and system messages are context only. Extracted text is screened like any model's (review queue,
        planted instructions). Returns what was written, what it replaced, and the messages skipped and why."""
        messages = [message.model_dump() for message in conversation.messages]
        return bank.add_messages(messages, user_id=user, session_id=conversation.session_id).to_dict()

    @app.post("/context", response_model=ContextOut, responses=_CONTEXT)
    def build_context(wanted: ContextRequest, user: str | None = user) -> dict[str, Any]:
        """The prompt for the user's message, as the Python ``build_context`` builds it: the system prompt, the
        memories that fit the long-term share (as dated data lines), the task and recent turns, the query; with
        each section's tokens and the memories injected (which count as used)."""
        recent = chat_messages([turn.model_dump() for turn in wanted.short_term], field="short_term", empty_ok=True)
        pack = bank.build_context(wanted.query, user_id=user, session_id=wanted.session_id, k=wanted.k,
                                  types=wanted.types, context_tokens=wanted.context_tokens, short_term=recent,
                                  working_memory=wanted.working_memory,
                                  system_prompt=DEFAULT_SYSTEM_PROMPT if wanted.system_prompt is None
                                  else wanted.system_prompt)
        return context_out(pack)

    @app.delete("/users/{user_id}/memories", response_model=ErasedOut, responses=_WRITE)
    def forget_all(request: Request, user_id: _Owner, session_id: _OneSession = None) -> Any:
        """Delete every memory of the user for good (with ``session_id``: of that session only), whatever its
        state, with the earlier versions edits kept and the access statistics; returns how many. There is no
        undo: the user id in the path is the confirmation (no default user stands in for it)."""
        principal: Principal = request.scope[PRINCIPAL]
        if not principal.admin and principal.user_id != user_id:  # the guard checks ?user=, not this path
            return _error(403, f"this key belongs to user {principal.user_id!r} and cannot delete the memories "
                          "of another user", "user_id")
        deleted = bank.forget_all(user_id, session_id=session_id)
        return {"user_id": user_id, "session_id": session_id, "deleted": deleted}

    @app.get("/memories", response_model=list[MemoryOut], responses={**_READ, **_TOTAL})
    def list_memories(response: Response, user: str | None = user, session: _Session = None,
                      type: _Types = None, include_superseded: _WithSuperseded = False, limit: _Limit = None,
                      status: _Statuses = None, offset: _Offset = 0, sort: _Sort = DEFAULT_SORT) -> list[dict[str, Any]]:
        """The user's memories, live ones unless ``status`` says otherwise, a page at a time: ``sort``, ``offset``
        and ``limit`` choose the page; the ``X-Total-Count`` header says how many there are in all. A header, so the
        body stays the list it always was (a client that pages reads one header; one that does not, nothing new),
        and one scan answers both, where a second route for the count would scan again."""
        page = bank.page_memories(user_id=user, session_id=session, types=type, sort=sort, offset=offset,
                                  limit=limit, include_superseded=include_superseded, statuses=status or ["live"])
        response.headers["X-Total-Count"] = str(page.total)
        return [record.to_dict() for record in page.memories]

    @app.get("/memories/{memory_id}", response_model=MemoryOut, responses=_ONE)
    def get(memory_id: _MemoryId, user: str | None = user) -> dict[str, Any]:
        """One memory."""
        return bank.get(memory_id, user_id=user).to_dict()

    @app.patch("/memories/{memory_id}", response_model=MemoryOut, responses=_ONE)
    def update(memory_id: _MemoryId, changes: Changes, user: str | None = user) -> dict[str, Any]:
        """Change fields of a memory; it keeps its id, and what it said before stays in its history; ``scope``
        moves it. The fields given are applied to the memory as stored now; with ``version``, only if it is still
        that version (409 with ``current_version`` otherwise)."""
        return bank.update(memory_id, user_id=user, content=changes.content, memory_type=changes.type,
                           importance=changes.importance, tags=changes.tags, confidence=changes.confidence,
                           context=changes.context, scope=changes.scope, expected_version=changes.version).to_dict()

    @app.delete("/memories/{memory_id}", response_model=MemoryOut, responses=_ONE)
    def forget(memory_id: _MemoryId, user: str | None = user) -> dict[str, Any]:
        """Delete a memory for good; returns what was deleted."""
        return bank.forget(memory_id, user_id=user).to_dict()

    @app.get("/memories/{memory_id}/history", response_model=list[MemoryOut], responses=_ONE)
    def history(memory_id: _MemoryId, user: str | None = user) -> list[dict[str, Any]]:
        """Its supersession chain, oldest first (the current memory last), with the earlier versions its edits
        kept (ids ``<id>@v<n>``, each created when an edit replaced it)."""
        return [record.to_dict() for record in bank.history(memory_id, user_id=user)]

    @app.post("/memories/{memory_id}/supersede", response_model=MemoryOut, responses=_ONE)
    def supersede(memory_id: _MemoryId, by: Supersession, user: str | None = user) -> dict[str, Any]:
        """Mark this memory as replaced by ``new_id``; returns it."""
        return bank.supersede(memory_id, by.new_id, user_id=user).to_dict()

    @app.post("/memories/{memory_id}/restore", response_model=MemoryOut, responses=_ONE)
    def restore(memory_id: _MemoryId, user: str | None = user) -> dict[str, Any]:
        """Undo a supersession: this memory is live again. For an earlier version kept by an edit, the memory
        says it again (keeping its id) and is returned."""
        return bank.restore(memory_id, user_id=user).to_dict()

    @app.get("/review", response_model=list[MemoryOut], responses=_READ)
    def review_queue(user: str | None = user) -> list[dict[str, Any]]:
        """Extracted memories waiting for approval, oldest first."""
        return [record.to_dict() for record in bank.review_queue(user_id=user)]

    @app.post("/memories/{memory_id}/approve", response_model=MemoryOut, responses=_ONE)
    def approve(memory_id: _MemoryId, approval: Approval | None = None, user: str | None = user) -> dict[str, Any]:
        """Let a pending memory into retrieval, corrected first when ``content`` is given."""
        content = None if approval is None else approval.content
        return bank.approve(memory_id, user_id=user, content=content).to_dict()

    @app.post("/memories/{memory_id}/reject", response_model=MemoryOut, responses=_ONE)
    def reject(memory_id: _MemoryId, user: str | None = user) -> dict[str, Any]:
        """Delete a pending memory for good."""
        return bank.reject(memory_id, user_id=user).to_dict()

    @app.post("/memories/{memory_id}/unarchive", response_model=MemoryOut, responses=_ONE)
    def unarchive(memory_id: _MemoryId, user: str | None = user) -> dict[str, Any]:
        """Bring an archived memory back into retrieval."""
        return bank.unarchive(memory_id, user_id=user).to_dict()

    @app.post("/bulk", response_model=BulkOut, responses=_WRITE)
    def bulk(request: BulkRequest, user: str | None = user) -> dict[str, Any]:
        """One action (forget, approve, reject, unarchive) on many memories, each on its own, as its own route
        would do it: the answer is 200 with each memory's outcome (its status, error and field, or the memory),
        so one that fails hides none of the others. A malformed id or user refuses the whole request (422)
        before anything is done."""
        act = {"forget": bank.forget, "approve": bank.approve, "reject": bank.reject,
               "unarchive": bank.unarchive}[request.action]
        ids = [validate_identifier("ids", memory_id) for memory_id in request.ids]
        if user is not None:
            validate_identifier("user_id", user)
        results = []
        for memory_id in ids:
            try:
                results.append({"id": memory_id, "status": 200, "error": None, "field": None,
                                "memory": act(memory_id, user_id=user).to_dict()})
            except VecmemError as error:
                results.append({"id": memory_id, "status": _status_of(error), "error": str(error),
                                "field": _field_of_error(error), "memory": None})
        done = sum(result["status"] == 200 for result in results)
        return {"action": request.action, "done": done, "failed": len(results) - done, "results": results}

    @app.post("/prune", response_model=list[PruneCandidateOut], responses=_WRITE)
    def prune(user: str | None = user, dry_run: _DryRun = False) -> list[dict[str, Any]]:
        """Apply the forgetting policy to the user (every user without ``user``: the admin key's alone)."""
        return [candidate.to_dict() for candidate in bank.prune(user_id=user, dry_run=dry_run)]

    @app.post("/search", response_model=list[HitOut], responses=_READ)
    def search(request: SearchRequest, user: str | None = user) -> list[dict[str, Any]]:
        """The best memories for the query, each with its score parts (similarity, dense, keyword, recency,
        importance)."""
        hits = bank.search(request.query, request.k, user_id=user, session_id=request.session_id,
                           types=request.types, record_access=request.record_access)
        return [hit.to_dict() for hit in hits]

    @app.get("/stats", response_model=StatsOut, responses=_READ)
    def stats(user: str | None = user) -> dict[str, Any]:
        """Counts by type and scope (every user without ``user``: the admin key's alone), and the user's chat
        hit rate: of the memories the chat put in prompts, the share the answers used (null before any)."""
        counted = bank.stats(user_id=user).to_dict()
        injected, used = sessions.hit_totals(user or bank.settings.default_user)
        counted["hits"] = {"injected": injected, "used": used,
                           "rate": None if injected == 0 else round(used / injected, 4)}
        return counted

    @app.get("/export", response_class=NdjsonResponse, responses={
        **_READ, 200: {"description": "One memory (the Memory schema) as JSON per line.",
                       "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
    def export(user: str | None = user) -> NdjsonResponse:
        """Every memory as JSON Lines (every user without ``user``: the admin key's alone), superseded ones
        included."""
        records = list(bank.export(user_id=user))  # read before answering: an error is still a JSON error

        def lines() -> Iterator[str]:
            for record in records:
                yield json.dumps(record.to_dict(), ensure_ascii=False) + "\n"

        return NdjsonResponse(lines())

    return app


def _status_of(error: VecmemError) -> int:
    """The HTTP status of a refusal or failure (the module docstring says which is which)."""
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, (StoreInUseError, ConflictError)):
        return 409
    return 422 if is_user_error(error) else 500


def _field_of_error(error: VecmemError) -> str | None:
    return error.field if isinstance(error, (InvalidInputError, ConflictError)) else None


def _field_of(problem: Any) -> str:
    """The request part at fault: a body field or parameter name, or "body" for the body as a whole (malformed
    JSON, a missing or non-object body): never a character offset."""
    location = [str(part) for part in problem.get("loc", ())]
    if problem.get("type") == "json_invalid" or len(location) < 2:
        return "body" if not location or location[0] == "body" else location[0]
    return location[1]


def _error(status: int, message: str, field: str | None, headers: Any = None,
           extra: dict[str, Any] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message, "field": field, **(extra or {})},
                        headers=headers)
