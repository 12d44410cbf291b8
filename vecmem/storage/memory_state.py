"""What every client of one in-memory store shares (``memory.py``), and a reindex's staging copies in it.

A reindex to another model stages each memory's new vector beside the old one (as ``ChromaStore`` stages
collections, ``chroma/moves.py``): the store reads the old vectors until ``swap_staged``, and a reindex that
failed midway, run again, embeds only the memories it had not staged or whose text changed since.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["stage", "swap_staged"]

Staged = dict[str, tuple[str, dict[str, Any], np.ndarray]]  # id -> (document, metadata, vector)


@dataclass
class _Row:
    place: str  # the type it is filed under (Chroma: the collection it is in)
    document: str
    metadata: dict[str, Any]  # rows.to_metadata plus "keywords", as Chroma keeps it
    vector: np.ndarray  # float32, as Chroma keeps it


@dataclass
class _Memories:
    """What every client of one in-memory store shares."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    rows: dict[str, dict[str, _Row]] = field(default_factory=dict)  # user -> id -> row, in writing order
    places: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)  # user -> type -> (model, dim)
    model: tuple[str, int] | None = None  # the store-wide model record (Chroma's registry collection)
    # a reindex to another model: user -> type -> staged copies embedded with ``staged_for``, swapped in by
    # ``swap_staged``; kept when a reindex fails, so a rerun resumes
    staged: dict[str, dict[str, Staged]] = field(default_factory=dict)
    staged_for: tuple[str, int] | None = None


def stage(memories: _Memories, user_id: str, places: list[str], target: tuple[str, int],
          embed: Callable[[Sequence[str]], np.ndarray], batch_size: int, progress: Callable[[int], None] | None) -> int:
    """Copy each of the user's places into the staging copies, embedded anew unless staged already with the same
    text (then only the metadata is brought up to date); returns how many memories the user has."""
    with memories.lock:
        if memories.staged_for != target:
            memories.staged, memories.staged_for = {}, target
        staged_user = memories.staged.setdefault(user_id, {})
    total = 0
    for place in places:
        with memories.lock:
            filed = [(i, row.document, dict(row.metadata)) for i, row in memories.rows.get(user_id, {}).items()
                     if row.place == place]
            staged = staged_user.setdefault(place, {})
            for gone in set(staged) - {memory_id for memory_id, _, _ in filed}:
                del staged[gone]
            fresh = [(i, d, m) for i, d, m in filed if i not in staged or staged[i][0] != d]
            for memory_id, document, metadata in filed:
                if memory_id in staged and staged[memory_id][0] == document:
                    staged[memory_id] = (document, metadata, staged[memory_id][2])
        if progress is not None and len(filed) > len(fresh):
            progress(len(filed) - len(fresh))
        step = max(batch_size, 1)
        for start in range(0, len(fresh), step):
            batch = fresh[start : start + step]
            vectors = embed([d for _, d, _ in batch])
            with memories.lock:
                for (memory_id, document, metadata), vector in zip(batch, vectors, strict=True):
                    staged[memory_id] = (document, metadata, vector)
            if progress is not None:
                progress(len(batch))
        total += len(filed)
    return total


def swap_staged(memories: _Memories, target: tuple[str, int]) -> list[str]:
    """Record ``target`` as the store's model and make every staged place what was staged; returns the users."""
    with memories.lock:
        memories.model = target
        staged = memories.staged if memories.staged_for == target else {}
        memories.staged, memories.staged_for = {}, None
        for user_id, by_place in staged.items():
            rows = memories.rows.setdefault(user_id, {})
            for place, copies in by_place.items():
                for memory_id in [i for i, row in rows.items() if row.place == place and i not in copies]:
                    del rows[memory_id]
                for memory_id, (document, metadata, vector) in copies.items():
                    rows[memory_id] = _Row(place, document, metadata, vector)
                memories.places.setdefault(user_id, {})[place] = target
        return list(staged)
