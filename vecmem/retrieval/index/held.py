"""One user's stored embeddings held in memory, so a search needs no Chroma read for its keyword candidates.

A search compares the query with the vectors of the keyword side's candidates that the dense side did not
find. Reading them from Chroma costs a few ms a search at 100,000 memories (one read per type collection, on
cores the query embedding needs at the same moment); from memory, microseconds, and a search is shorter by
about the read it saves (the figures: docs/benchmarks.md, *Why retrieval is built as it is*).

Long-running processes ask for them (``MemoryBank.warm_up``: the chat, the bench); a one-off command does not.
They are loaded in a background thread (seconds at 100,000 memories), only on a store with a change feed (which
keeps them exact) and only for users whose vectors fit ``HOLD_AT_MOST_BYTES`` (154 MB is 100,000 memories of
384 dimensions). Until loaded, or for a bigger user, the missing ones are read from Chroma as before. The
retriever keeps them in step like the rest of the copy: its own writes put theirs, what another bank changed
is re-read, and a vector the loader read before a newer write never replaces that write's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

__all__ = ["HeldVectors", "HOLD_AT_MOST_BYTES", "quantize"]

log = logging.getLogger(__name__)

HOLD_AT_MOST_BYTES = 256 * 1024 * 1024  # a user's vectors bigger than this stay in Chroma only


class HeldVectors:
    """Vectors by memory id in one growing matrix; rows of removed memories are reused.

    float32 by default (the store's own vectors). ``compact``: each unit vector as int8 with a float32 scale of
    its own (``quantize``), a quarter of the bytes; the cosines read back differ from float32's by about 1e-3
    (the second view's vectors, second_view.py)."""

    def __init__(self, *, compact: bool = False) -> None:
        self.compact = compact
        self._rows: dict[str, int] = {}
        self._ids: list[str | None] = []  # row -> the memory id it holds, None when free (the reverse of _rows)
        self._matrix: np.ndarray | None = None
        self._scales: np.ndarray | None = None  # compact: each row's scale (the row times it is the unit vector)
        self._free: list[int] = []
        self._used = 0  # rows of the matrix handed out so far
        self._lock = threading.Lock()
        self.complete = False  # every stored vector has been loaded (a loader that stopped leaves it False)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._rows

    @property
    def nbytes(self) -> int:
        """The memory the matrix takes (it grows by doubling, so up to twice what the vectors need)."""
        matrix, scales = self._matrix, self._scales
        return (0 if matrix is None else int(matrix.nbytes)) + (0 if scales is None else int(scales.nbytes))

    @classmethod
    def of(cls, memory_ids: Sequence[str], vectors: np.ndarray) -> HeldVectors:
        """Every one of these vectors (distinct ids) held at once, complete: a replica's file had them
        (persisted.py). The matrix is taken whole, where ``put`` places its rows one at a time."""
        held = cls()
        if len(memory_ids):
            held._matrix = _unit_rows(vectors, len(memory_ids))  # a new array: the caller's stays as it is
            held._rows = {memory_id: row for row, memory_id in enumerate(memory_ids)}
            held._ids = list(memory_ids)
            held._used = len(held._ids)
        held.complete = True
        return held

    def put(self, memory_ids: Sequence[str], vectors: np.ndarray, *, unless_held: bool = False) -> None:
        """Hold these vectors; ``unless_held`` (the loader) keeps any vector already held, being newer."""
        if not len(memory_ids):
            return
        unit = _unit_rows(vectors, len(memory_ids))
        rows, scales = quantize(unit) if self.compact else (unit, np.ones(len(unit), dtype=np.float32))
        with self._lock:
            for memory_id, vector, scale in zip(memory_ids, rows, scales, strict=True):
                row = self._rows.get(memory_id)
                if row is not None and unless_held:
                    continue
                if row is None:
                    row = self._free.pop() if self._free else self._new_row(vector.shape[0])
                    self._rows[memory_id] = row
                    self._ids[row] = memory_id
                self._rows_matrix()[row] = vector
                if self._scales is not None:
                    self._scales[row] = scale

    def _rows_matrix(self) -> np.ndarray:
        assert self._matrix is not None, "a row is handed out only once the matrix exists"
        return self._matrix

    def _new_row(self, dimension: int) -> int:
        kind = np.int8 if self.compact else np.float32
        if self._matrix is None or self._matrix.shape[1] != dimension:
            self._matrix = np.zeros((1024, dimension), dtype=kind)
            self._scales = np.zeros(1024, dtype=np.float32) if self.compact else None
            self._rows.clear()
            self._ids.clear()
            self._free.clear()
            self._used = 0
        elif self._used == self._matrix.shape[0]:
            grown = np.zeros((self._matrix.shape[0] * 2, dimension), dtype=kind)
            grown[: self._used] = self._matrix
            self._matrix = grown
            if self._scales is not None:
                scales = np.zeros(len(grown), dtype=np.float32)
                scales[: self._used] = self._scales[: self._used]
                self._scales = scales
        self._used += 1
        self._ids.append(None)
        return self._used - 1

    def remove(self, memory_ids: Iterable[str]) -> None:
        with self._lock:
            for memory_id in memory_ids:
                row = self._rows.pop(memory_id, None)
                if row is not None:
                    self._ids[row] = None
                    self._free.append(row)

    def rows(self, memory_ids: Iterable[str]) -> dict[str, np.ndarray]:
        """{id: its held unit vector, a copy, float32} of the held ones among ``memory_ids`` (a replica's file
        keeps them: persisted.py)."""
        with self._lock:
            if self._matrix is None:
                return {}
            picked = [(memory_id, row) for memory_id in memory_ids if (row := self._rows.get(memory_id)) is not None]
            matrix = self._matrix[[row for _, row in picked]].astype(np.float32)
            if self._scales is not None:
                matrix *= self._scales[[row for _, row in picked]][:, None]
        return {memory_id: vector for (memory_id, _), vector in zip(picked, matrix, strict=True)}

    def cosines(self, memory_ids: Sequence[str], query: np.ndarray) -> dict[str, float]:
        """{id: cosine with the query} of the held ones among ``memory_ids``.

        Rows are looked up and read in one hold of the lock: a row freed by ``remove`` and handed to another
        memory by ``put`` is never read for the memory that had it. A vector can be newer than the caller's
        snapshot of the index; it is then that memory's own newer vector, as the store holds it."""
        query = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        query = query / norm if norm > 0 else query
        with self._lock:
            rows = [(memory_id, row) for memory_id in memory_ids if (row := self._rows.get(memory_id)) is not None]
            if not rows or self._matrix is None:
                return {}
            picked = [row for _, row in rows]
            products = self._products(self._matrix[picked], query, picked)
        return {memory_id: float(product) for (memory_id, _), product in zip(rows, products, strict=True)}

    def nearest(self, query: np.ndarray, wanted: int, keep: Callable[[str], bool]) -> dict[str, float]:
        """The ``wanted`` held vectors nearest the query that ``keep`` lets through, exactly, as {id: cosine}
        best first: one matrix-vector product over every held row (a few ms at 100,000 memories), then the best
        rows in order until enough pass."""
        query = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        query = query / norm if norm > 0 else query
        with self._lock:
            if self._matrix is None or not self._used or wanted <= 0:
                return {}
            products = self._products(self._matrix[: self._used], query, slice(0, self._used))
            ids = list(self._ids)
        found: dict[str, float] = {}
        first = min(len(products), 4 * wanted)  # most searches find enough among the first few
        for order in (_best(products, first), _best(products, len(products))):
            for row in order:
                memory_id = ids[row]
                if memory_id is not None and memory_id not in found and keep(memory_id):
                    found[memory_id] = float(products[row])
                    if len(found) == wanted:
                        return _ties_by_id(found, products, ids, keep)
            if first == len(products):
                break
        return _ties_by_id(found, products, ids, keep)

    def _products(self, rows: np.ndarray, query: np.ndarray, which: list[int] | slice) -> np.ndarray:
        """Cosines of these rows with a unit query (caller holds the lock)."""
        if self._scales is None:
            products: np.ndarray = rows @ query
            return products
        scaled: np.ndarray = (rows.astype(np.float32) @ query) * self._scales[which]
        return scaled


def _unit_rows(vectors: np.ndarray, count: int) -> np.ndarray:
    """``count`` vectors as float32 unit rows (a zero row stays zero): cosine, as Chroma's cosine space computes it."""
    matrix = np.asarray(vectors, dtype=np.float32).reshape(count, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = matrix / np.where(norms > 0, norms, 1.0)
    return unit


def _ties_by_id(found: dict[str, float], products: np.ndarray, ids: list[str | None],
                keep: Callable[[str], bool]) -> dict[str, float]:
    """``found`` best first with ties broken by id, as a store's nearest breaks them (storage/base.py): of the
    memories tied at the last place, those with the smallest ids (rows are in no order of id)."""
    if not found:
        return found
    floor = min(found.values())
    tied_rows = np.flatnonzero(products == np.float32(floor))
    if len(tied_rows) > 1:
        above = {memory_id: cosine for memory_id, cosine in found.items() if cosine != floor}
        tied = sorted(memory_id for row in tied_rows.tolist()
                      if (memory_id := ids[row]) is not None and (memory_id in found or keep(memory_id)))
        found = above | dict.fromkeys(tied[: len(found) - len(above)], floor)
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))


def quantize(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors (rows) as int8 rows and a float32 scale each: row·scale is the vector to within half a step
    of its largest component / 127."""
    unit = np.asarray(unit, dtype=np.float32)
    peak = np.abs(unit).max(axis=1) if unit.size else np.zeros(len(unit), dtype=np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    return np.round(unit / scales[:, None]).astype(np.int8), scales


def _best(values: np.ndarray, count: int) -> np.ndarray:
    """The indices of the ``count`` largest values, largest first (ties by index, for repeatability)."""
    if count < len(values):
        top = np.argpartition(-values, count - 1)[:count]
        return top[np.lexsort((top, -values[top]))]
    return np.lexsort((np.arange(len(values)), -values))
