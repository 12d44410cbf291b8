"""What spelling variants (vecmem/retrieval/query/variants.py) cost a keyword search, at 5,000 and 100,000 memories.

The memories are LoCoMo turns, each given one made-up name of 6 to 9 letters, so the vocabulary grows with the
corpus (about as many distinct tokens as memories: more than real memories have, the pessimistic case). The
queries are LoCoMo questions, each with one word misspelled by a swap of two inner letters, so every query has
a word the index lacks. Reported: the index build, the first search that needs variants (it keys the
vocabulary, once per index generation), and the median search with and without the variant lookup.

    PYTHONPATH=. python scripts/bench_variants.py --data /work/shared/data/locomo/locomo10.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import time
from pathlib import Path

from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.retrieval.index.keyword import IndexedMemory, KeywordIndex
from vecmem.retrieval.query.tokenize import memory_tokens, terms
from vecmem.retrieval.query.variants import spelling_variants


def _misspelled(question: str, rng: random.Random) -> str:
    words = question.split()
    long = [i for i, word in enumerate(words) if len(word) >= 6 and word.isalpha()]
    if not long:
        return question
    i = rng.choice(long)
    word = words[i]
    j = rng.randrange(1, len(word) - 2)
    words[i] = word[:j] + word[j + 1] + word[j] + word[j + 2:]
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 100000])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    conversations = json.loads(args.data.read_text(encoding="utf-8"))
    turns = [f'{turn["speaker"]} said, "{turn["text"]}"' for c in conversations
             for key, session in c["conversation"].items() if key.startswith("session_") and isinstance(session, list)
             for turn in session]
    rng = random.Random(7)
    questions = [_misspelled(qa["question"], rng) for c in conversations for qa in c["qa"]]
    questions = rng.sample(questions, min(args.queries, len(questions)))
    for size in args.sizes:
        items = []
        for n in range(size):
            name = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 9))).capitalize()
            record = MemoryRecord(id=f"m{n}", content=f"{turns[n % len(turns)]} {name}", user_id="u")
            items.append((record.id, IndexedMemory.of(record, memory_tokens(record))))
        index = KeywordIndex()
        started = time.perf_counter()
        index.replace_all(items)
        built = time.perf_counter() - started
        snapshot = index.snapshot()
        view = snapshot.view(MemoryFilter())
        asked = [[terms(question)] for question in questions]
        parts = [[([token for _, token in worded[0]], 1.0)] for worded in asked]
        started = time.perf_counter()
        spelling_variants(snapshot, asked[0], parts[0])
        first = time.perf_counter() - started
        plain, widened, lookup = [], [], []
        for worded, part in zip(asked, parts, strict=True):
            started = time.perf_counter()
            snapshot.search(part, view, 50)
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            variants = spelling_variants(snapshot, worded, part)
            looked = time.perf_counter() - started
            snapshot.search(part, view, 50, variants.parts)
            widened.append(time.perf_counter() - started)
            lookup.append(looked)
        vocabulary = len(snapshot._df)
        print(f"{size} memories ({vocabulary} distinct tokens): index built in {built:.2f} s; "
              f"first search keying the vocabulary {1000 * first:.0f} ms; median search {1000 * statistics.median(plain):.2f} ms "
              f"without variants, {1000 * statistics.median(widened):.2f} ms with them (lookup median "
              f"{1000 * statistics.median(lookup):.2f} ms, p95 {1000 * sorted(lookup)[int(0.95 * len(lookup))]:.2f} ms)")


if __name__ == "__main__":
    main()
