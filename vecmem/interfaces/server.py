"""``vecmem serve``: the MemoryBank facade as a JSON HTTP API (FastAPI), and the memory panel at ``/`` (one
static page, ``panel.html``, calling the API). The only fastapi importer.

Every route takes an optional ``user`` (default: the configured user). Errors are JSON ``{"error": message,
"field": name or null}``: 422 for a value vecmem refuses, 404 for an unknown memory, 409 for a store another
process holds, 500 when the store or the model failed. The OpenAPI description is at ``/openapi.json``.

Bound to a loopback address the API is open to local processes; bound to any other address it refuses to start
without a token (``--token`` or ``VECMEM_API_TOKEN``), and then every request must send
``Authorization: Bearer <token>``. A token given on loopback is enforced too.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from importlib import resources
from typing import Any, Iterator

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict

from vecmem.bank import MemoryBank
from vecmem.errors import ConfigError, InvalidInputError, NotFoundError, StoreInUseError, VecmemError, is_user_error
from vecmem.storage.sessions import SessionStore

__all__ = ["create_app", "is_loopback", "check_binding"]

PANEL = (resources.files(__package__) / "panel.html").read_text(encoding="utf-8")


class _Body(BaseModel):
    # Values are checked by the bank (one set of rules and messages for every caller), not here.
    model_config = ConfigDict(extra="forbid")


class NewMemory(_Body):
    content: Any
    type: Any = "fact"
    importance: Any = 0.5
    tags: Any = ()
    session_id: Any = None
    source: Any = "manual"
    confidence: Any = 1.0
    id: Any = None
    context: Any = ""


class Changes(_Body):
    content: Any = None
    type: Any = None
    importance: Any = None
    tags: Any = None
    confidence: Any = None
    context: Any = None


class SearchRequest(_Body):
    query: Any
    k: Any = 5
    session_id: Any = None
    types: Any = None
    record_access: bool = True  # false to look without counting a use (the panel does)


class Supersession(_Body):
    new_id: Any


class Approval(_Body):
    content: Any = None  # a correction of the text before it enters retrieval


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve memories to the network without a token."""
    if not is_loopback(host) and not token:
        raise ConfigError(f"binding to {host} exposes every memory to the network: give a token (--token or "
                          "VECMEM_API_TOKEN), or bind to 127.0.0.1")


def create_app(bank: MemoryBank, *, token: str | None = None) -> FastAPI:
    sessions = SessionStore(bank.settings.home / "sessions.sqlite3")  # where the chat records its hit rate
    app = FastAPI(title="vecmem", version="0.1.0",
                  description="Long-term memory for LLM agents: add, search (with score parts), manage.")

    def authorised(authorization: str | None = Header(default=None)) -> None:
        if token is None:
            return
        given = (authorization or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise _Refused(401, "a valid bearer token is required (Authorization: Bearer <token>)")

    guarded = [Depends(authorised)]

    @app.exception_handler(VecmemError)
    def vecmem_error(_: Request, error: VecmemError) -> JSONResponse:
        if isinstance(error, NotFoundError):
            status = 404
        elif isinstance(error, StoreInUseError):
            status = 409
        elif is_user_error(error):
            status = 422
        else:
            status = 500
        return _error(status, str(error), error.field if isinstance(error, InvalidInputError) else None)

    @app.exception_handler(RequestValidationError)
    def malformed(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        first = problems[0] if problems else {}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or None
        return _error(422, f"{where or 'request'}: {first.get('msg', 'malformed request')}", where)

    @app.exception_handler(_Refused)
    def refused(_: Request, error: _Refused) -> JSONResponse:
        return _error(error.status, error.message, None)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def panel() -> str:
        """The memory panel: one static page that calls the routes below (no build step)."""
        return PANEL

    @app.post("/memories", status_code=201, dependencies=guarded)
    def add(memory: NewMemory, user: str | None = None) -> dict[str, Any]:
        return bank.add(memory.content, user_id=user, memory_type=memory.type, importance=memory.importance,
                        tags=memory.tags, session_id=memory.session_id, source=memory.source,
                        confidence=memory.confidence, memory_id=memory.id, context=memory.context).to_dict()

    @app.get("/memories", dependencies=guarded)
    def list_memories(user: str | None = None, session: str | None = None,
                      type: list[str] | None = Query(default=None),  # noqa: A002 - the API's own word
                      include_superseded: bool = False, limit: int | None = None,
                      status: list[str] | None = Query(default=None)) -> list[dict[str, Any]]:
        """Live memories unless ``status`` (repeatable: live, archived, pending) says otherwise."""
        records = bank.list_memories(user_id=user, session_id=session, types=type,
                                     include_superseded=include_superseded, limit=limit,
                                     statuses=status or ["live"])
        return [record.to_dict() for record in records]

    @app.get("/memories/{memory_id}", dependencies=guarded)
    def get(memory_id: str, user: str | None = None) -> dict[str, Any]:
        return bank.get(memory_id, user_id=user).to_dict()

    @app.patch("/memories/{memory_id}", dependencies=guarded)
    def update(memory_id: str, changes: Changes, user: str | None = None) -> dict[str, Any]:
        return bank.update(memory_id, user_id=user, content=changes.content, memory_type=changes.type,
                           importance=changes.importance, tags=changes.tags, confidence=changes.confidence,
                           context=changes.context).to_dict()

    @app.delete("/memories/{memory_id}", dependencies=guarded)
    def forget(memory_id: str, user: str | None = None) -> dict[str, Any]:
        return bank.forget(memory_id, user_id=user).to_dict()

    @app.get("/memories/{memory_id}/history", dependencies=guarded)
    def history(memory_id: str, user: str | None = None) -> list[dict[str, Any]]:
        return [record.to_dict() for record in bank.history(memory_id, user_id=user)]

    @app.post("/memories/{memory_id}/supersede", dependencies=guarded)
    def supersede(memory_id: str, by: Supersession, user: str | None = None) -> dict[str, Any]:
        return bank.supersede(memory_id, by.new_id, user_id=user).to_dict()

    @app.post("/memories/{memory_id}/restore", dependencies=guarded)
    def restore(memory_id: str, user: str | None = None) -> dict[str, Any]:
        return bank.restore(memory_id, user_id=user).to_dict()

    @app.get("/review", dependencies=guarded)
    def review_queue(user: str | None = None) -> list[dict[str, Any]]:
        """Extracted memories waiting for approval, oldest first."""
        return [record.to_dict() for record in bank.review_queue(user_id=user)]

    @app.post("/memories/{memory_id}/approve", dependencies=guarded)
    def approve(memory_id: str, approval: Approval | None = None, user: str | None = None) -> dict[str, Any]:
        content = None if approval is None else approval.content
        return bank.approve(memory_id, user_id=user, content=content).to_dict()

    @app.post("/memories/{memory_id}/reject", dependencies=guarded)
    def reject(memory_id: str, user: str | None = None) -> dict[str, Any]:
        return bank.reject(memory_id, user_id=user).to_dict()

    @app.post("/memories/{memory_id}/unarchive", dependencies=guarded)
    def unarchive(memory_id: str, user: str | None = None) -> dict[str, Any]:
        return bank.unarchive(memory_id, user_id=user).to_dict()

    @app.post("/prune", dependencies=guarded)
    def prune(user: str | None = None, dry_run: bool = False) -> list[dict[str, Any]]:
        """Apply the forgetting policy (or, with ``dry_run``, say what it would archive and why)."""
        return [candidate.to_dict() for candidate in bank.prune(user_id=user, dry_run=dry_run)]

    @app.post("/search", dependencies=guarded)
    def search(request: SearchRequest, user: str | None = None) -> list[dict[str, Any]]:
        """The best memories for the query, each with its score parts (similarity, dense, keyword, recency,
        importance)."""
        hits = bank.search(request.query, request.k, user_id=user, session_id=request.session_id,
                           types=request.types, record_access=request.record_access)
        return [hit.to_dict() for hit in hits]

    @app.get("/stats", dependencies=guarded)
    def stats(user: str | None = None) -> dict[str, Any]:
        """Counts by type and scope (every user unless ``user``), and the user's chat hit rate: of the memories
        the chat put in prompts, the share the answers used (null before it recorded any)."""
        counted = bank.stats(user_id=user).to_dict()
        injected, used = sessions.hit_totals(user or bank.settings.default_user)
        counted["hits"] = {"injected": injected, "used": used,
                           "rate": None if injected == 0 else round(used / injected, 4)}
        return counted

    @app.get("/export", dependencies=guarded)
    def export(user: str | None = None) -> StreamingResponse:
        """Every memory as JSON Lines (every user unless ``user``), superseded ones included."""
        records = list(bank.export(user_id=user))  # read before answering: an error is still a JSON error

        def lines() -> Iterator[str]:
            for record in records:
                yield json.dumps(record.to_dict(), ensure_ascii=False) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return app


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _error(status: int, message: str, field: str | None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message, "field": field})
