"""``vecmem proxy``: an OpenAI-compatible chat-completions endpoint with a long-term memory.

A client (any OpenAI SDK, ``base_url="http://127.0.0.1:8766/v1"``) sends its request here instead of to its model
server. For each ``POST /v1/chat/completions`` the proxy:

1. waits until what the same user's earlier exchanges taught has been learnt (proxy/learning.py), so the second
   request of a conversation carries what the first one taught;
2. recalls the user's memories for the last user message as the chat does (agent/recall.py: routed, widened
   when the message points at the past), keeps those above the relevance floor that fit the long-term share of
   ``VECMEM_CONTEXT_TOKENS``, and puts them into the request as one system message of dated data lines
   (proxy/request.py says where, and what else is read from the request);
3. forwards the request, every other field as the client sent it, to the configured server (``OPENAI_BASE_URL``,
   ``OPENAI_API_KEY``: the proxy's key, never the client's) and answers with the server's reply as it came, or
   relays its stream as server-sent events (``data: {chunk}`` ... ``data: [DONE]``) while the server streams;
4. queues the exchange (the user's message and the answer) to be learnt in the background: ``add_messages``, the
   write gate, extraction and supersession, with the configured ``VECMEM_CHAT_MODEL``.

``GET /v1/models`` is the server's list, passed through. Every failure is OpenAI's error shape, ``{"error":
{"message", "type", "param", "code"}}``, so the SDKs raise their usual exceptions: the server's own status for
what it refused (a 429 with its ``Retry-After``), 504 when it did not answer within ``VECMEM_PROXY_TIMEOUT``, 502
when it could not be reached or sent something unreadable, 400 for a request the proxy cannot read, 401/403/421
from the guard (http/security.py: a JSON body stands for the cross-site header), 500 when the memory failed. A
failure in the middle of a stream ends it with an ``error`` event, which the SDKs raise.

Who may call is `vecmem serve`'s rule: loopback clients only unless a key is configured (--token,
``VECMEM_API_TOKEN`` or `vecmem keys`), and then the client's API key must be one of them; a per-user key acts
for its own user only.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from vecmem.agent.llm import ChatCompletions
from vecmem.agent.memory_agent import DEFAULT_ROUTES
from vecmem.agent.recall import recall
from vecmem.bank.api import MemoryApi
from vecmem.errors import UpstreamError, VecmemError, is_user_error
from vecmem.interfaces.http.keys import KeyStore, Principal
from vecmem.interfaces.http.security import PRINCIPAL, Guard
from vecmem.interfaces.proxy.learning import Exchange, ExchangeLearner
from vecmem.interfaces.proxy.request import (
    MEMORIES_HEADER,
    ProxyRequest,
    RequestError,
    answer_text,
    chunk_text,
    message_id,
    with_memories,
)
from vecmem.models import PromptPack, Turn

__all__ = ["DEFAULT_PORT", "create_proxy_app", "openai_error_body"]

log = logging.getLogger(__name__)
DEFAULT_PORT = 8766  # `vecmem serve` has 8765
RECALLED = 10  # memories retrieved per request before the floor and the budget choose (as the chat's agent)
_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 429: "rate_limit_error"}


def openai_error_body(status: int, message: str, param: str | None, *, kind: str | None = None,
                      code: str | None = None) -> bytes:
    """OpenAI's error shape, which the SDKs read their exception's message, type and code from."""
    default = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": kind or default, "param": param, "code": code}},
                      ensure_ascii=False).encode()


def _error(status: int, message: str, param: str | None = None, *, kind: str | None = None,
           code: str | None = None, headers: Mapping[str, str] | None = None) -> Response:
    return Response(openai_error_body(status, message, param, kind=kind, code=code), status_code=status,
                    media_type="application/json", headers=headers)


def create_proxy_app(bank: MemoryApi, upstream: ChatCompletions, *, token: str | None = None,
                     keys: KeyStore | None = None, allowed_hosts: Iterable[str] = (),
                     learner: ExchangeLearner | None = None) -> Starlette:
    """The proxy on ``bank`` in front of ``upstream``. ``token``, ``keys`` and ``allowed_hosts`` as for
    `vecmem serve`; ``learner``: where exchanges are learnt (default: one made here, closed when the app stops,
    after learning what is still queued)."""
    settings = bank.settings
    learning = learner or ExchangeLearner(bank, wait=2 * settings.llm_timeout)
    routes = dict(DEFAULT_ROUTES) if settings.type_routing else {}

    def recalled(wanted: ProxyRequest) -> PromptPack | None:
        if wanted.query is None:
            return None
        found = recall(bank, wanted.query, user_id=wanted.user_id, session_id=wanted.session_id, k=RECALLED,
                       routes=routes)
        # the section alone: the client's own messages are its business, neither counted nor cut; the message
        # goes in as a turn only so that the section's header is in the conversation's language
        return bank.build_context("", user_id=wanted.user_id, session_id=wanted.session_id, hits=found.hits,
                                  system_prompt="", short_term=[Turn("user", wanted.query)])

    def answer(wanted: ProxyRequest) -> Response:
        learning.settle(wanted.user_id)
        pack = recalled(wanted)
        body = {**wanted.body, "messages": with_memories(wanted.messages, pack.long_term if pack else "")}
        headers = {MEMORIES_HEADER: ",".join(quote(hit.id, safe=":@._-") for hit in (pack.memories if pack else ()))}
        if wanted.stream:
            chunks = upstream.stream(body)  # a refusal is raised here, before the answer's status is sent
            return StreamingResponse(relay(chunks, wanted), media_type="text/event-stream",
                                     headers={**headers, "Cache-Control": "no-cache"})
        reply = upstream.create(body)
        learn(wanted, answer_text(reply), message_id(reply))
        return JSONResponse(reply, headers=headers)

    def relay(chunks: Generator[dict[str, Any], None, None], wanted: ProxyRequest) -> Iterator[str]:
        pieces: list[str] = []
        first: dict[str, Any] | None = None
        with contextlib.closing(chunks):  # a client that went away: the server's stream is closed too
            try:
                for chunk in chunks:
                    first = first or chunk
                    pieces.append(chunk_text(chunk))
                    yield _event(chunk)
            except UpstreamError as exc:
                log.warning("vecmem proxy: the stream for user %r broke off: %s", wanted.user_id, exc)
                yield _event(json.loads(openai_error_body(exc.status, str(exc), exc.param, kind=exc.kind,
                                                          code=exc.code)))
                return
        learn(wanted, "".join(pieces), message_id(first or {}))  # queued before [DONE]: the next request waits
        yield "data: [DONE]\n\n"

    def learn(wanted: ProxyRequest, said_back: str, reply_id: str | None) -> None:
        if wanted.said is not None:
            learning.submit(Exchange(wanted.user_id, wanted.session_id, wanted.said, said_back, reply_id))

    async def chat_completions(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError as exc:  # not JSON, or not UTF-8
            raise RequestError(400, f"the body is not valid JSON: {exc}", "body") from exc
        principal: Principal = request.scope[PRINCIPAL]
        wanted = ProxyRequest.of(body, request.headers, principal, settings)
        return await run_in_threadpool(answer, wanted)

    async def models(_: Request) -> Response:
        return JSONResponse(await run_in_threadpool(upstream.models))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        if learner is None:
            await run_in_threadpool(learning.close)

    app = Starlette(
        routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"]),
                Route("/v1/models", models, methods=["GET"])],
        exception_handlers={RequestError: _refused, UpstreamError: _upstream_failed, VecmemError: _memory_failed,
                            HTTPException: _http_error, Exception: _unexpected},
        lifespan=lifespan,
    )
    app.add_middleware(Guard, token=token, keys=keys or KeyStore.open(settings), allowed_hosts=allowed_hosts,
                       json_is_intent=True, render=openai_error_body)
    app.state.learner = learning
    return app


def _event(data: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _refused(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestError)
    return _error(exc.status, exc.message, exc.param)


def _upstream_failed(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, UpstreamError)
    retry = {"Retry-After": exc.retry_after} if exc.retry_after else None
    return _error(exc.status, str(exc), exc.param, kind=exc.kind, code=exc.code, headers=retry)


def _memory_failed(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, VecmemError)
    log.warning("vecmem proxy: the memory failed: %s", exc)
    status = 400 if is_user_error(exc) else 500
    return _error(status, f"vecmem: {exc}", getattr(exc, "field", None))


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return _error(405, f"{request.method} is not allowed on {request.url.path}", None, headers=exc.headers)
    return _error(exc.status_code, f"no route {request.url.path} (the proxy serves POST /v1/chat/completions and "
                                   "GET /v1/models)" if exc.status_code == 404 else str(exc.detail))


def _unexpected(_: Request, exc: Exception) -> Response:  # still OpenAI's shape; the log has the traceback
    return _error(500, f"vecmem proxy: internal error: {type(exc).__name__}")
