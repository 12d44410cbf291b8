"""The file a saved replica is (persisted.py says when one is written and trusted): arrays and a JSON header.

One uncompressed ``.npz`` (numpy's zip of ``.npy`` arrays, each with its CRC) read with ``allow_pickle=False``,
the header a UTF-8 JSON array inside it. No pickle anywhere: reading a file runs no code from it. Strings are
one UTF-8 array and character offsets (columns.py); tokens are numbers into one word list whose first words
are the BM25 model's vocabulary, in its order; the model is bm25s's own sparse arrays; records are kept in
Chroma's row form (document, type, scope, superseded_by and the ``fields`` JSON, storage/chroma/rows.py) and made into
records only when a search returns them; the memories' vectors, float32 as the store keeps them, by slot, when they
were at hand (``vectors_complete`` in the header when every saved record has one: a search can then be answered
from the file alone, persisted.py). Dead slots are kept, so the loaded index scores exactly as the saved
one did. Every offset, number and length is checked on reading (``decode``), so a damaged or foreign file is
refused whole instead of failing in a search later.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vecmem.models import MemoryRecord
from vecmem.retrieval.index.columns import (
    TYPE_NAMES,
    LayeredRecords,
    LoadedBM25,
    RecordTable,
    TextColumn,
    TokenTable,
    WordCounts,
    check_offsets,
)
from vecmem.retrieval.index.keyword import K1, B, IndexState, KeywordIndex
from vecmem.storage.chroma.rows import to_metadata

__all__ = ["FORMAT", "Capture", "Loaded", "Mismatch", "SavedVectors", "bm25_vocabulary", "checked_header", "decode",
           "encode"]

FORMAT = 2  # raised whenever what a file holds, or how it is read, changes: older files are then rebuilt
_SLOT_DTYPES = {"_alive": np.bool_, "_superseded": np.bool_, "_type": np.int8, "_scope": np.int32,
                "_importance": np.float32, "_created": np.float64, "_last": np.float64}
_TYPE_CODES = {name: code for code, name in enumerate(TYPE_NAMES)}


class Mismatch(Exception):
    """The file is sound but belongs to another store, model, user or format: rebuilt without a warning."""


@dataclass(frozen=True)
class Capture:
    """A replica at one moment, taken under the replicas' lock; saving it reads nothing that an edit changes."""

    index: IndexState
    records: Mapping[str, MemoryRecord]
    seen: int  # the feed's row the index and records reflect
    unsettled: dict[str, int]


@dataclass(frozen=True)
class Loaded:
    index: KeywordIndex
    records: RecordTable
    seen: int
    unsettled: dict[str, int]
    vectors: SavedVectors | None = None
    header: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SavedVectors:
    """Memories' vectors as a file holds them: ``ids[i]`` is row i of ``matrix``; ``complete`` when every record
    the file holds has its vector."""

    ids: list[str]
    matrix: np.ndarray
    complete: bool


def encode(capture: Capture, header: dict[str, Any],
           vectors: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The capture as the file's named arrays, ``header`` (identity, user) completed inside them; ``vectors``: the
    memories' vectors by id, those of the captured records kept."""
    arrays, sizes = _arrays(capture)
    if vectors is not None:
        sizes["vectors_complete"] = _vector_arrays(arrays, capture.index.ids, vectors)
    state = capture.index
    header = {**header, "format": FORMAT, "seen": capture.seen, "unsettled": capture.unsettled,
              "main_size": state.main_size, "avgdl": state.avgdl, "k1": state.k1, "b": state.b,
              "scopes": state.scopes, **sizes}
    arrays["header"] = np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    return arrays


def _arrays(capture: Capture) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The capture as named arrays, and what the header says about them (the vocabulary's size, the records'
    scopes)."""
    state = capture.index
    count = len(state.ids)
    vocab = bm25_vocabulary(state.model)
    words, flat, offsets = _encoded_tokens(state.tokens, count, vocab)
    arrays: dict[str, np.ndarray] = {}
    arrays["ids"], arrays["ids_offsets"] = TextColumn.of(state.ids).arrays()
    arrays["words"], arrays["words_offsets"] = TextColumn.of(words).arrays()
    arrays["tokens"], arrays["token_offsets"] = flat, offsets
    for name, dtype in _SLOT_DTYPES.items():
        arrays[name.lstrip("_")] = np.ascontiguousarray(state.arrays[name][:count], dtype=dtype)
    if state.model is not None:
        scores = state.model.scores
        arrays["bm25_data"], arrays["bm25_indices"], arrays["bm25_indptr"] = (
            np.asarray(scores["data"]), np.asarray(scores["indices"]), np.asarray(scores["indptr"]))
        df = state.df
        arrays["df"] = df.counts if isinstance(df, WordCounts) else np.array([df.get(w, 0) for w in vocab], dtype=np.int64)
    records, record_scopes = _record_arrays(capture.records, state)
    arrays.update(records)
    return arrays, {"vocab_size": len(vocab), "record_scopes": record_scopes}


def _vector_arrays(arrays: dict[str, np.ndarray], ids: list[str], vectors: Mapping[str, np.ndarray]) -> bool:
    """Add the saved records' vectors (by slot) to ``arrays``; whether every saved record has one."""
    slots = [slot for slot in arrays["record_slots"].tolist() if ids[slot] in vectors]
    if not slots:
        return False
    arrays["vector_slots"] = np.array(slots, dtype=np.int32)
    arrays["vectors"] = np.stack([np.asarray(vectors[ids[slot]], dtype=np.float32) for slot in slots])
    return len(slots) == arrays["record_slots"].size


def bm25_vocabulary(model: Any) -> list[str]:
    """The BM25 model's words in the order of their numbers (which must run 0, 1, ... without a gap)."""
    if model is None:
        return []
    vocab = [""] * len(model.vocab_dict)
    for word, number in model.vocab_dict.items():
        vocab[number] = word
    if len(set(vocab)) != len(vocab):
        raise ValueError("the BM25 model's vocabulary is not numbered 0..n-1")
    return vocab


def _encoded_tokens(tokens: list[tuple[str, ...]] | TokenTable, count: int,
                    vocab: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(words, token numbers, per-slot offsets); the model's words come first, so their numbers are the model's.
    A loaded table is reused as it is for the slots it already holds, when its words begin with the model's."""
    start = 0
    words, parts, offsets = list(vocab), [], [0]
    if isinstance(tokens, TokenTable) and tokens.words[: len(vocab)] == vocab:
        start = min(count, tokens.base)
        words = list(tokens.words)
        parts.append(tokens.flat[: tokens.offsets[start]])
        offsets = list(tokens.offsets[: start + 1])
    number = {word: position for position, word in enumerate(words)}
    extra: list[int] = []
    for slot in range(start, count):
        slot_tokens = tokens[slot]
        for token in slot_tokens:
            code = number.get(token)
            if code is None:
                code = number[token] = len(words)
                words.append(token)
            extra.append(code)
        offsets.append(offsets[-1] + len(slot_tokens))
    parts.append(np.array(extra, dtype=np.int32))
    return words, np.concatenate(parts).astype(np.int32, copy=False), np.array(offsets, dtype=np.int64)


def _record_arrays(records: Mapping[str, MemoryRecord], state: IndexState) -> tuple[dict[str, np.ndarray], list[str]]:
    """Each live memory's record in Chroma's row form, and the scopes they name; a loaded table's rows are
    copied without decoding them."""
    layered = records if isinstance(records, LayeredRecords) else None
    slots, documents, types, scopes, superseded_by, fields = [], [], [], [], [], []
    scope_codes: dict[str, int] = {}
    for slot in np.flatnonzero(state.arrays["_alive"][: len(state.ids)]).tolist():
        memory_id = state.ids[slot]
        table = None if layered is None or memory_id in layered.edits else layered.table
        position = None if table is None else table.position(memory_id)
        if position is not None and table is not None:
            document, meta = table.documents[position], table.metadata(position)
        elif memory_id in records:
            record = records[memory_id]
            document, meta = record.content, to_metadata(record)
        else:
            continue  # not held (a replica without records is never saved): a search reads it from the store
        slots.append(slot)
        documents.append(document)
        types.append(_TYPE_CODES[str(meta["type"])])
        scopes.append(scope_codes.setdefault(str(meta["scope"]), len(scope_codes)))
        superseded_by.append(str(meta["superseded_by"] or ""))
        fields.append(str(meta["fields"]))
    arrays: dict[str, np.ndarray] = {
        "record_slots": np.array(slots, dtype=np.int32), "record_types": np.array(types, dtype=np.int8),
              "record_scope": np.array(scopes, dtype=np.int32)}
    for name, column in (("record_documents", documents), ("record_superseded_by", superseded_by),
                         ("record_fields", fields)):
        arrays[name], arrays[f"{name}_offsets"] = TextColumn.of(column).arrays()
    return arrays, sorted(scope_codes, key=scope_codes.__getitem__)


def checked_header(parts: Any, expected: Mapping[str, Any]) -> dict[str, Any]:
    """The file's header alone (an NpzFile reads a part only when asked for it), after checking it says
    ``expected`` and this format (Mismatch when not; ValueError when it is no object)."""
    header = json.loads(parts["header"].tobytes().decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("the header is not an object")
    for key, wanted in (*expected.items(), ("format", FORMAT), ("k1", K1), ("b", B)):
        if header.get(key) != wanted:
            raise Mismatch(f"{key} is {header.get(key)!r}, not {wanted!r}")
    return header


def decode(parts: Any, expected: dict[str, Any]) -> Loaded:
    """The replica in an opened file (``np.load``'s NpzFile), after checking its header says ``expected`` (the
    store's identity and the user: Mismatch when not) and every part fits (ValueError, KeyError when not)."""
    header = checked_header(parts, expected)
    ids = TextColumn.load(parts["ids"], parts["ids_offsets"], "ids").tolist()
    count = len(ids)
    arrays = {}
    for name, dtype in _SLOT_DTYPES.items():
        array = parts[name.lstrip("_")]
        if array.dtype != dtype or array.shape != (count,):
            raise ValueError(f"{name.lstrip('_')}: {array.dtype} {array.shape}, not {np.dtype(dtype)} ({count},)")
        arrays[name] = array
    scopes = [str(scope) for scope in header["scopes"]]
    if not scopes or scopes[0] != "global" or len(set(scopes)) != len(scopes):
        raise ValueError("the scope list is malformed")
    if count and not (0 <= int(arrays["_type"].min()) and int(arrays["_type"].max()) < len(TYPE_NAMES)
                      and 0 <= int(arrays["_scope"].min()) and int(arrays["_scope"].max()) < len(scopes)):
        raise ValueError("a type or scope number is out of range")
    words = TextColumn.load(parts["words"], parts["words_offsets"], "words").tolist()
    flat = parts["tokens"]
    offsets = check_offsets(parts["token_offsets"], int(flat.size), "tokens")
    if flat.dtype != np.int32 or len(offsets) != count + 1 or (flat.size and not (
            0 <= int(flat.min()) and int(flat.max()) < len(words))):
        raise ValueError("the token numbers do not fit the words or the slots")
    main_size, vocab_size = int(header["main_size"]), int(header["vocab_size"])
    if not 0 <= main_size <= count or not 0 <= vocab_size <= len(words) or len(set(words)) != len(words):
        raise ValueError("the sizes of main and of the vocabulary do not fit")
    model, df = _model(parts, words[:vocab_size], main_size) if main_size else (None, {})
    avgdl = float(header["avgdl"])
    if not avgdl > 0:
        raise ValueError("the average document length is not positive")
    state = IndexState(ids, TokenTable(words, flat, offsets, main_size), arrays, scopes, main_size, model, df, avgdl,
                       K1, B)
    unsettled = {str(memory_id): int(n) for memory_id, n in dict(header["unsettled"]).items() if int(n) > 0}
    seen = int(header["seen"])
    if seen < 0:
        raise ValueError("the feed position is negative")
    records = _records(parts, ids, arrays["_alive"], [str(s) for s in header["record_scopes"]])
    return Loaded(KeywordIndex.restored(state), records, seen, unsettled,
                  _vectors(parts, ids, parts["record_slots"], bool(header.get("vectors_complete"))), header)


def _vectors(parts: Any, ids: list[str], record_slots: np.ndarray, complete: bool) -> SavedVectors | None:
    """The saved vectors, when the file has them: each of a saved record, finite, all of one dimension."""
    if "vectors" not in parts.files:
        return None
    slots, matrix = parts["vector_slots"], parts["vectors"]
    if (slots.dtype != np.int32 or matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != slots.size
            or not np.isin(slots, record_slots).all() or np.unique(slots).size != slots.size
            or not np.isfinite(matrix).all()):
        raise ValueError("the vectors do not fit the records")
    return SavedVectors([ids[slot] for slot in slots.tolist()], matrix, complete and slots.size == record_slots.size)


def _model(parts: Any, vocab: list[str], main_size: int) -> tuple[Any, WordCounts]:
    """The BM25 model over the main slots, from its arrays (checked here first)."""
    data, indices, indptr, df = parts["bm25_data"], parts["bm25_indices"], parts["bm25_indptr"], parts["df"]
    check_offsets(indptr, int(data.size), "bm25")
    # bm25s numbers its empty word "" after building the matrix, so indptr may stop one short of the vocabulary
    if (not 1 <= indptr.size <= len(vocab) + 1 or indices.shape != data.shape or df.shape != (len(vocab),)
            or data.dtype != np.float32 or indices.dtype.kind not in "iu"
            or (indices.size and not (0 <= int(indices.min()) and int(indices.max()) < main_size))):
        raise ValueError("the BM25 arrays do not fit together")
    model = LoadedBM25(vocab, data, indices, indptr, main_size)
    return model, WordCounts(model.vocab_dict, df)


def _records(parts: Any, ids: list[str], alive: np.ndarray, scope_names: list[str]) -> RecordTable:
    slots, types, scopes = parts["record_slots"], parts["record_types"], parts["record_scope"]
    if slots.dtype != np.int32 or types.dtype != np.int8 or scopes.dtype != np.int32 or (slots.size and not (
            0 <= int(slots.min()) and int(slots.max()) < len(ids) and bool(alive[slots].all()))):
        raise ValueError("a record's slot is not a live slot")
    columns = [TextColumn.load(parts[name], parts[f"{name}_offsets"], name)
               for name in ("record_documents", "record_superseded_by", "record_fields")]
    return RecordTable([ids[slot] for slot in slots.tolist()], columns[0], types, scopes, scope_names, columns[1],
                       columns[2])
