"""scripts/bench.py end to end at a small size: every figure is produced and is coherent. Speed itself is
printed by the script, never asserted here."""

import importlib.util
import json
import math
import sys

import pytest

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("bench", REPO / "scripts" / "bench.py")
bench = importlib.util.module_from_spec(spec)
sys.modules["bench"] = bench  # dataclasses look their module up while the class is built
spec.loader.exec_module(bench)


def _ordered(percentiles):
    return 0 < percentiles["p50"] <= percentiles["p95"] <= percentiles["p99"]


def test_bench_reports_every_figure(capsys):
    assert bench.main(["--n", "400", "--queries", "20", "--users", "2", "--sessions", "10", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["memories"] == 400 and report["users"] == 2 and report["queries"] == 20
    assert 0 < report["superseded"] < 400
    curve = report["ingest"]["per_second_by_tenth"]  # progress comes per batch of 256: two points here
    assert report["ingest"]["per_second"] > 0 and curve and all(rate > 0 for rate in curve)
    for key in ("search_ms", "search_without_embedding_ms", "embed_query_ms", "build_context_ms",
                "chroma_filtered_query_ms"):
        assert _ordered(report[key]), key
    assert report["search_without_embedding_by_filter_ms"]
    assert report["peak_rss_mb"] > 0 and report["ingest"]["peak_rss_mb"] > 0 and report["disk_bytes_per_memory"] > 0
    assert 0 < report["first_search_after_open_s"] <= report["warm_after_open_s"]
    tokens = report["tokens"]
    assert 0 < tokens["injected_long_term_mean"] <= tokens["long_term_share"] < tokens["full_history_per_user"]
    startup = report["startup"]
    assert all(math.isfinite(startup[key]) and startup[key] > 0 for key in ("help_s", "chat_prompt_s",
                                                                            "chat_first_turn_s",
                                                                            "chat_peak_rss_mb"))


def test_bench_synthetic_corpus_is_deterministic_and_varied():
    first = bench.synthetic_corpus(2000, users=3, sessions=50, seed=7)
    assert first == bench.synthetic_corpus(2000, users=3, sessions=50, seed=7)
    assert {r.type for r in first} == {"fact", "preference", "instruction", "conclusion"}
    assert {r.user_id for r in first} == {"user-0", "user-1", "user-2"}
    session_scoped = sum(r.scope != "global" for r in first)
    assert 0.2 < session_scoped / len(first) < 0.4
    superseded = [r for r in first if r.superseded]
    assert 0.05 < len(superseded) / len(first) < 0.15
    by_id = {r.id: r for r in first}
    assert all(by_id[r.superseded_by].user_id == r.user_id and by_id[r.superseded_by].type == r.type
               for r in superseded)


@pytest.mark.parametrize("argv", [["--n", "0"], ["--queries", "-1"], ["--k", "0"]])
def test_bench_refuses_bad_sizes(argv, capsys):
    assert bench.main(argv) == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_synthesized_vectors_are_unit_neighbours_of_the_real_ones():
    import numpy as np
    from bench_targets import NEIGHBOUR_COSINE, SynthesizedEmbedder

    rng = np.random.default_rng(0)
    pool = rng.normal(size=(50, 384)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    filler = SynthesizedEmbedder(object(), pool, seed=1)
    vectors = filler.embed_documents(["a"] * 200)
    assert vectors.shape == (200, 384) and vectors.dtype == np.float32 and filler.synthesized == 200
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    nearest = (vectors @ pool.T).max(axis=1)  # each one's cosine with the real vector it came from
    assert abs(float(nearest.mean()) - NEIGHBOUR_COSINE) < 0.05


def test_targets_compare_each_figure_with_its_bound():
    report = {"ingest": {"ratio_to_model": 0.9}, "search_ms": {"p95": 30.0}, "embed_query_ms": {"p50": 10.0},
              "new_process": {"first_search_s": 2.5}, "small_store_cli": {"cached_median_s": 1.2}}
    verdicts = {name: target["met"] for name, target in bench.targets(report).items()}
    assert verdicts == {"a_ingest_ratio_to_model": True, "b_search_p95_over_query_embedding": False,
                        "c_first_search_new_process_s": False, "d_vecmem_search_small_store_s": True}
