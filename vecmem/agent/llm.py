"""The chat model. The only module that imports openai; any OpenAI-compatible server works.

Everything else talks to the ``ChatModel`` protocol, so tests pass a scripted model through constructors, and
integration tests run the real openai client against a scripted HTTP server. SDK errors become ``LLMError``
with one clear sentence: a timeout, a 429, a 5xx or an unreachable server never escapes as a traceback.

**A call never takes longer than ``VECMEM_LLM_TIMEOUT``** (an answer streamed as it comes is bounded between
chunks instead). The SDK's own retries are off: they would start a new full timeout each time. A 429, a 5xx or
a dropped connection is tried again (``VECMEM_LLM_RETRIES`` times, backing off) only within what is left of the
timeout, and a timeout is never tried again: the time is spent.

``ChatCompletions`` is the lower-level pass-through `vecmem proxy` forwards its clients' requests with: a request body
as the client built it (every field, the model its own), the server's JSON (or chunks) back as they came, and a
failure as ``UpstreamError`` carrying the status to answer with. It does not retry: the client's SDK does, with
its own policy (the proxy passes ``Retry-After`` on), and retrying here too would multiply the attempts.

``MeteredModel`` counts calls and tokens (as the budgeter counts them: the same count for every server, whether
or not it reports usage), so the chat can say what each turn cost.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from vecmem.config import Settings
from vecmem.errors import ExtractionError, LLMError, UpstreamError

__all__ = ["ChatCompletions", "ChatModel", "MeteredModel", "ModelUsage", "OpenAIChatModel", "StreamingChatModel",
           "chat_completions_from_settings", "chat_model_from_settings", "parse_json_object"]

Message = Mapping[str, str]


class ChatModel(Protocol):
    """One chat-completions call: messages in, the assistant's text out (or LLMError)."""

    @property
    def name(self) -> str: ...

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> str: ...


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A model that can also hand its answer over as it is written (the chat prints it as it comes)."""

    def stream(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> Iterator[str]: ...


@dataclass(frozen=True)
class ModelUsage:
    """Model calls and tokens (prompt and completion, as the budgeter counts them)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __sub__(self, earlier: ModelUsage) -> ModelUsage:
        return ModelUsage(self.calls - earlier.calls, self.prompt_tokens - earlier.prompt_tokens,
                          self.completion_tokens - earlier.completion_tokens)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class MeteredModel:
    """A ChatModel that counts what goes through it (``usage``): every call, failed ones included, and the
    tokens of what was sent and answered. ``count`` is the budgeter's token counter."""

    def __init__(self, model: ChatModel, count: Callable[[str], int]) -> None:
        self.model = model
        self._count = count
        self._usage = ModelUsage()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def usage(self) -> ModelUsage:
        with self._lock:
            return self._usage

    @property
    def streams(self) -> bool:
        return isinstance(self.model, StreamingChatModel)

    def _add(self, messages: Sequence[Message], answer: str) -> None:
        prompt = sum(self._count(message.get("content", "")) for message in messages)
        completion = self._count(answer) if answer else 0
        with self._lock:
            used = self._usage
            self._usage = ModelUsage(used.calls + 1, used.prompt_tokens + prompt, used.completion_tokens + completion)

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> str:
        answer = ""
        try:
            answer = self.model.complete(messages, max_tokens=max_tokens)
            return answer
        finally:
            self._add(messages, answer)

    def stream(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> Iterator[str]:
        """The answer in pieces, from the model's stream when it has one (else in one piece)."""
        pieces: list[str] = []
        try:
            if isinstance(self.model, StreamingChatModel):
                for piece in self.model.stream(messages, max_tokens=max_tokens):
                    pieces.append(piece)
                    yield piece
            else:
                pieces.append(self.model.complete(messages, max_tokens=max_tokens))
                yield pieces[0]
        finally:
            self._add(messages, "".join(pieces))


_RETRY_BACKOFF_S = 0.5  # before the first retry of a 429, 5xx or dropped connection; doubled each time


class OpenAIChatModel:
    """A model behind an OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp, ...)."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        retries: int = 1,
        temperature: float = 0.2,
    ) -> None:
        import openai

        self._openai = openai
        self._model = model
        self._timeout = timeout
        self._temperature = temperature
        self._where = base_url or "https://api.openai.com/v1"
        self._retries = retries
        # Local servers (Ollama, vLLM) accept any key, but the SDK refuses to start without one. The SDK's retries
        # are off: each would wait a full timeout again (module docstring).
        self._client = openai.OpenAI(api_key=api_key or "not-needed", base_url=base_url, timeout=timeout,
                                     max_retries=0)

    @property
    def name(self) -> str:
        return f"{self._model} at {self._where}"

    def _options(self, messages: Sequence[Message], max_tokens: int | None) -> dict[str, Any]:
        options: dict[str, Any] = {"model": self._model, "messages": [dict(m) for m in messages],
                                   "temperature": self._temperature}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        return options

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> str:
        options = self._options(messages, max_tokens)
        deadline = time.monotonic() + self._timeout
        for attempt in range(self._retries + 1):
            left = deadline - time.monotonic()
            try:
                with self._mapped():
                    response = self._client.chat.completions.create(**options, timeout=max(left, 0.001))
                break
            except _Retryable as exc:
                pause = _RETRY_BACKOFF_S * 2 ** attempt
                if attempt == self._retries or deadline - time.monotonic() <= pause:
                    raise exc.error from exc.__cause__
                time.sleep(pause)
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise LLMError(f"the model server at {self._where} sent a reply without a message") from exc
        if not isinstance(content, str) or not content.strip():  # a server may send null, or not a string at all
            raise LLMError(f"the model at {self._where} returned an empty answer")
        return content

    def stream(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> Iterator[str]:
        """The answer in pieces as the server writes them (no retry: what was shown cannot be taken back)."""
        received = False
        with self._mapped(retryable=False):
            chunks = self._client.chat.completions.create(**self._options(messages, max_tokens), stream=True)
            for chunk in chunks:
                choices = getattr(chunk, "choices", None) or []
                piece = getattr(getattr(choices[0], "delta", None), "content", None) if choices else None
                if isinstance(piece, str) and piece:
                    received = True
                    yield piece
        if not received:
            raise LLMError(f"the model at {self._where} returned an empty answer")

    @contextlib.contextmanager
    def _mapped(self, *, retryable: bool = True) -> Iterator[None]:
        """The SDK's errors as LLMError, most specific first; with ``retryable``, those worth another try inside
        the timeout (429, 5xx, a dropped connection) wrapped in ``_Retryable``."""
        openai = self._openai
        try:
            yield
        except openai.APITimeoutError as exc:  # before APIConnectionError, its base class
            raise LLMError(f"the model at {self._where} did not answer within {self._timeout:g} s") from exc
        except openai.RateLimitError as exc:
            error = LLMError(f"the model server at {self._where} is rate-limiting requests (429); try again shortly")
            raise (_Retryable(error) if retryable else error) from exc
        except openai.APIStatusError as exc:
            error = LLMError(f"the model server at {self._where} answered {exc.status_code}: {_said(exc)}")
            raise (_Retryable(error) if retryable and exc.status_code >= 500 else error) from exc
        except openai.APIConnectionError as exc:
            error = LLMError(f"cannot reach the model server at {self._where}: {_short(str(exc))}")
            raise (_Retryable(error) if retryable else error) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the model call failed: {_short(str(exc))}") from exc
        except ValueError as exc:  # the SDK lets a truncated or non-JSON body escape as JSONDecodeError
            raise LLMError(f"the model server at {self._where} sent a reply that is not valid JSON: {exc}") from exc


class _Retryable(Exception):  # a carrier, never raised past this module
    """An LLMError worth another try within the timeout."""

    def __init__(self, error: LLMError) -> None:
        super().__init__(str(error))
        self.error = error


def chat_model_from_settings(settings: Settings) -> ChatModel | None:
    """The configured model, or None when neither OPENAI_API_KEY nor OPENAI_BASE_URL is set."""
    if not settings.llm_configured:
        return None
    return OpenAIChatModel(
        model=settings.chat_model,
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        timeout=settings.llm_timeout,
        retries=settings.llm_retries,
    )


class ChatCompletions:
    """An OpenAI-compatible server's chat-completions and models endpoints, raw: what `vecmem proxy` forwards to.

    ``create`` and ``stream`` send ``body`` as given; ``stream`` returns once the server has accepted the request
    (a refusal is raised then, before any chunk), and its chunks follow as the server sends them. ``timeout``
    bounds a whole answer, and a streamed one between two chunks. Every failure is an ``UpstreamError``."""

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None, timeout: float = 600.0) -> None:
        import openai

        self._openai = openai
        self._timeout = timeout
        self.where = base_url or "https://api.openai.com/v1"
        self._client = openai.OpenAI(api_key=api_key or "not-needed", base_url=base_url, timeout=timeout,
                                     max_retries=0)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        with self._forwarded():
            reply = self._client.post("/chat/completions", body=dict(body), cast_to=object)
        return self._object(reply)

    def stream(self, body: Mapping[str, Any]) -> Generator[dict[str, Any], None, None]:
        with self._forwarded():
            chunks = self._client.post("/chat/completions", body={**body, "stream": True}, cast_to=object,
                                       stream=True, stream_cls=self._openai.Stream[object])
        return self._chunks(chunks)

    def models(self) -> dict[str, Any]:
        with self._forwarded():
            return self._object(self._client.get("/models", cast_to=object))

    def _chunks(self, chunks: Any) -> Generator[dict[str, Any], None, None]:
        try:
            with self._forwarded():
                for chunk in chunks:
                    yield self._object(chunk)
        finally:
            chunks.close()  # a client that went away: the server's stream is closed too

    def _object(self, reply: object) -> dict[str, Any]:
        if not isinstance(reply, dict):
            raise UpstreamError(f"the model server at {self.where} sent {type(reply).__name__}, not a JSON object",
                                status=502)
        return reply

    @contextlib.contextmanager
    def _forwarded(self) -> Iterator[None]:
        """The SDK's errors as UpstreamError, most specific first, with the status the proxy answers."""
        openai = self._openai
        try:
            yield
        except openai.APITimeoutError as exc:  # before APIConnectionError, its base class
            raise UpstreamError(f"the model at {self.where} did not answer within {self._timeout:g} s",
                                status=504, kind="timeout") from exc
        except openai.APIStatusError as exc:
            error = exc.body if isinstance(exc.body, dict) else {}
            detail = {name: str(error[name]) if error.get(name) is not None else None
                      for name in ("type", "code", "param")}
            raise UpstreamError(f"the model server at {self.where} answered {exc.status_code}: {_said(exc)}",
                                status=exc.status_code, kind=detail["type"], code=detail["code"],
                                param=detail["param"], retry_after=exc.response.headers.get("retry-after")) from exc
        except openai.APIConnectionError as exc:
            raise UpstreamError(f"cannot reach the model server at {self.where}: {_short(str(exc))}",
                                status=502) from exc
        except openai.OpenAIError as exc:  # an error event inside a stream, among others
            raise UpstreamError(f"the model server at {self.where} failed: {_short(str(exc))}", status=502) from exc
        except ValueError as exc:  # a truncated or non-JSON body escapes the SDK as JSONDecodeError
            raise UpstreamError(f"the model server at {self.where} sent a reply that is not valid JSON: {exc}",
                                status=502) from exc


def chat_completions_from_settings(settings: Settings) -> ChatCompletions | None:
    """The configured server, raw (for `vecmem proxy`), or None when neither OPENAI_API_KEY nor OPENAI_BASE_URL is
    set."""
    if not settings.llm_configured:
        return None
    return ChatCompletions(api_key=settings.openai_api_key, base_url=settings.openai_base_url,
                           timeout=settings.proxy_timeout)


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def parse_json_object(reply: str, *, what: str) -> dict[str, Any]:
    """The JSON object in a model reply (a ```json fence is tolerated), or ExtractionError saying why not."""
    text = _FENCE.sub("", reply.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        raise ExtractionError(f"the model's {what} is not a JSON object: {_short(reply)!r}")
    if end < start:
        raise ExtractionError(f"the model's {what} is not valid JSON: it ends before the object closes")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"the model's {what} is not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(data, dict):
        raise ExtractionError(f"the model's {what} is not a JSON object")
    return data


def _said(exc: Any) -> str:
    """What a server that refused a request said: its error's own message (the SDK's ``message`` puts "Error code:
    N - " before it), shortened."""
    error = exc.body if isinstance(exc.body, dict) else {}
    return _short(error["message"] if isinstance(error.get("message"), str) else exc.message)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
