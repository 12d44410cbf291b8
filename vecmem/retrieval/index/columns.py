"""Compact columns a replica loaded from its file (persisted.py) keeps, each entry decoded when it is read.

Turning 100,000 memories' tokens into tuples of strings takes a noticeable time, and their records more: most
of what loading the file instead of reading the store saves. A search reads the tokens of
the few memories written since the last merge and the records of the ten or so it returns, so a loaded replica
keeps both as the file holds them (one string with offsets, token numbers into one word list) and decodes an
entry when it is asked for. Everything here is checked when it is built (``check_offsets``): a damaged file
is refused on load, never discovered half-way through a search.

``HeldRecords`` (one user's records as the replica holds them) lives here too: it layers this process's edits
over such a loaded table, or holds plain records when the replica was built from the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, pairwise
from typing import cast

import numpy as np

from vecmem.models import MemoryRecord
from vecmem.storage.chroma.rows import from_row

__all__ = ["TYPE_NAMES", "HeldRecords", "LayeredRecords", "LoadedBM25", "RecordTable", "TextColumn", "TokenTable", "WordCounts",
           "check_offsets"]

TYPE_NAMES = ("fact", "preference", "instruction", "conclusion")  # type codes, as keyword.py numbers them


class ColumnError(ValueError):
    """A column whose parts do not fit together (a damaged or foreign file)."""


def check_offsets(offsets: np.ndarray, size: int, what: str) -> list[int]:
    """``offsets`` as a list, after checking they start at 0, never go down and end at ``size``."""
    if offsets.ndim != 1 or offsets.size == 0 or offsets.dtype.kind not in "iu":
        raise ColumnError(f"{what}: offsets are not a list of integers")
    if int(offsets[0]) != 0 or int(offsets[-1]) != size or (offsets.size > 1 and bool((np.diff(offsets) < 0).any())):
        raise ColumnError(f"{what}: offsets do not cover the data in order")
    return cast(list[int], offsets.tolist())  # Python ints: indexing a list is what decoding an entry does


class TextColumn:
    """Strings kept as one string and their character offsets: the i-th is a slice, made when it is read."""

    def __init__(self, text: str, offsets: Sequence[int]) -> None:
        self._text = text
        self._offsets = offsets  # len + 1 of them, checked by whoever made them

    @classmethod
    def of(cls, values: Iterable[str]) -> TextColumn:
        strings = list(values)
        return cls("".join(strings), [0, *accumulate(map(len, strings))])

    @classmethod
    def load(cls, data: np.ndarray, offsets: np.ndarray, what: str) -> TextColumn:
        """From the file's UTF-8 bytes and character offsets (checked; bad UTF-8 raises UnicodeDecodeError)."""
        text = data.tobytes().decode("utf-8")
        return cls(text, check_offsets(offsets, len(text), what))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(UTF-8 bytes, character offsets) as the file keeps them."""
        return np.frombuffer(self._text.encode("utf-8"), dtype=np.uint8), np.asarray(self._offsets, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, position: int) -> str:
        return self._text[self._offsets[position] : self._offsets[position + 1]]

    def tolist(self) -> list[str]:
        text, offsets = self._text, self._offsets
        return [text[a:b] for a, b in pairwise(offsets)]


class TokenTable:
    """Each slot's tokens: a loaded base (numbers into ``words``) decoded when read, then tuples appended.

    It stands in for the keyword index's list of token tuples, which only ever appends between rebuilds, so a
    snapshot that reads the slots it counted is never disturbed by a later append."""

    def __init__(self, words: list[str], flat: np.ndarray, offsets: list[int], decoded_from: int) -> None:
        """Slots from ``decoded_from`` on (the delta, which every search scores) are decoded now, the rest
        (the BM25 model's documents, read only by an edit or a merge) when read."""
        self.words = words
        self.flat = flat  # as loaded (int32, checked against ``words``)
        self.offsets = offsets
        self.base = decoded_from
        self._extra = [self._decoded(slot) for slot in range(decoded_from, len(offsets) - 1)]

    def __len__(self) -> int:
        return self.base + len(self._extra)

    def __getitem__(self, slot: int) -> tuple[str, ...]:
        if slot >= self.base:
            return self._extra[slot - self.base]
        return self._decoded(slot)

    def _decoded(self, slot: int) -> tuple[str, ...]:
        return tuple(map(self.words.__getitem__, self.flat[self.offsets[slot] : self.offsets[slot + 1]].tolist()))

    def append(self, tokens: tuple[str, ...]) -> None:
        self._extra.append(tokens)


class WordCounts(Mapping[str, int]):
    """A loaded BM25 model's document frequencies by word, read through the model's own word numbers (a dict of
    its own would take a noticeable time to build at 100,000 memories, for the few words of each query)."""

    def __init__(self, number: Mapping[str, int], counts: np.ndarray) -> None:
        self._number, self.counts = number, counts  # counts: per word number, 0 for a word no document has

    def __getitem__(self, word: str) -> int:
        count = int(self.counts[self._number[word]])
        if not count:
            raise KeyError(word)
        return count

    def __iter__(self) -> Iterator[str]:
        return (word for word, number in self._number.items() if self.counts[number])

    def __len__(self) -> int:
        return int(np.count_nonzero(self.counts))


class LoadedBM25:
    """A saved BM25 model: bm25s's own arrays (one column of document scores per word) scored with bm25s's own
    arithmetic (its numpy backend: float32, words in query order), so a loaded index ranks exactly as the built
    one did, without importing bm25s (and scipy with it: a noticeable part of a new process's start)."""

    def __init__(self, vocab: Sequence[str], data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                 num_docs: int) -> None:
        self.vocab_dict = {word: number for number, word in enumerate(vocab)}
        self.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": num_docs}  # as bm25s names them
        self._data, self._indices, self._indptr, self._num_docs = data, indices, indptr, num_docs

    def get_scores(self, tokens: list[str]) -> np.ndarray:
        scores = np.zeros(self._num_docs, dtype=np.float32)
        columns = len(self._indptr) - 1  # bm25s numbers its empty word "" past the last column: no document has it
        for number in (self.vocab_dict[token] for token in tokens if token in self.vocab_dict):
            if number < columns:
                start, end = self._indptr[number], self._indptr[number + 1]
                np.add.at(scores, self._indices[start:end], self._data[start:end])
        return scores


class RecordTable(Mapping[str, MemoryRecord]):
    """Records as the file keeps them (Chroma's row form: document, type, scope, superseded_by, fields JSON),
    made into ``MemoryRecord``s one at a time when read, exactly as a read from the store makes them."""

    def __init__(self, ids: Sequence[str], documents: TextColumn, types: np.ndarray, scopes: np.ndarray,
                 scope_names: Sequence[str], superseded_by: TextColumn, fields: TextColumn) -> None:
        count = len(ids)
        if not (len(documents) == len(superseded_by) == len(fields) == types.size == scopes.size == count):
            raise ColumnError("records: the columns differ in length")
        if count and (int(types.min()) < 0 or int(types.max()) >= len(TYPE_NAMES)
                      or int(scopes.min()) < 0 or int(scopes.max()) >= len(scope_names)):
            raise ColumnError("records: a type or scope number is out of range")
        self._position = {memory_id: position for position, memory_id in enumerate(ids)}
        if len(self._position) != count:
            raise ColumnError("records: an id is there twice")
        self._types, self._scopes = types.tolist(), scopes.tolist()
        self._scope_names = list(scope_names)
        self.documents, self.superseded_by, self.fields = documents, superseded_by, fields

    def __len__(self) -> int:
        return len(self._position)

    def __iter__(self) -> Iterator[str]:
        return iter(self._position)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._position

    def __getitem__(self, memory_id: str) -> MemoryRecord:
        position = self._position[memory_id]
        return from_row(memory_id, self.documents[position], self.metadata(position))

    def metadata(self, position: int) -> dict[str, object]:
        superseded_by = self.superseded_by[position]
        return {"type": TYPE_NAMES[self._types[position]], "scope": self._scope_names[self._scopes[position]],
                "superseded": bool(superseded_by), "superseded_by": superseded_by, "fields": self.fields[position]}

    def position(self, memory_id: str) -> int | None:
        return self._position.get(memory_id)


_GONE = None  # in a layer over a table: this memory of the table is no longer held


class LayeredRecords(Mapping[str, MemoryRecord]):
    """A loaded table with this process's edits over it (one moment of ``HeldRecords``: never changed)."""

    def __init__(self, table: RecordTable, edits: dict[str, MemoryRecord | None]) -> None:
        self.table, self.edits = table, edits

    def __getitem__(self, memory_id: str) -> MemoryRecord:
        if memory_id in self.edits:
            record = self.edits[memory_id]
            if record is _GONE:
                raise KeyError(memory_id)
            return record
        return self.table[memory_id]

    def __contains__(self, memory_id: object) -> bool:
        if memory_id in self.edits:
            return self.edits[memory_id] is not _GONE
        return memory_id in self.table

    def __iter__(self) -> Iterator[str]:
        for memory_id in self.table:
            if memory_id not in self.edits:
                yield memory_id
        for memory_id, record in self.edits.items():
            if record is not _GONE:
                yield memory_id

    def __len__(self) -> int:
        return sum(1 for _ in self)


class HeldRecords:
    """One user's records by id. The first edit after a snapshot copies what the snapshot holds (the whole dict
    of a built replica, only the edits of a loaded one), so a snapshot never changes (callers hold the replicas'
    lock)."""

    def __init__(self, records: dict[str, MemoryRecord], table: RecordTable | None = None) -> None:
        self.table = table  # a loaded replica's records; ``records`` then holds the edits made since
        self._records = cast(dict[str, MemoryRecord | None], records)  # taken over, not copied
        self._shared = False

    def snapshot(self) -> Mapping[str, MemoryRecord]:
        self._shared = True
        if self.table is None:  # nothing to mark gone without a table: every value is a record
            return cast(dict[str, MemoryRecord], self._records)
        return LayeredRecords(self.table, self._records)

    def update(self, records: Iterable[tuple[str, MemoryRecord]]) -> None:
        self._own().update(records)

    def discard(self, memory_ids: Iterable[str]) -> None:
        held = self._own()
        for memory_id in memory_ids:
            if self.table is not None and memory_id in self.table:
                held[memory_id] = _GONE
            else:
                held.pop(memory_id, None)

    def _own(self) -> dict[str, MemoryRecord | None]:
        if self._shared:
            self._records = dict(self._records)
            self._shared = False
        return self._records
