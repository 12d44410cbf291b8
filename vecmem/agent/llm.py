"""The chat model. The only module that imports openai; any OpenAI-compatible server works.

Everything else talks to the ``ChatModel`` protocol, so tests pass a scripted model through constructors, and
integration tests run the real openai client against a scripted HTTP server. SDK errors become ``LLMError``
with one clear sentence: a timeout, a 429, a 5xx or an unreachable server never escapes as a traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from vecmem.config import Settings
from vecmem.errors import ExtractionError, LLMError

__all__ = ["ChatModel", "OpenAIChatModel", "chat_model_from_settings", "parse_json_object"]

Message = Mapping[str, str]


class ChatModel(Protocol):
    """One chat-completions call: messages in, the assistant's text out (or LLMError)."""

    @property
    def name(self) -> str: ...

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> str: ...


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
        # Local servers (Ollama, vLLM) accept any key, but the SDK refuses to start without one.
        self._client = openai.OpenAI(
            api_key=api_key or "not-needed", base_url=base_url, timeout=timeout, max_retries=retries
        )

    @property
    def name(self) -> str:
        return f"{self._model} at {self._where}"

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> str:
        openai = self._openai
        options: dict[str, Any] = {"model": self._model, "messages": [dict(m) for m in messages]}
        options["temperature"] = self._temperature
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        try:
            response = self._client.chat.completions.create(**options)
        except openai.APITimeoutError as exc:
            raise LLMError(f"the model at {self._where} did not answer within {self._timeout:g} s") from exc
        except openai.RateLimitError as exc:
            raise LLMError(f"the model server at {self._where} is rate-limiting requests (429); try again shortly") from exc
        except openai.APIStatusError as exc:
            raise LLMError(
                f"the model server at {self._where} answered {exc.status_code}: {_short(exc.message)}"
            ) from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"cannot reach the model server at {self._where}: {_short(str(exc))}") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the model call failed: {_short(str(exc))}") from exc
        except ValueError as exc:  # the SDK lets a truncated or non-JSON body escape as JSONDecodeError
            raise LLMError(f"the model server at {self._where} sent a reply that is not valid JSON: {exc}") from exc
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise LLMError(f"the model server at {self._where} sent a reply without a message") from exc
        if not isinstance(content, str) or not content.strip():  # a server may send null, or not a string at all
            raise LLMError(f"the model at {self._where} returned an empty answer")
        return content


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


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
