"""The speed targets of a model, for ``scripts/bench.py --targets`` (issue 25, item 6):

(a) ingest as a share of the model's own batched rate (``embed_documents`` alone, in vecmem's batches, on the
    same texts, measured before and after the ingest and averaged: a shared machine's load drifts);
(b) warm search p95 as a multiple of one query's embedding (the p50 of ``embed_query``);
(c) a new process's first search of a user with ``FIRST_SEARCH_SIZE`` memories (a user added for it);
(d) ``vecmem search`` from the shell on a small store (``vecmem seed``) with no owner process: the first run with
    an empty model cache (the model's calibration measured and cached) and the median of the cached runs, with
    each run's peak RSS and whether it imported a heavy ML runtime.

A big corpus cannot be embedded for real in a bench run with a slow model (100,000 memories take about 25
minutes with multilingual-e5-small on 2 cores), so ``--embed-sample M`` embeds only the first M memories for
real (those give (a)); the rest, and the (c) user, get synthesized vectors: a real vector of the sample plus
Gaussian noise, its cosine with that vector about ``NEIGHBOUR_COSINE``, as bench_ann.py makes its larger sizes.
Queries are always embedded for real. The output says how many vectors were synthesized.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vecmem import MemoryBank

__all__ = ["FIRST_SEARCH_SIZE", "FIRST_SEARCH_USER", "SynthesizedEmbedder", "add_synthesized", "model_rate",
           "small_store_cli"]

FIRST_SEARCH_USER = "first-search"
FIRST_SEARCH_SIZE = 20_000
NEIGHBOUR_COSINE = 0.8
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers", "onnxruntime")
CLI_QUERY = "write me a sleep function"
# `python -m vecmem ARGS` that prints its own peak RSS when it exits: the kernel's figure for a child (wait4) starts
# from the parent's size at fork, and this bench holds hundreds of MB
PEAK_REPORTING = ("import atexit, runpy, sys\n"
                  "def peak():\n"
                  "    for line in open('/proc/self/status'):\n"
                  "        if line.startswith('VmHWM:'):\n"
                  "            print('vecmem-bench-peak-kb', line.split()[1], file=sys.stderr)\n"
                  "atexit.register(peak)\n"
                  "sys.argv = ['vecmem', *sys.argv[1:]]\n"
                  "runpy.run_module('vecmem', run_name='__main__', alter_sys=True)\n")


def model_rate(embedder: Any, texts: Sequence[str], batch_size: int) -> tuple[float, np.ndarray]:
    """The model's own throughput in vecmem's batches (memories per second), and the vectors it made."""
    started = time.perf_counter()
    vectors = [embedder.embed_documents(texts[start : start + batch_size]) for start in range(0, len(texts), batch_size)]
    return len(texts) / (time.perf_counter() - started), np.concatenate(vectors)


class SynthesizedEmbedder:
    """Documents get a vector of ``pool`` plus noise; queries go to the real model."""

    def __init__(self, inner: Any, pool: np.ndarray, seed: int) -> None:
        self._inner = inner
        self._pool = np.asarray(pool, dtype=np.float32)
        self._rng = np.random.default_rng(seed)
        self._noise = math.sqrt((1 / NEIGHBOUR_COSINE**2 - 1) / self._pool.shape[1])
        self.synthesized = 0

    @property
    def name(self) -> str:
        return str(self._inner.name)

    @property
    def dimension(self) -> int:
        return int(self._inner.dimension)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self._inner.embed_query(text))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._inner.embed_queries(texts))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        base = self._pool[self._rng.integers(0, len(self._pool), len(texts))]
        vectors = base + self._rng.normal(0.0, self._noise, base.shape).astype(np.float32)
        self.synthesized += len(texts)
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def add_synthesized(settings: Any, embedder: Any, pool: np.ndarray, seed: int, records: Sequence[Any]) -> dict[str, Any]:
    """Store ``records`` through a bank whose embedder synthesizes their vectors from ``pool``; how many were
    synthesized and how fast, for the report."""
    filler = SynthesizedEmbedder(embedder, pool, seed)
    with MemoryBank(settings, embedder=filler) as writer:
        started = time.perf_counter()
        writer.add_records(records)
        seconds = time.perf_counter() - started
    return {"memories": filler.synthesized, "seconds": round(seconds, 1), "per_second": round(len(records) / seconds, 1)}


def _cli_env(home: Path, cache: Path, model: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VECMEM_", "OPENAI_"))}
    # an installed vecmem has its bytecode compiled; without it every start compiles ~70 modules (a quarter second)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(VECMEM_HOME=str(home), VECMEM_MODEL_CACHE=str(cache), HF_HUB_OFFLINE="1")
    if model:
        env["VECMEM_EMBED_MODEL"] = model
    return env


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds and stderr of one command."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv[1:])} failed: {done.stderr.strip()[-500:]}")
    return wall, done.stderr


def small_store_cli(model: str | None, runs: int) -> dict[str, Any]:
    """(d): `vecmem search` on a seeded store from the shell, no owner process."""
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-cli-") as folder:
        home, seeding_cache, cache = Path(folder) / "home", Path(folder) / "seed-cache", Path(folder) / "cache"
        search = [sys.executable, "-m", "vecmem", "search", CLI_QUERY]
        _run([sys.executable, "-m", "vecmem", "seed"], _cli_env(home, seeding_cache, model))
        env = _cli_env(home, cache, model)  # an empty cache: the first search measures the calibration
        first, _ = _run(search, env)
        walls = [_run(search, env)[0] for _ in range(runs)]
        # untimed: the same search once more, reporting its peak RSS and every module it imported
        _, err = _run([sys.executable, "-X", "importtime", "-c", PEAK_REPORTING, *search[3:]], env)
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if line.startswith("import time:")}
    peak_kb = next(int(line.split()[1]) for line in err.splitlines() if line.startswith("vecmem-bench-peak-kb"))
    return {"first_ever_s": round(first, 2), "cached_median_s": round(statistics.median(walls), 2),
            "cached_min_s": round(min(walls), 2), "cached_max_s": round(max(walls), 2), "runs": runs,
            "peak_rss_mb": round(peak_kb / 1024),
            "heavy_modules_imported": sorted(m for m in HEAVY_MODULES if m in imported)}
