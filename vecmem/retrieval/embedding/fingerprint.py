"""What an embedding model computes, in one short string: the key its calibration is kept under
(calibration.py, relevance.py's ``Cohort``).

A model's name says what it is called, not what it computes: a rebuilt package, new weights under an old name,
an endpoint that changed its model behind the same URL all keep the name, and a caller's own embedder may have
no stable name at all. So the key is the model's own output: its vectors for a few fixed probe texts, as
memories and as queries (a model may embed the two sides apart, as e5 does), rounded to ``DECIMALS`` decimals
(so that the last bits of float arithmetic, which vary with threads and hardware, do not change it) and hashed.
New weights move the vectors far more than that; an embedder that gives the same vectors shares the key
whatever its name. Embedding the probes costs two small calls, once per embedder object and process.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vecmem.retrieval.embedding.embedders import Embedder

__all__ = ["DECIMALS", "PROBES", "fingerprint"]

# short everyday statements in both languages the calibration covers; never change them lightly: every model's
# calibration is measured again after a change
PROBES = ("The user keeps bees on the roof of the house.", "用户每周五下午去游泳", "Reply in English, please.")
DECIMALS = 3

_known: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def fingerprint(embedder: Embedder) -> str:
    """The fingerprint of what ``embedder`` computes (module docstring), 32 hex digits; computed once per
    embedder object (an object that cannot be weakly referenced is asked again each time)."""
    with _lock:
        try:
            known = _known.get(embedder)
        except TypeError:
            known = None
    if known is not None:
        return known
    digest = hashlib.sha256()
    for side in (embedder.embed_documents(list(PROBES)), embedder.embed_queries(list(PROBES))):
        matrix = np.asarray(side, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
        rounded = np.round(matrix / np.where(norms > 0, norms, 1.0), DECIMALS) + 0.0  # + 0.0: no -0.0 apart from 0.0
        digest.update(repr(rounded.shape).encode("ascii"))
        digest.update(rounded.astype(np.float16).tobytes())
    found = digest.hexdigest()[:32]
    with _lock:
        try:
            _known[embedder] = found
        except TypeError:
            pass
    return found
