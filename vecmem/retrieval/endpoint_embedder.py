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
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from vecmem.errors import EmbeddingError

__all__ = ["ENDPOINT_PREFIX", "EndpointEmbedder"]

ENDPOINT_PREFIX = "openai:"
OPENAI_BASE_URL = "https://api.openai.com/v1"
_RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504}
_FIRST_PAUSE_S = 0.5
_NORMALISED = 1e-4  # a vector whose length is this close to 1 is sent normalised: kept bit for bit


class EndpointEmbedder:
    """An embedding model behind an OpenAI-compatible endpoint (the ``Embedder`` protocol of embedders.py)."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 batch_size: int = 64, timeout: float = 30.0, retries: int = 2) -> None:
        if not model.strip():
            raise EmbeddingError(f"name the endpoint's model: VECMEM_EMBED_MODEL={ENDPOINT_PREFIX}<model name>")
        self._model = model.strip()
        self._url = (base_url or OPENAI_BASE_URL).rstrip("/") + "/embeddings"
        self._api_key = api_key
        self._batch_size = max(1, batch_size)
        self._timeout = timeout
        self._retries = retries
        self._dimension: int | None = None
        self._lock = threading.Lock()
        self.requests = 0  # calls made to the endpoint (for the tests and the bench)

    @property
    def name(self) -> str:
        return ENDPOINT_PREFIX + self._model

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._embed(["dimension"])
        assert self._dimension is not None, "set by the first answer"
        return self._dimension

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._embed([text])[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._embed(list(texts))

    # ------------------------------------------------------------------------------------------ calls

    def _embed(self, texts: list[str]) -> np.ndarray:
        unique = list(dict.fromkeys(texts))  # a text that repeats is sent once
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(unique), self._batch_size):
            batch = unique[start:start + self._batch_size]
            found.update(zip(batch, self._batch(batch), strict=True))
        return np.stack([found[text] for text in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def _batch(self, texts: list[str]) -> np.ndarray:
        answer = self._post({"model": self._model, "input": texts, "encoding_format": "float"})
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
