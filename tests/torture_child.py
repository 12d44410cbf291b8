"""The other side of test_torture.py, run as its own process.

``write KIND HOME ROUND``: a writer of one kind, run until killed, printing one flushed line after each
acknowledged write: ``ack USER ID`` (a memory stored), ``sup OLD NEW`` (OLD superseded by NEW), ``start USER`` and
``forgot USER`` (around a ``forget_all``), ``reindexed``. Kinds: add, import, supersede, forget_all, reindex.
``fill HOME``: write 1,300 memories of MAIN (collections of their own, 1,200 of them facts) and 150 of each of
eight small users of one shared collection, then exit: more than Chroma's 1,000 rows a collection that it
keeps in its log before writing them to the HNSW segment. ``check HOME``: open the store (which settles what the kill left), search, examine it with the doctor, and print
what it holds as one JSON line.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from tests.conftest import FakeEmbedder
from vecmem import MemoryBank, MemoryRecord, Settings
from vecmem.storage.chroma.shared import shared_name

MAIN = "torture-user"
TYPES = ("fact", "preference", "instruction", "conclusion")
IMPORT_SIZE = 1_500  # more than a round writes before its kill, at most
DEDICATED_AT = 200  # low, so that users move between layouts inside writes the test kills


def bank(home: Path) -> MemoryBank:
    return MemoryBank(Settings(home=home, dedicated_at=DEDICATED_AT), embedder=FakeEmbedder(dimension=32))


def say(line: str) -> None:
    print(line, flush=True)


def text(tag: str, number: int) -> str:
    return f"note {tag} {number} about kestrels, budgets and tide tables {number % 13}"


def add_forever(target: MemoryBank, round_number: int) -> None:
    for number in range(10**9):
        memory_id = f"a{round_number}-{number}"
        target.add(text("add", number), memory_id=memory_id, user_id=MAIN, memory_type=TYPES[number % 4],
                   resolve=False)
        say(f"ack {MAIN} {memory_id}")


def import_until_killed(target: MemoryBank, round_number: int) -> None:
    """New memories, and (every other round) earlier imports again with another type: a memory whose type
    changes moves between collections, which a kill can catch half-way."""
    retyped = [r for r in target.export(user_id=MAIN) if r.id.startswith("i")][:IMPORT_SIZE // 2]
    records = [r.with_changes(type=TYPES[(TYPES.index(r.type) + 1) % 4]) for r in retyped] if round_number % 2 else []
    records += [MemoryRecord(id=f"i{round_number}-{n}", content=text("import", n), type=TYPES[n % 4], user_id=MAIN,
                             scope="global" if n % 3 else f"s{n % 5}") for n in range(IMPORT_SIZE)]
    ids = [r.id for r in records]

    def progress(done: int) -> None:
        for memory_id in ids[progress.said:done]:  # type: ignore[attr-defined]
            say(f"ack {MAIN} {memory_id}")
        progress.said = done  # type: ignore[attr-defined]

    progress.said = 0  # type: ignore[attr-defined]
    target.add_records(records, overwrite=True, progress=progress)
    say("done")


def supersede_forever(target: MemoryBank, round_number: int) -> None:
    previous = None
    for number in range(10**9):
        memory_id = f"s{round_number}-{number}"
        target.add(text("chain", number), memory_id=memory_id, user_id=MAIN, resolve=False)
        say(f"ack {MAIN} {memory_id}")
        if previous is not None:
            target.supersede(previous, memory_id, user_id=MAIN)
            say(f"sup {previous} {memory_id}")
        previous = memory_id


def forget_all_forever(target: MemoryBank, round_number: int) -> None:
    for number in range(10**9):
        user = f"doomed-{round_number}-{number}"
        target.add_records(MemoryRecord(id=f"d{n}", content=text("doomed", n), type=TYPES[n % 4], user_id=user)
                           for n in range(40))
        for n in range(40):
            say(f"ack {user} d{n}")
        target.search("kestrels budgets", 5, user_id=user)  # access statistics, which forget_all deletes too
        say(f"start {user}")
        target.forget_all(user)
        say(f"forgot {user}")


def reindex_forever(target: MemoryBank, round_number: int) -> None:
    while True:
        target.reindex()
        say("reindexed")


WRITERS = {"add": add_forever, "import": import_until_killed, "supersede": supersede_forever,
           "forget_all": forget_all_forever, "reindex": reindex_forever}


class _Settled(logging.Handler):
    """Counts the recovery's log lines."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "left unfinished" in record.getMessage() or "rebuilt" in record.getMessage():
            self.lines.append(record.getMessage())


def check(home: Path) -> None:
    settled = _Settled()
    logging.getLogger("vecmem").addHandler(settled)
    with bank(home) as store:
        users = store.users()
        held = {user: [(r.id, r.superseded_by) for r in store.export(user_id=user)] for user in users}
        hits = store.search("kestrels budgets", 5, user_id=MAIN, record_access=False) if MAIN in users else []
        report = store.doctor()
        vectors = {user: sum(len(ids) for ids, _ in store._store.scan_vectors(user)) for user in users}
        say(json.dumps({
            "memories": {user: {memory_id: superseded_by for memory_id, superseded_by in rows}
                         for user, rows in held.items()},
            "duplicates": {user: len(rows) - len({memory_id for memory_id, _ in rows}) for user, rows in held.items()},
            "hits": len(hits),
            "vectors": vectors,  # every memory's vector read back
            "findings": [finding.to_dict() for finding in report.findings],
            "recovery": settled.lines,
        }))


SMALL = "small-user"
FILLED = 1_300


def small_users() -> list[str]:
    """SMALL and seven more users whose memories go to the same shared collection."""
    bucket = shared_name("m", 1, SMALL)
    return [SMALL, *[user for user in (f"small-{n}" for n in range(500)) if shared_name("m", 1, user) == bucket][:7]]


def fill(home: Path) -> None:
    with bank(home) as target:
        target.add_records(MemoryRecord(id=f"f{n}", content=text("fill", n), type="fact" if n < 1_200 else
                                        TYPES[n % 4], user_id=MAIN) for n in range(FILLED))
        target.add_records(MemoryRecord(id=f"f{n}", content=text("small", n), type=TYPES[n % 4], user_id=user)
                           for user in small_users() for n in range(150))


if __name__ == "__main__":
    command, home = sys.argv[1], Path(sys.argv[3] if sys.argv[1] == "write" else sys.argv[2])
    if command == "write":
        with bank(home) as opened:
            say("ready")
            WRITERS[sys.argv[2]](opened, int(sys.argv[4]))
    elif command == "fill":
        fill(home)
    else:
        check(home)
