"""Recall and latency of a dedicated Chroma collection's HNSW index against the exact cosine scan.

    python scripts/bench_ann.py                                        # make bench-ann: 1,000 to 20,000
    python scripts/bench_ann.py --sizes 1000,6000,20000,50000,100000   # the figures behind DEDICATED_HNSW
    python scripts/bench_ann.py --builds 100x16,200x32 --ef-search 100,200,400

A user with ``VECMEM_DEDICATED_AT`` memories or more has Chroma collections of their own, searched by HNSW; a
search for k results asks each for ``max(4k, 20)`` neighbours. This measures what that costs in recall: for
each size and each HNSW setting, a collection is built as vecmem builds one (an embedded ``PersistentClient``
in a temporary folder, ``configuration={"hnsw": {...}}``, rows added in batches) and queried for 40 neighbours
(a k=10 search's candidates, distances only, as vecmem asks); reported are

- recall@10: the share of the exact cosine top 10 among the first 10 HNSW returned,
- recall@40: the share of the exact top 40 among the 40 HNSW returned,
- p50/p95: the latency of one such query, in ms, on a warm index;
- add s: the seconds spent adding the rows since the previous size (with the index built as they come).

**Vectors.** Real embeddings, by the configured model (``embedder_for(Settings.from_env())``), of the LoCoMo
dialogue turns (``<speaker> said, "<text>"``, 5,882 of them); the queries are the LoCoMo questions (a sample
of ``--queries``). The embeddings are cached in ``--cache`` (a temporary file by default, never in the repo).
Sizes up to the number of turns take the turns in a fixed shuffled order (each size contains the smaller).
**Sizes above that are partly synthetic**: each extra vector is a real turn's vector plus Gaussian noise,
renormalised, with the noise's standard deviation ``sqrt((1/c^2 - 1) / dimension)`` so that its cosine with
the turn it came from is about ``c`` = ``--neighbour-cosine`` (0.8; the printed header gives the mean
reached). The space keeps the real clusters, each a little denser; it is not a corpus of real memories.

**Settings.** ``--builds`` are (ef_construction x max_neighbors) pairs, fixed when a collection is created;
``--ef-search`` values are tried on each built collection in turn. Chroma fixes a collection's ef_search when
it loads the index into a process, so each ef_search is set with ``collection.modify`` and the index reloaded
(``clear_system_cache`` and a new client) before it is measured: the path an existing store takes.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import chromadb

from vecmem import Settings, embedder_for

DEFAULT_LOCOMO = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo10.json"
CANDIDATES = 40  # what a k=10 search asks each collection for: max(4 * 10, 20)
TOP = 10
_COLLECTION = "vecmem-bench-ann"
_TIE = 1e-5  # cosines this close count as equal (float32 rounding)
_BATCH = 5000  # rows per add(), well inside Chroma's max batch size


@dataclass(frozen=True)
class Build:
    """The settings fixed when a collection is created."""

    ef_construction: int
    max_neighbors: int

    @classmethod
    def parse(cls, text: str) -> Build:
        construction, neighbours = text.lower().split("x")
        return cls(int(construction), int(neighbours))

    def __str__(self) -> str:
        return f"{self.ef_construction}x{self.max_neighbors}"


@dataclass(frozen=True)
class Row:
    size: int
    build: Build
    ef_search: int
    recall_10: float
    recall_40: float
    p50_ms: float
    p95_ms: float
    build_s: float  # seconds spent adding rows to reach this size (the first ef_search of a build only)


# ---------------------------------------------------------------------------------------------------- vectors


def locomo_texts(path: Path) -> tuple[list[str], list[str]]:
    """(turns as vecmem stores a dialogue turn, questions) of every LoCoMo conversation."""
    turns: list[str] = []
    questions: list[str] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        for key in sorted((k for k in conversation if k.startswith("session_") and not k.endswith("date_time")),
                          key=lambda k: int(k.split("_")[1])):
            turns += [f'{turn["speaker"]} said, "{turn["text"]}"' for turn in conversation[key]]
        questions += [str(qa["question"]) for qa in sample["qa"]]
    return turns, questions


def embedded(path: Path, cache: Path) -> tuple[np.ndarray, np.ndarray, str]:
    """(turn vectors, question vectors, model name), from ``cache`` when it holds this model's vectors of this
    data, else embedded now and saved there."""
    embedder = embedder_for(Settings.from_env())
    turns, questions = locomo_texts(path)
    digest = hashlib.sha256("\n".join([embedder.name, *turns, *questions]).encode()).hexdigest()[:16]
    if cache.exists():
        with np.load(cache) as stored:
            if str(stored["digest"]) == digest:
                return stored["turns"], stored["questions"], embedder.name
    started = time.perf_counter()
    turn_vectors = np.asarray(embedder.embed_documents(turns), dtype=np.float32)
    question_vectors = np.asarray(embedder.embed_queries(questions), dtype=np.float32)
    print(f"embedded {len(turns)} turns and {len(questions)} questions with {embedder.name} in "
          f"{time.perf_counter() - started:.0f} s (cached in {cache})", file=sys.stderr)
    np.savez(cache, turns=turn_vectors, questions=question_vectors, digest=np.asarray(digest))
    return turn_vectors, question_vectors, embedder.name


def corpus(real: np.ndarray, size: int, neighbour_cosine: float, seed: int) -> tuple[np.ndarray, float | None]:
    """``size`` vectors: the real ones in a fixed shuffled order, then synthetic neighbours of random real ones
    (see the module docstring); the second value is the mean cosine of a synthetic vector with its source."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(real))
    vectors = real[order]
    extra = size - len(real)
    if extra <= 0:
        return vectors[:size], None
    sources = vectors[rng.integers(0, len(real), extra)]
    sigma = np.sqrt((1 / neighbour_cosine**2 - 1) / real.shape[1])
    noisy = sources + rng.normal(0.0, sigma, sources.shape).astype(np.float32)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    mean_cosine = float(np.mean(np.sum(noisy * sources, axis=1)))
    return np.vstack([vectors, noisy]).astype(np.float32), mean_cosine


def exact_top(vectors: np.ndarray, queries: np.ndarray, n: int) -> np.ndarray:
    """Row numbers of each query's ``n`` nearest vectors by cosine (all vectors are normalised), nearest first."""
    scores = queries @ vectors.T
    top = np.argpartition(-scores, n, axis=1)[:, :n]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


# ---------------------------------------------------------------------------------------------------- measuring


def open_fresh(folder: Path) -> Any:
    """The bench collection in a newly loaded client: Chroma reads ef_search when it loads an index."""
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    return chromadb.PersistentClient(str(folder)).get_collection(_COLLECTION, embedding_function=None)


def measure(collection: Any, vectors: np.ndarray, queries: np.ndarray,
            exact: np.ndarray) -> tuple[float, float, float, float]:
    """(recall@10, recall@40, p50 ms, p95 ms) of one query at a time for ``CANDIDATES`` neighbours. A returned
    row counts as one of the exact top n when its cosine reaches the n-th exact one's (so that rows with equal
    vectors, repeated turns, are interchangeable)."""
    collection.query(query_embeddings=queries[:5], n_results=CANDIDATES, include=["distances"])  # load, warm
    timings: list[float] = []
    hits_10: list[float] = []
    hits_40: list[float] = []
    for query, truth in zip(queries, exact, strict=True):
        started = time.perf_counter()
        found = collection.query(query_embeddings=query[None, :], n_results=CANDIDATES, include=["distances"])
        timings.append((time.perf_counter() - started) * 1000)
        scores = vectors[[int(i) for i in found["ids"][0]]] @ query
        floor = vectors[truth] @ query - _TIE
        hits_10.append(float(np.sum(scores[:TOP] >= floor[TOP - 1])) / TOP)
        hits_40.append(float(np.sum(scores >= floor[CANDIDATES - 1])) / CANDIDATES)
    quantiles = statistics.quantiles(timings, n=20)
    return statistics.fmean(hits_10), statistics.fmean(hits_40), statistics.median(timings), quantiles[18]


def bench_build(build: Build, sizes: Sequence[int], ef_searches: Sequence[int], vectors: np.ndarray,
                queries: np.ndarray) -> list[Row]:
    """One collection grown through ``sizes``, measured at each size for every ef_search."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-ann-") as folder:
        client = chromadb.PersistentClient(folder)
        client.create_collection(_COLLECTION, embedding_function=None, configuration={"hnsw": {
            "space": "cosine", "ef_construction": build.ef_construction, "max_neighbors": build.max_neighbors,
            "ef_search": ef_searches[0]}})
        held = 0
        for size in sizes:
            collection = open_fresh(Path(folder))
            started = time.perf_counter()
            for start in range(held, size, _BATCH):
                stop = min(start + _BATCH, size)
                collection.add(ids=[str(i) for i in range(start, stop)], embeddings=vectors[start:stop])
            build_s = time.perf_counter() - started
            held = size
            exact = exact_top(vectors[:size], queries, CANDIDATES)
            for number, ef_search in enumerate(ef_searches):
                collection.modify(configuration={"hnsw": {"ef_search": ef_search}})
                measured = measure(open_fresh(Path(folder)), vectors[:size], queries, exact)
                rows.append(Row(size, build, ef_search, *measured, build_s if number == 0 else 0.0))
                print_row(rows[-1])
        chromadb.api.client.SharedSystemClient.clear_system_cache()
    return rows


def print_row(row: Row) -> None:
    build = f"{row.build_s:8.1f}" if row.build_s else " " * 8
    print(f"{row.size:>8,} {row.build!s:>9} {row.ef_search:>6} {row.recall_10:>9.4f} {row.recall_40:>9.4f} "
          f"{row.p50_ms:>7.2f} {row.p95_ms:>7.2f} {build}", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,6000,20000", help="collection sizes, comma-separated")
    parser.add_argument("--builds", default="100x16",
                        help="ef_construction x max_neighbors pairs (Chroma's default: 100x16)")
    parser.add_argument("--ef-search", default="100,200,400", help="ef_search values (Chroma's default: 100)")
    parser.add_argument("--queries", type=int, default=300, help="LoCoMo questions asked (a fixed sample)")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--cache", type=Path, help="embedding cache (default: a file in the temp folder)")
    parser.add_argument("--neighbour-cosine", type=float, default=0.8,
                        help="cosine of a synthetic vector with the real one it was made from")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    sizes = sorted(int(s.replace("_", "")) for s in args.sizes.split(","))
    builds = [Build.parse(b) for b in args.builds.split(",")]
    ef_searches = [int(e) for e in args.ef_search.split(",")]
    cache = args.cache or Path(tempfile.gettempdir()) / "vecmem-bench-ann-embeddings.npz"
    turns, questions, model = embedded(args.locomo.resolve(), cache)
    vectors, synthetic_cosine = corpus(turns, max(sizes), args.neighbour_cosine, args.seed)
    asked = sorted(random.Random(args.seed).sample(range(len(questions)), min(args.queries, len(questions))))
    queries = questions[asked]

    print(f"model {model} ({turns.shape[1]} dimensions); {len(turns):,} real LoCoMo turns"
          + (f", then synthetic neighbours (mean cosine with their source {synthetic_cosine:.3f})"
             if synthetic_cosine is not None else "")
          + f"; {len(queries)} LoCoMo questions, {CANDIDATES} neighbours each; {os.cpu_count()} CPUs")
    print(f"{'size':>8} {'build':>9} {'ef':>6} {'recall@10':>9} {'recall@40':>9} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'add s':>8}")
    for build in builds:
        bench_build(build, sizes, ef_searches, vectors, queries)


if __name__ == "__main__":
    main()
