"""What the second dense view (VECMEM_SECOND_VIEW=use) costs beside the store's model alone, on LoCoMo's turns.

    python scripts/bench_second_view.py --data ../shared/data/locomo/locomo10.json --n 2000 --queries 200

For each setting (``off``, then ``use``), in a process of its own so that RSS and start-up are its own: the
memories are added in batches of 64 (``MemoryBank.add_records``) into a new home, memories/s; each model's own
batched rate on the same texts and one query's embedding by each (p50); warm search p50/p95 at k=10 over LoCoMo's
questions (the user's vectors held, as a long-running process holds them); disk a memory (the home's bytes over
the memories: Chroma, the state files and, on, the second view's file); the process's peak RSS and the second
view's held bytes a memory. Then start-up: a new process opening the store and answering one search, median of
``--starts``. Public API only, except the second view's held bytes, read from the retriever's replica.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_data import load_locomo

from vecmem import MemoryBank, Settings, embedder_for
from vecmem.models import MemoryRecord

USER = "bench"


def _corpus(data: Path, n: int) -> tuple[list[MemoryRecord], list[str]]:
    dataset = load_locomo(data, before=0, after=0)
    records = [MemoryRecord(id=f"m{i}", content=r.content, user_id=USER, created_at=r.created_at, source="manual")
               for i, r in enumerate(dataset.records[:n])]
    return records, [q.text for q in dataset.queries]


def _du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(view: str, data: Path, n: int, queries: int, home: Path) -> dict[str, float]:
    """One setting's ingest, search, disk and RSS (run in its own process)."""
    records, questions = _corpus(data, n)
    settings = Settings.from_env().with_changes(home=home, second_view=view)
    bank = MemoryBank(settings)
    bank.warm_up(user_id=USER)  # models loaded before the clock starts, as in a long-running process
    texts = [r.content for r in records]
    out: dict[str, float] = {"memories": len(records)}
    started = time.perf_counter()
    for start in range(0, len(records), 64):
        bank.add_records(records[start:start + 64], overwrite=True)
    out["ingest_per_s"] = len(records) / (time.perf_counter() - started)
    e5 = embedder_for(settings)
    started = time.perf_counter()
    e5.embed_documents(texts[:512])
    out["e5_batched_per_s"] = 512 / (time.perf_counter() - started)
    second = bank._retriever.second  # the second view's model, for its own rate
    if second is not None:
        started = time.perf_counter()
        second.embedder.embed_documents(texts[:512])
        out["use_batched_per_s"] = 512 / (time.perf_counter() - started)
    one: dict[str, list[float]] = {"e5": [], "use": []}
    for question in questions[:100]:
        started = time.perf_counter()
        e5.embed_query(question)
        one["e5"].append(time.perf_counter() - started)
        if second is not None:
            started = time.perf_counter()
            second.embedder.embed_query(question)
            one["use"].append(time.perf_counter() - started)
    out["e5_query_p50_ms"] = 1000 * statistics.median(one["e5"])
    if one["use"]:
        out["use_query_p50_ms"] = 1000 * statistics.median(one["use"])
    bank.warm_up(user_id=USER)
    for question in questions[:10]:  # warm
        bank.search(question, 10, user_id=USER, record_access=False)
    times = []
    for question in questions[:queries]:
        started = time.perf_counter()
        bank.search(question, 10, user_id=USER, record_access=False)
        times.append(time.perf_counter() - started)
    out["search_p50_ms"] = 1000 * statistics.median(times)
    out["search_p95_ms"] = 1000 * _percentile(times, 0.95)
    held = bank._retriever._current(USER).second
    out["second_held_bytes_per_memory"] = 0.0 if held is None else held.nbytes / len(records)
    bank.close()
    out["disk_bytes_per_memory"] = _du(home) / len(records)
    second_file = home / "second-view"
    out["second_file_bytes_per_memory"] = (_du(second_file) if second_file.exists() else 0) / len(records)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def first_search(view: str, home: Path, question: str) -> float:
    """A new process: import, open the store, answer one search (seconds), as `vecmem search` does."""
    code = ("import time; t = time.perf_counter(); from vecmem import MemoryBank, Settings; "
            f"b = MemoryBank(Settings.from_env().with_changes(home={str(home)!r}, second_view={view!r})); "
            f"b.search({question!r}, 5, user_id={USER!r}, record_access=False); print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo's locomo10.json")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--views", nargs="+", default=["off", "use"])
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: one setting, its home
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.data, args.n, args.queries, args.home)))
        return 0
    results = {}
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-second-") as scratch:
        for view in args.views:
            home = Path(scratch) / view
            done = subprocess.run([sys.executable, __file__, "--one", view, "--home", str(home), "--data",
                                   str(args.data), "--n", str(args.n), "--queries", str(args.queries)],
                                  capture_output=True, text=True, check=True)
            results[view] = json.loads(done.stdout.strip().splitlines()[-1])
            _, questions = _corpus(args.data, 1)
            starts = [first_search(view, home, questions[i]) for i in range(args.starts)]
            results[view]["first_search_s"] = statistics.median(starts)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
