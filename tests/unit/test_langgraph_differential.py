"""VecmemStore against LangGraph's own InMemoryStore, differentially: random sequences of put, delete, get,
search, list_namespaces and batches of them go to both stores, and every read must give the same answer:

* get: the same item (namespace, key, value), or None from both;
* search: the same items with the same values under the prefix and filter, exactly, when the page holds them
  all; a page of them otherwise (as many, each one of them: the two stores order items differently). With a
  query the set is compared the same way (the reference, without an index, ignores the query); ranking is
  scored apart: when an item whose whole indexed text is the query is under the prefix, vecmem ranks such an
  item first;
* list_namespaces: the same list, exactly (prefix and suffix patterns with ``*``, max_depth, limit, offset).

Labels and keys include what vecmem's ids refuse (spaces, Cyrillic, ``@``, ``*``, the reserved ``global``, an
empty key, a key with a dot), values what a memory may not hold raw (C1 controls). Two quirks of the reference
are stepped around, not copied: a namespace stays listed in it once emptied or merely read (its items dict is a
defaultdict), so its empty namespaces are dropped before each comparison; and a comparison filter (``$gt``) on a
field an item lacks raises there, so every value has the compared field ``n``.

The figures (sequences, operations, mismatches, rankings checked) are tallied for the end of the run;
``VECMEM_LANGGRAPH_EXAMPLES`` runs more sequences (default 40 of 10 to 40 steps, a step an operation or a batch;
a quarter as many on embedded Chroma, a slow test).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore as ReferenceStore

from tests.conftest import Clock, FakeEmbedder
from tests.tally import count
from vecmem import MemoryBank, Settings, VecmemStore
from vecmem.storage.memory import InMemoryStore

EXAMPLES = int(os.environ.get("VECMEM_LANGGRAPH_EXAMPLES", "40"))
LABELS = ("a", "b c", "global", "ключ", "x@y", "*")
KEYS = ("k1", "k.2", "", "ключ 3")
WORDS = ("apple", "river", "stone", "cloud", "otter", "heron", "violin", "garden", "copper", "lantern")
TAGS = ("red", "blue")
INDEXES = (None, False, ["text"], ["text", "tag"])  # None: the store's fields, ["text"]
ALL = 10**6

namespaces = st.sampled_from((2, 1, 2, 3)).flatmap(
    lambda depth: st.tuples(*[st.sampled_from(LABELS)] * depth))  # mostly two labels: a user and a session
prefixes = st.lists(st.sampled_from(LABELS), min_size=0, max_size=2).map(tuple)
patterns = st.none() | st.lists(st.sampled_from((*LABELS[:3], "*")), min_size=1, max_size=2).map(tuple)
# three words in one order: the fake embedder and BM25 see a text as a bag of words, so "river apple stone" would be
# the query "apple river stone" itself to them, and the ranking check could not tell them apart
texts = st.lists(st.sampled_from(WORDS), min_size=3, max_size=3, unique=True).map(lambda words: " ".join(sorted(words)))
values = st.fixed_dictionaries(
    {"text": texts, "n": st.integers(0, 9), "tag": st.sampled_from(TAGS)},
    optional={"meta": st.fixed_dictionaries({"c": st.sampled_from(("x", "y\x85"))}), "pair": st.just([1, 2])},
)
filters = st.none() | st.sampled_from((
    {"tag": "red"}, {"n": {"$gt": 4}}, {"n": {"$lte": 2}, "tag": "blue"}, {"n": {"$ne": 3}}, {"n": 4},
    {"meta": {"c": "x"}}, {"pair": [1, 2]}, {"missing": None},
))


def _item(item) -> tuple | None:
    return None if item is None else (tuple(item.namespace), item.key, json.dumps(item.value, sort_keys=True))


class Run:
    """One sequence: both stores, what was put (for the ranking check) and the mismatches found."""

    def __init__(self, home: Path, *, chroma: bool) -> None:
        clock = Clock()
        store = None if chroma else InMemoryStore(model_name="fake-hash-64")  # None: embedded Chroma in home
        self.bank = MemoryBank(Settings(home=home), embedder=FakeEmbedder(), clock=clock, store=store)
        self.ours = VecmemStore(self.bank, fields=["text"], clock=clock)
        self.reference = ReferenceStore()
        self.exact: dict[tuple, str] = {}  # (namespace, key) -> its text, for items indexed by the text alone
        self.mismatches: list[str] = []
        self.rankings = self.misranked = 0

    def expect(self, op) -> Any:
        """What the reference says a read gives, before the batch holding it writes anything."""
        reference = self.reference
        for namespace in [ns for ns, items in reference._data.items() if not items]:  # the emptied-namespace quirk
            del reference._data[namespace]
        if isinstance(op, GetOp):
            return _item(reference.get(op.namespace, op.key))
        if isinstance(op, SearchOp):
            return [_item(i) for i in reference.search(op.namespace_prefix, filter=op.filter, limit=ALL)]
        return reference.batch([op])[0]

    def check(self, op, expected: Any, got: Any) -> None:
        if isinstance(op, GetOp):
            found = _item(got)
            if found != expected:
                self.mismatches.append(f"{op}: {found} != {expected}")
        elif isinstance(op, SearchOp):
            found = [_item(i) for i in got]
            page = expected[op.offset:op.offset + op.limit]
            whole = op.offset == 0 and op.limit >= len(expected)
            if (sorted(found) != sorted(page) if whole else
                    len(found) != len(page) or len(set(found)) != len(found) or not set(found) <= set(expected)):
                self.mismatches.append(f"{op}: {found} != {page}")
            if op.query and op.offset == 0 and op.limit and got:
                self._check_ranking(op, expected, got)
        elif got != expected:
            self.mismatches.append(f"{op}: {got} != {expected}")

    def _check_ranking(self, op: SearchOp, expected: list[tuple], got: list) -> None:
        """Among the items the search may return, those indexed by a text equal to the query: one comes first."""
        exact = [(namespace, key) for namespace, key, _ in expected if self.exact.get((namespace, key)) == op.query]
        if exact:
            self.rankings += 1
            if (tuple(got[0].namespace), got[0].key) not in exact:
                self.misranked += 1
                self.mismatches.append(f"{op}: ranked {got[0].namespace, got[0].key} first, not one of {exact}")

    def put(self, op: PutOp) -> None:
        item = (tuple(op.namespace), op.key)
        self.exact.pop(item, None)
        if op.value is not None and op.index in (None, ["text"]):
            self.exact[item] = op.value["text"]


def _draw_op(data, run: Run, *, kind: str | None = None, in_batch: bool = False):
    stored = [(tuple(item.namespace), item.key) for item in run.reference.search((), limit=ALL)]
    kind = kind or data.draw(st.sampled_from(("put", "put", "delete", "get", "search", "search", "search", "list")
                                             + (() if in_batch else ("batch",))))
    if kind in ("put", "delete", "get"):
        where = data.draw(st.sampled_from(("stored", "beside", "new"))) if stored else "new"
        if where == "new":
            namespace, key = data.draw(namespaces), data.draw(st.sampled_from(KEYS))
        else:  # a stored item, or another key of its namespace (or one label deeper): namespaces fill up
            namespace, key = data.draw(st.sampled_from(stored))
            if where == "beside":
                namespace = namespace + data.draw(st.sampled_from(((), (), *((label,) for label in LABELS[:2]))))
                key = data.draw(st.sampled_from(KEYS))
        if kind == "get":
            return GetOp(namespace, key)
        value = None if kind == "delete" else data.draw(values)
        return PutOp(namespace, key, value, index=data.draw(st.sampled_from(INDEXES)))
    if kind == "search":
        known = sorted(set(run.exact.values()))
        query = data.draw(st.sampled_from(known) if known and data.draw(st.booleans()) else
                          st.none() | st.just("") | texts)
        if stored and data.draw(st.booleans()):  # a prefix of a stored namespace, often the namespace itself
            namespace, _ = data.draw(st.sampled_from(stored))
            prefix = namespace[:data.draw(st.sampled_from((len(namespace), *range(len(namespace)))))]
        else:
            prefix = data.draw(prefixes)
        return SearchOp(prefix, data.draw(filters), data.draw(st.integers(0, 6)),
                        data.draw(st.just(0) | st.integers(0, 3)), query)
    if kind == "list":
        conditions = tuple(MatchCondition(match_type, path) for match_type, path
                           in (("prefix", data.draw(patterns)), ("suffix", data.draw(patterns))) if path)
        return ListNamespacesOp(conditions, data.draw(st.none() | st.integers(1, 3)), data.draw(st.integers(1, 8)),
                                data.draw(st.integers(0, 2)))
    return [_draw_op(data, run, in_batch=True) for _ in range(data.draw(st.integers(2, 4)))]


RUN = settings(deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(RUN, max_examples=EXAMPLES)
@given(st.data())
def test_vecmem_store_answers_as_langgraphs_in_memory_store(data):
    _compare_a_sequence(data, chroma=False)


@pytest.mark.chroma
@settings(RUN, max_examples=max(EXAMPLES // 4, 1))
@given(st.data())
def test_on_embedded_chroma_too(data):
    _compare_a_sequence(data, chroma=True)


def _compare_a_sequence(data, *, chroma: bool) -> None:
    with tempfile.TemporaryDirectory() as home:
        run = Run(Path(home), chroma=chroma)
        try:
            steps = data.draw(st.integers(10, 40))
            operations = 0
            for step in range(steps):
                drawn = _draw_op(data, run, kind="put" if step < 6 else None)  # a few items to begin with
                batch = drawn if isinstance(drawn, list) else [drawn]
                operations += len(batch)
                expected = [None if isinstance(op, PutOp) else run.expect(op) for op in batch]
                run.reference.batch([op for op in batch if isinstance(op, PutOp)])
                got = run.ours.batch(batch) if isinstance(drawn, list) else [_single(run.ours, drawn)]
                for op, want, answer in zip(batch, expected, got, strict=True):
                    if isinstance(op, PutOp):
                        run.put(op)
                    else:
                        run.check(op, want, answer)
        finally:
            run.bank.close()
    where = "embedded Chroma" if chroma else "in-memory store"
    count(f"langgraph differential ({where}): sequences")
    count(f"langgraph differential ({where}): operations", operations)
    count(f"langgraph differential ({where}): mismatches", len(run.mismatches))
    count(f"langgraph differential ({where}): rankings checked", run.rankings)
    count(f"langgraph differential ({where}): rankings wrong", run.misranked)
    assert run.mismatches == []


def _single(store: VecmemStore, op) -> Any:
    """One op through the method an agent calls (put, delete, get, search, list_namespaces)."""
    if isinstance(op, PutOp):
        if op.value is None:
            return store.delete(op.namespace, op.key)
        return store.put(op.namespace, op.key, op.value, index=op.index)
    if isinstance(op, GetOp):
        return store.get(op.namespace, op.key)
    if isinstance(op, SearchOp):
        return store.search(op.namespace_prefix, query=op.query, filter=op.filter, limit=op.limit, offset=op.offset)
    conditions = {condition.match_type: condition.path for condition in op.match_conditions}
    return store.list_namespaces(prefix=conditions.get("prefix"), suffix=conditions.get("suffix"),
                                 max_depth=op.max_depth, limit=op.limit, offset=op.offset)
