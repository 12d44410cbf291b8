"""A model-free embedder: each word hashed into one of ``dimension`` buckets (``VECMEM_EMBED_MODEL=hashed:<dim>``).

What it is for: measuring and exercising everything but the model (the store, the state database, the HTTP
path: ``scripts/bench_writes.py``), and deployments that want a working store before any model is installed.
It needs no download and costs microseconds per text. Its vectors say which words two texts share and nothing
about meaning, so dense retrieval with it is roughly keyword retrieval; a store built with it is moved to a real
model by ``vecmem reindex`` like any other change of model.

The vectors are deterministic (the same text gives the same vector in every process and on every machine: the
hash is BLAKE2b of the lower-cased word, not Python's salted ``hash``), signed (a word adds +1 or -1 to its
bucket, so unrelated words cancel rather than pile up) and L2-normalised; a text without words gets a fixed unit
vector. Queries and documents are embedded alike.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from vecmem.errors import ConfigError

__all__ = ["HASHED_PREFIX", "HashedEmbedder"]

HASHED_PREFIX = "hashed:"
_WORD = re.compile(r"\w+")
_MIN_DIMENSION, _MAX_DIMENSION = 8, 4096


class HashedEmbedder:
    """Words hashed into ``dimension`` signed buckets, L2-normalised (see the module's docstring)."""

    def __init__(self, dimension: int) -> None:
        if not _MIN_DIMENSION <= dimension <= _MAX_DIMENSION:
            raise ConfigError(f"VECMEM_EMBED_MODEL={HASHED_PREFIX}<dimension>: the dimension must be between "
                              f"{_MIN_DIMENSION} and {_MAX_DIMENSION}, got {dimension}")
        self._dimension = dimension

    @classmethod
    def from_name(cls, model: str) -> HashedEmbedder:
        """The embedder a name such as ``hashed:384`` names; a clear ConfigError for anything else after the
        prefix."""
        given = model.strip()[len(HASHED_PREFIX):]
        # ASCII digits only ("²" is a digit to str.isdigit, not to int), written as the store will record it:
        # "hashed:0384" would name the model one way in the settings and another in the store
        if not (given.isascii() and given.isdecimal()) or given != str(int(given)):
            raise ConfigError(f"VECMEM_EMBED_MODEL={HASHED_PREFIX}<dimension>: the dimension must be a whole "
                              f"number written plainly (such as {HASHED_PREFIX}384), got {model!r}")
        return cls(int(given))

    @property
    def name(self) -> str:
        return f"{HASHED_PREFIX}{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self._dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vector[int.from_bytes(digest[:4], "big") % self._dimension] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:  # no words, or words that cancelled out: a fixed direction, still a unit vector
            vector[0] = 1.0
            return vector
        return vector / norm

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        return np.stack([self._vector(text) for text in texts])
