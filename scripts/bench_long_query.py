"""What the longest query costs: one search of growing Chinese and English queries, with the default model.

    python scripts/bench_long_query.py [--runs 3]

A search reads at most MAX_QUERY_CHARS characters and embeds about one pass of the model of each text
(vecmem/retrieval/query/parsed.py), so its time is bounded whatever the text; this prints, for queries of 20,
500 and MAX_QUERY_CHARS characters, the median of ``--runs`` searches on a store of two memories, beside the load
average, and ``build_context`` with a message four times the query limit (retrieved for by its end). Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from vecmem import MemoryBank, Settings
from vecmem.retrieval.query.parsed import MAX_QUERY_CHARS

HAN = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经"
WORDS = "the memory of a long day at work when we shipped the release and then went home".split()


def chinese(size: int, draw: random.Random) -> str:
    return "".join(draw.choice(HAN) for _ in range(size))


def english(size: int, draw: random.Random) -> str:
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < size:
        words.append(draw.choice(WORDS))
    return " ".join(words)[:size]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="searches per size (default 3)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be positive")
    draw = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="vecmem-long-query-") as home:
        bank = MemoryBank(Settings.from_env().with_changes(home=Path(home)))
        bank.add("用户住在杭州", resolve=False)
        bank.add("The user lives in Hangzhou", resolve=False)
        bank.search("warm up 预热", 3)
        print(f"model {bank.embedder.name}, load average {os.getloadavg()[0]:.1f}")
        for language, make in (("Chinese", chinese), ("English", english)):
            for size in (20, 500, MAX_QUERY_CHARS):
                times = []
                for _ in range(args.runs):
                    query = make(size, draw)
                    started = time.perf_counter()
                    bank.search(query, 5)
                    times.append(time.perf_counter() - started)
                print(f"search, {size:>5,} {language} characters: {statistics.median(times):.2f} s")
        message = english(4 * MAX_QUERY_CHARS, draw)
        started = time.perf_counter()
        bank.build_context(message)
        print(f"build_context, a message of {len(message):,} characters: {time.perf_counter() - started:.2f} s")
        print(f"load average {os.getloadavg()[0]:.1f}")
        bank.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
