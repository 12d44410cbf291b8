"""`vecmem reindex` on a big store: memories/s, wall time, and whether every memory came through once.

    python scripts/bench_reindex.py                          # make bench-reindex: 100,000 memories
    python scripts/bench_reindex.py --n 20000 --kill-at 0.5  # SIGKILL the reindex halfway, then run it again

An embedded store in a temporary folder is filled with ``--n`` synthetic memories of ``--users`` users by one
fake model, then reindexed to another (a distinct name, another vector), each reindex in a child process as
`vecmem reindex` runs it (``MemoryBank.reindex``). With ``--kill-at F`` the first child is SIGKILLed once it
has re-embedded F of the store, and a second one resumes. The fake models hash words into vectors (the same
text, the same vector), so what is measured is vecmem's and Chroma's part (reading, staging, switching), not a
model's; a real model adds its own rate on top (``vecmem reindex`` prints the rate it reaches). Figures are
printed, never asserted; a count that does not match is an exit status of 1.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from vecmem import MemoryBank, MemoryRecord, Settings

_TOKEN = re.compile(r"[a-z0-9]+")
_WORDS = ("tea kestrel budget garden river lamp harbour violin ledger meadow copper orchard lantern "
          "quarry beacon thistle parcel summit willow falcon").split()


class HashedEmbedder:
    """Words hashed into ``dimension`` buckets with a per-model salt, L2-normalised: a fast, deterministic model."""

    def __init__(self, name: str, dimension: int = 384) -> None:
        self._name, self._dimension = name, dimension
        self.embedded = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self._dimension, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            digest = hashlib.blake2b(f"{self._name}/{token}".encode(), digest_size=8).digest()
            vector[int.from_bytes(digest[:4], "big") % self._dimension] += 1.0 if digest[4] % 2 else -1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else np.eye(1, self._dimension, dtype=np.float32)[0]

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(text) for text in texts])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += len(texts)
        return np.stack([self._vector(text) for text in texts]) if texts else np.zeros((0, self._dimension))


OLD, NEW = "bench-model-old", "bench-model-new"


def _records(n: int, users: int) -> Iterator[MemoryRecord]:
    for number in range(n):
        words = " ".join(_WORDS[(number * p) % len(_WORDS)] for p in (1, 3, 7, 11))
        yield MemoryRecord(id=f"m{number}", user_id=f"user-{number % users}", content=f"note {number}: {words}",
                           type=("fact", "preference", "instruction", "conclusion")[number % 4])


def _child(home: Path) -> None:
    """One reindex, as `vecmem reindex` runs it, printing ``done N`` as memories are re-embedded."""
    embedder, done = HashedEmbedder(NEW), 0

    def progress(count: int) -> None:
        nonlocal done
        done += count
        print(f"done {done}", flush=True)

    with MemoryBank(Settings(home=home), embedder=embedder, verify_model=False) as bank:
        bank.reindex(progress=progress)
    print(f"embedded {embedder.embedded}", flush=True)


def _reindex(home: Path, kill_after: int | None) -> tuple[float, int, bool]:
    """Run a reindex child (killed once ``kill_after`` memories are done); (seconds, embedded, killed)."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, __file__, "--child", str(home)], stdout=subprocess.PIPE, text=True)
    embedded, done = 0, 0
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("done "):
            done = int(line.split()[1])
            if kill_after is not None and done >= kill_after:
                child.send_signal(signal.SIGKILL)
                break
        elif line.startswith("embedded "):
            embedded = int(line.split()[1])
    code = child.wait()
    seconds = time.perf_counter() - started
    if kill_after is not None and code == -signal.SIGKILL:
        return seconds, done, True
    if code != 0:
        raise SystemExit(f"the reindex failed with exit status {code}")
    return seconds, embedded, False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories (default 100000)")
    parser.add_argument("--users", type=int, default=20, help="users the memories are spread over (default 20)")
    parser.add_argument("--kill-at", type=float, default=None, metavar="F",
                        help="SIGKILL the first reindex once this share of the store is done (0 < F < 1)")
    parser.add_argument("--home", type=Path, help="the store's folder (default: a temporary one)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child)
        return 0
    if args.n < 1 or args.users < 1 or not 1 <= args.users <= args.n:
        parser.error("--n and --users must be positive, and --users at most --n")
    if args.kill_at is not None and not 0 < args.kill_at < 1:
        parser.error("--kill-at must be between 0 and 1")
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-reindex-") as scratch:
        home = args.home or Path(scratch) / "home"
        started = time.perf_counter()
        with MemoryBank(Settings(home=home), embedder=HashedEmbedder(OLD)) as bank:
            report = bank.add_records(_records(args.n, args.users))
        print(f"built {report.added:,} memories of {args.users} users in {time.perf_counter() - started:.1f} s")
        runs = []
        if args.kill_at is not None:
            runs.append(_reindex(home, int(args.n * args.kill_at)))
        runs.append(_reindex(home, None))
        for number, (seconds, count, killed) in enumerate(runs, 1):
            what = f"killed after {count:,} memories re-embedded" if killed else f"embedded {count:,} memories"
            print(f"reindex run {number}: {what} in {seconds:.1f} s ({count / seconds:,.0f} memories/s)")
        total = sum(seconds for seconds, _, _ in runs)
        print(f"reindex of {args.n:,} memories: {total:.1f} s wall in all, {args.n / total:,.0f} memories/s")
        with MemoryBank(Settings(home=home), embedder=HashedEmbedder(NEW)) as bank:
            ids = [record.id for record in bank.export()]
            findings = bank.doctor().findings
        matches = len(ids) == len(set(ids)) == args.n
        print(f"after: {len(ids):,} memories, {len(set(ids)):,} distinct, model {bank.embedder.name}, "
              f"doctor {'clean' if not findings else [f.kind for f in findings]}: "
              f"{'the count matches' if matches else 'THE COUNT DOES NOT MATCH'}")
        return 0 if matches and not findings else 1


if __name__ == "__main__":
    sys.exit(main())
