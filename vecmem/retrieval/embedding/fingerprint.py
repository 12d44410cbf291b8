"""What an embedding model computes, in one short string: the key its calibration is kept under
(calibration.py, relevance.py's ``Cohort``).

A model's name says what it is called, not what it computes: a rebuilt package, new weights under an old name,
an endpoint that changed its model behind the same URL all keep the name, and a caller's own embedder may have
no stable name at all. So the key is the model's own output: its vectors for a few fixed probe texts, as
memories and as queries (a model may embed the two sides apart, as e5 does), rounded to ``DECIMALS`` decimals
(so that the last bits of float arithmetic, which vary with threads and hardware, do not change it) and hashed.
New weights move the vectors far more than that; an embedder that gives the same vectors shares the key
whatever its name. Embedding the probes costs two small calls, once per embedder object and process.

Those calls are a tenth of a one-off command's start (`vecmem search`), so an embedder whose weights are files it
can name (``WeightsOnDisk``: the bundled multilingual-e5-small) has its fingerprint remembered beside the
calibration, under the files' paths, sizes and modification times (``remembered``): new weights, a reinstalled
package, are new files, and their fingerprint is computed again. Any other embedder computes it every process.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from vecmem.storage.files import private_dir, replace_atomically

if TYPE_CHECKING:
    from vecmem.retrieval.embedding.embedders import Embedder

__all__ = ["DECIMALS", "PROBES", "WeightsOnDisk", "fingerprint", "remembered"]

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


REMEMBERED = "fingerprints.json"  # {hash of a weights stamp: its fingerprint}, in a calibration cache folder
_FINGERPRINT = re.compile(r"[0-9a-f]{32}")


@runtime_checkable
class WeightsOnDisk(Protocol):
    """An embedder that can name the files its weights are (an optional part of ``Embedder``)."""

    @property
    def weights_stamp(self) -> str | None:
        """The weights' files as paths, sizes and modification times (stamp.py); None when they cannot be named."""


def remembered(embedder: Embedder, folders: Sequence[Path]) -> str:
    """``fingerprint(embedder)``, read from the first of ``folders`` that remembers it for the embedder's weights
    stamp, else computed and remembered in the first folder that takes it (module docstring)."""
    stamp = embedder.weights_stamp if isinstance(embedder, WeightsOnDisk) else None
    if stamp is None or not folders:
        return fingerprint(embedder)
    key = hashlib.sha256(stamp.encode("utf-8")).hexdigest()[:32]
    for folder in folders:
        known = _read(folder / REMEMBERED).get(key)
        if isinstance(known, str) and _FINGERPRINT.fullmatch(known):
            return known
    found = fingerprint(embedder)
    for folder in folders:  # the first folder that takes it
        if _remember(folder / REMEMBERED, key, found):
            break
    return found


def _remember(path: Path, key: str, found: str) -> bool:
    """Add ``key``'s fingerprint to the file; False when its folder cannot take it (read-only: the next folder,
    else computed again next time)."""
    known = json.dumps({**_read(path), key: found}).encode("utf-8")
    try:
        private_dir(path.parent)
        replace_atomically(path, lambda out: out.write(known))
    except OSError:
        return False
    return True


def _read(path: Path) -> dict[str, object]:
    """The remembered fingerprints in ``path``; none when it is missing or unreadable (computed again)."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}
