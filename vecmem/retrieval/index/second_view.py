"""The second dense view: a second embedding model's vectors of every memory, beside the store's own, fused as a
side of its own (fusion.py). On with ``VECMEM_SECOND_VIEW=use``: the multilingual Universal Sentence Encoder
(embedding/use.py), which reads Chinese where multilingual-e5-small is weakest (docs/benchmarks.md, *A second dense
view*).

Where its vectors live. Chroma keeps one vector a record, the store's model's; the second view's are kept in
a file of their own in the home, ``second-view/<the model's name>.sqlite3`` (0600), one row per memory: the user,
the memory's id, a digest of the text it was embedded from, and the vector as int8 with a float32 scale
(``held.quantize``: 516 bytes; recall measured the same as float32's). They are derived data: the row of a memory
whose text changed (another digest), or that another home wrote (a Chroma server shared by workers of several
homes), or that a damaged file lost, is simply embedded again. A memory forgotten or erased through a bank with
the view on leaves the file with it; one deleted while the view was off leaves a row no memory points at, never
read again (the digest keys it to that memory's text).

In memory, each user's replica holds their vectors (``HeldVectors(compact=True)``, 516 bytes a memory, counted
in the replicas' budget): filled from the file when the replica is built or loaded (the misses embedded then),
kept in step as the replica is (this process's writes embed their memories at write time; memories others
changed are read again), and scanned exactly at each search for the view's own nearest memories.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vecmem.errors import StoreError
from vecmem.retrieval.index.held import HeldVectors, quantize
from vecmem.storage.files import private_dir
from vecmem.storage.state.sqlite import SQLiteFile

if TYPE_CHECKING:
    from vecmem.retrieval.embedding.embedders import Embedder

__all__ = ["SecondView"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (user TEXT NOT NULL, id TEXT NOT NULL, digest BLOB NOT NULL, scale REAL NOT NULL,
                                    vector BLOB NOT NULL, PRIMARY KEY (user, id)) WITHOUT ROWID;
"""
_CHUNK = 400  # ids per SELECT (SQLite's bound on host parameters is 999 in old builds)


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:16]


class SecondView:
    """The second view's model and its vector file (module docstring); one per retriever."""

    def __init__(self, embedder: Embedder, file: Path | None) -> None:
        self.embedder = embedder
        self._path = file
        self._file: SQLiteFile | None = None
        self._lock = threading.Lock()

    def held(self, user: str, memories: Sequence[tuple[str, str]]) -> HeldVectors:
        """The vectors of these (id, text) memories of the user, held compactly: from the file, the rest embedded
        (and kept in the file)."""
        held = HeldVectors(compact=True)
        if memories:
            held.put([memory_id for memory_id, _ in memories], self.vectors(user, memories))
        held.complete = True
        return held

    def vectors(self, user: str, memories: Sequence[tuple[str, str]]) -> np.ndarray:
        """Unit vectors of these (id, text) memories, one row each, in order: kept ones read, the others embedded
        and kept."""
        found = self._read(user, memories)
        missing = [i for i, (memory_id, text) in enumerate(memories) if memory_id not in found]
        out = np.zeros((len(memories), self.embedder.dimension), dtype=np.float32)
        for i, (memory_id, _) in enumerate(memories):
            if memory_id in found:
                out[i] = found[memory_id]
        if missing:
            embedded = np.asarray(self.embedder.embed_documents([memories[i][1] for i in missing]), dtype=np.float32)
            norms = np.linalg.norm(embedded, axis=1, keepdims=True)
            fresh = (embedded / np.where(norms > 0, norms, 1.0)).astype(np.float32)
            out[missing] = fresh
            self._write(user, [memories[i] for i in missing], fresh)
        return out

    def forget(self, user: str, memory_ids: Sequence[str]) -> None:
        """Drop the rows of memories deleted for good."""
        self._run("DELETE FROM vectors WHERE user = ? AND id = ?", [(user, memory_id) for memory_id in memory_ids])

    def close(self) -> None:
        with self._lock:
            file, self._file = self._file, None
        if file is not None:
            file.close()

    # ------------------------------------------------------------------------------------------ the file

    def _open(self) -> SQLiteFile | None:
        """The vector file (caller holds the lock); None without a file or when it cannot be opened."""
        if self._file is None and self._path is not None:
            try:
                private_dir(self._path.parent)
                self._file = SQLiteFile(self._path, _SCHEMA, label="second view's vectors", timeout=30)
            except (OSError, StoreError) as exc:
                log.warning("vecmem: the second view's vectors cannot be kept in %s (%s); they are embedded again "
                            "by each process", self._path, exc)
                self._path = None
        return self._file

    def _read(self, user: str, memories: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        wanted = {memory_id: _digest(text) for memory_id, text in memories}
        found: dict[str, np.ndarray] = {}
        ids = list(wanted)
        with self._lock:
            file = self._open()
            if file is None:
                return found
            try:
                with file.reading() as reads:
                    for start in range(0, len(ids), _CHUNK):
                        chunk = ids[start:start + _CHUNK]
                        rows = reads.execute(
                            f"SELECT id, digest, scale, vector FROM vectors WHERE user = ? AND id IN "
                            f"({','.join('?' * len(chunk))})", [user, *chunk]).fetchall()
                        for memory_id, digest, scale, vector in rows:
                            if digest == wanted.get(memory_id):
                                found[memory_id] = (np.frombuffer(vector, dtype=np.int8).astype(np.float32)
                                                    * np.float32(scale))
            except StoreError as exc:
                log.warning("vecmem: could not read the second view's vectors (%s); embedding them again", exc)
        return found

    def _write(self, user: str, memories: Sequence[tuple[str, str]], unit: np.ndarray) -> None:
        rows, scales = quantize(unit)
        self._run("INSERT OR REPLACE INTO vectors (user, id, digest, scale, vector) VALUES (?, ?, ?, ?, ?)",
                  [(user, memory_id, _digest(text), float(scale), row.tobytes())
                   for (memory_id, text), row, scale in zip(memories, rows, scales, strict=True)])

    def _run(self, statement: str, rows: list[tuple[object, ...]]) -> None:
        if not rows:
            return
        with self._lock:
            file = self._open()
            if file is None:
                return
            try:
                with file.transaction(immediate=False) as statements:
                    statements.executemany(statement, rows)
            except StoreError as exc:  # derived data: a later process embeds what was not kept
                log.warning("vecmem: could not keep the second view's vectors (%s)", exc)
