"""The many-users shape of the bench: ``scripts/bench.py --users N --per-user M``.

An app with thousands of end-users, each with tens of memories. Reported, in one run on one corpus:

* the embedding model's own batched throughput on a sample of the corpus, and vecmem's ingest as a ratio of it
  (ingest can never beat the model; the question is how much of it the rest costs);
* with ``--embed-sample M``, only the corpus's first M memories are embedded for real (they give the ingest rate
  and its ratio; the corpus goes round the users, so M of at least the user count gives every user a real
  vector); the rest get synthesized vectors, a real vector of the model-rate sample plus noise
  (bench_targets.py), and are added through the same ``add_records``, user by user, timed and reported apart;
* search latency over random users, with the query embedding: a user's first search in the process (its
  replica is built from the store) and warm (searched before), and warm without the embedding;
* one raw Chroma collection holding every user's rows with a ``where={"user_id": ...}`` filter, built from the
  same stored vectors and queried with the same query vectors: what the naive design costs;
* peak RSS of this process, bytes on disk per memory, and the wall time of ``vecmem search`` in a new process
  (model load and first search included).

Figures are printed, never asserted.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import (
    Query,
    disk_bytes,
    peak_rss_mb,
    percentiles,
    synthetic_corpus,
    timed,
)
from bench_targets import add_synthesized, model_rate

from vecmem import Embedder, MemoryBank, Settings
from vecmem.storage.chroma.store import ChromaStore

__all__ = ["many_users_report"]

EMBED_SAMPLE = 2_000  # memories embedded on their own to measure the model's batched throughput


def many_users_report(args: Any, home: Path, settings: Settings, embedder: Embedder) -> dict[str, Any]:
    """Every figure of the many-users shape, in one dict."""
    records = synthetic_corpus(args.users * args.per_user, args.users, args.sessions, args.seed)
    rng = random.Random(args.seed + 2)
    users = sorted({r.user_id for r in records})
    report: dict[str, Any] = {"shape": f"{args.users} users x {args.per_user} memories", "memories": len(records),
                              "model": embedder.name, "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}

    sample = [r.content for r in rng.sample(records, min(EMBED_SAMPLE, len(records)))]
    before, pool = model_rate(embedder, sample, settings.embed_batch_size)
    bank = MemoryBank(settings, embedder=embedder)
    if args.home and len(bank.users()) == args.users:  # a kept store (--home) of this shape: searched again
        bank.close()
        report["ingest"] = {"reused": str(home)}
    else:
        real = records[: args.embed_sample] if args.embed_sample else records
        started = time.perf_counter()
        bank.add_records(real)
        ingest_rate = len(real) / (time.perf_counter() - started)
        bank.close()
        after, _ = model_rate(embedder, sample, settings.embed_batch_size)
        rate = (before + after) / 2  # measured either side of the ingest: a shared machine's load drifts
        report["ingest"] = {"per_second": round(ingest_rate, 1), "embedded_for_real": len(real),
                            "model_batched_per_second": round(rate, 1),
                            "model_before_and_after": [round(before, 1), round(after, 1)],
                            "ratio_to_model": round(ingest_rate / rate, 2), "peak_rss_mb": peak_rss_mb()}
        # the filler user by user (a stable sort: each user's order kept): a batch of add_records then touches a
        # dozen users rather than 256, which takes the synthesized part's time down; its rate is no figure here
        rest = sorted(records[len(real):], key=lambda r: r.user_id)
        if rest:
            report["ingest"]["synthesized"] = add_synthesized(settings, embedder, pool, args.seed, rest)

    query_texts = [q.text for q in _queries(records, args.queries, rng)]
    asked = [rng.choice(users) for _ in query_texts]
    vectors = {text: embedder.embed_query(text) for text in set(query_texts)}
    with MemoryBank(settings, embedder=embedder) as fresh:  # a new process's view: no user touched yet
        def search(pair: tuple[str, str]) -> None:
            fresh.search(pair[0], args.k, user_id=pair[1], record_access=False)

        pairs = list(zip(query_texts, asked, strict=True))
        first = timed(search, _first_touch(pairs))
        warm = timed(search, pairs)
        report["search_ms"] = {"first_touch_of_a_user": percentiles(first), "warm": percentiles(warm),
                               "users_touched": len(set(asked))}
        report["replicas"] = {"held": len(fresh._retriever._replicas.copies),
                              "evicted": fresh._retriever._replicas.evicted,
                              "held_mb": round(fresh._retriever._replicas.held_bytes() / 2**20, 1)}
    report["peak_rss_mb"] = peak_rss_mb()
    report["disk_bytes_per_memory"] = round((disk_bytes(home) - disk_bytes(home / "raw")) / len(records))
    report["raw_chroma_user_filter_ms"] = _raw_chroma(home, settings, embedder.name, users, pairs, vectors, args.k)
    report["peak_rss_with_raw_chroma_mb"] = peak_rss_mb()
    report["vecmem_search_cli_s"] = _cli_search_seconds(home, asked[0], query_texts[0], args.model)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def _queries(records: list[Any], count: int, rng: random.Random) -> list[Query]:
    from bench import make_queries

    return make_queries(count, records, rng.randrange(1 << 30))


def _first_touch(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One query for each user, the first time that user comes up."""
    seen: set[str] = set()
    out = []
    for text, user in pairs:
        if user not in seen:
            seen.add(user)
            out.append((text, user))
    return out


def _raw_chroma(home: Path, settings: Settings, model: str, users: list[str], pairs: list[tuple[str, str]],
                vectors: dict[str, Any], k: int) -> dict[str, Any]:
    """One Chroma collection with every user's rows and the user in the metadata, queried with a user filter:
    built from the vectors vecmem stored, so both sides search the same vectors."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    store = ChromaStore(model_name=model, path=settings.home / "chroma")
    client = chromadb.PersistentClient(path=str(home / "raw"), settings=ChromaSettings(anonymized_telemetry=False))
    if "raw" in [c.name for c in client.list_collections()]:
        client.delete_collection("raw")  # a kept store's earlier baseline
    collection = client.create_collection("raw", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
    started = time.perf_counter()
    pending: list[tuple[str, str, Any]] = []  # (user, id, vector), added 5,000 at a time as a bulk load would
    for user in users:
        for ids, matrix in store.scan_vectors(user):
            pending.extend((user, memory_id, vector) for memory_id, vector in zip(ids, matrix, strict=True))
        if len(pending) >= 5_000 or user == users[-1]:
            collection.add(ids=[f"{u}/{i}" for u, i, _ in pending], embeddings=[v for _, _, v in pending],
                           metadatas=[{"user_id": u} for u, _, _ in pending])
            pending = []
    built = time.perf_counter() - started
    samples = timed(lambda pair: collection.query(query_embeddings=[vectors[pair[0]]], n_results=k,
                                                  where={"user_id": pair[1]}, include=["distances"]), pairs)
    store.close()
    return {**percentiles(samples), "built_in_s": round(built, 1), "disk_bytes_per_memory": round(
        disk_bytes(home / "raw") / max(1, collection.count()))}


def _cli_search_seconds(home: Path, user: str, text: str, model: str | None) -> float:
    """Wall seconds of `vecmem search` in a new process: start-up, model load and the user's first search."""
    env = {**os.environ, "VECMEM_HOME": str(home)}
    env.pop("VECMEM_CHROMA_URL", None)
    if model:
        env["VECMEM_EMBED_MODEL"] = model
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vecmem", "search", text, "--user", user, "--json"], env=env,
                       capture_output=True, check=True)
        runs.append(time.perf_counter() - started)
    return round(statistics.median(runs), 2)
