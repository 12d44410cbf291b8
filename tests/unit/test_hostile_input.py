"""Hostile input, fuzzed: whatever a caller passes to the public API, the answer is a result or a VecmemError
with a message (never another exception), and a refused call leaves the store exactly as it was.

``VECMEM_FUZZ_EXAMPLES`` runs more inputs per operation (default 120).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import FakeEmbedder
from tests.tally import count
from vecmem import MemoryBank, Settings
from vecmem.errors import VecmemError
from vecmem.storage.memory import InMemoryStore

EXAMPLES = int(os.environ.get("VECMEM_FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

NASTY_TEXT = st.sampled_from([
    "", " ", "\t\n  ", "x" * 1_000_000, "\ud800", "a\udfffb", "nul\x00byte", "bell\x07", "\x1b[31mred",
    '{"$ne": null}', "$ne", "$and", "{'$gt': 0}", "'; DROP TABLE embeddings; --", "🦦" * 3000, "\u202eevil",
    "ok memory", "用户喜欢乌龙茶", "\ufeffbom",
])
TEXT = NASTY_TEXT | st.text(max_size=300)
NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**12, 10**12), st.booleans(),
                   st.none(), st.text(max_size=5), st.just([0.5]), st.just({"$ne": 1}))
IDENTIFIER = st.one_of(st.none(), NASTY_TEXT, st.text(max_size=140), st.just({"$ne": "x"}), st.just(["s1"]),
                       st.just("session-1"))
TYPES = st.one_of(st.none(), st.sampled_from(["fact", "preference", "instruction", "conclusion", "FACT", "secret",
                                              "", "$in"]), st.just({"$in": ["fact"]}), st.integers())
TAGS = st.one_of(st.just(()), st.lists(TEXT, max_size=40), st.just("not-a-list"), st.just([{"$ne": 1}]),
                 st.just([1, 2]))


@pytest.fixture(scope="module", params=["memory", pytest.param("embedded", marks=pytest.mark.chroma)])
def bank(request):
    """One bank per store kind for the module: the in-memory store, and embedded Chroma (what hostile text does
    to Chroma's where-filters and SQLite is the point of running there too)."""
    folder = Path(tempfile.mkdtemp(prefix="vecmem-fuzz-"))
    embedder = FakeEmbedder()
    store = InMemoryStore(model_name=embedder.name) if request.param == "memory" else None
    with MemoryBank(Settings(home=folder / "home"), embedder=embedder, store=store) as opened:
        opened.add("the user keeps otters", memory_id="keep-1")
        opened.add("the user speaks Chinese", memory_id="keep-2", session_id="s1")
        yield opened
    shutil.rmtree(folder, ignore_errors=True)


def _snapshot(bank: MemoryBank) -> list[tuple]:
    return sorted((r.user_id, r.id, r.content, r.type, r.importance, r.scope, r.tags, r.superseded_by)
                  for r in bank.export())


def _attempt(bank: MemoryBank, operation, *, writes: bool) -> object | None:
    """Run the operation; a refusal must be a VecmemError with a message and change nothing."""
    before = _snapshot(bank)
    count("hostile input: inputs fuzzed")
    try:
        return operation()
    except VecmemError as error:
        assert str(error).strip(), "an error without a message"
        count("hostile input: refused with a clear error")
        after = _snapshot(bank)
        count("hostile input: refusals that changed the store", int(after != before))
        assert after == before, "a refused call changed the store"
        return None
    finally:
        if not writes:
            assert _snapshot(bank) == before, "a read changed the store"


@FUZZ
@given(content=TEXT, importance=NUMBER, memory_type=TYPES, tags=TAGS, session=IDENTIFIER, memory_id=IDENTIFIER,
       confidence=NUMBER)
def test_add(bank, content, importance, memory_type, tags, session, memory_id, confidence):
    record = _attempt(bank, lambda: bank.add(content, importance=importance, memory_type=memory_type, tags=tags,
                                             session_id=session, memory_id=memory_id, confidence=confidence),
                      writes=True)
    if record is not None:  # what was accepted was stored as valid, finite, normalised values
        stored = bank.get(record.id)
        assert stored.content == stored.content.strip() and stored.content
        assert 0.0 <= stored.importance <= 1.0 and math.isfinite(stored.importance)
        assert stored.type in ("fact", "preference", "instruction", "conclusion")
        assert re.fullmatch(r"[A-Za-z0-9._:@-]{1,128}", stored.id)  # every route can name what was created
        bank.forget(record.id)


@FUZZ
@given(query=TEXT, k=NUMBER, session=IDENTIFIER, types=st.one_of(TYPES, st.lists(TYPES, max_size=3)))
def test_search_and_build_context(bank, query, k, session, types):
    hits = _attempt(bank, lambda: bank.search(query, k, session_id=session, types=types, record_access=False),
                    writes=False)
    if hits is not None:
        assert all(hit.record.user_id == "default" for hit in hits)
        assert all(hit.record.scope in ("global", session) for hit in hits)
    _attempt(bank, lambda: bank.build_context(query, session_id=session), writes=False)


@FUZZ
@given(memory_id=IDENTIFIER, content=st.none() | TEXT, importance=st.none() | NUMBER, memory_type=TYPES)
def test_update(bank, memory_id, content, importance, memory_type):
    target = "keep-1" if memory_id is None else memory_id
    before = bank.get("keep-1")
    _attempt(bank, lambda: bank.update(target, content=content, importance=importance, memory_type=memory_type),
             writes=True)
    after = bank.get("keep-1")
    if after != before:  # an accepted update of keep-1: put it back for the next example
        bank.update("keep-1", content=before.content, importance=before.importance, memory_type=before.type)


LINE_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["$ne", "$in", "a"]), inner,
                                                                   max_size=2),
    max_leaves=5,
)
LINE = st.one_of(
    st.just("{not json"), st.just("[1, 2]"), st.just('"just a string"'), st.just("{}"), st.just("\ufeff{}"),
    st.fixed_dictionaries({"content": TEXT}, optional={"importance": LINE_VALUES, "type": LINE_VALUES,
                                                        "tags": LINE_VALUES, "session_id": LINE_VALUES,
                                                        "id": LINE_VALUES, "created_at": LINE_VALUES,
                                                        "superseded_by": LINE_VALUES}).map(
        lambda data: json.dumps(data, ensure_ascii=False)),
)


@FUZZ
@given(lines=st.lists(LINE, min_size=1, max_size=8))
def test_import_reports_bad_lines_by_number_and_imports_the_good_ones(bank, lines):
    good = [json.dumps({"content": f"imported good line {i}", "id": f"good-{i}"}) for i in range(2)]
    mixed = [good[0], *lines, good[1]]
    count("hostile input: import lines fuzzed", len(lines))
    report = bank.import_jsonl(mixed, user_id="importer", overwrite=True)
    assert {number for number, _ in report.errors} <= set(range(2, len(mixed)))  # the good lines never refused
    assert all(message.strip() for _, message in report.errors)
    stored = {r.id: r for r in bank.export(user_id="importer")}
    assert {"good-0", "good-1"} <= set(stored)
    assert report.added + len(report.errors) + report.skipped >= len(mixed) - sum(1 for line in mixed
                                                                                   if not line.strip())
    for record in stored.values():  # no partial record: everything stored is whole and valid
        assert record.content.strip() and 0.0 <= record.importance <= 1.0
    for memory_id in stored:
        bank.forget(memory_id, user_id="importer")


@pytest.mark.parametrize("types", [0, 1.5, {"$in": ["fact"]}, [["fact"]], [{"$ne": 1}], object()])
def test_types_that_are_not_type_names_are_refused_clearly(bank, types):
    with pytest.raises(VecmemError, match="types"):
        bank.search("otters", 3, types=types)
    with pytest.raises(VecmemError, match="types"):
        bank.list_memories(types=types)
