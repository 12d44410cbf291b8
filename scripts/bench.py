"""Speed, memory and token figures of vecmem at scale, against Chroma's own filtered query.

    python scripts/bench.py --n 100000 --queries 200            # the issue's size
    python scripts/bench.py --n 5000 --queries 100              # make bench
    python scripts/bench.py --corpus memories.jsonl             # your own memories (the export format)
    python scripts/bench.py --n 20000 --locomo ../shared/data/locomo/locomo10.json --json
    python scripts/bench.py --users 10000 --per-user 20 --queries 300   # many small users (bench_users.py)
    python scripts/bench.py --n 100000 --embed-sample 10000 --model-rate  # 10,000 real vectors, the rest synthesized
    python scripts/bench.py --model multilingual-e5-small --n 100000 --embed-sample 1000 --targets --skip-baseline

The synthetic corpus is deterministic (``--seed``) and varied: all four types, global and session scope
(``--sessions``), about 10% superseded, spread over ``--users``. Everything goes through the public API into a
temporary store; the baseline opens the same Chroma collection with chromadb and runs the where-filtered
query a naive design would use (global or this session, not superseded, the same types).

``--embed-sample M`` embeds only the first M memories for real (the ingest rate is theirs); the rest get
synthesized vectors, a real vector plus noise (bench_targets.py), and the output says how many. It applies to
the many-users shape (``--per-user``) too.

Reported: ingest rate (embedding included; with ``--model-rate`` against the model's own batched rate),
``search`` latency p50/p95/p99 with the query embedding and without it (vectors computed beforehand), the
embedding alone, ``build_context`` latency, Chroma's filtered query, peak RSS, bytes on disk per memory, and
tokens injected per query next to the tokens of the full history. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from vecmem import MemoryBank, MemoryRecord, Settings, VecmemError, embedder_for
from vecmem.storage.chroma.store import ChromaStore

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling module below, however this file is run
from bench_targets import FIRST_SEARCH_SIZE, FIRST_SEARCH_USER, add_synthesized, model_rate, small_store_cli

TOPICS = [
    "Python", "Rust", "TypeScript", "Go", "Kubernetes", "PostgreSQL", "Redis", "React", "Django", "pandas",
    "the billing service", "the search API", "the mobile app", "the data pipeline", "the auth module",
    "jazz", "hiking", "chess", "photography", "cooking", "running", "gardening", "sci-fi novels", "cycling",
    "编程", "数据库", "前端", "机器学习", "咖啡", "旅行", "摄影", "跑步",
]
PLACES = ["Berlin", "Hangzhou", "Lisbon", "Toronto", "Osaka", "Nairobi", "Austin", "Melbourne", "杭州", "成都"]
THINGS = ["laptop", "editor", "keyboard", "shell", "bike", "camera", "desk", "phone", "monitor", "backpack"]
TEMPLATES = {
    "fact": [
        "The user works on {topic} at a company in {place}.",
        "The user's {thing} is model number {n}.",
        "The user learned {topic} in {year}.",
        "用户在{place}负责{topic}相关的工作，编号 {n}",
        "The user's team deploys {topic} every {day}.",
    ],
    "preference": [
        "The user prefers {topic} over alternatives for project {n}.",
        "The user likes {topic} and dislikes long meetings about it.",
        "用户喜欢用{topic}，不喜欢繁琐的配置（{n}）",
        "The user wants answers about {topic} to be short.",
    ],
    "instruction": [
        "Always show examples in {topic} when explaining item {n}.",
        "Never suggest {topic} for the user's {thing}.",
        "回答关于{topic}的问题时先给结论（规则 {n}）",
    ],
    "conclusion": [
        "Conclusion: the {topic} outage #{n} came from a misconfigured {thing}.",
        "We decided to move {topic} to {place} after review {n}.",
        "结论：{topic}的性能问题 {n} 出在缓存失效",
    ],
}
QUERIES = [
    "what do I work on in {place}?", "which {thing} do I use?", "how should you explain {topic}?",
    "what went wrong with {topic}?", "帮我写一个{topic}的例子", "我在{place}做什么工作？", "tips for {topic}",
]
TYPE_SHARES = [("fact", 0.5), ("preference", 0.2), ("instruction", 0.15), ("conclusion", 0.15)]


@dataclass
class Query:
    text: str
    user_id: str
    session_id: str | None
    types: list[str] | None


def synthetic_corpus(n: int, users: int, sessions: int, seed: int) -> list[MemoryRecord]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    records: list[MemoryRecord] = []
    kinds = [name for name, _ in TYPE_SHARES]
    weights = [share for _, share in TYPE_SHARES]
    for i in range(n):
        kind = rng.choices(kinds, weights)[0]
        text = rng.choice(TEMPLATES[kind]).format(
            topic=rng.choice(TOPICS), place=rng.choice(PLACES), thing=rng.choice(THINGS), n=i,
            year=rng.randint(2005, 2026), day=rng.choice(["Monday", "Friday", "sprint"]),
        )
        scope = "global" if rng.random() < 0.7 else f"session-{rng.randrange(sessions)}"
        records.append(MemoryRecord(
            id=f"bench-{i}", content=text, type=kind, importance=round(rng.uniform(0.2, 1.0), 2), scope=scope,
            created_at=start + timedelta(minutes=i * 3), user_id=f"user-{i % users}", source="manual",
            tags=[kind],
        ))
    # about 10% superseded, each by a later memory of the same user and type
    by_key: dict[tuple[str, str], list[int]] = {}
    for index, record in enumerate(records):
        by_key.setdefault((record.user_id, record.type), []).append(index)
    for positions in by_key.values():
        for a, b in itertools.pairwise(positions):
            if rng.random() < 0.1:
                records[a] = records[a].with_changes(superseded_by=records[b].id)
    return records


def load_corpus(path: Path) -> list[MemoryRecord]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(MemoryRecord.from_dict(json.loads(line)))
            except (ValueError, VecmemError) as exc:
                raise SystemExit(f"bench: {path}:{number}: {exc}") from None
    return records


def make_queries(count: int, records: Sequence[MemoryRecord], seed: int) -> list[Query]:
    rng = random.Random(seed + 1)
    users = sorted({r.user_id for r in records})
    sessions = sorted({r.scope for r in records if r.scope != "global"})
    out = []
    for _ in range(count):
        text = rng.choice(QUERIES).format(topic=rng.choice(TOPICS), place=rng.choice(PLACES), thing=rng.choice(THINGS))
        session = rng.choice(sessions) if sessions and rng.random() < 0.5 else None
        types = rng.choice([None, None, None, ["preference", "instruction"], ["fact"]])
        out.append(Query(text, rng.choice(users), session, types))
    return out


class PrecomputedEmbedder:
    """The real embedder for documents; query vectors looked up from a table, to time search without them."""

    def __init__(self, inner: Any, table: dict[str, np.ndarray]) -> None:
        self._inner = inner
        self._table = table

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def embed_query(self, text: str) -> np.ndarray:
        return self._table[text] if text in self._table else self._inner.embed_query(text)  # warm_up's text

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._inner.embed_documents(texts)


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(1000 * s for s in samples)
    pick = lambda q: ms[min(len(ms) - 1, round(q * (len(ms) - 1)))]  # noqa: E731
    return {"p50": round(statistics.median(ms), 2), "p95": round(pick(0.95), 2), "p99": round(pick(0.99), 2)}


def timed(call: Any, items: Sequence[Any]) -> list[float]:
    samples = []
    for item in items:
        started = time.perf_counter()
        call(item)
        samples.append(time.perf_counter() - started)
    return samples


def disk_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def chroma_baseline(home: Path, model: str, queries: list[Query], vectors: dict[str, np.ndarray],
                    k: int) -> tuple[list[float], float]:
    """Chroma's own where-filtered query in the naive layout (one collection per user holding every memory),
    built from the same stored rows and vectors (read through the store, whatever its layout); returns the query
    times and how long the copy took."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    from vecmem.storage.chroma.rows import to_metadata

    naive = chromadb.PersistentClient(path=str(home / "naive"), settings=ChromaSettings(anonymized_telemetry=False))
    source = ChromaStore(model_name=model, path=home / "chroma")
    started = time.perf_counter()
    for user in sorted({q.user_id for q in queries}):
        target = naive.create_collection(f"naive-{user}", configuration={"hnsw": {"space": "cosine"}},
                                         embedding_function=None)
        for ids, matrix in source.scan_vectors(user):
            records = source.get(user, ids)
            target.add(ids=ids, embeddings=matrix, metadatas=[to_metadata(records[i]) for i in ids],
                       documents=[records[i].content for i in ids])
    source.close()
    copied = time.perf_counter() - started
    samples = []
    for query in queries:
        collection = naive.get_collection(f"naive-{query.user_id}", embedding_function=None)
        clauses: list[dict[str, Any]] = [{"superseded": False},
                                         {"scope": {"$in": ["global", query.session_id or "global"]}}]
        if query.types:
            clauses.append({"type": {"$in": query.types}})
        started = time.perf_counter()
        collection.query(query_embeddings=[vectors[query.text]], n_results=k, where={"$and": clauses},
                         include=["documents", "metadatas", "distances"])
        samples.append(time.perf_counter() - started)
    return samples, copied


def peak_rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


class IngestCurve:
    """Ingest rate over each tenth of the corpus (from add_records' progress calls), to show how it holds up
    as the store grows."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.marks: list[tuple[int, float]] = [(0, time.perf_counter())]

    def update(self, done: int) -> None:
        if done >= len(self.marks) * self.total / 10 or done == self.total:
            self.marks.append((done, time.perf_counter()))

    def rates(self) -> list[float]:
        return [round((b[0] - a[0]) / (b[1] - a[1]), 1) for a, b in zip(self.marks, self.marks[1:], strict=False) if b[1] > a[1]]


NEW_PROCESS_SEARCH = """
import json, sys, time
started = time.perf_counter()
from vecmem import MemoryBank
bank = MemoryBank()
opened = time.perf_counter()
bank.search(sys.argv[1], int(sys.argv[3]), user_id=sys.argv[2], record_access=False)
searched = time.perf_counter()
print(json.dumps({"import_and_open_s": opened - started, "first_search_s": searched - opened}))
bank.close()
"""


def new_process_figures(home: Path, query: Query, k: int, model: str | None = None) -> dict[str, Any]:
    """A new process on this store (its replica saved by the banks before it, or by the first of these runs):
    seconds to import vecmem and open the bank, then its first search (the query embedding and the model load
    included), median of three, each run's too; and the wall time of `vecmem search` from the shell."""
    import subprocess

    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    env["VECMEM_HOME"] = str(home)
    env.pop("VECMEM_CHROMA_URL", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode compiled once, not on every start
    if model:
        env["VECMEM_EMBED_MODEL"] = model
    runs = [json.loads(subprocess.run([sys.executable, "-c", NEW_PROCESS_SEARCH, query.text, query.user_id, str(k)],
                                      env=env, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
            for _ in range(3)]
    walls = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vecmem", "search", query.text, "--user", query.user_id, "--json"],
                       env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
    return {"import_and_open_s": round(statistics.median(r["import_and_open_s"] for r in runs), 2),
            "first_search_s": round(statistics.median(r["first_search_s"] for r in runs), 2),
            "first_search_runs_s": [round(r["first_search_s"], 2) for r in runs],
            "vecmem_search_wall_s": round(statistics.median(walls), 2)}


def startup_figures(home: Path, query: Query) -> dict[str, float]:
    """Seconds until `vecmem --help` is done, until the chat prints its prompt, and until it answers its first
    message (the model and the user's keyword index load meanwhile), each in a new process on this store."""
    import subprocess

    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    env.update(VECMEM_HOME=str(home), VECMEM_COLD_START="off")
    env.pop("VECMEM_CHROMA_URL", None)
    help_runs = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vecmem", "--help"], env=env, capture_output=True, check=True)
        help_runs.append(time.perf_counter() - started)
    started = time.perf_counter()
    chat = subprocess.Popen([sys.executable, "-m", "vecmem.chat", "--user", query.user_id, "--session", "bench"],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, bufsize=1)
    assert chat.stdin is not None and chat.stdout is not None
    try:
        prompt = answer = peak = float("nan")
        for line in chat.stdout:
            if line.startswith("vecmem chat"):
                prompt = time.perf_counter() - started
                sent = time.perf_counter()
                chat.stdin.write(query.text + "\n")
                chat.stdin.flush()
            elif line.lstrip().startswith("recalled"):
                answer = time.perf_counter() - sent
                peak = _peak_rss_of(chat.pid)
                chat.stdin.write("/quit\n")
                chat.stdin.flush()
                break
    finally:
        chat.stdin.close()
        chat.wait(timeout=60)
    return {"help_s": round(statistics.median(help_runs), 2), "chat_prompt_s": round(prompt, 2),
            "chat_first_turn_s": round(answer, 2), "chat_peak_rss_mb": peak}


def _peak_rss_of(pid: int) -> float:
    """Peak RSS (MB) of a running process: one real vecmem process with its model and index loaded. Read from
    /proc (Linux), since getrusage's figure for children starts from the parent's size at fork."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    kilobytes = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)
    return float("nan") if kilobytes is None else round(kilobytes / 1024)


def mem0_figures(records: Sequence[MemoryRecord], queries: Sequence[Query], home: Path, k: int) -> dict[str, Any]:
    """mem0 (``pip install mem0ai``) on the same memories and queries, offline the way the issue measured it:
    all-MiniLM-L6-v2 through sentence-transformers (whatever model vecmem's side uses: ``--model``, else the
    configured one), an embedded Chroma, ``add(..., infer=False)`` (no LLM), user-scoped search."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")  # mem0 sends telemetry unless told not to
    try:
        from mem0 import Memory
    except ImportError:
        return {"skipped": "mem0ai is not installed (`make bench-mem0` installs it and runs this comparison)"}
    from vecmem.retrieval.embedding.embedders import resolve_model_location

    memory = Memory.from_config({
        "embedder": {"provider": "huggingface",
                     "config": {"model": resolve_model_location("all-MiniLM-L6-v2"), "embedding_dims": 384}},
        "vector_store": {"provider": "chroma", "config": {"collection_name": "mem0-bench",
                                                          "path": str(home / "mem0-chroma")}},
        # mem0 builds its LLM client at start even when infer=False never calls it
        "llm": {"provider": "openai", "config": {"model": "gpt-4o-mini", "api_key": "not-used"}},
        "history_db_path": str(home / "mem0-history.db"),
    })
    memory.search("warm up", top_k=k, filters={"user_id": records[0].user_id})  # loads the model
    started = time.perf_counter()
    for record in records:
        memory.add(record.content, user_id=record.user_id, infer=False, metadata={"type": record.type})
    seconds = time.perf_counter() - started
    searches = timed(lambda q: memory.search(q.text, top_k=k, filters={"user_id": q.user_id}), queries)
    return {"memories": len(records), "model": "all-MiniLM-L6-v2", "adds_per_second": round(len(records) / seconds, 1),
            "search_ms": percentiles(searches)}


def locomo_tokens(path: Path, bank: MemoryBank) -> dict[str, Any]:
    """Tokens injected per LoCoMo question (default window) against the whole conversation's tokens."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from eval_hit_rate import load_locomo

    dataset = load_locomo(path, before=2, after=1)
    bank.add_records(dataset.records, overwrite=True)
    counter = bank.token_counter
    full = {user: sum(counter.count(r.content) for r in dataset.records if r.user_id == user)
            for user in dataset.now}
    injected = []
    for query in dataset.queries[::10]:
        pack = bank.build_context(query.text, user_id=query.user_id)
        injected.append(pack.tokens["long_term"])
    return {
        "conversation_tokens_mean": round(statistics.mean(full.values())),
        "injected_long_term_tokens_mean": round(statistics.mean(injected), 1),
        "injected_long_term_tokens_max": max(injected),
        "long_term_share_tokens": bank.settings.context_tokens * bank.settings.shares.long_term,
        "questions_sampled": len(injected),
    }


def with_model(settings: Settings, model: str | None) -> Settings:
    return settings.with_changes(embed_model=model) if model else settings


MODEL_SAMPLE = 1_000  # memories embedded on their own, before and after the ingest, for the model's own rate


def _ingest(args: argparse.Namespace, records: list[MemoryRecord], settings: Settings, embedder: Any,
            bank: MemoryBank, report: dict[str, Any]) -> MemoryBank:
    """Ingest the corpus: the first --embed-sample memories (all without it) embedded for real and timed, against
    the model's own rate with --model-rate or --targets; the rest, and the --targets user of FIRST_SEARCH_SIZE,
    with synthesized vectors (bench_targets.py). Returns the bank, reopened when another one wrote meanwhile."""
    real = records[: args.embed_sample] if args.embed_sample else records
    sample = [r.content for r in real[:MODEL_SAMPLE]]
    against_model = args.targets or args.model_rate
    before, pool = model_rate(embedder, sample, settings.embed_batch_size) if against_model else (0.0, None)
    curve = IngestCurve(len(real))
    started = time.perf_counter()
    bank.add_records(real, progress=curve.update)
    seconds = time.perf_counter() - started
    report["ingest"] = {"seconds": round(seconds, 1), "per_second": round(len(real) / seconds, 1),
                        "per_second_by_tenth": curve.rates(), "peak_rss_mb": peak_rss_mb(), "embedded_for_real": len(real)}
    if against_model:
        after, _ = model_rate(embedder, sample, settings.embed_batch_size)
        report["ingest"].update(model_batched_per_second=round((before + after) / 2, 1),
                                model_before_and_after=[round(before, 1), round(after, 1)],
                                ratio_to_model=round(2 * len(real) / seconds / (before + after), 2))
    rest = records[len(real):]
    if args.targets:
        rest = rest + [r.with_changes(id=f"first-{r.id}", user_id=FIRST_SEARCH_USER,
                                      superseded_by=r.superseded_by and f"first-{r.superseded_by}")
                       for r in synthetic_corpus(FIRST_SEARCH_SIZE, 1, args.sessions, args.seed + 3)]
    if not rest:
        return bank
    if pool is None:
        _, pool = model_rate(embedder, sample[:256], settings.embed_batch_size)
    bank.close()
    report["ingest"]["synthesized"] = add_synthesized(settings, embedder, pool, args.seed, rest)
    return MemoryBank(settings, embedder=embedder)


def targets(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's four targets, each figure against its bound (printed, never asserted)."""
    ingest, fresh, cli = report["ingest"], report["new_process"], report["small_store_cli"]
    search_p95, embed_p50 = report["search_ms"]["p95"], report["embed_query_ms"]["p50"]
    figures = {
        "a_ingest_ratio_to_model": (ingest.get("ratio_to_model"), ">=", 0.85),
        "b_search_p95_over_query_embedding": (round(search_p95 / embed_p50, 2), "<=", 2.5),
        "c_first_search_new_process_s": (fresh["first_search_s"], "<=", 2.0),
        "d_vecmem_search_small_store_s": (cli["cached_median_s"], "<=", 1.5),
    }
    return {name: {"value": value, "bound": f"{sign} {bound}",
                   "met": None if value is None else (value >= bound if sign == ">=" else value <= bound)}
            for name, (value, sign, bound) in figures.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="synthetic memories (default 5000)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--users", type=int, default=1)
    parser.add_argument("--per-user", type=int, default=0, metavar="M",
                        help="the many-users shape: --users N users with M memories each (scripts/bench_users.py)")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--corpus", type=Path, help="JSON Lines memories instead of the synthetic corpus")
    parser.add_argument("--locomo", type=Path, help="also report injected tokens against LoCoMo conversations")
    parser.add_argument("--home", type=Path, help="keep the store in this folder (reused, without ingest, when it "
                                                  "already holds the corpus)")
    parser.add_argument("--mem0", type=int, default=0, metavar="N",
                        help="also run mem0 (if installed) on the first N memories and the same queries")
    parser.add_argument("--mem0-only", action="store_true", help=argparse.SUPPRESS)  # _mem0_beside's subprocess
    parser.add_argument("--skip-startup", action="store_true", help="do not time `vecmem --help` and the chat's start")
    parser.add_argument("--skip-baseline", action="store_true", help="do not copy the store into Chroma's naive layout")
    parser.add_argument("--model", help="the embedding model (VECMEM_EMBED_MODEL's values; default: the configured one)")
    parser.add_argument("--embed-sample", type=int, default=0, metavar="M",
                        help="embed only the first M memories for real, synthesize the rest's vectors (bench_targets.py); "
                             "the ingest rate is the real part's; with --per-user too")
    parser.add_argument("--model-rate", action="store_true",
                        help="also time the model's own batched rate on 1,000 of the memories before and after the "
                             "ingest and print ingest's ratio to it (implied by --targets; --per-user always does, on 2,000)")
    parser.add_argument("--targets", action="store_true",
                        help="also the speed targets: ingest against the model, search against the query embedding, a "
                             "new process's first search of a 20,000-memory user, `vecmem search` on a small store")
    parser.add_argument("--cli-runs", type=int, default=7, help="timed `vecmem search` runs for --targets (default 7)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.n < 1 or args.queries < 1 or args.users < 1 or args.sessions < 1 or args.k < 1:
        print("bench: --n, --queries, --users, --sessions and --k must be at least 1", file=sys.stderr)
        return 2
    if args.mem0 < 0:
        print("bench: --mem0 must be 0 (off) or a number of memories", file=sys.stderr)
        return 2
    if args.embed_sample < 0 or args.cli_runs < 1:
        print("bench: --embed-sample must be 0 (all real) or more, --cli-runs at least 1", file=sys.stderr)
        return 2

    if args.per_user:
        return _many_users(args)
    records = load_corpus(args.corpus) if args.corpus else synthetic_corpus(args.n, args.users, args.sessions, args.seed)
    queries = make_queries(args.queries, records, args.seed)
    report: dict[str, Any] = {"memories": len(records), "queries": len(queries), "users": len({r.user_id for r in records}),
                              "superseded": sum(r.superseded for r in records), "k": args.k,
                              "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-") as scratch:
        home = args.home or Path(scratch)
        settings = with_model(Settings.from_env().with_changes(home=home, chroma_url=None), args.model)
        embedder = embedder_for(settings)
        embedder.embed_query("warm up")  # the model load is start-up, not ingest
        bank = MemoryBank(settings, embedder=embedder)
        users = sorted({r.user_id for r in records})
        if args.home and sum(bank.count(user_id=u) for u in users) == len(records):
            report["ingest"] = {"seconds": 0.0, "per_second": 0.0, "skipped": "the store already held the corpus"}
        else:
            bank = _ingest(args, records, settings, embedder, bank, report)

        report["backend"] = getattr(embedder, "backend_used", None) or embedder.name
        texts = sorted({q.text for q in queries})
        embed_samples = timed(embedder.embed_query, texts)
        vectors = {text: embedder.embed_query(text) for text in texts}
        report["embed_query_ms"] = percentiles(embed_samples)

        with MemoryBank(settings, embedder=embedder) as reopened:  # a fresh bank (it builds and saves the replica)
            started = time.perf_counter()
            reopened.search(queries[0].text, args.k, user_id=queries[0].user_id, record_access=False)
            report["first_search_after_open_s"] = round(time.perf_counter() - started, 2)
            reopened.warm_up(user_id=queries[0].user_id)  # what the chat does while its user types
            report["warm_after_open_s"] = round(time.perf_counter() - started, 2)

        search = lambda q: bank.search(q.text, args.k, user_id=q.user_id, session_id=q.session_id, types=q.types)  # noqa: E731
        for user in users:
            bank.warm_up(user_id=user)  # each user's copy, vectors included, as a running chat has them
        report["search_ms"] = percentiles(timed(search, queries))

        fast = MemoryBank(settings, embedder=PrecomputedEmbedder(embedder, vectors))
        for user in users:
            fast.warm_up(user_id=user)
        without = timed(lambda q: fast.search(q.text, args.k, user_id=q.user_id, session_id=q.session_id,
                                               types=q.types), queries)
        report["search_without_embedding_ms"] = percentiles(without)
        report["search_without_embedding_by_filter_ms"] = {
            label: percentiles([t for t, q in zip(without, queries, strict=True) if pick(q)])
            for label, pick in (("no type filter", lambda q: not q.types), ("type filter", lambda q: bool(q.types)),
                                ("in a session", lambda q: q.session_id is not None))
            if any(pick(q) for q in queries)
        }
        report["build_context_ms"] = percentiles(timed(
            lambda q: bank.build_context(q.text, user_id=q.user_id, session_id=q.session_id), queries))
        # two banks (timed, without embeddings) each hold a copy of every user by now; before the baseline
        report["peak_rss_mb"] = peak_rss_mb()
        if (home / "naive").exists():
            import shutil

            shutil.rmtree(home / "naive")
        if not args.skip_baseline:
            naive_samples, copy_seconds = chroma_baseline(home, embedder.name, queries, vectors, args.k)
            report["chroma_filtered_query_ms"] = percentiles(naive_samples)
            report["naive_layout_copy_seconds"] = round(copy_seconds, 1)
            report["speedup_vs_chroma_filtered_p50"] = round(
                report["chroma_filtered_query_ms"]["p50"] / report["search_without_embedding_ms"]["p50"], 1)

        counter = bank.token_counter
        history = statistics.mean(sum(counter.count(r.content) for r in records if r.user_id == u) for u in users)
        injected = [bank.build_context(q.text, user_id=q.user_id, session_id=q.session_id).tokens["long_term"]
                    for q in queries[:50]]
        report["tokens"] = {"full_history_per_user": round(history), "injected_long_term_mean": round(
            statistics.mean(injected), 1), "long_term_share": int(settings.context_tokens * settings.shares.long_term)}
        bank.close()
        fast.close()
        stored = len(records) + (FIRST_SEARCH_SIZE if args.targets else 0)
        report["disk_bytes_per_memory"] = round((disk_bytes(home) - disk_bytes(home / "naive")) / stored)
        if args.mem0:
            report["mem0"] = mem0_figures(records[: args.mem0], queries, home, args.k)
        if not args.skip_startup:
            report["startup"] = startup_figures(home, queries[0])
        first = Query(queries[0].text, FIRST_SEARCH_USER, None, None) if args.targets else queries[0]
        report["new_process"] = new_process_figures(home, first, args.k, model=args.model)
        if args.targets:
            report["new_process"]["user_memories"] = FIRST_SEARCH_SIZE
            report["small_store_cli"] = small_store_cli(args.model, args.cli_runs)
        if args.locomo:
            with MemoryBank(settings.with_changes(home=home / "locomo"), embedder=embedder) as locomo_bank:
                report["locomo_tokens"] = locomo_tokens(args.locomo, locomo_bank)
    report["peak_rss_with_baseline_mb"] = peak_rss_mb()
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.targets:
        report["targets"] = targets(report)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print_report(report)
    return 0


def _many_users(args: argparse.Namespace) -> int:
    from bench_users import many_users_report

    if args.per_user < 1:
        print("bench: --per-user must be at least 1", file=sys.stderr)
        return 2
    if args.mem0_only:  # the mem0 side of a users run, in mem0's own venv (see _mem0_beside)
        with tempfile.TemporaryDirectory(prefix="vecmem-bench-mem0-") as scratch:
            print(json.dumps(_mem0_users(args, Path(scratch))))
        return 0
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-users-") as scratch:
        home = args.home or Path(scratch)
        settings = with_model(Settings.from_env().with_changes(home=home, chroma_url=None), args.model)
        embedder = embedder_for(settings)
        embedder.embed_query("warm up")  # the model load is start-up, not ingest
        report = many_users_report(args, home, settings, embedder)
        if args.mem0:
            report["mem0"] = _mem0_beside(args)
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


MEM0_PYTHON = Path(__file__).resolve().parent.parent / ".venv-mem0" / "bin" / "python"


def _mem0_users(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    """mem0 on the memories of the corpus's first users (--mem0 memories' worth, each user whole), asked the
    users run's queries that fall on those users; with this process's peak RSS and mem0's bytes on disk."""
    records = synthetic_corpus(args.users * args.per_user, args.users, args.sessions, args.seed)
    kept = {f"user-{n}" for n in range(max(1, args.mem0 // args.per_user))}
    chosen = [r for r in records if r.user_id in kept]
    queries = [q for q in make_queries(args.queries * 10, chosen, args.seed)][: args.queries]
    figures = mem0_figures(chosen, queries, home, args.k)
    if "skipped" not in figures:
        figures.update(users=len(kept), peak_rss_mb=peak_rss_mb(),
                       disk_bytes_per_memory=round(disk_bytes(home) / len(chosen)))
    return figures


def _mem0_beside(args: argparse.Namespace) -> dict[str, Any]:
    """mem0's figures for a users run: in this process when mem0 is importable, else from mem0's venv
    (``make bench-mem0`` makes it; mem0 needs an older protobuf than vecmem's venv has)."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("mem0") is not None:
        with tempfile.TemporaryDirectory(prefix="vecmem-bench-mem0-") as scratch:
            return _mem0_users(args, Path(scratch))
    if not MEM0_PYTHON.exists():
        return {"skipped": "mem0ai is not installed (`make bench-mem0` makes its venv)"}
    command = [str(MEM0_PYTHON), __file__, "--users", str(args.users), "--per-user", str(args.per_user),
               "--queries", str(args.queries), "--sessions", str(args.sessions), "--seed", str(args.seed),
               "--k", str(args.k), "--mem0", str(args.mem0), "--mem0-only"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"skipped": f"mem0's run failed: {done.stderr.strip().splitlines()[-1:]}"}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def print_report(report: dict[str, Any]) -> None:
    def line(label: str, value: Any) -> None:
        print(f"  {label:<44} {value}")

    print(f"vecmem bench ({report['backend']} embeddings): {report['memories']:,} memories ({report['superseded']:,} superseded), "
          f"{report['users']} user(s), {report['queries']} queries, k={report['k']}")
    ingest = report["ingest"]
    synthesized = ingest.get("synthesized")
    real = f" (the {ingest['embedded_for_real']:,} embedded for real)" if synthesized else ""
    line(f"ingest (embedding included){real}", f"{ingest['per_second']} memories/s ({ingest['seconds']} s)")
    if ingest.get("per_second_by_tenth"):
        line("  ... by tenth of the corpus", ", ".join(str(rate) for rate in ingest["per_second_by_tenth"]))
    if "model_batched_per_second" in ingest:
        line("the model's own batched rate (before, after)", f"{ingest['model_batched_per_second']} memories/s "
             f"({', '.join(map(str, ingest['model_before_and_after']))}): ingest is {ingest['ratio_to_model']}x")
    if synthesized:
        line(f"SYNTHESIZED vectors for {synthesized['memories']:,} memories", f"(a sampled real vector plus noise) "
             f"added at {synthesized['per_second']} memories/s")
    line("first search of a fresh bank (builds the replica)", f"{report['first_search_after_open_s']} s")
    fresh = report["new_process"]
    whose = f" ({fresh['user_memories']:,}-memory user)" if "user_memories" in fresh else ""
    line(f"a new process{whose}: import and open / first search",
         f"{fresh['import_and_open_s']} s / {fresh['first_search_s']} s (runs: {fresh['first_search_runs_s']})")
    line("`vecmem search` from the shell", f"{fresh['vecmem_search_wall_s']} s")
    line("after opening, until the vectors are held too", f"{report['warm_after_open_s']} s")
    for key, label in (("search_ms", "search, end to end"), ("search_without_embedding_ms", "search without the query embedding"),
                       ("embed_query_ms", "query embedding alone"), ("build_context_ms", "build_context"),
                       ("chroma_filtered_query_ms", "Chroma's own where-filtered query")):
        if key in report:
            p = report[key]
            line(label, f"p50 {p['p50']} ms, p95 {p['p95']} ms, p99 {p['p99']} ms")
    for label, p in report["search_without_embedding_by_filter_ms"].items():
        line(f"  ... {label}", f"p50 {p['p50']} ms, p95 {p['p95']} ms, p99 {p['p99']} ms")
    if "speedup_vs_chroma_filtered_p50" in report:
        line("speed-up over Chroma's filtered query (p50)", f"{report['speedup_vs_chroma_filtered_p50']}x")
    if "peak_rss_mb" in report["ingest"]:
        line("peak RSS after ingest", f"{report['ingest']['peak_rss_mb']} MB")
    line("peak RSS with three banks open (searches)", f"{report['peak_rss_mb']} MB")
    line("peak RSS with the naive baseline's copy", f"{report['peak_rss_with_baseline_mb']} MB")
    line("disk per memory", f"{report['disk_bytes_per_memory']} bytes")
    tokens = report["tokens"]
    line("tokens: full history per user", f"{tokens['full_history_per_user']:,}")
    line("tokens: injected long-term per query (mean)", f"{tokens['injected_long_term_mean']} (share {tokens['long_term_share']})")
    if "mem0" in report:
        mem0 = report["mem0"]
        if "skipped" in mem0:
            line("mem0", mem0["skipped"])
        else:
            p = mem0["search_ms"]
            line(f"mem0 ({mem0.get('model', 'all-MiniLM-L6-v2')}) at {mem0['memories']:,} memories: adds",
                 f"{mem0['adds_per_second']} per second")
            line("mem0: search, end to end", f"p50 {p['p50']} ms, p95 {p['p95']} ms, p99 {p['p99']} ms")
    if "startup" in report:
        up = report["startup"]
        line("start-up: vecmem --help", f"{up['help_s']} s")
        line("start-up: chat prompt shown / first turn done", f"{up['chat_prompt_s']} s / {up['chat_first_turn_s']} s")
        line("peak RSS of the chat process", f"{up['chat_peak_rss_mb']} MB")
    if "small_store_cli" in report:
        cli = report["small_store_cli"]
        line("`vecmem search`, small store: first ever", f"{cli['first_ever_s']} s (the model's calibration measured)")
        line(f"  ... cached, median of {cli['runs']} (min, max)", f"{cli['cached_median_s']} s ({cli['cached_min_s']}, "
             f"{cli['cached_max_s']}), peak RSS {cli['peak_rss_mb']} MB, heavy modules imported: "
             f"{', '.join(cli['heavy_modules_imported']) or 'none'}")
    line("load average at start / end", f"{report['load_average_at_start']} / {report['load_average_at_end']}")
    for name, target in report.get("targets", {}).items():
        verdict = {True: "met", False: "MISSED", None: "not measured"}[target["met"]]
        line(f"target {name}", f"{target['value']} ({target['bound']}): {verdict}")
    if "locomo_tokens" in report:
        lt = report["locomo_tokens"]
        line("LoCoMo: conversation tokens (mean)", f"{lt['conversation_tokens_mean']:,}")
        line("LoCoMo: injected long-term tokens (mean / max)",
             f"{lt['injected_long_term_tokens_mean']} / {lt['injected_long_term_tokens_max']}")


if __name__ == "__main__":
    sys.exit(main())
