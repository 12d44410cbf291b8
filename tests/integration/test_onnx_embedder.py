"""The fast ONNX path on the real bundled model: the same vectors as sentence-transformers' ONNX backend on the same
export, without importing torch, and a fall back to sentence-transformers for a pipeline it does not reproduce."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from vecmem import Settings
from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder
from vecmem.retrieval.embedding.onnx_runtime import read_plain_pipeline, session_options

LONG_ENGLISH = " ".join(["The user keeps a journal of every tea they brew, with the water temperature and steeping"
                         " time, and asks the agent to compare this week's notes with last month's."] * 12)
LONG_CHINESE = "用户每天早上喝绿茶，喜欢简洁的代码风格，不需要过多注释，周末常去公园散步。" * 20
TEXTS = [
    "tea",
    "write me a sleep function",
    "The user's cat is called Miso",
    "用户喜欢简洁的代码风格，不需要过多注释",
    "我明天要去北京出差，记得提醒我带伞",
    "混合 mixed 文本 text with numbers 12345 and punctuation!?",
    "Café naïve résumé — accents and a dash",
    "emoji 🍵 and tabs\tand\nnewlines",
    "   leading and trailing spaces   ",
    "special tokens typed in the text: [CLS] [SEP] [MASK] [PAD] [UNK]",
    "",
    "   ",
    LONG_ENGLISH,
    LONG_CHINESE,
]


@pytest.fixture(scope="module")
def export_folder(real_embedder):
    """The export the session's real embedder made (or found) in the default model cache."""
    folder = real_embedder._export_folder()
    assert folder is not None and (folder / "onnx" / "model.onnx").is_file()
    return folder


@pytest.fixture(scope="module")
def reference(export_folder):
    """sentence-transformers' own ONNX backend on that export, as vecmem loaded it before the fast path."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(export_folder), backend="onnx", device="cpu",
                               model_kwargs={"session_options": session_options()}, local_files_only=True)


@pytest.fixture(scope="module")
def fast_embedder(export_folder):
    embedder = SentenceTransformerEmbedder(cache_dir=Settings().model_cache)
    assert embedder.dimension == 384 and embedder.backend_used == "onnx"
    return embedder


def _encode(reference, texts, method):
    return getattr(reference, method)(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)


def test_the_bundled_model_takes_the_fast_path(export_folder, reference):
    spec = read_plain_pipeline(export_folder)
    assert spec is not None and spec.normalize
    assert spec.max_seq_length == reference.max_seq_length == 256
    assert len(reference.tokenizer(LONG_ENGLISH)["input_ids"]) > 256  # the long texts do get truncated
    assert len(reference.tokenizer(LONG_CHINESE)["input_ids"]) > 256


def test_batched_documents_match_sentence_transformers(fast_embedder, reference):
    fast = fast_embedder.embed_documents(TEXTS)
    assert fast.dtype == np.float32 and fast.shape == (len(TEXTS), 384)
    assert np.abs(fast - _encode(reference, TEXTS, "encode_document")).max() < 1e-5
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)


def test_single_queries_match_sentence_transformers(fast_embedder, reference):
    for text in TEXTS:
        expected = _encode(reference, [text], "encode_query")[0]
        assert np.abs(fast_embedder.embed_query(text) - expected).max() < 1e-5, text[:30]
    assert np.abs(fast_embedder.embed_queries(TEXTS[:4]) - _encode(reference, TEXTS[:4], "encode_query")).max() < 1e-5


def test_large_batches_match_across_batch_boundaries(fast_embedder, reference):
    texts = [f"{TEXTS[index % len(TEXTS)]} #{index}" for index in range(150)]  # three batches of mixed lengths
    assert np.abs(fast_embedder.embed_documents(texts) - _encode(reference, texts, "encode_document")).max() < 1e-5


def test_the_query_and_ingest_threads_can_embed_at_once(fast_embedder):
    documents = TEXTS * 6
    expected_documents = fast_embedder.embed_documents(documents)
    expected_queries = [fast_embedder.embed_query(text) for text in TEXTS]
    failures: list[str] = []

    def ingest() -> None:
        for _ in range(5):
            if np.abs(fast_embedder.embed_documents(documents) - expected_documents).max() > 1e-6:
                failures.append("documents")

    def search() -> None:
        for _ in range(5):
            for text, expected in zip(TEXTS, expected_queries, strict=True):
                if np.abs(fast_embedder.embed_query(text) - expected).max() > 1e-6:
                    failures.append(text)

    threads = [threading.Thread(target=ingest), threading.Thread(target=search), threading.Thread(target=search)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == [] and not any(thread.is_alive() for thread in threads)


def test_a_new_process_embeds_without_importing_torch(export_folder):
    code = (
        "import sys; from vecmem import Settings; "
        "from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder; "
        "e = SentenceTransformerEmbedder(cache_dir=Settings().model_cache); "
        "assert e.embed_query('tea').shape == (384,) and e.backend_used == 'onnx'; "
        "heavy = {'torch', 'transformers', 'sentence_transformers', 'optimum'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_a_pipeline_it_does_not_reproduce_goes_through_sentence_transformers(export_folder, fast_embedder, tmp_path):
    """CLS pooling instead of mean: the fast path would get it wrong, so the export must load the slow way."""
    from sentence_transformers import SentenceTransformer

    embedder = SentenceTransformerEmbedder(cache_dir=tmp_path)
    folder = embedder._export_folder()
    shutil.copytree(export_folder, folder)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 384, "pooling_mode": "cls", "include_prompt": True}), encoding="utf-8")
    assert read_plain_pipeline(folder) is None
    cls_model = SentenceTransformer(str(folder), backend="onnx", device="cpu", local_files_only=True)
    expected = _encode(cls_model, TEXTS[:3], "encode_document")
    assert np.abs(expected - fast_embedder.embed_documents(TEXTS[:3])).max() > 1e-2  # mean pooling would differ
    assert np.abs(embedder.embed_documents(TEXTS[:3]) - expected).max() < 1e-5
    assert embedder.backend_used == "onnx"
