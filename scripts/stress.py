"""Writers and searchers on one MemoryBank at once: every read must be one the store could have given.

Writer threads add, re-word, re-weigh, forget, supersede and restore memories; searcher threads search, build
contexts and list memories, and check every answer against what the store passed through:

* every memory returned belongs to the user searched, passes the filter asked for (live, not superseded,
  global or the session's own, of the types asked for), appears once, and there are at most k of them;
* every part of a hit's score (similarity, dense, keyword, recency, importance) lies in [0, 1];
* a memory's content is one that memory id had at some point (contents are recorded before they are written).

A refusal the bank is meant to give a racing writer (the memory was forgotten meanwhile, a supersession would
make a cycle, a restore of what is no longer superseded) is counted, not failed; any other exception fails
the run. Only the public API is used (``from vecmem import MemoryBank, Settings``), so the same script checks
any version of vecmem:

    .venv/bin/python scripts/stress.py --threads 8 --operations 3000
    PYTHONPATH=/path/to/another/tree .venv/bin/python scripts/stress.py

Exit status 0 when no exception and no inconsistency was seen, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import vecmem
from vecmem import InvalidInputError, MemoryBank, MemoryRecord, NotFoundError, Settings

# What the bank answers a writer that lost a race (a supersession that would now loop, a memory no longer
# pending). Older versions, which this script also runs against, said InvalidInputError for all of it.
ConflictError: type[Exception] = getattr(vecmem, "ConflictError", InvalidInputError)

USER = "alice"
OTHER_USER = "bob"  # writes too: none of it may ever reach alice's results
SESSIONS = ("s1", "s2")
TYPES = ("fact", "preference", "instruction", "conclusion")
WORDS = ("heron crane stork ibis egret swan goose duck teal wigeon tea coffee python rust docker shell "
         "editor neovim harbour river forest garden").split()
SEED = 150  # memories of each user before the threads start
_TOKEN = re.compile(r"[a-z0-9]+")


class StressEmbedder:
    """Bag of hashed words, L2-normalised (as the tests' FakeEmbedder): no model to load, deterministic."""

    name = "stress-hash-64"
    dimension = 64

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            digest = hashlib.sha256(token.encode()).digest()
            vector[digest[0] % self.dimension] += 1.0 if digest[1] % 2 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return vector / norm

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(text) for text in texts])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)


@dataclass
class Figures:
    operations: int = 0
    writes: int = 0
    refusals: int = 0  # refusals a racing writer is meant to get (NotFoundError, InvalidInputError, ConflictError)
    searches: int = 0  # searches, contexts and listings whose every result was checked
    results: int = 0  # memories returned and checked
    exceptions: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.exceptions and not self.violations

    def lines(self) -> list[str]:
        shown = [f"operations: {self.operations:,}", f"writes: {self.writes:,}",
                 f"refusals (expected races): {self.refusals:,}", f"searches checked: {self.searches:,}",
                 f"results checked: {self.results:,}", f"exceptions: {len(self.exceptions):,}",
                 f"inconsistencies: {len(self.violations):,}"]
        kinds = Counter(_kind(text) for text in self.exceptions)
        if kinds:
            shown.append("exceptions by type: " + ", ".join(f"{kind} {count}" for kind, count in kinds.most_common()))
        for kind in kinds:  # the end of the first trace of each kind: where it was raised
            first = next(text for text in self.exceptions if _kind(text) == kind)
            shown.append(f"first {kind}:\n" + "\n".join(first.strip().splitlines()[-7:]))
        shown.extend(f"inconsistency: {text}" for text in self.violations[:5])
        return shown


def _kind(trace: str) -> str:
    """The exception's type name, from the last line of its formatted trace."""
    return trace.strip().splitlines()[-1].split(":")[0]


class History:
    """Every content each memory id ever had (recorded before the write, so a search never sees it first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._contents: dict[str, set[str]] = {}
        self._ids: list[str] = []

    def will_have(self, memory_id: str, content: str) -> None:
        with self._lock:
            if memory_id not in self._contents:
                self._ids.append(memory_id)
            self._contents.setdefault(memory_id, set()).add(content)

    def had(self, memory_id: str, content: str) -> bool:
        with self._lock:
            return content in self._contents.get(memory_id, ())

    def pick(self, rng: random.Random) -> str:
        with self._lock:
            return rng.choice(self._ids)


class Stress:
    """One run: writer and searcher threads on ``bank`` until ``operations`` are done or ``seconds`` pass."""

    def __init__(self, bank: MemoryBank, *, threads: int, operations: int, seconds: float, seed: int = 7) -> None:
        self.bank = bank
        self.threads = max(2, threads)
        self.operations = operations
        self.seconds = seconds
        self.deadline = 0.0  # set once the memories are stocked
        self.seed = seed
        self.history = History()
        self.figures = Figures()
        self._lock = threading.Lock()
        self._started = 0

    def run(self) -> Figures:
        self._stock()
        self.deadline = time.monotonic() + self.seconds
        writers = max(1, self.threads // 4)  # the bank takes one write at a time: a few writers keep it busy
        workers = [threading.Thread(target=self._work, args=(i, i < writers), name=f"stress-{i}")
                   for i in range(self.threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return self.figures

    def _stock(self) -> None:
        """The memories the run starts from, one batched write per user (adding them one by one takes seconds)."""
        rng = random.Random(self.seed)
        records = []
        for user in (USER, OTHER_USER):
            for i in range(SEED):
                content = f"{user} {self._sentence(rng)} {i}"
                memory_id = f"{user}-seed-{i}"
                self.history.will_have(memory_id, content)
                records.append(MemoryRecord(id=memory_id, content=content, user_id=user, type=rng.choice(TYPES),
                                            scope=rng.choice(("global", "global", *SESSIONS)),
                                            importance=round(rng.random(), 2)))
        self.bank.add_records(records)

    @staticmethod
    def _sentence(rng: random.Random) -> str:
        return " ".join(rng.choices(WORDS, k=rng.randint(3, 7)))

    def _next(self) -> bool:
        with self._lock:
            if self._started >= self.operations or time.monotonic() > self.deadline:
                return False
            self._started += 1
            self.figures.operations += 1
            return True

    def _work(self, number: int, writing: bool) -> None:
        rng = random.Random(self.seed * 1000 + number)
        step = 0
        while self._next():
            step += 1
            try:
                if writing:
                    self._write(rng, f"w{number}-{step}")
                else:
                    self._read(rng)
            except (NotFoundError, InvalidInputError, ConflictError):
                with self._lock:
                    self.figures.refusals += 1
            except Exception:  # noqa: BLE001  # the point: any other exception fails the run, with its trace
                with self._lock:
                    self.figures.exceptions.append(traceback.format_exc())

    # ------------------------------------------------------------------------------------------ writers

    def _write(self, rng: random.Random, fresh_id: str) -> None:
        bank, history = self.bank, self.history
        kind = rng.choices(("add", "content", "importance", "forget", "supersede", "restore"), (3, 5, 1, 1, 1, 1))[0]
        if kind == "add":
            user = USER if rng.random() < 0.8 else OTHER_USER
            content = f"{user} {self._sentence(rng)} {fresh_id}"
            history.will_have(fresh_id, content)
            bank.add(content, user_id=user, memory_id=fresh_id, memory_type=rng.choice(TYPES),
                     session_id=rng.choice((None, *SESSIONS)), importance=round(rng.random(), 2),
                     resolve=False)  # the writes this script tracks, as given
        else:
            memory_id = history.pick(rng)
            user = OTHER_USER if memory_id.startswith(OTHER_USER) else USER
            if kind == "content":
                content = f"{user} {self._sentence(rng)} {fresh_id}"
                history.will_have(memory_id, content)
                bank.update(memory_id, user_id=user, content=content)
            elif kind == "importance":
                bank.update(memory_id, user_id=user, importance=round(rng.random(), 2))
            elif kind == "forget":
                bank.forget(memory_id, user_id=user)
            elif kind == "supersede":
                bank.supersede(memory_id, history.pick(rng), user_id=user)
            else:
                bank.restore(memory_id, user_id=user)
        with self._lock:
            self.figures.writes += 1

    # ------------------------------------------------------------------------------------------ searchers

    def _read(self, rng: random.Random) -> None:
        query = self._sentence(rng) if rng.random() < 0.9 else f"{self._sentence(rng)}\n{self._sentence(rng)}"
        session = rng.choice((None, *SESSIONS))
        types = None if rng.random() < 0.6 else sorted(rng.sample(TYPES, rng.randint(1, 3)))
        k = rng.randint(1, 12)
        kind = rng.choices(("search", "context", "list"), (6, 2, 1))[0]
        if kind == "search":
            hits = self.bank.search(query, k, user_id=USER, session_id=session, types=types,
                                    record_access=rng.random() < 0.5)
            self._check(f"search {query!r} k={k} session={session} types={types}", hits, k, session, types)
        elif kind == "context":
            pack = self.bank.build_context(query, user_id=USER, session_id=session, k=k, types=types)
            self._check(f"context {query!r} k={k} session={session}", pack.memories, k, session, types)
        else:
            records = self.bank.list_memories(user_id=USER, session_id=session, types=types, limit=k)
            self._check_records(f"list session={session} types={types}", records, k, session, types)
        with self._lock:
            self.figures.searches += 1

    def _check(self, asked: str, hits: Sequence[Any], k: int, session: str | None, types: Any) -> None:
        problems = []
        for hit in hits:
            if hit.content != hit.record.content:
                problems.append(f"{hit.id}: the hit's content is not its record's")
            for part in ("score", "similarity", "recency", "importance", "dense", "keyword"):
                value = getattr(hit, part)
                if value is not None and not (0.0 <= value <= 1.0 + 1e-9):
                    problems.append(f"{hit.id}: {part} {value} outside [0, 1]")
        problems += self._record_problems([hit.record for hit in hits], k, session, types, every_session=False)
        self._report(asked, problems, len(hits))

    def _check_records(self, asked: str, records: Sequence[Any], k: int, session: str | None, types: Any) -> None:
        # a listing without a session shows every session's memories; a search without one, only global ones
        problems = self._record_problems(records, k, session, types, every_session=session is None)
        self._report(asked, problems, len(records))

    def _record_problems(self, records: Sequence[Any], k: int, session: str | None, types: Any, *,
                         every_session: bool) -> list[str]:
        problems = [f"{len(records)} results for k={k}"] if len(records) > k else []
        ids = [record.id for record in records]
        if len(set(ids)) != len(ids):
            problems.append(f"an id returned twice: {ids}")
        for record in records:
            if record.user_id != USER:
                problems.append(f"{record.id}: belongs to {record.user_id!r}")
            if record.superseded_by is not None or record.status != "live":
                problems.append(f"{record.id}: not live (superseded_by={record.superseded_by}, {record.status})")
            if not every_session and record.scope not in ("global", session):
                problems.append(f"{record.id}: scope {record.scope!r} outside session {session!r}")
            if types is not None and record.type not in types:
                problems.append(f"{record.id}: type {record.type} not among {types}")
            if not self.history.had(record.id, record.content):
                problems.append(f"{record.id}: content {record.content!r} it never had")
        return problems

    def _report(self, asked: str, problems: list[str], count: int) -> None:
        with self._lock:
            self.figures.results += count
            if problems:
                self.figures.violations.append(f"{asked}:\n  " + "\n  ".join(problems))


def stress(bank: MemoryBank, *, threads: int = 8, operations: int = 3000, seconds: float = 15.0,
           seed: int = 7) -> Figures:
    """Run writers and searchers on ``bank`` (a fresh one: the run writes users "alice" and "bob")."""
    return Stress(bank, threads=threads, operations=operations, seconds=seconds, seed=seed).run()


def main(argv: list[str] | None = None, make_bank: Callable[[Path], MemoryBank] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8, help="threads, a quarter writing, the rest searching")
    parser.add_argument("--operations", type=int, default=3000, help="operations in all threads together")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop after this long even if not done")
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vecmem-stress-") as folder:
        home = Path(folder) / "home"
        bank = make_bank(home) if make_bank else MemoryBank(Settings(home=home), embedder=StressEmbedder())
        started = time.monotonic()
        try:
            figures = stress(bank, threads=options.threads, operations=options.operations, seconds=options.seconds,
                             seed=options.seed)
        finally:
            bank.close()
    print(f"vecmem: {Path(vecmem.__file__).parent}")
    print("\n".join(figures.lines()))
    print(f"seconds: {time.monotonic() - started:.1f}")
    print("PASSED" if figures.passed else "FAILED")
    return 0 if figures.passed else 1


if __name__ == "__main__":
    sys.exit(main())
