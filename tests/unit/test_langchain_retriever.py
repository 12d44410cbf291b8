"""VecmemRetriever: langchain-tests' standard retriever suite, then what the suite does not ask (scope, the
documents' metadata, per-call arguments, bad input, ainvoke off the event loop)."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from tests.unit.test_aio import GatedEmbedder
from vecmem import InvalidInputError, VecmemRetriever

DRINKS = ("The user drinks green tea every morning", "The user drinks black coffee at work",
          "The user never drinks soda", "The user drinks water on runs", "The user likes hot chocolate in winter")


class TestStandardRetrieverSuite(RetrieversIntegrationTests):
    """langchain-tests' own tests, on a bank of five memories (the in-memory store and the fake embedder)."""

    @pytest.fixture(autouse=True)
    def _memories(self, make_bank) -> None:
        self.bank = make_bank()
        for text in DRINKS:
            self.bank.add(text)

    @property
    def retriever_constructor(self) -> type[VecmemRetriever]:
        return VecmemRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"bank": self.bank, "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "what does the user drink?"


@pytest.fixture
def retriever(bank):
    bank.add("The user drinks green tea every morning", tags=["tea"], memory_type="preference")
    bank.add("The user rides a red bicycle")
    bank.add("On this trip the user drinks only bottled water", session_id="trip")
    bank.add("Bob drinks green tea too", user_id="bob")
    return VecmemRetriever(bank=bank, k=2)


def test_documents_are_the_banks_hits_with_their_scores(retriever, bank):
    documents = retriever.invoke("green tea")
    hits = bank.search("green tea", k=2, record_access=False)
    assert [(d.id, d.page_content) for d in documents] == [(h.id, h.content) for h in hits]
    first = documents[0].metadata
    assert first["score"] == pytest.approx(hits[0].score) and first["type"] == "preference"
    assert first["tags"] == ["tea"] and first["session_id"] is None and first["source"] == "manual"
    assert set(first) >= {"similarity", "recency", "importance", "dense", "keyword", "confidence", "created_at"}


def test_scope_and_isolation_are_vecmems(retriever):
    assert "bottled water" not in " ".join(d.page_content for d in retriever.invoke("what does the user drink", k=5))
    in_trip = retriever.invoke("what does the user drink", k=5, session_id="trip")
    assert "On this trip the user drinks only bottled water" in [d.page_content for d in in_trip]
    assert [d.page_content for d in retriever.invoke("green tea", user_id="bob")] == ["Bob drinks green tea too"]
    assert [d.metadata["type"] for d in retriever.invoke("drinks", k=5, types=["preference"])] == ["preference"]


@pytest.mark.parametrize(("arguments", "field"), [
    ({"k": 0}, "k"), ({"k": True}, "k"), ({"session_id": "global"}, "session_id"), ({"user_id": " x"}, "user_id"),
    ({"types": ["opinion"]}, "types"),
])
def test_bad_arguments_are_refused_when_made_and_when_called(bank, arguments, field):
    with pytest.raises(InvalidInputError) as made:
        VecmemRetriever(bank=bank, **arguments)
    assert made.value.field == field
    with pytest.raises(InvalidInputError) as called:
        VecmemRetriever(bank=bank).invoke("tea", **arguments)
    assert called.value.field == field


def test_record_access_false_leaves_the_memories_untouched(retriever, bank):
    VecmemRetriever(bank=bank, record_access=False).invoke("green tea")
    assert all(record.access_count == 0 for record in bank.list_memories())
    retriever.invoke("green tea", k=1)
    assert sorted(record.access_count for record in bank.list_memories()) == [0, 0, 1]


async def test_ainvoke_searches_in_a_thread_while_the_loop_runs(make_bank):
    embedder = GatedEmbedder()
    bank = make_bank(embedder=embedder)
    bank.add("The user drinks green tea every morning", resolve=False)  # resolving would search, at the gate
    retrieving = asyncio.create_task(VecmemRetriever(bank=bank, k=1).ainvoke("green tea"))
    assert await asyncio.to_thread(embedder.waiting.wait, 30)
    await asyncio.sleep(0)
    assert not retrieving.done()  # the loop ran this line while the search waited in its thread
    embedder.gate.set()
    documents = await retrieving
    assert all(isinstance(d, Document) for d in documents)
    assert [d.page_content for d in documents] == ["The user drinks green tea every morning"]
