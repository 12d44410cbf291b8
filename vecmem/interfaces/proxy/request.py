"""What `vecmem proxy` reads from an OpenAI chat-completions request, and the one thing it changes in it.

* **Who asks** (``ProxyRequest.of``): the ``X-Vecmem-User`` header, else the body's ``user`` (OpenAI's end-user
  id), else a per-user key's own user, else ``VECMEM_USER``; ``X-Vecmem-Session`` names the session (none: global
  memories only). Both must be vecmem identifiers (400 naming which). A per-user key may not name another user
  (403), as on `vecmem serve`.
* **The query**: the text of the last user message (a string, or the text parts of a content list), as much of its
  end as a search reads (``searchable``: the last ``MAX_QUERY_CHARS`` characters, in whole lines).
* **Where the memories go** (``with_memories``): one message holding the long-term section, inserted just before
  the last user message, the one they were recalled for (with the role of the client's leading instructions when
  it sent developer messages, so a model that takes developer messages only gets one; "system" otherwise). So
  everything before it is what the client sent the turn before, word for word, and a server's prompt cache
  (OpenAI's, vLLM's prefix cache) still covers the conversation; put first, the memories of each turn would
  change the prompt's beginning. Every message the client sent is kept as it was sent, history included: the
  client owns the short-term tier.
* **What is learnt**: a request that ends with a user message is a new turn, learnt with its answer; one that
  ends otherwise (a tool's result sent back) continues a turn whose user message was learnt already.
* **The answer** (``answer_text``, ``chunk_text``): the text of choice 0.

Everything else in the body goes to the model server as the client sent it; only a missing ``model`` is filled
in (``VECMEM_CHAT_MODEL``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vecmem.config import Settings
from vecmem.errors import InvalidInputError
from vecmem.interfaces.http.keys import Principal
from vecmem.retrieval.query.parsed import searchable
from vecmem.validation import check_message_id, validate_identifier, validate_session_id

__all__ = ["MEMORIES_HEADER", "SESSION_HEADER", "USER_HEADER", "ProxyRequest", "RequestError", "answer_text",
           "chunk_text", "message_id", "with_memories"]

USER_HEADER = "X-Vecmem-User"
SESSION_HEADER = "X-Vecmem-Session"
MEMORIES_HEADER = "X-Vecmem-Memories"  # on the answer: the ids of the memories put into the request


class RequestError(Exception):
    """A request the proxy refuses itself: the status, and the request part at fault (``param``)."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


@dataclass(frozen=True)
class ProxyRequest:
    """A chat-completions request as the proxy reads it (module docstring)."""

    body: dict[str, Any]  # as sent, with ``model`` filled in when it was missing
    user_id: str
    session_id: str | None
    query: str | None  # the last user message's text, for retrieval (None: nothing to retrieve for)
    said: str | None  # the same, whole, when the request ends with it: what is learnt with the answer
    stream: bool

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body["messages"])

    @classmethod
    def of(cls, body: object, headers: Mapping[str, str], principal: Principal, settings: Settings) -> ProxyRequest:
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object (a chat-completions request)", "body")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "messages must be a non-empty list of messages", "messages")
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise RequestError(400, f"messages[{index}] must be an object with a role", f"messages[{index}]")
        model = body.get("model", settings.chat_model)
        if not isinstance(model, str) or not model.strip():
            raise RequestError(400, "model must be a model name", "model")
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise RequestError(400, "stream must be true or false", "stream")
        user_id, session_id = _identity(body, headers, principal, settings.default_user)
        last_user = next((message for message in reversed(messages) if message["role"] == "user"), None)
        text = _text(last_user.get("content")) if last_user is not None else ""
        return cls(body={**body, "model": model}, user_id=user_id, session_id=session_id,
                   query=searchable(text) if text.strip() else None,
                   said=text if text.strip() and messages[-1] is last_user else None, stream=stream)


def _identity(body: Mapping[str, Any], headers: Mapping[str, str], principal: Principal,
              default_user: str) -> tuple[str, str | None]:
    named, where = headers.get(USER_HEADER), USER_HEADER
    if named is None and body.get("user") is not None:
        named, where = body["user"], "user"
        if not isinstance(named, str):
            raise RequestError(400, "user must be a string", "user")
    if not principal.admin:
        if named is not None and named != principal.user_id:
            raise RequestError(403, f"this key belongs to user {principal.user_id!r} and cannot act for another "
                                    "user", where)
        named = principal.user_id
    try:
        user_id = validate_identifier(where, default_user if named is None else named)
        session = headers.get(SESSION_HEADER)
        session_id = None if session is None else validate_session_id(session)
    except InvalidInputError as exc:
        param = SESSION_HEADER if exc.field == "session_id" else exc.field
        raise RequestError(400, f"{param}: {exc.reason}", param) from exc
    return user_id, session_id


def _text(content: object) -> str:
    """A message's text: a string as it is, the text parts of a list of parts joined by lines, else nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content
                         if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def with_memories(messages: Sequence[dict[str, Any]], section: str) -> list[dict[str, Any]]:
    """The client's messages with the long-term section inserted before the last user message (module docstring);
    as they are when the section is empty."""
    if not section:
        return list(messages)
    at = next((n for n in range(len(messages) - 1, -1, -1) if messages[n].get("role") == "user"), len(messages))
    role = "developer" if messages[0].get("role") == "developer" else "system"
    return [*messages[:at], {"role": role, "content": section}, *messages[at:]]


def answer_text(reply: Mapping[str, Any]) -> str:
    """The text of choice 0 of a chat completion ("" when it has none: tool calls only, or an odd reply)."""
    message = _first_choice(reply).get("message")
    return _text(message.get("content")) if isinstance(message, dict) else ""


def chunk_text(chunk: Mapping[str, Any]) -> str:
    """The text a streamed chunk adds to choice 0."""
    delta = _first_choice(chunk).get("delta")
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) else ""


def message_id(reply: Mapping[str, Any]) -> str | None:
    """The completion's id, when it can be a provenance id (memories learnt from the exchange record it)."""
    try:
        return check_message_id("id", reply.get("id"))
    except InvalidInputError:
        return None


def _first_choice(reply: Mapping[str, Any]) -> dict[str, Any]:
    choices = reply.get("choices")
    if not isinstance(choices, list):
        return {}
    return next((choice for choice in choices if isinstance(choice, dict) and choice.get("index", 0) == 0), {})
