"""Embeddings from an OpenAI-compatible endpoint (VECMEM_EMBED_MODEL=openai:<name>), against a real HTTP server on
127.0.0.1 (tests/embedding_server.py) that serves the fake embedder's vectors: batching, one request per distinct
text, retries of a 429 or 5xx only, errors in one sentence without the key, the model and dimension recorded
like a local model's so a change is refused and `reindex` moves a store over."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import FakeEmbedder
from tests.embedding_server import ScriptedEmbeddingServer
from vecmem import EmbeddingMismatchError, MemoryBank, Settings
from vecmem.errors import EmbeddingError
from vecmem.retrieval.embedders import embedder_for
from vecmem.retrieval.endpoint_embedder import EndpointEmbedder

FAKE = FakeEmbedder()


@pytest.fixture
def server():
    with ScriptedEmbeddingServer(FAKE.embed_documents) as running:
        yield running


def test_vectors_are_the_servers_in_the_callers_order_batched_and_each_text_sent_once(server):
    embedder = EndpointEmbedder("fake-model", base_url=server.base_url, batch_size=2)
    texts = ["green tea", "oolong", "green tea", "jasmine", "pu-erh"]
    vectors = embedder.embed_documents(texts)
    assert np.array_equal(vectors, FAKE.embed_documents(texts))  # normalised already: kept bit for bit
    assert [request["input"] for request in server.requests] == [["green tea", "oolong"], ["jasmine", "pu-erh"]]
    assert server.requests[0]["model"] == "fake-model"
    assert np.array_equal(embedder.embed_query("oolong"), FAKE.embed_query("oolong"))
    assert embedder.dimension == 64 and embedder.name == "openai:fake-model"


def test_vectors_a_server_did_not_normalise_are(tmp_path):
    with ScriptedEmbeddingServer(lambda texts: 3.0 * FAKE.embed_documents(texts)) as server:
        vector = EndpointEmbedder("m", base_url=server.base_url).embed_query("tea")
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6


def test_a_429_or_5xx_is_tried_again_and_a_refusal_is_one_sentence_without_the_key(server):
    embedder = EndpointEmbedder("m", base_url=server.base_url, api_key="sk-secret-key", retries=2)
    server.fail_next(429)
    server.fail_next(503)
    assert embedder.embed_query("tea").shape == (64,)
    assert len(server.requests) == 3 and server.keys[-1] == "Bearer sk-secret-key"
    server.fail_next(401)
    with pytest.raises(EmbeddingError) as refused:
        embedder.embed_query("tea")
    assert "answered 401: scripted 401" in str(refused.value) and "sk-secret" not in str(refused.value)
    assert len(server.requests) == 4  # a 401 is not tried again
    server.fail_next(500, times=3)
    with pytest.raises(EmbeddingError, match="answered 500"):
        embedder.embed_query("tea")  # tried 1 + 2 times, then given up


def test_a_timeout_is_not_tried_again_and_a_broken_answer_is_an_error(server):
    embedder = EndpointEmbedder("m", base_url=server.base_url, timeout=0.5, retries=3)
    server.fail_next(delay=1.0)
    with pytest.raises(EmbeddingError, match=r"did not answer within 0\.5 s"):
        embedder.embed_query("tea")
    assert len(server.requests) == 1
    server.fail_next(200, raw='{"data": [{"index": 0, "embedding": "not a vector"}]}')
    with pytest.raises(EmbeddingError, match="cannot read"):
        embedder.embed_query("tea")
    server.fail_next(200, raw='{"data": []}')
    with pytest.raises(EmbeddingError, match="0 vectors for 1 texts"):
        embedder.embed_query("tea")


def test_an_unreachable_endpoint_is_one_sentence():
    embedder = EndpointEmbedder("m", base_url="http://127.0.0.1:9/v1", timeout=2, retries=0)
    with pytest.raises(EmbeddingError, match=r"cannot reach the embedding endpoint http://127\.0\.0\.1:9/v1/embeddings"):
        embedder.embed_query("tea")


def test_settings_choose_the_endpoint_and_its_defaults(tmp_path):
    chosen = embedder_for(Settings(home=tmp_path, embed_model="openai:bge-m3", openai_base_url="http://ollama:11434/v1",
                                   openai_api_key="k"))
    assert isinstance(chosen, EndpointEmbedder) and chosen.name == "openai:bge-m3"
    assert chosen._url == "http://ollama:11434/v1/embeddings" and chosen._api_key == "k"
    own = embedder_for(Settings(home=tmp_path, embed_model="openai:x", openai_base_url="http://a:1/v1",
                                embed_base_url="http://b:2/v1"))
    assert own._url == "http://b:2/v1/embeddings"  # VECMEM_EMBED_BASE_URL before OPENAI_BASE_URL
    with pytest.raises(EmbeddingError, match="name the endpoint's model"):
        embedder_for(Settings(home=tmp_path, embed_model="openai: "))


def test_a_store_records_the_endpoints_model_refuses_another_and_reindex_moves_it(server, tmp_path, memory_stores):
    settings = Settings(home=tmp_path / "home", embed_model="openai:fake-model", embed_base_url=server.base_url)
    store = memory_stores.client(settings.home, "openai:fake-model")
    bank = MemoryBank(settings, store=store)
    memory = bank.add("The user drinks oolong")
    assert bank.search("oolong", 1)[0].id == memory.id
    assert store.stored_model() == ("openai:fake-model", 64)
    with pytest.raises(EmbeddingMismatchError):
        MemoryBank(settings, embedder=FakeEmbedder("local-model", 32),
                   store=memory_stores.client(settings.home, "local-model"))
    local = MemoryBank(settings, embedder=FakeEmbedder("local-model", 32), verify_model=False,
                       store=memory_stores.client(settings.home, "local-model"))
    local.reindex()
    assert local.search("oolong", 1)[0].id == memory.id
